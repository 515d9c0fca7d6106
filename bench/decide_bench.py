"""Pure decision time per job: decide() over the placements an A100-80GB×8 job sees (seeded).

Run: .venv/bin/python bench/decide_bench.py [--jobs 100] [--candidates 100] [--repeats 20]
Every job is running on spot with a deadline (the longest path: Uniform Progress, then the
money rules), data and checkpoint egress priced by the packaged egress table. Goal: < 1 ms/job.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from router.config.datafiles import load_egress
from router.core.decide import decide
from router.core.decision_model import Current, History, Progress, Rules, TransferCosts

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
REGIONS = {
    "aws": ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1"],
    "gcp": ["us-central1", "us-east4", "europe-west4", "asia-east1"],
    "azure": ["eastus", "westus2", "westeurope", "southcentralus"],
}


@dataclass(frozen=True, slots=True)
class Cap:
    cloud: str
    region: str
    zone: str | None
    instance_type: str
    market: str
    price_per_hour: float
    interruptions_per_hour: float


def candidates(rng: random.Random, n: int) -> list[Cap]:
    out = []
    for i in range(n):
        cloud = rng.choice(list(REGIONS))
        region = rng.choice(REGIONS[cloud])
        market = "spot" if rng.random() < 0.7 else "on-demand"
        price = rng.uniform(12, 20) if market == "spot" else rng.uniform(30, 41)
        rate = rng.choice([3.5e-5, 1.1e-4, 2.7e-4, 5e-4]) if market == "spot" else 0.0
        out.append(Cap(cloud, region, f"{region}-{i % 3}", f"type-{cloud}", market, price, rate))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--candidates", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    egress = load_egress()
    cands = candidates(rng, args.candidates)
    jobs = []
    for _ in range(args.jobs):
        here = rng.choice([c for c in cands if c.market == "spot"])
        total = rng.uniform(4, 48)
        done = rng.uniform(0, total * 0.9)
        rules = Rules(
            node_count=rng.choice([1, 2]),
            deadline=NOW + timedelta(hours=(total - done) * rng.uniform(1.1, 3)),
            transfers=TransferCosts(
                egress,
                data_cloud="aws",
                data_region="us-east-1",
                data_gb=rng.choice([0, 200, 2000]),
                checkpoint_gb=rng.choice([50, 500]),
            ),
        )
        progress = Progress(done, max(0.0, done - 0.3), total, NOW - timedelta(hours=done))
        jobs.append((rules, progress, Current(here, NOW - timedelta(hours=1))))
    history = History(last_move_at=NOW - timedelta(hours=3))
    per_job_ms = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for rules, progress, current in jobs:
            decide(rules, progress, current, cands, history, NOW)
        per_job_ms.append((time.perf_counter() - t0) * 1000 / len(jobs))
    per_job_ms.sort()
    print(
        f"decide(): {args.jobs} jobs × {args.candidates} candidates, {args.repeats} repeats — "
        f"median {statistics.median(per_job_ms):.3f} ms/job, "
        f"p95 {per_job_ms[int(0.95 * (len(per_job_ms) - 1))]:.3f} ms/job (goal < 1 ms)"
    )


if __name__ == "__main__":
    main()
