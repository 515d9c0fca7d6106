"""Replay a workload on price and availability traces under each policy; pure, deterministic.

`run_backtest(workload, trace, ...)` simulates every job under every policy in time steps of
`trace.step_s`, on the same traces and cost model, and returns per-policy totals next to the
hindsight optimum (router.core.hindsight), which is a lower bound on all of them.

The simulation, per job and policy, one step [t, t + step) at a time:
  1. a spot placement whose pool is unavailable at t is interrupted: work rolls back to the last
     checkpoint (the difference is recomputed hours); its zone is remembered as lost;
  2. the policy chooses: stay, move / switch-market / re-place onto a candidate, or wait.
     A voluntary move pays the hand-over overlap at the old price and loses the work since the
     last checkpoint; every (re)start but the first pays the restore overhead as paid time
     without progress; a new region pays data and checkpoint egress (router.core.egress);
  3. the placement runs: price × node_count per hour used; the last step is paid only up to
     the moment the work is done. Checkpoints complete every checkpoint interval of work.
Jobs are independent (no capacity contention between them) and on-demand never runs out.

Policies (POLICIES): single-cloud on-demand (the baseline), single-cloud spot with on-demand
fallback, multi-cloud spot placed once, multi-cloud with recovery and migration, deadline-aware.
The last two call router.core.decide.decide — the function `route watch` calls.

Candidates at each step come from the planner: router.core.planner.plan ranks the job's offers once
(filters, egress, interruption rates; see `feasible_pools`), and each step re-prices the
feasible pools at that step's prices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from router.core import decide as decision
from router.core.decision_model import (
    MOVE,
    REPLACE,
    SPOT,
    STAY,
    SWITCH_MARKET,
    WAIT,
    Action,
    Current,
    History,
    Progress,
    Rules,
    TransferCosts,
    zone_key,
)
from router.core.egress import EgressTable
from router.core.interruption import InterruptionModel
from router.core.job.model import Job
from router.core.job.problems import parse_job
from router.core.offers import Offer
from router.core.org import OrgConfig
from router.core.placement import Placement
from router.core.planner import plan
from router.core.storage_prices import StoragePrices

ON_DEMAND = "on-demand"
Progressed = Callable[[int, int], None]  # (jobs done, jobs in all)


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
) -> Trace:
    """A step trace from (time, pool, price) observations: each step holds the last price seen.

    Before a pool's first observation its first price holds (the price was not recorded, not
    absent). `available` gives per-pool availability series (True = usable), default always.
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
    prices: list[tuple[float, ...]] = []
    avail: list[tuple[bool, ...]] = []
    for pool in pools:
        seen = sorted(by_pool[pool], key=lambda x: x[0])
        series: list[float] = []
        i, price = 0, seen[0][1]
        for s in range(steps):
            edge = start + timedelta(seconds=(s + 1) * step_s)
            while i < len(seen) and seen[i][0] < edge:
                price = seen[i][1]
                i += 1
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

    @property
    def gpu_hours(self) -> float:
        return self.duration_h * self.gpu_count * self.node_count


@dataclass(frozen=True)
class Workload:
    """Jobs to replay, and the cloud single-cloud policies stay in (where the team lives)."""

    name: str
    jobs: tuple[WorkloadJob, ...]
    home_cloud: str = "aws"
    handover_s: float = 300.0
    zone_block_s: float = 3600.0


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

    def policy(self, name: str) -> PolicyResult:
        return next(p for p in self.policies if p.name == name)

    def savings_pct(self, name: str) -> float:
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
            "unplaceable": list(self.unplaceable),
            "baseline": self.baseline,
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


PlanFeasible = Callable[[WorkloadJob, Sequence[Offer], datetime], Sequence[Any]]


class JobContext:
    """A job's feasible pools (from the planner), its rules, and candidates per step (cached)."""

    def __init__(
        self,
        job: WorkloadJob,
        trace: Trace,
        pools: Sequence[tuple[int, float]],  # (pool index, interruptions per hour)
        rules: Rules,
        first_step: int,
    ) -> None:
        self.job, self.trace, self.rules = job, trace, rules
        self.pools = tuple(pools)
        self.first_step = first_step
        self.deadline_rules = replace(rules, deadline=job.deadline)
        self._steps: dict[int, tuple[Slot, ...]] = {}

    def candidates(self, step: int) -> tuple[Slot, ...]:
        """Every feasible pool usable at this step, at this step's price."""
        found = self._steps.get(step)
        if found is None:
            trace = self.trace
            out = []
            for index, rate in self.pools:
                price = trace.prices[index][step]
                if trace.available[index][step] and price == price:  # nan: not offered
                    pool = trace.pools[index]
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
        return found


