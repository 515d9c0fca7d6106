"""The library behind `route prices`: list, refresh, import and history of quotes."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from router.config.datafiles import load_catalog, load_gpus
from router.config.home import cache_path
from router.config.project import Project
from router.contract.clouds import PUBLIC_CLOUDS
from router.core.errors import BadInput
from router.core.gpus import UnknownGpu
from router.core.offers import Offer, Quote
from router.prices.book import (
    OfferFilter,
    RefreshOutcome,
    offers_now,
    refresh,
    select_offers,
)
from router.prices.cache import QuoteCache
from router.prices.imports import ImportResult, import_skypilot
from router.prices.request import PriceRequest
from router.prices.snapshot import snapshot_regions
from router.prices.sources import SOURCES


@dataclass(frozen=True)
class PriceTable:
    offers: list[Offer]
    now: datetime
    max_age_s: float  # quotes older than this are flagged stale


def _clouds(clouds: tuple[str, ...], flag: str = "--clouds") -> tuple[str, ...]:
    for cloud in clouds:
        if cloud not in PUBLIC_CLOUDS:
            raise BadInput(
                f"{flag}: unknown cloud '{cloud}' — use one of {', '.join(PUBLIC_CLOUDS)}"
            )
    return clouds


def _gpu(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        return load_gpus().canonical(name)
    except UnknownGpu as exc:
        raise BadInput(f"--gpu: {exc}") from None


def price_table(
    *,
    gpu: str | None,
    gpu_count: int | None,
    market: str,
    clouds: tuple[str, ...],
    regions: tuple[str, ...],
    project: Project | None,
    now: datetime,
) -> PriceTable:
    """Every known offer matching the filters, cheapest first."""
    from router.config.org_file import org_config_for

    where = OfferFilter(
        gpu=_gpu(gpu),
        gpu_count=gpu_count,
        markets=() if market == "all" else (market,),
        clouds=_clouds(clouds),
        regions=regions,
    )
    org = org_config_for(project)
    offers = offers_now(where.clouds or None)
    return PriceTable(select_offers(offers, where), now, float(org.max_quote_age_s))


def refresh_requests(
    *, clouds: tuple[str, ...], regions: tuple[str, ...], gpu: str | None, timeout_s: float
) -> dict[str, PriceRequest]:
    """One request per cloud: its GPU instance types, in the known regions matching the globs."""
    catalog = load_catalog()
    requests = {}
    for cloud in _clouds(clouds) or tuple(SOURCES):
        types = tuple(
            sorted(
                it.instance_type for it in catalog.for_cloud(cloud) if gpu is None or it.gpu == gpu
            )
        )
        known = snapshot_regions(cloud)
        chosen = tuple(
            r for r in known if not regions or any(fnmatch.fnmatchcase(r, p) for p in regions)
        )
        if not chosen:
            raise BadInput(
                f"--regions: no {cloud} region matches {', '.join(regions)} — "
                f"known: {', '.join(known)}"
            )
        if types:
            requests[cloud] = PriceRequest(
                instance_types=types, regions=chosen, timeout_s=timeout_s
            )
    if not requests:
        asked = ", ".join(clouds) or "any cloud"
        raise BadInput(
            f"--gpu: no instance type of {asked} has {gpu} — see `route prices --gpu {gpu}` "
            "for where it is offered"
        )
    return requests


def refresh_prices(
    *,
    clouds: tuple[str, ...],
    regions: tuple[str, ...],
    gpu: str | None,
    timeout_s: float,
    now: datetime,
) -> list[RefreshOutcome]:
    """Fetch live quotes from each cloud's API into the cache; failures are per cloud."""
    requests = refresh_requests(clouds=clouds, regions=regions, gpu=_gpu(gpu), timeout_s=timeout_s)
    with QuoteCache(cache_path()) as cache:
        return refresh(requests, cache, now=now)


def import_prices(path: Path, *, fmt: str, cloud: str | None, now: datetime) -> ImportResult:
    """Read a price catalog file and add its quotes to the cache."""
    if fmt != "skypilot":
        raise BadInput(f"--format: unknown format '{fmt}' — use skypilot")
    result = import_skypilot(path, cloud=cloud, now=now)
    with QuoteCache(cache_path()) as cache:
        cache.add(result.quotes)
    return result


def price_history(
    *,
    cloud: str,
    instance_type: str,
    region: str | None,
    market: str | None,
    since_hours: float | None,
    now: datetime,
) -> list[Quote]:
    """Cached quotes of one instance type, oldest first."""
    since = now - timedelta(hours=since_hours) if since_hours is not None else None
    with QuoteCache(cache_path()) as cache:
        return cache.history(
            cloud=cloud, instance_type=instance_type, region=region, market=market, since=since
        )


@dataclass(frozen=True)
class PulledHistory:
    """Spot prices pulled live from a cloud's history API, and where they were written."""

    cloud: str
    instance_types: tuple[str, ...]
    regions: tuple[str, ...]
    rows: int
    zones: int
    path: Path
    since: datetime
    until: datetime


def pull_spot_history(
    *,
    cloud: str,
    gpu: str,
    count: int,
    days: float,
    regions: tuple[str, ...],
    out: Path,
    now: datetime,
) -> PulledHistory:
    """Pull `days` of spot prices of `count`×`gpu` types and write a trace `route backtest` reads.

    `gpu` may name a family ("A100": A100-40GB and A100-80GB) — a history is for looking at.
    """
    from router.prices.history import NO_HISTORY_API, aws_spot_history, check_days, write_history

    if cloud in NO_HISTORY_API:
        raise BadInput(f"--cloud {cloud}: {NO_HISTORY_API[cloud]}")
    if cloud != "aws":
        raise BadInput(f"--cloud {cloud}: not a public cloud — use aws")
    check_days(days)
    table = load_gpus()
    try:
        gpus = {table.canonical(gpu)}
    except UnknownGpu as exc:
        family = {g for g in table.names if g.lower().startswith(gpu.lower() + "-")}
        if "ambiguous" not in str(exc) or not family:
            raise BadInput(f"--gpu: {exc}") from None
        gpus = family
    catalog = load_catalog()
    types = tuple(
        sorted({it.instance_type for g in gpus for it in catalog.matching(g, count, [cloud])})
    )
    if not types:
        raise BadInput(
            f"--gpu {gpu} --count {count}: no {cloud} instance type in the catalog carries "
            f"{count}× {' or '.join(sorted(gpus))} — see `route prices --gpu {gpu}`"
        )
    chosen = regions or snapshot_regions(cloud)
    since = now - timedelta(days=days)
    rows = aws_spot_history(regions=chosen, instance_types=types, start=since, end=now)
    written = write_history(out, rows)
    zones = len({r["AvailabilityZone"] for r in rows})
    return PulledHistory(cloud, types, tuple(chosen), len(rows), zones, written, since, now)
