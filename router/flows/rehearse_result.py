"""What a rehearsal ran, measured and predicted (router/flows/rehearse.py has run it).

- **Realised**: the records `route report` reads (router.flows.report: placements, their ends,
  the hand-over overlaps of the journals) give each job's cost; the journals its moves and
  re-placements; the local nodes' `reclaim.json` its preemptions; the rehearsal job's own
  events (router/checkpoint/rehearsal_job.py) its restores, the work it did twice and when it
  finished; its last checkpoint whether all its work was done, once.
- **Measured**: a restart — from the last progress of a run to the next run training again —
  and a move's hand-over overlap, in simulated seconds (router.core.rehearsal.Measured).
- **Predicted**: `route backtest`'s simulation (router.core.backtest.run_backtest) of the policy
  `route watch` runs, on the trace as the local market offers it, fed those measurements.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.core.backtest_model import JobRun, Trace
from router.core.journal import launch_seconds
from router.core.rehearsal import (
    REHEARSED_POLICY,
    Clock,
    JobPlan,
    Measured,
    expected_state,
    local_trace,
    predicted_workload,
)
from router.core.rehearsal_compare import RanJob, Stint, Verdict, verdict
from router.flows.rehearse_project import RehearsalDirs

_PASS_S = 2.0  # real seconds a watcher's pass takes with no engine step (interval 1 s + work)


@dataclass(frozen=True)
class RehearsalReport:
    """A rehearsal's outcome: what ran, what it cost, what was predicted, the verdict."""

    workload: str
    directory: Path
    speed: float
    chaos: bool
    watchers: int
    clock: Clock
    trace_start: datetime
    trace_end: datetime
    log: Any  # router.flows.rehearse.RunLog
    spend: Any  # router.flows.report.SpendReport of the rehearsal's records
    measured: Measured
    verdict: Verdict
    sources: tuple[str, ...]
    backtest_as_written: float = 0.0  # USD: route backtest of the same jobs, workload as written

    def to_json(self) -> dict[str, Any]:
        log = self.log
        return {
            "workload": self.workload,
            "directory": str(self.directory),
            "speed": self.speed,
            "chaos": self.chaos,
            "watchers": self.watchers,
            "policy": REHEARSED_POLICY,
            "trace": {"start": self.trace_start.isoformat(), "end": self.trace_end.isoformat()},
            "wall_s": log.wall_s,
            "ended_by": log.ended_by,
            "watcher_runs": log.watcher_runs,
            "watcher_kills": len(log.watcher_kills),
            "chaos_preemptions": [
                {"job": j, "at": t.isoformat()} for j, t in log.chaos_preemptions
            ],
            "destroyed_at_end": list(log.destroyed_at_end),
            "measured": {
                "handover_s": self.measured.handover_s,
                "launch_s": self.measured.launch_s,
                "decision_period_s": self.measured.decision_period_s,
                "restart_s": dict(self.measured.restore_s),
            },
            **self.verdict.to_json(),
            "backtest_as_written_cost": self.backtest_as_written,
            "sources": list(self.sources),
        }


@contextlib.contextmanager
def _home(dirs: RehearsalDirs) -> Iterator[None]:
    """SPOTROUTE_HOME set to the rehearsal's while its records are read in this process."""
    before = os.environ.get("SPOTROUTE_HOME")
    os.environ["SPOTROUTE_HOME"] = str(dirs.home)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SPOTROUTE_HOME", None)
        else:
            os.environ["SPOTROUTE_HOME"] = before


def collect(
    dirs: RehearsalDirs,
    inputs: Any,
    trace: Trace,
    plans: Sequence[JobPlan],
    clock: Clock,
    options: Any,
    log: Any,
    regions: Sequence[str],
    *,
    sampler: Any,
    sources: Sequence[str],
    leftover_wait_s: float,
) -> RehearsalReport:
    """Gather the run, predict it, compare (see the module docstring)."""
    from router.engine.records import FileRecords
    from router.flows.rehearse_sampler import leftovers
    from router.flows.report import report as spend_report

    left = leftovers(dirs, [p.name for p in plans], wait_s=leftover_wait_s)
    guarantees = sampler.guarantees(left)
    # Spend until the trace ended (what ran on after it, being torn down, is not the trace's).
    end = min(log.ended_at or datetime.now(UTC), clock.real_at(trace.end))
    with _home(dirs):
        spend = spend_report(now=end, records=FileRecords(dirs.home))
    costs = {j.job: j.cost for j in spend.by_job}
    watched = _watch_events(dirs)
    facts = {p.name: _JobFacts.read(dirs, p, clock, watched, log.working_pids) for p in plans}
    measured = _measured(facts, spend, plans, inputs.workload.workload, clock)
    period_s = decision_period_s(dirs, options.interval_s)
    if period_s is not None:
        measured = replace(measured, decision_period_s=clock.sim_s(period_s))
    ran = {
        p.name: facts[p.name].ran(
            p,
            clock,
            trace,
            regions,
            costs.get(p.name, 0.0),
            [j for j, _t in log.chaos_preemptions].count(p.name),
        )
        for p in plans
    }
    prediction, local, as_written = _predict(inputs, trace, plans, measured, regions)
    notes = [
        "the local target has no egress: data and checkpoint transfers are not rehearsed",
        f"the local nodes play {_profile_of(dirs)}'s boot and notice on the rehearsal's clock",
    ]
    judged = verdict(ran, prediction, local, guarantees, chaos=options.chaos, notes=notes)
    return RehearsalReport(
        workload=inputs.workload.workload.name,
        directory=dirs.root,
        speed=clock.speed,
        chaos=options.chaos,
        watchers=options.watchers,
        clock=clock,
        trace_start=trace.start,
        trace_end=trace.end,
        log=log,
        spend=spend,
        measured=measured,
        verdict=judged,
        backtest_as_written=as_written,
        sources=tuple(sources),
    )