def job_rules(job: WorkloadJob, workload: Workload, egress: EgressTable, step_s: float) -> Rules:
    """decide()'s rules for a workload job (deadline left out: policies add it when they use it)."""
    return Rules(
        node_count=job.node_count,
        min_savings_pct=job.min_savings_pct,
        cooldown_s=job.cooldown_s,
        checkpoint_interval_s=job.checkpoint_interval_s,
        restore_overhead_s=job.restore_overhead_s,
        handover_s=workload.handover_s,
        zone_block_s=workload.zone_block_s,
        decision_period_s=step_s,
        deadline=None,
        transfers=TransferCosts(
            egress,
            data_cloud=job.data_cloud,
            data_region=job.data_region,
            data_gb=job.data_gb,
            checkpoint_gb=job.checkpoint_gb,
        ),
    )


# --- policies ----------------------------------------------------------------------------


@dataclass
class RunState:
    """The simulated job between steps."""

    done_h: float = 0.0
    checkpointed_h: float = 0.0
    current: Slot | None = None
    since: datetime | None = None
    interrupted: bool = False
    started: bool = False
    overhead_h: float = 0.0
    history: History = field(default_factory=History)


class Policy(Protocol):
    name: str
    label: str

    def choose(
        self, ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime
    ) -> tuple[Action, Slot | None, str]: ...


def _cheapest(
    ctx: JobContext, state: RunState, cands: Sequence[Slot], markets: tuple[str, ...] = ()
) -> Slot | None:
    rules = ctx.rules
    left = max(0.0, ctx.job.duration_h - state.checkpointed_h)
    best: tuple[float, tuple[str, ...], Slot] | None = None
    for c in cands:
        if markets and c.market not in markets:
            continue
        usd = decision.remaining_cost(rules, c, left) + decision.arrival_cost(
            rules, c, state.current, 0.0
        )
        rank = (usd, (c.cloud, c.region, c.zone or "", c.instance_type, c.market), c)
        if best is None or rank[:2] < best[:2]:
            best = rank
    return None if best is None else best[2]


def _usable(ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime) -> list[Slot]:
    blocked = state.history.blocked(now, ctx.rules.zone_block_s)
    return [c for c in cands if zone_key(c) not in blocked]


class OnDemandBaseline:
    """Single cloud, on-demand: the cheapest on-demand placement in the home cloud, kept."""

    name = "on-demand"
    label = "single-cloud on-demand"

    def __init__(self, home_cloud: str) -> None:
        self.home = home_cloud

    def choose(
        self, ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime
    ) -> tuple[Action, Slot | None, str]:
        if state.current is not None and not state.interrupted:
            return STAY, None, ""
        home = [c for c in cands if c.cloud == self.home and c.market != SPOT]
        target = _cheapest(ctx, state, home or [c for c in cands if c.market != SPOT])
        return (REPLACE, target, "baseline") if target else (WAIT, None, "no on-demand")


class SpotFallback:
    """Single cloud, spot first; when interrupted, the next spot zone there, else on-demand."""

    name = "spot-fallback"
    label = "single-cloud spot + on-demand fallback"

    def __init__(self, home_cloud: str) -> None:
        self.home = home_cloud

    def choose(
        self, ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime
    ) -> tuple[Action, Slot | None, str]:
        if state.current is not None and not state.interrupted:
            return STAY, None, ""
        usable = _usable(ctx, state, cands, now)
        if any(c.cloud == self.home for c in cands):
            usable = [c for c in usable if c.cloud == self.home]
        # (a job whose GPU the home cloud does not sell at all uses the other clouds)
        target = _cheapest(ctx, state, usable, (SPOT,)) or _cheapest(ctx, state, usable)
        return (REPLACE, target, "fallback") if target else (WAIT, None, "nothing in home cloud")


class SpotOnce:
    """All clouds, spot, placed once: the cheapest at arrival; re-placed only when interrupted."""

    name = "spot-once"
    label = "multi-cloud spot, placed once"

    def choose(
        self, ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime
    ) -> tuple[Action, Slot | None, str]:
        if state.current is not None and not state.interrupted:
            return STAY, None, ""
        usable = _usable(ctx, state, cands, now)
        target = _cheapest(ctx, state, usable, (SPOT,)) or _cheapest(ctx, state, usable)
        return (REPLACE, target, "placed") if target else (WAIT, None, "nothing available")


