"""SQLite cache of every price quote spotroute has seen, safe for several processes at once.

One row per quote as a source reported it; nothing is ever updated in place, so the cache
doubles as price history. `latest()` picks the newest quote per (cloud, region, zone,
instance type, market) whichever source reported it.

Concurrency, file ownership and timestamps: router/prices/sqlite_store.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.core.errors import BadInput
from router.core.offers import CLOCK_SKEW_TOLERANCE, Quote, clamp_future, quote_problem
from router.prices.sqlite_store import (
    SqliteStore,
    StoreKind,
    from_us,
    require_aware,
    to_us,
)

SCHEMA_VERSION = 1
# PRAGMA application_id marks the file as ours ("SPRT"), so a different SQLite database
# that happens to sit at the cache path is refused instead of having tables added to it.
APPLICATION_ID = 0x53505254
DEFAULT_BUSY_TIMEOUT_S = 10.0
_FIX = "move it away; spotroute will rebuild the cache"

_SCHEMA = (
    """
    CREATE TABLE quotes (
        id INTEGER PRIMARY KEY,
        cloud TEXT NOT NULL,
        region TEXT NOT NULL,
        zone TEXT NOT NULL DEFAULT '',
        instance_type TEXT NOT NULL,
        market TEXT NOT NULL,
        price_per_hour REAL NOT NULL,
        source TEXT NOT NULL,
        observed_at_us INTEGER NOT NULL,
        interruption_bucket TEXT,
        UNIQUE (cloud, region, zone, instance_type, market, source, observed_at_us)
    )
    """,
    "CREATE INDEX quotes_by_type ON quotes (cloud, instance_type, market, observed_at_us)",
    "CREATE INDEX quotes_by_source ON quotes (source, observed_at_us)",
)

_COLUMNS = (
    "cloud, region, zone, instance_type, market, price_per_hour, source, "
    "observed_at_us, interruption_bucket"
)
_ROW = tuple[str, str, str, str, str, float, str, int, str | None]
_KIND = StoreKind(
    what="price cache",
    application_id=APPLICATION_ID,
    schema_version=SCHEMA_VERSION,
    schema=_SCHEMA,
    fix=_FIX,
    open_error=BadInput,
)


class QuoteCache(SqliteStore):
    """Timestamped quotes in a SQLite file; open one per process (or thread) and close it."""

    def __init__(self, path: Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.refused = 0  # quotes add() would not store (see core.offers.quote_problem)
        super().__init__(path, _KIND, busy_timeout_s=busy_timeout_s)

    # -- writes ----------------------------------------------------------------------

    def add(self, quotes: Iterable[Quote], *, now: datetime | None = None) -> int:
        """Store quotes in one transaction; returns how many were new (re-adding is a no-op).

        Quotes that cannot be trusted (bad names, a price that is not a positive finite number)
        are not stored, and counted in `refused`; quotes dated in the future are stored as
        observed `now` (default: the current time), so they age like any other.
        """
        reference = require_aware(now or datetime.now(UTC), "now")
        rows = []
        for q in quotes:
            if quote_problem(q) is not None:
                self.refused += 1
                continue
            rows.append(_to_row(clamp_future(q, reference)))
        return self.insert_many(
            f"INSERT INTO quotes ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (cloud, region, zone, instance_type, market, source, "
            "observed_at_us) DO NOTHING",
            rows,
        )

    # -- reads -----------------------------------------------------------------------

    def latest(
        self,
        *,
        clouds: Iterable[str] | None = None,
        instance_types: Iterable[str] | None = None,
        markets: Iterable[str] | None = None,
        max_age_s: float | None = None,
        now: datetime | None = None,
        sources: Iterable[str] | None = None,
    ) -> list[Quote]:
        """Newest quote per (cloud, region, zone, instance_type, market), from any source
        (or from `sources` only: the newest of theirs, even where another source is newer).

        `max_age_s` drops places whose newest quote is older than that many seconds
        before `now` (default: the current time). Ties on observed_at go to the quote
        added last.
        """
        where: list[str] = []
        params: list[str | int] = []
        for column, values in (
            ("cloud", clouds),
            ("instance_type", instance_types),
            ("market", markets),
            ("source", sources),
        ):
            if values is None:
                continue
            wanted = _distinct(values)
            if not wanted:
                return []
            where.append(f"{column} IN ({', '.join('?' * len(wanted))})")
            params.extend(wanted)
        reference = require_aware(now or datetime.now(UTC), "now")
        if max_age_s is not None:
            where.append("observed_at_us >= ?")
            params.append(to_us(reference) - round(max_age_s * 1_000_000))
        condition = f"WHERE {' AND '.join(where)}" if where else ""
        sql = (
            f"SELECT {_COLUMNS} FROM ("
            f"  SELECT {_COLUMNS}, ROW_NUMBER() OVER ("
            "    PARTITION BY cloud, region, zone, instance_type, market"
            # A row dated in the future (written by a skewed clock) never hides a sane one.
            "    ORDER BY observed_at_us > ? ASC, observed_at_us DESC, id DESC) AS newest_first"
            f"  FROM quotes {condition}"
            ") WHERE newest_first = 1 "
            "ORDER BY cloud, instance_type, region, zone, market"
        )
        skew_us = to_us(reference + CLOCK_SKEW_TOLERANCE)
        rows = self.read(sql, [skew_us, *params])
        return [clamp_future(_to_quote(row, self.path), reference) for row in rows]

    def history(
        self,
        *,
        cloud: str,
        instance_type: str,
        region: str | None = None,
        market: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[Quote]:
        """Every stored quote for one instance type, oldest first; since/until are inclusive."""
        where = ["cloud = ?", "instance_type = ?"]
        params: list[str | int] = [cloud, instance_type]
        if region is not None:
            where.append("region = ?")
            params.append(region)
        if market is not None:
            where.append("market = ?")
            params.append(market)
        if since is not None:
            where.append("observed_at_us >= ?")
            params.append(to_us(require_aware(since, "since")))
        if until is not None:
            where.append("observed_at_us <= ?")
            params.append(to_us(require_aware(until, "until")))
        sql = (
            f"SELECT {_COLUMNS} FROM quotes WHERE {' AND '.join(where)} ORDER BY observed_at_us, id"
        )
        reference = datetime.now(UTC)
        rows = self.read(sql, params)
        return [clamp_future(_to_quote(row, self.path), reference) for row in rows]

    def sources(self) -> dict[str, tuple[int, datetime]]:
        """Per source: how many quotes are stored and when the newest was observed (UTC)."""
        rows = self.read(
            "SELECT source, COUNT(*), MAX(observed_at_us) FROM quotes "
            "GROUP BY source ORDER BY source",
            [],
        )
        out = {}
        for source, count, newest in rows:
            try:
                out[str(source)] = (int(count), from_us(int(newest)))
            except (TypeError, ValueError, OverflowError):
                raise BadInput(
                    f"{self.path.name}: a cached timestamp is out of range — {_FIX}"
                ) from None
        return out


def _distinct(values: Iterable[str]) -> list[str]:
    # A bare string is one value, not an iterable of characters.
    if isinstance(values, str):
        return [values]
    return list(dict.fromkeys(values))


def _to_row(quote: Quote) -> _ROW:
    observed_at = require_aware(quote.observed_at, "Quote.observed_at")
    return (
        quote.cloud,
        quote.region,
        quote.zone or "",
        quote.instance_type,
        quote.market,
        float(quote.price_per_hour),
        quote.source,
        to_us(observed_at),
        quote.interruption_bucket,
    )


def _to_quote(row: tuple[Any, ...], path: Path) -> Quote:
    """A cached row as a Quote, checked like a new one: a bad row is refused, never ranked."""
    cloud, region, zone, instance_type, market, price, source, observed_us, bucket = row
    where = f"{path.name}: a cached {str(cloud)[:10]!r} {str(instance_type)[:40]!r} quote"
    if isinstance(price, bool) or not isinstance(price, int | float):
        raise BadInput(f"{where} has a price that is not a number — {_FIX}")
    try:
        observed_at = from_us(int(observed_us))
    except (TypeError, ValueError, OverflowError):
        raise BadInput(f"{where} has a timestamp out of range — {_FIX}") from None
    quote = Quote(
        cloud=str(cloud),
        region=str(region),
        zone=str(zone) or None,
        instance_type=str(instance_type),
        market=str(market),
        price_per_hour=float(price),
        source=str(source),
        observed_at=observed_at,
        interruption_bucket=None if bucket is None else str(bucket),
    )
    problem = quote_problem(quote)
    if problem:
        raise BadInput(f"{where} cannot be trusted: {problem} — {_FIX}")
    return quote
