"""The pure planner: a job, offers and the org config in; ranked placements with costs out.

No I/O and no clock: `now` is a parameter, price tables are passed in. docs/planner.md has the
filter order, the cost model with a worked example, and the tie-breaks.

Every offer ends up exactly once either in `placements` or in `rejected`, with the reason of
the FIRST filter it fails, in this order:

  0. reservation   (org-config reservations only) hardware known, enough instances
  1. accelerator   GPU model is one of the job's alternatives, same count, enough GPU memory
  2. market        matches job.market; spot only for jobs that checkpoint
  3. size          vCPUs ≥ resources.min_vcpus, memory ≥ resources.min_memory_gb
  4. cloud         in the job's clouds and in spotroute.yaml clouds
  5. region        allowed and not denied by the job's and spotroute.yaml's globs (deny wins)
  6. duplicate     same cloud/region/zone/type/market seen from a fresher quote
  7. freshness     with require_fresh, quotes older than max_quote_age_s
  8. quota         node_count instances fit the account's free quota in the region (when a
                   QuotaBook is given; an unknown quota never rejects: "quota unknown")
  9. price cap     discounted $/h per instance ≤ job max_price_per_hour and budgets
 10. job budget    expected total ≤ budgets.max_job_cost

Costs per placement (USD; rounded only when rendered):
  compute      = price_per_hour × node_count × hours
  egress       = per data set, from its nearest copy (router/core/data_access.py): streamed =
                 one move per pass; copied = one move
  storage      = copied data sets kept in the placement's region (standard object storage)
  staging      = hours the GPUs wait for copies × price_per_hour × node_count
  interruption = interruptions_per_hour × hours × node_count
                 × (restore_overhead_h + checkpoint_interval_h / 2) × price_per_hour
  total        = compute + egress + storage + staging + interruption
Each data set is streamed or copied as job.yaml says, or (access: auto) copied only where that
is strictly cheaper than streaming at this placement.
Ranking: total ascending, then lower interruption rate, fresher price, and cloud, region, zone,
instance type, market lexicographically, so the order never depends on the input order.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from router.core.data_access import DataAccess, DataRoute, choose_access, route_data
from router.core.egress import EgressTable
from router.core.gpus import UnknownGpu, gpu_memory_gb
from router.core.interruption import EffectiveBucket, InterruptionModel
from router.core.job.model import Job
from router.core.offers import Offer
from router.core.org import Discount, OrgConfig, Reservation
from router.core.placement import (
    PendingRejections,
    Placement,
    PlanResult,
    Rejection,
    rejections_fixed,
    rejections_listed,
)
from router.core.quotas import SHORT, UNKNOWN, QuotaBook, QuotaVerdict
from router.core.storage_prices import StoragePrices

SPOT, ON_DEMAND, RESERVED = "spot", "on-demand", "reserved"
RESERVATION_SOURCE = "spotroute.yaml reservation"

# Finds the hardware of a reserved instance type the offers do not mention: (cloud, type) → Offer.
HardwareLookup = Callable[[str, str], Offer | None]


def _capacity(o: Offer) -> tuple[str, str, str | None, str, str]:
    """The duplicate key: one quote per cloud, region, zone, instance type and market."""
    return (o.cloud, o.region, o.zone, o.instance_type, o.market)


def plan(
    job: Job,
    offers: Sequence[Offer],
    *,
    org: OrgConfig,
    egress: EgressTable,
    now: datetime,
    require_fresh: bool = False,
    top: int | None = None,
    interruption: InterruptionModel,
    catalog: HardwareLookup | None = None,
    quotas: QuotaBook | None = None,
    storage: StoragePrices | None = None,
) -> PlanResult:
    """Rank the offers that fit the job by expected total USD; reject the rest with reasons.

    With `quotas`, offers needing more than the free quota of their region are rejected.
    """
    if now.tzinfo is None:
        raise ValueError("plan(now=...) must be timezone-aware (UTC)")
    if top is not None and top < 1:
        raise ValueError(f"plan(top=...) must be at least 1, got {top}")
    if job.data and storage is None:
        raise ValueError("plan(storage=...) is needed for a job with data (copy mode prices it)")
    ctx = _JobContext(job, org, egress, now, require_fresh, interruption, storage, quotas)

    # The deferred rejections below read the input again when --explain asks for them.
    given: tuple[Offer, ...] = offers if isinstance(offers, tuple) else tuple(offers)
    reserved, reservation_rejects = _reservation_offers(job, org, given, now, catalog, ctx)
    pending: list[PendingRejections] = []
    if reservation_rejects:
        pending.append(rejections_fixed(reservation_rejects))
    everything = given + tuple(reserved) if reserved else given

    # 1. GPU model: most offers fail here, so this pass does nothing else and their rejections
    # are only listed when someone reads them.
    wanted = ctx.gpu_req
    candidates = [o for o in everything if o.gpu in wanted]
    if len(candidates) < len(everything):
        pending.append(
            PendingRejections(
                len(everything) - len(candidates),
                lambda: [
                    Rejection(o, ctx.wrong_model_reason(o))
                    for o in everything
                    if o.gpu not in wanted
                ],
            )
        )

    # 1-5 on the offers with a wanted GPU model, then 6: keep the freshest quote per capacity.
    wrong_count: list[Offer] = []
    too_small: list[Offer] = []
    wrong_place: list[Offer] = []
    wrong_market: list[Offer] = []
    losers: list[Offer] = []
    best: dict[tuple[str, str, str | None, str, str], Offer] = {}
    held_for = best.get
    min_vcpus, min_memory_gb = ctx.min_vcpus, ctx.min_memory_gb
    place_ok, market_ok = ctx.place_ok, ctx.market_ok
    # Bound methods and dicts in locals: this loop runs once per candidate offer.
    count_out, market_out, size_out = wrong_count.append, wrong_market.append, too_small.append
    place_out, lose = wrong_place.append, losers.append
    is_placeable, market_allows = place_ok.get, market_ok.get
    for o in candidates:
        need_memory = wanted[o.gpu].get(o.gpu_count)
        if need_memory is None or o.gpu_memory_gb < need_memory:
            count_out(o)
            continue
        if not market_allows(o.market):
            market_out(o)
            continue
        if o.vcpus < min_vcpus or o.memory_gb < min_memory_gb:
            size_out(o)
            continue
        ok = is_placeable((o.cloud, o.region))
        if ok is None:
            ok = ctx.check_place(o.cloud, o.region)
        if not ok:
            place_out(o)
            continue
        key = (o.cloud, o.region, o.zone, o.instance_type, o.market)
        held = held_for(key)
        if held is None:
            best[key] = o
        elif _fresher(o, held):
            best[key] = o
            lose(held)
        else:
            lose(o)  # also the same object listed twice: placed once, rejected once
    for rejected, reason in (
        (wrong_count, ctx.accelerator_reason),
        (wrong_market, ctx.market_reason_of),
        (too_small, ctx.size_reason),
        (wrong_place, ctx.place_reason_of),
        (losers, lambda o: ctx.duplicate_reason(best[_capacity(o)])),
    ):
        if rejected:
            pending.append(rejections_listed(rejected, reason))

    # 7-9 and costs, on one offer per capacity key.
    rows, late_rejects = _cost_rows(best.values(), ctx)
    if late_rejects:
        pending.append(rejections_fixed(late_rejects))
    rows.sort(key=_rank_key)
    chosen = rows if top is None else rows[:top]
    placements = [ctx.placement(row) for row in chosen]
    return PlanResult.deferred(placements, pending)


@dataclass(slots=True)
class _Row:
    """A costed offer before it becomes a Placement (cheap to sort, built for all survivors)."""

    offer: Offer
    price_per_hour: float
    list_price_per_hour: float
    discount: Discount | None
    age_s: float
    stale: bool
    data: tuple[DataAccess, ...]
    egress_cost: float
    storage_cost: float
    staging_cost: float
    bucket: EffectiveBucket
    rate_per_hour: float
    compute_cost: float
    interruption_cost: float
    total_cost: float
    quota: QuotaVerdict | None


def _rank_key(row: _Row) -> tuple[Any, ...]:
    o = row.offer
    return (
        row.total_cost,
        row.rate_per_hour,
        row.age_s,
        o.cloud,
        o.region,
        o.zone is not None,
        o.zone or "",
        o.instance_type,
        o.market,
    )


def _fresher(a: Offer, b: Offer) -> bool:
    """True when quote a should replace b for the same capacity: newer, then cheaper, then name."""
    if a.observed_at != b.observed_at:
        return a.observed_at > b.observed_at
    if a.price_per_hour != b.price_per_hour:
        return a.price_per_hour < b.price_per_hour
    return _identity(a) < _identity(b)


def _identity(o: Offer) -> tuple[Any, ...]:
    return (
        o.source,
        o.interruption_bucket or "",
        o.gpu,
        o.gpu_count,
        o.gpu_memory_gb,
        o.vcpus,
        o.memory_gb,
        o.interconnect,
    )


def _cost_rows(
    survivors: Iterable[Offer], ctx: _JobContext
) -> tuple[list[_Row], list[tuple[Offer, str]]]:
    rows: list[_Row] = []
    rejects: list[tuple[Offer, str]] = []
    now, max_age_s, require_fresh = ctx.now, ctx.max_quote_age_s, ctx.require_fresh
    node_hours = ctx.node_count * ctx.hours
    lost_h = ctx.lost_hours_per_interruption
    for o in survivors:
        age_s = max(0.0, (now - o.observed_at).total_seconds())
        # A quote that claimed to come from the future has no trustworthy age.
        stale = age_s > max_age_s or o.clock_skewed
        if stale and require_fresh:
            rejects.append((o, ctx.stale_reason(age_s)))
            continue
        verdict = ctx.quota(o)
        if verdict is not None and verdict.status == SHORT:
            rejects.append((o, verdict.note))
            continue
        list_price = ctx.list_price(o)
        discount = ctx.discount(o)
        price = (
            o.price_per_hour
            if discount is None
            else o.price_per_hour * (1 - discount.percent / 100)
        )
        why = ctx.price_cap_reason(price, discount)
        if why:
            rejects.append((o, why))
            continue
        data = ctx.data_access(o.cloud, o.region, price) if ctx.has_data else ()
        egress_usd = storage_usd = staging_usd = 0.0
        for d in data:
            egress_usd += d.egress_usd
            storage_usd += d.storage_usd
            staging_usd += d.chosen_staging_usd
        rate, bucket = ctx.interruption(o)
        compute = price * node_hours
        interrupted = rate * node_hours * lost_h * price
        total = compute + egress_usd + storage_usd + staging_usd + interrupted
        if not math.isfinite(total):  # NaN > budget is False: never let one through
            rejects.append((o, "expected cost is not a finite number — check duration_hours"))
            continue
        if ctx.max_job_cost is not None and total > ctx.max_job_cost:
            rejects.append(
                (
                    o,
                    f"expected total ${total:,.2f} exceeds budgets.max_job_cost "
                    f"${ctx.max_job_cost:,.2f} (spotroute.yaml)",
                )
            )
            continue
        rows.append(
            _Row(
                offer=o,
                price_per_hour=price,
                list_price_per_hour=list_price,
                discount=discount,
                age_s=age_s,
                stale=stale,
                data=data,
                egress_cost=egress_usd,
                storage_cost=storage_usd,
                staging_cost=staging_usd,
                bucket=bucket,
                rate_per_hour=rate,
                compute_cost=compute,
                interruption_cost=interrupted,
                total_cost=total,
                quota=verdict,
            )
        )
    return rows, rejects


def _reservation_offers(
    job: Job,
    org: OrgConfig,
    offers: Sequence[Offer],
    now: datetime,
    catalog: HardwareLookup | None,
    ctx: _JobContext,
) -> tuple[list[Offer], list[tuple[Offer, str]]]:
    """Org-config reservations as reserved offers (price = marginal cost) for reserved|auto jobs."""
    if job.market not in (RESERVED, "auto") or not org.reservations:
        return [], []
    wanted_types = {(r.cloud, r.instance_type) for r in org.reservations}
    hardware: dict[tuple[str, str], Offer] = {}
    for o in offers:
        key = (o.cloud, o.instance_type)
        if key in wanted_types:
            # The freshest quote describes the type: the choice must not depend on list order.
            held = hardware.get(key)
            if held is None or _fresher(o, held):
                hardware[key] = o
    placed: list[Offer] = []
    rejected: list[tuple[Offer, str]] = []
    for reservation in org.reservations:
        key = (reservation.cloud, reservation.instance_type)
        known = hardware.get(key) or (catalog(*key) if catalog is not None else None)
        offer = _reserved_offer(reservation, known, now)
        ctx.reservations[id(offer)] = reservation
        if known is None:
            rejected.append(
                (
                    offer,
                    f"reservation {reservation.cloud} {reservation.instance_type}: hardware "
                    "unknown — no price quote or catalog row for this instance type; run "
                    "`route prices refresh`",
                )
            )
        elif reservation.count < job.node_count:
            rejected.append(
                (
                    offer,
                    f"reservation holds {reservation.count} instance(s), the job needs "
                    f"{job.node_count} nodes",
                )
            )
        else:
            placed.append(offer)
    return placed, rejected


def _reserved_offer(reservation: Reservation, hardware: Offer | None, now: datetime) -> Offer:
    return Offer(
        cloud=reservation.cloud,
        region=reservation.region,
        zone=reservation.zone,
        instance_type=reservation.instance_type,
        gpu=hardware.gpu if hardware else "",
        gpu_count=hardware.gpu_count if hardware else 0,
        gpu_memory_gb=hardware.gpu_memory_gb if hardware else 0,
        vcpus=hardware.vcpus if hardware else 0,
        memory_gb=hardware.memory_gb if hardware else 0.0,
        market=RESERVED,
        price_per_hour=reservation.marginal_cost_per_hour,
        source=RESERVATION_SOURCE,
        observed_at=now,
        interruption_bucket=None,
        interconnect=hardware.interconnect if hardware else "",
    )


class _Globs:
    """A list of region globs compiled once; patterns with ':' match "cloud:region"."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = tuple(patterns)
        self._compiled = [(p, re.compile(fnmatch.translate(p)), ":" in p) for p in patterns]

    def first_match(self, cloud: str, region: str) -> str | None:
        for pattern, regex, qualified in self._compiled:
            if regex.match(f"{cloud}:{region}" if qualified else region):
                return pattern
        return None


