"""Stack locks on the shared backends: S3 objects and PostgreSQL rows, same keys as file://.

Pulumi's DIY backend keeps every backend as a gocloud blob bucket and writes a running update's
lock at `.pulumi/locks/organization/<project>/<stack>/<lock id>.json` in it (pkg/backend/diy/
lock.go: `stackLockDir`, `lockPath`). A URL's path is a key prefix on every scheme but file://
(backend.go: `blob.PrefixedBucket(bucket, bucketSubDir)`): `s3://bucket/team` keys start with
`team/`, and on `postgres://…/dbname` with `dbname/`. The PostgreSQL driver stores each blob as a
row of table `pulumi_state` (or the URL's `table` parameter): the key, and the blob base64-encoded
in a JSON column, `{"data": "…"}` (pkg/backend/diy/postgres/bucket.go `blobData`, schema.sql).

The rule is the file:// one (router.engine.locks): a lock is stale when its stack was deleted or
its holder provably died. A holder is only provably dead on the host it ran on, so on a shared
backend a lock another machine left on a stack that still exists is never cleared here: wait for
it, or `route unlock` after checking that machine.
"""

from __future__ import annotations

import base64
import builtins
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from router.core.errors import OperationFailed
from router.engine.locks import StackLock, parse_lock
from router.engine.records import pg_conninfo, redacted, s3_client_args

LOCKS_PREFIX = ".pulumi/locks/organization/"
PG_STATE_TABLE = "pulumi_state"  # the driver's default table name


class LockBlobs(Protocol):
    """The few blob operations lock reading needs."""

    def keys(self, prefix: str) -> builtins.list[str]: ...

    def read(self, key: str) -> bytes | None: ...

    def delete(self, key: str) -> None: ...


def bucket_prefix(url: str) -> str:
    """The key prefix Pulumi gives a non-file backend URL: its path, plus `/` (or nothing)."""
    sub = urlsplit(url).path.lstrip("/")
    return sub if not sub or sub.endswith("/") else sub + "/"


@dataclass(frozen=True)
class BlobStackLocks:
    """Locks of one Pulumi project on a blob backend (S3 or PostgreSQL)."""

    blobs: LockBlobs
    root: str  # `<url prefix>.pulumi/locks/organization/<project>/`

    def held(self, stack: str) -> list[StackLock]:
        directory = f"{self.root}{stack}/"
        names = [
            k for k in self.blobs.keys(directory)
            if k.endswith(".json") and "/" not in k[len(directory) :]
        ]  # fmt: skip
        return [parse_lock(stack, self.blobs.read(k), k) for k in sorted(names)]

    def locked_stacks(self) -> list[str]:
        """Every stack with a lock, including stacks removed since (their locks stay)."""
        stacks = {
            rest.split("/", 1)[0]
            for k in self.blobs.keys(self.root)
            if (rest := k[len(self.root) :]).count("/") == 1 and rest.endswith(".json")
        }
        return sorted(stacks)

    def remove(self, lock: StackLock) -> None:
        self.blobs.delete(lock.key)


class S3LockBlobs:
    """The state bucket of an s3:// backend, with the endpoint and credentials Pulumi uses."""

    def __init__(self, url: str) -> None:
        import boto3

        self.url = url
        self.bucket, _records, kwargs = s3_client_args(url)
        profile = kwargs.pop("profile", None)
        session = boto3.session.Session(profile_name=profile) if profile else boto3
        self._s3 = session.client("s3", **kwargs)

    def keys(self, prefix: str) -> builtins.list[str]:
        try:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix
            )
            return [o["Key"] for page in pages for o in page.get("Contents", [])]
        except Exception:  # unreadable: no lock is cleared (the CLI still names it)
            return []

    def read(self, key: str) -> bytes | None:
        try:
            body: bytes = self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception:
            return None
        return body

    def delete(self, key: str) -> None:
        try:
            self._s3.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            raise OperationFailed(
                f"cannot remove the lock {key} on {redacted(self.url)}: {exc}"
            ) from None


class PostgresLockBlobs:
    """The state table of a postgres:// backend (one row per blob)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conninfo = pg_conninfo(url)
        table = parse_qs(urlsplit(url).query).get("table", [""])[-1]
        self.table = table or PG_STATE_TABLE

    def _run(self, sql: str, args: tuple[Any, ...]) -> builtins.list[tuple[Any, ...]]:
        import psycopg
        from psycopg import sql as pgsql

        query = pgsql.SQL(sql).format(pgsql.Identifier(*self.table.split(".")))
        with psycopg.connect(self._conninfo, connect_timeout=10, autocommit=True) as conn:
            cur = conn.execute(query, args)
            return cur.fetchall() if cur.description else []

    def keys(self, prefix: str) -> builtins.list[str]:
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        try:
            return [str(r[0]) for r in self._run("SELECT key FROM {} WHERE key LIKE %s", (like,))]
        except Exception:  # no table yet (no stack ever), or unreachable: nothing to clear
            return []

    def read(self, key: str) -> bytes | None:
        try:
            rows = self._run("SELECT data FROM {} WHERE key = %s", (key,))
        except Exception:
            return None
        if not rows:
            return None
        data = rows[0][0]  # {"data": "<base64 of the blob>"} (`blobData`; psycopg parses JSON)
        if isinstance(data, bytes | memoryview):  # BYTEA, the driver's first release
            return bytes(data)
        try:
            return base64.b64decode(data["data"], validate=True)
        except (TypeError, KeyError, ValueError):
            return None  # unreadable: shown as a lock of unknown holder, never cleared

    def delete(self, key: str) -> None:
        try:
            self._run("DELETE FROM {} WHERE key = %s", (key,))
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise OperationFailed(
                f"cannot remove the lock {key} on {redacted(self.url)}: {first}"
            ) from None


def remote_stack_locks(backend_url: str, project: str) -> BlobStackLocks | None:
    """The lock reader of an s3:// or postgres:// backend; None for other schemes."""
    scheme = backend_url.split("://", 1)[0]
    blobs: LockBlobs
    if scheme == "s3":
        blobs = S3LockBlobs(backend_url)
    elif scheme == "postgres":
        blobs = PostgresLockBlobs(backend_url)
    else:
        return None
    return BlobStackLocks(blobs, f"{bucket_prefix(backend_url)}{LOCKS_PREFIX}{project}/")