class DecidePolicy:
    """All clouds through router.core.decide.decide — the rules `route watch` runs."""

    def __init__(self, name: str, label: str, *, deadlines: bool) -> None:
        self.name, self.label, self.deadlines = name, label, deadlines

    def choose(
        self, ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime
    ) -> tuple[Action, Slot | None, str]:
        rules = ctx.rules
        if self.deadlines and ctx.job.deadline is not None:
            rules = ctx.deadline_rules
        current = None
        if state.current is not None:
            assert state.since is not None
            current = Current(state.current, state.since, state.interrupted)
        progress = Progress(state.done_h, state.checkpointed_h, ctx.job.duration_h, ctx.job.arrival)
        # Looked up on the module each call, so the backtest runs whatever decide() is now.
        d = decision.decide(rules, progress, current, cands, state.history, now)
        if d.commit_on_demand and not state.history.committed_on_demand:
            state.history = History(
                state.history.last_move_at, state.history.lost_zones, committed_on_demand=True
            )
        target = d.target if d.action in (MOVE, SWITCH_MARKET, REPLACE) else None
        assert target is None or isinstance(target, Slot)
        return d.action, target, d.reason


class GreedyDeadline:
    """Can't Be Late's greedy baseline: spot when there is some, else wait; on-demand for good
    at the last safe moment (the same slack test as decide())."""

    name = "greedy-deadline"
    label = "greedy (spot or wait, on-demand at the last moment)"

    def choose(
        self, ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime
    ) -> tuple[Action, Slot | None, str]:
        running = state.current is not None and not state.interrupted
        if ctx.job.deadline is None:
            if running:
                return STAY, None, ""
            usable = _usable(ctx, state, cands, now)
            target = _cheapest(ctx, state, usable, (SPOT,)) or _cheapest(ctx, state, usable)
            return (REPLACE, target, "placed") if target else (WAIT, None, "nothing available")
        current = None
        if state.current is not None:
            assert state.since is not None
            current = Current(state.current, state.since, state.interrupted)
        progress = Progress(state.done_h, state.checkpointed_h, ctx.job.duration_h, ctx.job.arrival)
        _, slack, risk = decision.deadline_slack(ctx.deadline_rules, progress, current, now)
        if state.history.committed_on_demand or slack < risk:
            if not state.history.committed_on_demand:
                h = state.history
                state.history = History(h.last_move_at, h.lost_zones, True)
            if running and state.current is not None and state.current.market != SPOT:
                return STAY, None, ""
            target = _cheapest(ctx, state, _usable(ctx, state, cands, now), (ON_DEMAND,))
            if target is not None:
                kind = SWITCH_MARKET if running else REPLACE
                return kind, target, "slack gone: on-demand for good"
        if running:
            return STAY, None, ""
        target = _cheapest(ctx, state, _usable(ctx, state, cands, now), (SPOT,))
        return (REPLACE, target, "spot") if target else (WAIT, None, "no spot: waiting")


def policies(home_cloud: str) -> tuple[Policy, ...]:
    """The replayed policies, baseline first (the optimum is computed separately)."""
    return (
        OnDemandBaseline(home_cloud),
        SpotFallback(home_cloud),
        SpotOnce(),
        DecidePolicy("migrate", "multi-cloud + recovery + migration", deadlines=False),
        DecidePolicy("deadline-aware", "deadline-aware (Uniform Progress)", deadlines=True),
    )


# --- the simulation ----------------------------------------------------------------------


