"""Moving a running job: `route migrate`, and the re-placement `route watch` does after a loss.

The steps and their journal are router.core.journal; this module acts on them. Every step
writes `begun` to the journal before it acts and `done` after, and can run twice with the same
result, so `resume()` continues a journal a killed router left open (or rolls it back while
the old placement still exists). Invariants:

  - never two paid placements for longer than the hand-over: the old one is destroyed right
    after the new one confirms it resumed; a new one that fails is destroyed on rollback;
  - never zero placements without a complete checkpoint: the old placement is destroyed only
    after the new one restored a complete checkpoint;
  - never delete the only checkpoint: nothing here deletes checkpoints (the local target's
    checkpoint directory keeps every file; the checkpoint library prunes, keeping the newest).

SPOTROUTE_KILL_AT=<before|after>:<step> makes the router SIGKILL itself at that point (the
kill-point matrix of tests/engine/test_migration_kill_matrix.py); a Ctrl-C stops a move at a
step, its journal open, whatever the step was doing (router.flows.move_stops).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.config import checkpoints as ckpt
from router.config.project import Project
from router.core.errors import OperationFailed
from router.core.failover import launch_order, same_site
from router.core.journal import (
    STEPS,
    Journal,
    copied_elsewhere,
    describe_step,
    next_stack_name,
    place_text,
)
from router.core.placement import Placement
from router.engine.automation import Engine
from router.engine.job_records import LEASE_TTL_S, JobRecords
from router.flows.handover_bounds import complete_probation, job_gave_up, probation_env
from router.flows.move_stops import (
    KILL_ENV,
    interrupt_point,
    kill_point,
    stopped_at_a_step,
    stopping_at,
)

CHECKPOINT_TIMEOUT_S = 120.0  # the job must answer a save request within this
POLL_S = 0.1
RESTORE_STEP_ENV = "SPOTROUTE_RESTORE_STEP"  # the library's restore waits for this step
REMOTE_POLL_S = 1.0  # on an object store: one listing a second while waiting, not ten


class StepFailed(OperationFailed):
    """A journal step cannot be completed; before resume-confirmed this rolls back."""


class LeaseLost(OperationFailed):
    """Another watcher holds the job's lease; this one stops without touching the journal."""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Mover:
    """Runs journals for the jobs of one project; holds each job's lease while it acts."""

    project: Project
    engine: Engine
    holder: str
    records: JobRecords
    on_step: Callable[[Journal, str, str], None] | None = None  # (journal, step, what happened)
    stop_requested: Callable[[], bool] = field(default=lambda: False)
    checkpoint_timeout_s: float = CHECKPOINT_TIMEOUT_S
    lease_ttl_s: float = LEASE_TTL_S
    timings: dict[str, float] = field(default_factory=dict)  # step → seconds (benchmarks)

    @classmethod
    def for_project(cls, project: Project, holder: str, **kwargs: Any) -> Mover:
        from router.flows.jobs import engine_for

        engine = engine_for(project)
        return cls(project, engine, holder, JobRecords(engine.records()), **kwargs)

    # --- starting -----------------------------------------------------------------------------

    def begin(self, job: str, target: Placement, reason: str, *, kind: str = "migrate") -> Journal:
        """Write the journal's intent (after the kill point `before:intent`)."""
        if self.records.open_journal(job) is not None:
            raise OperationFailed(
                f"job {job}: a migration is already under way — `route watch --once` finishes it"
            )
        record = self._record(job)
        from_stack = str(record.get("stack") or job)
        used = {s.name for s in self.engine.list_stacks()} | {from_stack}
        used |= {j.to_stack for j in self.records.closed_journals(job)}
        now = _now()
        journal = Journal(
            id=f"{kind[0]}-{now:%Y%m%dT%H%M%S}-{secrets.token_hex(3)}",
            job=job,
            kind="replace" if kind == "replace" else "migrate",
            from_stack=from_stack,
            to_stack=next_stack_name(job, used),
            target=placement_record(target),
            reason=reason,
            created_at=now.isoformat(),
        )
        self._say(journal, "intent", f"{journal.kind} {job}: {journal.from_stack} → "
                  f"{journal.to_stack} ({place_text(journal.target)}): {reason}")  # fmt: skip
        return self._step(journal, "intent")

    # --- running ------------------------------------------------------------------------------

    def run(self, journal: Journal) -> Journal:
        """Run the journal to its end: done, or rolled back when a step fails before the point
        of no return. Stops between steps (journal left open) if stop_requested(); a step that
        fails once a stop was asked is Interrupted, its journal open (router.flows.move_stops)."""
        while journal.outcome == "open":
            self._renew(journal.job)
            if journal.rolling_back:
                with self._stopping_at(journal):
                    return self._rollback(journal)
            step = journal.next_step()
            if step is None:
                break
            if self.stop_requested():
                self._say(journal, step, "stopping before this step; the journal stays open")
                return journal
            gave_up = job_gave_up(journal)
            if gave_up is not None:  # the job ended the move from its side: undo ours
                journal = journal.start_rollback(gave_up)
                self.records.write_journal(journal)
                self._say(journal, step, f"{gave_up} — rolling back")
                continue
            started = time.monotonic()
            try:
                with self._stopping_at(journal):
                    journal = self._step(journal, step)
            except StepFailed as exc:
                if not journal.can_roll_back():
                    raise
                journal = journal.start_rollback(exc.message)
                self.records.write_journal(journal)
                self._say(journal, step, f"failed: {exc.message} — rolling back")
                continue
            self.timings[step] = self.timings.get(step, 0.0) + time.monotonic() - started
        return journal

    def _stopping_at(self, journal: Journal) -> contextlib.AbstractContextManager[None]:
        return stopping_at(
            journal, self.stop_requested, self.records.open_journal, passes=(LeaseLost,)
        )

    def _step(self, journal: Journal, step: str) -> Journal:
        kill_point(f"before:{step}")
        journal = journal.begin(step, _now())
        self.records.write_journal(journal)
        try:
            with interrupt_point(step):
                data = getattr(self, "_" + step.replace("-", "_"))(journal)
        except ckpt.CheckpointStorageError as exc:  # refused a read or write: a failed step
            raise StepFailed(exc.message) from None
        kill_point(f"after:{step}")
        journal = journal.finish(step, _now(), data)
        self.records.write_journal(journal)
        self._say(journal, step, describe_step(step, journal.data(step)))
        return journal

    # --- the steps (each idempotent) ------------------------------------------------------------

    def _intent(self, journal: Journal) -> dict[str, Any]:
        # What later steps need of the old placement, read before the record moves on.
        record = self._record(journal.job)
        outputs = record.get("outputs") or {}
        return {
            "checkpoint_url": str(outputs.get("checkpointUrl", "")),
            "old_outputs": outputs,
            "lost": self._record_place(record),
        }

    def _checkpoint_requested(self, journal: Journal) -> dict[str, Any]:
        if journal.kind == "replace":
            return {"skipped": "the old placement is gone: nothing to ask"}
        directory = self._old_checkpoint_dir(journal)
        ckpt.request_save(directory, journal.id, journal.from_stack, _now())
        return {"request": journal.id, "dir": directory.url}

    def _checkpoint_complete(self, journal: Journal) -> dict[str, Any]:
        directory = self._old_checkpoint_dir(journal)
        if journal.kind == "replace":
            latest = ckpt.latest_checkpoint(directory)
            return _ckpt_data(latest)
        deadline = time.monotonic() + self.checkpoint_timeout_s
        while True:
            found = ckpt.answered(directory, journal.id)
            if found is not None:
                return _ckpt_data(found)
            if not self._old_alive(journal):
                # Preempted meanwhile: the newest complete checkpoint is what there is.
                latest = ckpt.latest_checkpoint(directory)
                if latest is None:
                    raise StepFailed("the job stopped before any complete checkpoint")
                return {**_ckpt_data(latest), "note": "old placement gone; newest checkpoint"}
            if time.monotonic() > deadline:
                raise StepFailed(
                    f"the job did not answer the save request within "
                    f"{self.checkpoint_timeout_s:.0f} s (does it use the checkpoint library?)"
                )
            time.sleep(_poll_s(directory))

    def _new_stack_up(self, journal: Journal) -> dict[str, Any]:
        from router.flows.launch import LaunchFailed, launch
        from router.flows.plan import plan_job

        record = self._record(journal.job)
        job_file = Path(str(record.get("job_file") or ""))
        if not job_file.is_file():
            raise StepFailed(f"the job file {job_file} is gone: cannot plan the new placement")
        report = plan_job(job_file, project=self.project, now=_now())
        ranked = list(report.result.placements)
        wanted = journal.target
        lost = (journal.data("intent").get("lost") or {}) if journal.kind == "replace" else None
        candidates = launch_order(ranked, placement_record, wanted, lost=lost)
        if not candidates and journal.kind == "migrate":
            raise StepFailed(f"{place_text(wanted)} is no longer offered for this job")
        job = report.job
        step = journal.data("checkpoint-complete").get("step")
        env = {**job.run.env, **probation_env(journal)}  # it stops unless the move completes
        if step is not None:  # a new job on other storage waits for the copy of this step
            env[RESTORE_STEP_ENV] = str(step)
        if env != job.run.env:
            job = job.model_copy(update={"run": job.run.model_copy(update={"env": env})})
        try:
            outcome, proposal, tries = launch(
                job,
                report.org,
                candidates,
                project=self.project,
                confirm=lambda _r: True,
                stack=journal.to_stack,
                record=False,
                max_tries=1 if journal.kind == "migrate" else 3,
                job_file=job_file,
            )
        except LaunchFailed as exc:
            raise StepFailed(exc.message) from None
        from router.flows.placement_waits import budget_for

        budget = budget_for(job, report.org, proposal.chosen.cloud, self.project)
        return {
            "placement": placement_record(proposal.chosen),
            "outputs": outcome.outputs,
            "tries": [t.to_json() for t in tries],
            "budget": budget.to_json(),  # how long its nodes and the restore may take
        }

    def _checkpoint_copied(self, journal: Journal) -> dict[str, Any]:
        """Copy the hand-over checkpoint into the new placement's storage when it is elsewhere."""
        from router.config.checkpoint_copy import (
            copy_checkpoint,
            latest_complete_step,
            same_storage,
        )

        source = str(journal.data("intent").get("checkpoint_url") or "")
        outputs = journal.data("new-stack-up").get("outputs") or {}
        target = str(outputs.get("checkpointUrl") or "")
        if not source or not target or same_storage(source, target):
            return {"skipped": "the new placement uses the same checkpoint storage"}
        try:
            step = journal.data("checkpoint-complete").get("step")
            if step is None:
                step = latest_complete_step(source)
            if step is None:
                return {"skipped": f"no complete checkpoint at {source} to copy"}
            return copy_checkpoint(source, target, int(step)).to_json()
        except OperationFailed as exc:
            raise StepFailed(exc.message) from None

    def _resume_confirmed(self, journal: Journal) -> dict[str, Any]:
        """Wait for the new nodes to run, then for the job's resume record, each phase within
        its budget (router.flows.placement_waits): `up` returns before any node runs."""
        from router.flows import placement_waits as waits

        up = journal.data("new-stack-up")
        outputs = up.get("outputs") or {}
        # Unreadable there (no driver, no access): StepFailed → rollback, the new stack goes.
        directory = ckpt.checkpoint_store(str(outputs.get("checkpointUrl", "")))
        want = journal.data("checkpoint-complete").get("step")
        budget = waits.recorded_budget(up)
        place = {**(up.get("placement") or journal.target), "outputs": outputs}
        try:
            ran = waits.wait_nodes_running(place, budget, stack=journal.to_stack)
        except waits.PhaseTimedOut as exc:
            raise StepFailed(exc.message) from None
        # While it restores: its exit records and nodes say at once if the job ended there.
        begun = journal.steps["new-stack-up"]
        since = datetime.fromisoformat(begun.first_begun_at or begun.begun_at)
        end = waits.EndWatch(place, journal.to_stack, since.replace(microsecond=0))
        try:
            said = waits.wait_resumed(
                directory,
                lambda said: _written_by_new_job(said, journal)
                and (want is None or int(said.get("step", -1)) >= int(want)),
                budget, end, poll_s=_poll_s(directory), alive=lambda: _group_alive(outputs),
                # Nodes the cloud could not be asked about: their budget goes to the restore.
                extra_s=0.0 if ran.observed else budget.real_nodes_s(),
            )  # fmt: skip
        except (waits.JobEnded, waits.PhaseTimedOut) as exc:
            raise StepFailed(exc.message) from None
        self._switch_record(journal, up)
        complete_probation(journal, _now())  # the new job is the job; the old one may stop
        return {
            "step": said.get("step"),
            "placement": journal.to_stack,
            "nodes_running_after_s": round(ran.waited_s, 3),
            **({"nodes_note": ran.note} if ran.note else {}),
        }

    def _old_stack_down(self, journal: Journal) -> dict[str, Any]:
        from router.flows.jobs import destroy_stack

        keep = not copied_elsewhere(journal)
        deleted = destroy_stack(
            self.engine, journal.from_stack, project=self.project, keep_checkpoints=keep
        )
        with contextlib.suppress(OperationFailed):
            ckpt.withdraw_request(self._old_checkpoint_dir(journal), journal.id)
        return {"deleted": deleted, "checkpoints": "kept" if keep else "deleted (copied)"}

    def _done(self, journal: Journal) -> dict[str, Any]:
        state = self.records.read_state(journal.job)
        now = _now()
        if journal.kind == "migrate":
            state["last_move_at"] = now.isoformat()
        state.setdefault("moves", 0)
        state["moves"] = int(state["moves"]) + 1
        self.records.write_state(journal.job, state)
        return {}

    # --- rollback -------------------------------------------------------------------------------

    def _rollback(self, journal: Journal) -> Journal:
        """Undo a journal that failed before the point of no return; the old placement stays."""
        from router.flows.jobs import destroy_stack

        kill_point("before:rollback")
        # The new stack's own bucket holds at most a copy of the old placement's checkpoints and
        # what the abandoned new job wrote: the job goes on from the old ones, so it is deleted.
        destroy_stack(self.engine, journal.to_stack, project=self.project, keep_checkpoints=False)
        with contextlib.suppress(OperationFailed):
            ckpt.withdraw_request(self._old_checkpoint_dir(journal), journal.id)
        journal = journal.rolled_back(_now())
        self.records.write_journal(journal)
        self._say(journal, "rollback", f"rolled back: {journal.rollback_reason}")
        return journal

    # --- helpers --------------------------------------------------------------------------------

    def _renew(self, job: str) -> None:
        if self.records.acquire(job, self.holder, self.lease_ttl_s, _now()) is None:
            raise LeaseLost(f"job {job}: another watcher holds its lease now; stopped")

    def _say(self, journal: Journal, step: str, what: str) -> None:
        if self.on_step is not None:
            self.on_step(journal, step, what)

    def _record(self, job: str) -> dict[str, Any]:
        from router.flows.live_placement import read_placement

        record = read_placement(self.engine.records(), job)
        if record is None:
            raise OperationFailed(
                f"job {job}: no placement recorded — deploy it with `route deploy`"
            )
        return record

    @staticmethod
    def _record_place(record: dict[str, Any]) -> dict[str, Any]:
        return {k: record.get(k) for k in ("cloud", "region", "zone", "instance_type", "market")}

    def _old_checkpoint_dir(self, journal: Journal) -> ckpt.CheckpointStore:
        try:
            return ckpt.checkpoint_store(str(journal.data("intent").get("checkpoint_url", "")))
        except OperationFailed as exc:  # not readable here: roll back, the job stays
            raise StepFailed(exc.message) from None

    def _old_alive(self, journal: Journal) -> bool:
        return _group_alive(journal.data("intent").get("old_outputs") or {})

    def _switch_record(self, journal: Journal, up: dict[str, Any]) -> None:
        """The job's placement record now names the new stack (idempotent)."""
        from router.flows.live_placement import placement_key, read_placement

        records = self.engine.records()
        before = read_placement(records, journal.job) or {}
        if before.get("stack") == journal.to_stack:
            return
        p = up.get("placement") or {}
        now = _now()
        ended = datetime.fromisoformat(before["lost_at"]) if before.get("lost_at") else now
        run_h = float(before.get("run_h_before") or 0.0)
        if before.get("deployed_at"):
            run_h += (ended - datetime.fromisoformat(before["deployed_at"])).total_seconds() / 3600
        record = {
            **{k: before.get(k) for k in ("job_file", "submitted_at")},
            "job": journal.job,
            "cloud": p.get("cloud"),
            "region": p.get("region"),
            "zone": p.get("zone"),
            "instance_type": p.get("instance_type"),
            "market": p.get("market"),
            "gpu": p.get("gpu"),
            "gpu_count": p.get("gpu_count"),
            "node_count": p.get("node_count"),
            "price_per_hour": p.get("price_per_hour"),
            "price_source": p.get("price_source"),
            "stack": journal.to_stack,
            "deployed_at": now.isoformat(),
            "outputs": up.get("outputs") or {},
            "run_h_before": run_h,
            "previous": {
                "stack": before.get("stack") or journal.job,
                **self._record_place(before),
                "price_per_hour": before.get("price_per_hour"),
                "until": now.isoformat(),
            },
        }
        # The placement left behind is over: keep it for `route report` (one key per start, so a
        # step re-run after a crash writes it once), then the live record moves on.
        from router.flows.report import record_ended

        record_ended(records, before, now, "migrated")
        records.put(placement_key(journal.job), record)


