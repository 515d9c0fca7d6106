"""Why a plan came out as it did, in one line: which filter removed the offers the job could use.

`route plan` (and deploy's "no placement fits") says which filter removed the cheapest offers
with the job's hardware, so a job whose every V100 offer the image filter dropped is not left
with a bare "nothing fits". Pure: rejections in, text out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from router.core.job.model import Job
from router.core.placement import FILTERS, Rejection


def by_filter(rejected: Sequence[Rejection]) -> dict[str, int]:
    """How many offers each filter removed, in filter order (planner.py)."""
    counts = Counter(r.filter for r in rejected)
    order = {name: i for i, name in enumerate(FILTERS)}
    return dict(sorted(counts.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


# The price source kinds (router.prices.book.SOURCE_KINDS) and the command that adds each one's
# offers; the snapshot is bundled.
ADD_OFFERS = {
    "live": "`route prices refresh`",
    "import": "`route prices import FILE --format skypilot`",
}


def no_fit_reason(
    job: Job, rejected: Sequence[Rejection], sources: Sequence[str] | None = None
) -> str:
    """Why nothing fits: the filter that removed the cheapest offer with the job's GPUs, its
    reason, and how many such offers each filter removed. `sources`: the price source kinds the
    user chose (`--sources`), None when every kind was used."""
    wanted = " or ".join(f"{a.gpu}×{a.count}" for a in job.resources.accelerators)
    candidates = [r for r in rejected if r.filter != "accelerator"]
    clouds = ", ".join(job.resources.clouds)
    if not candidates and sources:
        chosen = ",".join(sources)
        gave = (
            f"{len(rejected)} offer{'s' if len(rejected) != 1 else ''} on {clouds}, none with"
            if rejected
            else f"no offer on {clouds} for"
        )
        add = " or ".join(f"{ADD_OFFERS[k]} ({k})" for k in sources if k in ADD_OFFERS)
        return (
            f"the price sources chosen (--sources {chosen}) gave {gave} {wanted} — "
            "leave --sources out to plan on every source (the bundled snapshot included)"
            + (f", or add offers to those chosen: {add}" if add else "")
        )
    if not candidates:
        return f"no offer on {clouds} has {wanted} (the accelerator filter removed all of them)"
    cheapest = min(
        candidates,
        key=lambda r: (r.offer.price_per_hour, r.offer.cloud, r.offer.region, r.offer.zone or ""),
    )
    o = cheapest.offer
    counts = ", ".join(f"{n} {name}" for name, n in by_filter(candidates).items())
    return (
        f"the cheapest offer with {wanted}, {o.cloud} {o.instance_type} {o.zone or o.region} "
        f"{o.market} ${o.price_per_hour:,.2f}/h, failed the {cheapest.filter} filter: "
        f"{cheapest.reason} (of {len(candidates)} such offers: {counts})"
    )
