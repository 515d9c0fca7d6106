"""The price book: the offers spotroute knows right now, and refreshing them from live APIs.

Offers come from three places, freshest wins per (cloud, region, zone, instance type, market):
live API quotes and imports kept in the SQLite cache, and the bundled snapshot (the embedded
default that makes everything work with no credentials). `route plan --sources` chooses among
them (SOURCE_KINDS). Cloud SDKs are imported only by `refresh`, through the per-cloud modules.
"""

from __future__ import annotations

import fnmatch
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from router.config.datafiles import load_catalog
from router.config.home import cache_path
from router.core.catalog import Catalog, offers_from_quotes
from router.core.errors import BadInput, RouteError
from router.core.offers import Offer, Quote
from router.prices.cache import QuoteCache
from router.prices.imports import SOURCE as IMPORT_SOURCE
from router.prices.request import PriceRequest
from router.prices.snapshot import SOURCE as SNAPSHOT_SOURCE
from router.prices.snapshot import load_snapshot
from router.prices.source_protocol import PriceSource
from router.prices.sources import price_source


class QuoteStore(Protocol):
    """What the book needs of the cache (router.prices.cache.QuoteCache implements it)."""

    def add(self, quotes: Iterable[Quote]) -> int: ...

    def latest(
        self, *, clouds: Sequence[str] | None = None, sources: Sequence[str] | None = None
    ) -> list[Quote]: ...

    def sources(self) -> Mapping[str, object]: ...


# What `--sources` chooses among: quotes read from clouds' APIs (refresh, or pulled from the team's
# backend), imported price files, the bundled snapshot.
SOURCE_KINDS: tuple[str, ...] = ("import", "live", "snapshot")


def source_kind(source: str) -> str:
    """"snapshot", "import" (import:skypilot) or "live" (aws-api, gcp-api, azure-api)."""
    if source == SNAPSHOT_SOURCE:
        return "snapshot"
    if source.startswith(IMPORT_SOURCE.partition(":")[0] + ":"):
        return "import"
    return "live"


def parse_source_kinds(text: str | None) -> tuple[str, ...]:
    """`--sources import,live` → ("import", "live"); None/"" = all; BadInput names the option."""
    if not text:
        return SOURCE_KINDS
    kinds = tuple(dict.fromkeys(k.strip().lower() for k in text.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in SOURCE_KINDS]
    if unknown or not kinds:
        raise BadInput(
            f"--sources: '{','.join(unknown) or text}' is not a price source — use a "
            f"comma-separated list of {', '.join(SOURCE_KINDS)}"
        )
    return kinds


def freshest(quotes: Iterable[Quote]) -> list[Quote]:
    """One quote per (cloud, region, zone, instance type, market): the most recently observed."""
    best: dict[tuple[str, str, str | None, str, str], Quote] = {}
    for quote in quotes:
        key = (quote.cloud, quote.region, quote.zone, quote.instance_type, quote.market)
        kept = best.get(key)
        if kept is None or quote.observed_at > kept.observed_at:
            best[key] = quote
    return list(best.values())


@dataclass(frozen=True)
class OfferBook:
    """The offers known now, the ones a cloud's image cannot drive (with why), and the sources
    they came from (`kinds` chosen; `by_cloud` counts offers per cloud and source kind)."""

    offers: list[Offer]
    refused: tuple[tuple[Offer, str], ...] = ()
    kinds: tuple[str, ...] = SOURCE_KINDS
    by_cloud: dict[str, dict[str, int]] = field(default_factory=dict)

    def snapshot_mixed(self) -> dict[str, int]:
        """Per cloud where fresher sources (import, live) price some places and the snapshot the
        rest: how many of its offers are the snapshot's."""
        return {
            cloud: counts["snapshot"]
            for cloud, counts in sorted(self.by_cloud.items())
            if counts.get("snapshot") and (counts.get("import") or counts.get("live"))
        }


def known_offers(
    catalog: Catalog,
    snapshot: Sequence[Quote],
    store: QuoteStore | None,
    clouds: Sequence[str] | None = None,
) -> list[Offer]:
    """Every offer known now: cached live/imported quotes merged over the snapshot."""
    return offer_book(catalog, snapshot, store, clouds).offers


def offer_book(
    catalog: Catalog,
    snapshot: Sequence[Quote],
    store: QuoteStore | None,
    clouds: Sequence[str] | None = None,
    kinds: Sequence[str] = SOURCE_KINDS,
) -> OfferBook:
    """The offers of the chosen source kinds: cached live/imported quotes merged over the snapshot.

    A cached quote for a (cloud, region, type, market) replaces every snapshot row for it, even
    when the two name zones differently (the snapshot prices AWS on-demand per region and names
    AWS zones by ID; the live API prices per zone name).
    """
    wanted = set(clouds) if clouds else None
    cached: list[Quote] = []
    if store is not None and ("import" in kinds or "live" in kinds):
        names = None
        if not {"import", "live"} <= set(kinds):  # only one of them: ask the cache for its names
            names = sorted(name for name in store.sources() if source_kind(name) in kinds)
        if names is None or names:
            cloud_list = sorted(wanted) if wanted else None
            cached = (
                store.latest(clouds=cloud_list)
                if names is None
                else store.latest(clouds=cloud_list, sources=names)
            )
    covered = {(q.cloud, q.region, q.instance_type, q.market) for q in cached}
    quotes = [
        q
        for q in (snapshot if "snapshot" in kinds else ())
        if (wanted is None or q.cloud in wanted)
        and (q.cloud, q.region, q.instance_type, q.market) not in covered
    ]
    made = offers_from_quotes(freshest([*quotes, *cached]), catalog)
    counts: dict[str, Counter[str]] = {}
    for o in (*made.offers, *(o for o, _why in made.refused_offers)):
        counts.setdefault(o.cloud, Counter())[source_kind(o.source)] += 1
    return OfferBook(
        made.offers,
        made.refused_offers,
        tuple(k for k in SOURCE_KINDS if k in kinds),
        {cloud: dict(c) for cloud, c in sorted(counts.items())},
    )


def offers_now(clouds: Sequence[str] | None = None) -> list[Offer]:
    """Every offer known now: the price cache in SPOTROUTE_HOME over the bundled snapshot."""
    return book_now(clouds).offers


def book_now(clouds: Sequence[str] | None = None, kinds: Sequence[str] = SOURCE_KINDS) -> OfferBook:
    """The OfferBook of the price cache in SPOTROUTE_HOME and the bundled snapshot."""
    with QuoteCache(cache_path()) as cache:
        return offer_book(load_catalog(), load_snapshot(), cache, clouds, kinds)


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
