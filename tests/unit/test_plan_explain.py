"""Offers dropped for an image/driver reason are said, "no placement fits" names the filter, and
the user sees (and chooses) which price sources a plan mixed: `route plan --explain`, `--json`,
`--sources`, `route validate --explain`.

The image limits here are the test's own (a made-up image without a T4 driver), so these tests do
not depend on which rows router/data/images.csv holds today.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from router.config.datafiles import load_catalog, load_egress, load_interruption_model
from router.core.catalog import Catalog, ImageLimit, offers_from_quotes, with_image_limits
from router.core.job.model import Job
from router.core.offers import Quote
from router.core.org import OrgConfig
from router.core.plan_explain import no_fit_reason
from router.core.planner import plan
from tests.unit.cli_harness import FIXED_NOW, SKYPILOT_GCP_SAMPLE, isolate, route

NO_T4 = ImageLimit(
    cloud="aws", image="test-image", driver="test driver", gpu="T4", family="",
    reason="the test image has no T4 driver", source="https://example.com/test-image",
)


def _no_t4_catalog() -> Catalog:
    return with_image_limits(load_catalog(), [NO_T4])


def _quote(instance_type: str, price: float, region: str = "us-east-1") -> Quote:
    return Quote(cloud="aws", region=region, zone=None, instance_type=instance_type,
                 market="on-demand", price_per_hour=price, source="aws-api",
                 observed_at=FIXED_NOW)


def _job(gpu: str, **extra: Any) -> Job:
    return Job.model_validate({
        "name": "t", "resources": {"accelerators": f"{gpu}:1", "clouds": ["aws"]},
        "market": "on-demand", "duration_hours": 1, "run": {"command": ["true"]}, **extra,
    })


def _plan(job: Job, quotes: list[Quote], catalog: Catalog) -> Any:
    made = offers_from_quotes(quotes, catalog)
    return plan(job, made.offers, org=OrgConfig(), egress=load_egress(), now=FIXED_NOW,
                interruption=load_interruption_model(), refused=made.refused_offers)


def test_an_offer_the_image_cannot_drive_is_rejected_by_the_image_filter_with_its_reason() -> None:
    quotes = [_quote("g4dn.xlarge", 0.526), _quote("g4dn.2xlarge", 0.752)]
    result = _plan(_job("T4"), quotes, _no_t4_catalog())
    assert result.placements == ()
    assert [(r.offer.instance_type, r.filter) for r in result.rejected] == [
        ("g4dn.xlarge", "image"), ("g4dn.2xlarge", "image")]
    assert all("the test image has no T4 driver (https://example.com/test-image)" in r.reason
               for r in result.rejected)
    assert "failed the image filter" in no_fit_reason(_job("T4"), result.rejected)


def test_without_the_image_limit_the_same_offers_are_placed() -> None:
    result = _plan(_job("T4"), [_quote("g4dn.xlarge", 0.526)], load_catalog())
    assert [p.instance_type for p in result.placements] == ["g4dn.xlarge"]


def test_a_refused_offer_of_hardware_the_job_did_not_ask_for_keeps_the_accelerator_reason() -> None:
    quotes = [_quote("g4dn.xlarge", 0.526), _quote("g5.xlarge", 1.006)]
    result = _plan(_job("A10G"), quotes, _no_t4_catalog())
    assert [p.instance_type for p in result.placements] == ["g5.xlarge"]
    ((rejection,),) = [[r for r in result.rejected if r.offer.instance_type == "g4dn.xlarge"]]
    assert rejection.filter == "accelerator" and "T4 is not one of" in rejection.reason


def test_no_fit_names_the_filter_that_removed_the_cheapest_offer_with_the_jobs_gpus() -> None:
    # The cheap T4 offers fail the image filter, the dear one fails the price cap.
    quotes = [_quote("g4dn.xlarge", 0.526), _quote("g4dn.xlarge", 0.6, region="us-west-2"),
              _quote("g5.xlarge", 1.006)]
    job = _job("T4", max_price_per_hour=0.1)
    result = _plan(job, quotes, _no_t4_catalog())
    why = no_fit_reason(job, result.rejected)
    assert why.startswith("the cheapest offer with T4×1, aws g4dn.xlarge us-east-1 on-demand "
                          "$0.53/h, failed the image filter: "), why
    assert why.endswith("(of 2 such offers: 2 image)"), why


def test_no_fit_says_when_no_offer_has_the_jobs_gpus_at_all() -> None:
    result = _plan(_job("T4"), [_quote("g5.xlarge", 1.006)], load_catalog())
    assert no_fit_reason(_job("T4"), result.rejected) == (
        "no offer on aws has T4×1 (the accelerator filter removed all of them)")


def test_no_fit_from_chosen_sources_names_them_and_how_to_widen_them() -> None:
    job = _job("T4")
    result = _plan(job, [_quote("g5.xlarge", 1.006)], load_catalog())

    why = no_fit_reason(job, result.rejected, sources=("live",))

    assert why == (
        "the price sources chosen (--sources live) gave 1 offer on aws, none with T4×1 — leave "
        "--sources out to plan on every source (the bundled snapshot included), or add offers to "
        "those chosen: `route prices refresh` (live)"
    )
    nothing = no_fit_reason(job, [], sources=("import", "snapshot"))
    assert nothing.startswith("the price sources chosen (--sources import,snapshot) gave no "
                              "offer on aws for T4×1 — ")
    assert nothing.endswith(": `route prices import FILE --format skypilot` (import)")


def test_plan_on_sources_that_gave_no_offers_says_so_not_the_accelerator_filter(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path)  # an empty price cache: no live or imported quotes
    path = tmp_path / "t4.yaml"
    path.write_text(yaml.safe_dump({
        "name": "t4-job", "resources": {"accelerators": "T4:1", "clouds": ["aws"]},
        "market": "on-demand", "duration_hours": 2, "run": {"command": ["python", "x.py"]}}))

    table = route(monkeypatch, capsys, "plan", path, "--sources", "import,live")
    as_json = route(monkeypatch, capsys, "plan", path, "--sources", "live", "--json")

    assert table.code == 1, table
    line = " ".join(table.out.split())  # the table's console wraps long lines
    assert "(0 offers considered, sources import,live): the price sources chosen (--sources " \
        "import,live) gave no offer on aws for T4×1 — leave --sources out" in line, line
    assert "accelerator filter" not in line and "--explain" not in line
    assert as_json.code == 1 and as_json.json()["no_fit"].startswith(
        "the price sources chosen (--sources live) gave no offer on aws for T4×1")


@pytest.fixture
def no_t4_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The CLI with the test image limit and an aws T4 job file; returns the job file."""
    isolate(monkeypatch, tmp_path)
    import router.config.job_file as job_file
    import router.prices.book as book

    monkeypatch.setattr(book, "load_catalog", _no_t4_catalog)
    monkeypatch.setattr(job_file, "load_catalog", _no_t4_catalog)
    path = tmp_path / "t4.yaml"
    path.write_text(yaml.safe_dump({
        "name": "t4-job", "resources": {"accelerators": "T4:1", "clouds": ["aws"]},
        "market": "on-demand", "duration_hours": 2, "run": {"command": ["python", "x.py"]}}))
    return path


