"""Launch with failover: try the ranked placements in turn until one the provider accepts.

A capacity, quota or price refusal (router.core.failover) removes what the try half-created
(router.jobs.deploy does that for a new stack), blocks the zone — or after a repeat the region —
in SPOTROUTE_HOME/blocked.json, and moves on to the next placement that is not blocked. Any
other failure stops at once: another region would fail the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.config.blocks import read_blocks, updating_blocks
from router.config.home import spotroute_home
from router.config.project import Project
from router.core.errors import OperationFailed
from router.core.failover import (
    REGION_BLOCK_S,
    ZONE_BLOCK_S,
    Block,
    LaunchFailure,
    block_after,
    blocking,
    classify_launch_error,
)
from router.core.job.model import Job
from router.core.placement import Placement
from router.core.review import Review
from router.flows.jobs import DeployOutcome, deploy, engine_for
from router.flows.live_placement import at_live_site, live_placement, with_move_env
from router.flows.proposals import Proposal, proposal_for

MAX_TRIES = 3


@dataclass(frozen=True)
class LaunchTry:
    """One placement tried (or skipped) on the way to a launch."""

    number: int  # 1-based among tries that ran; 0 for a skipped placement
    placement: Placement
    outcome: str  # launched | refused | skipped
    reason: str = ""
    block: Block | None = None

    def where(self) -> str:
        p = self.placement
        return f"{p.cloud}/{p.region}" + (f"/{p.zone}" if p.zone else "")

    def to_json(self) -> dict[str, Any]:
        p = self.placement
        return {
            "try": self.number,
            "cloud": p.cloud,
            "region": p.region,
            "zone": p.zone,
            "market": p.market,
            "price_per_hour": p.price_per_hour,
            "outcome": self.outcome,
            "reason": self.reason,
            "blocked_until": self.block.until.isoformat() if self.block else None,
            "blocked_scope": self.block.scope if self.block else None,
        }


class LaunchFailed(OperationFailed):
    """Every placement tried was refused (or blocked); the tries say where and why."""

    def __init__(self, message: str, tries: Sequence[LaunchTry]) -> None:
        super().__init__(message)
        self.tries = tuple(tries)


def launch(
    job: Job,
    org: Any,
    ranked: Sequence[Placement],
    *,
    project: Project,
    confirm: Callable[[Review], bool],
    stack: str = "",
    dry_run: bool = False,
    on_event: Callable[[Any], None] | None = None,
    on_try: Callable[[LaunchTry], None] | None = None,
    max_tries: int = MAX_TRIES,
    record: bool = True,
    proposal_hook: Callable[[Proposal], None] | None = None,
    job_file: Path | None = None,
) -> tuple[DeployOutcome, Proposal, list[LaunchTry]]:
    """Deploy `job` at the first of `ranked` that launches; LaunchFailed after max_tries.

    Without a `stack` (a user's deploy), a job placed already is updated in its live stack, where
    it runs, or refused (router/flows/live_placement.py): never placed a second time.
    """
    home = spotroute_home()
    if not stack:
        live = live_placement(engine_for(project).records(), job.name)
        if live is not None:
            stack, ranked = live.stack, at_live_site(live, ranked)
            job = with_move_env(job, project, stack)
    tries: list[LaunchTry] = []

    def note(t: LaunchTry) -> None:
        tries.append(t)
        if on_try is not None:
            on_try(t)

    ran = 0
    for placement in ranked:
        if ran >= max_tries:
            break
        now = datetime.now(UTC)
        held = blocking(read_blocks(home), placement.cloud, placement.region, placement.zone, now)
        if held is not None:
            note(LaunchTry(0, placement, "skipped", f"blocked until {held.until:%H:%M:%S} UTC "
                           f"({held.reason.split(':', 1)[0]})", held))  # fmt: skip
            continue
        ran += 1
        proposal = proposal_for(
            job, org, placement, ranked, project=project, stack=stack, job_file=job_file
        )
        if proposal_hook is not None:
            proposal_hook(proposal)
        try:
            outcome = deploy(
                proposal,
                project=project,
                confirm=confirm,
                dry_run=dry_run,
                on_event=on_event,
                record=record,
            )
        except OperationFailed as exc:
            failure = _refusal(exc)
            # Propagation was retried in place (jobs.up_through_propagation); elsewhere would
            # not help: the new identity is the same everywhere.
            if failure is None or failure.kind == "propagation" or dry_run:
                raise
            block = _block(home, failure, placement, _clock_scale(org, project, placement))
            note(LaunchTry(ran, placement, "refused", f"{failure.code}: {failure.message}", block))
            continue
        note(LaunchTry(ran, placement, "launched"))
        return outcome, proposal, tries
    raise LaunchFailed(_summary(job.name, tries, len(ranked)), tries)


@contextmanager
def dry_run_advice(dry_run: bool, job_file: Path) -> Iterator[None]:
    """Within it, a failure of a dry run says how to write the stack file without it."""
    try:
        yield
    except OperationFailed as exc:
        if not dry_run:
            raise
        raise dry_run_failed(exc, job_file) from None


def dry_run_failed(exc: OperationFailed, job_file: Path) -> OperationFailed:
    """A failed `deploy --dry-run`, led by the way to the reviewed stack file that needs none of
    what it failed on.

    A dry run refreshes stale prices and previews through the engine, so it fails where the
    cloud's credentials or a provider plugin are missing — where a job author on a branch
    stands. The advice comes first: a long engine message is cut at the message limit.
    """
    import copy

    failed = copy.copy(exc)  # the same class (LaunchFailed keeps its tries)
    failed.message = (
        f"dry run failed (`route plan {job_file} --write` writes the stack file for review "
        f"without the engine, provider plugins or credentials): {exc.message}"
    )
    failed.args = (failed.message,)
    return failed


def _refusal(exc: OperationFailed) -> LaunchFailure | None:
    detail = getattr(exc, "detail", "") or exc.message
    return classify_launch_error(detail)


def _block(home: Any, failure: LaunchFailure, p: Placement, scale: float = 1.0) -> Block:
    now = datetime.now(UTC)
    with updating_blocks(home, now) as blocks:
        block = block_after(
            failure, p.cloud, p.region, p.zone, blocks, now,
            zone_block_s=ZONE_BLOCK_S / scale, region_block_s=REGION_BLOCK_S / scale,
        )  # fmt: skip
        blocks.append(block)
    return block


def _clock_scale(org: Any, project: Project, p: Placement) -> float:
    """How much faster than real time the placement's market runs: a local market's time scale
    (a zone refused for 30 minutes of its clock), else 1."""
    from router.config.local_market import local_clock

    return local_clock(org, project.root)[0] if p.cloud == "local" else 1.0


def _summary(job: str, tries: Sequence[LaunchTry], considered: int) -> str:
    refused = [t for t in tries if t.outcome == "refused"]
    skipped = [t for t in tries if t.outcome == "skipped"]
    if not refused and not skipped:
        return f"job {job}: no placement to launch"
    parts = [f"{t.where()} {t.reason.split(':', 1)[0]}" for t in refused]
    tail = f"; {len(skipped)} blocked placement(s) skipped" if skipped else ""
    return (
        f"job {job}: no placement launched after {len(refused)} tries of {considered} "
        f"({', '.join(parts) or 'none ran'}{tail}) — wait for the blocks in "
        f"SPOTROUTE_HOME/blocked.json to end, widen resources.regions, or use --to"
    )