def placement_record(p: Placement) -> dict[str, Any]:
    """What a journal and a placement record keep of a placement (USD per instance-hour)."""
    from router.core.placement import placement_site

    return {
        **placement_site(p),
        "price_per_hour": p.price_per_hour,
        "list_price_per_hour": p.list_price_per_hour,
        "node_count": p.node_count,
        "price_source": p.price_source,
        "interruptions_per_hour": p.interruptions_per_hour,
    }


def _ckpt_data(info: ckpt.CheckpointInfo | None) -> dict[str, Any]:
    if info is None:
        return {"step": None, "path": None, "bytes": 0}
    return {"step": info.step, "path": info.path, "bytes": info.total_bytes}


def _written_by_new_job(said: dict[str, Any], journal: Journal) -> bool:
    """The resume record names the new stack; or names none (a cloud node need not know its
    stack) and was written after the new stack was begun."""
    if said.get("placement"):
        return said.get("placement") == journal.to_stack
    record = journal.steps.get("new-stack-up")
    try:
        written = datetime.fromisoformat(str(said.get("time")))
        begun = datetime.fromisoformat(record.begun_at) if record else None
        return begun is not None and written >= begun.replace(microsecond=0)
    except (ValueError, TypeError):  # no time, or one without a zone
        return False


def _poll_s(store: ckpt.CheckpointStore) -> float:
    return POLL_S if store.is_local else REMOTE_POLL_S


