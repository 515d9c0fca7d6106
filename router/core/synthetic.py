"""Seeded synthetic price/availability traces and workloads: pure given their seed.

Calibration (docs/backtest.md has the sources and what each number stands for):
- spot price of a shape = on-demand list price × the cloud's spot fraction × a provider factor
  (max/min across providers drawn in provider_spread, 20-40 %) × a region factor (max/min
  across one provider's regions drawn in region_spread, 15-25 %) × a zone factor (± 3 %)
  × a diurnal swing (± diurnal_amplitude, peaking 15:00 local time) × a mean-reverting
  random walk (σ = noise per step in log space);
- spot availability per zone alternates up and down periods, exponentially distributed: mean up
  time from the pool's interruption bucket (mean_up_h), mean down time mean_down_h; a region
  also has rarer correlated shortages that take every zone down at once;
- on-demand capacity is always available at its list price (no diurnal swing).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from router.core.backtest_model import Pool, Trace, Workload, WorkloadJob
from router.core.job.migration import SPOT_WAIT_DEFAULT_S

# Mean hours a spot zone stays up, by interruption bucket (share of instances interrupted per
# month is a lower bound on capacity churn; see docs/backtest.md).
MEAN_UP_H: dict[str, float] = {
    "<5%": 240.0,
    "5-10%": 120.0,
    "10-15%": 72.0,
    "15-20%": 48.0,
    ">20%": 24.0,
}

# Hours from UTC, roughly, by region name prefix: the diurnal peak follows local business hours.
_UTC_OFFSET: tuple[tuple[str, int], ...] = (
    ("us-west", -8),
    ("westus", -8),
    ("us-central", -6),
    ("centralus", -6),
    ("southcentralus", -6),
    ("us-east", -5),
    ("eastus", -5),
    ("northamerica", -5),
    ("ca-", -5),
    ("canada", -5),
    ("sa-", -3),
    ("southamerica", -3),
    ("brazil", -3),
    ("eu-", 1),
    ("europe", 1),
    ("westeurope", 1),
    ("northeurope", 0),
    ("uk", 0),
    ("me-", 3),
    ("asia-south", 5),
    ("ap-south", 5),
    ("centralindia", 5),
    ("asia", 8),
    ("ap-", 8),
    ("japan", 9),
    ("korea", 9),
    ("australia", 10),
)


def utc_offset_h(region: str) -> int:
    """Rough local-time offset of a region from its name (0 when unknown)."""
    for prefix, offset in _UTC_OFFSET:
        if region.startswith(prefix):
            return offset
    return 0


@dataclass(frozen=True, slots=True)
class CloudOffer:
    """One cloud's instance type for a shape: list price, spot fraction, where it is sold."""

    cloud: str
    instance_type: str
    on_demand_per_hour: float  # USD list price per instance-hour
    spot_fraction: float  # typical spot price / on-demand price
    regions: tuple[str, ...]
    zones_per_region: int = 3
    buckets: tuple[str, ...] = (">20%",)  # interruption buckets, drawn per zone
    vcpus: int = 96
    memory_gb: float = 1152.0


@dataclass(frozen=True, slots=True)
class Shape:
    gpu: str
    gpu_count: int
    gpu_memory_gb: int
    offers: tuple[CloudOffer, ...]


@dataclass(frozen=True)
class MarketModel:
    """Every knob of the synthetic market; see the module docstring."""

    shapes: tuple[Shape, ...]
    provider_spread: tuple[float, float] = (0.20, 0.40)
    region_spread: tuple[float, float] = (0.15, 0.25)
    zone_spread: float = 0.03
    diurnal_amplitude: float = 0.08
    noise: float = 0.02
    reversion: float = 0.05  # per step, towards the pool's mean
    mean_up_h: dict[str, float] = field(default_factory=lambda: dict(MEAN_UP_H))
    mean_down_h: float = 3.0
    region_outage_every_h: float = 240.0
    region_outage_h: float = 4.0


def _spread_factors(rng: random.Random, n: int, spread: tuple[float, float]) -> list[float]:
    """n factors whose max/min − 1 is a draw from spread (one draw at each end)."""
    if n == 1:
        return [1.0]
    s = rng.uniform(*spread)
    inner = [rng.random() for _ in range(n - 2)]
    factors = [1.0, 1.0 + s, *(1.0 + s * u for u in inner)]
    rng.shuffle(factors)
    return factors


