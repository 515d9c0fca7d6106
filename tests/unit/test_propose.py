"""`route deploy` before the engine: picking the placement (`--to`) and the config it writes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.config.project import Project
from router.core.errors import OperationFailed
from router.flows.init import init_project
from router.flows.jobs import propose

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "examples" / "llm-finetune.yaml"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    (tmp_path / "infra" / "Pulumi.yaml").parent.mkdir()
    (tmp_path / "infra" / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    return Project(tmp_path / "infra")


def test_without_to_the_best_placement_is_chosen_and_its_config_is_new(project: Project) -> None:
    proposal = propose(JOB, project=project, now=NOW)
    assert proposal.config["cloud"] == proposal.chosen.cloud
    assert proposal.stack_file == project.root / "stacks" / "Pulumi.llm-finetune.yaml"
    assert all(line.startswith("+ ") for line in proposal.config_diff)


def test_to_a_cloud_or_region_picks_the_best_placement_there(project: Project) -> None:
    in_gcp = propose(JOB, project=project, now=NOW, to="gcp")
    assert in_gcp.chosen.cloud == "gcp" and in_gcp.config["cloud"] == "gcp"
    in_region = propose(JOB, project=project, now=NOW, to="gcp/europe-west4")
    assert (in_region.chosen.cloud, in_region.chosen.region) == ("gcp", "europe-west4")
    assert in_region.chosen.total_cost >= in_gcp.chosen.total_cost


def test_to_a_place_nothing_fits_is_one_line_pointing_at_explain(project: Project) -> None:
    with pytest.raises(OperationFailed) as err:
        propose(JOB, project=project, now=NOW, to="aws/mars-1")
    assert "in aws/mars-1" in err.value.message and "--explain" in err.value.message


def test_a_scaffolded_project_proposes_its_own_example_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    init_project(tmp_path / "infra")
    proposal = propose(
        tmp_path / "infra" / "jobs" / "hello-gpu.yaml", project=Project(tmp_path / "infra"), now=NOW
    )
    assert proposal.chosen.cloud == "local" and proposal.config["maxPrice"] == 0