def _group_alive(outputs: dict[str, Any]) -> bool:
    """Whether a local group has a node process alive; a cloud group is assumed to run (its
    node poller says more)."""
    from components.local_nodes import group_alive
    from router.contract.local_node import launch_dir_of, legacy_process_of

    group = str(outputs.get("groupId", ""))
    if launch_dir_of(group) is None and legacy_process_of(group) is None:
        return True
    return group_alive(group)


__all__ = ["KILL_ENV", "STEPS", "LeaseLost", "Mover", "StepFailed", "kill_point"]


# --- route migrate ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MigrationOutcome:
    journal: Journal
    timings: dict[str, float]  # seconds per step


def choose_target(
    job: str, *, project: Project, to: str | None, now: datetime
) -> tuple[Placement, dict[str, Any]]:
    """The best placement for the job now within `to`, other than where it runs; + its record."""
    from router.flows.jobs import engine_for
    from router.flows.live_placement import read_placement
    from router.flows.plan import plan_job
    from router.flows.proposals import candidates_within

    engine = engine_for(project)
    record = read_placement(engine.records(), job)
    if record is None:
        raise OperationFailed(f"job {job}: no placement recorded — deploy it with `route deploy`")
    job_file = Path(str(record.get("job_file") or ""))
    if not job_file.is_file():
        raise OperationFailed(
            f"job {job}: its job file {job_file} is gone — redeploy with `route deploy JOB_FILE`"
        )
    report = plan_job(job_file, project=project, now=now)
    here = {k: record.get(k) for k in ("cloud", "region", "zone", "instance_type", "market")}
    others = [p for p in report.result.placements if not same_site(placement_record(p), here)]
    candidates = candidates_within(report.job, others, to, job_file)
    return candidates[0], record


