"""The placement program: stack config (docs/stack-config.md) → one cloud's four components.

Run by `pulumi up` (components/__main__.py) and by the router as an inline Automation API
program. It reads only `spotroute:*` config, validates all of it before creating anything, and
fails with one line naming the stack file and key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import pulumi

from components.args import (
    MANAGED_BY,
    STAGING_PREFIX,
    CheckpointBucketArgs,
    JobCommand,
    JobIdentityArgs,
    NetworkArgs,
    ProviderArgs,
    SpotGpuGroupArgs,
    name_owner,
    standard_labels,
)
from components.registry import cloud_components
from components.startup import RESERVED_ENV
from router.contract.stack_config import (
    JOB_KEYS,
    JOB_NAME_PATTERN,
    JOB_NAME_RULE,
    KEY_NAMES,
    NAMESPACE,
    StackConfigError,
    parse_secret_env,
    parse_value,
)
from router.contract.stack_config import key as contract_key

CHECKPOINTING_LABEL = "spotroute-checkpointing"
JOB_NAME = re.compile(JOB_NAME_PATTERN)
# The strictest label-key rule of the three clouds (GCP): labels must work on every cloud.
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
CHECKPOINT_SCHEMES = {"aws": ("s3://",), "gcp": ("gs://",), "azure": ("https://",)}
# Keys that one cloud needs set (their contract default "" means "not this cloud").
REQUIRED_PER_CLOUD = {"local": ("localSandboxDir", "localCheckpointDir")}
FREE_CLOUDS = ("local",)
STACK_DOC = "docs/stack-config.md"  # $0 targets: maxPrice may be 0


class ConfigSource(Protocol):
    """What the program needs from pulumi.Config: raw string values by key (None = unset)."""

    def get(self, key: str) -> str | None: ...


class PlacementConfigError(pulumi.RunError):
    """A `spotroute:*` stack config value is missing or wrong; the message names the key."""


@dataclass(frozen=True, kw_only=True)
class PlacementConfig:
    """Validated stack config of one placement (keys, units and defaults: router.contract)."""

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
    keep_checkpoints: bool = True  # destroy keeps the created checkpoint bucket (else deletes it)
    deployment_id: str = ""  # the stack's random id (GCP salts its bucket name with it)
    name_scope: str = "job"  # whose project-scoped names: the job's or this stack's (GCP)
    data_urls: tuple[str, ...]  # read-only, prefix-scoped: the chosen copy of every data set
    data_copy_urls: tuple[str, ...] = ()  # staged next to the GPUs (copy mode)
    staging_days: int = 0  # the staging bucket deletes copies this many days after upload
    remote_access: bool
    labels: dict[str, str]
    gcp_project: str = ""  # GCP only; "" = the provider takes it from the environment
    gcp_accelerator_type: str = ""  # GCP only: the attached GPU's accelerator type
    # Azure only: storage account name → resource id, for reusing existing storage (a blob URL
    # does not say which subscription and resource group its account is in).
    storage_account_ids: dict[str, str] = field(default_factory=dict)
    local_sandbox_dir: str = ""  # local only: the job process's directory
    local_checkpoint_dir: str = ""  # local only: the checkpoint directory to create


class _Reader:
    """Typed values of the contract's keys; every failure names the stack file and the key."""

    def __init__(self, config: ConfigSource, stack_file: str) -> None:
        self.config = config
        self.stack_file = stack_file

    def fail(self, key: str, problem: str) -> PlacementConfigError:
        where = f"{self.stack_file}: " if self.stack_file else ""
        return PlacementConfigError(f"{where}{NAMESPACE}:{key}: {problem}")

    def value(self, name: str) -> Any:
        """The key's value, typed, defaulted and range-checked by router.contract."""
        try:
            return parse_value(contract_key(name), self.config.get(name))
        except StackConfigError as exc:
            raise self.fail(exc.key, exc.problem) from exc


