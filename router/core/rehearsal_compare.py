"""A rehearsal held to its prediction, pure: per job and in total, what the running system did
beside what `route backtest` predicted for the same jobs and trace, and why they differ.

The flow (router/flows/rehearse_result.py) gathers what happened (`RanJob`: from the records
`route report` reads, the jobs' own events, the local nodes' reclaim records, the journals) and
runs the backtest; this module compares them. A job whose cost differs by more than the
tolerance, or whose preemptions or deadline outcome differ, gets its causes named from what
the run measured:

- **chaos** — the rehearsal itself preempted it without notice (`--chaos`);
- **late notice** — a node saw its zone go later than the trace took it (the market check), so
  it ran (and was paid) past the moment the prediction stopped it;
- **slow engine step** — a re-placement or move left the job idle, from the decision until its
  new stack was up, longer than a cloud's launch takes (SLOW_ENGINE_S): the prediction is fed
  the mean of those steps (Workload.launch_s), not each one;
- **launch refused** — a move or re-placement rolled back, or a re-placement failed over to
  the next placement: the zone decided on was out by the time the engine launched there (the
  prediction's policy places at once, on the zones available at that step);
- **engine busy** — the watcher decided on the job late: its passes waited for other jobs'
  engine steps (route watch runs them one at a time, and a pass waits for all of its jobs);
- **lease held** — the watcher skipped the job because another router held its lease (a
  killed watcher's; not the job's own deploy, nor another of `--watchers` at work on it);
- **slow teardown** — its last placement was billed for longer than a cloud's launch after the
  job finished, until the watcher had its stack destroyed (the prediction stops at the finish);
- **decision at a different moment** — the placements differ: another region, or the same one
  at another time (the watcher decides every interval, on the evidence it has seen);
- **unexplained** — none of these: a difference the rehearsal cannot account for.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from router.core.backtest_model import JobRun, Trace

COST_TOLERANCE_PCT = 5.0  # the target: realised within 5 % of the prediction
CHAOS_EXTRA_PCT = 2.0  # --chaos may cost this much more
LATE_NOTICE_S = 300.0  # simulated seconds a reclaim may trail the trace before it is "late"
SLOW_ENGINE_S = 600.0  # simulated: a cloud's launch (EC2 boots in 150 s; the API, minutes)
_SAME_MOMENT_S = 1800.0  # simulated: placements this close in time are the same decision


@dataclass(frozen=True, slots=True)
class Stint:
    """One placement of a job: where, from when until when (simulated time)."""

    region: str
    market: str
    start: datetime
    end: datetime | None


@dataclass(frozen=True)
class RanJob:
    """What the running system did with one job (simulated time, USD)."""

    job: str
    cost: float
    stints: tuple[Stint, ...]
    moves: int  # migrations done (route migrate's journals, kind migrate)
    replacements: int  # re-placements done (kind replace)
    preemptions: int  # nodes the market reclaimed (its reclaim records)
    chaos_preemptions: int  # nodes the rehearsal preempted without notice
    restores: int  # runs that restored a checkpoint
    work_lost_h: float  # work done twice: reached before a stop, not kept by the restore
    finished_at: datetime | None
    deadline: datetime | None
    steps_done: int  # of the last checkpoint
    steps: int  # in all
    digest_ok: bool  # the last checkpoint's state is that of all steps done once, in order
    notice_lags_s: tuple[float, ...] = ()  # per reclaim: after the trace took the zone
    # (journal kind, simulated seconds from the decision until the new stack was up)
    engine_steps_s: tuple[tuple[str, float], ...] = ()
    lease_skips: int = 0
    rolled_back: tuple[str, ...] = ()  # why each of its moves or re-placements was undone
    # re-placements that launched elsewhere than decided: "local-a spot → local-b on-demand"
    failed_over: tuple[str, ...] = ()
    waited_s: float = 0.0  # simulated: decisions on it held up by other jobs' engine steps

    @property
    def finished(self) -> bool:
        return self.finished_at is not None and self.steps_done >= self.steps

    @property
    def deadline_kept(self) -> bool | None:
        if self.deadline is None:
            return None
        return self.finished_at is not None and self.finished_at <= self.deadline + timedelta(
            seconds=1
        )


@dataclass(frozen=True)
class JobComparison:
    """One job: realised beside predicted, and the named causes of any difference."""

    ran: RanJob
    predicted: JobRun
    predicted_stints: tuple[Stint, ...]
    causes: tuple[str, ...]

    @property
    def cost_diff_pct(self) -> float:
        base = self.predicted.cost
        if base <= 0:
            return 0.0 if self.ran.cost <= 0 else 100.0
        return 100.0 * (self.ran.cost / base - 1)

    @property
    def predicted_deadline_kept(self) -> bool | None:
        return None if self.predicted.deadline is None else not self.predicted.deadline_missed

    @property
    def differs(self) -> bool:
        return (
            abs(self.cost_diff_pct) > COST_TOLERANCE_PCT
            or self.ran.preemptions != self.predicted.interruptions
            or self.ran.deadline_kept != self.predicted_deadline_kept
        )

    def to_json(self) -> dict[str, Any]:
        r, p = self.ran, self.predicted
        return {
            "job": r.job,
            "realised": {
                "cost": r.cost,
                "placements": len(r.stints),
                "moves": r.moves,
                "replacements": r.replacements,
                "preemptions": r.preemptions,
                "chaos_preemptions": r.chaos_preemptions,
                "restores": r.restores,
                "work_lost_h": r.work_lost_h,
                "finished": r.finished,
                "finished_at": r.finished_at.isoformat() if r.finished_at else None,
                "deadline": r.deadline.isoformat() if r.deadline else None,
                "deadline_kept": r.deadline_kept,
                "steps_done": r.steps_done,
                "steps": r.steps,
                "digest_ok": r.digest_ok,
                "stints": [_stint_json(s) for s in r.stints],
            },
            "predicted": {
                "cost": p.cost,
                "placements": len(self.predicted_stints),
                "migrations": p.migrations,
                "preemptions": p.interruptions,
                "work_lost_h": p.recomputed_h,
                "finished": p.finished,
                "finished_at": p.finished_at.isoformat() if p.finished_at else None,
                "deadline_kept": self.predicted_deadline_kept,
                "stints": [_stint_json(s) for s in self.predicted_stints],
            },
            "cost_diff_pct": self.cost_diff_pct,
            "differs": self.differs,
            "causes": list(self.causes),
        }


def _stint_json(s: Stint) -> dict[str, Any]:
    return {
        "region": s.region,
        "market": s.market,
        "from": s.start.isoformat(),
        "until": s.end.isoformat() if s.end else None,
    }


def predicted_stints(run: JobRun, trace: Trace) -> tuple[Stint, ...]:
    """The prediction's placements from its segments (consecutive steps on one pool merged)."""
    out: list[Stint] = []
    for start, end, pool, _usd in run.segments:
        p = trace.pools[pool]
        begins = trace.at(start)
        ends = trace.at(end)
        if out and out[-1].region == p.region and out[-1].market == p.market:
            last = out[-1]
            if last.end is not None and abs((begins - last.end).total_seconds()) < 1:
                out[-1] = Stint(last.region, last.market, last.start, ends)
                continue
        out.append(Stint(p.region, p.market, begins, ends))
    if out and run.finished_at is not None:
        out[-1] = Stint(out[-1].region, out[-1].market, out[-1].start, run.finished_at)
    return tuple(out)