def simulate_job(ctx: JobContext, policy: Policy, *, keep_decisions: bool = False) -> JobRun:
    """Replay one job under one policy, step by step (see the module docstring)."""
    job, trace, rules = ctx.job, ctx.trace, ctx.rules
    step_h = trace.step_h
    run = JobRun(job.name, deadline=job.deadline, gpu_hours=job.gpu_hours)
    state = RunState()
    interval_h = job.checkpoint_interval_s / 3600.0
    restore_h = job.restore_overhead_s / 3600.0
    nodes = job.node_count
    for step in range(ctx.first_step, trace.steps):
        now = trace.at(step)
        cur = state.current
        if (
            cur is not None
            and not state.interrupted
            and cur.market == SPOT
            and not trace.available[cur.pool][step]
        ):
            state.interrupted = True
            run.interruptions += 1
            run.recomputed_h += state.done_h - state.checkpointed_h
            state.done_h = state.checkpointed_h
            h = state.history
            state.history = History(
                h.last_move_at, (*h.lost_zones, (zone_key(cur), now)), h.committed_on_demand
            )
        cands = ctx.candidates(step)
        action, target, reason = policy.choose(ctx, state, cands, now)
        if keep_decisions and action != STAY:
            run.decisions.append((step, action, reason))
        if target is not None and (cur is None or target.pool != cur.pool or state.interrupted):
            if cur is not None and not state.interrupted:
                run.migrations += 1
                handover = rules.handover_s / 3600.0 * cur.price_per_hour * nodes
                run.cost += handover
                run.extras.append((step, handover))
                run.recomputed_h += state.done_h - state.checkpointed_h
                state.done_h = state.checkpointed_h
                state.history = History(
                    now, state.history.lost_zones, state.history.committed_on_demand
                )
            transfer = rules.transfers
            if cur is None:
                moved = transfer.data_to(target.cloud, target.region)
            elif (cur.cloud, cur.region) != (target.cloud, target.region):
                moved = transfer.data_to(target.cloud, target.region) + transfer.checkpoint(
                    cur.cloud, cur.region, target.cloud, target.region
                )
            else:
                moved = 0.0
            run.cost += moved
            run.egress_cost += moved
            if moved:
                run.extras.append((step, moved))
            state.overhead_h = restore_h if state.started else 0.0
            state.current, state.since, state.interrupted = target, now, False
            state.started = True
        if state.current is None or state.interrupted:
            continue  # waiting: nothing runs, nothing is paid
        # Run this step at this step's price (the slot may carry an older step's price).
        cur = state.current
        price = trace.prices[cur.pool][step]
        overhead = min(state.overhead_h, step_h)
        state.overhead_h -= overhead
        work = step_h - overhead
        left = job.duration_h - state.done_h
        used = overhead + min(work, left)
        paid = price * nodes * used
        run.cost += paid
        run.segments.append((step, step + 1, cur.pool, paid))
        if work >= left - 1e-12:
            state.done_h = job.duration_h
            run.finished_at = now + timedelta(hours=used)
            break
        state.done_h += work
        state.checkpointed_h = math.floor(state.done_h / interval_h + 1e-9) * interval_h
        if cur.price_per_hour != price:
            state.current = Slot(
                cur.cloud,
                cur.region,
                cur.zone,
                cur.instance_type,
                cur.market,
                price,
                cur.interruptions_per_hour,
                cur.pool,
            )
    return run


def _merge_segments(run: JobRun) -> None:
    merged: list[tuple[int, int, int, float]] = []
    for seg in run.segments:
        if merged and merged[-1][2] == seg[2] and merged[-1][1] == seg[0]:
            a, _, pool, usd = merged[-1]
            merged[-1] = (a, seg[1], pool, usd + seg[3])
        else:
            merged.append(seg)
    run.segments = merged


def _total(name: str, label: str, runs: Sequence[JobRun]) -> PolicyResult:
    return PolicyResult(
        name=name,
        label=label,
        runs=tuple(runs),
        total_cost=sum(r.cost for r in runs),
        gpu_hours=sum(r.gpu_hours for r in runs if r.finished),
        interruptions=sum(r.interruptions for r in runs),
        migrations=sum(r.migrations for r in runs),
        recomputed_h=sum(r.recomputed_h for r in runs),
        deadline_misses=sum(1 for r in runs if r.deadline_missed),
        unfinished=sum(1 for r in runs if not r.finished),
    )


def job_offers(job: WorkloadJob, trace: Trace, step: int) -> list[Offer]:
    """The trace's pools with this job's GPU, as planner offers at this step's prices."""
    at = trace.at(step)
    out = []
    for index, pool in enumerate(trace.pools):
        price = trace.prices[index][step]
        if pool.gpu != job.gpu or pool.gpu_count != job.gpu_count or price != price:
            continue
        out.append(
            Offer(
                cloud=pool.cloud,
                region=pool.region,
                zone=pool.zone,
                instance_type=pool.instance_type,
                gpu=pool.gpu,
                gpu_count=pool.gpu_count,
                gpu_memory_gb=pool.gpu_memory_gb,
                vcpus=pool.vcpus,
                memory_gb=pool.memory_gb,
                market=pool.market,
                price_per_hour=price,
                source="trace",
                observed_at=at,
                interruption_bucket=pool.interruption_bucket,
            )
        )
    return out


