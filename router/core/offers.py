"""Quotes (a price seen somewhere) and Offers (a quote joined with its instance's hardware)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

MARKETS: tuple[str, ...] = ("spot", "on-demand")

# AWS Spot Instance Advisor's "frequency of interruption" buckets (share of instances
# interrupted over the trailing month). Azure eviction rates are mapped onto the same buckets.
INTERRUPTION_BUCKETS: tuple[str, ...] = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")


@dataclass(frozen=True, slots=True)
class Quote:
    """One price for one instance type in one place and market, as a source reported it.

    `zone` is None when the source prices a whole region (Azure retail prices, GCP SKUs).
    `price_per_hour` is USD per instance-hour. `source` names where it came from:
    "aws-api", "gcp-api", "azure-api", "snapshot", "import:skypilot".
    """

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    market: str
    price_per_hour: float
    source: str
    observed_at: datetime
    interruption_bucket: str | None = None
    # observed_at was in the future (a clock-skewed source): clamped, and never counted fresh
    clock_skewed: bool = False

    def age_s(self, now: datetime) -> float:
        """Seconds since the price was observed, at `now`."""
        return max(0.0, (now - self.observed_at).total_seconds())


@dataclass(frozen=True, slots=True)
class Offer:
    """A quote together with the hardware of its instance type: what the planner ranks."""

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    gpu: str
    gpu_count: int
    gpu_memory_gb: int
    vcpus: int
    memory_gb: float
    market: str
    price_per_hour: float
    source: str
    observed_at: datetime
    interruption_bucket: str | None = None
    interconnect: str = ""
    clock_skewed: bool = False  # see Quote.clock_skewed
    # Instances the place can run at once where that is known (a local market region); None on
    # the clouds, which say so only by refusing a launch.
    capacity: int | None = None

    def age_s(self, now: datetime) -> float:
        """Seconds since the price was observed, at `now`."""
        return max(0.0, (now - self.observed_at).total_seconds())


# How each cloud names its regions and zones. Anything else (an imported bogus region, text with
# terminal escapes) is refused before it can match a region glob or reach a terminal.
REGION_NAMES: dict[str, re.Pattern[str]] = {
    "aws": re.compile(r"[a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}"),
    "gcp": re.compile(r"[a-z]+-[a-z]+\d{1,2}"),
    "azure": re.compile(r"[a-z][a-z0-9]{1,39}"),
    "local": re.compile(r"[a-z][a-z0-9-]{0,39}"),
}
_ZONE_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,49}")
_INSTANCE_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+:-]{0,79}")
MAX_PRICE_PER_HOUR = 10_000.0  # USD per instance-hour; no GPU instance costs more
CLOCK_SKEW_TOLERANCE = timedelta(minutes=5)


def region_problem(cloud: str, region: str) -> str | None:
    """Why `region` is not a region name of `cloud` (None when it is one)."""
    pattern = REGION_NAMES.get(cloud)
    if pattern is None:
        return f"unknown cloud {cloud!r}"
    if not pattern.fullmatch(region):
        return f"{cloud} has no region named {region[:40]!r}"
    return None


def quote_problem(quote: Quote) -> str | None:
    """Why a quote must not be trusted (None when it can be): names, price, timestamp."""
    why = region_problem(quote.cloud, quote.region)
    if why:
        return why
    if quote.zone is not None and not _ZONE_NAME.fullmatch(quote.zone):
        return f"zone {quote.zone[:40]!r} is not a zone name"
    if not _INSTANCE_TYPE.fullmatch(quote.instance_type):
        return f"instance type {quote.instance_type[:40]!r} is not an instance type name"
    if quote.market not in MARKETS:
        return f"market {quote.market[:20]!r} is not spot or on-demand"
    price = quote.price_per_hour
    if isinstance(price, bool) or not isinstance(price, int | float) or not math.isfinite(price):
        return f"price {price!r} is not a finite number"
    if not 0 < price <= MAX_PRICE_PER_HOUR:
        return f"price {price!r} is not between 0 and {MAX_PRICE_PER_HOUR:g} USD per hour"
    if quote.observed_at.tzinfo is None or quote.observed_at.utcoffset() is None:
        return "observed_at has no timezone"
    return None


def clamp_future(quote: Quote, now: datetime) -> Quote:
    """A quote dated after `now` (beyond clock-skew tolerance) as observed now, flagged skewed."""
    if quote.observed_at <= now + CLOCK_SKEW_TOLERANCE:
        return quote
    return replace(quote, observed_at=now, clock_skewed=True)
