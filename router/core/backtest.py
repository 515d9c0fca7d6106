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
     every checkpoint interval of work;
  4. a move or re-placement takes Workload.launch_s to launch: nothing is decided meanwhile,
     and a pool gone by then refuses it (router.core.backtest_replay).
At its arrival a job is placed by its policy, or with Workload.first_placement "deploy" (what
`route deploy` does) on the cheapest placement offered then, for spotroute's own policies.
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

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from router.core.backtest_model import (
    DEPLOY,
    BacktestResult,
    JobContext,
    JobRun,
    PolicyResult,
    SharedCandidates,
    Trace,
    Workload,
    WorkloadJob,
    first_step,
    job_rules,
)
from router.core.backtest_policies import Policy, policies
from router.core.backtest_replay import TraceChanges, replay_events, replay_steps
from router.core.decision_model import SPOT
from router.core.egress import EgressTable
from router.core.interruption import InterruptionModel, SeriesEvidence
from router.core.job.model import Job
from router.core.job.problems import parse_job
from router.core.offers import Offer
from router.core.org import OrgConfig
from router.core.plan_explain import no_fit_reason
from router.core.planner import feasible_offers, plan
from router.core.storage_prices import StoragePrices

Progressed = Callable[[int, int], None]  # (jobs done, jobs in all)
PlanFeasible = Callable[[WorkloadJob, Sequence[Offer], datetime], Sequence[Any]]


class FeasibleOffer(NamedTuple):
    """A pool the planner places a job on, with its interruptions per instance-hour."""

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    market: str
    interruptions_per_hour: float


# --- the simulation ----------------------------------------------------------------------


def simulate_job(ctx: JobContext, policy: Policy, *, keep_decisions: bool = False) -> JobRun:
    """Replay one job under one policy, every step asked (the reference; module docstring)."""
    return replay_steps(ctx, policy, keep_decisions=keep_decisions)


def simulate_job_events(
    ctx: JobContext,
    policy: Policy,
    changes: TraceChanges | None = None,
    *,
    keep_decisions: bool = False,
) -> JobRun:
    """The same replay, the policy asked only where something it reads may change
    (router.core.backtest_replay): what run_backtest runs."""
    changes = changes or TraceChanges(ctx.trace)
    steps = changes.of([i for i, _ in ctx.pools])
    return replay_events(ctx, policy, steps, keep_decisions=keep_decisions)


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
    out = []
    for p in plan_feasible(job, job_offers(job, trace, step), now):
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
    """The planner's feasible pools of a workload job (`why_not`: why none, in words)."""

    def __init__(
        self,
        org: OrgConfig,
        egress: EgressTable,
        interruption: InterruptionModel,
        storage: StoragePrices | None,
    ) -> None:
        self.org, self.egress, self.interruption, self.storage = org, egress, interruption, storage
        self._specs: dict[str, Job] = {}

    def _spec(self, job: WorkloadJob) -> Job:
        spec = self._specs.get(job.name)
        if spec is None:
            spec = self._specs[job.name] = job_spec(job)
        return spec

    def __call__(
        self, job: WorkloadJob, offers: Sequence[Offer], now: datetime
    ) -> list[FeasibleOffer]:
        """The offers plan() places the job on, unranked, without building Placements (the
        same filters: planner.feasible_offers)."""
        return [
            FeasibleOffer(o.cloud, o.region, o.zone, o.instance_type, o.market, rate)
            for o, rate in feasible_offers(
                self._spec(job), offers, org=self.org, egress=self.egress, now=now,
                interruption=self.interruption, storage=self.storage,
            )
        ]  # fmt: skip

    def why_not(self, job: WorkloadJob, offers: Sequence[Offer], now: datetime) -> str:
        result = plan(
            self._spec(job), offers, org=self.org, egress=self.egress, now=now,
            interruption=self.interruption, storage=self.storage,
        )  # fmt: skip
        return no_fit_reason(self._spec(job), result.rejected)


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
    changes = TraceChanges(trace)
    shared = SharedCandidates(evidence)
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
        ctx = JobContext(job, trace, pools, rules, first, evidence, notice, shared,
                         workload.launch_s / 3600.0,
                         workload.first_placement == DEPLOY)  # fmt: skip
        last = 0  # the optimum of a job without a deadline ends by the slowest policy's end
        steps = changes.of([i for i, _ in pools])
        for policy in chosen:
            run = replay_events(ctx, policy, steps)
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
