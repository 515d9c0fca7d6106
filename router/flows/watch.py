"""`route watch`: the reconcile loop — per job observe, decide (the pure, shared decide()), act.

Observe: the job's placement record and stack outputs, whether its process/instances still run,
the checkpoint files (newest complete checkpoint, interruption marker, finished record) and
today's prices (the planner's ranked placements, minus zones blocked by launch failures).
Decide: router.core.decide.decide — the same function the backtest replays. Act: migrate
(move / switch-market), re-place after an interruption, or stay; a finished or crashed job's
stacks are destroyed (its checkpoints kept), so nothing of it bills — recorded before it acts,
finished by the next pass if the watcher dies meanwhile (router/flows/teardown.py); every
decision is recorded with its numbers in the state backend, shown by `route status JOB --history`.

One job's failure is recorded and never stops the others. Jobs are observed and decided
concurrently (a thread pool of `concurrency`); engine actions run one at a time per watcher
process (the Pulumi inline-program runtime is process-global). A lease per job in the backend
means two watchers never act on one job at once; the one that comes second decides on what the
first left (after a move: within the cooldown, stay), so each action is taken once.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.config import checkpoints as ckpt
from router.config.project import Project
from router.core.decide import decide
from router.core.decision_model import (
    CRASHED,
    DECISION_PERIOD_S,
    MOVE,
    REPLACE,
    SWITCH_MARKET,
    Current,
    Decision,
    History,
    Progress,
    Rules,
    TransferCosts,
    job_data_sets,
    work_at_risk_s,
)
from router.core.errors import RouteError
from router.core.journal import job_of_stack
from router.core.node_exit import all_exited
from router.engine.job_records import holder_id
from router.engine.processes import sweep_orphans
from router.flows import teardown
from router.flows.jobs import clear_stale_locks
from router.flows.migrate import LeaseLost, Mover, _group_alive
from router.flows.node_exits import block_if_unformed, exits_and_crash, finished_at
from router.flows.watch_events import PassReport, price_ages
from router.flows.watch_pace import WatchPace, boot_prior_s

DEFAULT_INTERVAL_S = DECISION_PERIOD_S  # the decision period decide() assumes by default
DEFAULT_CONCURRENCY = 4
NodePoll = Callable[[dict[str, Any]], Any]  # placement record → router.nodes NodeState | None


@dataclass(frozen=True, slots=True)
class PlacedCapacity:
    """The placement a job is on, as decide() sees it (price now where the market says)."""

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    market: str
    price_per_hour: float
    interruptions_per_hour: float = 0.0


@dataclass
class JobReport:
    """What the watcher did with one job in one pass."""

    job: str
    # stay | move | switch-market | replace | wait | crashed | finished | recovered | skipped
    # | error
    action: str
    reason: str
    decision: dict[str, Any] | None = None
    journal: str | None = None
    outcome: str | None = None  # done | rolled-back | open (journal)
    router_s: float = 0.0  # seconds spent in the router for this job, engine excluded
    decide_s: float = 0.0  # seconds in decide() alone
    engine_s: float = 0.0  # seconds in engine actions (migrations)
    price_ages_s: dict[str, float] = field(default_factory=dict)  # oldest compared, per source

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "action": self.action,
            "reason": self.reason,
            "decision": self.decision,
            "journal": self.journal,
            "outcome": self.outcome,
            "router_s": round(self.router_s, 6),
            "decide_s": round(self.decide_s, 6),
            "engine_s": round(self.engine_s, 3),
        }


@dataclass
class Watcher:
    project: Project
    nodes: NodePoll | None = None  # the clouds' node pollers (default: router.nodes)
    interval_s: float = DEFAULT_INTERVAL_S
    concurrency: int = DEFAULT_CONCURRENCY
    holder: str = field(default_factory=lambda: holder_id(f"watch-{secrets.token_hex(4)}"))
    stop_requested: Callable[[], bool] = field(default=lambda: False)
    on_report: Callable[[JobReport], None] | None = None
    on_step: Callable[[Any, str, str], None] | None = None
    on_pass: Callable[[PassReport], None] | None = None  # logs and metrics (watch_events.py)
    _engine_lock: threading.Lock = field(default_factory=threading.Lock)
    _mover: Mover | None = None
    _evidence: dict[Any, Any] = field(default_factory=dict)  # per pool, read once a pass
    _pace: WatchPace = field(default_factory=WatchPace)  # its passes and launches, measured

    @property
    def mover(self) -> Mover:
        if self._mover is None:
            self._mover = Mover.for_project(
                self.project, self.holder, on_step=self.on_step, stop_requested=self.stop_requested
            )
        return self._mover

    def jobs(self) -> list[str]:
        """Every job with a stack in the backend or an open journal."""
        names = {job_of_stack(s.name) for s in self.mover.engine.list_stacks()}
        names |= {j for j in self.mover.records.jobs() if self.mover.records.open_journal(j)}
        names |= set(teardown.open_teardowns(self.mover.records.store))  # a watcher died in one
        return sorted(names)

    def once(self, jobs: Sequence[str] | None = None) -> list[JobReport]:
        """One pass over the jobs (all, or the ones named), at most `concurrency` at a time."""
        began, started = _now(), time.monotonic()
        try:
            # As `route status` does: what a killed route left (engine processes still writing, a
            # half-written state file) is settled before the backend is listed.
            sweep_orphans(self.mover.engine.home)
            self.mover.engine.repair_backend()
            self._evidence = _evidence(self.mover.records.store, began)
            names = list(jobs) if jobs is not None else self.jobs()
            with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
                reports = list(pool.map(self._guarded, names))
        except Exception as exc:
            why = exc.message if isinstance(exc, RouteError) else f"unexpected {exc!r}"
            self._passed(PassReport(began, time.monotonic() - started, error=why))
            raise
        self._pace.passed(time.monotonic() - started)
        self._passed(PassReport(began, time.monotonic() - started, tuple(reports)))
        return reports

    def _passed(self, done: PassReport) -> None:
        if self.on_pass is not None:
            self.on_pass(done)

    def loop(self, jobs: Sequence[str] | None = None) -> None:
        """Pass after pass every interval until stop_requested() (SIGTERM / Ctrl-C). A pass that
        fails as a whole (the backend unreachable) is reported through on_pass and tried again
        at the next interval: a service outlives a network blip."""
        while not self.stop_requested():
            started = time.monotonic()
            with contextlib.suppress(Exception):  # on_pass has it; the next pass retries
                self.once(jobs)
            while not self.stop_requested() and time.monotonic() - started < self.interval_s:
                time.sleep(0.2)

    # --- one job ----------------------------------------------------------------------------

    def _guarded(self, job: str) -> JobReport:
        started = time.monotonic()
        try:
            report = self._handle(job)
        except LeaseLost as exc:
            report = JobReport(job, "skipped", exc.message)
        except RouteError as exc:
            report = JobReport(job, "error", exc.message)
            self._record_error(job, exc.message)
        except Exception as exc:
            report = JobReport(job, "error", f"unexpected {type(exc).__name__}: {exc}")
            self._record_error(job, report.reason)
        report.router_s = time.monotonic() - started - report.engine_s
        if self.on_report is not None:
            self.on_report(report)
        return report

    def _record_error(self, job: str, message: str) -> None:
        with contextlib.suppress(Exception):  # the report still says it
            self.mover.records.append_decision(
                job, {"at": _now().isoformat(), "by": "route watch", "action": "error",
                      "reason": message}
            )  # fmt: skip

    def _handle(self, job: str) -> JobReport:
        records = self.mover.records
        now = _now()
        lease = records.acquire(job, self.holder, self.mover.lease_ttl_s, now)
        if lease is None:
            held = records.current(job)
            return JobReport(job, "skipped", f"lease held by {held.describe() if held else '?'}")
        ran = False
        try:
            journal = records.open_journal(job)
            pending = teardown.read(records.store, job)
            if pending is not None and not pending.done:  # begun by a watcher that died
                report = self._tear_down(job, pending)
                ran = True
            elif journal is not None:
                engine_started = time.monotonic()
                with self._engine_lock:
                    journal = self.mover.run(journal)
                ran = True
                report = JobReport(
                    job, "recovered", f"finished the open journal of a {journal.kind}",
                    journal=journal.id, outcome=journal.outcome,
                    engine_s=time.monotonic() - engine_started,
                )  # fmt: skip
            else:
                report = self._decide_and_act(job, now)
                ran = True
            # After the journal ran: a killed move's lock on a stack it deleted, say, is left
            # behind by the engine; nothing else would ever clear it.
            cleared: list[str] = []
            clear_stale_locks(self.mover.engine, job, cleared.append)
            report.reason = "; ".join((report.reason, *cleared))
            return report
        finally:
            records.release(job, self.holder, _now(), ran=ran)

    def _decide_and_act(self, job: str, now: datetime) -> JobReport:
        from router.flows.live_placement import read_placement

        records = self.mover.records
        record = read_placement(self.mover.engine.records(), job)
        if record is None:
            last = records.last_decision(job)
            if last is not None and last.get("action") in ("finished", CRASHED):
                # Torn down by an earlier pass: still so, nothing left to watch or bill.
                return JobReport(job, str(last["action"]), str(last.get("reason") or ""))
            return JobReport(job, "skipped", "no placement recorded (deployed elsewhere?)")
        pace = self._pace  # the slack test counts how fast this watcher really acts
        observed = observe(self.project, record, now, self.nodes, evidence=self._evidence,
                           interval_s=pace.decision_period_s(self.interval_s),
                           launch_s=pace.launch_s())  # fmt: skip
        if observed.finished:
            why = f"finished at step {observed.finished_step}"
            if observed.finished_at is not None and not record.get("finished_at"):
                # Its nodes power off after the job (router.contract.clouds): route report ends
                # its bill then, however long the teardown below takes.
                done = {**record, "finished_at": observed.finished_at.isoformat()}
                self.mover.engine.records().put(f"placements/{job}", done)
            pending = teardown.begin(records.store, record, teardown.FINISHED, why, now)
            return self._tear_down(job, pending)
        if observed.current.interrupted and not record.get("lost_at"):
            # Its nodes are gone: it neither runs nor bills from now (route report ends it here).
            gone = {**record, "lost_at": now.isoformat()}
            self.mover.engine.records().put(f"placements/{job}", gone)
        state = records.read_state(job)
        history = _history(state)
        rules = observed.rules
        started = time.perf_counter()
        decision = decide(
            rules, observed.progress, observed.current, observed.candidates, history, now
        )
        decide_s = time.perf_counter() - started
        entry = {
            "at": now.isoformat(),
            "by": "route watch",
            "action": decision.action,
            "reason": decision.reason,
            "numbers": decision.numbers.to_json(),
            "target": decision.to_json()["target"],
            "current": {
                "stack": record.get("stack") or job,
                **{k: record.get(k) for k in ("cloud", "region", "zone", "market")},
                "price_per_hour": observed.current.placement.price_per_hour,
                "interrupted": observed.current.interrupted,
                **({"nodes": observed.nodes} if observed.nodes else {}),
                **({"exits": observed.exits} if observed.exits else {}),
            },
            "progress": {
                "done_h": observed.progress.done_h,
                "checkpointed_h": observed.progress.checkpointed_h,
                "total_h": observed.progress.total_h,
                **(
                    {"checkpoint_error": observed.checkpoint_error}
                    if observed.checkpoint_error
                    else {}
                ),
            },
            "considered": decision.considered,
        }
        if decision.commit_on_demand and not state.get("committed_on_demand"):
            state["committed_on_demand"] = True
            records.write_state(job, state)
        if decision.action == CRASHED:  # not re-placed; and where it is, nothing may bill
            records.append_decision(job, {**entry, "acted": True})
            why = str(observed.current.crashed)
            report = self._tear_down(job, teardown.begin(records.store, record, CRASHED, why, now))
            report.decision, report.decide_s = decision.to_json(), decide_s
            return report
        report = JobReport(job, decision.action, decision.reason, decision.to_json(),
                           decide_s=decide_s)  # fmt: skip
        report.price_ages_s = price_ages(observed.candidates)
        if decision.action in (MOVE, SWITCH_MARKET, REPLACE) and decision.target is not None:
            target = observed.placement_for(decision)
            if observed.current.interrupted:
                lost = list(state.get("lost_zones") or [])
                p = observed.current.placement
                # The instance type too: the preemptions seen per pool are the interruption
                # model's evidence (router/flows/zone_evidence.py).
                lost.append(
                    [[p.cloud, p.region, p.zone or p.region], now.isoformat(), p.instance_type]
                )
                state["lost_zones"] = lost[-20:]
                records.write_state(job, state)
            kind = "replace" if decision.action == REPLACE else "migrate"
            engine_started = time.monotonic()
            with self._engine_lock:
                journal = self.mover.begin(job, target, decision.reason, kind=kind)
                entry["journal"] = journal.id
                records.append_decision(job, {**entry, "acted": True})
                journal = self.mover.run(journal)
            self._pace.launched(journal)
            report.engine_s = time.monotonic() - engine_started
            report.journal, report.outcome = journal.id, journal.outcome
            records.append_decision(
                job, {"at": _now().isoformat(), "by": "route watch", "action": "outcome",
                      "journal": journal.id, "outcome": journal.outcome,
                      "reason": f"{kind} {journal.outcome}"
                      + (f": {journal.rollback_reason}" if journal.rollback_reason else "")}
            )  # fmt: skip
            return report
        records.append_decision(job, {**entry, "acted": False})
        return report


    def _tear_down(self, job: str, pending: teardown.Teardown) -> JobReport:
        """Destroy the placement a recorded teardown names (network, NAT gateway, public address,
        nodes, identity), keep its checkpoints, record it done (router/flows/teardown.py); run
        again after a kill, it converges on whatever is left."""
        from router.flows.jobs import destroy_job
        from router.flows.live_placement import read_placement
        from router.flows.migrate import kill_point

        engine, records = self.mover.engine, self.mover.records
        started = time.monotonic()
        kill_point("after:teardown-recorded")
        deleted = 0
        left = any(job_of_stack(s.name) == job for s in engine.list_stacks())
        if left or read_placement(engine.records(), job) is not None:
            with self._engine_lock:
                deleted = destroy_job(job, project=self.project, reason=pending.reason,
                                      engine=engine, forget=False)  # fmt: skip
        kill_point("after:teardown-destroyed")
        done = teardown.finish(records.store, pending, deleted, _now())
        kept = f"; checkpoints kept at {done.checkpoints}" if done.checkpoints else ""
        gone = f"destroyed its placement ({deleted} resources) so nothing bills{kept}"
        entry = {"at": done.done_at, "by": "route watch", "acted": True,
                 "checkpoints": done.checkpoints or None, "stack": done.stack}  # fmt: skip
        if done.reason == teardown.FINISHED:
            reason = f"{done.why}: {gone}"
            records.append_decision(job, {**entry, "action": "finished", "reason": reason})
            teardown.forget(records.store, job)  # nothing to show: the decision says it all
        else:  # the crash was the decision; this is what came of it
            reason = f"crashed: {done.why} — {gone}; fix the job, then `route deploy` it again"
            records.append_decision(job, {**entry, "action": "outcome", "reason": reason})
        action = teardown.FINISHED if done.reason == teardown.FINISHED else CRASHED
        return JobReport(job, action, reason, engine_s=time.monotonic() - started)


def _now() -> datetime:
    return datetime.now(UTC)


def _evidence(store: Any, now: datetime) -> dict[Any, Any]:
    """The records' evidence per pool; a pass goes on without it (the buckets still price)."""
    from router.flows.zone_evidence import observed_evidence

    try:
        return dict(observed_evidence(store, now))
    except (RouteError, OSError, ValueError):
        return {}


