"""Pure: a chosen placement + the job → the stack config the placement program reads.

Keys and meanings are in docs/stack-config.md (router.contract.stack_config). The router writes
only these keys; the program reads only these keys. Reading a stack file: router.config.stack_files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from router.contract.stack_config import DEFAULT_BOOT_DISK_GB, NAMESPACE, SECRET_KEYS, serialise
from router.core.job.model import Job
from router.core.placement import Placement

# Spot cap when the job sets none: enough headroom that ordinary spot price moves do not evict
# the job, low enough that a price spike does.
SPOT_CAP_HEADROOM = 1.5

StackConfig = dict[str, Any]


def equivalent_types(chosen: Placement, ranked: Sequence[Placement]) -> tuple[str, ...]:
    """Instance types the group may use: the chosen one, then ranked ones in the same place."""
    types = [chosen.instance_type]
    for p in ranked:
        same_place = (p.cloud, p.region, p.zone, p.market) == (
            chosen.cloud,
            chosen.region,
            chosen.zone,
            chosen.market,
        )
        if same_place and p.instance_type not in types:
            types.append(p.instance_type)
    return tuple(types)


def max_price(job: Job, chosen: Placement) -> float:
    """USD per instance-hour cap written as spotroute:maxPrice."""
    if job.max_price_per_hour is not None:
        return job.max_price_per_hour
    # Clouds compare the cap with their list price, not our discounted one.
    return round(chosen.list_price_per_hour * SPOT_CAP_HEADROOM, 4)


def program_market(chosen: Placement) -> str:
    """Reserved capacity is consumed as on-demand instances (the reservation matches them)."""
    return "on-demand" if chosen.market == "reserved" else chosen.market


def staging_days(chosen: Placement) -> int:
    """Days after which the staging bucket deletes copied data: the job's expected hours plus
    the staging hours, rounded up to whole days, plus one day of margin (0 = nothing copied)."""
    copied = [d for d in chosen.data if d.access == "copy"]
    if not copied:
        return 0
    hours = chosen.hours + sum(d.route.staging_hours for d in copied if not d.route.overlapped)
    return max(1, math.ceil(hours / 24)) + 1


def data_values(chosen: Placement) -> dict[str, Any]:
    """dataUrls (the chosen copy of every data set, job order), dataCopyUrls, stagingDays."""
    return {
        "dataUrls": list(dict.fromkeys(d.route.source.url for d in chosen.data)),
        "dataCopyUrls": list(
            dict.fromkeys(d.route.source.url for d in chosen.data if d.access == "copy")
        ),
        "stagingDays": staging_days(chosen),
    }


def stack_config(
    job: Job,
    chosen: Placement,
    ranked: Sequence[Placement] = (),
    *,
    gcp_project: str = "",
    azure_storage_accounts: Mapping[str, str] | None = None,
    gcp_accelerator_type: str = "",
    local_dirs: tuple[str, str] = ("", ""),
    secret_env: Mapping[str, str] | None = None,
    deployment_id: str = "",
    name_scope: str = "stack",
) -> StackConfig:
    """The `spotroute:*` config for deploying `job` at `chosen` (keys without the namespace).

    `gcp_accelerator_type` is GCP's name of the GPU on N1 machines (catalog); `local_dirs` the
    local target's (sandbox, checkpoint) directories. Each is written only for its own cloud.
    `secret_env` holds the values of the job's `run.secrets` (core.job.problems.secret_values):
    they go to the secret key spotroute:secretEnv only, never into spotroute:job.
    `deployment_id` is the stack's random id (kept from its stack file, new for a new one),
    written for GCP and Azure only (it salts the bucket / storage account name there).
    `name_scope` is whose the stack's project-scoped names are: "stack" for a new stack file,
    the file's own value (or "job", a file from before the key) for an existing one.
    """
    secrets = dict(secret_env or {})
    if sorted(secrets) != sorted(job.run.secrets):
        raise ValueError(
            f"secret_env must hold exactly the job's secrets {list(job.run.secrets)},"
            f" got {sorted(secrets)}"
        )
    on_gcp, on_local = chosen.cloud == "gcp", chosen.cloud == "local"
    checkpoint_url = ""
    if job.checkpoint is not None and job.checkpoint.url != "auto":
        checkpoint_url = job.checkpoint.url
    return serialise(
        {
            "jobName": job.name,
            "cloud": chosen.cloud,
            "region": chosen.region,
            "zone": chosen.zone or "",
            "instanceTypes": list(equivalent_types(chosen, ranked)),
            "market": program_market(chosen),
            "maxPrice": max_price(job, chosen),
            "nodeCount": job.node_count,
            "gpu": chosen.gpu,
            "gpuCount": chosen.gpu_count,
            "bootDiskGb": DEFAULT_BOOT_DISK_GB,
            "job": {
                "image": job.run.image,
                "command": list(job.run.command),
                "env": dict(sorted(job.run.plain_env.items())),
            },
            "checkpointing": job.checkpoint is not None,
            "checkpointUrl": checkpoint_url,
            "keepCheckpoints": True,  # a discarded copy's fate is written into the state at destroy
            "deploymentId": deployment_id if chosen.cloud in ("gcp", "azure") else "",
            "nameScope": name_scope,
            "checkpointIntervalS": job.checkpoint.interval_s if job.checkpoint else 0,
            **data_values(chosen),
            "remoteAccess": False,
            "labels": dict(sorted(job.labels.items())),
            "secretEnvNames": sorted(secrets),
            "secretEnv": dict(sorted(secrets.items())),
            # Always written (empty elsewhere) so moving a job between clouds leaves no stale key.
            "gcpProject": gcp_project if on_gcp else "",
            "gcpAcceleratorType": gcp_accelerator_type if on_gcp else "",
            "localSandboxDir": local_dirs[0] if on_local else "",
            "localCheckpointDir": local_dirs[1] if on_local else "",
            "storageAccountIds": dict(sorted((azure_storage_accounts or {}).items()))
            if chosen.cloud == "azure"
            else {},
            "pricePerHour": chosen.price_per_hour,
            "priceSource": chosen.price_source,
        }
    )


def config_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Readable changes between two configs: `+ key: v`, `- key: v`, `~ key: a → b`.

    Secret keys are left out: their values must never be printed, and the stack file holds only
    ciphertext to compare with (their names key, e.g. secretEnvNames, shows what changed).
    """
    lines = []
    for key in sorted((set(old) | set(new)) - set(SECRET_KEYS)):
        if key not in old:
            lines.append(f"+ {NAMESPACE}:{key}: {new[key]!r}")
        elif key not in new:
            lines.append(f"- {NAMESPACE}:{key}: {old[key]!r}")
        elif old[key] != new[key]:
            lines.append(f"~ {NAMESPACE}:{key}: {old[key]!r} → {new[key]!r}")
    return lines
