"""The placement program: stack config (docs/stack-config.md) → one cloud's four components.

Run by `pulumi up` (components/__main__.py) and by the router as an inline Automation API
program. It reads only `spotroute:*` config, validates all of it before creating anything, and
fails with one line naming the stack file and key.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pulumi

from components.args import (
    MANAGED_BY,
    CheckpointBucketArgs,
    JobCommand,
    JobIdentityArgs,
    NetworkArgs,
    SpotGpuGroupArgs,
    ssh_cidr_blocks,
    standard_labels,
)
from components.registry import CLOUDS, cloud_module
from components.startup import RESERVED_ENV

NAMESPACE = "spotroute"
MARKETS = ("spot", "on-demand")
CHECKPOINTING_LABEL = "spotroute-checkpointing"
KNOWN_KEYS = (
    "jobName",
    "cloud",
    "region",
    "zone",
    "instanceTypes",
    "market",
    "maxPrice",
    "nodeCount",
    "gpu",
    "gpuCount",
    "bootDiskGb",
    "job",
    "checkpointing",
    "checkpointUrl",
    "dataUrl",
    "sshCidrs",
    "labels",
    "gcpProject",
    "storageAccountIds",
    "pricePerHour",  # recorded by the router, not used here
    "priceSource",  # recorded by the router, not used here
)
DEFAULT_BOOT_DISK_GB = 200
JOB_KEYS = ("image", "command", "env")
# Same rule as stack names and GCP resource names: the job name ends up in both.
JOB_NAME = re.compile(r"[a-z]([a-z0-9-]{0,61}[a-z0-9])?")
# The strictest label-key rule of the three clouds (GCP): labels must work on every cloud.
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
CHECKPOINT_SCHEMES = {"aws": ("s3://",), "gcp": ("gs://",), "azure": ("https://",)}


class ConfigSource(Protocol):
    """What the program needs from pulumi.Config: raw string values by key (None = unset)."""

    def get(self, key: str) -> str | None: ...


class PlacementConfigError(pulumi.RunError):
    """A `spotroute:*` stack config value is missing or wrong; the message names the key."""


@dataclass(frozen=True, kw_only=True)
class PlacementConfig:
    """Validated stack config of one placement (units as in docs/stack-config.md)."""

    job_name: str
    cloud: str
    region: str
    zone: str
    instance_types: tuple[str, ...]
    market: str
    max_price_per_hour: float  # USD per instance-hour
    node_count: int
    gpu: str
    gpu_count: int
    boot_disk_gb: int
    job: JobCommand
    checkpointing: bool
    checkpoint_url: str
    data_url: str
    ssh_cidrs: tuple[str, ...]
    labels: dict[str, str]
    gcp_project: str = ""  # GCP only; "" = the provider takes it from the environment
    # Azure only: storage account name → resource id, for reusing existing storage (a blob URL
    # does not say which subscription and resource group its account is in).
    storage_account_ids: dict[str, str] = field(default_factory=dict)


class _Reader:
    """Typed access to raw config strings; every failure names the file and the key."""

    def __init__(self, config: ConfigSource, stack_file: str) -> None:
        self.config = config
        self.stack_file = stack_file

    def fail(self, key: str, problem: str) -> PlacementConfigError:
        where = f"{self.stack_file}: " if self.stack_file else ""
        return PlacementConfigError(f"{where}{NAMESPACE}:{key}: {problem}")

    def raw(self, key: str, required: bool) -> str | None:
        value = self.config.get(key)
        if value is None and required:
            raise self.fail(key, "missing — the router writes it; see docs/stack-config.md")
        return value

    def string(self, key: str, *, required: bool = False, default: str = "") -> str:
        value = self.raw(key, required)
        return default if value is None else value.strip()

    def choice(self, key: str, choices: tuple[str, ...]) -> str:
        value = self.string(key, required=True)
        if value not in choices:
            raise self.fail(key, f"{value!r} is not valid — use one of {', '.join(choices)}")
        return value

    def json_value(self, key: str, *, required: bool, default: Any) -> Any:
        value = self.raw(key, required)
        if value is None:
            return default
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise self.fail(key, f"{value!r} is not valid YAML/JSON data ({exc.msg})") from exc

    def number(self, key: str, *, required: bool = False, default: float = 0.0) -> float:
        value = self.json_value(key, required=required, default=default)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise self.fail(key, f"{value!r} is not a number")
        return float(value)

    def integer(
        self, key: str, *, low: int, high: int, required: bool = False, default: int = 0
    ) -> int:
        value = self.json_value(key, required=required, default=default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"{value!r} is not a whole number")
        if not low <= value <= high:
            raise self.fail(key, f"{value} is out of range — use {low}..{high}")
        return value

    def boolean(self, key: str, *, default: bool) -> bool:
        value = self.json_value(key, required=False, default=default)
        if not isinstance(value, bool):
            raise self.fail(key, f"{value!r} is not true or false")
        return value

    def strings(self, key: str, *, required: bool = False) -> tuple[str, ...]:
        value = self.json_value(key, required=required, default=[])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(key, f"{value!r} is not a list of non-empty strings")
        return tuple(value)

    def mapping(self, key: str, *, required: bool = False) -> dict[str, Any]:
        value = self.json_value(key, required=required, default={})
        if not isinstance(value, dict):
            raise self.fail(key, f"{value!r} is not a map")
        return value


def read_placement_config(config: ConfigSource, stack_file: str = "") -> PlacementConfig:
    """Parse and validate every `spotroute:*` key; raises PlacementConfigError naming the key."""
    read = _Reader(config, stack_file)
    job_name = read.string("jobName", required=True)
    if not JOB_NAME.fullmatch(job_name):
        raise read.fail(
            "jobName",
            f"{job_name!r} — use lowercase letters, digits and dashes, starting with a letter, "
            "at most 63 characters",
        )
    cloud = read.choice("cloud", CLOUDS)
    region = read.string("region", required=True)
    if not region:
        raise read.fail("region", 'is empty — name the cloud region ("local" for local)')
    instance_types = read.strings("instanceTypes", required=True)
    if not instance_types:
        raise read.fail("instanceTypes", "is empty — list at least one instance type")
    market = read.choice("market", MARKETS)
    max_price = read.number("maxPrice", required=True)
    # The local target is free; every cloud placement needs a real cap.
    if max_price < 0 or (max_price == 0 and cloud != "local"):
        raise read.fail("maxPrice", f"{max_price:g} — use a positive USD per instance-hour")
    checkpointing = read.boolean("checkpointing", default=False)
    if market == "spot" and not checkpointing:
        raise read.fail(
            "market",
            "spot needs a job that checkpoints — set spotroute:checkpointing: true "
            "(job.yaml checkpoint:) or use on-demand",
        )
    checkpoint_url = read.string("checkpointUrl")
    schemes = CHECKPOINT_SCHEMES.get(cloud, ())
    if checkpoint_url and schemes and not checkpoint_url.startswith(schemes):
        raise read.fail(
            "checkpointUrl",
            f"{checkpoint_url!r} is not in {cloud} — use a {' or '.join(schemes)} URL or leave it "
            "empty to create a bucket",
        )
    return PlacementConfig(
        job_name=job_name,
        cloud=cloud,
        region=region,
        zone=read.string("zone"),
        instance_types=instance_types,
        market=market,
        max_price_per_hour=max_price,
        node_count=read.integer("nodeCount", low=1, high=64, default=1),
        gpu=read.string("gpu", required=True),
        gpu_count=read.integer("gpuCount", low=1, high=64, required=True),
        boot_disk_gb=read.integer("bootDiskGb", low=20, high=16384, default=DEFAULT_BOOT_DISK_GB),
        job=_job_command(read),
        checkpointing=checkpointing,
        checkpoint_url=checkpoint_url,
        data_url=read.string("dataUrl"),
        gcp_project=read.string("gcpProject"),
        storage_account_ids=_storage_account_ids(read),
        ssh_cidrs=_ssh_cidrs(read),
        labels=_labels(read),
    )


def _job_command(read: _Reader) -> JobCommand:
    job = read.mapping("job", required=True)
    unknown = sorted(set(job) - set(JOB_KEYS))
    if unknown:
        raise read.fail(f"job.{unknown[0]}", f"unknown key — use {', '.join(JOB_KEYS)}")
    image = job.get("image", "")
    if not isinstance(image, str):
        raise read.fail("job.image", f"{image!r} is not a string")
    command = job.get("command", [])
    if not isinstance(command, list) or not all(isinstance(part, str) for part in command):
        raise read.fail("job.command", f"{command!r} is not a list of strings")
    if not image and not command:
        raise read.fail("job", "has neither image nor command — nothing would run")
    env = job.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise read.fail("job.env", 'is not a map of strings — quote numbers, e.g. EPOCHS: "3"')
    for key in env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise read.fail(f"job.env.{key}", "is not a variable name — use letters, digits, _")
        if key in RESERVED_ENV:
            raise read.fail(f"job.env.{key}", "is set by spotroute itself — remove it")
    return JobCommand(image=image, command=tuple(command), env=dict(env))


def _ssh_cidrs(read: _Reader) -> tuple[str, ...]:
    cidrs = read.strings("sshCidrs")
    try:
        ssh_cidr_blocks(cidrs)
    except ValueError as exc:
        raise read.fail("sshCidrs", str(exc).removeprefix("ssh_cidrs: ")) from exc
    return cidrs


def _storage_account_ids(read: _Reader) -> dict[str, str]:
    ids = read.mapping("storageAccountIds")
    for account, resource_id in ids.items():
        if not isinstance(resource_id, str) or not resource_id.startswith("/subscriptions/"):
            raise read.fail(
                f"storageAccountIds.{account}",
                f"{resource_id!r} is not a resource id — use /subscriptions/<id>/resourceGroups/"
                f"<group>/providers/Microsoft.Storage/storageAccounts/{account}",
            )
    return dict(ids)


def _labels(read: _Reader) -> dict[str, str]:
    labels: dict[str, str] = {}
    for key, value in read.mapping("labels").items():
        if not LABEL_KEY.fullmatch(key):
            raise read.fail(
                f"labels.{key}",
                "use lowercase letters, digits, - and _, starting with a letter (max 63)",
            )
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise read.fail(f"labels.{key}", f"{value!r} is not a string")
        labels[key] = str(value)
    if CHECKPOINTING_LABEL in labels:
        raise read.fail(
            f"labels.{CHECKPOINTING_LABEL}", "is set from spotroute:checkpointing — remove it"
        )
    if labels.get("managed-by", MANAGED_BY) != MANAGED_BY:
        raise read.fail("labels.managed-by", f"is reserved for {MANAGED_BY!r} — remove it")
    return labels


def _unknown_keys(known: tuple[str, ...]) -> list[str]:
    """`spotroute:*` keys the stack sets that the program does not know (typos)."""
    # pulumi.Config cannot list keys; the runtime's config map (inline programs) and the
    # PULUMI_CONFIG environment (CLI runs) together hold everything the stack sets.
    from pulumi.runtime import config as runtime_config

    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    prefix = f"{NAMESPACE}:"
    return sorted(k for k in keys if k.startswith(prefix) and k[len(prefix) :] not in known)


def placement_program() -> None:
    """Pulumi program: the placement's Network, CheckpointBucket, JobIdentity, SpotGpuGroup."""
    stack_file = f"stacks/Pulumi.{pulumi.get_stack()}.yaml"
    unknown = _unknown_keys(KNOWN_KEYS)
    if unknown:
        raise PlacementConfigError(
            f"{stack_file}: {unknown[0]}: unknown key — see docs/stack-config.md for the keys"
        )
    placement = read_placement_config(pulumi.Config(NAMESPACE), stack_file)
    build_placement(placement)


