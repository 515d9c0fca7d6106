"""Backtest benchmarks (docs/benchmarks.md): the 30-day scenario, deadlines on availability
traces, and speed.

Run: .venv/bin/python bench/backtest_bench.py [--part scenario|deadlines|deadline-seeds|real|
                                                speed|optimum-speed|replay-speed|all]
                                               [--baseline DIR]

1. scenario   examples/backtest-30d.yaml: the policy table, and the migration policy again at
              lower min_savings_pct. Goal: multi-cloud with migration ≥ 45 % below single-cloud
              on-demand and within 5 % of the hindsight optimum.
2. deadlines  one spot pool and on-demand (the Can't Be Late setting), availability traces in
              the Can't-Be-Late JSON format (written, then read back by router.config.traces),
              60 jobs with deadlines per trace (1.2-2x the duration; 1.1-1.6x on the last two).
              Goal: deadline-aware meets 100 % of deadlines at lower cost than greedy.
   deadline-seeds  the same five settings redrawn with seeds 200-500: cost vs greedy only.
   real       the examples on real traces (bench/real_traces.py): whole, zone by zone, prices
              only. Goals: deadline-aware no dearer than greedy on every real scenario and
              closing ≥ 1/3 of greedy's gap to the optimum on average, 0 missed deadlines;
              within 2 % of the optimum on prices only; route watch's policy within 15 % of
              the optimum on issue 20's 9-zone scenario (real-88, below; last row) and, a
              stricter check, on the 4-zone example.
3. speed      30 days × ~1,000 pools (offers) × 100 jobs, every policy and the optimum.
              Goal: under 10 s.
4. optimum-speed  the hindsight optimum alone, each case in its own process (peak RSS is the
              process's): `real-88` 9 spot zones whose availability replays the real traces of
              ../shared/data/real-traces (repeated), on-demand in two regions, 45 days in 195 s
              steps, 88 jobs of 48 h (half with deadlines); `hourly-1000` the 30-day example's
              market and job mix, 1,000 jobs, 720 hourly steps. Each case also runs on a quarter
              and a half of its jobs: memory must stay flat in the number of jobs.
              Goals: real-88 under 10 s, hourly-1000 under 5 s.
5. replay-speed   issue 30: real-88 and hourly-1000 with --policies all (every policy, the
              optimum, the peers), before (--baseline DIR: a checkout of the old code) and after
              in one run, each in its own process; goals ≥ 4× and ≥ 2×, memory flat in jobs
              (bench/backtest_speed.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from router.config.datafiles import (
    load_egress,
    load_gpus,
    load_interruption_model,
    load_storage_prices,
)
from router.config.traces import read_availability
from router.config.workload import WorkloadFile, load_workload
from router.core.backtest import run_backtest
from router.core.backtest_model import (
    BacktestResult,
    JobContext,
    Pool,
    Trace,
    Workload,
    WorkloadJob,
    first_step,
    job_rules,
)
from router.core.backtest_policies import GreedyDeadline, policies
from router.core.synthetic import (
    CloudOffer,
    JobMix,
    MarketModel,
    Shape,
    _alternating,
    synthetic_trace,
    synthetic_workload,
)

ROOT = Path(__file__).resolve().parent.parent
EGRESS = load_egress()
MODEL = load_interruption_model()
STORAGE = load_storage_prices()
load_gpus()  # the planner's job model looks GPU names up (the core reads no files)


def _pct(value: float | None) -> str:
    return "baseline could not run" if value is None else f"{value:.1f} %"


def table(r: BacktestResult) -> None:
    print(
        "| policy | total $ | $/GPU-h | savings vs on-demand | gap to optimum | interruptions "
        "| migrations | recomputed h | deadline misses |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for p in r.policies:
        print(
            f"| {p.label} | {p.total_cost:,.0f} | {p.cost_per_gpu_hour:.2f} | "
            f"{_pct(r.savings_pct(p.name))} | {r.gap_to_optimum_pct(p.name):.1f} % | "
            f"{p.interruptions} | {p.migrations} | {p.recomputed_h:.1f} | {p.deadline_misses}"
            + (f" (+{p.unfinished} unfinished)" if p.unfinished else "")
            + " |"
        )


def scenario() -> None:
    wf = load_workload(ROOT / "examples" / "backtest-30d.yaml")
    assert wf.market is not None
    trace = synthetic_trace(
        wf.market, start=wf.start, days=wf.days, step_s=wf.step_s, seed=wf.market_seed
    )
    t0 = time.perf_counter()
    r = run_backtest(wf.workload, trace, egress=EGRESS, interruption=MODEL, storage=STORAGE)
    took = time.perf_counter() - t0
    hours = r.policy("on-demand").gpu_hours
    print(
        f"## scenario: {len(wf.workload.jobs)} jobs, {hours:,.0f} GPU-hours "
        f"({hours / wf.days:.0f}/day), {len(trace.pools)} pools, {took:.2f} s\n"
    )
    table(r)
    print()
    for pct in (10.0, 5.0, 0.0):
        jobs = tuple(replace(j, min_savings_pct=pct) for j in wf.workload.jobs)
        again = run_backtest(
            replace(wf.workload, jobs=jobs), trace, egress=EGRESS, interruption=MODEL,
            storage=STORAGE,
        )  # fmt: skip
        m = again.policy("migrate")
        print(
            f"- min_savings_pct {pct:g}: migration policy ${m.total_cost:,.0f}, "
            f"{_pct(again.savings_pct('migrate'))} below on-demand, "
            f"{again.gap_to_optimum_pct('migrate'):.1f} % above the optimum, "
            f"{m.migrations} migrations"
        )
    print()
    migration_headroom(wf, trace)


def migration_headroom(wf: WorkloadFile, trace: Trace) -> None:
    """Why migration rarely fires: how often another pool is cheaper, against what a move costs."""
    jobs = wf.workload.jobs
    hours = sorted(j.duration_h for j in jobs)
    data = sorted(j.data_gb for j in jobs)
    print(
        f"- jobs: median {hours[len(hours) // 2]:.1f} h (max {hours[-1]:.1f} h); data set median "
        f"{data[len(data) // 2]:,.0f} GB; checkpoint {min(j.checkpoint_gb for j in jobs):,.0f}-"
        f"{max(j.checkpoint_gb for j in jobs):,.0f} GB"
    )
    for gpu in sorted({p.gpu for p in trace.pools}):
        idx = [i for i, p in enumerate(trace.pools) if p.gpu == gpu and p.market == "spot"]
        first = min(idx, key=lambda i: trace.prices[i][0])
        gains = [
            1 - min(trace.prices[i][t] for i in idx if i != first) / trace.prices[first][t]
            for t in range(trace.steps)
        ]
        share = sum(g >= 0.2 for g in gains) / len(gains)
        print(
            f"- {gpu}: another spot pool is ≥ 20 % cheaper than the first-cheapest one in "
            f"{100 * share:.1f} % of hours (≥ 10 %: "
            f"{100 * sum(g >= 0.1 for g in gains) / len(gains):.1f} %; at most "
            f"{100 * max(gains):.1f} %)"
        )
    # The same market and jobs, but with the data set nowhere to copy and 4x as long (deadlines
    # 4x as far: the same slack factor): the moves that the egress and the short remaining work
    # ruled out above.
    for label, scale in (("no data set to move", 1.0), ("no data set, 4x longer", 4.0)):
        jobs = tuple(
            replace(j, data_gb=0.0, duration_h=scale * j.duration_h, deadline=(
                None if j.deadline is None else j.arrival + scale * (j.deadline - j.arrival)))
            for j in wf.workload.jobs
        )  # fmt: skip
        r = run_backtest(replace(wf.workload, jobs=jobs), trace, egress=EGRESS,
                         interruption=MODEL, storage=STORAGE)  # fmt: skip
        m, once = r.policy("migrate"), r.policy("spot-once")
        delta = 100 * (m.total_cost / once.total_cost - 1)
        print(
            f"- {label}: migration policy {m.migrations} migrations, ${m.total_cost:,.0f} vs "
            f"placed once ${once.total_cost:,.0f} ({delta:+.1f} %)"
        )
    print()


POOL_OD = Pool("aws", "us-east-1", None, "p4de.24xlarge", "on-demand", "A100-80GB", 8, 80, 96, 1152)
POOL_SPOT = Pool(
    "aws", "us-east-1", "us-east-1a", "p4de.24xlarge", "spot", "A100-80GB", 8, 80, 96, 1152, ">20%"
)


def deadlines() -> None:
    print("## deadlines on availability traces (Can't Be Late format, 10-min steps, 14 days)\n")
    print(
        "| trace | spot available | policy | total $ | deadlines met | cost vs greedy | "
        "gap to optimum |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, share, r in deadline_runs(100, with_optimum=True):
        greedy = r.policy("greedy-deadline").total_cost
        for key in ("greedy-deadline", "deadline-aware", "migrate", "on-demand", "optimum"):
            p = r.policy(key)
            met = len(p.runs) - p.deadline_misses
            print(
                f"| {name} | {share:.0%} | {p.label} | {p.total_cost:,.0f} | "
                f"{met}/{len(p.runs)} | {100 * (p.total_cost / greedy - 1):+.1f} % | "
                f"{r.gap_to_optimum_pct(key):.1f} % |"
            )
    print()


def deadline_seeds(seeds: tuple[int, ...] = (200, 300, 400, 500)) -> None:
    """The same five settings drawn again (traces and jobs) with other seeds: how robust."""
    print("## deadline-aware vs greedy, the five settings redrawn with other seeds\n")
    print("| seed | " + " | ".join(DEADLINE_SHORT) + " |")
    print("|---|" + "---|" * len(DEADLINE_SHORT))
    for seed in seeds:
        cells = []
        for _, _, r in deadline_runs(seed, with_optimum=False):
            aware, greedy = r.policy("deadline-aware"), r.policy("greedy-deadline")
            misses = aware.deadline_misses + greedy.deadline_misses
            cells.append(
                f"{100 * (aware.total_cost / greedy.total_cost - 1):+.1f} %"
                + (f" ({misses} missed)" if misses else "")
            )
        print(f"| {seed} | " + " | ".join(cells) + " |")
    print()


DEADLINE_SHORT = ("mostly up", "churning", "scarce", "long outages", "rare long outages")


def deadline_runs(seed: int, *, with_optimum: bool) -> list[tuple[str, float, BacktestResult]]:
    """Per setting (name, spot availability, result); setting n draws from Random(seed + n)."""
    start = datetime(2026, 11, 1, tzinfo=UTC)
    gap_s, days = 600.0, 14
    steps = int(days * 86400 / gap_s)
    # name: (mean up h, mean down h, deadline as a multiple of the duration)
    settings = {
        "mostly up (up 24 h / down 3 h)": (24.0, 3.0, (1.2, 2.0)),
        "churning (up 6 h / down 4 h)": (6.0, 4.0, (1.2, 2.0)),
        "scarce (up 3 h / down 6 h)": (3.0, 6.0, (1.2, 2.0)),
        "long outages, tight deadlines (up 12 h / down 12 h, 1.1-1.5x)": (12.0, 12.0, (1.1, 1.5)),
        "rare long outages, tight deadlines (up 48 h / down 12 h, 1.1-1.6x)": (
            48.0,
            12.0,
            (1.1, 1.6),
        ),
    }
    folder = Path(tempfile.mkdtemp(prefix="cbl-"))
    out = []
    for n, (name, (up_h, down_h, slack)) in enumerate(settings.items()):
        rng = random.Random(seed + n)
        usable = _alternating(rng, steps, gap_s / 3600, up_h, down_h)
        path = folder / f"trace-{n}.json"
        path.write_text(
            json.dumps(
                {
                    "metadata": {"gap_seconds": gap_s, "name": name},
                    "data": [0 if u else 1 for u in usable],
                }
            )
        )
        cbl = read_availability(path)  # the file goes through the real reader
        trace = Trace(
            start,
            gap_s,
            (POOL_OD, POOL_SPOT),
            ((40.97,) * steps, (13.5,) * steps),
            ((True,) * steps, cbl.usable[:steps]),
        )
        jobs = []
        for j in range(60):
            hours = round(rng.uniform(6, 30), 2)
            arrival = start + timedelta(hours=round(rng.uniform(0, (days - 3) * 24 - hours), 1))
            jobs.append(
                WorkloadJob(
                    name=f"j{j:02d}",
                    arrival=arrival,
                    duration_h=hours,
                    gpu="A100-80GB",
                    gpu_count=8,
                    checkpoint_interval_s=1800,
                    restore_overhead_s=600,
                    deadline=arrival + timedelta(hours=hours * rng.uniform(*slack)),
                    clouds=("aws",),
                )
            )
        chosen = (*policies("aws"), GreedyDeadline())
        r = run_backtest(
            Workload("cbl", tuple(jobs), home_cloud="aws", zone_block_s=0),
            trace,
            egress=EGRESS,
            interruption=MODEL,
            storage=STORAGE,
            policy_set=chosen,
            with_optimum=with_optimum,
        )
        out.append((name, sum(cbl.usable[:steps]) / steps, r))
    return out


def speed() -> None:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    regions = {
        "aws": [f"us-east-{i}" for i in range(1, 15)] + [f"eu-west-{i}" for i in range(1, 15)],
        "gcp": [f"us-central{i}" for i in range(1, 15)] + [f"europe-west{i}" for i in range(1, 15)],
        "azure": [f"eastus{i}" for i in range(1, 15)] + [f"westeurope{i}" for i in range(1, 15)],
    }
    a100 = Shape(
        "A100-80GB", 8, 80,
        (
            CloudOffer("aws", "p4de.24xlarge", 40.97, 0.342, tuple(regions["aws"]), 5),
            CloudOffer("gcp", "a2-ultragpu-8g", 40.44, 0.346, tuple(regions["gcp"]), 5),
            CloudOffer("azure", "Standard_ND96amsr_A100_v4", 32.77, 0.427,
                       tuple(regions["azure"]), 5),
        ),
    )  # fmt: skip
    h100 = Shape(
        "H100-80GB", 8, 80,
        (
            CloudOffer("aws", "p5.48xlarge", 98.32, 0.35, tuple(regions["aws"]), 5),
            CloudOffer("gcp", "a3-highgpu-8g", 87.83, 0.392, tuple(regions["gcp"]), 5),
            CloudOffer("azure", "Standard_ND96isr_H100_v5", 98.32, 0.35,
                       tuple(regions["azure"]), 5),
        ),
    )  # fmt: skip
    t0 = time.perf_counter()
    trace = synthetic_trace(MarketModel((a100, h100)), start=start, days=30, step_s=3600, seed=3)
    gen = time.perf_counter() - t0
    mix = (JobMix("A100-80GB", 8, weight=7, node_counts=(1, 1, 2)), JobMix("H100-80GB", 8, 3))
    workload = synthetic_workload(
        name="speed", start=start, days=30, gpu_hours_per_day=400, mix=mix, seed=5
    )
    workload = replace(workload, jobs=workload.jobs[:100])
    t0, c0 = time.perf_counter(), time.process_time()
    r = run_backtest(
        workload, trace, egress=EGRESS, interruption=MODEL, storage=STORAGE, with_optimum=False
    )
    policies_s, policies_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    r = run_backtest(workload, trace, egress=EGRESS, interruption=MODEL, storage=STORAGE)
    total_s, total_cpu = time.perf_counter() - t0, time.process_time() - c0
    print("## speed\n")
    print(
        f"- {len(trace.pools)} pools × {trace.steps} hourly steps × {len(workload.jobs)} jobs "
        f"(~{len(trace.pools) // 2} feasible pools per job): trace generated in {gen:.2f} s"
    )
    print(
        f"- five policies: {policies_s:.2f} s wall ({policies_cpu:.2f} s CPU); five policies + "
        f"hindsight optimum: {total_s:.2f} s wall ({total_cpu:.2f} s CPU); load "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"- (migration policy {_pct(r.savings_pct('migrate'))} below on-demand)\n")


REAL_TRACES = ROOT.parent / "shared" / "data" / "real-traces"
V100 = ("aws", "p3.2xlarge", "V100", 1, 16, 8, 61.0)


def real_88(limit: int | None) -> tuple[Workload, Trace]:
    """9 spot zones replaying the real availability traces, on-demand in two regions, 45 days
    in 195 s steps, 88 jobs of 48 h (half with deadlines at 1.5-2.5x)."""
    start = datetime(2026, 11, 1, tzinfo=UTC)
    step_s, days = 195.0, 45
    steps = -(-days * 86400 // int(step_s))
    files = sorted(REAL_TRACES.rglob("*.json"))
    rng = random.Random(88)
    cloud, itype, gpu, count, mem, vcpus, ram = V100
    zones = ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d", "us-east-1a", "us-east-1b",
             "us-east-1c", "us-east-1d", "us-east-1f")  # fmt: skip
    pools, prices, available = [], [], []
    for region in ("us-east-1", "us-west-2"):
        pools.append(Pool(cloud, region, None, itype, "on-demand", gpu, count, mem, vcpus, ram))
        prices.append((3.06,) * steps)
        available.append((True,) * steps)
    for n, zone in enumerate(zones):
        region = zone[:-1]
        pools.append(Pool(cloud, region, zone, itype, "spot", gpu, count, mem, vcpus, ram, ">20%"))
        prices.append((1.02,) * steps)
        if files:
            cbl = read_availability(files[n % len(files)])
            k = len(cbl.usable)
            available.append(
                tuple(cbl.usable[int(s * step_s // cbl.gap_s) % k] for s in range(steps))
            )
        else:  # without the shared traces: outages of the same order (up 6 h, down 4 h)
            available.append(_alternating(rng, steps, step_s / 3600, 6.0, 4.0))
    trace = Trace(start, step_s, tuple(pools), tuple(prices), tuple(available))
    jobs = []
    for j in range(88):
        arrival = start + timedelta(seconds=rng.uniform(0, 40 * 86400))
        deadline = None
        if j % 2:
            deadline = arrival + timedelta(hours=48 * rng.uniform(1.5, 2.5))
        jobs.append(
            WorkloadJob(
                name=f"v{j:02d}", arrival=arrival, duration_h=48.0, gpu=gpu, gpu_count=count,
                checkpoint_interval_s=1800, restore_overhead_s=300, deadline=deadline,
                clouds=("aws",),
            )
        )  # fmt: skip
    jobs.sort(key=lambda j: j.arrival)
    return Workload("real-88", tuple(jobs[:limit]), home_cloud="aws", zone_block_s=3600), trace


def hourly_1000(limit: int | None) -> tuple[Workload, Trace]:
    """The 30-day example's market and job mix, 1,000 jobs, 720 hourly steps."""
    wf = load_workload(ROOT / "examples" / "backtest-30d.yaml")
    assert wf.market is not None
    trace = synthetic_trace(
        wf.market, start=wf.start, days=wf.days, step_s=wf.step_s, seed=wf.market_seed
    )
    mix = (
        JobMix("A100-80GB", 8, weight=7, node_counts=(1, 1, 1, 2), median_hours=6, max_hours=36,
               checkpoint_gb=120, data_gb=(100.0, 1000.0)),
        JobMix("H100-80GB", 8, weight=3, median_hours=4, max_hours=24, checkpoint_gb=200,
               data_gb=(100.0, 2000.0)),
    )  # fmt: skip
    workload = synthetic_workload(
        name="hourly-1000", start=wf.start, days=wf.days, gpu_hours_per_day=2400, mix=mix,
        seed=11, arrivals_until_day=28,
    )  # fmt: skip
    jobs = workload.jobs[:1000]
    return replace(workload, jobs=jobs[:limit] if limit else jobs), trace