def causes_of(ran: RanJob, predicted: JobRun, stints: Sequence[Stint]) -> tuple[str, ...]:
    """The named causes of a job's difference (module docstring), most specific first."""
    found: list[str] = []
    if ran.chaos_preemptions:
        found.append(f"chaos: preempted {ran.chaos_preemptions}× without notice")
    late = [lag for lag in ran.notice_lags_s if lag > LATE_NOTICE_S]
    if late:
        found.append(
            f"late notice: {len(late)} reclaim(s) up to {max(late) / 60:.0f} min after the "
            "trace took the zone"
        )
    slow = [(kind, s) for kind, s in ran.engine_steps_s if s > SLOW_ENGINE_S]
    if slow:
        kind, worst = max(slow, key=lambda ks: ks[1])
        idle = sum(s for _k, s in slow) / 3600
        found.append(
            f"slow engine step: {len(slow)} move(s) or re-placement(s) left it idle "
            f"{idle:.1f} h until the new stack was up, the slowest a {kind} of "
            f"{worst / 3600:.2f} h"
        )
    if ran.rolled_back:
        found.append(
            f"launch refused: {len(ran.rolled_back)} move(s) or re-placement(s) rolled back "
            f"({_why(ran.rolled_back[0])})"
        )
    if ran.failed_over:
        found.append(
            f"launch refused: {len(ran.failed_over)} re-placement(s) launched elsewhere than "
            f"decided, the decided zone out by then ({ran.failed_over[0]})"
        )
    if ran.waited_s > SLOW_ENGINE_S:
        found.append(
            f"engine busy: the watcher's decisions on it waited {ran.waited_s / 3600:.1f} h in "
            "all for other jobs' engine steps (one at a time per watcher)"
        )
    if ran.lease_skips:
        found.append(f"lease held: the watcher skipped it {ran.lease_skips}× (another's lease)")
    after = _billed_after_finish_s(ran)
    if after > SLOW_ENGINE_S:
        found.append(
            f"slow teardown: billed {after / 3600:.2f} h after it finished, until the watcher "
            "had its stack destroyed (the prediction stops at the finish)"
        )
    moment = _first_difference(ran.stints, stints)
    if moment:
        found.append(f"decision at a different moment: {moment}")
    return tuple(found) or ("unexplained",)


