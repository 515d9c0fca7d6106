"""Typed inputs of the placement components; every cloud module takes the same Args.

The program (components/program.py) reads stack config and builds these; components never read
config. Cloud modules (aws.py, gcp.py, azure.py, local.py) each define the four component classes
`Network`, `CheckpointBucket`, `JobIdentity`, `SpotGpuGroup` taking these Args, registered in
components/registry.py. A field that only one cloud uses says so; the others ignore it, so the
program builds the same Args for every cloud.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from router.contract.stack_config import MARKETS

if TYPE_CHECKING:  # Pulumi loads only where a program runs: node scripts render without it
    import pulumi

# Where copy-mode data sets go inside the staging bucket (the job may write only there).
STAGING_PREFIX = "data/"


@dataclass(frozen=True, kw_only=True)
class ProviderArgs:
    region: str
    gcp_project: str = ""  # GCP: pin the provider to this project; "" = from the environment


@dataclass(frozen=True, kw_only=True)
class NetworkArgs:
    job_name: str
    region: str
    zone: str = ""  # "" = the cloud chooses
    # Keyless shell access through the cloud's own broker (AWS SSM Session Manager, GCP IAP TCP
    # forwarding); nothing else connects in. Azure refuses it (docs/components.md: Bastion).
    remote_access: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    # GCP: whose project-scoped physical names these are (`name_owner`); "" = the job's.
    name_owner: str = ""


@dataclass(frozen=True, kw_only=True)
class CheckpointBucketArgs:
    job_name: str
    region: str
    # Reuse this bucket: s3://, gs://, https://<acct>.blob.core.windows.net/<container>, file://
    existing_url: str = ""
    noncurrent_version_days: int = 7  # lifecycle: expire old checkpoint versions after this
    labels: dict[str, str] = field(default_factory=dict)
    # Azure: storage account name → resource id, to reuse an existing account (a blob URL does
    # not say which subscription and resource group its account is in).
    storage_account_ids: Mapping[str, str] = field(default_factory=dict)
    local_directory: str = ""  # local target: the checkpoint directory to create
    # A staging bucket for copied data sets, not a checkpoint bucket: current objects are deleted
    # this many days after they were written, and `pulumi destroy` deletes the bucket with its
    # contents (a copy is worth nothing once the job is done). 0 = a checkpoint bucket.
    expire_days: int = 0
    # What destroying the stack does with a created checkpoint bucket: True = keep the bucket, its
    # objects and its settings (retain_on_delete: checkpoints are the user's work), False = delete
    # it with its contents (force_destroy). A staging bucket is always deleted.
    keep_on_destroy: bool = True
    # GCP, Azure: salts the created bucket's / storage account's fixed, global name (the stack's
    # spotroute:deploymentId), so a stack created again after a destroy that kept it gets a new one.
    name_salt: str = ""


@dataclass(frozen=True, kw_only=True)
class JobIdentityArgs:
    job_name: str
    region: str
    checkpoint_prefix: str  # the job may read/write only under this prefix of the checkpoint bucket
    # Read-only access to exactly these prefixes (the chosen copy of every data set). Each cloud
    # grants the URLs of its own storage; others cannot be granted by this cloud's identity.
    data_urls: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    storage_account_ids: Mapping[str, str] = field(default_factory=dict)  # Azure: for data_urls
    # Azure: the resource group to hold the identity; None = the bootstrap's job-identities group
    # (components.azure_names.AZURE_JOB_IDENTITY_RESOURCE_GROUP), the one place the deployer may
    # create and attach identities.
    resource_group_name: pulumi.Input[str] | None = None
    remote_access: bool = False  # AWS: the role may register with SSM Session Manager
    # GCP: whose project-scoped physical names these are (`name_owner`); "" = the job's.
    name_owner: str = ""


@dataclass(frozen=True, kw_only=True)
class JobCommand:
    image: str
    command: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    # The job's checkpoint.interval (SPOTROUTE_CHECKPOINT_INTERVAL, seconds); 0 = unset, the
    # checkpoint library's default applies.
    checkpoint_interval_s: float = 0
    # Secret env: the names in clear, the values only as a secret Output (name → value) that
    # each cloud puts in its secret store and its nodes read at boot (docs/security.md).
    secret_names: tuple[str, ...] = ()
    secret_env: pulumi.Input[Mapping[str, str]] | None = None


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
    # GCP: accelerator type of GPUs attached to N1 machines (the catalog's accelerator_type).
    accelerator_type: str = ""
    local_sandbox: str = ""  # local target: the job process's working directory
    # GCP: whose project-scoped physical names these are (`name_owner`); "" = the job's.
    name_owner: str = ""


def name_owner(job_name: str, stack: str, scope: str) -> str:
    """Whose project-scoped physical names a placement stack creates: `<n>-<job>` for the job's
    n-th stack `<job>.<n>` when `scope` is "stack" (spotroute:nameScope), else the job's own.

    A job's first stack is `<job>`, so it keeps the names it always had. `<n>-<job>` starts with
    a digit where every job name starts with a letter: no job's names are another stack's.
    """
    head, dot, number = stack.partition(".")
    if scope != "stack" or not dot or head != job_name or not number.isdigit():
        return job_name
    return f"{int(number)}-{job_name}"


def secret_env_json(env: pulumi.Input[Mapping[str, str]] | None) -> pulumi.Output[str]:
    """The secret env as one JSON object (what each cloud's secret store holds), kept secret."""
    import pulumi

    values: pulumi.Output[Mapping[str, str]] = pulumi.Output.secret(env or {})
    return values.apply(lambda e: json.dumps(dict(sorted(e.items()))))


REQUIRED_LABELS: tuple[str, ...] = ("spotroute-job", "team", "managed-by")
MANAGED_BY = "spotroute"


def standard_labels(job_name: str, labels: dict[str, str]) -> dict[str, str]:
    """Labels every resource carries: the job's own plus spotroute-job and managed-by."""
    merged = {"team": "unassigned", **labels}
    merged["spotroute-job"] = job_name
    merged["managed-by"] = MANAGED_BY
    return merged


# --- checks every cloud module applies to its Args ----------------------------------------------


def require_type(value: object, expected: type | tuple[type, ...], what: str) -> None:
    """TypeError naming the constructor and the expected type(s) when `value` is of another."""
    if not isinstance(value, expected):
        names = (
            " or ".join(t.__name__ for t in expected)
            if isinstance(expected, tuple)
            else expected.__name__
        )
        raise TypeError(f"{what} takes {names}, got {type(value).__name__}")


def parse_bucket_url(url: str, scheme: str, field: str) -> tuple[str, str]:
    """(bucket, key prefix) of `<scheme>://bucket/prefix/`; the prefix is "" or ends in "/"."""
    if not url.startswith(f"{scheme}://"):
        raise ValueError(
            f"{field}: {url!r} is not an {scheme}:// URL — use {scheme}://bucket/prefix/"
        )
    bucket, _, prefix = url[len(scheme) + 3 :].partition("/")
    if not bucket or any(c in url for c in "*?"):
        raise ValueError(f"{field}: {url!r} names no bucket — use {scheme}://bucket/prefix/")
    prefix = prefix.strip("/")
    return bucket, (prefix + "/" if prefix else "")


def check_bucket_args(what: str, args: CheckpointBucketArgs, staging: str = "") -> None:
    """A cloud CheckpointBucket's Args type check (TypeError naming `what`) and version days;
    with `staging` (what the cloud calls the staging bucket it creates), expire_days too."""
    require_type(args, CheckpointBucketArgs, what)
    if args.noncurrent_version_days < 1:
        raise ValueError(
            f"noncurrent_version_days: {args.noncurrent_version_days} — use 1 or more days"
        )
    if staging and (args.expire_days < 0 or (args.expire_days and args.existing_url)):
        raise ValueError(
            f"expire_days: {args.expire_days} — use 0, or days for a created staging {staging}"
        )


class _KeyPrefixed(Protocol):
    @property
    def key_prefix(self) -> str: ...


def check_identity_inputs(
    what: str,
    args: JobIdentityArgs,
    bucket: _KeyPrefixed,
    staging: object | None,
    bucket_type: type,
) -> tuple[str, str]:
    """A cloud JobIdentity's input type checks (TypeError naming `what`) and its checkpoint
    prefix: (relative prefix, "" or ending in "/"; key prefix inside the bucket = the bucket's
    own key prefix + the relative one)."""
    require_type(args, JobIdentityArgs, what)
    require_type(bucket, bucket_type, f"{what} bucket")
    if staging is not None:
        require_type(staging, bucket_type, f"{what} staging")
    relative = args.checkpoint_prefix.strip("/")
    relative_prefix = relative + "/" if relative else ""
    return relative_prefix, bucket.key_prefix + relative_prefix


def check_group_inputs(
    what: str,
    args: SpotGpuGroupArgs,
    inputs: tuple[tuple[object, type], tuple[object, type], tuple[object, type]],
    instance_types: str,
) -> None:
    """A cloud SpotGpuGroup's input type checks (TypeError naming `what`; `inputs` are the
    network, identity and bucket with the cloud's class of each) and the value checks every
    cloud applies (ValueError naming the field; `instance_types` says what the cloud's types
    are, e.g. "EC2 instance types")."""
    require_type(args, SpotGpuGroupArgs, what)
    for part, (value, expected) in zip(("network", "identity", "bucket"), inputs, strict=True):
        require_type(value, expected, f"{what} {part}")
    if args.market not in MARKETS:
        raise ValueError(f"market: {args.market!r} — use spot or on-demand")
    if isinstance(args.instance_types, str) or not args.instance_types:
        raise ValueError(f"instance_types: give a non-empty tuple of {instance_types}")
    if args.node_count < 1:
        raise ValueError(f"node_count: {args.node_count} — use 1 or more")
    if args.max_price_per_hour <= 0:
        raise ValueError(
            f"max_price_per_hour: {args.max_price_per_hour} — use a positive USD price"
        )
    if args.boot_disk_gb < 1:
        raise ValueError(f"boot_disk_gb: {args.boot_disk_gb} — use a size in GB")
