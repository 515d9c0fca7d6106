"""Replay a workload on price and availability traces under each policy; pure, deterministic.

The value types (Pool, Trace, Workload, JobContext, results) are in router.core.backtest_model.

`run_backtest(workload, trace, ...)` simulates every job under every policy in time steps of
`trace.step_s`, on the same traces and cost model, and returns per-policy totals next to the
hindsight optimum (router.core.hindsight), which is a lower bound on all of them.

The simulation, per job and policy, one step [t, t + step) at a time:
  1. a placement whose pool is unavailable at t (spot capacity out), or no longer offered (gone
     from the price series), is interrupted: work rolls back to the last checkpoint (the
     difference is recomputed hours); a spot zone is remembered as lost;
  2. the policy chooses: stay, move / switch-market / re-place onto a candidate, or wait; a
     job that waits is asked again inside the step when its policy's answer could change
     (`wake_h`: route watch decides every minute). A voluntary move saves a checkpoint first
     (route migrate's save request) and pays the hand-over overlap at the old price; every
     (re)start but the first pays the restore overhead as paid time without progress; a new
     region pays data and checkpoint egress (router.core.egress);
  3. the placement runs: price × node_count per hour used; the step the job arrives in only
     from its arrival (JobContext.begins / hours), a step in which it was asked again only
     from then, the last step only up to the moment the work is done. Checkpoints complete
     every checkpoint interval of work.
Jobs are independent (no capacity contention between them) and on-demand never runs out.

Policies (router.core.backtest_policies): single-cloud on-demand (the baseline), single-cloud
spot with on-demand fallback, multi-cloud spot placed once, multi-cloud with recovery and
migration, deadline-aware (+ greedy-deadline and the SkyPilot peers, router.core.backtest_peers,
with `--policies all`).
Migrate and deadline-aware call router.core.decide.decide — the function `route watch` calls.
Each spot pool's interruption rate is updated by the trace's past (trace_evidence).

Candidates at each step come from the planner: router.core.planner.plan ranks the job's offers once
(filters, egress, interruption rates; see `feasible_pools`), and each step re-prices the
feasible pools at that step's prices.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from router.core.backtest_model import (
    BacktestResult,
    JobContext,
    JobRun,
    PolicyResult,
    Slot,
    Trace,
    Workload,
    WorkloadJob,
    first_step,
    job_rules,
)
from router.core.backtest_policies import Policy, RunState, policies
from router.core.decision_model import SPOT, STAY, History, zone_key
from router.core.egress import EgressTable
from router.core.interruption import InterruptionModel, SeriesEvidence
from router.core.job.model import Job
from router.core.job.problems import parse_job
from router.core.offers import Offer
from router.core.org import OrgConfig
from router.core.placement import Placement, PlanResult
from router.core.plan_explain import no_fit_reason
from router.core.planner import plan
from router.core.storage_prices import StoragePrices

Progressed = Callable[[int, int], None]  # (jobs done, jobs in all)
PlanFeasible = Callable[[WorkloadJob, Sequence[Offer], datetime], Sequence[Any]]


# --- the simulation ----------------------------------------------------------------------


def simulate_job(ctx: JobContext, policy: Policy, *, keep_decisions: bool = False) -> JobRun:
    """Replay one job under one policy, step by step (see the module docstring)."""
    job, trace, rules = ctx.job, ctx.trace, ctx.rules
    run = JobRun(job.name, deadline=job.deadline, gpu_hours=job.gpu_hours)
    state = RunState()
    interval_h = job.checkpoint_interval_s / 3600.0
    restore_h = job.restore_overhead_s / 3600.0
    nodes = job.node_count
    for step in range(ctx.first_step, trace.steps):
        now = ctx.begins(step)  # the arrival, in the step the job arrives in
        cur = state.current
        if cur is not None and not state.interrupted and not _usable(trace, cur.pool, step):
            # Spot capacity out — or any pool that is not offered any more (it vanished from the
            # price series) or marked unavailable: what runs there stops.
            state.interrupted = True
            run.interruptions += 1
            run.recomputed_h += state.done_h - state.checkpointed_h
            state.done_h = state.checkpointed_h
            if cur.market == SPOT:  # a preemption: the zone is blocked for zone_block
                h = state.history
                state.history = History(
                    h.last_move_at, (*h.lost_zones, (zone_key(cur), now)), h.committed_on_demand
                )
        cands = ctx.candidates(step)
        action, target, reason = policy.choose(ctx, state, cands, now)
        end = trace.at(step + 1)
        # route watch decides every minute: a job kept waiting is asked again inside the step
        # at the moment its answer could change (its slack reaching the margin, say).
        wake = getattr(policy, "wake_h", None)
        for _ in range(getattr(policy, "wakes_per_step", 8)):
            if (
                target is not None
                or wake is None
                or not (state.current is None or state.interrupted)
            ):
                break
            after = wake(ctx, state, now)
            if after is None or now + timedelta(hours=after) >= end:
                break
            now += timedelta(hours=after)
            action, target, reason = policy.choose(ctx, state, cands, now)
        if keep_decisions and action != STAY:
            run.decisions.append((step, action, reason))
        if target is not None and (cur is None or target.pool != cur.pool or state.interrupted):
            if cur is not None and not state.interrupted:
                run.migrations += 1
                handover = rules.handover_s / 3600.0 * cur.price_per_hour * nodes
                run.cost += handover
                run.extras.append((step, handover))
                # route migrate asks the job to save before the new placement starts: a
                # voluntary move keeps its work (an interruption loses what the last
                # checkpoint does not hold).
                state.checkpointed_h = state.done_h
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
        span_h = (end - now).total_seconds() / 3600.0  # the rest of the step from `now`
        overhead = min(state.overhead_h, span_h)
        state.overhead_h -= overhead
        work = span_h - overhead
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
        # What a preemption at the end of this step keeps: the last periodic checkpoint, the
        # save of a move, or on spot the save the checkpoint library makes on the cloud's
        # notice (all the work but that of the notice window).
        kept = math.floor(state.done_h / interval_h + 1e-9) * interval_h
        notice_h = ctx.notice_h.get(cur.cloud) if cur.market == SPOT else None
        if notice_h is not None:
            kept = max(kept, state.done_h - notice_h)
        state.checkpointed_h = max(state.checkpointed_h, kept)
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


def _usable(trace: Trace, pool: int, step: int) -> bool:
    price = trace.prices[pool][step]
    return trace.available[pool][step] and price == price  # nan: not offered


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


def trace_evidence(trace: Trace) -> dict[int, SeriesEvidence]:
    """Each spot pool's availability series as interruption evidence (router.core.interruption):
    a policy at step t sees the preemptions and up-time before t, never after."""
    return {
        i: SeriesEvidence(trace.available[i], trace.step_h)
        for i, pool in enumerate(trace.pools)
        if pool.market == SPOT
    }


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
    now = max(job.arrival, trace.at(step))  # it arrives within its first step
    placements = plan_feasible(job, job_offers(job, trace, step), now)
    out = []
    for p in placements:
        i = index.get((p.cloud, p.region, p.zone, p.instance_type, p.market))
        if i is not None:
            out.append((i, float(p.interruptions_per_hour)))
    return sorted(set(out))


def unplaceable_reason(
    job: WorkloadJob, trace: Trace, step: int, plan_feasible: PlanFeasible
) -> str:
    """Why the planner placed a job on none of the trace's pools at its arrival, in words."""
    offers = job_offers(job, trace, step)
    shape = f"{job.gpu}×{job.gpu_count}"
    if not offers:
        return f"no {shape} pool is priced at its arrival"
    why = getattr(plan_feasible, "why_not", None)
    said = f": {why(job, offers, max(job.arrival, trace.at(step)))}" if why is not None else ""
    return f"none of the {len(offers)} {shape} pools priced at its arrival fits it{said}"


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
    return PlannerRanking(org, egress, interruption, storage)


