"""`route bootstrap` input handling (the stack itself is tested under mocks in tests/components)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from router.flows.init import init_project


def _route(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "router", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "SPOTROUTE_HOME": str(home), "HOME": str(home)},
        timeout=120,
        check=False,
    )


def test_unknown_cloud_is_one_line_bad_input_and_the_stack_file_is_untouched(
    tmp_path: Path,
) -> None:
    project = tmp_path / "infra"
    init_project(project)
    result = _route(project, tmp_path / "home", "bootstrap", "--clouds", "aws,oracle", "--preview")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --clouds: unknown cloud 'oracle' — use one or more of aws, gcp, azure"
    ]
    assert not (project / "stacks" / "Pulumi.bootstrap.yaml").exists()


def test_applying_without_a_terminal_asks_for_yes(tmp_path: Path) -> None:
    project = tmp_path / "infra"
    init_project(project)
    result = _route(project, tmp_path / "home", "bootstrap", "--clouds", "aws")
    assert result.returncode == 2
    assert "--yes" in result.stderr and "Traceback" not in result.stderr
