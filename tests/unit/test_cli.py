"""`route validate`, `schema`, `plan` and `init` as a user runs them (no network, private home)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from tests.unit.cli_harness import (
    EXAMPLES,
    REPO,
    SPOT_A100_JOB_WITH_DATA_IN_US_EAST_1,
    gcp_a2_ultragpu_8g_csv,
    invoke,
    isolate,
    route,
    route_process,
    write_job,
)

LLM_FINETUNE = EXAMPLES / "llm-finetune.yaml"
BAD_JOB = EXAMPLES / "bad-job.yaml"
HEAVY_MODULES = ("pulumi", "boto3", "botocore", "google", "azure")


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate(monkeypatch, tmp_path)


def placements(*args: str | Path) -> list[dict[str, Any]]:
    run = invoke("plan", *args, "--json")
    data: dict[str, Any] = run.json()
    return list(data["placements"])


# --- validate / schema --------------------------------------------------------------------------


def test_validate_prints_ok_with_the_file_name_for_a_good_job() -> None:
    run = invoke("validate", LLM_FINETUNE)

    assert run.code == 0
    assert run.out.strip() == f"OK {LLM_FINETUNE}"


def test_validate_reports_every_problem_of_a_bad_job_one_line_each(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "validate", BAD_JOB)

    assert run.code == 2
    assert len(run.err_lines) >= 5
    assert all(line.startswith(f"error: {BAD_JOB}: ") for line in run.err_lines)
    assert any("A100-40GB or A100-80GB" in line for line in run.err_lines)
    assert any("did you mean 'azure'" in line for line in run.err_lines)
    assert "Traceback" not in run.err


def test_validate_checks_every_file_given_and_fails_if_any_is_bad(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "validate", LLM_FINETUNE, BAD_JOB)

    assert run.code == 2
    assert f"OK {LLM_FINETUNE}" in run.out
    assert all(str(BAD_JOB) in line for line in run.err_lines)


def test_validate_of_a_missing_file_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nope.yaml"

    run = route(monkeypatch, capsys, "validate", missing)

    assert run.code == 2
    assert len(run.err_lines) == 1
    assert run.err_lines[0].startswith(f"error: {missing}")
    assert run.out == ""


def test_schema_prints_a_json_schema_document() -> None:
    run = invoke("schema")

    assert run.code == 0
    schema = run.json()
    assert "$schema" in schema
    assert "resources" in schema["properties"]


# --- plan ---------------------------------------------------------------------------------------


def test_plan_json_lists_placements_best_first_with_costs_that_add_up() -> None:
    ranked = placements(LLM_FINETUNE, "--top", "50")

    assert len(ranked) >= 2
    totals = [p["total_cost"] for p in ranked]
    assert totals == sorted(totals)
    for p in ranked:
        parts = p["compute_cost"] + p["egress_cost"] + p["storage_cost"] + p["staging_cost"]
        parts += p["interruption_cost"]
        assert math.isclose(parts, p["total_cost"], rel_tol=0, abs_tol=1e-6), p
        assert p["gpu"] == "A100-80GB"
        assert p["gpu_count"] == 8
        assert p["market"] == "spot"


def test_plan_explain_shows_streaming_per_pass_the_copy_with_staging_and_picks_the_cheaper() -> (
    None
):
    # examples/llm-finetune.yaml: 2000 GB in s3 us-east-1, passes: 3.
    run = invoke("plan", LLM_FINETUNE, "--explain", "--top", "50")
    assert run.code == 0, run.out

    lines = run.out.splitlines()
    best = next(line for line in lines if line.startswith("  #1: data "))
    assert "from aws us-east-1" in best
    assert "stream $0.00/pass × 3 = $0.00" in best
    assert best.endswith("→ stream (not dearer than copying)")
    azure = next(line for line in lines if " azure eastus: data " in line)
    assert "stream $180.00/pass × 3 = $540.00" in azure
    assert "4.44 h at 1 Gbps" in azure
    assert "→ copy (cheaper by $" in azure


def test_plan_json_carries_each_data_sets_source_mode_and_parts() -> None:
    ranked = placements(LLM_FINETUNE, "--top", "50")
    best, azure = ranked[0], next(p for p in ranked if p["cloud"] == "azure")

    assert (best["cloud"], best["region"]) == ("aws", "us-east-1")  # next to the data
    (data,) = azure["data"]
    assert data["source"] == {
        "url": "s3://acme-datasets/llm-corpus/", "cloud": "aws", "region": "us-east-1",
        "replica": 0,
    }  # fmt: skip
    assert (data["access"], data["chosen_by"], data["passes"]) == ("copy", "cheaper", 3)
    assert math.isclose(data["stream"]["cost"], 3 * 180.0)
    assert math.isclose(data["copy"]["staging_hours"], 2000 * 8 / 3600)
    assert math.isclose(data["cost"], data["copy"]["cost"])
    assert math.isclose(azure["egress_cost"], 180.0)
    assert math.isclose(azure["staging_cost"], data["copy"]["staging_cost"])


def test_plan_compares_clouds_with_the_bundled_snapshot_alone() -> None:
    top_ten = placements(LLM_FINETUNE)
    everything = placements(LLM_FINETUNE, "--top", "50")

    assert len(top_ten) == 10
    assert top_ten == everything[:10]
    assert len({p["cloud"] for p in everything}) >= 2
    assert {p["price_source"] for p in everything} == {"snapshot"}


def test_plan_top_limits_the_number_of_placements() -> None:
    assert len(placements(LLM_FINETUNE, "--top", "3")) == 3


def test_plan_json_has_the_documented_placement_fields() -> None:
    best = placements(LLM_FINETUNE)[0]

    assert set(best) == {
        "cloud", "region", "zone", "instance_type", "market", "gpu", "gpu_count",
        "price_per_hour", "list_price_per_hour", "node_count", "hours", "compute_cost",
        "egress_cost", "storage_cost", "staging_cost", "interruption_cost", "total_cost",
        "price_source", "price_age_s", "stale", "interruption_bucket", "interruptions_per_hour",
        "reasons", "quota", "data", "checkpoint_interval",
    }  # fmt: skip
    assert set(best["quota"]) == {"status", "note"}
    assert best["hours"] == 24
    assert math.isclose(
        best["compute_cost"], best["price_per_hour"] * best["hours"] * best["node_count"]
    )


CHECKPOINTED_JOB = """\
name: interval-check
resources:
  accelerators: A100-80GB:8
  clouds: [aws, gcp]
