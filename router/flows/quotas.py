"""The library behind `route quotas`: the cached quota table, and refreshing it from the clouds."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from router.config.datafiles import load_quota_definitions, load_type_quotas
from router.config.home import spotroute_home
from router.contract.clouds import PUBLIC_CLOUDS as CLOUDS
from router.core.errors import BadInput
from router.core.quotas import LaunchFailure, QuotaDefinition, QuotaReading, quota_keys
from router.prices.quotas.book import QuotaRefreshOutcome, refresh
from router.prices.quotas.cache import QuotaCache, default_path
from router.prices.quotas.request import QuotaRequest
from router.prices.quotas.sources import SOURCES


def quota_cache_path() -> Path:
    """The quota cache in SPOTROUTE_HOME."""
    return default_path(spotroute_home())


@dataclass(frozen=True)
class QuotaRow:
    """One cached quota reading with its definition (None when quotas.csv does not list it)."""

    reading: QuotaReading
    definition: QuotaDefinition | None


@dataclass(frozen=True)
class QuotaTable:
    rows: list[QuotaRow]
    failures: list[LaunchFailure]
    now: datetime


def _clouds(clouds: tuple[str, ...]) -> tuple[str, ...]:
    for cloud in clouds:
        if cloud not in CLOUDS:
            raise BadInput(f"--clouds: unknown cloud '{cloud}' — use one of {', '.join(CLOUDS)}")
    return clouds or tuple(SOURCES)


def _matches(region: str, patterns: tuple[str, ...]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(region, p) for p in patterns)


def quota_table(*, clouds: tuple[str, ...], regions: tuple[str, ...], now: datetime) -> QuotaTable:
    """Cached quota readings and recorded launch failures, filtered; sorted by cloud, region."""
    wanted = _clouds(clouds)
    path = quota_cache_path()
    if not path.exists():
        return QuotaTable([], [], now)
    definitions = {(d.cloud, d.quota): d for d in load_quota_definitions()}
    with QuotaCache(path) as cache:
        readings = cache.latest(wanted)
        failures = cache.failures(wanted)
    rows = [
        QuotaRow(r, definitions.get((r.cloud, r.quota)))
        for r in readings
        if _matches(r.region, regions)
    ]
    return QuotaTable(rows, [f for f in failures if _matches(f.region, regions)], now)


def quota_requests(
    *, clouds: tuple[str, ...], regions: tuple[str, ...], timeout_s: float
) -> dict[str, QuotaRequest]:
    """One request per cloud: every quota its catalog types draw on, in the known regions."""
    from router.prices.snapshot import snapshot_regions

    types = load_type_quotas()
    requests: dict[str, QuotaRequest] = {}
    for cloud in _clouds(clouds):
        known = snapshot_regions(cloud)
        chosen = tuple(r for r in known if _matches(r, regions))
        if not chosen:
            raise BadInput(
                f"--regions: no {cloud} region matches {', '.join(regions)} — "
                f"known: {', '.join(known)}"
            )
        keys = quota_keys(types, cloud)
        if keys:
            requests[cloud] = QuotaRequest(quotas=keys, regions=chosen, timeout_s=timeout_s)
    return requests


def refresh_quotas(
    *, clouds: tuple[str, ...], regions: tuple[str, ...], timeout_s: float, now: datetime
) -> list[QuotaRefreshOutcome]:
    """Read each cloud's quotas (limit and usage) into the cache; failures are per cloud."""
    requests = quota_requests(clouds=clouds, regions=regions, timeout_s=timeout_s)
    with QuotaCache(quota_cache_path()) as cache:
        return refresh(requests, cache, now=now)