def migrate_job(
    job: str,
    *,
    project: Project,
    to: str | None,
    holder: str,
    confirm: Callable[[Placement, dict[str, Any]], bool],
    on_step: Callable[[Journal, str, str], None] | None = None,
    stop_requested: Callable[[], bool] = lambda: False,
) -> MigrationOutcome | None:
    """`route migrate`: move the job within `to`; None if declined; Interrupted on a stop."""
    mover = Mover.for_project(project, holder, on_step=on_step, stop_requested=stop_requested)
    now = _now()
    if mover.records.acquire(job, holder, mover.lease_ttl_s, now) is None:
        lease = mover.records.current(job)
        raise OperationFailed(
            f"job {job} is held by {lease.describe() if lease else 'another router'} — try "
            "again when it is done"
        )
    try:
        open_journal = mover.records.open_journal(job)
        if open_journal is not None:  # a killed router's move: finish it first
            journal = stopped_at_a_step(mover.run(open_journal))
            return MigrationOutcome(journal, dict(mover.timings))
        target, record = choose_target(job, project=project, to=to, now=now)
        if not confirm(target, record):
            return None
        reason = (
            f"route migrate{' --to ' + to if to else ''}: "
            f"${record.get('price_per_hour') or 0:,.2f}/h → ${target.price_per_hour:,.2f}/h"
        )
        journal = mover.begin(job, target, reason)
        journal = mover.run(journal)
        mover.records.append_decision(
            job,
            {
                "at": _now().isoformat(),
                "by": "route migrate",
                "action": "move",
                "reason": reason,
                "target": placement_record(target),
                "journal": journal.id,
                "outcome": journal.outcome,
            },
        )
        return MigrationOutcome(stopped_at_a_step(journal), dict(mover.timings))
    finally:
        mover.records.release(job, holder, _now())

