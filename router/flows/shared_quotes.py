"""`route prices push` / `route prices pull`: price quotes shared through the team's backend.

One engineer (or a scheduled CI job) refreshes prices and pushes the newest quote per place from
their cache into the shared backend's records (`quotes/<cloud>`); everyone else pulls them into
their own cache. Quotes keep their source and `observed_at`, so ages and `--require-fresh` mean
the same whoever fetched them; the cache keeps every quote and the freshest one wins.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from router.config.home import cache_path
from router.config.project import Project
from router.core.errors import OperationFailed
from router.core.offers import Quote
from router.prices.cache import QuoteCache

CLOUDS = ("aws", "gcp", "azure")


@dataclass(frozen=True)
class Shared:
    where: str
    quotes_by_cloud: dict[str, int]  # pushed (or, for pull, newly added) per cloud


def _quote_doc(q: Quote) -> dict[str, Any]:
    return {
        "cloud": q.cloud, "region": q.region, "zone": q.zone, "instance_type": q.instance_type,
        "market": q.market, "price_per_hour": q.price_per_hour, "source": q.source,
        "observed_at": q.observed_at.isoformat(), "interruption_bucket": q.interruption_bucket,
    }


def _quote(doc: dict[str, Any]) -> Quote:
    return Quote(
        cloud=doc["cloud"], region=doc["region"], zone=doc.get("zone"),
        instance_type=doc["instance_type"], market=doc["market"],
        price_per_hour=float(doc["price_per_hour"]), source=doc["source"],
        observed_at=datetime.fromisoformat(doc["observed_at"]),
        interruption_bucket=doc.get("interruption_bucket"),
    )


def push_quotes(*, project: Project, now: datetime) -> Shared:
    """The newest cached quote per place, per cloud, into the backend's records."""
    from router.flows.jobs import engine_for

    records = engine_for(project).records()
    counts: dict[str, int] = {}
    with QuoteCache(cache_path()) as cache:
        for cloud in CLOUDS:
            quotes = [q for q in cache.latest(clouds=[cloud]) if q.source != "snapshot"]
            if not quotes:
                continue
            records.put(f"quotes/{cloud}", {
                "pushed_at": now.isoformat(), "pushed_by": os.environ.get("USER", ""),
                "quotes": [_quote_doc(q) for q in quotes],
            })
            counts[cloud] = len(quotes)
    if not counts:
        raise OperationFailed(
            "no live quotes in this cache to share — run `route prices refresh` first"
        )
    return Shared(records.where, counts)


def pull_quotes(*, project: Project) -> Shared:
    """Every shared quote into this machine's cache (already known ones are skipped)."""
    from router.flows.jobs import engine_for

    records = engine_for(project).records()
    shared = records.list("quotes/")
    counts: dict[str, int] = {}
    with QuoteCache(cache_path()) as cache:
        for key, doc in sorted(shared.items()):
            counts[key.removeprefix("quotes/")] = cache.add(_quote(q) for q in doc["quotes"])
    return Shared(records.where, counts)
