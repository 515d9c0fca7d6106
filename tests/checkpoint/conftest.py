"""Fixtures for the checkpoint library: storage servers on 127.0.0.1, small torch models."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from servers import STARTERS, StorageServer, Store

_counter = itertools.count()


_servers: dict[str, StorageServer] = {}


def _server(kind: str) -> StorageServer:
    if kind not in _servers:
        _servers[kind] = STARTERS[kind]()
    return _servers[kind]


@pytest.fixture(scope="session", autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    for server in _servers.values():
        server.stop()


def make_store(kind: str, tmp_path: Path) -> Store:
    if kind == "file":
        return Store("file", f"file://{tmp_path}/ckpt", {}, {})
    server = _server(kind)
    return Store(kind, f"{server.url}/t{next(_counter)}-{tmp_path.name}", server.storage_options,
                 server.env)


@pytest.fixture(params=["file", "s3", "gcs", "azure"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    return make_store(request.param, tmp_path)


@pytest.fixture
def local_store(tmp_path: Path) -> Store:
    return make_store("file", tmp_path)


@pytest.fixture
def every_store(tmp_path: Path) -> list[Store]:
    """A store on each storage, for a test that visits them all from one interpreter."""
    return [make_store(kind, tmp_path) for kind in ("file", "s3", "gcs", "azure")]
