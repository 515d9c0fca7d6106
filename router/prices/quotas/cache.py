"""SQLite cache of quota readings and failed launches, next to the price cache.

Same conventions as router/prices/cache.py: rows are only ever added (the table doubles as
history), WAL journal, every write one `BEGIN IMMEDIATE` transaction, a busy timeout, and an
application id ("SPRQ") so a foreign SQLite file at the path is refused, never altered.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from router.core.errors import OperationFailed
from router.core.quotas import LaunchFailure, QuotaReading

SCHEMA_VERSION = 1
APPLICATION_ID = 0x53505251  # "SPRQ"
CACHE_FILE_NAME = "quotas.sqlite3"
DEFAULT_BUSY_TIMEOUT_S = 10.0

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)
_FIX = "move it away; spotroute will rebuild it with `route quotas refresh`"
_SCHEMA = (
    """
    CREATE TABLE readings (
        id INTEGER PRIMARY KEY,
        cloud TEXT NOT NULL,
        region TEXT NOT NULL,
        quota TEXT NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        unit TEXT NOT NULL DEFAULT '',
        quota_limit REAL NOT NULL,
        usage REAL NOT NULL,
        source TEXT NOT NULL,
        observed_at_us INTEGER NOT NULL,
        UNIQUE (cloud, region, quota, source, observed_at_us)
    )
    """,
    "CREATE INDEX readings_by_place ON readings (cloud, region, quota, observed_at_us)",
    """
    CREATE TABLE failures (
        id INTEGER PRIMARY KEY,
        cloud TEXT NOT NULL,
        region TEXT NOT NULL,
        quota TEXT NOT NULL,
        instance_type TEXT NOT NULL,
        market TEXT NOT NULL,
        needed REAL NOT NULL,
        message TEXT NOT NULL DEFAULT '',
        observed_at_us INTEGER NOT NULL
    )
    """,
)
_READING_COLUMNS = "cloud, region, quota, name, unit, quota_limit, usage, source, observed_at_us"
_FAILURE_COLUMNS = "cloud, region, quota, instance_type, market, needed, message, observed_at_us"


def default_path(home: Path) -> Path:
    """The quota cache inside spotroute's home directory."""
    return home / CACHE_FILE_NAME


