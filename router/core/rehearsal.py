"""A rehearsal's plan, pure: the backtest's trace as a local market on an accelerated clock, its
jobs as job.yaml documents on that clock, and the trace and workload the prediction replays.

`route rehearse` (router/flows/rehearse.py) runs the real system — `route deploy`, `route watch`,
the local target's nodes, the checkpoint library — on the local target. This module says what
that system is given:

- **The clock.** The local market runs `speed` simulated seconds per real second from
  `Clock.real_start`; simulated time is the trace's time. Every duration handed to the running
  system (job durations, checkpoint intervals, restore overheads, cooldowns, deadlines) is real
  time: the simulated value ÷ speed. Prices are per real hour: the trace's price × speed, so an
  hour of the trace (1/speed real hours) costs what it cost in the trace, and the records
  `route report` reads come out in the trace's dollars.
- **The market.** Each pool of the trace (a spot zone, a region's on-demand) becomes a local
  region (`region_names`): a row at the start and at every change of its price or availability
  (`market_rows`); a pool that is out (availability false, or not offered) has capacity 0, so
  the local nodes there are reclaimed with the profile's notice; otherwise its capacity is
  enough for every job at once — the backtest has no contention between jobs either.
- **The prediction.** `local_trace` is the same trace with its pools named as the local target
  offers them, and `predicted_workload` the same jobs on the local target, fed the phase times
  the run measured (`Measured`), so `run_backtest` models the system that ran.

Pure: no files, no clock (the flow passes `real_start`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from router.contract.local_market import MarketRow
from router.contract.stack_config import JOB_NAME_MAX
from router.core.backtest_model import DEPLOY, Pool, Trace, Workload, WorkloadJob
from router.core.decision_model import DECISION_PERIOD_S
from router.core.errors import BadInput

REHEARSED_POLICY = "deadline-aware"  # the policy `route watch` runs (backtest_policies)
LOCAL = "local"
STEP_SIM_S = 60.0  # a rehearsal job's step: a simulated minute of work
_SLUG = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True, slots=True)
class Clock:
    """Simulated time (the trace's) against real time: `speed` simulated seconds per second."""

    sim_start: datetime  # the trace's start
    real_start: datetime  # when the local market's clock starts
    speed: float

    def real_at(self, sim: datetime) -> datetime:
        """The real moment the market's clock shows `sim`."""
        return self.real_start + (sim - self.sim_start) / self.speed

    def sim_at(self, real: datetime) -> datetime:
        """The market's clock at real moment `real`."""
        return self.sim_start + (real - self.real_start) * self.speed

    def real_s(self, sim_s: float) -> float:
        return sim_s / self.speed

    def sim_s(self, real_s: float) -> float:
        return real_s * self.speed


def _slug(text: str) -> str:
    return _SLUG.sub("-", text.lower()).strip("-") or "x"


def region_names(pools: Sequence[Pool]) -> tuple[str, ...]:
    """One local region per pool: `local-<zone>` (spot), `local-<region>` (a zoneless pool),
    with `-<instance type>` where one place holds pools of several types."""
    places = [(p.zone or p.region, p.market) for p in pools]
    out = []
    for pool, place in zip(pools, places, strict=True):
        name = f"{LOCAL}-{_slug(place[0])}"
        if places.count(place) > 1:
            name += f"-{_slug(pool.instance_type)}"
        out.append(name)
    if len(set(zip(out, (p.market for p in pools), strict=True))) != len(out):
        raise BadInput(
            "the trace has two pools with one place, type and market — give each pool once"
        )
    return tuple(out)


def market_rows(
    trace: Trace,
    regions: Sequence[str],
    *,
    speed: float,
    capacity: int,
    announced: bool = True,
) -> tuple[MarketRow, ...]:
    """The trace as local-market rows: one per pool at the start and at each change of price or
    availability (offsets in simulated seconds); prices per real hour (× speed).

    A pool that is out is not offered while it is (`announced`: the running system sees what
    the backtest's policies see, the pools usable at that step), or, not `announced`, offered
    with capacity 0: launches there are refused, as a cloud refuses them."""
    rows: list[MarketRow] = []
    for index, pool in enumerate(trace.pools):
        last: tuple[float, int, bool] | None = None
        known = next((p for p in trace.prices[index] if p == p), 0.0)
        for step in range(trace.steps):
            price = trace.prices[index][step]
            usable = price == price and trace.available[index][step]
            known = price if price == price else known
            now = (round(known * speed, 6), capacity if usable else 0, True)
            if not (usable or not announced):
                now = (0.0, 0, False)  # withdrawn: no price, no capacity (the file's `-`)
            if now != last:
                rows.append(
                    MarketRow(
                        regions[index],
                        pool.market,
                        now[0],
                        now[1],
                        offset_s=step * trace.step_s,
                        offered=now[2],
                    )
                )
                last = now
    return tuple(rows)


def local_trace(trace: Trace, regions: Sequence[str], instance_type: str) -> Trace:
    """The same prices and availability, each pool named as the local target offers it."""
    pools = tuple(
        Pool(
            LOCAL,
            region,
            None,
            instance_type,
            p.market,
            p.gpu,
            p.gpu_count,
            p.gpu_memory_gb,
            p.vcpus,
            p.memory_gb,
        )
        for p, region in zip(trace.pools, regions, strict=True)
    )
    order = sorted(range(len(pools)), key=lambda i: pools[i].label)
    return replace(
        trace,
        pools=tuple(pools[i] for i in order),
        prices=tuple(trace.prices[i] for i in order),
        available=tuple(trace.available[i] for i in order),
    )


def cut_trace(trace: Trace, days: float | None) -> Trace:
    """The trace's first `days` (all of it when None)."""
    if days is None:
        return trace
    steps = max(1, min(trace.steps, math.ceil(days * 86400 / trace.step_s)))
    return replace(
        trace,
        prices=tuple(s[:steps] for s in trace.prices),
        available=tuple(s[:steps] for s in trace.available),
    )


def chosen_jobs(
    workload: Workload, trace: Trace, *, count: int | None, names: Sequence[str] = ()
) -> tuple[WorkloadJob, ...]:
    """The jobs to rehearse: those named, else the first `count` to arrive inside the trace."""
    inside = [j for j in workload.jobs if j.arrival < trace.end]
    if names:
        known = {j.name: j for j in workload.jobs}
        missing = [n for n in names if n not in known]
        if missing:
            raise BadInput(
                f"--job: {missing[0]!r} is not a job of workload {workload.name} — "
                f"its jobs are {', '.join(sorted(known)[:6])}…"
            )
        late = [n for n in names if known[n].arrival >= trace.end]
        if late:
            raise BadInput(f"--job: {late[0]} arrives after the trace ends — give more --days")
        return tuple(j for j in inside if j.name in names)
    if not inside:
        raise BadInput(f"workload {workload.name}: no job arrives inside the trace")
    return tuple(inside[:count] if count is not None else inside)


def job_names(jobs: Sequence[WorkloadJob]) -> dict[str, str]:
    """Workload job name → a valid job name for the local target (unique)."""
    out: dict[str, str] = {}
    for job in jobs:
        base = _slug(job.name)
        base = base if base[0].isalpha() else f"j-{base}"
        base = base[:JOB_NAME_MAX].rstrip("-")
        name, n = base, 1
        while name in out.values():
            n += 1
            name = f"{base[: JOB_NAME_MAX - len(str(n)) - 1]}-{n}"
        out[job.name] = name
    return out


@dataclass(frozen=True, slots=True)
class JobPlan:
    """One rehearsed job: its steps of work on the real clock, and when it is submitted."""

    job: WorkloadJob
    name: str  # its job name on the local target
    steps: int  # steps of work (STEP_SIM_S simulated seconds each, about)
    step_s: float  # real seconds per step
    submit_at: datetime  # real time of its arrival

    @property
    def work_s(self) -> float:
        """Real seconds of work."""
        return self.steps * self.step_s


def job_plan(job: WorkloadJob, name: str, clock: Clock) -> JobPlan:
    """The job's steps: its duration on the real clock, in simulated minutes of work."""
    work_s = clock.real_s(job.duration_h * 3600.0)
    steps = max(1, round(job.duration_h * 3600.0 / STEP_SIM_S))
    return JobPlan(
        job, name, steps, work_s / steps, clock.real_at(max(job.arrival, clock.sim_start))
    )


def job_document(
    plan: JobPlan,
    clock: Clock,
    *,
    command: Sequence[str],
    env: Mapping[str, str],
    regions: Sequence[str] = (),
) -> dict[str, Any]:
    """The job.yaml of a rehearsed job: the workload job's fields on the real clock."""
    job = plan.job
    doc: dict[str, Any] = {
        "name": plan.name,
        "resources": {"accelerators": f"{job.gpu}:{job.gpu_count}", "clouds": [LOCAL]},
        "market": "auto",  # as the backtest plans it (router.core.backtest.job_spec)
        "duration_hours": clock.real_s(job.duration_h * 3600.0) / 3600.0,
        "node_count": job.node_count,
        "checkpoint": {
            "interval": clock.real_s(job.checkpoint_interval_s),
            "restore_overhead": clock.real_s(job.restore_overhead_s),
            "url": "auto",
        },
        "migration": {
            "min_savings_pct": job.min_savings_pct,
            "cooldown": clock.real_s(job.cooldown_s),
            "spot_wait": clock.real_s(job.spot_wait_s),
        },
        "run": {"command": list(command), "env": dict(env)},
        "labels": {"rehearsal": _slug(job.name)[:63]},
    }
    if regions:
        doc["resources"]["regions"] = {"allow": list(regions)}
    if job.deadline is not None:
        doc["deadline"] = clock.real_at(job.deadline).isoformat()
    return doc


def regions_for(job: WorkloadJob, trace: Trace, regions: Sequence[str]) -> tuple[str, ...]:
    """The local regions whose pools have the job's GPUs; () when every pool has them."""
    fits = [
        r
        for p, r in zip(trace.pools, regions, strict=True)
        if (p.gpu, p.gpu_count) == (job.gpu, job.gpu_count)
    ]
    return () if len(fits) == len(regions) else tuple(sorted(set(fits)))


@dataclass(frozen=True, slots=True)
class Measured:
    """Phase times the run measured, in simulated seconds, for the prediction."""

    handover_s: float  # a move's overlap: both placements paid
    restore_s: Mapping[str, float]  # per job name: a restart, from the loss to training again
    started: Mapping[str, datetime]  # per job name: when its first placement began (simulated)
    launch_s: float = 0.0  # a move's or re-placement's decision until its new stack was up
    decision_period_s: float = DECISION_PERIOD_S  # until a job was decided on again (passes)


def predicted_workload(
    workload: Workload,
    plans: Sequence[JobPlan],
    measured: Measured,
    *,
    notice_s: float,
) -> Workload:
    """The rehearsed jobs as a backtest replays them on the local target: no data or checkpoint
    egress there, the profile's notice, and the measured phase times (launch, restore,
    hand-over; a job arrives when its first placement began, placed as `route deploy` placed
    it)."""
    jobs = []
    for plan in plans:
        job = plan.job
        jobs.append(
            replace(
                job,
                name=plan.name,
                arrival=measured.started.get(plan.name, job.arrival),
                restore_overhead_s=measured.restore_s.get(plan.name, job.restore_overhead_s),
                checkpoint_gb=0.0,
                data_cloud=None,
                data_region="",
                data_gb=0.0,
                clouds=(LOCAL,),
            )
        )
    return Workload(
        name=workload.name,
        jobs=tuple(sorted(jobs, key=lambda j: (j.arrival, j.name))),
        home_cloud=LOCAL,
        handover_s=measured.handover_s,
        launch_s=measured.launch_s,
        # Each job was submitted by `route deploy`, which places it on the cheapest placement
        # offered then (it does not wait for spot as the policy might): so is the prediction's.
        first_placement=DEPLOY,
        decision_period_s=measured.decision_period_s,
        zone_block_s=workload.zone_block_s,
        notice_s=((LOCAL, notice_s),),
    )


def expected_state(steps: int) -> int:
    """The rehearsal job's state after `steps` steps done once, in order — the digest
    router/checkpoint/rehearsal_job.py keeps (a copy: the library imports nothing of the
    router; tests/unit/test_rehearsal.py holds the two equal)."""
    value = 1
    for i in range(steps):
        value = (value * 31 + i) % 1_000_003
    return value
