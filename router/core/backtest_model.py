"""The backtest's value types: pools and traces, workloads, per-job runs and results; pure.

`Trace` holds per-pool price and availability series (the availability model: a spot pool is
usable at a step or not; on-demand never runs out); `trace_from_points` builds one from price
observations. `JobContext` is one job's feasible pools, its decide() rules (`job_rules`) and the
candidate `Slot`s per step. `JobRun`, `PolicyResult` and `BacktestResult` are what the simulation
(router.core.backtest) and the hindsight optimum (router.core.hindsight) return.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from router.core.decision_model import DECISION_PERIOD_S, Rules, TransferCosts, work_at_risk_s
from router.core.egress import EgressTable
from router.core.interruption import SeriesEvidence, posterior_rate
from router.core.job.migration import SPOT_WAIT_DEFAULT_S
from router.core.trace_cadence import Span, listed_at


@dataclass(frozen=True, slots=True)
class Pool:
    """One capacity pool of the trace: an instance type in a zone (or region) and market."""

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    market: str
    gpu: str
    gpu_count: int
    gpu_memory_gb: int = 0
    vcpus: int = 0
    memory_gb: float = 0.0
    interruption_bucket: str | None = None

    @property
    def label(self) -> str:
        return f"{self.cloud}/{self.region}/{self.zone or '-'}/{self.instance_type}/{self.market}"


@dataclass(frozen=True)
class Trace:
    """Prices (USD per instance-hour; nan = not offered) and availability, per pool per step."""

    start: datetime
    step_s: float
    pools: tuple[Pool, ...]
    prices: tuple[tuple[float, ...], ...]
    available: tuple[tuple[bool, ...], ...]

    def __post_init__(self) -> None:
        if self.start.tzinfo is None:
            raise ValueError("Trace.start must be timezone-aware (UTC)")
        if self.step_s <= 0:
            raise ValueError("Trace.step_s must be positive")
        if len(self.prices) != len(self.pools) or len(self.available) != len(self.pools):
            raise ValueError("Trace: one price and one availability series per pool")
        if len({len(s) for s in (*self.prices, *self.available)}) > 1:
            raise ValueError("Trace: every series must have the same number of steps")

    @property
    def steps(self) -> int:
        return len(self.prices[0]) if self.prices else 0

    @property
    def step_h(self) -> float:
        return self.step_s / 3600.0

    def at(self, step: int) -> datetime:
        return self.start + timedelta(seconds=step * self.step_s)

    @property
    def end(self) -> datetime:
        return self.at(self.steps)


def trace_from_points(
    points: Sequence[tuple[datetime, Pool, float]],
    *,
    step_s: float,
    start: datetime | None = None,
    end: datetime | None = None,
    available: Mapping[Pool, Sequence[bool]] | None = None,
    stale_after_s: float | None = None,
    held: Collection[Pool] = (),
    listed: Mapping[Pool, Sequence[Span]] | None = None,
) -> Trace:
    """A step trace from (time, pool, price) observations: each step holds the last price seen.

    `listed` (router.core.trace_cadence.listed_spans): a pool is not offered (nan) at a step
    after whose rows its source has moved on without it — the file's own cadence. `stale_after_s`
    (an explicit `price_gap`; it replaces `listed`): a pool whose last observation is older than
    this at a step's start is not offered there; before its first observation, its first price
    holds for steps that start at most this long before it. Pools in `held` (prices that change
    only when a row says so: spot price history, list prices) keep their last price. Neither
    given: every price holds. `available` gives per-pool availability series (True = usable).
    """
    if not points:
        raise ValueError("no price points")
    first = min(p[0] for p in points)
    last = max(p[0] for p in points)
    start = start or first
    end = end or (last + timedelta(seconds=step_s))
    steps = max(1, math.ceil((end - start).total_seconds() / step_s))
    by_pool: dict[Pool, list[tuple[datetime, float]]] = {}
    for at, pool, price in points:
        by_pool.setdefault(pool, []).append((at, price))
    pools = tuple(sorted(by_pool, key=lambda p: p.label))
    gap = None if stale_after_s is None else timedelta(seconds=stale_after_s)
    prices: list[tuple[float, ...]] = []
    avail: list[tuple[bool, ...]] = []
    for pool in pools:
        seen = sorted(by_pool[pool], key=lambda x: x[0])
        limit = None if pool in held else gap
        spans = None if pool in held or gap is not None else (listed or {}).get(pool)
        series: list[float] = []
        i, price, since = 0, seen[0][1], seen[0][0]
        for s in range(steps):
            begins = start + timedelta(seconds=s * step_s)
            edge = begins + timedelta(seconds=step_s)
            while i < len(seen) and seen[i][0] < edge:
                price, since = seen[i][1], seen[i][0]
                i += 1
            if limit is not None and (begins - since > limit or since - begins > limit):
                series.append(math.nan)  # gone for longer than the gap, or not yet there
            elif spans is not None and not listed_at(spans, edge):
                series.append(math.nan)  # its source moved on without it
            else:
                series.append(price)
        prices.append(tuple(series))
        given = (available or {}).get(pool)
        if given is None:
            avail.append((True,) * steps)
        else:
            avail.append(tuple(bool(given[s % len(given)]) for s in range(steps)))
    return Trace(start, step_s, pools, tuple(prices), tuple(avail))


@dataclass(frozen=True, slots=True)
class WorkloadJob:
    """One job of a workload (hours, GB, seconds); fields as job.yaml names them."""

    name: str
    arrival: datetime
    duration_h: float
    gpu: str
    gpu_count: int
    node_count: int = 1
    checkpoint_interval_s: float = 1800.0
    restore_overhead_s: float = 600.0
    checkpoint_gb: float = 0.0
    data_cloud: str | None = None
    data_region: str = ""
    data_gb: float = 0.0
    deadline: datetime | None = None
    min_savings_pct: float = 20.0
    cooldown_s: float = 3600.0
    clouds: tuple[str, ...] = ("aws", "gcp", "azure")
    spot_wait_s: float = SPOT_WAIT_DEFAULT_S  # job.yaml migration.spot_wait (no deadline)

    @property
    def gpu_hours(self) -> float:
        return self.duration_h * self.gpu_count * self.node_count


# Workload.first_placement: the policy places a job at its arrival, or `route deploy` does.
POLICY, DEPLOY = "policy", "deploy"
FIRST_PLACEMENTS = (POLICY, DEPLOY)


@dataclass(frozen=True)
class Workload:
    """Jobs to replay, and the cloud single-cloud policies stay in (where the team lives)."""

    name: str
    jobs: tuple[WorkloadJob, ...]
    home_cloud: str = "aws"
    handover_s: float = 300.0
    zone_block_s: float = 3600.0
    # Seconds from a decision to re-place or move until the new placement's nodes run (the
    # engine's step and the cloud's launch; restore_overhead follows): 0 = at once. The first
    # placement starts at the arrival. router.core.backtest_replay: nothing is decided
    # meanwhile, and a pool gone by then refuses the launch.
    launch_s: float = 0.0
    # Who places a job at its arrival under spotroute's own policies (those `route deploy`
    # submits: Policy.deployed): "policy" — the policy decides, as route watch would (it may
    # wait for spot); "deploy" — what `route deploy` does: the planner's cheapest placement
    # offered then, re-tried each step while nothing is; route watch's policy from then on.
    first_placement: str = POLICY
    # Seconds until route watch decides on a job again (Rules.decision_period_s, which its
    # slack test counts): its interval, or — as `route rehearse` measures it — its passes.
    decision_period_s: float = DECISION_PERIOD_S
    # (cloud, seconds): each cloud's spot notice lead. The checkpoint library saves on the
    # notice, so a preemption loses only the work of the notice window; () = no save on notice
    # (work rolls back to the last periodic checkpoint).
    notice_s: tuple[tuple[str, float], ...] = ()

    def notice_h(self, cloud: str) -> float | None:
        """The cloud's notice lead (hours), None when the workload saves on no notice."""
        found = dict(self.notice_s).get(cloud)
        return None if found is None else found / 3600.0