def _billed_after_finish_s(ran: RanJob) -> float:
    """Simulated seconds its last placement was billed after the job finished."""
    if ran.finished_at is None or not ran.stints or ran.stints[-1].end is None:
        return 0.0
    return max(0.0, (ran.stints[-1].end - ran.finished_at).total_seconds())


def _why(reason: str) -> str:
    if "no placement to launch" in reason:
        return "its zone no longer offered, nothing else of its market"
    for code in ("LocalCapacityExhausted", "were lost before they ran", "did not restore"):
        if code in reason:
            return code
    return reason[:80]


def _first_difference(ran: Sequence[Stint], predicted: Sequence[Stint]) -> str:
    if ran and predicted and ran[0].start < predicted[0].start - timedelta(seconds=_SAME_MOMENT_S):
        a, b = ran[0], predicted[0]
        return (
            f"placed at submission on {a.region} ({a.market}) from {a.start:%d %H:%M} — route "
            f"deploy takes what is offered — where the prediction waited for {b.region} "
            f"({b.market}) until {b.start:%d %H:%M}"
        )
    for i, (a, b) in enumerate(zip(ran, predicted, strict=False)):
        if (a.region, a.market) != (b.region, b.market):
            return (
                f"placement {i + 1} ran on {a.region} ({a.market}) from {a.start:%d %H:%M}, "
                f"predicted {b.region} ({b.market}) from {b.start:%d %H:%M}"
            )
        if abs((a.start - b.start).total_seconds()) > _SAME_MOMENT_S:
            return (
                f"placement {i + 1} on {a.region} began {a.start:%d %H:%M}, predicted "
                f"{b.start:%d %H:%M}"
            )
    if len(ran) != len(predicted):
        return f"{len(ran)} placements ran, {len(predicted)} predicted"
    return ""


