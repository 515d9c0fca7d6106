"""One of spotroute's SQLite files (price cache, quota cache), safe for several processes at once.

Concurrency: WAL journal (readers never block the writer), every write is one
`BEGIN IMMEDIATE` transaction (the write lock is taken up front, so a transaction never has
to upgrade from read to write and hit SQLITE_BUSY without waiting), a busy timeout, and a
bounded retry with jitter for the few places SQLite reports "database is locked" without
waiting (WAL recovery, switching the journal mode on a brand-new file).

Ownership: PRAGMA application_id marks the file as ours, so a different SQLite database (or
any other file) at the path is refused, never altered; a newer schema is refused too.
Timestamps are stored as integer microseconds since the Unix epoch (exact round trips).
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from router.core.errors import OperationFailed, RouteError

LOCK_RETRIES = 6
_FIRST_RETRY_DELAY_S = 0.05
_SQLITE_MAGIC = b"SQLite format 3\x00"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)
_T = TypeVar("_T")


@dataclass(frozen=True)
class StoreKind:
    """Which of spotroute's files a store is, and how its messages name it and the fix."""

    what: str  # "price cache": every message names the file by it
    application_id: int
    schema_version: int
    schema: tuple[str, ...]  # CREATE statements of version `schema_version`
    fix: str  # what to do with a file that cannot be used, e.g. "move it away; …"
    open_error: type[RouteError] = OperationFailed  # the file cannot be opened at all


class SqliteStore:
    """A connection to one store file; open one per process (or thread) and close it.

    The caches subclass it with their kind and their rows' reads and writes.
    """

    def __init__(self, path: Path, kind: StoreKind, *, busy_timeout_s: float) -> None:
        self.path = Path(path)
        self.kind = kind
        self._busy_timeout_s = busy_timeout_s
        _refuse_foreign_file(self.path, kind)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(self.path), timeout=busy_timeout_s, isolation_level=None
            )
        except (OSError, sqlite3.Error) as err:
            raise kind.open_error(
                f"cannot open {kind.what} {self.path}: {err}; check the directory exists "
                "and is writable"
            ) from None
        try:
            self._prepare()
        except BaseException:
            self._conn.close()
            raise

    def __enter__(self) -> Self:
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

    def read(self, sql: str, params: Sequence[str | int]) -> list[tuple[Any, ...]]:
        """The rows of one query."""
        with self._translated_errors():
            return self._retrying(lambda: self._conn.execute(sql, params).fetchall())

    def write(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run `work` in one BEGIN IMMEDIATE transaction (rolled back if it raises)."""
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

    def insert_many(self, sql: str, rows: Sequence[tuple[Any, ...]]) -> int:
        """Insert rows in one transaction; returns how many were new (conflicts are no-ops)."""
        if not rows:
            return 0

        def insert(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            conn.executemany(sql, rows)
            return conn.total_changes - before

        return self.write(insert)

    # -- plumbing --------------------------------------------------------------------

    def _prepare(self) -> None:
        """Check the file is ours (read-only), then switch to WAL and create the schema."""
        kind, fix = self.kind, self.kind.fix
        version = self._pragma_int("user_version")
        if version > kind.schema_version:
            raise OperationFailed(
                f"{kind.what} {self.path} was written by a newer spotroute (schema "
                f"v{version}, this one reads up to v{kind.schema_version}); upgrade spotroute, "
                f"or {fix}"
            )
        if version > 0 and self._pragma_int("application_id") != kind.application_id:
            raise OperationFailed(
                f"{self.path} is a SQLite database but not a spotroute {kind.what}; {fix}"
            )
        if version == 0 and self.read(
            "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' LIMIT 1", []
        ):
            # Either someone else's database, or another spotroute process created the
            # schema between our two reads: only the second carries our markers now.
            version = self._pragma_int("user_version")
            if version == 0 or self._pragma_int("application_id") != kind.application_id:
                raise OperationFailed(
                    f"{self.path} is a SQLite database with other tables, not a spotroute "
                    f"{kind.what}; {fix}"
                )
        with self._translated_errors():
            self._retrying(lambda: self._conn.execute("PRAGMA journal_mode=WAL").fetchall())
            self._conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_s * 1000)}")
            # NORMAL is durable against crashes in WAL mode; only a power cut can lose
            # the last transactions, which a later refresh re-creates.
            self._conn.execute("PRAGMA synchronous=NORMAL")
        if version == 0:
            self.write(self._create_schema)

    def _create_schema(self, conn: sqlite3.Connection) -> None:
        # Re-checked inside the write lock: another process may have created it meanwhile.
        if int(conn.execute("PRAGMA user_version").fetchone()[0]) != 0:
            return
        for statement in self.kind.schema:
            conn.execute(statement)
        conn.execute(f"PRAGMA application_id={self.kind.application_id}")
        conn.execute(f"PRAGMA user_version={self.kind.schema_version}")

    def _pragma_int(self, name: str) -> int:
        rows = self.read(f"PRAGMA {name}", [])
        return int(rows[0][0]) if rows else 0

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
        what = f"{self.kind.what} {self.path}"
        try:
            yield
        except sqlite3.OperationalError as err:
            if _is_lock_error(err):
                raise OperationFailed(
                    f"{what} stayed locked by another process; retry, or stop the other "
                    "`route` command"
                ) from err
            if _is_corruption(err):
                raise OperationFailed(f"{what} is unreadable ({err}); {self.kind.fix}") from err
            raise OperationFailed(f"{what}: {err}; check permissions and free disk space") from err
        except sqlite3.DatabaseError as err:
            raise OperationFailed(f"{what} is unreadable ({err}); {self.kind.fix}") from err


def _refuse_foreign_file(path: Path, kind: StoreKind) -> None:
    """Fail before SQLite touches a path that holds something other than a SQLite file."""
    if path.is_dir():
        raise OperationFailed(f"{kind.what} path {path} is a directory; {kind.fix}")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(_SQLITE_MAGIC))
    except FileNotFoundError:
        return
    except OSError as err:
        raise OperationFailed(
            f"cannot read {kind.what} {path}: {err.strerror or err}; check its permissions"
        ) from err
    # An empty file is a valid empty database to SQLite; anything else must carry the magic.
    if header and header != _SQLITE_MAGIC:
        raise OperationFailed(f"{kind.what} {path} is not a SQLite database; {kind.fix}")


def _is_lock_error(err: sqlite3.OperationalError) -> bool:
    text = str(err).lower()
    return "locked" in text or "busy" in text


def _is_corruption(err: sqlite3.DatabaseError) -> bool:
    text = str(err).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


def require_aware(moment: datetime, name: str) -> datetime:
    """`moment` itself; ValueError naming `name` if it is naive."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {moment!r}")
    return moment


def to_us(moment: datetime) -> int:
    """Microseconds since the Unix epoch; integer arithmetic, so round trips are exact."""
    return (moment - _EPOCH) // _ONE_US


def from_us(epoch_us: int) -> datetime:
    """The UTC datetime of microseconds since the Unix epoch."""
    return _EPOCH + timedelta(microseconds=epoch_us)
