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


def no_fit_reason(job: Job, rejected: Sequence[Rejection]) -> str:
    """Why nothing fits: the filter that removed the cheapest offer with the job's GPUs, its
    reason, and how many such offers each filter removed."""
    wanted = " or ".join(f"{a.gpu}×{a.count}" for a in job.resources.accelerators)
    candidates = [r for r in rejected if r.filter != "accelerator"]
    if not candidates:
        clouds = ", ".join(job.resources.clouds)
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
