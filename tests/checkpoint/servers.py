"""Real storage servers on 127.0.0.1 for the checkpoint tests and benchmarks.

S3: moto's server mode (`python -m moto.server`), GCS: fake-gcs-server (Go), Azure Blob: Azurite
(npm), installed by scripts/ensure-test-servers.sh. Each runs as a child process on a free port
and is stopped by its owner. The fsspec clients (s3fs, gcsfs, adlfs) talk to them over HTTP.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SERVERS_DIR = Path(
    os.environ.get("SPOTROUTE_TEST_SERVERS_DIR", Path.home() / ".cache/spotroute/test-servers")
)
FAKE_GCS = SERVERS_DIR / "bin" / "fake-gcs-server"
AZURITE_BLOB = SERVERS_DIR / "node_modules" / ".bin" / "azurite-blob"
# Azurite's fixed development account (documented, public).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
BUCKET = "spotroute-ckpt"
MOTO_READ_TIMEOUT_S = 600  # see start_s3
# gcsfs >= 2025.x asks the gRPC Storage Control API whether a bucket is hierarchical/zonal first;
# fake-gcs-server speaks only the JSON API, so each first access would wait out a 60 s timeout.
# Must be set before gcsfs is imported.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class StorageServer:
    """A running server: its kind, the URL root tests write under and fsspec storage options."""

    kind: str
    url: str
    storage_options: dict[str, Any]
    process: subprocess.Popen[bytes] | None = None
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # the same settings as environment

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _wait_http(url: str, process: subprocess.Popen[bytes], log: Path,
               timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: server exited with {process.returncode}: "
                               f"{log.read_text()[-2000:]}")
        try:
            opener.open(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # it answered: up
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url}: server did not answer within {timeout_s} s: "
                       f"{log.read_text()[-2000:]}")


def _spawn(command: list[str], workdir: str, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = Path(workdir) / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    with open(log, "wb") as output:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            command, cwd=workdir, stdout=output, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env,
        )
    return process, log


def start_s3() -> StorageServer:
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="moto-")
    process, log = _spawn([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                          workdir, "moto")
    endpoint = f"http://127.0.0.1:{port}"
    _wait_http(endpoint + "/", process, log)
    # s3fs waits 15 s for an answer, then botocore retries. moto's CompleteMultipartUpload
    # concatenates every part in Python (11 s for 1 GB on an idle core, more under load) and does
    # not survive a retry arriving while it runs: the first request closes the parts' buffers and
    # the others fail with "seek of closed file" → HTTP 500, "reached max retries: 4". Real S3
    # sends whitespace while it completes, so only a server like this needs the longer timeout.
    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-west-2"},
               "config_kwargs": {"read_timeout": MOTO_READ_TIMEOUT_S}}
    server = StorageServer("s3", f"s3://{BUCKET}", options, process, workdir, env={
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-west-2"})
    _make_bucket(server)
    return server


def start_gcs() -> StorageServer:
    if not FAKE_GCS.exists():
        raise RuntimeError(f"{FAKE_GCS} is missing — run `bash scripts/ensure-test-servers.sh`")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="fake-gcs-")
    endpoint = f"http://127.0.0.1:{port}"
    process, log = _spawn([str(FAKE_GCS), "-scheme", "http", "-host", "127.0.0.1", "-port",
                           str(port), "-backend", "memory", "-public-host", f"127.0.0.1:{port}",
                           "-external-url", endpoint, "-log-level", "error"], workdir, "fake-gcs")
    _wait_http(endpoint + "/storage/v1/b", process, log)
    options = {"endpoint_url": endpoint, "token": "anon"}
    server = StorageServer("gcs", f"gs://{BUCKET}", options, process, workdir,
                           env={"STORAGE_EMULATOR_HOST": endpoint})
    _make_bucket(server)
    return server


def azurite_connection_string(port: int) -> str:
    return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};")


def start_azure() -> StorageServer:
    if not AZURITE_BLOB.exists():
        raise RuntimeError(f"{AZURITE_BLOB} is missing — run `bash scripts/ensure-test-servers.sh`")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="azurite-")
    process, log = _spawn([str(AZURITE_BLOB), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                           "--location", workdir, "--silent", "--disableTelemetry",
                           "--skipApiVersionCheck", "--loose"], workdir, "azurite")
    _wait_http(f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}?comp=list", process, log)
    connection = azurite_connection_string(port)
    options = {"account_name": AZURITE_ACCOUNT, "connection_string": connection}
    server = StorageServer("azure", f"az://{BUCKET}", options, process, workdir,
                           env={"AZURE_STORAGE_CONNECTION_STRING": connection,
                                "AZURE_STORAGE_ACCOUNT_NAME": AZURITE_ACCOUNT})
    _make_bucket(server)
    return server


def _make_bucket(server: StorageServer) -> None:
    import fsspec.core

    fs, path = fsspec.core.url_to_fs(server.url, **server.storage_options)
    fs.mkdir(path)


STARTERS = {"s3": start_s3, "gcs": start_gcs, "azure": start_azure}


class Store:
    """Where one test writes: a fresh URL under a server (or a temp dir), with its options."""

    def __init__(self, kind: str, url: str, storage_options: dict[str, Any],
                 env: dict[str, str]) -> None:
        self.kind, self.url, self.storage_options, self.env = kind, url, storage_options, env

    def fs_path(self, *parts: str) -> tuple[Any, str]:
        import fsspec.core

        fs, root = fsspec.core.url_to_fs(self.url, **self.storage_options)
        return fs, "/".join([root.rstrip("/"), *parts])

    def names(self, *parts: str) -> list[str]:
        """The names in a directory under the store (sorted; [] when there is none), listed
        afresh."""
        fs, root = self.fs_path(*parts)
        fs.invalidate_cache()
        try:
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False))
        except FileNotFoundError:
            return []

    def flip_bit(self, *parts: str) -> None:
        """Flip one bit in the middle of a stored file: damage at rest."""
        fs, path = self.fs_path(*parts)
        data = bytearray(fs.cat_file(path))
        data[len(data) // 2] ^= 0x01
        fs.pipe_file(path, bytes(data))


# One server of each kind per test process, started when a test first asks for it.
_counter = itertools.count()
_servers: dict[str, StorageServer] = {}


def make_store(kind: str, tmp_path: Path) -> Store:
    """A fresh store of `kind` ("file", "s3", "gcs", "azure") for one test."""
    if kind == "file":
        return Store("file", f"file://{tmp_path}/ckpt", {}, {})
    if kind not in _servers:
        _servers[kind] = STARTERS[kind]()
    server = _servers[kind]
    return Store(kind, f"{server.url}/t{next(_counter)}-{tmp_path.name}", server.storage_options,
                 server.env)


def stop_servers() -> None:
    """Stop the servers make_store started (at the end of the test session)."""
    for server in _servers.values():
        server.stop()
    _servers.clear()
