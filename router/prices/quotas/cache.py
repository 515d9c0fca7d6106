"""SQLite cache of quota readings and failed launches, next to the price cache.

Same conventions as router/prices/cache.py: rows are only ever added (the table doubles as
history); concurrency, file ownership (application id "SPRQ") and timestamps are
router/prices/sqlite_store.py's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

from router.core.quotas import LaunchFailure, QuotaReading
from router.prices.sqlite_store import SqliteStore, StoreKind, from_us, require_aware, to_us

SCHEMA_VERSION = 1
APPLICATION_ID = 0x53505251  # "SPRQ"
CACHE_FILE_NAME = "quotas.sqlite3"
DEFAULT_BUSY_TIMEOUT_S = 10.0

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
_KIND = StoreKind(
    what="quota cache",
    application_id=APPLICATION_ID,
    schema_version=SCHEMA_VERSION,
    schema=_SCHEMA,
    fix=_FIX,
)


def default_path(home: Path) -> Path:
    """The quota cache inside spotroute's home directory."""
    return home / CACHE_FILE_NAME


class QuotaCache(SqliteStore):
    """Quota readings and launch failures in one SQLite file; open one per process and close it."""

    def __init__(self, path: Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        super().__init__(path, _KIND, busy_timeout_s=busy_timeout_s)

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
        return self.insert_many(
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
        return self.insert_many(
            f"INSERT INTO failures ({_FAILURE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
        )

    # -- reads -----------------------------------------------------------------------

    def latest(self, clouds: Sequence[str] | None = None) -> list[QuotaReading]:
        """The newest reading per (cloud, region, quota), sorted by cloud, region, quota."""
        where, params = _clouds_filter(clouds)
        rows = self.read(
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
                observed_at=from_us(int(observed)),
            )
            for cloud, region, quota, name, unit, limit, usage, source, observed in rows
        ]

    def failures(self, clouds: Sequence[str] | None = None) -> list[LaunchFailure]:
        """Every recorded launch failure, oldest first."""
        where, params = _clouds_filter(clouds)
        rows = self.read(
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
                observed_at=from_us(int(observed)),
            )
            for cloud, region, quota, instance_type, market, needed, message, observed in rows
        ]


def _clouds_filter(clouds: Sequence[str] | None) -> tuple[str, list[str | int]]:
    if clouds is None:
        return "", []
    wanted = list(dict.fromkeys(clouds))
    if not wanted:
        return "WHERE 0", []
    return f"WHERE cloud IN ({', '.join('?' * len(wanted))})", list(wanted)


def _to_us(moment: datetime) -> int:
    return to_us(require_aware(moment, "quota timestamps"))