class QuotaCache:
    """Quota readings and launch failures in one SQLite file; open one per process and close it."""

    def __init__(self, path: Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        _refuse_foreign_file(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(self.path), timeout=busy_timeout_s, isolation_level=None
            )
        except (OSError, sqlite3.Error) as err:
            raise OperationFailed(
                f"cannot open quota cache {self.path}: {err}; check the directory is writable"
            ) from err
        try:
            self._prepare(busy_timeout_s)
        except BaseException:
            self._conn.close()
            raise

    def __enter__(self) -> QuotaCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; safe to call twice."""
        self._conn.close()

    # -- writes ----------------------------------------------------------------------

    def add(self, readings: Iterable[QuotaReading]) -> int:
        """Store readings in one transaction; returns how many were new."""
        rows = [
            (
                r.cloud,
                r.region,
                r.quota,
                r.name,
                r.unit,
                float(r.limit),
                float(r.usage),
                r.source,
                _to_us(r.observed_at),
            )
            for r in readings
        ]
        return self._write(
            f"INSERT INTO readings ({_READING_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (cloud, region, quota, source, observed_at_us) DO NOTHING",
            rows,
        )

    def add_failures(self, failures: Iterable[LaunchFailure]) -> int:
        """Record launches that failed on a quota; returns how many were stored."""
        rows = [
            (
                f.cloud,
                f.region,
                f.quota,
                f.instance_type,
                f.market,
                float(f.needed),
                f.message,
                _to_us(f.observed_at),
            )
            for f in failures
        ]
        return self._write(
            f"INSERT INTO failures ({_FAILURE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
        )

    # -- reads -----------------------------------------------------------------------

    def latest(self, clouds: Sequence[str] | None = None) -> list[QuotaReading]:
        """The newest reading per (cloud, region, quota), sorted by cloud, region, quota."""
        where, params = _clouds_filter(clouds)
        rows = self._read(
            f"SELECT {_READING_COLUMNS} FROM ("
            f"  SELECT {_READING_COLUMNS}, ROW_NUMBER() OVER ("
            "    PARTITION BY cloud, region, quota ORDER BY observed_at_us DESC, id DESC) AS n"
            f"  FROM readings {where}"
            ") WHERE n = 1 ORDER BY cloud, region, quota",
            params,
        )
        return [
            QuotaReading(
                cloud=str(cloud),
                region=str(region),
                quota=str(quota),
                name=str(name),
                unit=str(unit),
                limit=float(limit),
                usage=float(usage),
                source=str(source),
                observed_at=_from_us(int(observed)),
            )
            for cloud, region, quota, name, unit, limit, usage, source, observed in rows
        ]

    def failures(self, clouds: Sequence[str] | None = None) -> list[LaunchFailure]:
        """Every recorded launch failure, oldest first."""
        where, params = _clouds_filter(clouds)
        rows = self._read(
            f"SELECT {_FAILURE_COLUMNS} FROM failures {where} ORDER BY observed_at_us, id", params
        )
        return [
            LaunchFailure(
                cloud=str(cloud),
                region=str(region),
                quota=str(quota),
                instance_type=str(instance_type),
                market=str(market),
                needed=float(needed),
                message=str(message),
                observed_at=_from_us(int(observed)),
            )
            for cloud, region, quota, instance_type, market, needed, message, observed in rows
        ]

    # -- plumbing --------------------------------------------------------------------

    def _prepare(self, busy_timeout_s: float) -> None:
        version = self._pragma("user_version")
        if version > SCHEMA_VERSION:
            raise OperationFailed(
                f"quota cache {self.path} was written by a newer spotroute (schema v{version}); "
                f"upgrade spotroute, or {_FIX}"
            )
        if version > 0 and self._pragma("application_id") != APPLICATION_ID:
            raise OperationFailed(f"{self.path} is a SQLite database but not a quota cache; {_FIX}")
        if version == 0 and self._read(
            "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' LIMIT 1", []
        ):
            version = self._pragma("user_version")
            if version == 0 or self._pragma("application_id") != APPLICATION_ID:
                raise OperationFailed(
                    f"{self.path} is a SQLite database with other tables, not a quota cache; {_FIX}"
                )
        with self._errors():
            self._conn.execute("PRAGMA journal_mode=WAL").fetchall()
            self._conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        if version == 0:
            with self._errors():
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    # Re-checked inside the write lock: another process may have created it.
                    if int(self._conn.execute("PRAGMA user_version").fetchone()[0]) == 0:
                        for statement in _SCHEMA:
                            self._conn.execute(statement)
                        self._conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                        self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                    self._conn.execute("COMMIT")
                except BaseException:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise

    def _pragma(self, name: str) -> int:
        rows = self._read(f"PRAGMA {name}", [])
        return int(rows[0][0]) if rows else 0

    def _read(self, sql: str, params: Sequence[str | int]) -> list[tuple[Any, ...]]:
        with self._errors():
            return self._conn.execute(sql, params).fetchall()

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> int:
        if not rows:
            return 0
        with self._errors():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                before = self._conn.total_changes
                self._conn.executemany(sql, rows)
                count = self._conn.total_changes - before
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        return count

    def _errors(self) -> _TranslatedErrors:
        return _TranslatedErrors(self.path)


class _TranslatedErrors:
    """sqlite3 errors → one-line OperationFailed naming the file and the fix."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None or not isinstance(exc, sqlite3.Error):
            return
        text = str(exc).lower()
        if "locked" in text or "busy" in text:
            message = f"quota cache {self.path} stayed locked by another process; retry"
        elif isinstance(exc, sqlite3.DatabaseError) and (
            "not a database" in text or "malformed" in text or "corrupt" in text
        ):
            message = f"quota cache {self.path} is unreadable ({exc}); {_FIX}"
        else:
            message = f"quota cache {self.path}: {exc}; check permissions and free disk space"
        raise OperationFailed(message) from exc


def _refuse_foreign_file(path: Path) -> None:
    if path.is_dir():
        raise OperationFailed(f"quota cache path {path} is a directory; {_FIX}")
    try:
        with path.open("rb") as handle:
            header = handle.read(16)
    except FileNotFoundError:
        return
    except OSError as err:
        raise OperationFailed(
            f"cannot read quota cache {path}: {err.strerror or err}; check its permissions"
        ) from err
    if header and header != b"SQLite format 3\x00":
        raise OperationFailed(f"quota cache {path} is not a SQLite database; {_FIX}")


def _clouds_filter(clouds: Sequence[str] | None) -> tuple[str, list[str | int]]:
    if clouds is None:
        return "", []
    wanted = list(dict.fromkeys(clouds))
    if not wanted:
        return "WHERE 0", []
    return f"WHERE cloud IN ({', '.join('?' * len(wanted))})", list(wanted)


def _to_us(moment: datetime) -> int:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"quota timestamps must be timezone-aware, got naive {moment!r}")
    return (moment - _EPOCH) // _ONE_US


def _from_us(epoch_us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=epoch_us)