def compare_job(ran: RanJob, predicted: JobRun, trace: Trace) -> JobComparison:
    """One job held to its prediction (trace: the one the prediction ran on)."""
    stints = predicted_stints(predicted, trace)
    draft = JobComparison(ran, predicted, stints, ())
    causes = causes_of(ran, predicted, stints) if draft.differs else ()
    return JobComparison(ran, predicted, stints, causes)


@dataclass(frozen=True)
class Guarantees:
    """What must hold whatever the market or chaos did (sampled during the run)."""

    samples: int
    checkpoint_regressions: tuple[str, ...] = ()  # "job: step 40 after 52 at <time>"
    two_training: tuple[str, ...] = ()  # moments two placements of one job trained
    two_placements: tuple[str, ...] = ()  # two placements alive outside a move
    leftovers: tuple[str, ...] = ()  # processes, locks, leases, journals left at the end

    @property
    def held(self) -> bool:
        return not (
            self.checkpoint_regressions
            or self.two_training
            or self.two_placements
            or self.leftovers
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "held": self.held,
            "samples": self.samples,
            "checkpoint_regressions": list(self.checkpoint_regressions),
            "two_placements_training": list(self.two_training),
            "two_placements_outside_a_move": list(self.two_placements),
            "leftovers": list(self.leftovers),
        }


@dataclass(frozen=True)
class Verdict:
    """The rehearsal's targets, each met or not (module docstring of router/flows/rehearse.py)."""

    realised: float
    predicted: float
    jobs: tuple[JobComparison, ...]
    guarantees: Guarantees
    chaos: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def diff_pct(self) -> float:
        return 100.0 * (self.realised / self.predicted - 1) if self.predicted else 0.0

    @property
    def tolerance_pct(self) -> float:
        return COST_TOLERANCE_PCT + (CHAOS_EXTRA_PCT if self.chaos else 0.0)

    @property
    def cost_met(self) -> bool:
        return abs(self.diff_pct) <= self.tolerance_pct

    @property
    def deadlines_met(self) -> bool:
        return all(j.ran.deadline_kept == j.predicted_deadline_kept for j in self.jobs)

    @property
    def preemptions_met(self) -> bool:
        return all(j.ran.preemptions == j.predicted.interruptions for j in self.jobs)

    @property
    def all_finished(self) -> bool:
        """Every job the prediction finishes finished here with all its work, done once."""
        return all(j.ran.finished and j.ran.digest_ok for j in self.jobs if j.predicted.finished)

    @property
    def causes_named(self) -> bool:
        return all("unexplained" not in j.causes for j in self.jobs if j.differs)

    def to_json(self) -> dict[str, Any]:
        return {
            "realised_cost": self.realised,
            "predicted_cost": self.predicted,
            "diff_pct": self.diff_pct,
            "tolerance_pct": self.tolerance_pct,
            "targets": {
                "cost_within_tolerance": self.cost_met,
                "same_deadline_outcomes": self.deadlines_met,
                "same_preemptions_per_job": self.preemptions_met,
                "every_difference_named": self.causes_named,
                "every_job_finished_with_all_its_work": self.all_finished,
                "guarantees_held": self.guarantees.held,
            },
            "guarantees": self.guarantees.to_json(),
            "jobs": [j.to_json() for j in self.jobs],
            "notes": list(self.notes),
        }


def verdict(
    ran: Mapping[str, RanJob],
    predicted: Sequence[JobRun],
    trace: Trace,
    guarantees: Guarantees,
    *,
    chaos: bool = False,
    notes: Sequence[str] = (),
) -> Verdict:
    """Every job held to its prediction, and the totals."""
    jobs = tuple(compare_job(ran[p.job], p, trace) for p in predicted if p.job in ran)
    return Verdict(
        realised=sum(j.ran.cost for j in jobs),
        predicted=sum(j.predicted.cost for j in jobs),
        jobs=jobs,
        guarantees=guarantees,
        chaos=chaos,
        notes=tuple(notes),
    )
