"""Azure: the nodes of a VM scale set (a stack's `groupId`, Flexible orchestration), from
virtualMachineScaleSets.get and virtualMachines.list filtered to the scale set with
`$expand=instanceView`.

A Spot VM Azure evicts is deallocated (`PowerState/deallocated`, eviction policy Deallocate) or
deleted with its disks (policy Delete, what components/azure.py sets): then it is simply
missing, and the scale set has fewer VMs than its capacity. Either counts as lost. A deallocated
Spot VM is an eviction (the nodes never deallocate themselves). A missing one is not proof of
one: a node also deletes itself after its job ends (components/node_scripts.py self_delete_lines),
crashed or not, so a missing VM is lost with its cause unknown, and the node's exit record
(router/core/node_exit.py) tells the router which it was.
"""

from __future__ import annotations

import re
from typing import Any

from router.core.errors import BadInput, CredentialsMissing, OperationFailed
from router.nodes.node_state import LOST, RUNNING, STARTING, Node, NodeState

GROUP_ID = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/"
    r"Microsoft\.Compute/virtualMachineScaleSets/(?P<name>[^/]+)$",
    re.IGNORECASE,
)
EVICTED_POWER = {"PowerState/deallocated", "PowerState/deallocating", "PowerState/stopped"}
NO_CREDENTIALS = (
    "Azure credentials not found — run `az login` so route watch can see whether the cloud "
    "evicted the job's Spot nodes"
)


def poll(group_id: str, region: str, *, compute: Any = None) -> NodeState:
    """The scale set's nodes now; `compute` is a ComputeManagementClient (default: az login)."""
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ResourceNotFoundError,
    )

    match = GROUP_ID.match(group_id)
    if match is None:
        raise BadInput(
            f"groupId {group_id!r}: not an Azure VM scale set id — expected /subscriptions/S/"
            "resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/NAME"
        )
    rg, name = match["rg"], match["name"]
    client = compute if compute is not None else _client(match["sub"])
    try:
        scale_set = client.virtual_machine_scale_sets.get(rg, name)
        vms = list(
            client.virtual_machines.list(
                rg, filter=f"'virtualMachineScaleSet/id' eq '{group_id}'", expand="instanceView"
            )
        )
    except ResourceNotFoundError:
        return NodeState("azure", group_id, 0, gone=True)
    except ClientAuthenticationError:
        raise CredentialsMissing(NO_CREDENTIALS) from None
    except HttpResponseError as exc:
        code = exc.error.code if exc.error is not None else exc.status_code
        raise OperationFailed(
            f"azure {region}: cannot read scale set {name}: {code} (route watch needs "
            "Microsoft.Compute/virtualMachineScaleSets/read and virtualMachines/read)"
        ) from None
    profile = scale_set.virtual_machine_profile
    spot = _text(getattr(profile, "priority", None)) == "spot"
    wanted = int(scale_set.sku.capacity or 0) if scale_set.sku is not None else 0
    nodes = tuple(_node(vm, spot) for vm in vms)
    missing = wanted - len(nodes)
    if missing > 0 and spot and _text(getattr(profile, "eviction_policy", None)) == "delete":
        # Evicted with policy Delete, or deleted by itself after its job: gone either way.
        gone = Node(f"{name} ({missing} missing)", LOST,
                    "missing: evicted (policy Delete) or deleted itself after its job")
        nodes = nodes + (gone,) * missing
    return NodeState("azure", group_id, wanted, nodes)


def _node(vm: Any, spot: bool) -> Node:
    view = getattr(vm, "instance_view", None)
    codes = [str(s.code) for s in (getattr(view, "statuses", None) or []) if s.code]
    power = next((c for c in codes if c.startswith("PowerState/")), "")
    provisioning = next((c for c in codes if c.startswith("ProvisioningState/")), "")
    detail = ", ".join(c for c in (power, provisioning) if c) or "no instance view"
    if power == "PowerState/running":
        return Node(str(vm.name), RUNNING, detail)
    if power in ("", "PowerState/starting") and "failed" not in provisioning:
        return Node(str(vm.name), STARTING, detail)
    return Node(str(vm.name), LOST, detail, reclaimed=spot and power in EVICTED_POWER)


def _text(value: Any) -> str:
    """An SDK enum (a str Enum: str() gives its name) or plain string, lowercased."""
    return str(getattr(value, "value", value) or "").lower()


def _client(subscription: str) -> Any:
    from azure.identity import DefaultAzureCredential
    from azure.mgmt.compute import ComputeManagementClient

    return ComputeManagementClient(DefaultAzureCredential(), subscription)
