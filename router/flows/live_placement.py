"""A job's one live placement, wherever moves took it: the placement record (`placements/<job>`)
names its stack (`<job>`, then `<job>.2`, ...). deploy, preview, status, watch, unlock and
destroy act on that stack, so nothing creates a second paid placement of a job that has one.

A deploy of a placed job updates its stack where it runs; moving it is `route migrate`'s (with a
checkpoint hand-over), and while a move's journal is open no deploy runs at all. A user's deploy
holds the job's lease, the one `route migrate` and `route watch` hold while they act
(`exclusive_of_moves`): of a deploy and a move that start at the same moment, one runs.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from router.config.project import Project
from router.config.stack_files import newest_stack_file, read_stack_file
from router.core.errors import OperationFailed
from router.core.job.model import Job
from router.core.placement import Placement, placement_site
from router.engine.job_records import JobRecords, holder_id, holding_lease
from router.engine.records import RecordStore

# What makes two placements the same place (price and source may differ between plans).
SITE_KEYS: tuple[str, ...] = ("cloud", "region", "zone", "instance_type", "market")
# The job env a move gives its new stack (the hand-over id, the step to restore:
# router/flows/handover_bounds.py, migrate.py). A redeploy of that stack keeps them: dropped, they
# alone would replace the running process. Kept, a restarted process finds the hand-over complete
# and a checkpoint past that step, so they change nothing then.
MOVE_ENV: tuple[str, ...] = ("SPOTROUTE_HANDOVER_ID", "SPOTROUTE_RESTORE_STEP")
# A lease refused while nobody holds it (given back in between) is asked for again, up to 2 s.
LEASE_TRIES, LEASE_RETRY_S = 20, 0.1


@dataclass(frozen=True)
class LivePlacement:
    """Where a placed job runs now: its stack and its site (SITE_KEYS)."""

    job: str
    stack: str
    site: dict[str, Any]

    def where(self) -> str:
        return _where(self.site)


def placement_key(job: str) -> str:
    return f"placements/{job}"


def read_placement(records: RecordStore, job: str) -> dict[str, Any] | None:
    return records.get(placement_key(job))


def live_placement(
    records: RecordStore, job: str, *, doing: str = "deploy"
) -> LivePlacement | None:
    """The job's live placement from the record store (None if it has none); OperationFailed,
    naming the command that finishes it, while a move of the job is under way."""
    journal = JobRecords(records).open_journal(job)
    if journal is not None:
        raise OperationFailed(
            f"job {job}: a move {journal.from_stack} → {journal.to_stack} is under way (its "
            f"journal is open at {journal.next_step() or 'its end'}) — `route migrate {job}` or "
            f"`route watch --once` finishes it; {doing} after that"
        )
    record = read_placement(records, job)
    if not isinstance(record, dict):
        return None
    stack = record.get("stack")
    return LivePlacement(
        job,
        stack if isinstance(stack, str) and stack else job,
        {k: record.get(k) for k in SITE_KEYS},
    )


@contextmanager
def exclusive_of_moves(records: RecordStore, job: str, *, doing: str = "deploy") -> Iterator[None]:
    """Hold the job's lease (a move's and a watcher's) for the block; OperationFailed at once,
    naming the holder, while a move or a watcher holds it. `doing`: the user's command (deploy,
    destroy), named in the refusal."""
    jobs = JobRecords(records)
    holder = holder_id(f"{doing}-{secrets.token_hex(4)}")
    for _ in range(LEASE_TRIES):
        with holding_lease(jobs, job, holder) as lease:
            if lease is not None:
                yield
                return
        live_placement(records, job, doing=doing)  # a move's journal open: its line says so
        held = jobs.current(job)
        if held is not None and held.holder and held.expires_at > datetime.now(UTC):
            raise OperationFailed(
                f"job {job} is held by {held.describe()} — {doing} when it is done "
                "(`route status` shows the job's move, if any)"
            )
        # Refused, yet nobody holds it now: its holder gave it back in between. Ask again, as a
        # refused lock waits for its holder's name (router.engine.lock_holders).
        time.sleep(LEASE_RETRY_S)
    raise OperationFailed(
        f"job {job}: its lease kept changing hands for {LEASE_TRIES * LEASE_RETRY_S:.0f} s — "
        f"{doing} again in a moment"
    )


def local_records(project: Project) -> RecordStore | None:
    """The backend's records when they are local files, else None: `route plan --write` and
    `route review` run in CI, with no network and no credential."""
    from router.config.home import spotroute_home
    from router.config.org_file import org_config_for
    from router.engine.automation import choose_backend
    from router.engine.records import records_for

    home = spotroute_home()
    backend = choose_backend(home, org_config_for(project).backend_url)
    if not backend.url.startswith("file://"):
        return None
    return records_for(backend.url, home, is_default=backend.is_default)


def live_stack(project: Project, job: str, records: RecordStore | None) -> str:
    """The stack whose file is the job's now: the placement record's (`<job>.2` after a move)
    when `records` are given, else the newest of the job's stack files in the project."""
    record = read_placement(records, job) if records is not None else None
    stack = record.get("stack") if isinstance(record, dict) else None
    if isinstance(stack, str) and stack:
        return stack
    return newest_stack_file(project.stacks_dir, job)


def with_move_env(job: Job, project: Project, stack: str) -> Job:
    """The job with the MOVE_ENV its live stack's config holds (unchanged for a first stack)."""
    running = read_stack_file(project.stack_config_path(stack)).get("job")
    env = running.get("env") if isinstance(running, dict) else None
    kept = {
        k: v
        for k, v in (env.items() if isinstance(env, dict) else ())
        if k in MOVE_ENV and k not in job.run.env and isinstance(v, str)
    }
    if not kept:
        return job
    run = job.run.model_copy(update={"env": {**job.run.env, **kept}})
    return job.model_copy(update={"run": run})


def at_live_site(live: LivePlacement, ranked: Sequence[Placement]) -> list[Placement]:
    """The ranked placements at the job's live site; OperationFailed (the plan would move the
    job: that is `route migrate`'s, with its checkpoint) when none is."""
    same = [p for p in ranked if _same_site(placement_site(p), live.site)]
    if same:
        return same
    best = ranked[0] if ranked else None
    wanted = f" and this deploy would place it at {_where(placement_site(best))}" if best else ""
    to = f" --to {best.cloud}/{best.region}" if best else ""
    raise OperationFailed(
        f"job {live.job} runs at {live.where()} (stack {live.stack}){wanted} — a deploy only "
        f"updates a job where it runs: `route migrate {live.job}{to}` moves it with its "
        f"checkpoint, or `route destroy {live.job}` first"
    )


def _same_site(p: dict[str, Any], q: dict[str, Any]) -> bool:
    return all((p.get(k) or None) == (q.get(k) or None) for k in SITE_KEYS)


def _where(site: dict[str, Any]) -> str:
    parts = [site.get(k) for k in ("cloud", "region", "zone")]
    kind = ", ".join(str(site[k]) for k in ("instance_type", "market") if site.get(k))
    return "/".join(str(p) for p in parts if p) + f" ({kind})"