OPTIMUM_CASES = {"real-88": (real_88, 88), "hourly-1000": (hourly_1000, 1000)}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def optimum_case(name: str, limit: int | None) -> None:
    """One case in this process: policies, the jobs' contexts (the planner), then the optimum
    alone; one JSON line."""
    from router.core.hindsight import optimum_cost, price_matrix

    make, _ = OPTIMUM_CASES[name]
    workload, trace = make(limit)
    t0, c0 = time.perf_counter(), time.process_time()
    r = run_backtest(
        workload, trace, egress=EGRESS, interruption=MODEL, storage=STORAGE, with_optimum=False
    )
    policies_s, policies_cpu = time.perf_counter() - t0, time.process_time() - c0
    jobs = optimum_jobs(workload, trace, r)
    setup_mb = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    matrix = price_matrix(trace)  # once, shared by every job
    best = [optimum_cost(ctx, matrix, horizon=horizon) for ctx, horizon in jobs]
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({
        "case": name, "jobs": len(workload.jobs), "steps": trace.steps,
        "pools": len(trace.pools), "policies_s": round(policies_s, 2),
        "policies_cpu_s": round(policies_cpu, 2), "optimum_s": round(wall, 2),
        "optimum_cpu_s": round(cpu, 2), "rss_before_optimum_mb": round(setup_mb, 1),
        "rss_peak_mb": round(_rss_mb(), 1), "optimum_usd": round(sum(b.cost for b in best), 2),
        "optimum_unfinished": sum(1 for b in best if not b.finished),
    }))  # fmt: skip