def _profile_of(dirs: RehearsalDirs) -> str:
    text = (dirs.project / "spotroute.yaml").read_text()
    found = re.search(r"profile: (\w+)", text)
    return found.group(1) if found else "aws"


def _predict(
    inputs: Any,
    trace: Trace,
    plans: Sequence[JobPlan],
    measured: Measured,
    regions: Sequence[str],
) -> tuple[list[JobRun], Trace, float]:
    """run_backtest of the rehearsed policy on the trace as the local market offered it (and the
    total `route backtest` gives the workload as written)."""
    from router.config.datafiles import (
        load_egress,
        load_interruption_model,
        load_startup_figures,
        load_storage_prices,
    )
    from router.core.backtest import run_backtest
    from router.core.backtest_policies import policy_set
    from router.prices.local import LOCAL_INSTANCE_TYPE

    local = local_trace(trace, regions, LOCAL_INSTANCE_TYPE)
    notice = load_startup_figures()[_cloud_profile(trace)].notice_s
    workload = predicted_workload(inputs.workload.workload, plans, measured, notice_s=notice)
    policy = next(p for p in policy_set(workload.home_cloud, "all") if p.name == REHEARSED_POLICY)
    egress, interruption, storage = load_egress(), load_interruption_model(), load_storage_prices()

    def replay(w: Any, t: Trace) -> Any:
        return run_backtest(
            w,
            t,
            egress=egress,
            interruption=interruption,
            storage=storage,
            policy_set=[policy],
            with_optimum=False,
        )

    result = replay(workload, local)
    # `route backtest` as the workload is written (its clouds, egress and phase times), the
    # same jobs and trace: what the rehearsal started from, shown beside it.
    written = replace(inputs.workload.workload, jobs=tuple(p.job for p in plans))
    reference = replay(written, trace).policy(REHEARSED_POLICY).total_cost
    return list(result.policy(REHEARSED_POLICY).runs), local, reference


def _cloud_profile(trace: Trace) -> str:
    clouds = {p.cloud for p in trace.pools}
    return next(iter(clouds)) if len(clouds) == 1 and clouds <= {"aws", "gcp", "azure"} else "aws"


# --- one job's facts ------------------------------------------------------------------------------