def test_plan_explain_lists_every_image_refused_offer_and_the_no_fit_line_names_the_filter(
    no_t4_cli: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "plan", no_t4_cli, "--explain", "--json")
    assert run.code == 1, run
    report = run.json()
    image = [r for r in report["rejected"] if r["filter"] == "image"]
    assert image and all(r["instance_type"].startswith("g4dn.") for r in image)
    assert all("the test image has no T4 driver" in r["reason"] for r in image)
    assert report["rejected_by_filter"]["image"] == len(image)
    assert report["offers_considered"] == len(report["rejected"])
    assert "failed the image filter" in report["no_fit"]

    table = route(monkeypatch, capsys, "plan", no_t4_cli)
    assert table.code == 1
    assert "no placement fits job 't4-job'" in table.out and "failed the image filter" in table.out


def test_validate_explain_names_the_job_types_no_offer_is_made_for(
    no_t4_cli: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "validate", "--explain", no_t4_cli)
    assert run.code == 0, run
    lines = run.out.splitlines()
    assert lines[0].startswith("Instance types with the job's GPUs that get no offer")
    refused = [ln for ln in lines[1:-1]]
    assert refused and all(ln.startswith("  aws g4dn.") and "no T4 driver" in ln for ln in refused)
    assert lines[-1] == f"OK {no_t4_cli}"