def read_placement_config(config: ConfigSource, stack_file: str = "") -> PlacementConfig:
    """Parse and validate every `spotroute:*` key; raises PlacementConfigError naming the key."""
    read = _Reader(config, stack_file)
    job_name = read.value("jobName")
    if not JOB_NAME.fullmatch(job_name):
        raise read.fail("jobName", f"{job_name!r} — use {JOB_NAME_RULE}")
    cloud = read.value("cloud")
    region = read.value("region")
    if not region:
        raise read.fail("region", 'is empty — name the cloud region ("local" for local)')
    instance_types = read.value("instanceTypes")
    if not instance_types:
        raise read.fail("instanceTypes", "is empty — list at least one instance type")
    market = read.value("market")
    max_price = read.value("maxPrice")
    # The local target is free; every cloud placement needs a real cap.
    if max_price < 0 or (max_price == 0 and cloud not in FREE_CLOUDS):
        raise read.fail("maxPrice", f"{max_price:g} — use a positive USD per instance-hour")
    checkpointing = read.value("checkpointing")
    if market == "spot" and not checkpointing:
        raise read.fail(
            "market",
            "spot needs a job that checkpoints — set spotroute:checkpointing: true "
            "(job.yaml checkpoint:) or use on-demand",
        )
    checkpoint_url = read.value("checkpointUrl")
    schemes = CHECKPOINT_SCHEMES.get(cloud, ())
    if checkpoint_url and schemes and not checkpoint_url.startswith(schemes):
        raise read.fail(
            "checkpointUrl",
            f"{checkpoint_url!r} is not in {cloud} — use a {' or '.join(schemes)} URL or leave it "
            "empty to create a bucket",
        )
    data_urls = read.value("dataUrls")
    data_copy_urls = read.value("dataCopyUrls")
    for url in data_copy_urls:
        if url not in data_urls:
            raise read.fail(
                "dataCopyUrls",
                f"{url!r} is not in spotroute:dataUrls — a staged data set is one the job reads",
            )
    staging_days = read.value("stagingDays")
    if data_copy_urls and staging_days < 1:
        raise read.fail(
            "stagingDays",
            f"{staging_days} — staged data needs the days after which its copy is deleted (1+)",
        )
    for name in REQUIRED_PER_CLOUD.get(cloud, ()):
        if not read.value(name):
            raise read.fail(
                name, f"missing — the router writes it for {cloud}; see docs/stack-config.md"
            )
    return PlacementConfig(
        job_name=job_name,
        cloud=cloud,
        region=region,
        zone=read.value("zone"),
        instance_types=instance_types,
        market=market,
        max_price_per_hour=max_price,
        node_count=read.value("nodeCount"),
        gpu=read.value("gpu"),
        gpu_count=read.value("gpuCount"),
        boot_disk_gb=read.value("bootDiskGb"),
        job=_job_command(read),
        checkpointing=checkpointing,
        checkpoint_url=checkpoint_url,
        keep_checkpoints=read.value("keepCheckpoints"),
        deployment_id=read.value("deploymentId"),
        name_scope=read.value("nameScope"),
        data_urls=data_urls,
        data_copy_urls=data_copy_urls,
        staging_days=staging_days,
        gcp_project=read.value("gcpProject"),
        gcp_accelerator_type=read.value("gcpAcceleratorType"),
        storage_account_ids=_storage_account_ids(read),
        local_sandbox_dir=read.value("localSandboxDir"),
        local_checkpoint_dir=read.value("localCheckpointDir"),
        remote_access=read.value("remoteAccess"),
        labels=_labels(read),
    )


def _job_command(read: _Reader) -> JobCommand:
    job = read.value("job")
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
    interval = read.value("checkpointIntervalS")
    if interval < 0:
        raise read.fail("checkpointIntervalS", f"{interval:g} — use seconds, or 0 for unset")
    secret_names = read.value("secretEnvNames")
    for key in secret_names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise read.fail("secretEnvNames", f"{key!r} is not a variable name — use letters, _")
        if key in RESERVED_ENV or key in env:
            raise read.fail(
                "secretEnvNames", f"{key} is also set by spotroute or job.env — remove one"
            )
    if len(set(secret_names)) != len(secret_names):
        raise read.fail("secretEnvNames", "names a variable twice — list each once")
    return JobCommand(
        image=image,
        command=tuple(command),
        env=dict(env),
        checkpoint_interval_s=interval,
        secret_names=tuple(secret_names),
    )


def secret_env(config: pulumi.Config, names: tuple[str, ...], stack_file: str) -> Any:
    """spotroute:secretEnv as a secret Output (name → value), checked against the names.

    Read with get_secret_object, so the values stay a secret in every resource input built from
    them (encrypted in the state, `[secret]` in diffs); None when the job has no secrets.
    """
    if not names:
        return None
    raw = config.get_secret_object("secretEnv")
    if raw is None:
        raise _Reader(config, stack_file).fail(
            "secretEnv", "missing — the router writes it with spotroute:secretEnvNames"
        )

    def checked(value: Any) -> dict[str, str]:
        try:
            return parse_secret_env(names, value)
        except StackConfigError as exc:
            raise _Reader(config, stack_file).fail(exc.key, exc.problem) from None

    return raw.apply(checked)