def _history(state: dict[str, Any]) -> History:
    lost = tuple(
        ((str(item[0][0]), str(item[0][1]), str(item[0][2])), datetime.fromisoformat(item[1]))
        for item in state.get("lost_zones") or []
    )
    last = state.get("last_move_at")
    return History(
        last_move_at=datetime.fromisoformat(last) if last else None,
        lost_zones=lost,
        committed_on_demand=bool(state.get("committed_on_demand")),
    )


@dataclass
class Observation:
    """What route watch saw of one job: progress, where it is, what it could use now."""

    rules: Rules
    progress: Progress
    current: Current
    candidates: list[Any]
    finished: bool = False
    finished_step: int | None = None
    finished_at: datetime | None = None  # when it ended there (finished record, else exits)
    nodes: dict[str, Any] | None = None  # what the cloud said of the nodes (router.nodes)
    checkpoint_error: str | None = None  # why the checkpoint storage could not be read
    exits: list[str] = field(default_factory=list)  # what nodes said as the job ended there

    def placement_for(self, decision: Decision) -> Any:
        t = decision.target
        assert t is not None
        return next(c for c in self.candidates if c is t)


def observe(
    project: Project,
    record: dict[str, Any],
    now: datetime,
    nodes: NodePoll | None = None,
    *,
    evidence: dict[Any, Any] | None = None,
    interval_s: float = DEFAULT_INTERVAL_S,
    launch_s: float | None = None,
) -> Observation:
    """Read one job's state: record, process or the cloud's nodes, checkpoint files, prices now
    (no engine call). `nodes` polls the cloud (default: router.nodes.sources.poll_placement);
    `evidence` is what the records say of each pool (the planner prices spot with it);
    `interval_s` is how often decide() is asked (its decision period); `launch_s` how long a
    re-placement takes to launch (None: the clouds' boot, router/flows/watch_pace.py)."""
    from router.config.blocks import read_blocks
    from router.config.datafiles import load_egress, load_startup_figures
    from router.config.home import spotroute_home
    from router.config.local_market import local_clock
    from router.core.failover import blocking
    from router.flows.plan import plan_job

    job_file = Path(str(record.get("job_file") or ""))
    if not job_file.is_file():
        raise RouteError(f"job {record.get('job')}: its job file {job_file} is gone — redeploy it")
    report = plan_job(job_file, project=project, now=now, evidence=evidence or {})
    job = report.job
    outputs = record.get("outputs") or {}
    latest, done, storage_error = checkpoint_progress(str(outputs.get("checkpointUrl", "")))
    alive = _group_alive(outputs)
    # The local target too: its nodes' own records say booting / running / exited.
    seen_nodes = _poll_nodes(record, nodes)
    if seen_nodes is not None and seen_nodes.get("interrupted"):
        alive = False  # the cloud reclaimed a node: an interruption, like the library's marker
    deployed_at = datetime.fromisoformat(record["deployed_at"])
    exits, crashed = exits_and_crash(record, deployed_at, seen_nodes)
    if crashed is None:
        block_if_unformed(record, exits, now)
    if exits:
        alive = False  # a node stopped running the job: it does not go on there
    if (done is not None or all_exited(exits)) and not alive:
        step = int(done.get("step", 0)) if done is not None else (latest.step if latest else 0)
        return Observation(
            Rules(), Progress(1, 1, 1, now), Current(_placed(record, []), now), [], True, step,
            finished_at(done, exits, deployed_at, now),
        )  # fmt: skip
    before_h = float(record.get("run_h_before") or 0.0)
    ran_h = max(0.0, (now - deployed_at).total_seconds() / 3600)
    ckpt_h = before_h
    if latest is not None and latest.time is not None:
        ckpt_h = before_h + max(0.0, (latest.time - deployed_at).total_seconds() / 3600)
    done_h = before_h + ran_h if alive else ckpt_h
    submitted = datetime.fromisoformat(record.get("submitted_at") or record["deployed_at"])
    blocks = read_blocks(spotroute_home())
    candidates = [
        p for p in report.result.placements
        if blocking(blocks, p.cloud, p.region, p.zone, now) is None
    ]  # fmt: skip
    checkpoint = job.checkpoint
    at_risk_s = checkpoint.interval_s if checkpoint else 1800.0
    # The local target's market may run on a faster clock (a rehearsal's): its zones' outages
    # and its nodes' notice, in real seconds, are the market's ÷ its time scale.
    scale, local_notice_s = (
        local_clock(report.org, project.root) if record.get("cloud") == "local" else (1.0, None)
    )
    if checkpoint is not None:
        # The deployed job's checkpoint library saves on its cloud's spot notice
        # (components/startup.py sets SPOTROUTE_NOTICE_SOURCE): a preemption costs the notice
        # window, as the backtest's job_rules weighs it.
        notices = {c: f.notice_s for c, f in load_startup_figures().items() if f.notice_s > 0}
        if local_notice_s:
            notices["local"] = local_notice_s
        clouds = {p.cloud for p in candidates}
        if record.get("cloud"):
            clouds.add(str(record["cloud"]))
        at_risk_s = work_at_risk_s(at_risk_s, notices, clouds)
    rules = Rules(
        node_count=job.node_count,
        min_savings_pct=job.migration.min_savings_pct,
        cooldown_s=job.migration.cooldown_s,
        checkpoint_interval_s=at_risk_s,
        restore_overhead_s=checkpoint.restore_overhead_s if checkpoint else 600.0,
        handover_s=Rules().handover_s / scale,
        zone_block_s=Rules().zone_block_s / scale,
        decision_period_s=interval_s,
        launch_s=launch_s if launch_s is not None else boot_prior_s(
            load_startup_figures(), {p.cloud for p in candidates}
        ),
        deadline=job.deadline,
        spot_wait_s=job.migration.spot_wait_s,  # without a deadline: may wait for spot this long
        transfers=TransferCosts(
            load_egress() if job.data or latest is not None else None,
            data_sets=job_data_sets(job),
            checkpoint_gb=(latest.total_bytes / 1e9) if latest else 0.0,
        ),
    )
    progress = Progress(
        done_h=min(done_h, job.duration_hours),
        checkpointed_h=min(ckpt_h, done_h, job.duration_hours),
        total_h=job.duration_hours,
        started_at=submitted,
    )
    return Observation(
        rules, progress, Current(_placed(record, candidates), deployed_at, not alive, crashed),
        candidates, nodes=seen_nodes, checkpoint_error=storage_error,
        exits=[e.describe() for e in exits],
    )  # fmt: skip