@dataclass(frozen=True, slots=True)
class Slot:
    """A pool at one step's price: the Capacity decide() compares."""

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    market: str
    price_per_hour: float
    interruptions_per_hour: float
    pool: int


@dataclass
class JobRun:
    """What one policy did with one job: USD, counts, and the placements it used (segments)."""

    job: str
    cost: float = 0.0
    egress_cost: float = 0.0
    interruptions: int = 0
    migrations: int = 0
    recomputed_h: float = 0.0
    finished_at: datetime | None = None
    deadline: datetime | None = None
    gpu_hours: float = 0.0
    launches_refused: int = 0  # decided placements whose pool was gone when launched (launch_s)
    segments: list[tuple[int, int, int, float]] = field(default_factory=list)  # (from, to, pool, $)
    extras: list[tuple[int, float]] = field(default_factory=list)  # (step, $): egress, hand-over
    decisions: list[tuple[int, str, str]] = field(default_factory=list)  # (step, action, reason)

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    @property
    def deadline_missed(self) -> bool:
        if self.deadline is None:
            return False
        return self.finished_at is None or self.finished_at > self.deadline + timedelta(seconds=1)


@dataclass(frozen=True)
class PolicyResult:
    """Totals of one policy over the workload (USD, GPU-hours)."""

    name: str
    label: str
    runs: tuple[JobRun, ...]
    total_cost: float
    gpu_hours: float
    interruptions: int
    migrations: int
    recomputed_h: float
    deadline_misses: int
    unfinished: int

    @property
    def cost_per_gpu_hour(self) -> float:
        return self.total_cost / self.gpu_hours if self.gpu_hours else 0.0