def optimum_jobs(
    workload: Workload, trace: Trace, result: BacktestResult
) -> list[tuple[JobContext, int | None]]:
    """Each placed job's context and horizon, as run_backtest makes them (the planner once per
    job; the horizon of a job without a deadline from the policies' runs in `result`)."""
    from router.core.backtest import feasible_pools, planner_ranking
    from router.core.org import OrgConfig

    rank = planner_ranking(OrgConfig(), EGRESS, MODEL, STORAGE)
    ended: dict[str, list[datetime]] = {}
    for p in result.policies:
        for run in p.runs:
            if run.finished_at is not None:
                ended.setdefault(run.job, []).append(run.finished_at)
    out = []
    for job in workload.jobs:
        first = first_step(job, trace)
        if first >= trace.steps:
            continue
        pools = feasible_pools(job, trace, first, rank)
        if not pools:
            continue
        ctx = JobContext(job, trace, pools, job_rules(job, workload, EGRESS, trace.step_s), first)
        last = max((ctx.step_of(at) + 1 for at in ended.get(job.name, ())), default=None)
        out.append((ctx, last))
    return out


def markdown_head(*columns: str) -> None:
    """A markdown table's header row and rule."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))


def growing(jobs: int) -> tuple[int, int, int]:
    """A quarter, a half and all of a case's jobs: memory must stay flat across them."""
    return jobs // 4, jobs // 2, jobs


