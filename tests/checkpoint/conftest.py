"""Fixtures for the checkpoint library: storage servers on 127.0.0.1, small torch models."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from servers import Store, make_store, stop_servers


@pytest.fixture(scope="session", autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    stop_servers()


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
