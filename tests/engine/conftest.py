"""Engine tests: the real `route` CLI driving the real Pulumi CLI against the local target.

Every test gets its own project directory (the repo's Pulumi.yaml minus `main`, an empty
stacks/), its own SPOTROUTE_HOME and PULUMI_HOME, and runs `python -m router ...` as a subprocess
with the project as working directory: exactly what a user runs. Whatever a test leaves running
is stopped by the `route` fixture's finalizer, even when the test fails.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.engine.engine_cli import REPO, Route


@pytest.fixture(scope="session")
def pulumi_cli() -> str:
    """The pulumi CLI and the Python plugin shims on PATH; a failure (never a skip) without them."""
    missing = [
        name
        for name in ("pulumi", "pulumi-resource-pulumi-python", "pulumi-analyzer-policy-python")
        if shutil.which(name) is None
    ]
    if missing:
        pytest.fail(
            f"engine tests need {', '.join(missing)} on PATH — run `bash scripts/ensure-pulumi.sh` "
            "and put the directory `bash scripts/ensure-pulumi.sh --print-dir` prints first on "
            "PATH (`make engine` does both)",
            pytrace=False,
        )
    return str(shutil.which("pulumi"))


def _project_file() -> str:
    """The repo's Pulumi.yaml without `main`: the router runs its program inline, and the engine
    refuses a project whose `main` directory (components/) does not exist."""
    doc = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    doc.pop("main", None)
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.fixture
def route(tmp_path: Path, pulumi_cli: str) -> Iterator[Route]:
    """A fresh spotroute project + SPOTROUTE_HOME; everything deployed is torn down afterwards."""
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text(_project_file())
    r = Route(project, tmp_path / "home", tmp_path / "pulumi-home")
    try:
        yield r
    finally:
        r.cleanup()
        print("route calls:", ", ".join(f"{cmd} {s:.1f}s" for cmd, s in r.timings))


from tests.backend_servers import (  # noqa: E402, F401  (fixtures for the shared-backend tests)
    moto_endpoint,
    postgres_backend,
    postgres_cluster,
    s3_backend,
    shared_backend,
)
