"""`route preempt JOB`: take a local job's capacity away the way a cloud does.

Notice, grace period, kill: SIGTERM to the job's process group (the checkpoint library's
local notice source), then SIGKILL if it still runs after the grace period. The stack is left
as it is — like a preempted spot instance, the placement is simply gone — and `route watch`
notices and re-places the job from its last checkpoint.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from router.config.project import Project
from router.core.errors import BadInput, OperationFailed

DEFAULT_GRACE_S = 30.0  # GCP and Azure give 30 s; AWS two minutes


@dataclass(frozen=True)
class Preemption:
    job: str
    pid: int
    notice_at: datetime
    gone_after_s: float  # seconds from the notice until the process was gone
    killed: bool  # True when the grace period ran out and SIGKILL was needed
    grace_s: float


def preempt_job(job: str, *, project: Project, grace_s: float = DEFAULT_GRACE_S) -> Preemption:
    """SIGTERM the job's local process, SIGKILL after grace_s; OperationFailed if not running."""
    from components.local import parse_group_id, process_alive
    from router.engine.job_records import JobRecords
    from router.flows.jobs import engine_for, read_placement

    if grace_s < 0:
        raise BadInput(f"--grace: {grace_s:g} — use seconds ≥ 0")
    engine = engine_for(project)
    record = read_placement(engine.records(), job)
    if record is None:
        raise OperationFailed(f"no deployed job '{job}' — see `route status`")
    if record.get("cloud") != "local":
        raise OperationFailed(
            f"job {job} runs on {record.get('cloud')}: route preempt acts on the local target "
            "only (the clouds preempt on their own)"
        )
    ids = parse_group_id(str((record.get("outputs") or {}).get("groupId", "")))
    if ids is None or not process_alive(*ids):
        raise OperationFailed(f"job {job} is not running — nothing to preempt")
    pid, ticks = ids
    notice_at = datetime.now(UTC)
    started = time.monotonic()
    os.killpg(pid, signal.SIGTERM)
    killed = False
    while process_alive(pid, ticks):
        if time.monotonic() - started >= grace_s:
            os.killpg(pid, signal.SIGKILL)
            killed = True
            while process_alive(pid, ticks) and time.monotonic() - started < grace_s + 5:
                time.sleep(0.02)
            break
        time.sleep(0.02)
    outcome = Preemption(job, pid, notice_at, time.monotonic() - started, killed, grace_s)
    JobRecords(engine.records()).append_decision(
        job,
        {
            "at": notice_at.isoformat(),
            "by": "route preempt",
            "action": "preempted",
            "reason": f"local preemption: SIGTERM, {grace_s:g} s grace"
            + (", then SIGKILL" if killed else f"; exited after {outcome.gone_after_s:.1f} s"),
            "placement": {
                k: record.get(k) for k in ("stack", "cloud", "region", "zone", "market")
            },
        },
    )
    return outcome
