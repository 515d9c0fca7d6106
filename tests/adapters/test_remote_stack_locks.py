"""Pulumi's stack locks read on the shared backends without the engine: S3 (moto's server) under a
URL path prefix, PostgreSQL rows; an unreadable lock is shown as held and never cleared.

Key layout: pkg/backend/diy/lock.go (`stackLockDir`, `lockPath`); the URL's path as a key prefix:
backend.go (`blob.PrefixedBucket(bucket, bucketSubDir)`); PostgreSQL rows of `pulumi_state`, the
blob base64 in `{"data": …}`: pkg/backend/diy/postgres/bucket.go (`blobData`), schema.sql.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
from urllib.parse import urlsplit, urlunsplit

from router.engine.locks import stack_locks_for
from router.engine.records import pg_conninfo, s3_client_args
from router.engine.remote_locks import BlobStackLocks, bucket_prefix
from tests.backend_servers import SharedBackend

SCHEMA = """CREATE TABLE IF NOT EXISTS pulumi_state (key TEXT PRIMARY KEY, data JSON NOT NULL,
updated_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now())"""  # as Pulumi creates it


def _with_path(url: str, path: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=path))


def _put(url: str, key: str, body: bytes) -> None:
    if url.startswith("s3://"):
        import boto3

        bucket, _records, kwargs = s3_client_args(url)
        boto3.client("s3", **kwargs).put_object(Bucket=bucket, Key=key, Body=body)
        return
    import psycopg

    with psycopg.connect(pg_conninfo(url), autocommit=True) as conn:
        conn.execute(SCHEMA)
        doc = json.dumps({"data": base64.b64encode(body).decode()})
        conn.execute("INSERT INTO pulumi_state (key, data) VALUES (%s, %s::json)", (key, doc))


def test_locks_are_found_under_the_urls_prefix_and_a_dead_holders_is_removed(
    shared_backend: SharedBackend,
) -> None:
    url = shared_backend.url
    if url.startswith("s3://"):  # a team's prefix inside the bucket: s3://bucket/team
        url = _with_path(url, "/team")
        assert bucket_prefix(url) == "team/"
    else:  # the database name is the prefix on PostgreSQL
        assert bucket_prefix(url) == urlsplit(url).path.lstrip("/") + "/"
    root = f"{bucket_prefix(url)}.pulumi/locks/organization/spotroute/"
    gone = subprocess.Popen(["true"])
    gone.wait()
    lock = {"pid": gone.pid, "username": "ann", "hostname": socket.gethostname(),
            "timestamp": "2026-12-01T11:07:02.623634871Z"}  # fmt: skip
    _put(url, f"{root}train.2/a-b-c.json", json.dumps(lock).encode())
    _put(url, f"{root}train/d-e-f.json", b"{not json")
    _put(url, f"{root}train/history/x.json", b"{}")  # not a lock: deeper than a stack's folder
    _put(url, ".pulumi/locks/organization/spotroute/outside/g.json", b"{}")  # not this prefix

    reader = stack_locks_for(url, "spotroute")
    assert isinstance(reader, BlobStackLocks)
    assert reader.locked_stacks() == ["train", "train.2"]
    [unreadable] = reader.held("train")
    assert (unreadable.pid, unreadable.holder()) == (0, "?@? (pid 0)")
    assert not unreadable.provably_dead(hostname="?")
    [dead] = reader.held("train.2")
    assert dead.provably_dead() and dead.holder().endswith("since 2026-12-01 11:07:02 UTC")
    reader.remove(dead)
    assert reader.held("train.2") == [] and reader.locked_stacks() == ["train"]


def test_backends_without_a_reader_get_none() -> None:
    assert stack_locks_for("gs://bucket/state", "spotroute") is None
    assert stack_locks_for("azblob://container", "spotroute") is None
