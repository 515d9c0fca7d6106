"""Quotes (a price seen somewhere) and Offers (a quote joined with its instance's hardware)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

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

    def age_s(self, now: datetime) -> float:
        """Seconds since the price was observed, at `now`."""
        return max(0.0, (now - self.observed_at).total_seconds())
