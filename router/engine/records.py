"""spotroute's own records (placements, decisions) in the same place as the Pulumi state.

Two engineers whose SPOTROUTE_HOMEs point at one shared backend see the same jobs, because
what `route status` reads next to the stacks lives in that backend too:

    file://PATH     PATH/.spotroute/<key>.json   (the default backend: $SPOTROUTE_HOME/<key>.json)
    s3://BUCKET/P   objects P/.spotroute/<key>.json, same endpoint and credentials as Pulumi
    postgres://...  rows of table spotroute_records in the database Pulumi uses

Every store also grants named exclusive locks that work across machines (`exclusive`): a
file lock, an S3 object written with If-None-Match (with expiry, renewed while held), or a
PostgreSQL advisory lock (released by the server when the holder's connection dies); and a
compare-and-set write (`get_versioned` + `put_if`, for leases that expire): under a file lock
comparing a content hash, an S3 conditional put (If-Match on the ETag / If-None-Match), or a
PostgreSQL UPDATE guarded by the row's xmin.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlencode, urlsplit, urlunsplit

from router.core.errors import BadInput, OperationFailed
from router.engine.lock_holders import holder_name, named_holder, text_or_empty

RECORDS_DIR = ".spotroute"
PG_TABLE = "spotroute_records"
# Advisory lock id under which first users create the table one at a time ("spotrout" in hex).
PG_CREATE_LOCK = 0x73706F74726F7574
LOCK_TTL_S = 900.0  # an S3 lock not renewed for this long belongs to a dead process
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_./:T+")


class Held(OperationFailed):
    """Another process holds the lock; `holder` says who and since when, where the store knows."""

    def __init__(self, message: str, *, holder: str = "another process") -> None:
        super().__init__(message)
        self.holder = holder


class RecordStore(Protocol):
    """JSON documents under slash-separated keys, plus cross-machine exclusive locks."""

    @property
    def where(self) -> str:
        """Where the records are, for messages (no password)."""
        ...

    def put(self, key: str, doc: Mapping[str, Any]) -> None: ...

    def get(self, key: str) -> dict[str, Any] | None: ...

    def list(self, prefix: str) -> dict[str, dict[str, Any]]:
        """Every record whose key starts with `prefix`, by key."""
        ...

    def delete(self, key: str) -> None: ...

    def exclusive(self, name: str) -> contextlib.AbstractContextManager[None]:
        """Hold lock `name` for the block; raises Held at once if another process holds it."""
        ...

    def keys(self, prefix: str) -> builtins.list[str]:
        """The keys that start with `prefix`, sorted (no documents read)."""
        ...

    def get_versioned(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        """The record and an opaque version of it (None, None when absent)."""
        ...

    def put_if(self, key: str, doc: Mapping[str, Any], version: str | None) -> str | None:
        """Write only if the record is still at `version` (None: only if absent).

        Returns the new version, or None when another writer got there first.
        """
        ...


def check_key(key: str) -> str:
    """Keys are plain: lowercase words, digits, '-', '_', '.', ':' between slashes."""
    parts = key.split("/")
    if not key or any(p in ("", ".", "..") for p in parts) or not set(key.lower()) <= _KEY_CHARS:
        raise ValueError(f"bad record key {key!r}")
    return key


def redacted(url: str) -> str:
    """The URL with any password replaced by ****."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:****@{netloc}"))


def _held(name: str, holder: object) -> Held:
    who = holder if isinstance(holder, str) and holder else "another process"
    return Held(f"{name} is held by {who}", holder=who)


def read_each(store: RecordStore, prefix: str) -> dict[str, dict[str, Any]]:
    """`store.list(prefix)`, one key at a time (a record deleted meanwhile is left out)."""
    out = {}
    for key in store.keys(prefix):
        doc = store.get(key)
        if doc is not None:
            out[key] = doc
    return out


