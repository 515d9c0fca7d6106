"""A placement's node start-up script against its cloud's size limit, before anything exists.

EC2 user data, a GCE metadata value and Azure custom data each have a limit (components/
provider_rules/<cloud>.toml). The script grows with the job's own fields (run.env above all), so
`route plan` and `route deploy` render it as the program will (components/node_scripts.py, with
the longest values the stack's outputs may take) and refuse the job in one line naming the field
that grew, exit 2. Pulumi is not loaded: node_scripts is plain Python.
"""

from __future__ import annotations

from pathlib import Path

from router.contract.stack_config import DEFAULT_BOOT_DISK_GB
from router.core.errors import BadInput
from router.core.job.model import Job
from router.core.placement import Placement

SCRIPT_CLOUDS = ("aws", "gcp", "azure")


def startup_script_problem(job: Job, placement: Placement) -> str | None:
    """Why `placement`'s cloud would refuse the job's start-up script for its size, or None."""
    if placement.cloud not in SCRIPT_CLOUDS:
        return None
    from components.args import JobCommand, SpotGpuGroupArgs
    from components.node_scripts import check_group_script
    from components.provider_rules import ScriptTooLarge

    command = JobCommand(
        image=job.run.image,
        command=tuple(job.run.command),
        env=dict(job.run.plain_env),
        checkpoint_interval_s=job.checkpoint.interval_s if job.checkpoint else 0,
        secret_names=tuple(job.run.secrets),
    )
    args = SpotGpuGroupArgs(
        job_name=job.name,
        region=placement.region,
        zone=placement.zone or "",
        instance_types=(placement.instance_type,),
        market=placement.market if placement.market == "spot" else "on-demand",
        max_price_per_hour=max(placement.price_per_hour, 0.01),
        node_count=job.node_count,
        gpu=placement.gpu,
        gpu_count=placement.gpu_count,
        boot_disk_gb=DEFAULT_BOOT_DISK_GB,
        job=command,
    )
    try:
        check_group_script(placement.cloud, args)
    except ScriptTooLarge as exc:
        return str(exc)
    except ValueError:
        return None  # the job's other problems are validation's, and the program's at deploy
    return None


def check_startup_script(job: Job, placement: Placement, job_file: Path | str) -> None:
    """BadInput (exit 2) naming the job file and the field when the script would not fit."""
    problem = startup_script_problem(job, placement)
    if problem is not None:
        raise BadInput(f"{job_file}: {problem}")