def build_placement(placement: PlacementConfig) -> Mapping[str, Any]:
    """Create the placement's components in its cloud and export the stack outputs."""
    module = cloud_module(placement.cloud)
    job = placement.job_name
    # Only GCP's provider needs an account-level id from config (the project).
    project = {"project": placement.gcp_project} if placement.cloud == "gcp" else {}
    provider = module.make_provider(f"{job}-{placement.cloud}", placement.region, **project)
    opts = pulumi.ResourceOptions(providers=[provider]) if provider is not None else None
    labels = placement.labels
    if placement.checkpointing:
        # The policy pack cannot read stack config: spot-requires-checkpointing reads this label.
        labels = {**labels, CHECKPOINTING_LABEL: "true"}

    network = module.Network(
        job,
        NetworkArgs(
            job_name=job,
            region=placement.region,
            zone=placement.zone,
            ssh_cidrs=placement.ssh_cidrs,
            labels=labels,
        ),
        opts,
    )
    azure = placement.cloud == "azure"
    storage = {"storage_account_ids": placement.storage_account_ids} if azure else {}
    bucket = module.CheckpointBucket(
        job,
        CheckpointBucketArgs(
            job_name=job,
            region=placement.region,
            existing_url=placement.checkpoint_url,
            labels=labels,
        ),
        opts,
        **storage,
    )
    identity = module.JobIdentity(
        job,
        JobIdentityArgs(
            job_name=job,
            region=placement.region,
            checkpoint_prefix=f"{job}/",
            data_url=placement.data_url,
            labels=labels,
        ),
        bucket,
        opts,
        # Azure keeps the identity in the job's resource group (the others have no such thing).
        **({"resource_group_name": network.resource_group_name, **storage} if azure else {}),
    )
    group = module.SpotGpuGroup(
        job,
        SpotGpuGroupArgs(
            job_name=job,
            region=placement.region,
            zone=placement.zone,
            instance_types=placement.instance_types,
            market=placement.market,
            max_price_per_hour=placement.max_price_per_hour,
            node_count=placement.node_count,
            gpu=placement.gpu,
            gpu_count=placement.gpu_count,
            boot_disk_gb=placement.boot_disk_gb,
            job=placement.job,
            labels=labels,
        ),
        network,
        identity,
        bucket,
        opts,
    )

    outputs: dict[str, Any] = {
        "jobName": job,
        "groupId": group.group_id,
        "checkpointUrl": group.checkpoint_url,
        "identity": identity.identity_id,
        "maxPrice": placement.max_price_per_hour,
        "market": placement.market,
        "cloud": placement.cloud,
        "region": placement.region,
        "zone": placement.zone,
        "instanceTypes": list(placement.instance_types),
        "labels": standard_labels(job, labels),
    }
    for name, value in outputs.items():
        pulumi.export(name, value)
    return outputs
