"""`route prices` (list, import, history, refresh) as a user runs it: no network, private home."""

from __future__ import annotations

import csv
import fnmatch
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from router.cli import options
from tests.unit.cli_harness import (
    FIXED_NOW,
    SKYPILOT_GCP_SAMPLE,
    SNAPSHOT_OBSERVED_AT,
    invoke,
    isolate,
    route,
    route_process,
)

PRICE_FIELDS = {
    "cloud", "region", "zone", "instance_type", "gpu", "gpu_count", "market", "price_per_hour",
    "source", "observed_at", "age_s", "stale", "interruption_bucket",
}  # fmt: skip
KEY = ("cloud", "region", "instance_type", "market")
A2_ULTRA_8G_SPOT_IN_US_CENTRAL1 = (
    "--cloud", "gcp", "--instance-type", "a2-ultragpu-8g", "--region", "us-central1",
    "--market", "spot",
)  # fmt: skip


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate(monkeypatch, tmp_path)


def prices(*args: str | Path) -> list[dict[str, Any]]:
    run = invoke("prices", *args, "--json")
    assert run.code == 0, run.err
    rows: list[dict[str, Any]] = run.json()
    return rows


def import_sample() -> None:
    run = invoke("prices", "import", SKYPILOT_GCP_SAMPLE, "--format", "skypilot")
    assert run.code == 0, run.err


def skypilot_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


# --- listing ------------------------------------------------------------------------------------


def test_prices_json_lists_a100_80gb_x8_from_all_three_clouds_cheapest_first() -> None:
    rows = prices("--gpu", "A100-80GB", "--count", "8")

    assert rows
    assert all(set(row) == PRICE_FIELDS for row in rows)
    assert {row["cloud"] for row in rows} >= {"aws", "gcp", "azure"}
    assert all(row["gpu"] == "A100-80GB" and row["gpu_count"] == 8 for row in rows)
    assert [row["price_per_hour"] for row in rows] == sorted(row["price_per_hour"] for row in rows)


def test_snapshot_prices_are_flagged_stale_with_their_age() -> None:
    rows = prices("--gpu", "A100-80GB", "--count", "8")

    expected_age_s = (FIXED_NOW - SNAPSHOT_OBSERVED_AT).total_seconds()
    assert {row["source"] for row in rows} == {"snapshot"}
    assert all(row["stale"] is True for row in rows)
    assert all(row["age_s"] == expected_age_s for row in rows)
    assert all(row["observed_at"].startswith("2025-05-01") for row in rows)


def test_prices_market_spot_lists_only_spot() -> None:
    rows = prices("--gpu", "A100-80GB", "--market", "spot")

    assert rows
    assert {row["market"] for row in rows} == {"spot"}


def test_prices_clouds_filter_keeps_only_that_cloud() -> None:
    rows = prices("--gpu", "A100-80GB", "--clouds", "gcp")

    assert rows
    assert {row["cloud"] for row in rows} == {"gcp"}


def test_prices_clouds_accepts_a_comma_list_and_repeats() -> None:
    rows = prices("--gpu", "H100-80GB", "--clouds", "aws,gcp", "--clouds", "gcp")

    assert {row["cloud"] for row in rows} == {"aws", "gcp"}


def test_prices_regions_glob_keeps_matching_regions_only() -> None:
    rows = prices("--gpu", "A100-80GB", "--regions", "us-*")

    assert rows
    assert all(fnmatch.fnmatchcase(row["region"], "us-*") for row in rows)
    assert {row["cloud"] for row in rows} >= {"aws", "gcp"}


def test_prices_limit_shows_the_cheapest_rows() -> None:
    everything = prices("--gpu", "T4")

    assert prices("--gpu", "T4", "--limit", "3") == everything[:3]


def test_prices_table_says_how_many_rows_and_that_they_are_stale() -> None:
    run = invoke("prices", "--gpu", "A100-80GB", "--count", "8", "--limit", "5")

    assert run.code == 0
    total = len(prices("--gpu", "A100-80GB", "--count", "8"))
    assert f"5 of {total} offers, cheapest first" in run.out
    assert "stale" in run.out
    assert "route prices refresh" in run.out


def test_prices_with_no_match_says_how_to_widen_the_search() -> None:
    run = invoke("prices", "--gpu", "A100-80GB", "--count", "3")

    assert run.code == 0
    assert "no offers match" in run.out
    assert prices("--gpu", "A100-80GB", "--count", "3") == []


def test_prices_unknown_cloud_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "prices", "--clouds", "aws,oracle")

    assert run.code == 2
    assert run.err_lines == ["error: --clouds: unknown cloud 'oracle' — use one of aws, gcp, azure"]
    assert run.out == ""


def test_prices_ambiguous_a100_names_both_choices(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "prices", "--gpu", "A100", "--json")

    assert run.code == 2
    assert len(run.err_lines) == 1
    assert run.err_lines[0].startswith("error: --gpu: ")
    assert "A100-40GB" in run.err
    assert "A100-80GB" in run.err


