"""Each cloud's node start-up script (AWS user data, GCP startup-script metadata, Azure custom
data) from a group's Args, and the check that the cloud would accept its size.

Pure: no Pulumi, no cloud SDK, so the router can ask before anything exists (`route plan`,
`route deploy`: router/flows/startup_size.py) and the cloud modules render the same text inside
their outputs. `check_group_script` renders with the longest values the stack's own outputs may
take (a 63-character bucket, the job's 999th stack, the longest secret names), so a script that
passes here passes with the real ones; the cloud modules check the real script once more.
"""

from __future__ import annotations

import re
from dataclasses import replace

from components.args import SpotGpuGroupArgs
from components.aws_names import secret_parameter_name
from components.fabric import group_fabric
from components.node_exit import aws_exit_channel, azure_exit_channel, gcp_exit_channel
from components.rendezvous import aws_rendezvous, azure_rendezvous, gcp_rendezvous
from components.startup import (
    SHUTDOWN_GRACE_MIN,
    SecretChannel,
    aws_secret_channel,
    azure_secret_channel,
    check_script_size,
    gcp_secret_channel,
    render_startup_script,
)

# Where each cloud's size limit sits (components/provider_rules/<cloud>.toml [[size]] rows).
SCRIPT_FIELD = {
    "aws": ("aws:ec2/launchTemplate:LaunchTemplate", "userData"),
    "gcp": ("gcp:compute/instanceTemplate:InstanceTemplate", "metadata.startup-script"),
    "azure": (
        "azure-native:compute:VirtualMachineScaleSet",
        "virtualMachineProfile.osProfile.customData",
    ),
}
SECRET_ID_LIMIT = 255  # a Secret Manager secret id

# Azure: guest `shutdown` leaves a VM "Stopped (Allocated)", billed like a running one; so after
# the grace period the node deletes itself through ARM with its own identity (from IMDS).
# The identity is named by its client id in the script itself, never through ${AZURE_CLIENT_ID}:
# run.env may set that variable for the job's own use, and the delete must still use the node's.
COMPUTE_API_VERSION = "2024-07-01"
IMDS = "http://169.254.169.254/metadata"
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
PLACEHOLDER_CLIENT_ID = "00000000-0000-4000-8000-000000000000"


def self_delete_lines(client_id: str) -> tuple[str, ...]:
    """The finish lines of an Azure node: wait the grace period, then DELETE its own VM through
    ARM with the token of the managed identity `client_id` (the job identity's client id)."""
    if not _GUID.fullmatch(client_id):
        raise ValueError(f"client_id: {client_id!r} is not a managed identity's client id (GUID)")
    return (
        f"sleep {SHUTDOWN_GRACE_MIN * 60}",
        "token=$(curl -sS -H Metadata:true "
        f'"{IMDS}/identity/oauth2/token?api-version=2018-02-01'
        f'&resource=https%3A%2F%2Fmanagement.azure.com%2F&client_id={client_id}"'
        r""" | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p')""",
        "vm=$(curl -sS -H Metadata:true "
        f'"{IMDS}/instance/compute/resourceId?api-version=2021-02-01&format=text")',
        'echo "spotroute: deleting $vm so it stops billing"',
        'curl -sS --fail -X DELETE -H "Authorization: Bearer $token" '
        f'"https://management.azure.com${{vm}}?api-version={COMPUTE_API_VERSION}" '
        "|| { echo 'spotroute: self-delete failed; powering off (an allocated VM still bills)'; "
        "shutdown -h now; }",
    )


