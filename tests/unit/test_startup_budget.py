"""A new placement's start-up budgets: per cloud, per image size, configurable, phase by phase."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from components.startup import SECRET_FETCH_TRIES
from router.config.datafiles import load_gpus, load_startup_figures
from router.config.local_market import load_local_market
from router.config.org_file import parse_org_config
from router.config.project import Project
from router.contract.local_market import LocalBehaviour, LocalMarket, parse_trace
from router.core.errors import BadInput
from router.core.job.problems import parse_job
from router.core.startup_budget import StartupBudget, parse_startup_csv, startup_budget
from router.flows.placement_waits import (
    PhaseTimedOut,
    budget_for,
    restore_timed_out,
    wait_nodes_running,
)
from router.nodes.node_state import LOST, RUNNING, STARTING, Node, NodeState


def _job(migration: dict[str, Any] | None = None, **run: Any) -> Any:
    load_gpus()
    return parse_job(
        {
            "name": "j",
            "resources": {"accelerators": "A100-80GB:8", "clouds": ["aws", "local"]},
            "market": "spot",
            "duration_hours": 4,
            "checkpoint": {"interval": "30m", "restore_overhead": "5m"},
            "run": {"command": ["python", "train.py"], **run},
            "migration": migration or {},
        },
        "job.yaml",
    )


def test_the_figures_have_a_row_per_cloud_with_the_documented_notice_lead_times() -> None:
    figures = load_startup_figures()
    assert set(figures) == {"aws", "gcp", "azure", "local"}
    # AWS: "a warning that is issued two minutes before Amazon EC2 stops or terminates your Spot
    # Instance" (docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices
    # .html); GCP Spot VMs: 30 s from ACPI G2 Soft Off to G3 (cloud.google.com/compute/docs/
    # instances/spot#preemption-process); Azure Scheduled Events Preempt: minimum 30 s notice
    # (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events).
    assert {c: f.notice_s for c, f in figures.items()} == {
        "aws": 120, "gcp": 30, "azure": 30, "local": 30,
    }  # fmt: skip
    # The default factor 2 gives the clouds' own grace for a new VM: EC2 Auto Scaling health check
    # grace 300 s, MIG autohealing initial delay 300 s, scale set repairs grace PT10M.
    assert {c: 2 * figures[c].boot_s for c in ("aws", "gcp", "azure")} == {
        "aws": 300, "gcp": 300, "azure": 600,
    }  # fmt: skip


def test_the_secret_fetch_figure_is_the_start_up_scripts_retry_schedule() -> None:
    # components/startup.py: SECRET_FETCH_TRIES tries, `sleep $((attempt * 15))` between them.
    waits = sum(15 * attempt for attempt in range(1, SECRET_FETCH_TRIES))
    assert {f.secrets_s for c, f in load_startup_figures().items() if c != "local"} == {waits}


def test_restore_budget_grows_with_the_image_the_secrets_and_the_jobs_own_restore() -> None:
    aws = load_startup_figures()["aws"]
    bare = startup_budget(aws, image="", image_gb=None, secrets=False, restore_overhead_s=300)
    assert (bare.nodes_s, bare.restore_s) == (300, 600)  # 2 × boot; 2 × restore
    big = startup_budget(
        aws, image="nvcr.io/x:1", image_gb=40, secrets=True, restore_overhead_s=300
    )
    assert dict(big.parts) == {"boot": 150, "pull": 480, "secrets": 420, "restore": 300}
    assert big.restore_s == 2 * (480 + 420 + 300)
    assert big.restore_basis == "2 × (pull 480 s + secrets 420 s + restore 300 s) (aws)"
    default_size = startup_budget(
        aws, image="x", image_gb=None, secrets=False, restore_overhead_s=0
    )
    assert dict(default_size.parts)["pull"] == 120  # 10 GB assumed × 12 s/GB


def test_fixed_timeouts_replace_the_computed_budget_of_their_phase() -> None:
    aws = load_startup_figures()["aws"]
    b = startup_budget(
        aws, image="", image_gb=None, secrets=False, restore_overhead_s=60, factor=3,
        nodes_timeout_s=900, restore_timeout_s=None,
    )  # fmt: skip
    assert (b.nodes_s, b.nodes_basis) == (900, "the nodes_timeout set")
    assert b.restore_s == 180


def test_an_accelerated_clock_shortens_the_real_wait_but_never_below_the_floors() -> None:
    b = StartupBudget("aws", 300, 12_000, (), time_scale=60)
    assert (b.real_nodes_s(), b.real_restore_s()) == (30, 200)  # floor 30 s; 12 000 / 60
    assert b.said(b.real_restore_s()) == "12000 s (200 s real at time scale 60)"
    assert StartupBudget.from_json(b.to_json()) == b


def test_budget_for_reads_job_org_config_and_the_local_markets_profile(tmp_path: Path) -> None:
    project = Project(tmp_path)
    org = parse_org_config(
        "startup: {budget_factor: 3, restore_timeout: 45m}\nlocal_market:\n"
        "  offers: [{region: local-a, market: spot, price_per_hour: 1, capacity: 1}]\n"
        "  profile: gcp\n  time_scale: 10\n"
    )
    job = _job(image="x", image_size_gb=5, migration={"nodes_timeout": "20m"})
    on_aws = budget_for(job, org, "aws", project)
    assert (on_aws.cloud, on_aws.nodes_s, on_aws.restore_s) == ("aws", 1200, 2700)
    on_local = budget_for(_job(image="x", image_size_gb=5), org, "local", project)
    assert (on_local.cloud, on_local.time_scale) == ("gcp", 10)
    assert on_local.nodes_s == 3 * 150 and dict(on_local.parts)["pull"] == 60


def test_bad_figures_and_bad_knobs_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"f\.csv line 2: a figure is not a number"):
        parse_startup_csv(
            "cloud,boot_s,pull_s_per_gb,image_gb,secrets_s,notice_s\naws,x,1,1,1,1\n", "f.csv"
        )
    with pytest.raises(BadInput, match="local_market: local-z is not a region"):
        load_local_market(
            parse_org_config(
                "local_market: {offers: [{region: local-a, market: spot, price_per_hour: 1,"
                " capacity: 1}], quota: {local-z: 8}}"
            ),
            tmp_path,
        )
    with pytest.raises(BadInput, match="time_scale"):
        parse_org_config("local_market: {offers: [], time_scale: 0}")
    with pytest.raises(BadInput, match="nodes_timeout"):
        parse_org_config("startup: {nodes_timeout: soon}")


def test_the_local_markets_clock_runs_time_scale_times_faster_from_its_start() -> None:
    start = datetime(2026, 12, 1, 10, tzinfo=UTC)
    trace = "at,region,market,price_per_hour,capacity\n0s,local-a,spot,1,1\n1h,local-a,spot,2,1\n"
    market = LocalMarket(parse_trace(trace, "t"), start, LocalBehaviour(time_scale=60))
    assert market.at(start + timedelta(seconds=59))[("local-a", "spot")].price_per_hour == 1
    assert market.at(start + timedelta(seconds=60))[("local-a", "spot")].price_per_hour == 2
    assert LocalMarket.from_env(market.to_env()) == market


def _state(*statuses: str, wanted: int = 2) -> NodeState:
    return NodeState("aws", "fleet-1", wanted, tuple(Node(f"i-{i}", s, s) for i, s in
                                                     enumerate(statuses)))  # fmt: skip


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr("router.flows.placement_waits.CLOUD_POLL_S", 0.01)
    monkeypatch.setattr("router.core.startup_budget.MIN_NODES_S", 0.0)
    yield


def test_the_nodes_phase_ends_when_every_node_runs(fast: None) -> None:
    seen = iter([_state(STARTING, STARTING), _state(RUNNING, STARTING), _state(RUNNING, RUNNING)])
    ran = wait_nodes_running(
        {"cloud": "aws"}, StartupBudget("aws", 10, 10, ()), stack="j.2", poll=lambda _p: next(seen)
    )
    assert ran.observed and ran.state is not None and ran.state["running"] == 2


def test_nodes_that_never_run_time_out_naming_the_phase_and_its_budget(fast: None) -> None:
    budget = StartupBudget("aws", 0.05, 10, (), nodes_basis="2 × boot 150 s (aws)")
    with pytest.raises(PhaseTimedOut) as caught:
        wait_nodes_running({"cloud": "aws"}, budget, stack="j.2", poll=lambda _p: _state(STARTING))
    assert caught.value.message.startswith("nodes did not run within 0 s of `pulumi up` returning")
    assert "aws: 0 of 2 nodes running; budget 2 × boot 150 s (aws)" in caught.value.message


def test_a_node_lost_while_starting_fails_at_once(fast: None) -> None:
    with pytest.raises(PhaseTimedOut, match=r"the nodes of j\.2 were lost before they ran"):
        wait_nodes_running(
            {"cloud": "aws"}, StartupBudget("aws", 60, 10, ()), stack="j.2",
            poll=lambda _p: _state(RUNNING, LOST),
        )  # fmt: skip


def test_a_cloud_that_cannot_be_asked_leaves_the_wait_to_the_resume_record(fast: None) -> None:
    from router.core.errors import CredentialsMissing

    def denied(_p: dict[str, Any]) -> NodeState:
        raise CredentialsMissing("AWS credentials not found")

    ran = wait_nodes_running(
        {"cloud": "aws"}, StartupBudget("aws", 60, 10, ()), stack="j.2", poll=denied
    )
    assert not ran.observed and ran.note == "AWS credentials not found"


def test_the_restore_phase_names_its_parts() -> None:
    budget = StartupBudget("gcp", 300, 1800, (), restore_basis="2 × (pull 120 s …) (gcp)")
    message = restore_timed_out(budget, "j.2").message
    assert message.startswith("job did not restore within 1800 s of its nodes running on j.2")
    assert "budget 2 × (pull 120 s …) (gcp)" in message


def test_route_preempt_gives_the_local_profiles_notice_on_its_clock(tmp_path: Path) -> None:
    from router.flows.preempt import DEFAULT_GRACE_S, notice_lead_s

    (tmp_path / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    offers = "offers: [{region: local-a, market: spot, price_per_hour: 1, capacity: 1}]"
    (tmp_path / "spotroute.yaml").write_text(f"local_market: {{{offers}, profile: aws}}\n")
    assert notice_lead_s(Project(tmp_path)) == 120  # AWS: two minutes
    (tmp_path / "spotroute.yaml").write_text(
        f"local_market: {{{offers}, profile: azure, time_scale: 10}}\n"
    )
    assert notice_lead_s(Project(tmp_path)) == 3  # Azure's 30 s, ten times faster
    (tmp_path / "spotroute.yaml").write_text(f"local_market: {{{offers}}}\n")
    assert notice_lead_s(Project(tmp_path)) == DEFAULT_GRACE_S == 30