@dataclass(frozen=True)
class BacktestResult:
    """Every policy's result, the baseline's name, and the optimum's, over the same traces."""

    workload: str
    start: datetime
    end: datetime
    step_s: float
    jobs: int
    unplaceable: tuple[str, ...]
    policies: tuple[PolicyResult, ...]
    baseline: str
    optimum: str
    pools: tuple[Pool, ...]
    unplaceable_reasons: tuple[tuple[str, str], ...] = ()  # (job, why it could not run)

    def policy(self, name: str) -> PolicyResult:
        return next(p for p in self.policies if p.name == name)

    @property
    def jobs_ran(self) -> int:
        """Jobs every policy ran: the totals are over these, not over `jobs`."""
        return self.jobs - len(self.unplaceable)

    def could_not_run(self) -> str | None:
        """'72 of 88 jobs could not run (…): savings over the 16 that ran'; None when all ran."""
        if not self.unplaceable:
            return None
        why: dict[str, int] = {}
        for _, reason in self.unplaceable_reasons:
            why[reason] = why.get(reason, 0) + 1
        counted = sorted(why.items(), key=lambda kv: -kv[1])
        said = "; ".join(f"{n} {reason}" for reason, n in counted)
        names = ", ".join(self.unplaceable[:5])
        more = f" and {len(self.unplaceable) - 5} more" if len(self.unplaceable) > 5 else ""
        return (
            f"{len(self.unplaceable)} of {self.jobs} jobs could not run ({names}{more}"
            + (f": {said}" if said else "")
            + f") — totals and savings over the {self.jobs_ran} that ran"
        )

    @property
    def baseline_unfinished(self) -> tuple[str, ...]:
        """Jobs the baseline could not run to their end (no on-demand offered for them, say)."""
        return tuple(r.job for r in self.policy(self.baseline).runs if not r.finished)

    @property
    def baseline_ran(self) -> bool:
        return not self.baseline_unfinished

    def savings_pct(self, name: str) -> float | None:
        """Percent below the baseline; None when the baseline could not run every job (its
        total would not be the cost of the same work)."""
        if not self.baseline_ran:
            return None
        base = self.policy(self.baseline).total_cost
        return 100.0 * (1 - self.policy(name).total_cost / base) if base else 0.0

    def gap_to_optimum_pct(self, name: str) -> float:
        best = self.policy(self.optimum).total_cost
        return 100.0 * (self.policy(name).total_cost / best - 1) if best else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "step_s": self.step_s,
            "jobs": self.jobs,
            "jobs_ran": self.jobs_ran,
            "unplaceable": list(self.unplaceable),
            "unplaceable_reasons": [
                {"job": job, "reason": reason} for job, reason in self.unplaceable_reasons
            ],
            "could_not_run": self.could_not_run(),
            "baseline": self.baseline,
            "baseline_unfinished": list(self.baseline_unfinished),
            "optimum": self.optimum,
            "policies": [
                {
                    "name": p.name,
                    "label": p.label,
                    "total_cost": p.total_cost,
                    "cost_per_gpu_hour": p.cost_per_gpu_hour,
                    "gpu_hours": p.gpu_hours,
                    "savings_vs_baseline_pct": self.savings_pct(p.name),
                    "gap_to_optimum_pct": self.gap_to_optimum_pct(p.name),
                    "interruptions": p.interruptions,
                    "migrations": p.migrations,
                    "recomputed_hours": p.recomputed_h,
                    "deadline_misses": p.deadline_misses,
                    "unfinished": p.unfinished,
                }
                for p in self.policies
            ],
        }


