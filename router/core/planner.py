"""The pure planner: a job, offers and the org config in; ranked placements with costs out.

No I/O and no clock: `now` is a parameter, price tables are passed in. docs/planner.md has the
filter order, the cost model with a worked example, and the tie-breaks. The job's filters and
cost terms live in router/core/plan_context.py (`JobContext`), the costed rows, ranking and
Placements in router/core/plan_costs.py; this module runs them in the order below.

Every offer ends up exactly once either in `placements` or in `rejected`, with the reason of
the FIRST filter it fails, in this order:

  0. reservation   (org-config reservations only) hardware known, enough instances
  1. accelerator   GPU model is one of the job's alternatives, same count, enough GPU memory
  1b. image        the cloud's machine image can drive the GPU (router/data/images.csv: the
                   catalog marks such types refused; their offers come in as `refused`)
  2. market        matches job.market; spot only for jobs that checkpoint
  3. size          vCPUs ≥ resources.min_vcpus, memory ≥ resources.min_memory_gb
  4. cloud         in the job's clouds and in spotroute.yaml clouds
  5. region        allowed and not denied by the job's and spotroute.yaml's globs (deny wins)
  6. duplicate     same cloud/region/zone/type/market seen from a fresher quote
  7. freshness     with require_fresh, quotes older than max_quote_age_s
  8. quota         node_count instances fit the account's free quota in the region (when a
                   QuotaBook is given; an unknown quota never rejects: "quota unknown")
  8b. capacity     a place whose capacity is known (a local market region) runs node_count
                   instances at once; capacity 0 is tried and refused at launch, as on a cloud
  9. price cap     discounted $/h per instance ≤ job max_price_per_hour and budgets
 10. job budget    expected total ≤ budgets.max_job_cost

Costs per placement (USD; rounded only when rendered):
  compute      = price_per_hour × node_count × hours
  egress       = per data set, from its nearest copy (router/core/data_access.py): streamed =
                 one move per pass; copied = one move
  storage      = copied data sets kept in the placement's region (standard object storage)
  staging      = hours the GPUs wait for copies × price_per_hour × node_count
  interruption = price_per_hour × node_count × hours × (m − 1), router/core/interruption.py:
                 m = e^(Λ restore_h)(e^(Λ interval_h) − 1)/(Λ interval_h) paid hours per hour of
                 work, Λ = node_count × interruptions_per_hour (bucket prior + evidence)
  total        = compute + egress + storage + staging + interruption
Each data set is streamed or copied as job.yaml says, or (access: auto) copied only where that
is strictly cheaper than streaming at this placement.
Ranking: total ascending, then lower interruption rate, fresher price, and cloud, region, zone,
instance type, market lexicographically, so the order never depends on the input order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from router.core.egress import EgressTable
from router.core.interruption import InterruptionModel
from router.core.job.model import Job
from router.core.offers import Offer
from router.core.org import OrgConfig, Reservation
from router.core.placement import (
    PendingRejections,
    PlanResult,
    Rejection,
    rejections_fixed,
    rejections_listed,
)
from router.core.plan_context import RESERVATION_SOURCE, RESERVED, JobContext
from router.core.plan_costs import CostRow, cost_rows, placement_of, rank_key
from router.core.quotas import QuotaBook
from router.core.storage_prices import StoragePrices

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
    refused: Sequence[tuple[Offer, str]] = (),
) -> PlanResult:
    """Rank the offers that fit the job by expected total USD; reject the rest with reasons.

    With `quotas`, offers needing more than the free quota of their region are rejected.
    `refused` are (offer, why) of types the cloud's machine image cannot drive
    (router.core.catalog.OffersResult.refused_offers): each is rejected, with the image reason
    when it is hardware the job asked for.
    """
    if top is not None and top < 1:
        raise ValueError(f"plan(top=...) must be at least 1, got {top}")
    ctx, rows, pending = _costed(
        job, offers, org=org, egress=egress, now=now, require_fresh=require_fresh,
        interruption=interruption, catalog=catalog, quotas=quotas, storage=storage,
        refused=refused,
    )  # fmt: skip
    rows.sort(key=rank_key)
    chosen = rows if top is None else rows[:top]
    placements = [placement_of(row, ctx) for row in chosen]
    return PlanResult.deferred(placements, pending)


def feasible_offers(
    job: Job,
    offers: Sequence[Offer],
    *,
    org: OrgConfig,
    egress: EgressTable,
    now: datetime,
    interruption: InterruptionModel,
    storage: StoragePrices | None = None,
) -> list[tuple[Offer, float]]:
    """The offers plan() places the job on, each with its interruptions per instance-hour —
    unranked, without the Placements' reasons (what the backtest asks for every job)."""
    _, rows, _ = _costed(
        job, offers, org=org, egress=egress, now=now, require_fresh=False,
        interruption=interruption, catalog=None, quotas=None, storage=storage, refused=(),
    )  # fmt: skip
    return [(row.offer, row.rate_per_hour) for row in rows]


