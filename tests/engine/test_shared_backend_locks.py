"""Issue 24 item 4 on the shared backends: a lock a killed route left on a job's stack is cleared
on S3 (moto's server) and PostgreSQL as on file:// — stack deleted, or holder provably dead.

The locks are written where Pulumi's DIY backend writes them (pkg/backend/diy/lock.go:
`.pulumi/locks/organization/<project>/<stack>/<id>.json`; a URL's path is a key prefix,
backend.go `blob.PrefixedBucket`; PostgreSQL rows of `pulumi_state`, postgres/bucket.go), and the
real pulumi CLI is asked to confirm it sees them: its refresh refuses with "currently locked".
"""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from router.config.project import Project
from router.engine.automation import Backend, Engine
from router.engine.records import pg_conninfo, s3_client_args
from router.engine.remote_locks import bucket_prefix
from tests.backend_servers import SharedBackend

PASSPHRASE = "correct horse battery staple"  # the team's passphrase in this test
STAMP = "2026-12-01T11:07:02.623634871Z"  # as the Go CLI writes it (nanoseconds)


def _put(backend: SharedBackend, key: str, body: bytes) -> None:
    """Write one blob where the Pulumi CLI would (object, or row of the state table)."""
    if backend.url.startswith("s3://"):
        import boto3

        bucket, _records, kwargs = s3_client_args(backend.url)
        boto3.client("s3", **kwargs).put_object(Bucket=bucket, Key=key, Body=body)
        return
    import psycopg

    with psycopg.connect(pg_conninfo(backend.url), autocommit=True) as conn:
        # The blob base64-encoded in a JSON column (postgres/bucket.go `blobData`, schema.sql).
        doc = json.dumps({"data": base64.b64encode(body).decode()})
        conn.execute("INSERT INTO pulumi_state (key, data) VALUES (%s, %s::json)", (key, doc))


def _lock(backend: SharedBackend, stack: str, lock_id: str, pid: int, host: str) -> None:
    key = f"{bucket_prefix(backend.url)}.pulumi/locks/organization/spotroute/{stack}/{lock_id}.json"
    doc = {"pid": pid, "username": "ann", "hostname": host, "timestamp": STAMP}
    _put(backend, key, json.dumps(doc).encode())


@pytest.mark.engine
def test_stale_locks_on_a_shared_backend_are_cleared_and_live_ones_kept(
    tmp_path: Path, pulumi_cli: str, shared_backend: SharedBackend,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: spotroute\nruntime: yaml\n")
    env = {
        **os.environ, **shared_backend.env, "PULUMI_BACKEND_URL": shared_backend.url,
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE, "PULUMI_HOME": str(tmp_path / "pulumi-home"),
        "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
    }  # fmt: skip
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    def pulumi(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["pulumi", *args, "--non-interactive"], cwd=project, env=env,
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    for stack in ("shared", "shared.2"):
        assert pulumi("stack", "init", stack).returncode == 0
    assert pulumi("stack", "rm", "shared.2", "--yes").returncode == 0  # a move's old stack, gone

    gone = subprocess.Popen(["true"])
    gone.wait()
    here = socket.gethostname()
    _lock(shared_backend, "shared", "1-dead", gone.pid, here)  # a killed route's, on this host
    _lock(shared_backend, "shared", "2-elsewhere", 4242, "teammates-laptop")  # maybe deploying
    _lock(shared_backend, "shared.2", "3-old", 4242, "teammates-laptop")  # its stack is deleted
    _lock(shared_backend, "other", "4-other-job", gone.pid, here)  # another job's: left alone

    refused = pulumi("refresh", "--yes", "--skip-preview", "-s", "shared")
    assert refused.returncode != 0 and "currently locked by 2 lock(s)" in refused.stderr, refused

    engine = Engine(Project(project), tmp_path / "home", Backend(shared_backend.url, False))
    reader = engine.locks()
    assert reader is not None
    assert reader.locked_stacks() == ["other", "shared", "shared.2"]
    cleared = engine.clear_stale_locks("shared")
    assert sorted((lock.stack, lock.hostname, why) for lock, why in cleared) == [
        ("shared", here, "that process is gone"),
        ("shared.2", "teammates-laptop", "that stack was deleted"),
    ]
    [kept] = engine.held_locks("shared")
    assert kept.holder() == "ann@teammates-laptop (pid 4242) since 2026-12-01 11:07:02 UTC"
    assert reader.locked_stacks() == ["other", "shared"]

    # The CLI agrees: one lock left, the teammate's.
    still = pulumi("refresh", "--yes", "--skip-preview", "-s", "shared")
    assert "currently locked by 1 lock(s)" in still.stderr and "teammates-laptop" in still.stderr
    reader.remove(kept)
    assert pulumi("refresh", "--yes", "--skip-preview", "-s", "shared").returncode == 0