class PlannerRanking:
    """The planner's feasible placements of a workload job (`why_not`: why none, in words)."""

    def __init__(
        self,
        org: OrgConfig,
        egress: EgressTable,
        interruption: InterruptionModel,
        storage: StoragePrices | None,
    ) -> None:
        self.org, self.egress, self.interruption, self.storage = org, egress, interruption, storage
        self._specs: dict[str, Job] = {}

    def _plan(self, job: WorkloadJob, offers: Sequence[Offer], now: datetime) -> PlanResult:
        spec = self._specs.get(job.name)
        if spec is None:
            spec = self._specs[job.name] = job_spec(job)
        return plan(
            spec,
            offers,
            org=self.org,
            egress=self.egress,
            now=now,
            interruption=self.interruption,
            storage=self.storage,
        )

    def __call__(
        self, job: WorkloadJob, offers: Sequence[Offer], now: datetime
    ) -> Sequence[Placement]:
        return self._plan(job, offers, now).placements

    def why_not(self, job: WorkloadJob, offers: Sequence[Offer], now: datetime) -> str:
        return no_fit_reason(self._specs[job.name], self._plan(job, offers, now).rejected)


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
    unplaceable: list[tuple[str, str]] = []  # (job, why it could not run)
    total = len(workload.jobs)
    matrix = price_matrix(trace) if with_optimum else None
    evidence = trace_evidence(trace)
    for n, job in enumerate(workload.jobs):
        first = first_step(job, trace)
        if first >= trace.steps:
            unplaceable.append((job.name, "arrives after the traces end"))
            continue
        pools = feasible_pools(job, trace, first, plan_feasible)
        if not pools:
            unplaceable.append((job.name, unplaceable_reason(job, trace, first, plan_feasible)))
            continue
        rules = job_rules(job, workload, egress, trace.step_s)
        notice = {c: h for c, _ in workload.notice_s if (h := workload.notice_h(c)) is not None}
        ctx = JobContext(job, trace, pools, rules, first, evidence, notice)
        last = 0  # the optimum of a job without a deadline ends by the slowest policy's end
        for policy in chosen:
            run = simulate_job(ctx, policy)
            _merge_segments(run)
            runs[policy.name].append(run)
            # (a peer — SkyPilot, which knows no deadline — may finish days later: its waiting
            # is not credited to the optimum, whose window stays spotroute's policies')
            if run.finished_at is not None and not getattr(policy, "peer", False):
                last = max(last, ctx.step_of(run.finished_at) + 1)
        if with_optimum:
            best.append(optimum_cost(ctx, matrix, horizon=last or None))
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
        unplaceable=tuple(name for name, _ in unplaceable),
        policies=tuple(results),
        baseline=chosen[0].name,
        optimum=optimum if with_optimum else chosen[0].name,
        pools=trace.pools,
        unplaceable_reasons=tuple(unplaceable),
    )