def _costed(
    job: Job,
    offers: Sequence[Offer],
    *,
    org: OrgConfig,
    egress: EgressTable,
    now: datetime,
    require_fresh: bool,
    interruption: InterruptionModel,
    catalog: HardwareLookup | None,
    quotas: QuotaBook | None,
    storage: StoragePrices | None,
    refused: Sequence[tuple[Offer, str]],
) -> tuple[JobContext, list[CostRow], list[PendingRejections]]:
    """Filters 0-10 and the costs (module docstring): the job's context, the costed rows in no
    order, and the rejections to list when asked."""
    if now.tzinfo is None:
        raise ValueError("plan(now=...) must be timezone-aware (UTC)")
    if job.data and storage is None:
        raise ValueError("plan(storage=...) is needed for a job with data (copy mode prices it)")
    ctx = JobContext(job, org, egress, now, require_fresh, interruption, storage, quotas)

    # The deferred rejections below read the input again when --explain asks for them.
    given: tuple[Offer, ...] = offers if isinstance(offers, tuple) else tuple(offers)
    reserved, reservation_rejects = _reservation_offers(job, org, given, now, catalog, ctx)
    pending: list[PendingRejections] = []
    if reservation_rejects:
        tagged = [(o, why, "reservation") for o, why in reservation_rejects]
        pending.append(rejections_fixed(tagged))
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
                    Rejection(o, ctx.wrong_model_reason(o), "accelerator")
                    for o in everything
                    if o.gpu not in wanted
                ],
            )
        )
    # 1b. Offers the cloud's image cannot drive, each with the first filter it fails.
    if refused:
        pending.append(rejections_fixed([_image_rejection(o, why, ctx) for o, why in refused]))

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
    for rejected, reason, filter_name in (
        (wrong_count, ctx.accelerator_reason, "accelerator"),
        (wrong_market, ctx.market_reason_of, "market"),
        (too_small, ctx.size_reason, "size"),
        (losers, lambda o: ctx.duplicate_reason(best[_capacity(o)]), "duplicate"),
    ):
        if rejected:
            pending.append(rejections_listed(rejected, reason, filter_name))
    if wrong_place:
        pending.append(
            PendingRejections(
                len(wrong_place),
                lambda: [
                    Rejection(o, ctx.place_reason_of(o), ctx.place_filter_of(o))
                    for o in wrong_place
                ],
            )
        )

    # 7-9 and costs, on one offer per capacity key.
    rows, late_rejects = cost_rows(best.values(), ctx)
    if late_rejects:
        pending.append(rejections_fixed(late_rejects))
    return ctx, rows, pending


def _image_rejection(o: Offer, why: str, ctx: JobContext) -> tuple[Offer, str, str]:
    """A refused offer's rejection: the wrong-hardware reason first, else the image's."""
    if o.gpu not in ctx.gpu_req:
        return o, ctx.wrong_model_reason(o), "accelerator"
    need_memory = ctx.gpu_req[o.gpu].get(o.gpu_count)
    if need_memory is None or o.gpu_memory_gb < need_memory:
        return o, ctx.accelerator_reason(o), "accelerator"
    return o, f"the cloud's machine image cannot drive it — {why}", "image"


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


def _reservation_offers(
    job: Job,
    org: OrgConfig,
    offers: Sequence[Offer],
    now: datetime,
    catalog: HardwareLookup | None,
    ctx: JobContext,
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
