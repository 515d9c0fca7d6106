"""Spot interruption buckets → expected interruptions per instance-hour (data/interruption.csv).

A bucket such as "5-10%" is the share p of spot instances of a type that were interrupted over
a month (AWS Spot Instance Advisor; Azure eviction rates are mapped onto the same buckets).
Treat interruptions as a Poisson process with a constant rate λ per instance-hour: the chance an
instance survives a 30-day month (720 h) is exp(-720 λ), so p = 1 - exp(-720 λ) and

    λ = -ln(1 - p) / 720        (interruptions per instance-hour)

p is the bucket midpoint; the open-ended ">20%" bucket uses a documented representative share
(see the CSV). Quotes without a bucket take the per-cloud default from the CSV (GCP publishes no
rate at all), which is the worst bucket so unmeasured capacity never looks safer than measured
capacity. On-demand and reserved capacity is not interrupted: λ = 0.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from typing import Protocol

from router.core.errors import BadInput
from router.core.offers import INTERRUPTION_BUCKETS

HOURS_PER_MONTH = 720.0  # a 30-day month, the window the buckets describe
SPOT = "spot"

_COLUMNS = ("kind", "bucket", "cloud", "market", "share_per_month", "source", "date", "note")


class PricedCapacity(Protocol):
    """What the model needs from a Quote or an Offer."""

    @property
    def cloud(self) -> str: ...
    @property
    def market(self) -> str: ...
    @property
    def interruption_bucket(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class EffectiveBucket:
    """The bucket a rate was computed from, and why when it is not the quote's own."""

    bucket: str | None  # None: not interruptible (on-demand, reserved)
    assumed: bool  # True when the quote had no bucket and a default was used
    note: str


def rate_from_share(share_per_month: float) -> float:
    """Interruptions per instance-hour for a monthly interrupted share p: -ln(1-p)/720."""
    if not 0 <= share_per_month < 1:
        raise ValueError(f"share_per_month must be in [0, 1), got {share_per_month}")
    return -math.log1p(-share_per_month) / HOURS_PER_MONTH


class InterruptionModel:
    """Bucket shares and per-cloud defaults; answers interruptions per hour for a quote."""

    def __init__(
        self,
        share_per_month: dict[str, float],
        defaults: dict[tuple[str, str], tuple[str, str]],
    ) -> None:
        self.share_per_month = dict(share_per_month)
        self.defaults = dict(defaults)  # (cloud, market) → (bucket, note)
        self._rate = {bucket: rate_from_share(p) for bucket, p in share_per_month.items()}
        self._worst = max(share_per_month, key=share_per_month.__getitem__)

    def bucket_for(self, cloud: str, market: str, bucket: str | None) -> EffectiveBucket:
        """The bucket to price with: the quote's own, else the cloud's documented default."""
        if market != SPOT:
            return EffectiveBucket(None, False, f"{market} capacity is not interrupted")
        if bucket in self._rate:
            return EffectiveBucket(bucket, False, "")
        default = self.defaults.get((cloud, market))
        if default is not None:
            return EffectiveBucket(default[0], True, default[1])
        return EffectiveBucket(
            self._worst, True, f"no interruption data for {cloud} {market}: worst bucket assumed"
        )

    def rate_per_hour(self, cloud: str, market: str, bucket: str | None) -> float:
        """Expected interruptions per instance-hour (0 for on-demand and reserved)."""
        if market != SPOT:
            return 0.0
        rate = self._rate.get(bucket) if bucket is not None else None
        if rate is not None:
            return rate
        effective = self.bucket_for(cloud, market, bucket)
        return self._rate[effective.bucket] if effective.bucket is not None else 0.0


def parse_interruption_csv(text: str, *, name: str = "interruption.csv") -> InterruptionModel:
    """Build the model from CSV text; every bucket in INTERRUPTION_BUCKETS must have a share."""
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != _COLUMNS:
        raise BadInput(f"{name}: header must be {','.join(_COLUMNS)}")
    shares: dict[str, float] = {}
    defaults: dict[tuple[str, str], tuple[str, str]] = {}
    for row in reader:
        where = f"{name} line {reader.line_num}"
        bucket = row["bucket"]
        if bucket not in INTERRUPTION_BUCKETS:
            raise BadInput(f"{where}: bucket {bucket!r} is not one of {INTERRUPTION_BUCKETS}")
        if row["kind"] == "bucket":
            try:
                share = float(row["share_per_month"])
            except ValueError:
                raise BadInput(f"{where}: share_per_month is not a number") from None
            if not 0 <= share < 1:
                raise BadInput(f"{where}: share_per_month must be in [0, 1)")
            shares[bucket] = share
        elif row["kind"] == "default":
            defaults[(row["cloud"], row["market"])] = (bucket, row["note"])
        else:
            raise BadInput(f"{where}: kind must be bucket or default")
    missing = [b for b in INTERRUPTION_BUCKETS if b not in shares]
    if missing:
        raise BadInput(f"{name}: no share_per_month for bucket(s) {', '.join(missing)}")
    return InterruptionModel(shares, defaults)


def interruptions_per_hour(offer: PricedCapacity, model: InterruptionModel) -> float:
    """Expected interruptions per instance-hour of a quote or offer (0 unless spot)."""
    return model.rate_per_hour(offer.cloud, offer.market, offer.interruption_bucket)


def effective_bucket(offer: PricedCapacity, model: InterruptionModel) -> EffectiveBucket:
    """The bucket interruptions_per_hour used for this offer, with the reason for defaults."""
    return model.bucket_for(offer.cloud, offer.market, offer.interruption_bucket)
