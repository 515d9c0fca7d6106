"""What planning returns: placements (ranked, with their costs) and rejected offers with reasons."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from router.core.data_access import DataAccess
from router.core.offers import Offer


@dataclass(frozen=True)
class Placement:
    """One ranked way to run the job: where, on what, and what it is expected to cost (USD)."""

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    market: str
    gpu: str
    gpu_count: int
    price_per_hour: float  # per instance, after discounts (marginal price for reservations)
    list_price_per_hour: float  # per instance, as quoted (effective price for reservations)
    node_count: int
    hours: float
    compute_cost: float
    egress_cost: float
    interruption_cost: float
    total_cost: float
    price_source: str
    price_age_s: float
    stale: bool
    interruption_bucket: str | None
    interruptions_per_hour: float  # per instance
    reasons: tuple[str, ...]
    offer: Offer  # the offer this was planned from (hardware details for stack config)
    quota_status: str = "unchecked"  # ok | unknown | not needed | unchecked (no QuotaBook given)
    quota_note: str = ""  # why the quota is unknown
    storage_cost: float = 0.0  # copied data sets kept next to the GPUs
    staging_cost: float = 0.0  # GPUs waiting for copies
    data: tuple[DataAccess, ...] = ()  # per job.data entry: source, access mode, both costs


# Where a placement is and what it runs on: the leading fields of every record of one.
SITE_FIELDS: tuple[str, ...] = (
    *("cloud", "region", "zone", "instance_type", "market", "gpu", "gpu_count"),
)


def placement_site(p: Placement) -> dict[str, Any]:
    """The placement's SITE_FIELDS by name (cloud, region, zone, type, market, GPUs)."""
    return {name: getattr(p, name) for name in SITE_FIELDS}


# The planner's filters in the order an offer meets them (router/core/planner.py): the name of
# the first one it fails is `Rejection.filter`, shown by `route plan --explain` and `--json`.
FILTERS: tuple[str, ...] = (
    "reservation", "accelerator", "image", "market", "size", "cloud", "region", "duplicate",
    "freshness", "quota", "capacity", "price cap", "job budget",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Rejection:
    """An offer the job cannot use, with the first filter it failed (`filter`, one of FILTERS)
    and why in words."""

    offer: Offer
    reason: str
    filter: str = ""


class PlanResult:
    """Placements best first, and every offer that was not placed with its reason.

    Rejections are decided during `plan`; their objects and messages are built on first access
    of `rejected` (only `route plan --explain` reads them), which keeps planning fast.
    """

    __slots__ = ("_pending", "_rejected", "placements")

    def __init__(self, placements: Sequence[Placement], rejected: Sequence[Rejection] = ()) -> None:
        self.placements: tuple[Placement, ...] = tuple(placements)
        self._rejected: tuple[Rejection, ...] | None = tuple(rejected)
        self._pending: tuple[PendingRejections, ...] = ()

    @classmethod
    def deferred(
        cls, placements: Sequence[Placement], pending: Sequence[PendingRejections]
    ) -> PlanResult:
        result = cls(placements)
        result._rejected = None
        result._pending = tuple(pending)
        return result

    @property
    def rejected(self) -> tuple[Rejection, ...]:
        """Offers not placed, grouped by the filter that rejected them (filter order)."""
        if self._rejected is None:
            self._rejected = tuple(r for group in self._pending for r in group.materialize())
            self._pending = ()
        return self._rejected

    @property
    def rejected_count(self) -> int:
        """How many offers were rejected, without building their messages."""
        if self._rejected is not None:
            return len(self._rejected)
        return sum(group.count for group in self._pending)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlanResult):
            return NotImplemented
        return self.placements == other.placements and self.rejected == other.rejected

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PlanResult({len(self.placements)} placements, {self.rejected_count} rejected)"


class PendingRejections:
    """Rejections decided while planning; `build` words them when `rejected` is first read."""

    __slots__ = ("build", "count")

    def __init__(self, count: int, build: Callable[[], list[Rejection]]) -> None:
        self.count = count
        self.build = build

    def materialize(self) -> list[Rejection]:
        return self.build()


def rejections_listed(
    offers: list[Offer], reason: Callable[[Offer], str], filter_name: str
) -> PendingRejections:
    return PendingRejections(
        len(offers), lambda: [Rejection(o, reason(o), filter_name) for o in offers]
    )


def rejections_fixed(triples: list[tuple[Offer, str, str]]) -> PendingRejections:
    """Rejections already worded while planning: (offer, reason, filter) — few: reservations,
    image refusals and the late filters."""
    return PendingRejections(len(triples), lambda: [Rejection(*t) for t in triples])
