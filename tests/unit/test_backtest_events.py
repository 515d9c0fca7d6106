"""The event replay (what `route backtest` runs) gives the step replay's runs to the last bit.

The event replay asks a policy only where something it reads may change (router.core.
backtest_replay, backtest_quiet); the step replay asks at every step. On random markets shaped
like the real traces — prices that hold for long stretches, spot zones up and down in runs,
deadlines tight and loose, jobs without one waiting under spot_wait, zone blocks, pools that stop
being listed, the save on a notice or not, launches that take time (Workload.launch_s), first
placements by the policy or by `route deploy` (Workload.first_placement) — every policy, the
peers included, must give the same cost, egress, interruptions, moves, recomputed hours,
finish, payments and decisions.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.config.datafiles import load_egress, load_interruption_model, load_storage_prices
from router.core.backtest import (
    feasible_pools,
    planner_ranking,
    simulate_job,
    simulate_job_events,
    trace_evidence,
)
from router.core.backtest_model import (
    JobContext,
    JobRun,
    Pool,
    Trace,
    Workload,
    WorkloadJob,
    first_step,
    job_rules,
)
from router.core.backtest_policies import policy_set
from router.core.backtest_replay import TraceChanges
from router.core.decision_model import WAIT
from router.core.org import OrgConfig

START = datetime(2026, 11, 1, tzinfo=UTC)
EGRESS = load_egress()
INTERRUPTION = load_interruption_model()
STORAGE = load_storage_prices()
PLACES = [
    ("aws", "us-east-1", "p4de.24xlarge", 1152.0),
    ("aws", "us-west-2", "p4de.24xlarge", 1152.0),
    ("gcp", "us-central1", "a2-ultragpu-8g", 1360.0),
]


def pool(place: int, market: str, zone: int = 0) -> Pool:
    cloud, region, itype, memory = PLACES[place]
    return Pool(
        cloud, region, f"{region}-{'abc'[zone]}" if market == "spot" else None, itype, market,
        "A100-80GB", 8, 80, 96, memory, ">20%" if market == "spot" else None,
    )  # fmt: skip


def runs(rng: random.Random, steps: int, up_mean: float, down_mean: float) -> tuple[bool, ...]:
    """Availability in runs (up, then down, …) of geometric lengths, as the real traces are."""
    out: list[bool] = []
    up = rng.random() < up_mean / (up_mean + down_mean)
    while len(out) < steps:
        mean = up_mean if up else down_mean
        out.extend([up] * max(1, int(rng.expovariate(1 / mean))))
        up = not up
    return tuple(out[:steps])


def market(seed: int) -> tuple[Workload, Trace]:
    """A seeded market and workload of the shapes the module docstring lists."""
    rng = random.Random(seed)
    steps = rng.randint(60, 400)
    step_s = rng.choice([195.0, 600.0, 3600.0])
    pools: list[Pool] = []
    prices: list[tuple[float, ...]] = []
    available: list[tuple[bool, ...]] = []
    for place in rng.sample(range(len(PLACES)), rng.randint(1, 3)):
        if rng.random() < 0.85:
            pools.append(pool(place, "on-demand"))
            series = [rng.choice([30.0, 40.97, 33.5])] * steps
            if rng.random() < 0.15:  # stops being listed for a while
                gone = rng.randrange(steps)
                series[gone : gone + rng.randint(1, steps)] = [math.nan] * steps
            prices.append(tuple(series[:steps]))
            available.append((True,) * steps)
        for zone in range(rng.randint(1, 3)):
            pools.append(pool(place, "spot", zone))
            level = rng.choice([10.0, 12.0, 13.5, 13.5, 45.0])  # now and then above on-demand
            series = [level] * steps
            for _ in range(rng.randint(0, 3)):  # a few re-pricings
                at = rng.randrange(steps)
                series[at:] = [round(level * rng.uniform(0.7, 1.3), 2)] * (steps - at)
            prices.append(tuple(series))
            up_h, down_h = rng.uniform(1, 12), rng.uniform(0.3, 6)
            available.append(runs(rng, steps, up_h * 3600 / step_s, down_h * 3600 / step_s))
    trace = Trace(START, step_s, tuple(pools), tuple(prices), tuple(available))
    span_h = steps * step_s / 3600.0
    jobs = []
    for n in range(rng.randint(1, 4)):
        arrival = START + timedelta(seconds=rng.uniform(0, steps * step_s / 3))
        hours = round(rng.uniform(0.3, span_h / 3), 3)
        deadline = None
        if rng.random() < 0.6:
            deadline = arrival + timedelta(hours=hours * rng.uniform(0.9, 2.5))
        jobs.append(
            WorkloadJob(
                name=f"job-{n}", arrival=arrival, duration_h=hours, gpu="A100-80GB", gpu_count=8,
                node_count=rng.choice([1, 1, 2]),
                checkpoint_interval_s=rng.choice([600.0, 1800.0, 3600.0]),
                restore_overhead_s=rng.choice([0.0, 300.0, 600.0]),
                checkpoint_gb=rng.choice([0.0, 50.0, 300.0]), data_cloud="aws",
                data_region="us-east-1", data_gb=rng.choice([0.0, 200.0]), deadline=deadline,
                min_savings_pct=rng.choice([0.0, 10.0, 20.0]),
                cooldown_s=rng.choice([0.0, 3600.0]), clouds=("aws", "gcp", "azure"),
                spot_wait_s=rng.choice([0.0, 3 * 3600.0, 12 * 3600.0, 8760 * 3600.0]),
            )
        )  # fmt: skip
    workload = Workload(
        "events", tuple(jobs), home_cloud=rng.choice(sorted({p.cloud for p in pools})),
        handover_s=rng.choice([0.0, 300.0]), zone_block_s=rng.choice([0.0, 1800.0, 3 * 3600.0]),
        notice_s=rng.choice([(), (("aws", 120.0), ("gcp", 30.0), ("azure", 30.0))]),
        launch_s=rng.choice([0.0, 0.0, 600.0, 2400.0]),  # moves and re-placements launched later
        first_placement=rng.choice(["policy", "deploy"]),  # the arrival: the policy's or deploy's
    )  # fmt: skip
    return workload, trace


def shown(run: JobRun) -> tuple[object, ...]:
    """Everything a run reports; decisions but the repeated waits (asked less often)."""
    segments: list[tuple[int, int, int, float]] = []
    for seg in run.segments:  # the step replay keeps one per step: merged as run_backtest does
        if segments and segments[-1][2] == seg[2] and segments[-1][1] == seg[0]:
            a, _, p, usd = segments[-1]
            segments[-1] = (a, seg[1], p, usd + seg[3])
        else:
            segments.append(seg)
    decisions = [d for d in run.decisions if d[1] != WAIT]
    return (run.cost, run.egress_cost, run.interruptions, run.migrations, run.recomputed_h,
            run.finished_at, segments, run.extras, decisions, run.launches_refused)  # fmt: skip


def same_runs(workload: Workload, trace: Trace) -> int:
    """Replays every job under every policy both ways; the count of runs compared."""
    rank = planner_ranking(OrgConfig(), EGRESS, INTERRUPTION, STORAGE)
    evidence, changes = trace_evidence(trace), TraceChanges(trace)
    notice = {c: h for c, _ in workload.notice_s if (h := workload.notice_h(c)) is not None}
    compared = 0
    for job in workload.jobs:
        first = first_step(job, trace)
        if first >= trace.steps:
            continue
        pools = feasible_pools(job, trace, first, rank)
        if not pools:
            continue
        rules = job_rules(job, workload, EGRESS, trace.step_s)
        for policy in policy_set(workload.home_cloud, "all"):
            launch_h, deploys = workload.launch_s / 3600.0, workload.first_placement == "deploy"
            ctx = JobContext(job, trace, pools, rules, first, evidence, notice, None, launch_h,
                             deploys)  # fmt: skip
            by_steps = simulate_job(ctx, policy, keep_decisions=True)
            ctx = JobContext(job, trace, pools, rules, first, evidence, notice, None, launch_h,
                             deploys)  # fmt: skip
            by_events = simulate_job_events(ctx, policy, changes, keep_decisions=True)
            assert shown(by_events) == shown(by_steps), (policy.name, job)
            compared += 1
    return compared


def test_the_event_replay_matches_the_step_replay_on_150_seeded_markets():
    compared = sum(same_runs(*market(seed)) for seed in range(150))
    assert compared > 1000


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1000, 10**9))
def test_the_event_replay_matches_the_step_replay_on_random_markets(seed):
    same_runs(*market(seed))
