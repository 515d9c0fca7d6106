"""SQLite cache of every price quote spotroute has seen, safe for several processes at once.

One row per quote as a source reported it; nothing is ever updated in place, so the cache
doubles as price history. `latest()` picks the newest quote per (cloud, region, zone,
instance type, market) whichever source reported it.

Concurrency: WAL journal (readers never block the writer), every write is one
`BEGIN IMMEDIATE` transaction (the write lock is taken up front, so a transaction never has
to upgrade from read to write and hit SQLITE_BUSY without waiting), a busy timeout, and a
bounded retry with jitter for the few places SQLite reports "database is locked" without
waiting (WAL recovery, switching the journal mode on a brand-new file).
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from router.core.errors import BadInput, OperationFailed
from router.core.offers import CLOCK_SKEW_TOLERANCE, Quote, clamp_future, quote_problem

SCHEMA_VERSION = 1
# PRAGMA application_id marks the file as ours ("SPRT"), so a different SQLite database
# that happens to sit at the cache path is refused instead of having tables added to it.
APPLICATION_ID = 0x53505254
DEFAULT_BUSY_TIMEOUT_S = 10.0
LOCK_RETRIES = 6
_FIRST_RETRY_DELAY_S = 0.05

_SQLITE_MAGIC = b"SQLite format 3\x00"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)
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
_T = TypeVar("_T")


class QuoteCache:
    """Timestamped quotes in a SQLite file; open one per process (or thread) and close it."""

    def __init__(self, path: Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self._busy_timeout_s = busy_timeout_s
        self.refused = 0  # quotes add() would not store (see core.offers.quote_problem)
        _refuse_foreign_file(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(self.path), timeout=busy_timeout_s, isolation_level=None
            )
        except (OSError, sqlite3.Error) as err:
            raise BadInput(
                f"cannot open price cache {self.path}: {err}; check the directory exists "
                "and is writable"
            ) from None
        try:
            self._prepare()
        except BaseException:
            self._conn.close()
            raise

    # -- context manager -------------------------------------------------------------

    def __enter__(self) -> QuoteCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the database connection; safe to call twice."""
        self._conn.close()

    # -- writes ----------------------------------------------------------------------

    def add(self, quotes: Iterable[Quote], *, now: datetime | None = None) -> int:
        """Store quotes in one transaction; returns how many were new (re-adding is a no-op).

        Quotes that cannot be trusted (bad names, a price that is not a positive finite number)
        are not stored, and counted in `refused`; quotes dated in the future are stored as
        observed `now` (default: the current time), so they age like any other.
        """
        reference = _require_aware(now or datetime.now(UTC), "now")
        rows = []
        for q in quotes:
            if quote_problem(q) is not None:
                self.refused += 1
                continue
            rows.append(_to_row(clamp_future(q, reference)))
        if not rows:
            return 0

        def insert(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            conn.executemany(
                f"INSERT INTO quotes ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (cloud, region, zone, instance_type, market, source, "
                "observed_at_us) DO NOTHING",
                rows,
            )
            return conn.total_changes - before

        return self._write(insert)

    # -- reads -----------------------------------------------------------------------

    def latest(
        self,
        *,
        clouds: Iterable[str] | None = None,
        instance_types: Iterable[str] | None = None,
        markets: Iterable[str] | None = None,
        max_age_s: float | None = None,
        now: datetime | None = None,
    ) -> list[Quote]:
        """Newest quote per (cloud, region, zone, instance_type, market), from any source.

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
        ):
            if values is None:
                continue
            wanted = _distinct(values)
            if not wanted:
                return []
            where.append(f"{column} IN ({', '.join('?' * len(wanted))})")
            params.extend(wanted)
        reference = _require_aware(now or datetime.now(UTC), "now")
        if max_age_s is not None:
            where.append("observed_at_us >= ?")
            params.append(_to_us(reference) - round(max_age_s * 1_000_000))
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
        skew_us = _to_us(reference + CLOCK_SKEW_TOLERANCE)
        rows = self._read(sql, [skew_us, *params])
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
            params.append(_to_us(_require_aware(since, "since")))
        if until is not None:
            where.append("observed_at_us <= ?")
            params.append(_to_us(_require_aware(until, "until")))
        sql = (
            f"SELECT {_COLUMNS} FROM quotes WHERE {' AND '.join(where)} ORDER BY observed_at_us, id"
        )
        reference = datetime.now(UTC)
        rows = self._read(sql, params)
        return [clamp_future(_to_quote(row, self.path), reference) for row in rows]

    def sources(self) -> dict[str, tuple[int, datetime]]:
        """Per source: how many quotes are stored and when the newest was observed (UTC)."""
        rows = self._read(
            "SELECT source, COUNT(*), MAX(observed_at_us) FROM quotes "
            "GROUP BY source ORDER BY source",
            [],
        )
        out = {}
        for source, count, newest in rows:
            try:
                out[str(source)] = (int(count), _from_us(int(newest)))
            except (TypeError, ValueError, OverflowError):
                raise BadInput(
                    f"{self.path.name}: a cached timestamp is out of range — {_FIX}"
                ) from None
        return out

    # -- plumbing --------------------------------------------------------------------

    def _prepare(self) -> None:
        """Check the file is ours (read-only), then switch to WAL and create the schema."""
        version = self._pragma_int("user_version")
        if version > SCHEMA_VERSION:
            raise OperationFailed(
                f"price cache {self.path} was written by a newer spotroute (schema "
                f"v{version}, this one reads up to v{SCHEMA_VERSION}); upgrade spotroute, "
                f"or {_FIX}"
            )
        if version > 0 and self._pragma_int("application_id") != APPLICATION_ID:
            raise OperationFailed(
                f"{self.path} is a SQLite database but not a spotroute price cache; {_FIX}"
            )
        if version == 0 and self._read(
            "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' LIMIT 1", []
        ):
            # Either someone else's database, or another spotroute process created the
            # schema between our two reads: only the second carries our markers now.
            version = self._pragma_int("user_version")
            if version == 0 or self._pragma_int("application_id") != APPLICATION_ID:
                raise OperationFailed(
                    f"{self.path} is a SQLite database with other tables, not a spotroute "
                    f"price cache; {_FIX}"
                )
        with self._translated_errors():
            self._retrying(lambda: self._conn.execute("PRAGMA journal_mode=WAL").fetchall())
            self._conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_s * 1000)}")
            # NORMAL is durable against crashes in WAL mode; only a power cut can lose
            # the last transactions, which a later price refresh re-creates.
            self._conn.execute("PRAGMA synchronous=NORMAL")
        if version == 0:
            self._write(_create_schema)

    def _pragma_int(self, name: str) -> int:
        rows = self._read(f"PRAGMA {name}", [])
        return int(rows[0][0]) if rows else 0

    def _read(self, sql: str, params: list[str | int]) -> list[tuple[Any, ...]]:
        with self._translated_errors():
            return self._retrying(lambda: self._conn.execute(sql, params).fetchall())

    def _write(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        conn = self._conn

        def transaction() -> _T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

        with self._translated_errors():
            return self._retrying(transaction)

    def _retrying(self, attempt: Callable[[], _T]) -> _T:
        delay_s = _FIRST_RETRY_DELAY_S
        for remaining in range(LOCK_RETRIES - 1, -1, -1):
            try:
                return attempt()
            except sqlite3.OperationalError as err:
                if remaining == 0 or not _is_lock_error(err):
                    raise
                time.sleep(delay_s * (1.0 + random.random()))
                delay_s *= 2
        raise AssertionError("unreachable: the last attempt returns or raises")

    @contextmanager
    def _translated_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as err:
            if _is_lock_error(err):
                raise OperationFailed(
                    f"price cache {self.path} stayed locked by another process; retry, or "
                    "stop the other `route` command"
                ) from err
            if _is_corruption(err):
                raise OperationFailed(
                    f"price cache {self.path} is unreadable ({err}); {_FIX}"
                ) from err
            raise OperationFailed(
                f"price cache {self.path}: {err}; check permissions and free disk space"
            ) from err
        except sqlite3.DatabaseError as err:
            raise OperationFailed(f"price cache {self.path} is unreadable ({err}); {_FIX}") from err


def _create_schema(conn: sqlite3.Connection) -> None:
    # Re-checked inside the write lock: another process may have created it meanwhile.
    if int(conn.execute("PRAGMA user_version").fetchone()[0]) != 0:
        return
    for statement in _SCHEMA:
        conn.execute(statement)
    conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def _refuse_foreign_file(path: Path) -> None:
    """Fail before SQLite touches a path that holds something other than a SQLite file."""
    if path.is_dir():
        raise OperationFailed(f"price cache path {path} is a directory; {_FIX}")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        return
    except OSError as err:
        raise OperationFailed(
            f"cannot read price cache {path}: {err.strerror or err}; check its permissions"
        ) from err
    # An empty file is a valid empty database to SQLite; anything else must carry the magic.
    if header and header != _SQLITE_MAGIC:
        raise OperationFailed(f"price cache {path} is not a SQLite database; {_FIX}")


def _is_lock_error(err: sqlite3.OperationalError) -> bool:
    text = str(err).lower()
    return "locked" in text or "busy" in text


def _is_corruption(err: sqlite3.DatabaseError) -> bool:
    text = str(err).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


def _distinct(values: Iterable[str]) -> list[str]:
    # A bare string is one value, not an iterable of characters.
    if isinstance(values, str):
        return [values]
    return list(dict.fromkeys(values))


def _require_aware(moment: datetime, name: str) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {moment!r}")
    return moment


def _to_us(moment: datetime) -> int:
    """Microseconds since the Unix epoch; integer arithmetic, so round trips are exact."""
    return (moment - _EPOCH) // _ONE_US


def _from_us(epoch_us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=epoch_us)


def _to_row(quote: Quote) -> _ROW:
    observed_at = _require_aware(quote.observed_at, "Quote.observed_at")
    return (
        quote.cloud,
        quote.region,
        quote.zone or "",
        quote.instance_type,
        quote.market,
        float(quote.price_per_hour),
        quote.source,
        _to_us(observed_at),
        quote.interruption_bucket,
    )


def _to_quote(row: tuple[Any, ...], path: Path) -> Quote:
    """A cached row as a Quote, checked like a new one: a bad row is refused, never ranked."""
    cloud, region, zone, instance_type, market, price, source, observed_us, bucket = row
    where = f"{path.name}: a cached {str(cloud)[:10]!r} {str(instance_type)[:40]!r} quote"
    if isinstance(price, bool) or not isinstance(price, int | float):
        raise BadInput(f"{where} has a price that is not a number — {_FIX}")
    try:
        observed_at = _from_us(int(observed_us))
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