market: {market}
duration_hours: 24
run:
  command: [python, train.py]
checkpoint:
  interval: 30m
  restore_overhead: 10m
{save_time}"""


def test_plan_json_gives_each_placement_young_daly_interval_from_its_interruption_rate(
    tmp_path: Path,
) -> None:
    job = write_job(tmp_path / "job.yaml",
                    CHECKPOINTED_JOB.format(market="spot", save_time="  save_time: 2m\n"))

    ranked = placements(job, "--top", "5")

    assert ranked
    for p in ranked:
        advice = p["checkpoint_interval"]
        rate = p["interruptions_per_hour"]
        assert rate > 0
        assert advice["save_s"] == 120 and advice["save_s_source"] == "job.checkpoint.save_time"
        assert advice["interruptions_per_hour"] == rate
        assert math.isclose(advice["mtbi_s"], 3600 / rate)
        assert math.isclose(advice["young_s"], math.sqrt(2 * 120 * 3600 / rate))
        assert advice["daly_s"] < advice["young_s"]  # Daly subtracts the save itself
        # checkpoint.interval is what the stack passes the job: it wins over the suggestion.
        assert advice["job_interval_s"] == advice["interval_in_effect_s"] == 1800
        assert advice["overridden_by_job"] is True


def test_plan_explain_shows_the_job_interval_against_young_daly_with_its_inputs(
    tmp_path: Path,
) -> None:
    job = write_job(tmp_path / "job.yaml", CHECKPOINTED_JOB.format(market="spot", save_time=""))
    best = placements(job)[0]
    rate = best["interruptions_per_hour"]
    young = math.sqrt(2 * 60 * 3600 / rate)

    run = invoke("plan", job, "--explain", "--top", "1")

    assert run.code == 0
    line = next(line for line in run.out.splitlines() if "Young/Daly" in line)
    assert line.startswith("  #1 ")
    assert "checkpoint interval 30m (job.yaml, in effect)" in line
    assert "60s save (assumed)" in line
    assert f"({rate:.3g}/h)" in line
    shown = f"{young / 3600:.1f}h" if young >= 7200 else f"{young / 60:.0f}m"
    assert f"Young/Daly {shown} / " in line
    assert "set checkpoint.save_time in job.yaml" in run.out
    assert "Young/Daly" not in invoke("plan", job, "--top", "1").out  # --explain only


def test_plan_on_demand_placement_has_no_interval_to_suggest_and_says_so(tmp_path: Path) -> None:
    job = write_job(tmp_path / "job.yaml",
                    CHECKPOINTED_JOB.format(market="on-demand", save_time="  save_time: 45s\n"))

    advice = placements(job)[0]["checkpoint_interval"]
    run = invoke("plan", job, "--explain", "--top", "1")

    assert advice["interruptions_per_hour"] == 0
    assert advice["young_s"] is None and advice["daly_s"] is None and advice["mtbi_s"] is None
    assert advice["interval_in_effect_s"] == 1800
    assert "no interruptions expected here: no optimum to suggest" in run.out


def test_plan_json_has_no_interval_for_a_job_that_does_not_checkpoint(tmp_path: Path) -> None:
    text = CHECKPOINTED_JOB.format(market="on-demand", save_time="")
    job = write_job(tmp_path / "job.yaml", text.split("checkpoint:")[0])
    data = invoke("plan", job, "--json").json()

    assert data["placements"]
    assert all(p["checkpoint_interval"] is None for p in data["placements"])


def test_plan_explain_adds_every_rejected_offer_with_a_reason() -> None:
    run = invoke("plan", LLM_FINETUNE, "--json", "--explain", "--top", "50")
    data = run.json()

    rejected = data["rejected"]
    assert rejected
    assert all(isinstance(r["reason"], str) and r["reason"] for r in rejected)
    assert len(rejected) + len(data["placements"]) == data["offers_considered"]
    reasons = " ".join(r["reason"] for r in rejected)
    assert "not one of the job's accelerators" in reasons
    assert "on-demand offers are not considered" in reasons


def test_plan_without_explain_leaves_rejected_out_of_the_json() -> None:
    data = invoke("plan", LLM_FINETUNE, "--json").json()

    assert "rejected" not in data
    assert data["job"] == "llm-finetune"
    assert data["offers_considered"] > len(data["placements"])


def test_plan_table_shows_the_best_placement_and_warns_about_stale_prices() -> None:
    best = placements(LLM_FINETUNE)[0]

    run = invoke("plan", LLM_FINETUNE)

    assert run.code == 0
    first_row = next(line for line in run.out.splitlines() if re.match(r"│\s+1 │", line))
    assert best["instance_type"] in first_row
    assert f"${best['total_cost']:,.2f}" in first_row
    assert "stale" in run.out
    assert "route prices refresh" in run.out


def test_plan_require_fresh_with_only_the_stale_snapshot_finds_nothing_and_says_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "plan", LLM_FINETUNE, "--require-fresh", "--json", "--explain")

    assert run.code == 1
    data = run.json()
    assert data["placements"] == []
    stale = [r for r in data["rejected"] if "old" in r["reason"]]
    assert stale, "the A100-80GB×8 spot offers should be rejected as too old"
    assert all("route prices refresh" in r["reason"] for r in stale)
    # 31 days after the snapshot: 744 hours.
    assert all("744.0 h old" in r["reason"] for r in stale)


def test_plan_require_fresh_table_tells_the_user_no_placement_fits(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "plan", LLM_FINETUNE, "--require-fresh", "--explain")

    assert run.code == 1
    assert "no placement fits job 'llm-finetune'" in run.out
    assert "h old" in run.out


def test_plan_prefers_same_region_aws_over_cheaper_gcp_that_needs_the_data_moved(
    tmp_path: Path,
) -> None:
    job = write_job(tmp_path / "job.yaml", SPOT_A100_JOB_WITH_DATA_IN_US_EAST_1)
    aws_best = next(p for p in placements(job, "--top", "50") if p["cloud"] == "aws")
    # A GCP spot price 20% under the best AWS one, split the way SkyPilot lists it.
    host_spot = round(aws_best["price_per_hour"] * 0.2, 5)
    gpus_spot = round(aws_best["price_per_hour"] * 0.6, 5)
    csv = gcp_a2_ultragpu_8g_csv(
        tmp_path / "gcp" / "vms.csv",
        region="us-central1",
        zone="us-central1-a",
        host=(3.0, host_spot),
        gpus=(12.0, gpus_spot),
    )
    assert invoke("prices", "import", csv, "--format", "skypilot").code == 0

    ranked = placements(job, "--top", "50")

    gcp = next(
        p for p in ranked
        if p["cloud"] == "gcp" and p["instance_type"] == "a2-ultragpu-8g"
        and p["price_source"] == "import:skypilot"
    )  # fmt: skip
    aws = next(p for p in ranked if p["cloud"] == "aws")
    assert math.isclose(gcp["price_per_hour"], host_spot + gpus_spot)
    assert gcp["price_per_hour"] < aws["price_per_hour"]
    assert gcp["total_cost"] > aws["total_cost"]
    assert gcp["compute_cost"] < aws["compute_cost"]
    assert gcp["egress_cost"] > 0
    assert aws["egress_cost"] == 0
    assert ranked.index(aws) < ranked.index(gcp)
    egress_reasons = [r for r in gcp["reasons"] if r.startswith("egress:")]
    assert egress_reasons
    assert "aws us-east-1" in egress_reasons[0]
    assert "2000 GB" in egress_reasons[0]


def test_plan_table_shows_the_egress_charge_of_a_cross_cloud_placement(tmp_path: Path) -> None:
    job = write_job(tmp_path / "job.yaml", SPOT_A100_JOB_WITH_DATA_IN_US_EAST_1)
    gcp = next(p for p in placements(job, "--top", "50") if p["cloud"] == "gcp")

    run = invoke("plan", job, "--top", "50")

    gcp_rows = [line for line in run.out.splitlines() if f"gcp {gcp['zone']}" in line]
    assert gcp_rows
    assert f"${gcp['egress_cost']:,.2f}" in gcp_rows[0]


# --- init and the project -----------------------------------------------------------------------


def test_init_scaffolds_a_project_and_lists_what_it_created(tmp_path: Path) -> None:
    target = tmp_path / "infra"

    run = invoke("init", target)

    assert run.code == 0
    assert (target / "Pulumi.yaml").is_file()
    assert (target / "spotroute.yaml").is_file()
    assert (target / "stacks").is_dir()
    created = [line.removeprefix("created ") for line in run.out.splitlines()]
    assert all(Path(p).exists() for p in created)
    assert str(target / "Pulumi.yaml") in created


def test_init_refuses_to_overwrite_an_existing_project(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "infra"
    assert invoke("init", target).code == 0
    before = (target / "spotroute.yaml").read_text()

    run = route(monkeypatch, capsys, "init", target)

    assert run.code == 2
    assert len(run.err_lines) == 1
    assert run.err_lines[0].startswith("error: ")
    assert "already exists" in run.err
    assert (target / "spotroute.yaml").read_text() == before


def test_init_project_example_job_validates_and_plans(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "infra"
    created = invoke("init", target).out.splitlines()
    jobs = [Path(line.removeprefix("created ")) for line in created if "/jobs/" in line]
    assert jobs

    assert invoke("validate", *jobs).code == 0
    run = route(
        monkeypatch, capsys, "--project-dir", target, "plan", jobs[0], "--json", "--explain"
    )

    assert run.code == 0, run.out
    assert run.json()["placements"]


def test_project_org_config_limits_where_plan_places(tmp_path: Path) -> None:
    target = tmp_path / "infra"
    target.mkdir()
    (target / "Pulumi.yaml").write_text("name: infra\nruntime: python\nstackConfigDir: stacks\n")
    (target / "spotroute.yaml").write_text("clouds: [gcp]\n")

    run = invoke("--project-dir", target, "plan", LLM_FINETUNE, "--json", "--top", "50")
    ranked = run.json()["placements"]

    assert ranked
    assert {p["cloud"] for p in ranked} == {"gcp"}


def test_plan_with_a_nonexistent_project_dir_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "--project-dir", "/nonexistent", "plan", LLM_FINETUNE)

    assert run.code == 2
    assert len(run.err_lines) == 1
    assert run.err_lines[0].startswith("error: --project-dir: ")
    assert "route init" in run.err


def test_project_dir_that_does_not_exist_fails_as_a_real_process(
    home: Path, tmp_path: Path
) -> None:
    run = route_process(
        "--project-dir", "/nonexistent", "plan", LLM_FINETUNE, cwd=tmp_path, home=home
    )

    assert run.code == 2
    assert len(run.err_lines) == 1
    assert run.err_lines[0].startswith("error: ")
    assert "Traceback" not in run.err


# --- start-up: the fast path stays free of Pulumi and cloud SDKs --------------------------------


def imported_modules(importtime_stderr: str) -> set[str]:
    """Module names from `python -X importtime` output."""
    names = set()
    for line in importtime_stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def test_plan_imports_no_pulumi_or_cloud_sdk(home: Path, tmp_path: Path) -> None:
    run = route_process(
        "plan", LLM_FINETUNE, "--json", cwd=tmp_path, home=home, python_flags=("-X", "importtime")
    )

    assert run.code == 0
    assert json.loads(run.out)["placements"]
    modules = imported_modules(run.err)
    assert "router.core.planner" in modules
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY_MODULES)
    assert heavy == []


def test_examples_directory_jobs_all_validate() -> None:
    # backtest-*.yaml are backtest workloads (docs/backtest.md), not job files.
    good = sorted(
        p for p in EXAMPLES.glob("*.yaml") if p != BAD_JOB and not p.name.startswith("backtest-")
    )

    run = invoke("validate", *good)

    assert run.code == 0
    assert run.out.splitlines() == [f"OK {p}" for p in good]


def test_cli_json_doc_names_every_field_plan_and_prices_print() -> None:
    doc = (REPO / "docs" / "cli-json.md").read_text()
    plan = invoke("plan", LLM_FINETUNE, "--json", "--explain").json()
    prices = invoke("prices", "--gpu", "T4", "--limit", "1", "--json").json()
    sample = REPO / "tests" / "data" / "skypilot" / "gcp" / "vms.csv"
    imported = invoke("prices", "import", sample, "--format", "skypilot", "--json").json()

    printed = (
        set(plan) | set(plan["placements"][0]) | set(plan["rejected"][0]) | set(prices[0])
        | set(imported)
    )  # fmt: skip
    undocumented = sorted(name for name in printed if f"`{name}`" not in doc)
    assert undocumented == []


def test_every_offer_is_either_a_placement_or_rejected_even_with_top(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(
        monkeypatch,
        capsys,
        "plan",
        str(EXAMPLES / "llm-finetune.yaml"),
        "--top",
        "3",
        "--json",
        "--explain",
    )
    data = run.json()
    assert len(data["placements"]) == 3
    assert data["placements_total"] > 3
    assert data["placements_total"] + len(data["rejected"]) == data["offers_considered"]