def checkpoint_progress(
    url: str,
) -> tuple[ckpt.CheckpointInfo | None, dict[str, Any] | None, str | None]:
    """(newest complete checkpoint, finished record, storage error) at the job's checkpoint URL,
    on any storage the URL names (file://, s3://, gs://, Azure Blob) through the drivers'
    own credentials. Storage that cannot be read is noted, never fatal: the job is then judged
    as if it had no checkpoint yet (the most recompute, so the least eager to move)."""
    if not url:
        return None, None, None
    try:
        store = ckpt.checkpoint_store(url)
        return ckpt.latest_checkpoint(store), ckpt.finished(store), None
    except ckpt.CheckpointStorageError as exc:
        return None, None, exc.message


def _poll_nodes(record: dict[str, Any], nodes: NodePoll | None) -> dict[str, Any] | None:
    """The cloud's word on the placement's nodes; a failed poll is noted, never fatal (the
    marker and the next pass still see an interruption)."""
    from router.nodes.sources import poll_placement

    started = time.perf_counter()
    try:
        state = (nodes or poll_placement)(record)
    except RouteError as exc:
        return {"interrupted": False, "error": exc.message}
    if state is None:
        return None
    return {**state.to_json(), "poll_s": round(time.perf_counter() - started, 4)}


def _placed(record: dict[str, Any], candidates: Sequence[Any]) -> PlacedCapacity:
    here = {k: record.get(k) for k in ("cloud", "region", "zone", "instance_type", "market")}
    for p in candidates:
        if all(getattr(p, k) == v for k, v in here.items()):
            return PlacedCapacity(
                p.cloud, p.region, p.zone, p.instance_type, p.market, p.price_per_hour,
                p.interruptions_per_hour,
            )  # fmt: skip
    return PlacedCapacity(
        str(here["cloud"]), str(here["region"]), here["zone"], str(here["instance_type"]),
        str(here["market"]), float(record.get("price_per_hour") or 0.0),
    )  # fmt: skip


# --- route status --history -----------------------------------------------------------------------


def job_history(job: str, *, project: Project) -> dict[str, Any]:
    """Every decision and journal of the job, oldest first (route status JOB --history)."""
    from router.engine.job_records import JobRecords
    from router.flows.jobs import engine_for

    records = JobRecords(engine_for(project).records())
    journals = [j.to_json() for j in records.closed_journals(job)]
    current = records.open_journal(job)
    if current is not None:
        journals.append(current.to_json())
    return {"job": job, "decisions": records.decisions(job), "journals": journals}