def test_prices_bad_market_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "prices", "--market", "preemptible")

    assert run.code == 2
    assert "--market" in run.err
    assert "Traceback" not in run.err


# --- import -------------------------------------------------------------------------------------


def test_import_prints_one_summary_line_with_the_counts_then_one_line_per_flagged_type() -> None:
    data_rows = len(skypilot_rows(SKYPILOT_GCP_SAMPLE))

    run = invoke("prices", "import", SKYPILOT_GCP_SAMPLE, "--format", "skypilot")

    assert run.code == 0
    lines = run.out.strip().splitlines()
    # The sample's H100:1 and T4:2 GPU rows lack their a3 / n1-standard-16 host rows.
    assert len(lines) == 3 and all(ln.startswith("  flagged gcp ") for ln in lines[1:]), lines
    assert lines[0].startswith("imported ")
    assert "(gcp)" in lines[0]
    assert f"from {data_rows} rows" in lines[0]


def test_import_json_counts_every_row_as_quoted_or_skipped_with_a_reason(home: Path) -> None:
    data_rows = len(skypilot_rows(SKYPILOT_GCP_SAMPLE))

    run = invoke("prices", "import", SKYPILOT_GCP_SAMPLE, "--format", "skypilot", "--json")

    summary = run.json()
    assert set(summary) == {
        "cloud", "quotes", "rows_read", "rows_skipped", "skipped_reasons", "notes"
    }
    assert summary["cloud"] == "gcp"
    assert summary["rows_read"] == data_rows
    assert summary["quotes"] > 0
    assert summary["rows_skipped"] == sum(summary["skipped_reasons"].values())
    assert summary["rows_skipped"] < data_rows
    assert (home / "prices.sqlite3").is_file()


def test_imported_quotes_win_over_the_snapshot_for_the_same_capacity() -> None:
    before = {tuple(r[k] for k in KEY): r for r in prices("--clouds", "gcp")}
    import_sample()

    after = prices("--clouds", "gcp")

    imported = [r for r in after if r["source"] == "import:skypilot"]
    assert all(r["stale"] is False and r["age_s"] == 0 for r in imported)
    overlap = {tuple(r[k] for k in KEY) for r in imported} & set(before)
    assert ("gcp", "us-central1", "a2-ultragpu-8g", "spot") in overlap
    for key in overlap:
        assert before[key]["source"] == "snapshot"
        now_listed = [r for r in after if tuple(r[k] for k in KEY) == key]
        assert {r["source"] for r in now_listed} == {"import:skypilot"}, key


def test_imported_a2_ultragpu_8g_spot_price_is_host_plus_eight_gpus() -> None:
    rows = skypilot_rows(SKYPILOT_GCP_SAMPLE)
    host = next(
        r for r in rows
        if r["InstanceType"] == "a2-ultragpu-8g" and r["AvailabilityZone"] == "us-central1-a"
    )  # fmt: skip
    gpus = next(
        r for r in rows
        if r["InstanceType"] == "" and r["AcceleratorName"] == "A100-80GB"
        and r["AcceleratorCount"] == "8" and r["AvailabilityZone"] == "us-central1-a"
    )  # fmt: skip
    expected = float(host["SpotPrice"]) + float(gpus["SpotPrice"])
    import_sample()

    rows_now = prices("--clouds", "gcp", "--market", "spot", "--regions", "us-central1")

    quote = next(
        r for r in rows_now
        if r["instance_type"] == "a2-ultragpu-8g" and r["source"] == "import:skypilot"
    )  # fmt: skip
    assert quote["zone"] == "us-central1-a"
    assert math.isclose(quote["price_per_hour"], expected, abs_tol=1e-9)


def test_history_shows_the_imported_quote() -> None:
    import_sample()
    listed = next(
        r for r in prices("--clouds", "gcp", "--market", "spot")
        if r["instance_type"] == "a2-ultragpu-8g" and r["source"] == "import:skypilot"
    )  # fmt: skip

    run = invoke(
        "prices", "history", "--cloud", "gcp", "--instance-type", "a2-ultragpu-8g",
        "--region", listed["region"], "--market", "spot", "--json",
    )  # fmt: skip

    history = run.json()
    assert history
    assert set(history[0]) == {
        "cloud", "region", "zone", "instance_type", "market", "price_per_hour", "source",
        "observed_at", "age_s",
    }  # fmt: skip
    assert any(
        q["price_per_hour"] == listed["price_per_hour"] and q["source"] == "import:skypilot"
        and q["observed_at"] == FIXED_NOW.isoformat()
        for q in history
    )  # fmt: skip


