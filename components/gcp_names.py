"""Pure GCP rules the components apply: RFC 1035 physical names, service account ids, labels,
network tags, gs:// URLs, the checkpoint prefix's IAM condition and machine types with their
attached GPUs. No resources here; components/gcp.py and gcp_network.py use them.
"""

from __future__ import annotations

import hashlib
import re

import pulumi_gcp as gcp

from components.args import parse_bucket_url, standard_labels
from components.bootstrap.gcp_permissions import GCP_NAME_PREFIX

NAME_LIMIT = 63  # RFC 1035 names of compute resources
BASE_INSTANCE_NAME_LIMIT = 54  # the MIG appends "-xxxx" to each node's name
TEMPLATE_PREFIX_LIMIT = 37  # longer name_prefix values get a collision-prone short suffix
AUTONAME_SUFFIX = 8  # Pulumi autonaming appends "-" and 7 random characters
SERVICE_ACCOUNT_MIN, SERVICE_ACCOUNT_MAX = 6, 30
SECRET_ID_LIMIT = 255
LABEL_LIMIT = 63
# `<n1 machine type>+<canonical GPU>:<count>`, as in router/data/instances.csv.
ATTACHED_GPUS = re.compile(
    r"^(?P<machine>n1-[a-z0-9]+-\d+)\+(?P<gpu>[A-Za-z0-9-]+):(?P<count>\d+)$"
)


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def gcp_name(job_name: str, part: str, limit: int = NAME_LIMIT) -> str:
    """RFC 1035 name `spotroute-<job>-<part>` of at most `limit` chars; long job names get a hash
    suffix. The fixed prefix is what the deployer's name conditions admit (gcp_permissions).
    `job_name` is the names' owner: the job, or `<n>-<job>` for its n-th stack (args.name_owner)."""
    base = GCP_NAME_PREFIX + re.sub(r"[^a-z0-9-]+", "-", job_name.lower()).strip("-")
    name = f"{base.rstrip('-')}-{part}"
    if len(name) <= limit:
        return name
    # Truncation alone would let two long job names with the same start collide.
    tail = f"-{_digest(job_name, 6)}-{part}"
    return base[: limit - len(tail)].rstrip("-") + tail


def service_account_id(job_name: str) -> str:
    """Service account id of a job (or of the names' owner `<n>-<job>`: `sr-2-llm`): 6-30 chars
    of [a-z0-9-], a letter first, no dash last (the IAM API's rule)."""
    base = re.sub(r"[^a-z0-9-]+", "-", job_name.lower()).strip("-")
    account = f"sr-{base}".rstrip("-")
    if len(account) > SERVICE_ACCOUNT_MAX:
        tail = f"-{_digest(job_name, 6)}"
        account = account[: SERVICE_ACCOUNT_MAX - len(tail)].rstrip("-") + tail
    if len(account) < SERVICE_ACCOUNT_MIN:
        account = f"{account}-job"
    return account


def _label_text(text: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "_", text.lower())[:LABEL_LIMIT]


def node_tag(job_name: str) -> str:
    """Network tag every node of the job carries; the firewall opens the group to itself by it."""
    return gcp_name(job_name, "node")


def gcp_labels(job_name: str, labels: dict[str, str]) -> dict[str, str]:
    """standard_labels valid for GCP: keys and values lowercase [a-z0-9_-], at most 63 chars."""
    sanitized: dict[str, str] = {}
    for key, value in standard_labels(job_name, labels).items():
        label_key = _label_text(key)
        if not label_key[:1].isalpha():
            label_key = _label_text(f"l_{label_key}")
        sanitized[label_key] = _label_text(str(value))
    return sanitized


def parse_gs_url(url: str, field: str) -> tuple[str, str]:
    """(bucket, prefix) of a gs:// URL; the prefix is "" or ends with "/"."""
    return parse_bucket_url(url, "gs", field)


def prefix_condition(bucket: str, prefix: str) -> str:
    """IAM condition (CEL) matching objects under `prefix` and listings asking for that prefix."""
    if not prefix or prefix == "/" or any(c in prefix for c in '*?"\\'):
        raise ValueError(
            f"checkpoint_prefix: {prefix!r} would grant the whole bucket — use e.g. 'job-name/'"
        )
    # Object reads and writes are checked against the object's name; a listing is checked against
    # the bucket, so it needs the list-prefix attribute or listing the prefix is denied.
    return (
        f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}") || '
        f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("{prefix}")'
    )


def machine_and_accelerators(
    instance_type: str, gpu: str, gpu_count: int, accelerator_type: str
) -> tuple[str, list[gcp.compute.InstanceTemplateGuestAcceleratorArgs]]:
    """Machine type and attached GPUs of `n1-standard-8+T4:1` (N1 + GPUs) or `a2-ultragpu-8g`.

    `accelerator_type` is GCP's name of the attached GPU (`nvidia-tesla-t4`); the router writes it
    from router/data/instances.csv as spotroute:gcpAcceleratorType.
    """
    match = ATTACHED_GPUS.match(instance_type)
    if match is None:
        if "+" in instance_type:
            raise ValueError(
                f"instance_types: {instance_type!r} — name attached GPUs "
                "<n1 machine>+<GPU>:<count>, e.g. n1-standard-8+T4:1"
            )
        if instance_type.startswith("n1-"):
            raise ValueError(
                f"instance_types: {instance_type!r} has no GPUs — attach them, e.g. "
                f"{instance_type}+T4:1"
            )
        # Accelerator-optimized machine types (a2, a3, g2, ...) come with their GPUs.
        return instance_type, []
    if match["gpu"] != gpu or int(match["count"]) != gpu_count:
        raise ValueError(
            f"instance_types: {instance_type!r} attaches {match['gpu']}:{match['count']} but the "
            f"group asks for gpu {gpu} x {gpu_count} — make them agree"
        )
    if not accelerator_type:
        raise ValueError(
            f"instance_types: GCP attaches no {gpu} GPUs to N1 machines in "
            "router/data/instances.csv — use an accelerator-optimized machine type or add the row"
        )
    return match["machine"], [
        gcp.compute.InstanceTemplateGuestAcceleratorArgs(type=accelerator_type, count=gpu_count)
    ]
