"""The bundled price snapshot: dated quotes that make `route prices` and `route plan` work offline.

The rows live in router/data/snapshot.csv; where each number comes from, the date it describes,
the derivation rules for filled gaps and how to refresh are in docs/price-snapshot.md. Live
quotes from `route prices refresh` go to the cache and win over these (router.prices.book).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from functools import lru_cache
from pathlib import Path

from router.config.datafiles import read_data_file
from router.contract.clouds import PUBLIC_CLOUDS
from router.core.csv_rows import csv_rows
from router.core.errors import BadInput
from router.core.offers import INTERRUPTION_BUCKETS, MARKETS, Quote

SOURCE = "snapshot"
PACKAGED_NAME = "router/data/snapshot.csv"
COLUMNS: tuple[str, ...] = (
    "cloud",
    "region",
    "zone",
    "instance_type",
    "market",
    "price_per_hour",
    "observed_at",
    "interruption_bucket",
)
# Optional column saying how a number was obtained (docs/price-snapshot.md, "Basis").
BASES: tuple[str, ...] = ("catalog", "list", "derived")


def load_snapshot(path: Path | None = None) -> list[Quote]:
    """Every snapshot quote (source "snapshot"), from `path` or the bundled file."""
    return list(_load(path))


def snapshot_date(path: Path | None = None) -> date:
    """The date the snapshot describes: the latest `observed_at` of its rows (UTC)."""
    return max(q.observed_at for q in _load(path)).date()


def snapshot_regions(cloud: str, path: Path | None = None) -> tuple[str, ...]:
    """The regions the snapshot prices for `cloud`, sorted (empty for an unknown cloud)."""
    return tuple(sorted({q.region for q in _load(path) if q.cloud == cloud}))


@lru_cache(maxsize=8)
def _load(path: Path | None) -> tuple[Quote, ...]:
    return parse_snapshot(*read_data_file("snapshot.csv", path, "the price snapshot"))


def parse_snapshot(text: str, name: str = PACKAGED_NAME) -> tuple[Quote, ...]:
    """Parse snapshot.csv text; a bad row raises BadInput naming `name` and the line number."""
    quotes: list[Quote] = []
    seen: dict[tuple[str, str, str | None, str, str], int] = {}
    for number, row in csv_rows(text, name, COLUMNS, optional="[,basis]"):
        quote = _row(row, f"{name} line {number}")
        key = (quote.cloud, quote.region, quote.zone, quote.instance_type, quote.market)
        first = seen.setdefault(key, number)
        if first != number:
            raise BadInput(
                f"{name} line {number}: same cloud, region, zone, instance_type and market as "
                f"line {first} — keep one price per place and market"
            )
        quotes.append(quote)
    return tuple(quotes)


def _row(row: dict[str, str], where: str) -> Quote:
    cloud = row["cloud"]
    if cloud not in PUBLIC_CLOUDS:
        raise BadInput(f"{where}: cloud '{cloud}' is not one of {', '.join(PUBLIC_CLOUDS)}")
    for column in ("region", "instance_type"):
        if not row[column]:
            raise BadInput(f"{where}: {column} is empty")
    market = row["market"]
    if market not in MARKETS:
        raise BadInput(f"{where}: market '{market}' is not one of {', '.join(MARKETS)}")
    text = row["price_per_hour"]
    try:
        price = float(text)
    except ValueError:
        raise BadInput(f"{where}: price_per_hour '{text}' is not a number (USD per hour)") from None
    if not 0 < price < float("inf"):
        raise BadInput(f"{where}: price_per_hour must be a positive USD amount, got {text}")
    bucket = row["interruption_bucket"] or None
    if bucket is not None and bucket not in INTERRUPTION_BUCKETS:
        raise BadInput(
            f"{where}: interruption_bucket '{bucket}' is not one of "
            f"{', '.join(INTERRUPTION_BUCKETS)} (or empty)"
        )
    basis = row.get("basis", "")
    if basis and basis not in BASES:
        raise BadInput(f"{where}: basis '{basis}' is not one of {', '.join(BASES)}")
    return Quote(
        cloud=cloud,
        region=row["region"],
        zone=row["zone"] or None,
        instance_type=row["instance_type"],
        market=market,
        price_per_hour=price,
        source=SOURCE,
        observed_at=_timestamp(row["observed_at"], where),
        interruption_bucket=bucket,
    )


def _timestamp(text: str, where: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(
            f"{where}: observed_at '{text}' is not an ISO-8601 time (e.g. 2025-05-01T00:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        raise BadInput(f"{where}: observed_at '{text}' has no time zone — end it with Z (UTC)")
    return moment.astimezone(UTC)