# --- sources -----------------------------------------------------------------------------------


@pytest.fixture
def imported_gcp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                 capsys: pytest.CaptureFixture[str]) -> Path:
    """A home whose cache holds the GCP sample catalog import; returns an A100-80GB×8 gcp job."""
    isolate(monkeypatch, tmp_path)
    run = route(monkeypatch, capsys, "prices", "import", SKYPILOT_GCP_SAMPLE,
                "--format", "skypilot")
    assert run.code == 0, run
    path = tmp_path / "a100.yaml"
    path.write_text(yaml.safe_dump({
        "name": "a100", "resources": {"accelerators": "A100-80GB:8", "clouds": ["gcp"]},
        "market": "spot", "duration_hours": 10, "checkpoint": {"interval": "1h"},
        "run": {"command": ["python", "x.py"]}}))
    return path


def test_a_plan_that_mixes_the_snapshot_into_an_import_says_how_many_offers_are_the_snapshots(
    imported_gcp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "plan", imported_gcp, "--json")
    assert run.code == 0, run
    sources = run.json()["offer_sources"]
    assert sources["chosen"] == ["import", "live", "snapshot"]
    gcp = sources["by_cloud"]["gcp"]
    assert gcp["import"] > 0 and gcp["snapshot"] > 0
    assert sources["snapshot_mixed"] == {"gcp": gcp["snapshot"]}

    table = route(monkeypatch, capsys, "plan", imported_gcp)
    assert (f"gcp {gcp['snapshot']} snapshot offers next to {gcp['import']} import" in table.out)
    assert "`--sources import,live` plans on the fresher ones only" in table.out


@pytest.mark.parametrize(("kinds", "source"), [("import", "import:skypilot"),
                                               ("snapshot", "snapshot")])
def test_sources_choose_which_prices_a_plan_uses(
    kinds: str, source: str, imported_gcp: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "plan", imported_gcp, "--json", "--sources", kinds)
    assert run.code == 0, run
    report = run.json()
    assert report["placements"]
    assert {p["price_source"] for p in report["placements"]} == {source}
    assert report["offer_sources"]["chosen"] == [kinds]
    assert set(report["offer_sources"]["by_cloud"]["gcp"]) == {kinds}
    assert report["offer_sources"]["snapshot_mixed"] == {}


def test_an_unknown_source_is_a_one_line_error_naming_the_option(
    imported_gcp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "plan", imported_gcp, "--sources", "import,cached")
    assert run.code == 2, run
    assert run.err_lines == ["error: --sources: 'cached' is not a price source — use a "
                             "comma-separated list of import, live, snapshot"]



def test_deploy_of_a_job_nothing_fits_names_the_filter_and_keeps_its_advice_whole(
    no_t4_cli: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")  # cwd: the project
    run = route(monkeypatch, capsys, "deploy", no_t4_cli, "--dry-run")
    assert run.code == 1, run
    (line,) = run.err_lines
    assert line.startswith(f"error: no placement fits job 't4-job' (see `route plan {no_t4_cli} "
                           "--explain`): the cheapest offer with T4×1"), line
    assert "failed the image filter" in line
