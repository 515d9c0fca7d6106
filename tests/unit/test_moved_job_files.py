"""Issue 24 round 2, item 2: after a move the job lives in stack `<job>.2`, and its reviewed
stack file is `stacks/Pulumi.<job>.2.yaml` (the move removes the old stack's file). `route plan
--write`, `route review JOB` and shell completion act on that file."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.config.home import spotroute_home
from router.config.project import Project
from router.config.stack_files import read_stack_file
from router.core.journal import newest_stack
from router.core.placement import placement_site
from router.engine.records import FileRecords
from router.flows.live_placement import placement_key
from router.flows.plan import plan_job
from router.flows.proposals import propose
from tests.unit.cli_harness import EXAMPLES, FIXED_NOW, isolate, route
from tests.unit.test_cli_completion import complete

JOB = "llm-finetune"
JOB_FILE = EXAMPLES / "llm-finetune.yaml"
MOVED = f"stacks/Pulumi.{JOB}.2.yaml"


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    isolate(monkeypatch, tmp_path)
    Path("Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    Path("stacks").mkdir()
    return Path.cwd()


def _moved(project: Path) -> dict[str, Any]:
    """The placement record a move leaves (stack `<job>.2`, at the second-best site)."""
    site = placement_site(plan_job(JOB_FILE, project=Project(project), now=FIXED_NOW)
                          .result.placements[1])  # fmt: skip
    FileRecords(spotroute_home()).put(
        placement_key(JOB), {"job": JOB, **site, "stack": f"{JOB}.2", "outputs": {}}
    )
    return site


def test_plan_write_of_a_moved_job_writes_its_live_stacks_file_at_its_site(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _moved(project)
    run = route(monkeypatch, capsys, "plan", JOB_FILE, "--write")
    assert run.code == 0, run
    assert not (project / "stacks" / f"Pulumi.{JOB}.yaml").exists()  # no second placement's file
    deploy = propose(JOB_FILE, project=Project(project), now=FIXED_NOW, allow_stale=True,
                     records=FileRecords(spotroute_home()))  # fmt: skip
    assert deploy.stack_name == f"{JOB}.2"
    assert read_stack_file(project / MOVED) == deploy.config  # what deploy would write there
    assert f"wrote {MOVED} for review" in run.out
    assert f"next: commit {MOVED}, then `route review {JOB} --against main`" in run.out


def test_plan_write_without_records_writes_the_newest_stack_file_of_the_job(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A teammate's clone: the move's file came with git, the placement record is elsewhere.
    (project / MOVED).write_text("config: {}\n")
    assert route(monkeypatch, capsys, "plan", JOB_FILE, "--write").code == 0
    assert not (project / "stacks" / f"Pulumi.{JOB}.yaml").exists()
    assert read_stack_file(project / MOVED)["cloud"]


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(project), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", *args], check=True, capture_output=True)  # fmt: skip


def test_review_of_a_moved_job_reads_its_live_stack_file_and_compares_with_its_file_then(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert route(monkeypatch, capsys, "plan", JOB_FILE, "--write").code == 0
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "placed")
    _git(project, "checkout", "-q", "-b", "moved")
    # The move: the job lives in `<job>.2` (same config here), its first stack's file removed.
    _moved(project)
    _git(project, "mv", f"stacks/Pulumi.{JOB}.yaml", MOVED)
    _git(project, "commit", "-qm", "moved")
    run = route(monkeypatch, capsys, "review", JOB, "--against", "main", "--format", "json")
    assert run.code == 0, run  # unchanged grants: not "everything is new", exit 3
    review = run.json()
    assert review["stack"] == f"{JOB}.2"
    assert not any("does not exist" in n for n in review["notes"]), review["notes"]


def test_completion_offers_a_moved_job_by_its_name(project: Path) -> None:
    (project / MOVED).write_text("config: {}\n")
    (project / "stacks" / "Pulumi.eval.yaml").write_text("config: {}\n")
    assert complete("status ") == ["eval", JOB]
    assert complete("review ll") == [JOB]


@given(st.sets(st.integers(min_value=2, max_value=10**6), max_size=6), st.booleans())
def test_the_newest_stack_of_a_job_is_its_highest_numbered_placement(
    numbers: set[int], first: bool
) -> None:
    stacks = [f"{JOB}.{n}" for n in numbers] + ([JOB] if first else [])
    stacks += ["other.99", f"{JOB}x.7", f"{JOB}.bak"]  # another job's, never this one's
    want = f"{JOB}.{max(numbers)}" if numbers else (JOB if first else None)
    assert newest_stack(JOB, stacks) == want