def synthetic_trace(
    model: MarketModel, *, start: datetime, days: float, step_s: float, seed: int
) -> Trace:
    """Prices and availability for every pool of the model over `days` (pure given seed)."""
    rng = random.Random(seed)
    steps = math.ceil(days * 86400 / step_s)
    step_h = step_s / 3600.0
    pools: list[Pool] = []
    prices: list[tuple[float, ...]] = []
    available: list[tuple[bool, ...]] = []
    for shape in model.shapes:
        providers = _spread_factors(rng, len(shape.offers), model.provider_spread)
        for offer, provider in zip(shape.offers, providers, strict=True):
            regions = _spread_factors(rng, len(offer.regions), model.region_spread)
            for region, region_factor in zip(offer.regions, regions, strict=True):
                outages = _region_outages(rng, model, steps, step_h)
                on_demand = Pool(
                    offer.cloud,
                    region,
                    None,
                    offer.instance_type,
                    "on-demand",
                    shape.gpu,
                    shape.gpu_count,
                    shape.gpu_memory_gb,
                    offer.vcpus,
                    offer.memory_gb,
                    None,
                )
                pools.append(on_demand)
                prices.append((offer.on_demand_per_hour,) * steps)
                available.append((True,) * steps)
                offset = utc_offset_h(region)
                for z in range(offer.zones_per_region):
                    bucket = rng.choice(offer.buckets)
                    zone = f"{region}-{'abcdef'[z]}"
                    mean = (
                        offer.on_demand_per_hour
                        * offer.spot_fraction
                        * provider
                        * region_factor
                        * (1 + rng.uniform(-model.zone_spread, model.zone_spread))
                    )
                    pools.append(
                        Pool(
                            offer.cloud,
                            region,
                            zone,
                            offer.instance_type,
                            "spot",
                            shape.gpu,
                            shape.gpu_count,
                            shape.gpu_memory_gb,
                            offer.vcpus,
                            offer.memory_gb,
                            bucket,
                        )
                    )
                    prices.append(
                        _spot_series(rng, model, mean, offset, start, steps, step_s, offer)
                    )
                    up = model.mean_up_h.get(bucket, 24.0)
                    own = _alternating(rng, steps, step_h, up, model.mean_down_h)
                    available.append(tuple(a and b for a, b in zip(own, outages, strict=True)))
    return Trace(start, step_s, tuple(pools), tuple(prices), tuple(available))


def _spot_series(
    rng: random.Random,
    model: MarketModel,
    mean: float,
    offset_h: int,
    start: datetime,
    steps: int,
    step_s: float,
    offer: CloudOffer,
) -> tuple[float, ...]:
    out = []
    walk = 0.0
    cap = offer.on_demand_per_hour
    for s in range(steps):
        at = start + timedelta(seconds=s * step_s)
        local_h = (at.hour + at.minute / 60 + offset_h) % 24
        diurnal = 1 + model.diurnal_amplitude * math.cos(2 * math.pi * (local_h - 15) / 24)
        walk = (1 - model.reversion) * walk + rng.gauss(0, model.noise)
        out.append(round(min(cap, mean * diurnal * math.exp(walk)), 4))
    return tuple(out)


def _alternating(
    rng: random.Random, steps: int, step_h: float, mean_up_h: float, mean_down_h: float
) -> tuple[bool, ...]:
    out: list[bool] = []
    up = rng.random() < mean_up_h / (mean_up_h + mean_down_h)
    while len(out) < steps:
        hours = rng.expovariate(1 / (mean_up_h if up else mean_down_h))
        out.extend([up] * max(1, round(hours / step_h)))
        up = not up
    return tuple(out[:steps])


def _region_outages(
    rng: random.Random, model: MarketModel, steps: int, step_h: float
) -> tuple[bool, ...]:
    return _alternating(rng, steps, step_h, model.region_outage_every_h, model.region_outage_h)


@dataclass(frozen=True, slots=True)
class JobMix:
    """One kind of job in a synthetic workload: its share of jobs and its sizes."""

    gpu: str
    gpu_count: int
    weight: float = 1.0
    node_counts: tuple[int, ...] = (1,)
    median_hours: float = 6.0
    max_hours: float = 36.0
    checkpoint_gb: float = 100.0
    data_gb: tuple[float, float] = (100.0, 1000.0)


def synthetic_workload(
    *,
    name: str,
    start: datetime,
    days: float,
    gpu_hours_per_day: float,
    mix: tuple[JobMix, ...],
    seed: int,
    home_cloud: str = "aws",
    data_region: str = "us-east-1",
    deadline_share: float = 0.3,
    deadline_slack: tuple[float, float] = (1.3, 2.5),
    checkpoint_interval_s: float = 1800.0,
    restore_overhead_s: float = 600.0,
    min_savings_pct: float = 20.0,
    cooldown_s: float = 3600.0,
    arrivals_until_day: float | None = None,
    spot_wait_s: float = SPOT_WAIT_DEFAULT_S,
) -> Workload:
    """Jobs arriving uniformly over the days until the GPU-hours reach the daily target."""
    rng = random.Random(seed)
    target = gpu_hours_per_day * days
    last_day = arrivals_until_day if arrivals_until_day is not None else days * 0.9
    weights = [m.weight for m in mix]
    jobs: list[WorkloadJob] = []
    used = 0.0
    while used < target:
        kind = rng.choices(mix, weights)[0]
        hours = min(kind.max_hours, max(1.0, rng.lognormvariate(math.log(kind.median_hours), 0.7)))
        hours = round(hours * 4) / 4
        nodes = rng.choice(kind.node_counts)
        arrival = start + timedelta(hours=round(rng.uniform(0, last_day * 24), 2))
        deadline = None
        if rng.random() < deadline_share:
            deadline = arrival + timedelta(hours=hours * rng.uniform(*deadline_slack))
        jobs.append(
            WorkloadJob(
                name=f"job-{len(jobs) + 1:03d}",
                arrival=arrival,
                duration_h=hours,
                gpu=kind.gpu,
                gpu_count=kind.gpu_count,
                node_count=nodes,
                checkpoint_interval_s=checkpoint_interval_s,
                restore_overhead_s=restore_overhead_s,
                checkpoint_gb=kind.checkpoint_gb,
                data_cloud=home_cloud,
                data_region=data_region,
                data_gb=round(rng.uniform(*kind.data_gb)),
                deadline=deadline,
                min_savings_pct=min_savings_pct,
                cooldown_s=cooldown_s,
                spot_wait_s=spot_wait_s,
            )
        )
        used += hours * kind.gpu_count * nodes
    jobs.sort(key=lambda j: (j.arrival, j.name))
    return Workload(name=name, jobs=tuple(jobs), home_cloud=home_cloud)
