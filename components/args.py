"""Typed inputs of the placement components; every cloud module takes the same Args.

The program (components/program.py) reads stack config and builds these; components never read
config. Cloud modules (aws.py, gcp.py, azure.py, local.py) each define the four component classes
`Network`, `CheckpointBucket`, `JobIdentity`, `SpotGpuGroup` taking these Args.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class NetworkArgs:
    job_name: str
    region: str
    zone: str = ""  # "" = the cloud chooses
    ssh_cidrs: tuple[str, ...] = ()  # empty = no inbound at all
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class CheckpointBucketArgs:
    job_name: str
    region: str
    # Reuse this bucket: s3://, gs://, https://<acct>.blob.core.windows.net/<container>, file://
    existing_url: str = ""
    noncurrent_version_days: int = 7  # lifecycle: expire old checkpoint versions after this
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class JobIdentityArgs:
    job_name: str
    region: str
    checkpoint_prefix: str  # the job may read/write only under this prefix of the checkpoint bucket
    data_url: str = ""  # read-only access to this location; "" = none
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class JobCommand:
    image: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SpotGpuGroupArgs:
    job_name: str
    region: str
    zone: str
    instance_types: tuple[str, ...]  # equivalent types, cheapest first
    market: str  # "spot" | "on-demand"
    max_price_per_hour: float  # USD per instance-hour; spot bid cap / budget
    node_count: int
    gpu: str  # canonical GPU name, e.g. "A100-80GB"
    gpu_count: int
    boot_disk_gb: int
    job: JobCommand
    labels: dict[str, str] = field(default_factory=dict)


REQUIRED_LABELS: tuple[str, ...] = ("spotroute-job", "team", "managed-by")
MANAGED_BY = "spotroute"


def standard_labels(job_name: str, labels: dict[str, str]) -> dict[str, str]:
    """Labels every resource carries: the job's own plus spotroute-job and managed-by."""
    merged = {"team": "unassigned", **labels}
    merged["spotroute-job"] = job_name
    merged["managed-by"] = MANAGED_BY
    return merged