# --- file:// -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileRecords:
    """Records as JSON files under `root`; locks are OS file locks (they die with the process)."""

    root: Path

    @property
    def where(self) -> str:
        return str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / f"{check_key(key)}.json"

    def put(self, key: str, doc: Mapping[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(json.dumps(doc, indent=2, default=str))
        os.replace(tmp, path)

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def list(self, prefix: str) -> dict[str, dict[str, Any]]:
        return read_each(self, prefix)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def keys(self, prefix: str) -> builtins.list[str]:
        base = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        if not base.is_dir():
            return []
        found = (p.relative_to(self.root).as_posix().removesuffix(".json")
                 for p in base.rglob("*.json") if not p.name.startswith("."))  # fmt: skip
        return sorted(k for k in found if k.startswith(prefix))

    def get_versioned(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        try:
            blob = self._path(key).read_bytes()
        except OSError:
            return None, None
        try:
            data = json.loads(blob)
        except ValueError:
            data = None
        return (data if isinstance(data, dict) else None), hashlib.sha256(blob).hexdigest()

    def put_if(self, key: str, doc: Mapping[str, Any], version: str | None) -> str | None:
        from filelock import FileLock

        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with FileLock(str(path.with_name(f".{path.name}.cas-lock"))):
            if self.get_versioned(key)[1] != version:
                return None
            blob = json.dumps(doc, indent=2, default=str).encode()
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
            with open(tmp, "wb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        return hashlib.sha256(blob).hexdigest()

    @contextlib.contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        from filelock import FileLock, Timeout

        locks = self.root / "locks"
        locks.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = FileLock(str(locks / f"{check_key(name)}.lock"), timeout=0)
        who = locks / f"{check_key(name)}.holder"  # advisory: the OS lock is what excludes
        try:
            lock.acquire()
        except Timeout:
            raise _held(name, named_holder(lambda: text_or_empty(who))) from None
        try:
            with contextlib.suppress(OSError):
                who.write_text(holder_name(), encoding="utf-8")
            yield
        finally:
            with contextlib.suppress(OSError):
                who.unlink()
            lock.release()


# --- s3:// ---------------------------------------------------------------------------------------


def s3_client_args(url: str) -> tuple[str, str, dict[str, Any]]:
    """(bucket, key prefix, boto3 client kwargs) for a Pulumi s3:// backend URL.

    Reads the URL the way Pulumi 3.274 does: `endpoint` (scheme-less means https unless
    disableSSL/disable_https=true), `region`, `s3ForcePathStyle`/`use_path_style`, `profile`.
    """
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    kwargs: dict[str, Any] = {}
    if query.get("region"):
        kwargs["region_name"] = query["region"]
    endpoint = query.get("endpoint", "")
    if endpoint:
        if "://" not in endpoint:
            plain = (query.get("disableSSL") or query.get("disable_https") or "").lower()
            endpoint = ("http://" if plain in ("true", "1") else "https://") + endpoint
        kwargs["endpoint_url"] = endpoint
    path_style = (query.get("s3ForcePathStyle") or query.get("use_path_style") or "").lower()
    if path_style in ("true", "1"):
        from botocore.config import Config

        kwargs["config"] = Config(s3={"addressing_style": "path"})
    if query.get("profile"):
        kwargs["profile"] = query["profile"]
    prefix = parts.path.strip("/")
    return parts.netloc, f"{prefix}/{RECORDS_DIR}/" if prefix else f"{RECORDS_DIR}/", kwargs


class S3Records:
    """Records as objects in the backend's bucket; locks are objects created with If-None-Match."""

    def __init__(self, url: str) -> None:
        import boto3

        self.url = url
        self.bucket, self.prefix, kwargs = s3_client_args(url)
        profile = kwargs.pop("profile", None)
        session = boto3.session.Session(profile_name=profile) if profile else boto3
        self._s3 = session.client("s3", **kwargs)

    @property
    def where(self) -> str:
        return redacted(self.url)

    def _key(self, key: str) -> str:
        return f"{self.prefix}{check_key(key)}.json"

    def _failed(self, what: str, exc: Exception) -> OperationFailed:
        return OperationFailed(f"cannot {what} on {self.where}: {exc}")

    def put(self, key: str, doc: Mapping[str, Any]) -> None:
        try:
            self._s3.put_object(
                Bucket=self.bucket,
                Key=self._key(key),
                Body=json.dumps(doc, indent=2, default=str).encode(),
                ContentType="application/json",
            )
        except Exception as exc:
            raise self._failed(f"write record {key}", exc) from None

    def get(self, key: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        try:
            body = self._s3.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._failed(f"read record {key}", exc) from None
        data = json.loads(body)
        return data if isinstance(data, dict) else None

    def list(self, prefix: str) -> dict[str, dict[str, Any]]:
        return read_each(self, prefix)

    def keys(self, prefix: str) -> builtins.list[str]:
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + prefix
            )
            names = [o["Key"] for page in pages for o in page.get("Contents", [])]
        except Exception as exc:
            raise self._failed(f"list records {prefix}", exc) from None
        found = (n.removeprefix(self.prefix).removesuffix(".json") for n in names)
        return sorted(k for k in found if not k.startswith("locks/"))

    def get_versioned(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        from botocore.exceptions import ClientError

        try:
            got = self._s3.get_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None, None
            raise self._failed(f"read record {key}", exc) from None
        try:
            data = json.loads(got["Body"].read())
        except ValueError:
            data = None
        return (data if isinstance(data, dict) else None), str(got["ETag"])

    def put_if(self, key: str, doc: Mapping[str, Any], version: str | None) -> str | None:
        from botocore.exceptions import ClientError

        condition = {"IfNoneMatch": "*"} if version is None else {"IfMatch": version}
        try:
            return str(
                self._s3.put_object(
                    Bucket=self.bucket,
                    Key=self._key(key),
                    Body=json.dumps(doc, indent=2, default=str).encode(),
                    ContentType="application/json",
                    **condition,
                )["ETag"]
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409",
                        "NoSuchKey", "404"):  # fmt: skip
                return None  # changed (or deleted) since it was read
            raise self._failed(f"write record {key}", exc) from None

    def delete(self, key: str) -> None:
        try:
            self._s3.delete_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:
            raise self._failed(f"delete record {key}", exc) from None

    @contextlib.contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        from botocore.exceptions import ClientError

        key = self._key(f"locks/{name}")
        holder = holder_name()

        def body() -> bytes:
            return json.dumps({"holder": holder, "expires_at": time.time() + LOCK_TTL_S}).encode()

        etag = self._create_lock(key, body, name)
        stop = threading.Event()
        current = [etag]

        def renew() -> None:  # keep a long deploy's lock from expiring under it
            while not stop.wait(LOCK_TTL_S / 3):
                with contextlib.suppress(ClientError):
                    current[0] = self._s3.put_object(
                        Bucket=self.bucket, Key=key, Body=body(), IfMatch=current[0]
                    )["ETag"]

        renewer = threading.Thread(target=renew, name=f"lock-{name}", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join(timeout=5)
            with contextlib.suppress(ClientError):
                self._s3.delete_object(Bucket=self.bucket, Key=key, IfMatch=current[0])

    def _create_lock(self, key: str, body: Any, name: str) -> str:
        from botocore.exceptions import ClientError

        for _ in range(2):
            try:
                return str(
                    self._s3.put_object(Bucket=self.bucket, Key=key, Body=body(), IfNoneMatch="*")[
                        "ETag"
                    ]
                )
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                if code not in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                    raise self._failed(f"take lock {name}", exc) from None
            try:  # held: by a live process, or by a dead one whose lock expired
                got = self._s3.get_object(Bucket=self.bucket, Key=key)
                lock = json.loads(got["Body"].read())
            except ClientError:
                continue  # released in between: try again
            if float(lock.get("expires_at", 0)) > time.time():
                raise _held(name, lock.get("holder"))
            with contextlib.suppress(ClientError):  # expired: take it over (only one can)
                self._s3.delete_object(Bucket=self.bucket, Key=key, IfMatch=got["ETag"])
        raise _held(name, "")


# --- postgres:// ---------------------------------------------------------------------------------


def pg_conninfo(url: str) -> str:
    """The libpq URI for a Pulumi postgres:// backend URL, without Pulumi's `table` parameter."""
    parts = urlsplit(url)
    query = [(k, v) for k, vs in parse_qs(parts.query).items() for v in vs if k != "table"]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _like_prefix(prefix: str) -> str:
    """A LIKE pattern matching keys that start with `prefix` (its %, _ and \\ taken literally)."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class PostgresRecords:
    """Records as rows of spotroute_records; locks are session advisory locks."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conninfo = pg_conninfo(url)
        self._ready = False

    @property
    def where(self) -> str:
        return redacted(self.url)

    @contextlib.contextmanager
    def _connect(self, what: str) -> Iterator[Any]:
        import psycopg

        try:
            with psycopg.connect(self._conninfo, connect_timeout=10, autocommit=True) as conn:
                if not self._ready:
                    # Two first users at once race in CREATE TABLE IF NOT EXISTS (PostgreSQL
                    # checks the catalog before it inserts): the loser gets a unique violation on
                    # the catalog or "relation … already exists", and the table exists anyway.
                    # So creators take turns under one advisory lock (the suppress is a fallback).
                    conn.execute("SELECT pg_advisory_lock(%s)", (PG_CREATE_LOCK,))
                    try:
                        with contextlib.suppress(
                            psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable
                        ):
                            conn.execute(
                                f"CREATE TABLE IF NOT EXISTS {PG_TABLE} (key TEXT PRIMARY KEY, "
                                "doc JSONB NOT NULL, updated_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                            )
                    finally:
                        conn.execute("SELECT pg_advisory_unlock(%s)", (PG_CREATE_LOCK,))
                    self._ready = True
                yield conn
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise OperationFailed(f"cannot {what} on {self.where}: {first}") from None

    def put(self, key: str, doc: Mapping[str, Any]) -> None:
        with self._connect(f"write record {key}") as conn:
            conn.execute(
                f"INSERT INTO {PG_TABLE} (key, doc) VALUES (%s, %s) ON CONFLICT (key) "
                "DO UPDATE SET doc = EXCLUDED.doc, updated_at = now()",
                (check_key(key), json.dumps(doc, default=str)),
            )

    def get(self, key: str) -> dict[str, Any] | None:
        with self._connect(f"read record {key}") as conn:
            row = conn.execute(
                f"SELECT doc FROM {PG_TABLE} WHERE key = %s", (check_key(key),)
            ).fetchone()
        return dict(row[0]) if row and isinstance(row[0], dict) else None

    def list(self, prefix: str) -> dict[str, dict[str, Any]]:
        pattern = _like_prefix(prefix)
        with self._connect(f"list records {prefix}") as conn:
            rows = conn.execute(
                f"SELECT key, doc FROM {PG_TABLE} WHERE key LIKE %s ORDER BY key", (pattern,)
            ).fetchall()
        return {str(k): dict(d) for k, d in rows if isinstance(d, dict)}

    def delete(self, key: str) -> None:
        with self._connect(f"delete record {key}") as conn:
            conn.execute(f"DELETE FROM {PG_TABLE} WHERE key = %s", (check_key(key),))

    def keys(self, prefix: str) -> builtins.list[str]:
        pattern = _like_prefix(prefix)
        with self._connect(f"list records {prefix}") as conn:
            rows = conn.execute(
                f"SELECT key FROM {PG_TABLE} WHERE key LIKE %s ORDER BY key", (pattern,)
            ).fetchall()
        return [str(r[0]) for r in rows]

    # A row's xmin is the id of the transaction that last wrote it: every UPDATE changes it, so
    # it serves as the record's version without a column of our own.
    def get_versioned(self, key: str) -> tuple[dict[str, Any] | None, str | None]:
        with self._connect(f"read record {key}") as conn:
            row = conn.execute(
                f"SELECT doc, xmin::text FROM {PG_TABLE} WHERE key = %s", (check_key(key),)
            ).fetchone()
        if not row:
            return None, None
        return (dict(row[0]) if isinstance(row[0], dict) else None), str(row[1])

    def put_if(self, key: str, doc: Mapping[str, Any], version: str | None) -> str | None:
        body = json.dumps(doc, default=str)
        with self._connect(f"write record {key}") as conn:
            if version is None:
                row = conn.execute(
                    f"INSERT INTO {PG_TABLE} (key, doc) VALUES (%s, %s) ON CONFLICT (key) "
                    "DO NOTHING RETURNING xmin::text",
                    (check_key(key), body),
                ).fetchone()
            else:
                row = conn.execute(
                    f"UPDATE {PG_TABLE} SET doc = %s, updated_at = now() "
                    "WHERE key = %s AND xmin::text = %s RETURNING xmin::text",
                    (body, check_key(key), version),
                ).fetchone()
        return str(row[0]) if row else None

    @contextlib.contextmanager
    def exclusive(self, name: str) -> Iterator[None]:
        digest = hashlib.sha256(f"spotroute:{name}".encode()).digest()
        lock_id = int.from_bytes(digest[:8], "big", signed=True)
        # The connection stays open while the lock is held: the server drops it if we die.
        with self._connect(f"take lock {name}") as conn:
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_id,)).fetchone()
            if not got or not got[0]:
                lock = f"locks/{name}"
                raise _held(name, named_holder(lambda: (self.get(lock) or {}).get("holder")))
            try:  # advisory: who holds it, for the next one's message (the session lock excludes)
                with contextlib.suppress(OperationFailed):
                    self.put(f"locks/{name}", {"holder": holder_name()})
                yield
            finally:
                with contextlib.suppress(Exception):
                    self.delete(f"locks/{name}")
                with contextlib.suppress(Exception):
                    conn.execute("SELECT pg_advisory_unlock(%s)", (lock_id,))


# --- choosing one --------------------------------------------------------------------------------


def records_for(backend_url: str, home: Path, *, is_default: bool) -> RecordStore:
    """The record store that lives with the Pulumi state at `backend_url`."""
    if is_default:
        return FileRecords(home)  # $SPOTROUTE_HOME/placements/<job>.json, as before
    scheme = backend_url.split("://", 1)[0]
    if scheme == "file":
        return FileRecords(Path(unquote(urlsplit(backend_url).path)) / RECORDS_DIR)
    if scheme == "s3":
        return S3Records(backend_url)
    if scheme == "postgres":
        return PostgresRecords(backend_url)
    raise BadInput(
        f"backend_url: spotroute keeps its records on file://, s3:// and postgres:// backends, "
        f"not {scheme}:// yet — use one of those"
    )


def now_key() -> str:
    """A key part that sorts by time and never collides: 2026-12-01T10:00:00.123456+00:00-ab12."""
    return f"{datetime.now(UTC).isoformat()}-{uuid.uuid4().hex[:8]}"


# --- decision history ----------------------------------------------------------------------------


def record_decision(records: RecordStore, job: str, decision: Mapping[str, Any]) -> str:
    """Append a decision (move, stay, re-place; the numbers compared) to the job's history."""
    key = f"decisions/{job}/{now_key()}"
    records.put(key, decision)
    return key


def decision_history(records: RecordStore, job: str) -> list[dict[str, Any]]:
    """The job's decisions, oldest first (keys sort by time)."""
    return [doc for _key, doc in sorted(records.list(f"decisions/{job}/").items())]
