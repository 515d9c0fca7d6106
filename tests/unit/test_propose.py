"""`route deploy` before the engine: picking the placement (`--to`) and the config it writes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.config.home import cache_path
from router.config.project import Project
from router.core.errors import OperationFailed
from router.core.offers import Quote
from router.flows.init import init_project
from router.flows.proposals import propose
from router.prices.book import RefreshOutcome
from router.prices.cache import QuoteCache
from tests.unit.projects import infra_project

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "examples" / "llm-finetune.yaml"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    return infra_project(tmp_path, monkeypatch)


def test_without_to_the_best_placement_is_chosen_and_its_config_is_new(project: Project) -> None:
    proposal = propose(JOB, project=project, now=NOW, allow_stale=True)
    assert proposal.config["cloud"] == proposal.chosen.cloud
    assert proposal.stack_file == project.root / "stacks" / "Pulumi.llm-finetune.yaml"
    assert all(line.startswith("+ ") for line in proposal.config_diff)


def test_to_a_cloud_or_region_picks_the_best_placement_there(project: Project) -> None:
    in_gcp = propose(JOB, project=project, now=NOW, to="gcp", allow_stale=True)
    assert in_gcp.chosen.cloud == "gcp" and in_gcp.config["cloud"] == "gcp"
    in_region = propose(JOB, project=project, now=NOW, to="gcp/europe-west4", allow_stale=True)
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


# --- issue 12 item 1: never deploy on stale prices silently


class _Refresher:
    """Stands in for `route prices refresh` of the clouds in play; records what it was asked."""

    def __init__(self, store: list[Quote] | None = None, error: str | None = None) -> None:
        self.asked: list[tuple[tuple[str, ...], str]] = []
        self.store, self.error = store or [], error

    def __call__(self, clouds: tuple[str, ...], gpu: str) -> list[RefreshOutcome]:
        self.asked.append((clouds, gpu))
        stored = 0
        if self.store:
            with QuoteCache(cache_path()) as cache:
                stored = cache.add(self.store, now=NOW)
        return [
            RefreshOutcome(c, (), 1, stored if c == "aws" else 0, 0.1, self.error) for c in clouds
        ]


def test_stale_cloud_price_is_refused_after_a_refresh_that_could_not_help(project: Project) -> None:
    refresher = _Refresher(error="AWS credentials not found — run `aws configure sso`")
    with pytest.raises(OperationFailed) as err:
        propose(JOB, project=project, now=NOW, refresh=refresher)
    message = err.value.message
    assert refresher.asked == [(("aws", "azure", "gcp"), "A100-80GB")]
    assert "stale" in message and "days old" in message and "--allow-stale" in message
    assert "AWS credentials not found" in message and "\n" not in message


def test_allow_stale_deploys_on_the_stale_price_and_says_so(project: Project) -> None:
    proposal = propose(JOB, project=project, now=NOW, allow_stale=True, refresh=_Refresher())
    assert proposal.chosen.stale and proposal.allowed_stale


def test_org_config_can_make_stale_deploys_the_default(project: Project) -> None:
    (project.root / "spotroute.yaml").write_text("allow_stale_deploy: true\n")
    assert propose(JOB, project=project, now=NOW).allowed_stale


def test_a_refresh_that_stores_fresh_quotes_is_planned_with(project: Project) -> None:
    fresh = Quote("aws", "us-east-1", None, "p4de.24xlarge", "spot", 1.5, "aws-api", NOW)
    proposal = propose(JOB, project=project, now=NOW, refresh=_Refresher(store=[fresh]))
    assert (proposal.chosen.cloud, proposal.chosen.price_per_hour) == ("aws", 1.5)
    assert not proposal.chosen.stale and not proposal.allowed_stale


def test_require_fresh_in_spotroute_yaml_refuses_stale_quotes_in_plans(project: Project) -> None:
    (project.root / "spotroute.yaml").write_text("require_fresh: true\n")
    with pytest.raises(OperationFailed) as err:
        propose(JOB, project=project, now=NOW, allow_stale=True)
    assert "no placement fits" in err.value.message


def test_the_local_target_is_exempt_from_freshness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    init_project(tmp_path / "infra")
    (tmp_path / "infra" / "spotroute.yaml").write_text("require_fresh: false\n")
    refresher = _Refresher()
    proposal = propose(
        REPO / "examples" / "quickstart.yaml",
        project=Project(tmp_path / "infra"),
        now=NOW,
        refresh=refresher,
    )
    assert proposal.chosen.cloud == "local" and refresher.asked == []


def test_a_new_stack_file_gets_per_stack_names_and_an_existing_one_keeps_its_own(
    project: Project,
) -> None:
    # docs/stack-config.md, spotroute:nameScope: a stack file from before the key keeps the job's
    # names, so a redeploy renames nothing; a new file (a first deploy, a move's <job>.2) gets
    # names of its own.
    fresh = propose(JOB, project=project, now=NOW, allow_stale=True)
    assert fresh.config["nameScope"] == "stack"
    fresh.stack_file.parent.mkdir(parents=True, exist_ok=True)
    fresh.stack_file.write_text(
        "config:\n  spotroute:jobName: llm-finetune\n  spotroute:cloud: gcp\n", encoding="utf-8"
    )

    again = propose(JOB, project=project, now=NOW, allow_stale=True)

    assert again.config["nameScope"] == "job"


def test_deploy_refuses_a_job_whose_start_up_script_the_cloud_would_refuse(
    project: Project, tmp_path: Path
) -> None:
    from router.core.errors import BadInput

    text = JOB.read_text(encoding="utf-8")
    big = tmp_path / "big.yaml"
    big.write_text(
        text.replace("  env:\n", '  env:\n    CONFIG_JSON: "' + "x" * 300_000 + '"\n', 1),
        encoding="utf-8",
    )

    with pytest.raises(BadInput) as err:
        propose(big, project=project, now=NOW, allow_stale=True)

    assert err.value.message.startswith(f"{big}: run.env: the start-up script would be ")
    assert not (project.root / "stacks" / "Pulumi.llm-finetune.yaml").exists()
