"""The planner's cost model applied: costed rows (filters 7-10), their ranking and Placements.

The formulas are in router/core/planner.py's docstring and docs/planner.md. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from router.core.data_access import DataAccess
from router.core.interruption import EffectiveBucket, group_rate, interruption_usd, work_multiplier
from router.core.offers import Offer
from router.core.org import Discount
from router.core.placement import Placement
from router.core.plan_context import SPOT, JobContext
from router.core.quotas import SHORT, UNKNOWN, QuotaVerdict


@dataclass(slots=True)
class CostRow:
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


def rank_key(row: CostRow) -> tuple[Any, ...]:
    """Total ascending, then interruption rate, price age, and names (never input order)."""
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


def cost_rows(
    survivors: Iterable[Offer], ctx: JobContext
) -> tuple[list[CostRow], list[tuple[Offer, str, str]]]:
    """Filters 7-10 and the cost of each survivor: costed rows, and (offer, reason, filter)
    rejections."""
    rows: list[CostRow] = []
    rejects: list[tuple[Offer, str, str]] = []
    now, max_age_s, require_fresh = ctx.now, ctx.max_quote_age_s, ctx.require_fresh
    node_hours = ctx.node_count * ctx.hours
    nodes, hours, restore_h, interval_h = ctx.node_count, ctx.hours, ctx.restore_h, ctx.interval_h
    for o in survivors:
        age_s = max(0.0, (now - o.observed_at).total_seconds())
        # A quote that claimed to come from the future has no trustworthy age.
        stale = age_s > max_age_s or o.clock_skewed
        if stale and require_fresh:
            rejects.append((o, ctx.stale_reason(age_s), "freshness"))
            continue
        verdict = ctx.quota(o)
        if verdict is not None and verdict.status == SHORT:
            rejects.append((o, verdict.note, "quota"))
            continue
        too_small = ctx.capacity_reason(o)
        if too_small:
            rejects.append((o, too_small, "capacity"))
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
            rejects.append((o, why, "price cap"))
            continue
        data = ctx.data_access(o.cloud, o.region, price) if ctx.has_data else ()
        egress_usd = storage_usd = staging_usd = 0.0
        for d in data:
            egress_usd += d.egress_usd
            storage_usd += d.storage_usd
            staging_usd += d.chosen_staging_usd
        rate, bucket = ctx.interruption(o)
        compute = price * node_hours
        interrupted = (
            interruption_usd(price, nodes, hours, rate, restore_h, interval_h) if rate > 0 else 0.0
        )
        total = compute + egress_usd + storage_usd + staging_usd + interrupted
        if not math.isfinite(total):  # NaN > budget is False: never let one through
            rejects.append(
                (o, "expected cost is not a finite number — check duration_hours", "job budget")
            )
            continue
        if ctx.max_job_cost is not None and total > ctx.max_job_cost:
            rejects.append(
                (
                    o,
                    f"expected total ${total:,.2f} exceeds budgets.max_job_cost "
                    f"${ctx.max_job_cost:,.2f} (spotroute.yaml)",
                    "job budget",
                )
            )
            continue
        rows.append(
            CostRow(
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


def placement_of(row: CostRow, ctx: JobContext) -> Placement:
    """The Placement a costed row becomes, with the reasons shown under it."""
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
        node_count=ctx.node_count,
        hours=ctx.hours,
        compute_cost=row.compute_cost,
        egress_cost=row.egress_cost,
        interruption_cost=row.interruption_cost,
        total_cost=row.total_cost,
        price_source=o.source,
        price_age_s=row.age_s,
        stale=row.stale,
        interruption_bucket=row.bucket.bucket,
        interruptions_per_hour=row.rate_per_hour,
        reasons=reasons_of(row, ctx),
        offer=o,
        quota_status=row.quota.status if row.quota is not None else "unchecked",
        quota_note=row.quota.note if row.quota is not None else "",
        storage_cost=row.storage_cost,
        staging_cost=row.staging_cost,
        data=row.data,
    )


def reasons_of(row: CostRow, ctx: JobContext) -> tuple[str, ...]:
    """Why a placement costs what it does: reservation, discount, data, interruptions, quota."""
    o = row.offer
    out: list[str] = []
    reservation = ctx.reservations.get(id(o)) if ctx.reservations else None
    if reservation is not None:
        out.append(
            f"reserved capacity from spotroute.yaml ({reservation.count} instance(s), "
            f"${reservation.price_per_hour:,.2f}/h already paid; marginal "
            f"${row.price_per_hour:,.2f}/h)"
        )
    elif row.discount is not None:
        out.append(
            f"{row.discount.label}: ${row.list_price_per_hour:,.2f} → ${row.price_per_hour:,.2f}/h"
        )
    for d in row.data:
        if d.route.once.rule:
            out.append(f"egress: {d.route.once.rule}")
        out.append(d.summary())
    if o.market == SPOT:
        assumed = f" ({row.bucket.note})" if row.bucket.assumed else ""
        group = group_rate(row.rate_per_hour, ctx.node_count)
        paid_h = ctx.hours * work_multiplier(group, ctx.restore_h, ctx.interval_h)
        seen = ctx.evidence_note(o)
        out.append(
            f"interruptions: {row.bucket.bucket} per month{assumed}{seen} → "
            f"{group * paid_h:.3f} expected over {ctx.hours:g} h of work on "
            f"{ctx.node_count} node(s) (any node's loss stops the group), "
            f"{ctx.lost_hours_per_interruption:.2f} h lost each"
        )
    if row.quota is not None and row.quota.status == UNKNOWN:
        out.append(row.quota.note)
    if o.clock_skewed:
        out.append("price was dated in the future (clock skew): clamped to now, treated as stale")
    elif row.stale:
        out.append(
            f"price is {row.age_s / 3600:.1f} h old (max {ctx.max_quote_age_s / 3600:g} h): "
            "stale — run `route prices refresh`"
        )
    return tuple(out)