def aws_script(
    args: SpotGpuGroupArgs, placement: str, checkpoint_url: str, secrets: SecretChannel | None
) -> str:
    """An AWS node's start-up script (user data before base64); ScriptTooLarge past EC2's limit."""
    fabric = group_fabric("aws", args.instance_types, args.node_count)
    script = render_startup_script(
        args.job_name,
        checkpoint_url,
        args.job,
        node_count=args.node_count,
        notice_source="aws",
        placement=placement,
        secrets=secrets,
        rendezvous=aws_rendezvous(args.region),
        fabric=fabric.docker_options(),
        fabric_env=fabric.nccl_env,
        exit_record=aws_exit_channel(args.region),
    )
    return check_script_size("aws", *SCRIPT_FIELD["aws"], script, args.job)


def gcp_script(
    args: SpotGpuGroupArgs, placement: str, checkpoint_url: str, secrets: SecretChannel | None
) -> str:
    """A GCP node's start-up script (metadata startup-script); ScriptTooLarge past GCE's limit
    on one metadata value."""
    fabric = group_fabric("gcp", args.instance_types[:1], args.node_count)
    script = render_startup_script(
        args.job_name,
        checkpoint_url,
        args.job,
        node_count=args.node_count,
        notice_source="gcp",
        placement=placement,
        secrets=secrets,
        rendezvous=gcp_rendezvous(),
        fabric_env=fabric.nccl_env,
        exit_record=gcp_exit_channel(),
    )
    return check_script_size("gcp", *SCRIPT_FIELD["gcp"], script, args.job)


def azure_script(
    args: SpotGpuGroupArgs,
    placement: str,
    checkpoint_url: str,
    client_id: str,
    secrets: SecretChannel | None,
) -> str:
    """An Azure node's start-up script (custom data before base64) for the job identity
    `client_id`; ScriptTooLarge past Azure's custom data limit."""
    # The scale set's ND VMs share its InfiniBand fabric; the containers need the devices.
    fabric = group_fabric("azure", args.instance_types[:1], args.node_count)
    # azure-identity (DefaultAzureCredential, adlfs) picks the node's identity by this.
    command = replace(args.job, env={"AZURE_CLIENT_ID": client_id, **args.job.env})
    script = render_startup_script(
        args.job_name,
        checkpoint_url,
        command,
        finish=self_delete_lines(client_id),
        node_count=args.node_count,
        notice_source="azure",
        placement=placement,
        secrets=secrets,
        rendezvous=azure_rendezvous(client_id),
        fabric=fabric.docker_options(),
        fabric_env=fabric.nccl_env,
        exit_record=azure_exit_channel(client_id),
    )
    return check_script_size("azure", *SCRIPT_FIELD["azure"], script, args.job)


def check_group_script(cloud: str, args: SpotGpuGroupArgs) -> str:
    """The group's script rendered with the longest values its stack's outputs may take: it
    validates the job's fields (env names, reserved keys, empty commands, secret names) and
    raises ScriptTooLarge when the cloud would refuse its size. Returns it."""
    placement = f"{args.job_name}.999"
    secrets = bool(args.job.secret_names)
    if cloud == "aws":
        parameter = f"{secret_parameter_name(placement)}:999"
        channel = aws_secret_channel(parameter, args.region) if secrets else None
        return aws_script(args, placement, f"s3://{'b' * 63}/{args.job_name}/", channel)
    if cloud == "gcp":
        version = f"projects/{'p' * 30}/secrets/{'s' * SECRET_ID_LIMIT}/versions/999"
        channel = gcp_secret_channel(version) if secrets else None
        return gcp_script(args, placement, f"gs://{'b' * 63}/{args.job_name}/", channel)
    if cloud == "azure":
        client = PLACEHOLDER_CLIENT_ID
        vault = f"https://{'v' * 24}.vault.azure.net/secrets/{'s' * 127}/{'0' * 32}"
        channel = azure_secret_channel(vault, client) if secrets else None
        url = f"https://{'a' * 24}.blob.core.windows.net/{'c' * 63}/{args.job_name}/"
        return azure_script(args, placement, url, client, channel)
    raise ValueError(f"cloud {cloud!r} has no node start-up script here — aws, gcp or azure")