class _JobContext:
    """Everything about the job and org config the per-offer loop needs, computed once."""

    def __init__(
        self,
        job: Job,
        org: OrgConfig,
        egress: EgressTable,
        now: datetime,
        require_fresh: bool,
        interruption: InterruptionModel,
        storage: StoragePrices | None,
        quotas: QuotaBook | None = None,
    ) -> None:
        self.job, self.org, self.now = job, org, now
        self.quotas = quotas
        self._quota_cache: dict[tuple[str, str, str, str], QuotaVerdict] = {}
        self.require_fresh = require_fresh
        self.max_quote_age_s = float(org.max_quote_age_s)
        self.node_count = job.node_count
        self.hours = job.duration_hours
        resources = job.resources
        self.min_vcpus = resources.min_vcpus
        self.min_memory_gb = resources.min_memory_gb

        self.gpu_req: dict[str, dict[int, int]] = {}
        for alt in resources.accelerators:
            try:
                memory = gpu_memory_gb(alt.gpu)
            except UnknownGpu:
                memory = 0  # an unlisted GPU: its name alone decides
            counts = self.gpu_req.setdefault(alt.gpu, {})
            counts[alt.count] = max(counts.get(alt.count, 0), memory)
        self.accelerators = " or ".join(f"{a.gpu}×{a.count}" for a in resources.accelerators)
        self._wrong_model: dict[str, str] = {}

        self.job_clouds = tuple(resources.clouds)
        self.org_clouds = tuple(org.clouds)
        # Deny lists are checked before allow lists: deny wins wherever it is written.
        self._deny = (
            (_Globs(resources.regions.deny), "job.yaml resources.regions.deny"),
            (_Globs(org.regions.deny), "spotroute.yaml regions.deny"),
        )
        self._allow = (
            (_Globs(resources.regions.allow), "job.yaml resources.regions.allow"),
            (_Globs(org.regions.allow), "spotroute.yaml regions.allow"),
        )

        self.market_reason = self._market_reasons(job)
        self.market_ok = {market: not why for market, why in self.market_reason.items()}
        self.place_ok: dict[tuple[str, str], bool] = {}
        self.job_cap = job.max_price_per_hour
        self.org_cap = org.budgets.max_price_per_hour
        self.max_job_cost = org.budgets.max_job_cost

        checkpoint = job.checkpoint
        self.lost_hours_per_interruption = (
            (checkpoint.restore_overhead_s + checkpoint.interval_s / 2) / 3600.0
            if checkpoint is not None
            else 0.0
        )
        self._egress = egress
        self._storage = storage
        self.has_data = bool(job.data)
        self._route_cache: dict[tuple[str, str], tuple[DataRoute, ...]] = {}
        self._interruption = interruption
        self._interruption_cache: dict[
            tuple[str, str, str | None], tuple[float, EffectiveBucket]
        ] = {}
        self._discount_cache: dict[tuple[str, str, str], Discount | None] = {}
        self.reservations: dict[int, Reservation] = {}

    # --- filters -------------------------------------------------------------------------
    def wrong_model_reason(self, o: Offer) -> str:
        why = self._wrong_model.get(o.gpu)
        if why is None:
            why = self._wrong_model[o.gpu] = (
                f"{o.gpu or 'no GPU'} is not one of the job's accelerators ({self.accelerators})"
            )
        return why

    def accelerator_reason(self, o: Offer) -> str:
        need_memory = self.gpu_req.get(o.gpu, {}).get(o.gpu_count)
        if need_memory is None:
            return f"{o.gpu_count}× {o.gpu} per instance, the job asks for {self.accelerators}"
        return f"{o.gpu} reports {o.gpu_memory_gb} GB per GPU, the job needs {need_memory} GB"

    def size_reason(self, o: Offer) -> str:
        if o.vcpus < self.min_vcpus:
            return f"{o.vcpus} vCPUs, the job needs at least {self.min_vcpus} (resources.min_vcpus)"
        return (
            f"{o.memory_gb:g} GB memory, the job needs at least {self.min_memory_gb:g} "
            "(resources.min_memory_gb)"
        )

    def check_place(self, cloud: str, region: str) -> bool:
        """Whether (cloud, region) passes the cloud and region filters; remembers the answer."""
        ok = self.place_ok[(cloud, region)] = not self.place_reason(cloud, region)
        return ok

    def place_reason_of(self, o: Offer) -> str:
        return self.place_reason(o.cloud, o.region)

    def place_reason(self, cloud: str, region: str) -> str:
        """Why (cloud, region) is excluded, or '' when it is allowed."""
        if cloud not in self.job_clouds:
            clouds = ", ".join(self.job_clouds)
            return f"cloud {cloud} is not in the job's resources.clouds ({clouds})"
        if cloud not in self.org_clouds:
            clouds = ", ".join(self.org_clouds)
            return f"cloud {cloud} is not allowed by spotroute.yaml clouds ({clouds})"
        for globs, where in self._deny:
            pattern = globs.first_match(cloud, region)
            if pattern is not None:
                return f"region {region} is denied by {where} '{pattern}'"
        for globs, where in self._allow:
            if globs.patterns and globs.first_match(cloud, region) is None:
                return f"region {region} is not in {where} ({', '.join(globs.patterns)})"
        return ""

    @staticmethod
    def _market_reasons(job: Job) -> dict[str, str]:
        market = job.market
        out: dict[str, str] = {}
        for offered in (SPOT, ON_DEMAND, RESERVED):
            if market == RESERVED and offered != RESERVED:
                out[offered] = (
                    "job market is reserved: only reservations from spotroute.yaml are considered"
                )
            elif market in (SPOT, ON_DEMAND) and offered != market:
                out[offered] = f"job market is {market}: {offered} offers are not considered"
            elif offered == SPOT and job.checkpoint is None:
                out[offered] = (
                    f"spot capacity can be interrupted and job '{job.name}' does not checkpoint — "
                    "add `checkpoint:` (interval, restore_overhead) to job.yaml, or use "
                    "market: on-demand"
                )
            else:
                out[offered] = ""
        return out

    def market_reason_of(self, o: Offer) -> str:
        why = self.market_reason.get(o.market)
        if why is None:
            return f"market {o.market!r} is not spot, on-demand or reserved"
        return why

    def duplicate_reason(self, winner: Offer) -> str:
        age_h = max(0.0, (self.now - winner.observed_at).total_seconds()) / 3600
        return (
            f"superseded by a fresher quote for the same capacity ({winner.source}, "
            f"{age_h:.1f} h old)"
        )

    def stale_reason(self, age_s: float) -> str:
        return (
            f"price is {age_s / 3600:.1f} h old (max {self.max_quote_age_s / 3600:g} h) — "
            "run `route prices refresh`"
        )

    def price_cap_reason(self, price: float, discount: Discount | None) -> str:
        after = " after discount" if discount is not None else ""
        if self.job_cap is not None and price > self.job_cap:
            return (
                f"${price:,.2f}/h{after} exceeds max_price_per_hour "
                f"${self.job_cap:,.2f}/h (job.yaml)"
            )
        if self.org_cap is not None and price > self.org_cap:
            return (
                f"${price:,.2f}/h{after} exceeds budgets.max_price_per_hour "
                f"${self.org_cap:,.2f}/h (spotroute.yaml)"
            )
        return ""

    def quota(self, o: Offer) -> QuotaVerdict | None:
        """The quota verdict for the job's node_count instances of the offer; None: unchecked."""
        if self.quotas is None:
            return None
        if o.source == RESERVATION_SOURCE and id(o) in self.reservations:
            return QuotaVerdict("not needed")  # owned capacity: already launched or reserved
        key = (o.cloud, o.region, o.instance_type, o.market)
        found = self._quota_cache.get(key)
        if found is None:
            found = self._quota_cache[key] = self.quotas.check(*key, self.node_count)
        return found

    # --- cost terms ----------------------------------------------------------------------
    def list_price(self, o: Offer) -> float:
        reservation = self.reservations.get(id(o)) if self.reservations else None
        return reservation.price_per_hour if reservation is not None else o.price_per_hour

    def discount(self, o: Offer) -> Discount | None:
        if o.source == RESERVATION_SOURCE and id(o) in self.reservations:
            return None  # the marginal price of owned capacity is already what it costs
        key = (o.cloud, o.instance_type, o.market)
        if key not in self._discount_cache:
            self._discount_cache[key] = self.org.discount_for(*key)
        return self._discount_cache[key]

    def data_access(self, cloud: str, region: str, price: float) -> tuple[DataAccess, ...]:
        """Each data set's cheapest source and access mode at (cloud, region) and $/h `price`."""
        key = (cloud, region)
        routes = self._route_cache.get(key)
        if routes is None:
            assert self._storage is not None  # set whenever the job has data
            routes = self._route_cache[key] = tuple(
                route_data(
                    d, cloud, region, hours=self.hours, egress=self._egress, storage=self._storage
                )
                for d in self.job.data
            )
        wait_usd_per_hour = price * self.node_count
        return tuple(choose_access(r, wait_usd_per_hour) for r in routes)

    def interruption(self, o: Offer) -> tuple[float, EffectiveBucket]:
        key = (o.cloud, o.market, o.interruption_bucket)
        found = self._interruption_cache.get(key)
        if found is None:
            model = self._interruption
            found = (
                model.rate_per_hour(*key),
                model.bucket_for(*key),
            )
            self._interruption_cache[key] = found
        return found

    # --- output --------------------------------------------------------------------------
    def placement(self, row: _Row) -> Placement:
        o = row.offer
        return Placement(
            cloud=o.cloud,
            region=o.region,
            zone=o.zone,
            instance_type=o.instance_type,
            market=o.market,
            gpu=o.gpu,
            gpu_count=o.gpu_count,
            price_per_hour=row.price_per_hour,
            list_price_per_hour=row.list_price_per_hour,
            node_count=self.node_count,
            hours=self.hours,
            compute_cost=row.compute_cost,
            egress_cost=row.egress_cost,
            interruption_cost=row.interruption_cost,
            total_cost=row.total_cost,
            price_source=o.source,
            price_age_s=row.age_s,
            stale=row.stale,
            interruption_bucket=row.bucket.bucket,
            interruptions_per_hour=row.rate_per_hour,
            reasons=self.reasons(row),
            offer=o,
            quota_status=row.quota.status if row.quota is not None else "unchecked",
            quota_note=row.quota.note if row.quota is not None else "",
            storage_cost=row.storage_cost,
            staging_cost=row.staging_cost,
            data=row.data,
        )

    def reasons(self, row: _Row) -> tuple[str, ...]:
        o = row.offer
        out: list[str] = []
        reservation = self.reservations.get(id(o)) if self.reservations else None
        if reservation is not None:
            out.append(
                f"reserved capacity from spotroute.yaml ({reservation.count} instance(s), "
                f"${reservation.price_per_hour:,.2f}/h already paid; marginal "
                f"${row.price_per_hour:,.2f}/h)"
            )
        elif row.discount is not None:
            out.append(
                f"{row.discount.label}: ${row.list_price_per_hour:,.2f} → "
                f"${row.price_per_hour:,.2f}/h"
            )
        for d in row.data:
            if d.route.once.rule:
                out.append(f"egress: {d.route.once.rule}")
            out.append(d.summary())
        if o.market == SPOT:
            assumed = f" ({row.bucket.note})" if row.bucket.assumed else ""
            out.append(
                f"interruptions: {row.bucket.bucket} per month{assumed} → "
                f"{row.rate_per_hour * self.hours * self.node_count:.3f} expected over "
                f"{self.hours:g} h × {self.node_count} node(s), "
                f"{self.lost_hours_per_interruption:.2f} h lost each"
            )
        if row.quota is not None and row.quota.status == UNKNOWN:
            out.append(row.quota.note)
        if o.clock_skewed:
            out.append(
                "price was dated in the future (clock skew): clamped to now, treated as stale"
            )
        elif row.stale:
            out.append(
                f"price is {row.age_s / 3600:.1f} h old (max {self.max_quote_age_s / 3600:g} h): "
                "stale — run `route prices refresh`"
            )
        return tuple(out)