def _storage_account_ids(read: _Reader) -> dict[str, str]:
    ids: dict[str, Any] = read.value("storageAccountIds")
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
    for key, value in read.value("labels").items():
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
    unknown = _unknown_keys(KEY_NAMES)
    if f"{NAMESPACE}:sshCidrs" in unknown:
        raise PlacementConfigError(
            f"{stack_file}: {NAMESPACE}:sshCidrs: removed — nodes have no public address, so it "
            f"opened nothing; set {NAMESPACE}:remoteAccess: true for a keyless shell (SSM, IAP)"
        )
    if unknown:
        raise PlacementConfigError(
            f"{stack_file}: {unknown[0]}: unknown key — see docs/stack-config.md for the keys"
        )
    config = pulumi.Config(NAMESPACE)
    placement = read_placement_config(config, stack_file)
    secrets = secret_env(config, placement.job.secret_names, stack_file)
    if secrets is not None:
        placement = replace(placement, job=replace(placement.job, secret_env=secrets))
    build_placement(placement)


def group_args(placement: PlacementConfig, labels: dict[str, str], owner: str) -> SpotGpuGroupArgs:
    """The SpotGpuGroup's Args of a placement (`labels` as the program extends them)."""
    return SpotGpuGroupArgs(
        job_name=placement.job_name,
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
        accelerator_type=placement.gcp_accelerator_type,
        local_sandbox=placement.local_sandbox_dir,
        name_owner=owner,
    )


def build_placement(placement: PlacementConfig) -> Mapping[str, Any]:
    """Create the placement's components in its cloud and export the stack outputs."""
    cloud = cloud_components(placement.cloud)
    job = placement.job_name
    owner = name_owner(job, pulumi.get_stack(), placement.name_scope)
    provider = cloud.make_provider(
        f"{job}-{placement.cloud}",
        ProviderArgs(region=placement.region, gcp_project=placement.gcp_project),
    )
    opts = pulumi.ResourceOptions(providers=[provider]) if provider is not None else None
    labels = placement.labels
    if placement.checkpointing:
        # The policy pack cannot read stack config: spot-requires-checkpointing reads this label.
        labels = {**labels, CHECKPOINTING_LABEL: "true"}

    network = cloud.network(
        job,
        NetworkArgs(
            job_name=job,
            region=placement.region,
            zone=placement.zone,
            remote_access=placement.remote_access,
            labels=labels,
            name_owner=owner,
        ),
        opts,
    )
    bucket = cloud.checkpoint_bucket(
        job,
        CheckpointBucketArgs(
            job_name=job,
            region=placement.region,
            existing_url=placement.checkpoint_url,
            keep_on_destroy=placement.keep_checkpoints,
            name_salt=placement.deployment_id,
            labels=labels,
            storage_account_ids=placement.storage_account_ids,
            local_directory=placement.local_checkpoint_dir,
        ),
        opts,
    )
    staging = None
    if placement.data_copy_urls and placement.cloud not in FREE_CLOUDS:
        # Copy-mode data goes to a bucket with the checkpoint bucket's guardrails (private,
        # encrypted, versioned, TLS only), whose lifecycle deletes it after the job.
        staging = cloud.checkpoint_bucket(
            f"{job}-staging",
            CheckpointBucketArgs(
                job_name=job,
                region=placement.region,
                noncurrent_version_days=1,
                expire_days=placement.staging_days,
                labels=labels,
            ),
            opts,
        )
    identity = cloud.job_identity(
        job,
        JobIdentityArgs(
            job_name=job,
            region=placement.region,
            checkpoint_prefix=f"{job}/",
            data_urls=placement.data_urls,
            labels=labels,
            storage_account_ids=placement.storage_account_ids,
            remote_access=placement.remote_access,
            name_owner=owner,
        ),
        bucket,
        opts,
        staging,
    )
    group = cloud.gpu_group(
        job,
        group_args(placement, labels, owner),
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
    if staging is not None:
        # Where copy-mode data goes (the job may write only there): the bucket URL + data/.
        outputs["stagingUrl"] = staging.url.apply(lambda url: url + STAGING_PREFIX)
    for name, value in outputs.items():
        pulumi.export(name, value)
    return outputs
