"""Planner throughput: `plan` over 100,000 synthetic offers (seeded), median and p95 in ms.

Run: .venv/bin/python bench/planner_bench.py [--offers 100000] [--repeats 30] [--seed 7]
The offers mimic a merged price book: 34 GPU instance types over AWS, GCP and Azure, tens of
regions, zones, both markets and three sources quoting the same capacity at different times.
The job asks for A100-80GB×8 on spot with 2000 GB of data in aws us-east-1, so about one offer
in eleven reaches the detailed filters and a few hundred become placements.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from router.config.datafiles import load_egress, load_interruption_model, load_storage_prices
from router.core.job.data import Data
from router.core.job.model import AcceleratorRequest, Checkpoint, Job, RegionFilter, Resources, Run
from router.core.offers import INTERRUPTION_BUCKETS, Offer
from router.core.org import Discount, OrgConfig, RegionRules
from router.core.planner import plan

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

# (instance type, gpu, gpus, gpu memory GB, vcpus, memory GB, on-demand $/h)
TYPES: dict[str, list[tuple[str, str, int, int, int, float, float]]] = {
    "aws": [
        ("p4de.24xlarge", "A100-80GB", 8, 80, 96, 1152, 40.97),
        ("p4d.24xlarge", "A100-40GB", 8, 40, 96, 1152, 32.77),
        ("p5.48xlarge", "H100-80GB", 8, 80, 192, 2048, 98.32),
        ("g5.xlarge", "A10G", 1, 24, 4, 16, 1.01),
        ("g5.12xlarge", "A10G", 4, 24, 48, 192, 5.67),
        ("g5.48xlarge", "A10G", 8, 24, 192, 768, 16.29),
        ("g6.xlarge", "L4", 1, 24, 4, 16, 0.80),
        ("g6.12xlarge", "L4", 4, 24, 48, 192, 4.60),
        ("g6e.xlarge", "L40S", 1, 48, 4, 32, 1.86),
        ("g6e.48xlarge", "L40S", 8, 48, 192, 1536, 30.13),
        ("g4dn.xlarge", "T4", 1, 16, 4, 16, 0.53),
        ("g4dn.12xlarge", "T4", 4, 16, 48, 192, 3.91),
        ("p3.2xlarge", "V100", 1, 16, 8, 61, 3.06),
        ("p3.16xlarge", "V100", 8, 16, 64, 488, 24.48),
    ],
    "gcp": [
        ("a2-ultragpu-8g", "A100-80GB", 8, 80, 96, 1360, 40.44),
        ("a2-ultragpu-1g", "A100-80GB", 1, 80, 12, 170, 5.07),
        ("a2-highgpu-8g", "A100-40GB", 8, 40, 96, 680, 29.39),
        ("a2-highgpu-1g", "A100-40GB", 1, 40, 12, 85, 3.67),
        ("a3-highgpu-8g", "H100-80GB", 8, 80, 208, 1872, 88.25),
        ("g2-standard-4", "L4", 1, 24, 4, 16, 0.71),
        ("g2-standard-48", "L4", 4, 24, 48, 192, 4.00),
        ("n1-standard-8-t4x1", "T4", 1, 16, 8, 30, 0.73),
        ("n1-standard-32-t4x4", "T4", 4, 16, 32, 120, 2.92),
        ("n1-standard-8-v100x1", "V100", 1, 16, 8, 30, 2.86),
    ],
    "azure": [
        ("Standard_ND96amsr_A100_v4", "A100-80GB", 8, 80, 96, 1900, 32.77),
        ("Standard_ND96asr_v4", "A100-40GB", 8, 40, 96, 900, 27.20),
        ("Standard_ND96isr_H100_v5", "H100-80GB", 8, 80, 96, 1900, 98.32),
        ("Standard_NC24ads_A100_v4", "A100-80GB", 1, 80, 24, 220, 3.67),
        ("Standard_NC96ads_A100_v4", "A100-80GB", 4, 80, 96, 880, 14.69),
        ("Standard_NV36ads_A10_v5", "A10", 1, 24, 36, 440, 3.20),
        ("Standard_NC4as_T4_v3", "T4", 1, 16, 4, 28, 0.53),
        ("Standard_NC64as_T4_v3", "T4", 4, 16, 64, 440, 4.35),
        ("Standard_NC6s_v3", "V100", 1, 16, 6, 112, 3.06),
        ("Standard_NC24s_v3", "V100", 4, 16, 24, 448, 12.24),
    ],
}
REGIONS = {
    "aws": [f"{geo}-{n}" for geo in ("us-east", "us-west", "eu-west", "eu-central", "ap-northeast",
                                      "ap-southeast", "ca-central", "sa-east") for n in (1, 2, 3)],
    "gcp": [f"{geo}{n}" for geo in ("us-central", "us-east", "us-west", "europe-west", "asia-east",
                                     "asia-northeast", "australia-southeast", "southamerica-east")
            for n in (1, 2, 3, 4)],
    "azure": ["eastus", "eastus2", "westus", "westus2", "westus3", "centralus", "southcentralus",
              "northeurope", "westeurope", "uksouth", "francecentral", "germanywestcentral",
              "swedencentral", "japaneast", "koreacentral", "australiaeast", "southeastasia",
              "brazilsouth", "canadacentral", "centralindia"],
}  # fmt: skip
SOURCES = {"aws": "aws-api", "gcp": "gcp-api", "azure": "azure-api"}


def build_offers(count: int, seed: int) -> list[Offer]:
    """`count` offers drawn with a seeded RNG: same seed, same offers."""
    rng = random.Random(seed)
    clouds = list(TYPES)
    offers: list[Offer] = []
    for _ in range(count):
        cloud = rng.choice(clouds)
        itype, gpu, gpus, gpu_mem, vcpus, mem, od_price = rng.choice(TYPES[cloud])
        region = rng.choice(REGIONS[cloud])
        zone = None if cloud == "azure" else f"{region}{rng.choice('abc')}"
        market = rng.choice(("spot", "on-demand"))
        price = od_price * (rng.uniform(0.25, 0.6) if market == "spot" else 1.0)
        offers.append(
            Offer(
                cloud=cloud,
                region=region,
                zone=zone,
                instance_type=itype,
                gpu=gpu,
                gpu_count=gpus,
                gpu_memory_gb=gpu_mem,
                vcpus=vcpus,
                memory_gb=float(mem),
                market=market,
                price_per_hour=round(price, 4),
                source=rng.choice((SOURCES[cloud], "snapshot", "import:skypilot")),
                observed_at=NOW - timedelta(seconds=rng.uniform(0, 3 * 86_400)),
                interruption_bucket=(
                    rng.choice(INTERRUPTION_BUCKETS)
                    if market == "spot" and cloud != "gcp"
                    else None
                ),
            )
        )
    return offers


def bench_job() -> Job:
    return Job(
        name="llm-finetune",
        resources=Resources(
            accelerators=(AcceleratorRequest(gpu="A100-80GB", count=8),),
            min_vcpus=32,
            regions=RegionFilter(deny=("sa-*",)),
        ),
        market="spot",
        duration_hours=24,
        node_count=2,
        checkpoint=Checkpoint(interval_s=1800, restore_overhead_s=600),
        data=Data(url="s3://corpus/tokens", cloud="aws", region="us-east-1", size_gb=2000),
        run=Run(command=("python", "train.py")),
    )


def bench_org() -> OrgConfig:
    return OrgConfig(
        regions=RegionRules(deny=("*southamerica*",)),
        discounts=(Discount(cloud="aws", family="p4*", percent=10),),
    )


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p95 * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    offers = build_offers(args.offers, args.seed)
    job, org = bench_job(), bench_org()
    egress, model, storage = load_egress(), load_interruption_model(), load_storage_prices()

    def run() -> object:
        return plan(
            job, offers, org=org, egress=egress, now=NOW, interruption=model, storage=storage
        )

    run()  # warm the data-file caches, as a long-lived process would be
    plan_s: list[float] = []
    cpu_s: list[float] = []
    explain_s: list[float] = []
    for _ in range(args.repeats):
        cpu = time.process_time()
        start = time.perf_counter()
        result = plan(
            job, offers, org=org, egress=egress, now=NOW, interruption=model, storage=storage
        )
        planned = time.perf_counter()
        cpu_s.append(time.process_time() - cpu)
        rejected = result.rejected  # what `route plan --explain` adds
        explain_s.append(time.perf_counter() - start)
        plan_s.append(planned - start)

    # A fixed pure-Python loop, timed the same way, says how fast this machine is right now
    # (about 10 ms on an idle modern x86 core): read the plan numbers relative to it.
    reference_s = []
    for _ in range(5):
        start = time.perf_counter()
        sum(range(1_000_000))
        reference_s.append(time.perf_counter() - start)

    median_ms, p95_ms = _ms(plan_s)
    cpu_median_ms, cpu_p95_ms = _ms(cpu_s)
    explain_median_ms, explain_p95_ms = _ms(explain_s)
    print(f"offers: {len(offers):,}  repeats: {args.repeats}  seed: {args.seed}  "
          f"reference loop: {statistics.median(reference_s) * 1e3:.1f} ms")  # fmt: skip
    print(f"placements: {len(result.placements):,}  rejected: {len(rejected):,}")
    print(f"plan:            median {median_ms:7.2f} ms  p95 {p95_ms:7.2f} ms  "
          f"{len(offers) / (median_ms / 1e3):,.0f} offers/s")  # fmt: skip
    print(f"plan (CPU time): median {cpu_median_ms:7.2f} ms  p95 {cpu_p95_ms:7.2f} ms")
    print(f"plan + rejected: median {explain_median_ms:7.2f} ms  p95 {explain_p95_ms:7.2f} ms  "
          f"{len(offers) / (explain_median_ms / 1e3):,.0f} offers/s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