@dataclass
class _JobFacts:
    """What the run left of one job: events, node records, records of the backend."""

    events: list[dict[str, Any]]
    beats: list[dict[str, Any]]  # the heartbeat each node kept (its last)
    reclaims: list[dict[str, Any]]  # reclaim.json of each node taken away
    segments: list[Any]  # router.flows.report.Segment (not the hand-over overlaps)
    journals: list[Any]  # router.core.journal.Journal, closed and open
    lease_skips: int
    last_step: int
    last_value: int | None
    waited_s: float  # real: gaps between its decisions not of its own engine steps

    @classmethod
    def read(
        cls,
        dirs: RehearsalDirs,
        plan: JobPlan,
        clock: Clock,
        watched: Sequence[dict[str, Any]],
        working: set[str],
    ) -> _JobFacts:
        from router.config import checkpoints as ckpt
        from router.engine.job_records import JobRecords
        from router.engine.records import FileRecords
        from router.flows.report import read_segments

        events = _json_lines(dirs.events_of(plan.name))
        sandbox = dirs.home / "sandbox" / plan.name
        beats = [
            b
            for p in sorted(sandbox.glob("g-*/node-*/rehearsal.json"))
            if (b := _json(p)) is not None
        ]
        reclaims = [
            {**r, "region": (_json(p.with_name("node.json")) or {}).get("region", "")}
            for p in sorted(sandbox.glob("g-*/node-*/reclaim.json"))
            if (r := _json(p)) is not None
        ]
        records = FileRecords(dirs.home)
        jobs = JobRecords(records)
        journals = list(jobs.closed_journals(plan.name))
        if (open_journal := jobs.open_journal(plan.name)) is not None:
            journals.append(open_journal)
        segments = sorted(
            (s for s in read_segments(records) if s.job == plan.name), key=lambda s: s.started_at
        )
        decided = [e for e in watched if e.get("event") == "decision" and e.get("job") == plan.name]
        skips = lease_delays(decided, working)
        waited = _waited_s(
            decided, own={"move", "switch-market", "replace", "recovered", "finished"}
        )
        step, value = 0, None
        directory = dirs.home / "checkpoints" / plan.name / plan.name
        if directory.is_dir():
            info = ckpt.latest_checkpoint(ckpt.checkpoint_store(f"file://{directory}/"))
            if info is not None:
                step = info.step
                state = _json(Path(info.path) / "rank-00000.json") or {}
                value = (state.get("user") or {}).get("value")
        return cls(events, beats, reclaims, segments, journals, skips, step, value, waited)

    def restarts(self) -> list[tuple[datetime, datetime, int, int]]:
        """(last progress before, training again, step reached before, step restored) per
        restore of a checkpoint (real times)."""
        progress = [
            (_time(e["time"]), int(e.get("step", 0)))
            for e in self.events
            if e.get("event") in ("saved", "stopped")
        ]
        progress += [(_time(b["time"]), int(b.get("step", 0))) for b in self.beats]
        out = []
        for e in self.events:
            if e.get("event") != "restored" or not int(e.get("step", 0)):
                continue
            at = _time(e["time"])
            before = [(t, s) for t, s in progress if t < at]
            if not before:
                continue
            last_t = max(t for t, _ in before)
            out.append((last_t, at, max(s for _, s in before), int(e["step"])))
        return out

    def ran(
        self,
        plan: JobPlan,
        clock: Clock,
        trace: Trace,
        regions: Sequence[str],
        cost: float,
        chaos: int,
    ) -> RanJob:
        done = [j for j in self.journals if j.outcome == "done"]
        step_h = plan.step_s * clock.speed / 3600.0
        lost_steps = sum(
            max(0, reached - restored) for _a, _b, reached, restored in self.restarts()
        )
        finished = [_time(e["time"]) for e in self.events if e.get("event") == "finished"]
        market = [r for r in self.reclaims if str(r.get("by", "")).startswith("local market")]
        return RanJob(
            job=plan.name,
            cost=cost,
            stints=tuple(
                Stint(
                    s.region,
                    s.market,
                    clock.sim_at(s.started_at),
                    clock.sim_at(s.ended_at) if s.ended_at else None,
                )
                for s in self.segments
            ),
            moves=sum(1 for j in done if j.kind == "migrate"),
            replacements=sum(1 for j in done if j.kind == "replace"),
            preemptions=len(market),
            chaos_preemptions=chaos,
            restores=sum(
                1 for e in self.events if e.get("event") == "restored" and int(e.get("step", 0))
            ),
            work_lost_h=lost_steps * step_h,
            finished_at=clock.sim_at(min(finished)) if finished else None,
            deadline=plan.job.deadline,
            steps_done=self.last_step,
            steps=plan.steps,
            digest_ok=self.last_value == expected_state(self.last_step),
            notice_lags_s=tuple(_lag(r, clock, trace, regions) for r in market),
            engine_steps_s=tuple(
                (j.kind, clock.sim_s(s)) for j in done if (s := launch_seconds(j)) is not None
            ),
            lease_skips=self.lease_skips,
            waited_s=clock.sim_s(self.waited_s),
            rolled_back=tuple(
                j.rollback_reason for j in self.journals if j.outcome == "rolled-back"
            ),
            failed_over=tuple(f for j in done if (f := _failed_over(j))),
        )


def _waited_s(decided: Sequence[dict[str, Any]], *, own: set[str]) -> float:
    """Real seconds the watcher's decisions on a job were held up: gaps between two of them
    beyond two passes, unless the earlier one was the job's own engine step (its report comes
    when the step is done, so the gap before the next is a pass)."""
    waited = 0.0
    times = [(_time(str(e["time"])), str(e.get("action"))) for e in decided]
    for (before, action), (after, _a) in itertools.pairwise(times):
        gap = (after - before).total_seconds()
        if action not in own and gap > 2 * _PASS_S:
            waited += gap - _PASS_S
    return waited


def _failed_over(journal: Any) -> str:
    """ "decided → launched" when the journal's new placement is not where it was decided."""
    wanted = journal.target or {}
    got = journal.data("new-stack-up").get("placement") or {}
    keys = ("region", "market")
    if not got or all(got.get(k) == wanted.get(k) for k in keys):
        return ""
    return (
        f"{wanted.get('region')} {wanted.get('market')} → {got.get('region')} {got.get('market')}"
    )


