"""Backtest properties on random workloads and traces: the optimum bounds every policy below,
deadline-aware never misses a feasible deadline, and the migration policy runs decide()."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.config.datafiles import load_egress, load_interruption_model, load_storage_prices
from router.core.backtest import run_backtest
from router.core.backtest_model import Pool, Trace, Workload, WorkloadJob
from router.core.backtest_policies import GreedyDeadline, policies, policy_set

START = datetime(2026, 11, 1, tzinfo=UTC)
EGRESS = load_egress()
INTERRUPTION = load_interruption_model()
STORAGE = load_storage_prices()
PLACES = [
    ("aws", "us-east-1", "p4de.24xlarge", 1152.0),
    ("aws", "us-west-2", "p4de.24xlarge", 1152.0),
    ("gcp", "us-central1", "a2-ultragpu-8g", 1360.0),
    ("azure", "eastus", "Standard_ND96amsr_A100_v4", 1900.0),
]


def pool(place: int, market: str, zone: int = 0) -> Pool:
    cloud, region, itype, memory = PLACES[place]
    return Pool(
        cloud, region, f"{region}-{'abc'[zone]}" if market == "spot" else None, itype, market,
        "A100-80GB", 8, 80, 96, memory, ">20%" if market == "spot" else None,
    )  # fmt: skip


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Workload, Trace]:
    """Random markets: zone blocks, pools without on-demand, spot dearer than on-demand, pools
    that stop being offered (nan) for a while, jobs that arrive within a step."""
    steps = draw(st.integers(12, 40))
    step_s = draw(st.sampled_from([1800.0, 3600.0]))
    places = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True))
    pools: list[Pool] = []
    prices: list[tuple[float, ...]] = []
    available: list[tuple[bool, ...]] = []
    for place in places:
        od_price = draw(st.floats(20, 45))
        if draw(st.integers(0, 3)):  # one place in four sells no on-demand of the type
            pools.append(pool(place, "on-demand"))
            series = [od_price] * steps
            if not draw(st.integers(0, 4)):  # not listed for a while (gone from the series)
                gone = draw(st.integers(0, steps - 1))
                series[gone : gone + draw(st.integers(1, steps))] = [math.nan] * (steps - gone)
                series = series[:steps]
            prices.append(tuple(series))
            available.append((True,) * steps)
        for zone in range(draw(st.integers(1, 2))):
            pools.append(pool(place, "spot", zone))
            base = draw(st.floats(5, 60))  # up to above on-demand
            factors = draw(st.lists(st.floats(0.6, 1.4), min_size=steps, max_size=steps))
            prices.append(tuple(round(base * f, 3) for f in factors))
            available.append(tuple(draw(st.lists(st.booleans(), min_size=steps, max_size=steps))))
    trace = Trace(START, step_s, tuple(pools), tuple(prices), tuple(available))
    jobs = []
    for n in range(draw(st.integers(1, 3))):
        arrival = START + timedelta(seconds=draw(st.integers(0, int(steps // 3 * step_s))))
        hours = draw(st.floats(0.5, steps * step_s / 3600 / 3))
        deadline = None
        if draw(st.booleans()):
            deadline = arrival + timedelta(hours=hours * draw(st.floats(0.8, 2.5)))
        jobs.append(
            WorkloadJob(
                name=f"job-{n}",
                arrival=arrival,
                duration_h=round(hours, 2),
                gpu="A100-80GB",
                gpu_count=8,
                node_count=draw(st.integers(1, 2)),
                checkpoint_interval_s=draw(st.sampled_from([600.0, 1800.0, 3600.0])),
                restore_overhead_s=draw(st.sampled_from([0.0, 300.0, 600.0, 1200.0])),
                checkpoint_gb=draw(st.sampled_from([0.0, 50.0, 300.0])),
                data_cloud="aws",
                data_region="us-east-1",
                data_gb=draw(st.sampled_from([0.0, 200.0, 2000.0])),
                deadline=deadline,
                min_savings_pct=draw(st.sampled_from([0.0, 10.0, 20.0])),
                cooldown_s=draw(st.sampled_from([0.0, 3600.0])),
                clouds=("aws", "gcp", "azure"),
            )
        )
    home = draw(st.sampled_from(sorted({p.cloud for p in pools})))
    workload = Workload(
        "random",
        tuple(jobs),
        home_cloud=home,
        handover_s=draw(st.sampled_from([0.0, 300.0])),
        zone_block_s=draw(st.sampled_from([0.0, 1800.0, 3600.0, 3 * 3600.0])),
        # with and without the save on a spot notice (node_startup.csv's leads, and a long one)
        notice_s=draw(st.sampled_from([(), (("aws", 120.0), ("gcp", 30.0), ("azure", 30.0)),
                                       (("aws", 1200.0), ("gcp", 1200.0), ("azure", 1200.0))])),
    )  # fmt: skip
    return workload, trace


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_optimum_is_never_above_any_policy_that_kept_its_deadline(s):
    workload, trace = s
    result = run_backtest(
        workload,
        trace,
        egress=EGRESS,
        interruption=INTERRUPTION,
        storage=STORAGE,
        policy_set=policy_set(workload.home_cloud, "all"),  # the peers (SkyPilot's) too
    )
    best = {r.job: r for r in result.policy("optimum").runs}
    for policy in result.policies:
        for run in policy.runs:
            assert math.isfinite(run.cost), (policy.name, run.job)  # nothing paid at nan
            if not run.finished:
                continue
            # Whatever a policy finished, the optimum finished (waiting is free for it) …
            assert best[run.job].finished, (policy.name, run.job)
            if run.deadline_missed:
                continue
            if policy.name.startswith("skypilot-") and run.deadline is None:
                continue  # the optimum's window is not widened by the peer's later finishes
            # … and, by the deadline, for no more than the policy paid.
            assert not best[run.job].deadline_missed, (policy.name, run.job)
            assert best[run.job].cost <= run.cost + 1e-6, (policy.name, run.job)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_no_deadline_policy_misses_a_deadline_on_demand_could_keep(s):
    """migrate (what route watch runs without waiting), deadline-aware and greedy."""
    workload, trace = s
    chosen = (*policies(workload.home_cloud), GreedyDeadline())
    result = run_backtest(
        workload,
        trace,
        egress=EGRESS,
        interruption=INTERRUPTION,
        storage=STORAGE,
        with_optimum=False,
        policy_set=chosen,
    )
    names = ("migrate", "deadline-aware", "greedy-deadline")
    runs = [run for name in names for run in result.policy(name).runs]
    for run, job in zip(runs, workload.jobs * len(names), strict=True):
        first = max(job.arrival, trace.start)  # a job starts when it arrives, within a step
        done = first + timedelta(hours=job.duration_h)
        feasible = job.deadline is not None and done <= job.deadline <= trace.end
        # On-demand must stay offered up to the deadline: a policy that waits for spot cannot
        # know that on-demand will stop being listed before then.
        if feasible and on_demand_throughout(trace, first, job.deadline):  # type: ignore[arg-type]
            assert not run.deadline_missed, (job, run.finished_at)


def on_demand_throughout(trace: Trace, begin: datetime, end: datetime) -> bool:
    """On-demand is offered from `begin` to `end`, and none offered at `begin` goes away."""
    span = range(int((begin - trace.start) // timedelta(seconds=trace.step_s)),
                 math.ceil((end - trace.start) / timedelta(seconds=trace.step_s)))  # fmt: skip
    offered = [
        i for i, p in enumerate(trace.pools)
        if p.market == "on-demand" and trace.prices[i][span.start] == trace.prices[i][span.start]
    ]  # fmt: skip
    return bool(offered) and all(trace.prices[i][s] == trace.prices[i][s] for i in offered
                                 for s in span)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.data())
def test_no_policy_reads_the_trace_past_now(s, data):
    """Two traces equal up to a step and different after it: every policy decides and pays
    the same up to that step, learned interruption rates and zone choice included."""
    from router.core.backtest import feasible_pools, planner_ranking, simulate_job, trace_evidence
    from router.core.backtest_model import JobContext, first_step, job_rules
    from router.core.org import OrgConfig

    workload, trace = s
    cut = data.draw(st.integers(0, trace.steps - 2), label="last step shared")
    later: list[tuple[tuple[float, ...], tuple[bool, ...]]] = []
    for prices, up in zip(trace.prices, trace.available, strict=True):
        tail = trace.steps - cut - 1
        flips = data.draw(st.lists(st.booleans(), min_size=tail, max_size=tail))
        scale = data.draw(st.floats(0.5, 2.0))
        later.append((
            prices[: cut + 1] + tuple(p * scale for p in prices[cut + 1 :]),
            up[: cut + 1] + tuple(a != f for a, f in zip(up[cut + 1 :], flips, strict=True)),
        ))  # fmt: skip
    other = Trace(trace.start, trace.step_s, trace.pools, tuple(p for p, _ in later),
                  tuple(a for _, a in later))  # fmt: skip
    rank = planner_ranking(OrgConfig(), EGRESS, INTERRUPTION, STORAGE)
    chosen = policy_set(workload.home_cloud, "all")
    notice = {c: h for c, _ in workload.notice_s if (h := workload.notice_h(c)) is not None}
    for job in workload.jobs:
        first = first_step(job, trace)
        if first > cut:
            continue
        pools = feasible_pools(job, trace, first, rank)
        assert pools == feasible_pools(job, other, first, rank)
        rules = job_rules(job, workload, EGRESS, trace.step_s)
        # What a policy reads of the trace at a step: the candidates, at that step's prices and
        # with the interruption rates learned from the pools' past.
        seen = [JobContext(job, t, pools, rules, first, trace_evidence(t)) for t in (trace, other)]
        for step in range(first, cut + 1):
            assert seen[0].candidates(step) == seen[1].candidates(step), step
        for policy in chosen:
            runs = []
            for t in (trace, other):
                ctx = JobContext(job, t, pools, rules, first, trace_evidence(t), notice)
                run = simulate_job(ctx, policy, keep_decisions=True)
                runs.append((
                    [d for d in run.decisions if d[0] <= cut],
                    [seg for seg in run.segments if seg[0] <= cut],
                    [x for x in run.extras if x[0] <= cut],
                ))  # fmt: skip
            assert runs[0] == runs[1], (policy.name, job.name, cut)
