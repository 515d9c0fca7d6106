"""Real state-backend servers on 127.0.0.1 for the shared-backend tests (session fixtures).

- `s3_backend`: moto's S3 server (ThreadedMotoServer, in this process) with a fresh bucket per
  test; the backend URL is what a team would write: s3://BUCKET?endpoint=...&s3ForcePathStyle=true.
- `postgres_backend`: a private PostgreSQL cluster (initdb + pg_ctl in a temp directory, password
  auth, its own port) and a fresh database per test; postgres://user:pass@127.0.0.1:PORT/DB.

The server programs come from scripts/ensure-postgres.sh (`make setup` installs them). A test that
needs a server and cannot start one fails with the reason; it never skips.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PG_USER = "spotroute"
PG_PASSWORD = "team-secret"  # a throwaway cluster's password, not a real secret
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass(frozen=True)
class SharedBackend:
    """One backend URL and the environment a process needs to use it (credentials)."""

    url: str
    env: dict[str, str]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- S3 (moto) -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_backend(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> SharedBackend:
    import boto3

    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    bucket = f"state-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=f"http://{moto_endpoint}").create_bucket(Bucket=bucket)
    url = (
        f"s3://{bucket}?endpoint={moto_endpoint}&disableSSL=true&s3ForcePathStyle=true"
        "&region=us-east-1"
    )
    return SharedBackend(url, dict(S3_ENV))


# --- PostgreSQL --------------------------------------------------------------------------------


def _pg_bin() -> Path:
    try:
        out = subprocess.run(
            ["bash", str(REPO / "scripts" / "ensure-postgres.sh"), "--print-dir"],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        ).stdout.strip()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"no PostgreSQL server programs: {exc} — run `make setup`", pytrace=False)
    return Path(out)


@dataclass(frozen=True)
class PostgresCluster:
    port: int
    bin: Path
    run_as: str | None

    def psql(self, sql: str, db: str = "postgres") -> None:
        subprocess.run(
            [str(self.bin / "psql"), "-q", "-v", "ON_ERROR_STOP=1", "-c", sql,
             f"postgresql://{PG_USER}:{PG_PASSWORD}@127.0.0.1:{self.port}/{db}"],
            check=True, capture_output=True, text=True, timeout=60,
        )


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    bin_dir = _pg_bin()
    # initdb and postgres refuse to run as root: use the package's `postgres` account then.
    run_as = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.fail("running as root and there is no `postgres` user to run the server as",
                        pytrace=False)
        run_as = "postgres"
    root = Path(tempfile.mkdtemp(prefix="spotroute-pg-"))
    data, pwfile = root / "data", root / "pwfile"
    pwfile.write_text(PG_PASSWORD + "\n")
    if run_as:
        entry = pwd.getpwnam(run_as)
        os.chown(root, entry.pw_uid, entry.pw_gid)
        os.chown(pwfile, entry.pw_uid, entry.pw_gid)
    prefix = ["runuser", "-u", run_as, "--"] if run_as else []
    port = free_port()

    def run(*args: str) -> None:
        proc = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            pytest.fail(f"{' '.join(args[:2])} failed: {proc.stderr.strip()[-800:]}",
                        pytrace=False)

    run(str(bin_dir / "initdb"), "-D", str(data), "-U", PG_USER, f"--pwfile={pwfile}",
        "--auth=scram-sha-256", "-E", "UTF8", "--no-sync")
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w",
        "-o", f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off -c max_connections=100",
        "start")
    try:
        yield PostgresCluster(port, bin_dir, run_as)
    finally:
        with contextlib.suppress(Exception):
            subprocess.run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                            "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_backend(postgres_cluster: PostgresCluster) -> SharedBackend:
    db = f"state_{uuid.uuid4().hex[:12]}"
    postgres_cluster.psql(f"CREATE DATABASE {db}")
    url = (
        f"postgres://{PG_USER}:{PG_PASSWORD}@127.0.0.1:{postgres_cluster.port}/{db}"
        "?sslmode=disable"
    )
    return SharedBackend(url, {})


@pytest.fixture(params=["s3", "postgres"])
def shared_backend(request: pytest.FixtureRequest) -> SharedBackend:
    """Each test using this runs once on S3 and once on PostgreSQL."""
    name = "s3_backend" if request.param == "s3" else "postgres_backend"
    backend: SharedBackend = request.getfixturevalue(name)
    return backend