def _between(journal: Any, first: str, then: str) -> float | None:
    """Real seconds from one journal step done to another done (None if either is not)."""
    a, b = journal.steps.get(first), journal.steps.get(then)
    if a is None or b is None or not a.done_at or not b.done_at:
        return None
    return (_time(b.done_at) - _time(a.done_at)).total_seconds()


def _lag(reclaim: dict[str, Any], clock: Clock, trace: Trace, regions: Sequence[str]) -> float:
    """Simulated seconds from the trace taking the node's zone to the node's reclaim."""
    at = clock.sim_at(_time(str(reclaim.get("at"))))
    region = str(reclaim.get("region") or "")
    step = min(trace.steps - 1, max(0, int((at - trace.start).total_seconds() // trace.step_s)))
    for index, name in enumerate(regions):
        if name != region or trace.pools[index].market != "spot":
            continue
        s = step
        while s > 0 and not trace.available[index][s - 1]:
            s -= 1
        return max(0.0, (at - trace.at(s)).total_seconds())
    return 0.0


def _measured(
    facts: dict[str, _JobFacts], spend: Any, plans: Sequence[JobPlan], workload: Any, clock: Clock
) -> Measured:
    """The phase times the prediction is fed (simulated seconds), from the journals that went
    through: a launch is the engine's time from the decision to move or re-place until the new
    stack was up (nobody is paid for the new placement meanwhile; a move's old one runs on); a
    restart is what a new placement is paid without progress — its stack up until the job
    resumed there; a hand-over what the old one is paid on top — from the new stack up until
    the old stack is down."""
    restore: dict[str, float] = {}
    started: dict[str, datetime] = {}
    handovers: list[float] = []
    launches: list[float] = []
    for plan in plans:
        f = facts[plan.name]
        done = [j for j in f.journals if j.outcome == "done"]
        paid = [s for j in done if (s := _between(j, "new-stack-up", "resume-confirmed"))]
        if paid:
            restore[plan.name] = clock.sim_s(sum(paid) / len(paid))
        handovers += [
            s
            for j in done
            if j.kind == "migrate"
            if (s := _between(j, "new-stack-up", "old-stack-down"))
        ]
        launches += [s for j in done if (s := launch_seconds(j)) is not None]
        if f.segments:
            started[plan.name] = clock.sim_at(f.segments[0].started_at)
    handover = clock.sim_s(sum(handovers) / len(handovers)) if handovers else workload.handover_s
    launch = clock.sim_s(sum(launches) / len(launches)) if launches else 0.0
    return Measured(handover_s=handover, restore_s=restore, started=started, launch_s=launch)


def _json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def decision_period_s(dirs: RehearsalDirs, interval_s: float) -> float | None:
    """Real seconds until the watchers decided on a job again, as their slack test counted it
    (router/flows/watch_pace.py: at each pass the interval, or the slowest of the passes
    before), the mean over every pass; None without one."""
    from router.flows.watch_pace import WatchPace

    periods: list[float] = []
    for path in dirs.watch_logs():
        pace = WatchPace()  # one per log: a restarted watcher starts afresh too (approximately)
        for event in _json_lines(path):
            if event.get("event") == "pass" and event.get("ok"):
                periods.append(pace.decision_period_s(interval_s))
                pace.passed(float(event.get("duration_s") or 0.0))
    return sum(periods) / len(periods) if periods else None


def _watch_events(dirs: RehearsalDirs) -> list[dict[str, Any]]:
    """Every watcher's JSON lines (RehearsalDirs.watch_logs), in time order."""
    lines = [e for p in dirs.watch_logs() for e in _json_lines(p)]
    return sorted(lines, key=lambda e: str(e.get("time", "")))


def lease_delays(decided: Sequence[dict[str, Any]], working: set[str]) -> int:
    """Passes that skipped a job because another router held its lease — not the job's own
    deploy (before it was placed), nor a watcher at work (`working`: the pids of watchers that
    were running; another of --watchers acting on the job is no delay, a killed one's is)."""
    return sum(
        1
        for e in decided
        if e.get("action") == "skipped"
        and str(e.get("reason", "")).startswith("lease held")
        and "`route deploy`" not in str(e.get("reason", ""))  # Lease.describe's words
        and _holder_pid(str(e.get("reason", ""))) not in working
    )


def _holder_pid(reason: str) -> str:
    """The pid in "lease held by `route watch` (…, pid 4242) since …" ("" if none)."""
    found = re.search(r"pid (\d+)", reason)
    return found.group(1) if found else ""


def _json_lines(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        text = path.read_text()
    except OSError:
        return []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict):
                out.append(item)
    return out


def _time(text: str) -> datetime:
    at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return at if at.tzinfo else at.replace(tzinfo=UTC)
