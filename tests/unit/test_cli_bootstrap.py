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


def _bootstrap_file(project: Path, **keys: object) -> None:
    import yaml

    config = {f"spotroute-bootstrap:{k}": v for k, v in
              {"clouds": ["gcp"], "home": "gcp", "gcpProjectId": "acme-ml", **keys}.items()}
    (project / "stacks" / "Pulumi.bootstrap.yaml").write_text(yaml.safe_dump({"config": config}))


def test_the_bootstrap_says_the_gcp_project_is_to_be_spotroutes_alone_before_it_asks(
    tmp_path: Path,
) -> None:
    import os
    import pty

    project = tmp_path / "infra"
    init_project(project)
    _bootstrap_file(project)
    primary, secondary = pty.openpty()  # a terminal to confirm on
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "router", "bootstrap"], cwd=project, stdin=secondary,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={"PATH": "/usr/bin:/bin", "SPOTROUTE_HOME": str(tmp_path / "home"),
                 "HOME": str(tmp_path / "home"), "COLUMNS": "400",
                 "PYTHONPATH": str(Path(__file__).resolve().parents[2])})  # fmt: skip
        os.write(primary, b"n\n")  # decline: nothing is created
        out, err = run.communicate(timeout=120)
    finally:
        os.close(primary)
        os.close(secondary)

    assert run.returncode == 1 and "Create or update the bootstrap identities?" in out
    assert "note: GCP project acme-ml is to be spotroute's alone (the default)" in err
    assert "gcloud iam service-accounts disable" in err and "Traceback" not in err


def test_a_shared_gcp_project_is_a_warning_naming_what_the_deployer_reaches(tmp_path: Path) -> None:
    from router.config.project import Project
    from router.flows.bootstrap import bootstrap_scope

    project = tmp_path / "infra"
    init_project(project)
    _bootstrap_file(project, gcpProjectShared=True)

    [note] = bootstrap_scope(Project(project))
    assert note.warning and "GCP project acme-ml is shared" in note.text
    assert "any of its service accounts" in note.text and "any of its networks" in note.text
    assert bootstrap_scope(Project(project), ("aws",)) == []  # --clouds aws: no GCP project