def feasible_pools(
    job: WorkloadJob,
    trace: Trace,
    step: int,
    plan_feasible: PlanFeasible,
) -> list[tuple[int, float]]:
    """(pool index, interruptions per hour) of the pools the planner places the job on."""
    index = {
        (p.cloud, p.region, p.zone, p.instance_type, p.market): i for i, p in enumerate(trace.pools)
    }
    placements = plan_feasible(job, job_offers(job, trace, step), trace.at(step))
    out = []
    for p in placements:
        i = index.get((p.cloud, p.region, p.zone, p.instance_type, p.market))
        if i is not None:
            out.append((i, float(p.interruptions_per_hour)))
    return sorted(set(out))


def job_spec(job: WorkloadJob) -> Job:
    """The job.yaml model of a workload job, for the planner (market auto, checkpointed)."""
    data: dict[str, Any] = {
        "name": job.name,
        "resources": {
            "accelerators": f"{job.gpu}:{job.gpu_count}",
            "clouds": list(job.clouds),
        },
        "market": "auto",
        "duration_hours": job.duration_h,
        "node_count": job.node_count,
        "checkpoint": {
            "interval": job.checkpoint_interval_s,
            "restore_overhead": job.restore_overhead_s,
        },
        "run": {"command": ["train"]},
        "migration": {"min_savings_pct": job.min_savings_pct, "cooldown": job.cooldown_s},
    }
    if job.deadline is not None:
        data["deadline"] = job.deadline
    if job.data_cloud is not None and job.data_gb > 0:
        data["data"] = {
            "url": _URL_SCHEME.get(job.data_cloud, "file://") + "data",
            "cloud": job.data_cloud,
            "region": job.data_region,
            "size_gb": job.data_gb,
        }
    return parse_job(data, f"workload job {job.name}")


_URL_SCHEME = {"aws": "s3://", "gcp": "gs://", "azure": "az://", "local": "file://"}


def planner_ranking(
    org: OrgConfig,
    egress: EgressTable,
    interruption: InterruptionModel,
    storage: StoragePrices | None = None,
) -> PlanFeasible:
    """The one place the backtest calls the planner: feasible placements of a job at a moment."""
    specs: dict[str, Job] = {}

    def rank(job: WorkloadJob, offers: Sequence[Offer], now: datetime) -> Sequence[Placement]:
        spec = specs.get(job.name)
        if spec is None:
            spec = specs[job.name] = job_spec(job)
        return plan(
            spec,
            offers,
            org=org,
            egress=egress,
            now=now,
            interruption=interruption,
            storage=storage,
        ).placements

    return rank


def run_backtest(
    workload: Workload,
    trace: Trace,
    *,
    egress: EgressTable,
    interruption: InterruptionModel,
    storage: StoragePrices | None = None,
    plan_feasible: PlanFeasible | None = None,
    policy_set: Sequence[Policy] | None = None,
    with_optimum: bool = True,
    on_progress: Progressed | None = None,
) -> BacktestResult:
    """Every policy (and the hindsight optimum) over the same workload and traces."""
    from router.core.hindsight import optimum_cost, price_matrix

    chosen = tuple(policy_set) if policy_set is not None else policies(workload.home_cloud)
    if plan_feasible is None:
        plan_feasible = planner_ranking(OrgConfig(), egress, interruption, storage)
    runs: dict[str, list[JobRun]] = {p.name: [] for p in chosen}
    best: list[JobRun] = []
    unplaceable: list[str] = []
    total = len(workload.jobs)
    matrix = price_matrix(trace) if with_optimum else None
    for n, job in enumerate(workload.jobs):
        first = max(0, math.ceil((job.arrival - trace.start).total_seconds() / trace.step_s))
        if first >= trace.steps:
            unplaceable.append(job.name)
            continue
        pools = feasible_pools(job, trace, first, plan_feasible)
        if not pools:
            unplaceable.append(job.name)
            continue
        ctx = JobContext(job, trace, pools, job_rules(job, workload, egress, trace.step_s), first)
        for policy in chosen:
            run = simulate_job(ctx, policy)
            _merge_segments(run)
            runs[policy.name].append(run)
        if with_optimum:
            best.append(optimum_cost(ctx, matrix))
        if on_progress is not None:
            on_progress(n + 1, total)
    results = [_total(p.name, p.label, runs[p.name]) for p in chosen]
    optimum = "optimum"
    if with_optimum:
        results.append(_total(optimum, "hindsight optimum (lower bound)", best))
    return BacktestResult(
        workload=workload.name,
        start=trace.start,
        end=trace.end,
        step_s=trace.step_s,
        jobs=total,
        unplaceable=tuple(unplaceable),
        policies=tuple(results),
        baseline=chosen[0].name,
        optimum=optimum if with_optimum else chosen[0].name,
        pools=trace.pools,
    )