def test_history_table_lists_each_import_as_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(options, "now", lambda: FIXED_NOW - timedelta(hours=2))
    import_sample()
    monkeypatch.setattr(options, "now", lambda: FIXED_NOW)
    import_sample()

    run = invoke("prices", "history", *A2_ULTRA_8G_SPOT_IN_US_CENTRAL1)

    rows = [line for line in run.out.splitlines() if "import:skypilot" in line]
    assert len(rows) == 2
    assert "2025-05-31 22:00" in rows[0]
    assert "2025-06-01 00:00" in rows[1]


def test_importing_the_same_file_twice_at_once_keeps_one_history_row() -> None:
    import_sample()
    import_sample()

    history = invoke("prices", "history", *A2_ULTRA_8G_SPOT_IN_US_CENTRAL1, "--json").json()

    assert len(history) == 1


def test_history_with_an_empty_cache_says_how_to_fill_it() -> None:
    run = invoke("prices", "history", "--cloud", "aws", "--instance-type", "p4d.24xlarge")

    assert run.code == 0
    assert "route prices refresh" in run.out
    p4d = ("--cloud", "aws", "--instance-type", "p4d.24xlarge", "--json")
    assert invoke("prices", "history", *p4d).json() == []


def test_import_of_a_file_that_is_not_a_skypilot_catalog_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bogus = tmp_path / "gcp" / "prices.csv"
    bogus.parent.mkdir()
    bogus.write_text("name,price\nfoo,1.0\n")

    run = route(monkeypatch, capsys, "prices", "import", bogus, "--format", "skypilot")

    assert run.code == 2
    assert len(run.err_lines) == 1
    assert run.err_lines[0].startswith(f"error: {bogus}: ")
    assert "InstanceType" in run.err


def test_import_of_a_missing_file_is_one_error_line_and_stores_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    before = prices("--clouds", "gcp")

    run = route(
        monkeypatch, capsys, "prices", "import", tmp_path / "vms.csv", "--format", "skypilot"
    )

    assert run.code == 2
    assert len(run.err_lines) == 1
    assert "no such file" in run.err
    assert prices("--clouds", "gcp") == before


def test_import_needs_a_format(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "prices", "import", SKYPILOT_GCP_SAMPLE)

    assert run.code == 2
    assert "--format" in run.err


# --- refresh ------------------------------------------------------------------------------------


def test_refresh_without_credentials_fails_in_one_line_and_keeps_the_cache_usable(
    home: Path, tmp_path: Path
) -> None:
    import_sample()  # something in the cache that must survive
    kept = prices("--clouds", "gcp")

    run = route_process(
        "prices", "refresh", "--clouds", "aws", "--timeout", "2", cwd=tmp_path, home=home
    )

    assert run.code == 1
    assert "Traceback" not in run.out + run.err
    lines = [line for line in (run.out + run.err).splitlines() if line.strip()]
    assert len(lines) == 2, lines  # prices, then quotas (read alongside)
    assert "aws" in lines[0]
    assert "credentials" in lines[0]
    assert lines[1].startswith("aws quotas") and "credentials" in lines[1]
    after = route_process("prices", "--clouds", "gcp", "--json", cwd=tmp_path, home=home)
    assert after.code == 0
    assert {(r["instance_type"], r["source"], r["price_per_hour"]) for r in after.json()} == {
        (r["instance_type"], r["source"], r["price_per_hour"]) for r in kept
    }


def test_refresh_json_reports_the_error_per_cloud(home: Path, tmp_path: Path) -> None:
    run = route_process(
        "prices", "refresh", "--clouds", "aws", "--timeout", "2", "--json", cwd=tmp_path, home=home
    )

    assert run.code == 1
    [outcome] = run.json()
    assert set(outcome) == {
        "cloud", "regions", "instance_types", "quotes_stored", "elapsed_s", "error", "warnings",
        "quota_readings_stored", "quota_error",
    }  # fmt: skip
    assert outcome["cloud"] == "aws"
    assert outcome["quotes_stored"] == 0
    assert outcome["instance_types"] > 0
    assert "credentials" in outcome["error"]
    assert "Traceback" not in run.err


def test_refresh_unknown_cloud_is_bad_input_before_any_api_call(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "prices", "refresh", "--clouds", "ibm")

    assert run.code == 2
    assert run.err_lines == ["error: --clouds: unknown cloud 'ibm' — use one of aws, gcp, azure"]


def test_refresh_regions_that_match_nothing_list_the_known_ones(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "prices", "refresh", "--clouds", "aws", "--regions", "mars-*")

    assert run.code == 2
    assert len(run.err_lines) == 1
    assert "us-east-1" in run.err


def test_refresh_for_a_gpu_the_asked_clouds_do_not_offer_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    run = route(monkeypatch, capsys, "prices", "refresh", "--clouds", "aws", "--gpu", "A10")

    assert run.code == 2
    assert len(run.err_lines) == 1
    assert run.err_lines[0].startswith("error: --gpu: ")
    assert "A10" in run.err
