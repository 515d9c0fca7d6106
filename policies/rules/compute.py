"""node-disks-encrypted-imdsv2: GPU nodes' disks are encrypted, AWS metadata needs IMDSv2.

Checkpoints and datasets land on the node's disks; an unencrypted EBS volume or launch-template
disk keeps them readable in snapshots. IMDSv1 answers any GET from the node (an SSRF in the
training code hands out the role's credentials); IMDSv2 requires a session token.
GCP and Azure encrypt disks at rest always; their metadata services already need a header.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.rules.model import UNKNOWN, Settings, as_list, is_true, prop_at
from policies.rules.resource_types import AWS_INSTANCE, AWS_LAUNCH_TEMPLATE

AWS_EBS_VOLUME = "aws:ebs/volume:Volume"


def _unencrypted(value: Any) -> bool:
    return value is not UNKNOWN and not is_true(value)


def node_hardening_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """EBS volumes and launch-template/instance disks encrypted; IMDSv2 required."""
    problems: list[str] = []
    if resource_type == AWS_EBS_VOLUME and _unencrypted(props.get("encrypted")):
        problems.append("EBS volume is not encrypted — set encrypted: true")
    if resource_type == AWS_LAUNCH_TEMPLATE:
        for mapping in as_list(props.get("blockDeviceMappings")):
            ebs = prop_at(mapping, "ebs")
            if isinstance(ebs, Mapping) and _unencrypted(ebs.get("encrypted")):
                device = prop_at(mapping, "deviceName") or "a disk"
                problems.append(
                    f"launch template disk {device} is not encrypted — set ebs.encrypted: 'true'"
                )
    if resource_type == AWS_INSTANCE:
        root = props.get("rootBlockDevice")
        if isinstance(root, Mapping) and _unencrypted(root.get("encrypted")):
            problems.append("root disk is not encrypted — set rootBlockDevice.encrypted: true")
        for disk in as_list(props.get("ebsBlockDevices")):
            if isinstance(disk, Mapping) and _unencrypted(disk.get("encrypted")):
                problems.append("an EBS disk is not encrypted — set encrypted: true")
    if resource_type in (AWS_LAUNCH_TEMPLATE, AWS_INSTANCE):
        tokens = prop_at(props, "metadataOptions", "httpTokens")
        endpoint = prop_at(props, "metadataOptions", "httpEndpoint")
        if tokens is not UNKNOWN and endpoint != "disabled" and tokens != "required":
            problems.append(
                "instance metadata allows IMDSv1 — set metadataOptions.httpTokens: required"
            )
    return problems