def optimum_speed() -> None:
    print("## optimum speed (each run in its own process)\n")
    markdown_head("case", "jobs", "steps × pools", "policies (wall / CPU)", "optimum wall",
                  "optimum CPU", "peak RSS before the optimum → after", "optimum $")  # fmt: skip
    for name, (_, jobs) in OPTIMUM_CASES.items():
        for limit in growing(jobs):
            out = subprocess.run(
                [sys.executable, __file__, "--case", name, "--jobs", str(limit)],
                check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            d = json.loads(out.strip().splitlines()[-1])
            print(
                f"| {name} | {d['jobs']} | {d['steps']} × {d['pools']} | "
                f"{d['policies_s']:.1f} s / {d['policies_cpu_s']:.1f} s | {d['optimum_s']:.2f} s | "
                f"{d['optimum_cpu_s']:.2f} s | {d['rss_before_optimum_mb']:.0f} → "
                f"{d['rss_peak_mb']:.0f} MB | {d['optimum_usd']:,.2f}"
                + (f" ({d['optimum_unfinished']} unfinished)" if d["optimum_unfinished"] else "")
                + " |"
            )
    print(f"\nload {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    parts = ["scenario", "deadlines", "deadline-seeds", "real", "speed", "optimum-speed",
             "replay-speed", "all"]  # fmt: skip
    ap.add_argument("--part", choices=parts, default="all")
    ap.add_argument("--baseline", type=Path, help="replay-speed: a checkout of the code before")
    ap.add_argument("--case", choices=sorted(OPTIMUM_CASES), help=argparse.SUPPRESS)
    ap.add_argument("--jobs", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        optimum_case(args.case, args.jobs)
        return
    part = args.part
    if part in ("scenario", "all"):
        scenario()
    if part in ("deadlines", "all"):
        deadlines()
    if part in ("deadline-seeds", "all"):
        deadline_seeds()
    if part in ("real", "all"):
        from bench.real_traces import real

        real()
    if part in ("speed", "all"):
        speed()
    if part in ("optimum-speed", "all"):
        optimum_speed()
    if part in ("replay-speed", "all"):
        from bench.backtest_speed import replay_speed

        replay_speed(args.baseline)


if __name__ == "__main__":
    main()