# --- per-job context ---------------------------------------------------------------------


def first_step(job: WorkloadJob, trace: Trace) -> int:
    """The step the job arrives in (0 when it arrives before the trace starts)."""
    if job.arrival <= trace.start:
        return 0
    return (job.arrival - trace.start) // timedelta(seconds=trace.step_s)


class JobContext:
    """A job's feasible pools (from the planner), its rules, and candidates per step (cached).

    The job arrives within `first_step` (router.core.backtest_model.first_step), at
    `arrived_at`: that step is only `hours(first_step)` long for it, and it begins then.
    """

    def __init__(
        self,
        job: WorkloadJob,
        trace: Trace,
        pools: Sequence[tuple[int, float]],  # (pool index, interruptions per hour)
        rules: Rules,
        first_step: int,
        evidence: Mapping[int, SeriesEvidence] | None = None,  # pool index → its past
        notice_h: Mapping[str, float] | None = None,  # cloud → notice lead (hours) saved on
        shared: SharedCandidates | None = None,  # the same pools' candidates of other jobs
        launch_h: float = 0.0,  # Workload.launch_s in hours
        deployed: bool = False,  # Workload.first_placement "deploy"
    ) -> None:
        self.job, self.trace, self.rules = job, trace, rules
        self.launch_h, self.deployed = launch_h, deployed
        self.notice_h = dict(notice_h or {})
        self.pools = tuple(pools)
        self.first_step = first_step
        self.evidence = evidence or {}
        self.arrived_at = max(job.arrival, trace.at(first_step))
        self.deadline_rules = replace(rules, deadline=job.deadline)
        # The deadline kept by the money rules alone (never idle): the `migrate` policy.
        self.guard_rules = replace(self.deadline_rules, wait_for_spot=False)
        # Without a deadline, the never-idle policy does not wait for spot either (spot_wait).
        self.money_rules = replace(rules, wait_for_spot=False)
        self._shared = shared if shared is not None and shared.evidence is self.evidence else None
        self._steps: dict[int, tuple[Slot, ...]] = (
            {} if self._shared is None else self._shared.of(self.pools)
        )

    def begins(self, step: int) -> datetime:
        """When the job's part of a step begins: the arrival in its first step."""
        return self.arrived_at if step == self.first_step else self.trace.at(step)

    def step_at(self, now: datetime) -> int:
        """The step a moment is in (a step's start belongs to it)."""
        return (now - self.trace.start) // timedelta(seconds=self.trace.step_s)

    def step_of(self, ended: datetime) -> int:
        """The step work that ended at `ended` ran in (a step's end belongs to that step)."""
        return -((self.trace.start - ended) // timedelta(seconds=self.trace.step_s)) - 1

    def hours(self, step: int) -> float:
        """Hours of the step the job can use: the rest of it after the arrival in its first."""
        if step != self.first_step:
            return self.trace.step_h
        return (self.trace.at(step + 1) - self.arrived_at).total_seconds() / 3600.0

    def candidates(self, step: int) -> tuple[Slot, ...]:
        """Every feasible pool usable at this step, at this step's price; its interruption rate
        is the planner's (the bucket) updated by the pool's past in the trace."""
        found = self._steps.get(step)
        if found is None:
            trace = self.trace
            out = []
            for index, prior in self.pools:
                price = trace.prices[index][step]
                if trace.available[index][step] and price == price:  # nan: not offered
                    pool = trace.pools[index]
                    seen = self.evidence.get(index)
                    rate = prior if seen is None else posterior_rate(prior, seen.at(step))
                    out.append(
                        Slot(
                            pool.cloud,
                            pool.region,
                            pool.zone,
                            pool.instance_type,
                            pool.market,
                            price,
                            rate,
                            index,
                        )
                    )
            found = self._steps[step] = tuple(out)
            if self._shared is not None:
                self._shared.added(self._steps)
        return found


class SharedCandidates:
    """Candidates per step of every job with the same feasible pools and priors: they depend
    on nothing else (the trace, its evidence), so jobs share them. The latest `limit` steps
    asked are kept per set of pools (memory does not grow with the jobs)."""

    def __init__(self, evidence: Mapping[int, SeriesEvidence], limit: int = 4096) -> None:
        self.evidence, self.limit = evidence, limit
        self._by_pools: dict[tuple[tuple[int, float], ...], dict[int, tuple[Slot, ...]]] = {}

    def of(self, pools: tuple[tuple[int, float], ...]) -> dict[int, tuple[Slot, ...]]:
        found = self._by_pools.get(pools)
        if found is None:
            found = self._by_pools[pools] = {}
        return found

    def added(self, steps: dict[int, tuple[Slot, ...]]) -> None:
        if len(steps) > self.limit:
            del steps[next(iter(steps))]  # the first asked


def job_rules(job: WorkloadJob, workload: Workload, egress: EgressTable, step_s: float) -> Rules:
    """decide()'s rules for a workload job (deadline left out: policies add it when they use it).

    The decision period is route watch's (Workload.decision_period_s), not the trace's step:
    the simulation asks a waiting job's policy again inside a step when its answer could change
    (wake_h). The launch (Workload.launch_s) is counted by the slack test with each restart.
    """
    # With a save on the notice a preemption loses at most the notice window: what the
    # policies weigh as work at risk is the shorter of it and the interval (the longest notice
    # of the job's clouds, so never less than the simulation loses).
    at_risk_s = work_at_risk_s(job.checkpoint_interval_s, dict(workload.notice_s), job.clouds)
    return Rules(
        node_count=job.node_count,
        min_savings_pct=job.min_savings_pct,
        cooldown_s=job.cooldown_s,
        checkpoint_interval_s=at_risk_s,
        restore_overhead_s=job.restore_overhead_s,
        handover_s=workload.handover_s,
        zone_block_s=workload.zone_block_s,
        launch_s=workload.launch_s,  # the slack test counts it with each restart
        decision_period_s=workload.decision_period_s,
        deadline=None,
        spot_wait_s=job.spot_wait_s,
        transfers=TransferCosts(
            egress,
            data_cloud=job.data_cloud,
            data_region=job.data_region,
            data_gb=job.data_gb,
            checkpoint_gb=job.checkpoint_gb,
        ),
    )
