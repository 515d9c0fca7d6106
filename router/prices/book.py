"""The price book: the offers spotroute knows right now, and refreshing them from live APIs.

Offers come from three places, freshest wins per (cloud, region, zone, instance type, market):
live API quotes and imports kept in the SQLite cache, and the bundled snapshot (the embedded
default that makes everything work with no credentials). Cloud SDKs are imported only by
`refresh`, through the per-cloud modules.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from router.config.datafiles import load_catalog
from router.config.home import cache_path
from router.core.catalog import Catalog, offers_from_quotes
from router.core.errors import RouteError
from router.core.offers import Offer, Quote
from router.prices.cache import QuoteCache
from router.prices.request import PriceRequest
from router.prices.snapshot import load_snapshot
from router.prices.sources import PriceSource, price_source


class QuoteStore(Protocol):
    """What the book needs of the cache (router.prices.cache.QuoteCache implements it)."""

    def add(self, quotes: Iterable[Quote]) -> int: ...

    def latest(self, *, clouds: Sequence[str] | None = None) -> list[Quote]: ...


def freshest(quotes: Iterable[Quote]) -> list[Quote]:
    """One quote per (cloud, region, zone, instance type, market): the most recently observed."""
    best: dict[tuple[str, str, str | None, str, str], Quote] = {}
    for quote in quotes:
        key = (quote.cloud, quote.region, quote.zone, quote.instance_type, quote.market)
        kept = best.get(key)
        if kept is None or quote.observed_at > kept.observed_at:
            best[key] = quote
    return list(best.values())


def known_offers(
    catalog: Catalog,
    snapshot: Sequence[Quote],
    store: QuoteStore | None,
    clouds: Sequence[str] | None = None,
) -> list[Offer]:
    """Every offer known now: cached live/imported quotes merged over the snapshot.

    A cached quote for a (cloud, region, type, market) replaces every snapshot row for it, even
    when the two name zones differently (the snapshot prices AWS on-demand per region and names
    AWS zones by ID; the live API prices per zone name).
    """
    wanted = set(clouds) if clouds else None
    cached = store.latest(clouds=sorted(wanted) if wanted else None) if store is not None else []
    covered = {(q.cloud, q.region, q.instance_type, q.market) for q in cached}
    quotes = [
        q
        for q in snapshot
        if (wanted is None or q.cloud in wanted)
        and (q.cloud, q.region, q.instance_type, q.market) not in covered
    ]
    return offers_from_quotes(freshest([*quotes, *cached]), catalog).offers


def offers_now(clouds: Sequence[str] | None = None) -> list[Offer]:
    """Every offer known now: the price cache in SPOTROUTE_HOME over the bundled snapshot."""
    with QuoteCache(cache_path()) as cache:
        return known_offers(load_catalog(), load_snapshot(), cache, clouds)


@dataclass(frozen=True)
class OfferFilter:
    """The `route prices` filters; empty tuples mean "any"."""

    gpu: str | None = None
    gpu_count: int | None = None
    markets: tuple[str, ...] = ()
    clouds: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()  # glob patterns


def select_offers(offers: Iterable[Offer], where: OfferFilter) -> list[Offer]:
    """Offers matching the filter, cheapest first (ties by cloud, region, zone, type)."""
    selected = [
        o
        for o in offers
        if (where.gpu is None or o.gpu == where.gpu)
        and (where.gpu_count is None or o.gpu_count == where.gpu_count)
        and (not where.markets or o.market in where.markets)
        and (not where.clouds or o.cloud in where.clouds)
        and (not where.regions or any(fnmatch.fnmatchcase(o.region, p) for p in where.regions))
    ]
    selected.sort(
        key=lambda o: (o.price_per_hour, o.cloud, o.region, o.zone or "", o.instance_type)
    )
    return selected


@dataclass(frozen=True)
class RefreshOutcome:
    """What refreshing one cloud did: quotes stored, or the one-line reason it failed."""

    cloud: str
    regions: tuple[str, ...]
    instance_types: int
    quotes_stored: int
    elapsed_s: float
    error: str | None = None
    warnings: tuple[str, ...] = ()  # checks the source skipped or did partly (one line each)


def refresh(
    requests: dict[str, PriceRequest],
    store: QuoteStore,
    *,
    now: datetime,
    sources: Mapping[str, PriceSource] | None = None,
) -> list[RefreshOutcome]:
    """Fetch live quotes per cloud concurrently, then store them; a failure stays per cloud.

    `sources` replaces the registered source of a cloud (tests pass fakes).
    """

    def fetch(cloud: str) -> tuple[list[Quote], list[str], str | None, float]:
        started = time.monotonic()
        try:
            source = (sources or {}).get(cloud) or price_source(cloud)
            fetched = source.fetch(requests[cloud], now=now)
        except RouteError as exc:
            return [], [], exc.message, time.monotonic() - started
        return fetched.quotes, fetched.warnings, None, time.monotonic() - started

    from concurrent.futures import ThreadPoolExecutor  # only refresh needs threads

    clouds = sorted(requests)
    with ThreadPoolExecutor(max_workers=max(1, len(clouds))) as pool:
        fetched = list(pool.map(fetch, clouds))
    outcomes = []
    # The cache is written from this thread only: one SQLite connection, one writer here.
    for cloud, (quotes, warnings, error, elapsed_s) in zip(clouds, fetched, strict=True):
        request = requests[cloud]
        stored = store.add(quotes) if quotes else 0
        outcomes.append(
            RefreshOutcome(
                cloud,
                request.regions,
                len(request.instance_types),
                stored,
                elapsed_s,
                error,
                tuple(warnings),
            )
        )
    return outcomes
