"""The quota book: what the cache knows about the account's quotas, and refreshing it.

`quota_book` reads the cache only (no cloud SDK, so `route plan` stays fast); `refresh` imports
the per-cloud sources and reads the clouds concurrently, each cloud failing on its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from router.config.datafiles import load_quota_definitions, load_type_quotas
from router.core.errors import RouteError
from router.core.quotas import LaunchFailure, QuotaBook, QuotaReading
from router.prices.quotas.request import QuotaRequest

Fetcher = Callable[[QuotaRequest], list[QuotaReading]]


class QuotaStore(Protocol):
    """What the book needs of the cache (router.prices.quotas.cache.QuotaCache implements it)."""

    def add(self, readings: Sequence[QuotaReading]) -> int: ...

    def latest(self, clouds: Sequence[str] | None = None) -> list[QuotaReading]: ...

    def failures(self, clouds: Sequence[str] | None = None) -> list[LaunchFailure]: ...


@dataclass(frozen=True)
class QuotaRefreshOutcome:
    """What refreshing one cloud's quotas did: readings stored, or the one-line reason it failed."""

    cloud: str
    regions: tuple[str, ...]
    quotas: int
    readings_stored: int
    elapsed_s: float
    error: str | None = None


def quota_book(
    store: QuotaStore | None, *, now: datetime, clouds: Sequence[str] | None = None
) -> QuotaBook:
    """The quotas known now: definitions and mapping from the data files, readings from `store`."""
    readings = store.latest(clouds) if store is not None else []
    failures = store.failures(clouds) if store is not None else []
    return QuotaBook(load_quota_definitions(), load_type_quotas(), readings, failures, now=now)


def open_book_if_cached(path: Path, *, now: datetime, clouds: Sequence[str]) -> QuotaBook:
    """The quota book from the cache at `path`; with no cache file yet, every quota is unknown."""
    if not path.exists():
        return quota_book(None, now=now)
    from router.prices.quotas.cache import QuotaCache

    with QuotaCache(path) as cache:
        return quota_book(cache, now=now, clouds=clouds)


def _live_fetcher(cloud: str, now: datetime) -> Fetcher:
    from router.prices.quotas.sources import quota_source

    source = quota_source(cloud)
    return lambda request: source.fetch(request, now=now)


def refresh(
    requests: dict[str, QuotaRequest],
    store: QuotaStore,
    *,
    now: datetime,
    fetchers: dict[str, Fetcher] | None = None,
) -> list[QuotaRefreshOutcome]:
    """Read each cloud's quotas concurrently, then store them; a failure stays per cloud."""

    def fetch(cloud: str) -> tuple[list[QuotaReading], str | None, float]:
        started = time.monotonic()
        try:
            fetcher = (fetchers or {}).get(cloud) or _live_fetcher(cloud, now)
            readings = fetcher(requests[cloud])
        except RouteError as exc:
            return [], exc.message, time.monotonic() - started
        return readings, None, time.monotonic() - started

    from concurrent.futures import ThreadPoolExecutor  # only refresh needs threads

    clouds = sorted(requests)
    with ThreadPoolExecutor(max_workers=max(1, len(clouds))) as pool:
        fetched = list(pool.map(fetch, clouds))
    outcomes = []
    # The cache is written from this thread only.
    for cloud, (readings, error, elapsed_s) in zip(clouds, fetched, strict=True):
        request = requests[cloud]
        stored = store.add(readings) if readings else 0
        outcomes.append(
            QuotaRefreshOutcome(
                cloud, request.regions, len(request.quotas), stored, elapsed_s, error
            )
        )
    return outcomes
