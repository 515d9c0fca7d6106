"""`route backtest` on awkward trace files, through the CLI: each bad input is one line naming the
file and the field, exit 2; a pool that vanishes from a price series is gone once its file moves
on without it (or after an explicit `price_gap`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from router.cli.commands import cli
from router.core.errors import RouteError

HEADER = "time,cloud,region,zone,instance_type,market,price_per_hour\n"


def invoke(*args: str) -> tuple[int, str, str]:
    """Run like router.cli's main does: RouteError → one line on stderr and its exit code."""
    result = CliRunner().invoke(cli, list(args))
    if isinstance(result.exception, RouteError):
        return result.exception.exit_code, result.stdout, f"error: {result.exception.message}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def workload(tmp_path: Path, extra: str = "", days: str = "1", start: str = "2026-11-01") -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(
        f"name: edges\nstart: {start}T00:00:00Z\ndays: {days}\nstep: 1h\n{extra}"
        "jobs:\n  list:\n"
        "    - {name: train, arrival: 5h, duration: 3h, gpus: A100-80GB:8,\n"
        "       checkpoint: {interval: 30m, restore_overhead: 0m}}\n"
    )
    return path


def prices(tmp_path: Path, rows: str, name: str = "p.csv") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + rows)
    return path


SPOT = "aws,us-east-1,us-east-1a,p4de.24xlarge,spot"
OD_EAST = "aws,us-east-1,,p4de.24xlarge,on-demand"
OD_WEST = "aws,us-west-2,,p4de.24xlarge,on-demand"


def one_line_exit_2(code: int, err: str, *parts: str) -> None:
    assert code == 2, err
    assert err.startswith("error: ") and "\n" not in err.strip(), err
    for part in parts:
        assert part in err, (part, err)


# --- defect 6: input edges -------------------------------------------------------------------


def test_a_price_csv_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes((HEADER + f"2026-11-01T00:00:00Z,{SPOT},12.5\n# café\n").encode("latin-1"))
    code, _, err = invoke("backtest", str(workload(tmp_path)), "--prices", str(path))
    one_line_exit_2(code, err, str(path), "line 3", "not UTF-8", "save the file as UTF-8")


@pytest.mark.parametrize("gap", ["NaN", "Infinity", "-Infinity", "1e300", "0", "true"])
def test_availability_gap_seconds_must_be_a_sensible_step(tmp_path: Path, gap: str) -> None:
    cbl = tmp_path / "cbl.json"
    cbl.write_text('{"metadata": {"gap_seconds": ' + gap + '}, "data": [0, 1, 0]}')
    rows = f"2026-11-01T00:00:00Z,{SPOT},12.5\n2026-11-01T00:00:00Z,{OD_EAST},40\n"
    code, _, err = invoke(
        "backtest", str(workload(tmp_path)), "--prices", str(prices(tmp_path, rows)),
        "--availability", str(cbl),
    )  # fmt: skip
    one_line_exit_2(code, err, str(cbl), "metadata.gap_seconds")


@pytest.mark.parametrize("gap", ["1e-6", "1000"])
def test_an_availability_trace_shorter_than_one_step_is_refused(tmp_path: Path, gap: str) -> None:
    # 3 samples of 1e-6 s (or 1000 s) span less than the workload's hourly step: every step
    # would read one aliased sample.
    cbl = tmp_path / "cbl.json"
    cbl.write_text('{"metadata": {"gap_seconds": ' + gap + '}, "data": [0, 1, 0]}')
    rows = f"2026-11-01T00:00:00Z,{SPOT},12.5\n2026-11-01T00:00:00Z,{OD_EAST},40\n"
    code, _, err = invoke(
        "backtest", str(workload(tmp_path)), "--prices", str(prices(tmp_path, rows)),
        "--availability", str(cbl),
    )  # fmt: skip
    one_line_exit_2(code, err, str(cbl), "metadata.gap_seconds", "less than one step", "3600 s")


def test_availability_whose_step_covers_the_whole_window_is_refused(tmp_path: Path) -> None:
    cbl = tmp_path / "cbl.json"
    cbl.write_text('{"metadata": {"gap_seconds": 86400}, "data": [0, 1, 0]}')
    rows = f"2026-11-01T00:00:00Z,{SPOT},12.5\n2026-11-01T00:00:00Z,{OD_EAST},40\n"
    code, _, err = invoke(
        "backtest", str(workload(tmp_path)), "--prices", str(prices(tmp_path, rows)),
        "--availability", str(cbl),
    )  # fmt: skip
    one_line_exit_2(code, err, str(cbl), "metadata.gap_seconds", "one value")


@pytest.mark.parametrize(
    ("start", "words"), [("2026-10-01", "ends before"), ("2027-03-01", "begins after")]
)
def test_a_window_outside_the_price_data_is_refused(tmp_path: Path, start: str, words: str) -> None:
    rows = "".join(
        f"2026-11-{day:02d}T00:00:00Z,{SPOT},12.5\n2026-11-{day:02d}T00:00:00Z,{OD_EAST},40\n"
        for day in (1, 2, 3)
    )
    path = prices(tmp_path, rows)
    code, _, err = invoke("backtest", str(workload(tmp_path, start=start)), "--prices", str(path))
    one_line_exit_2(code, err, "w.yaml", "start", words, str(path), "2026-11-01")


def test_two_prices_for_the_same_time_and_pool_name_both_lines(tmp_path: Path) -> None:
    rows = (
        f"2026-11-01T00:00:00Z,{SPOT},12.5\n"
        f"2026-11-01T00:00:00Z,{OD_EAST},40\n"
        f"2026-11-01T00:00:00Z,{SPOT},13.0\n"
    )
    path = prices(tmp_path, rows)
    code, _, err = invoke("backtest", str(workload(tmp_path)), "--prices", str(path))
    one_line_exit_2(code, err, str(path), "line 4", "line 2", "price_per_hour", "12.5", "13")
    # The same price twice is only a repeated row.
    same = prices(tmp_path, rows.replace("13.0", "12.5"), "same.csv")
    code, _, err = invoke("backtest", str(workload(tmp_path)), "--prices", str(same))
    assert code == 0, err


def test_two_files_with_different_prices_for_the_same_time_and_pool_are_refused(
    tmp_path: Path,
) -> None:
    a = prices(tmp_path, f"2026-11-01T00:00:00Z,{SPOT},12.5\n2026-11-01T00:00:00Z,{OD_EAST},40\n")
    b = prices(tmp_path, f"2026-11-01T00:00:00Z,{SPOT},14\n", "b.csv")
    code, _, err = invoke("backtest", str(workload(tmp_path)), "--prices", str(a), "--prices",
                          str(b))  # fmt: skip
    one_line_exit_2(code, err, str(b), str(a), "14", "12.5")


def test_an_extra_cell_in_a_row_is_refused(tmp_path: Path) -> None:
    rows = f"2026-11-01T00:00:00Z,{SPOT},12.5\n2026-11-01T00:00:00Z,{OD_EAST},40,oops\n"
    path = prices(tmp_path, rows)
    code, _, err = invoke("backtest", str(workload(tmp_path)), "--prices", str(path))
    one_line_exit_2(code, err, str(path), "line 3", "8 cells", "7")


def test_a_row_one_cell_short_is_reported_as_short(tmp_path: Path) -> None:
    # Not "price_per_hour '' is not a number": the row lacks the cell.
    rows = f"2026-11-01T00:00:00Z,{OD_EAST},40\n2026-11-01T01:00:00Z,{SPOT}\n"
    path = prices(tmp_path, rows)
    code, _, err = invoke("backtest", str(workload(tmp_path)), "--prices", str(path))
    one_line_exit_2(code, err, str(path), "line 3", "short", "6 cells", "names 7",
                    "no price_per_hour")  # fmt: skip
    assert "not a number" not in err


def test_rows_of_unknown_instance_types_are_counted_and_refused_when_nothing_is_left(
    tmp_path: Path,
) -> None:
    rows = (
        f"2026-11-01T00:00:00Z,{SPOT},12.5\n"
        f"2026-11-01T00:00:00Z,{OD_EAST},40\n"
        "2026-11-01T00:00:00Z,aws,us-east-1,us-east-1a,p9.mega,spot,3\n"
        "2026-11-01T01:00:00Z,aws,us-east-1,us-east-1a,p9.mega,spot,3\n"
    )
    path = prices(tmp_path, rows)
    code, out, err = invoke("backtest", str(workload(tmp_path)), "--prices", str(path))
    assert code == 0 and "hindsight optimum" in out
    assert f"warning: {path}: 2 rows dropped" in err and "aws p9.mega" in err
    only = prices(tmp_path, rows.splitlines(keepends=True)[2] + rows.splitlines()[3], "u.csv")
    code, _, err = invoke("backtest", str(workload(tmp_path)), "--prices", str(only))
    one_line_exit_2(code, err, str(only), "all 2 rows", "aws p9.mega", "not in the catalog")


# --- defect 5: a pool that vanishes from a price series --------------------------------------


def vanishing(tmp_path: Path) -> Path:
    """us-east-1 on-demand, the cheaper, listed for the first 2 h only; us-west-2 all day."""
    rows = "".join(f"2026-11-01T{h:02d}:00:00Z,{OD_EAST},30\n" for h in range(2)) + "".join(
        f"2026-11-01T{h:02d}:00:00Z,{OD_WEST},40\n" for h in range(24)
    )
    return prices(tmp_path, rows)


def test_a_pool_without_rows_for_price_gap_is_gone_for_baseline_and_optimum(
    tmp_path: Path,
) -> None:
    path = vanishing(tmp_path)
    code, out, err = invoke(
        "backtest", str(workload(tmp_path, "price_gap: 1h\n")), "--prices", str(path), "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    cost = {p["name"]: p["total_cost"] for p in data["policies"]}
    # The job arrives at 5 h: us-east-1 stopped being listed at 1 h, so only us-west-2 is left.
    assert cost["on-demand"] == pytest.approx(3 * 40.0)
    assert cost["optimum"] == pytest.approx(3 * 40.0)
    # --price-gap overrides the workload: never gone, the old last price holds.
    code, out, _ = invoke(
        "backtest", str(workload(tmp_path, "price_gap: 1h\n")), "--prices", str(path), "--json",
        "--price-gap", "never",
    )  # fmt: skip
    assert code == 0
    assert json.loads(out)["policies"][0]["total_cost"] == pytest.approx(3 * 30.0)


def test_by_default_a_pool_is_gone_once_its_file_moves_on_without_it(tmp_path: Path) -> None:
    # us-east-1 is listed at 0 h and 1 h, then the file goes on hourly with us-west-2 alone: it
    # is gone from 2 h (the file's own cadence), not a week later.
    path = vanishing(tmp_path)
    code, out, _ = invoke("backtest", str(workload(tmp_path)), "--prices", str(path), "--json")
    assert code == 0 and json.loads(out)["policies"][0]["total_cost"] == pytest.approx(3 * 40.0)
    # `price_gap: cadence` says the same; `never` holds its last price.
    code, out, _ = invoke("backtest", str(workload(tmp_path, "price_gap: cadence\n")),
                          "--prices", str(path), "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["policies"][0]["total_cost"] == pytest.approx(3 * 40.0)
    code, out, _ = invoke("backtest", str(workload(tmp_path)), "--prices", str(path), "--json",
                          "--price-gap", "never")  # fmt: skip
    assert code == 0 and json.loads(out)["policies"][0]["total_cost"] == pytest.approx(3 * 30.0)


def long_workload(tmp_path: Path, arrivals_h: tuple[int, ...], days: int = 45) -> Path:
    """Jobs of 3 h on on-demand p4de arriving at the given hours of a long window."""
    jobs = "".join(
        f"    - {{name: j{h}, arrival: {h}h, duration: 3h, gpus: A100-80GB:8,\n"
        "       checkpoint: {interval: 30m, restore_overhead: 0m}}\n"
        for h in arrivals_h
    )
    path = tmp_path / "long.yaml"
    path.write_text(
        f"name: long\nstart: 2026-11-01T00:00:00Z\ndays: {days}\nstep: 1h\n"
        f"jobs:\n  list:\n{jobs}"
    )
    return path


def test_a_file_with_one_row_per_pool_keeps_every_pool_for_the_whole_window(
    tmp_path: Path,
) -> None:
    # A catalog export: one row per pool, a constant list price. The file never moves on, so
    # nothing is gone — jobs on day 10 and day 40 run like the one on day 1 (a fixed week of
    # price_gap dropped every pool on day 7: 2 of 3 jobs "not placeable").
    path = prices(tmp_path, f"2026-11-01T00:00:00Z,{OD_EAST},30\n")
    code, out, err = invoke(
        "backtest", str(long_workload(tmp_path, (24, 240, 960))), "--prices", str(path), "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["unplaceable"] == [] and data["jobs_ran"] == 3
    assert data["policies"][0]["total_cost"] == pytest.approx(3 * 3 * 30.0)


def test_jobs_that_could_not_run_head_the_table_fill_the_json_and_fail_the_run(
    tmp_path: Path,
) -> None:
    # An explicit week of price_gap over a file with one row per pool: the jobs after day 7
    # find nothing priced. The totals are over the one job that ran, and every output says so.
    path = prices(tmp_path, f"2026-11-01T00:00:00Z,{OD_EAST},30\n")
    w = long_workload(tmp_path, (24, 240, 960))
    code, out, err = invoke("backtest", str(w), "--prices", str(path), "--price-gap", "7d")
    assert code == 1
    first = out.splitlines()[0]
    assert first.startswith("2 of 3 jobs could not run (j240, j960: 2 no A100-80GB×8 pool is")
    assert "savings over the 1 that ran" in first
    assert "1 of 3 jobs ran" in out
    assert err.startswith("error: 2 of 3 jobs could not run") and err.count("\n") == 1
    code, out, err = invoke(
        "backtest", str(w), "--prices", str(path), "--price-gap", "7d", "--json"
    )
    assert code == 1
    data = json.loads(out)
    assert data["jobs"] == 3 and data["jobs_ran"] == 1
    assert data["unplaceable"] == ["j240", "j960"]
    assert data["unplaceable_reasons"] == [
        {"job": "j240", "reason": "no A100-80GB×8 pool is priced at its arrival"},
        {"job": "j960", "reason": "no A100-80GB×8 pool is priced at its arrival"},
    ]
    assert data["could_not_run"].startswith("2 of 3 jobs could not run")
    assert data["policies"][0]["total_cost"] == pytest.approx(3 * 30.0)


def test_a_history_sampled_every_two_weeks_holds_its_pools_between_samples(
    tmp_path: Path,
) -> None:
    # Rows every 14 days (a price history sampled fortnightly): each price holds until the next
    # sample, on every day of the window.
    rows = "".join(
        f"2026-{m:02d}-{d:02d}T00:00:00Z,{OD_EAST},{price}\n"
        for m, d, price in ((11, 1, 30), (11, 15, 32), (11, 29, 34), (12, 13, 36))
    )
    path = prices(tmp_path, rows)
    code, out, err = invoke(
        "backtest", str(long_workload(tmp_path, (24 * 10, 24 * 24, 24 * 40))), "--prices",
        str(path), "--json",
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert data["unplaceable"] == []
    assert data["policies"][0]["total_cost"] == pytest.approx(3 * (30.0 + 32.0 + 34.0))


def test_a_pool_missing_from_daily_catalogs_is_gone_until_it_is_listed_again(
    tmp_path: Path,
) -> None:
    # Daily rows; the cheap us-east-1 is missing on days 3 and 4 (listed on days 1, 2 and 5):
    # a job on day 3 runs in us-west-2, one on day 5 in us-east-1 again.
    rows = "".join(
        f"2026-11-{d:02d}T00:00:00Z,{OD_WEST},40\n"
        + (f"2026-11-{d:02d}T00:00:00Z,{OD_EAST},30\n" if d not in (3, 4) else "")
        for d in range(1, 8)
    )
    path = prices(tmp_path, rows)
    w = long_workload(tmp_path, (24 * 2 + 2, 24 * 4 + 2), days=7)
    code, out, err = invoke("backtest", str(w), "--prices", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["policies"][0]["total_cost"] == pytest.approx(3 * 40.0 + 3 * 30.0)


def test_rows_of_one_refresh_spread_over_minutes_are_one_round() -> None:
    from datetime import UTC, datetime, timedelta

    from router.core.backtest_model import Pool
    from router.core.trace_cadence import listed_at, listed_spans

    start = datetime(2026, 11, 1, tzinfo=UTC)
    east = Pool("aws", "us-east-1", None, "p4de.24xlarge", "on-demand", "A100-80GB", 8)
    west = Pool("aws", "us-west-2", None, "p4de.24xlarge", "on-demand", "A100-80GB", 8)
    # Hourly refreshes, us-west-2 read 5 minutes after us-east-1; us-east-1 stops at 3 h.
    points = [(start + timedelta(hours=h), east, 30.0) for h in range(4)] + [
        (start + timedelta(hours=h, minutes=5), west, 40.0) for h in range(10)
    ]
    spans = listed_spans(points)
    for minutes in range(1, 4 * 60 + 5, 7):
        assert listed_at(spans[east], start + timedelta(minutes=minutes)), minutes
        assert listed_at(spans[west], start + timedelta(minutes=minutes + 5))
    # Gone from the first round without it (4 h 05), not before.
    assert spans[east] == ((None, start + timedelta(hours=4, minutes=5)),)
    assert not listed_at(spans[east], start + timedelta(hours=4, minutes=6))


def test_price_gap_errors_name_the_field(tmp_path: Path) -> None:
    path = vanishing(tmp_path)
    w = workload(tmp_path, "price_gap: soon\n")
    code, _, err = invoke("backtest", str(w), "--prices", str(path))
    one_line_exit_2(code, err, "w.yaml", "price_gap", "never")
    code, _, err = invoke("backtest", str(workload(tmp_path)), "--prices", str(path),
                          "--price-gap", "0")  # fmt: skip
    one_line_exit_2(code, err, "--price-gap", "positive")


def test_a_running_placement_on_a_pool_that_vanishes_is_interrupted(tmp_path: Path) -> None:
    # The only on-demand pool stops being listed while the baseline runs on it: it stops there,
    # and the policy re-places on what is left (here: nothing) instead of paying a price of nan.
    rows = "".join(f"2026-11-01T{h:02d}:00:00Z,{OD_EAST},30\n" for h in range(7))
    path = prices(tmp_path, rows)
    code, out, err = invoke(
        "backtest", str(workload(tmp_path, "price_gap: 30m\n")), "--prices", str(path), "--json"
    )
    assert code == 0, err
    base = json.loads(out)["policies"][0]
    assert base["interruptions"] == 1 and base["unfinished"] == 1
    assert base["total_cost"] == pytest.approx(2 * 30.0)  # hours 5 and 6, then gone


def test_the_table_says_when_the_baseline_could_not_run(tmp_path: Path) -> None:
    # Spot in a region where no on-demand p4de is offered (not in the trace, not in the
    # bundled snapshot): the baseline cannot run, so no savings are claimed against it.
    rows = "2026-11-01T00:00:00Z,aws,us-east-2,us-east-2a,p4de.24xlarge,spot,12.5\n"
    code, out, err = invoke("backtest", str(workload(tmp_path)), "--prices",
                            str(prices(tmp_path, rows)))  # fmt: skip
    assert code == 0, err
    assert "could not run 1 of 1 jobs (train" in out and "no savings against it" in out
    assert "n/a" in out


def test_trace_from_points_drops_a_pool_after_the_gap_unless_its_prices_are_held() -> None:
    from datetime import UTC, datetime, timedelta

    from router.core.backtest_model import Pool, trace_from_points

    start = datetime(2026, 11, 1, tzinfo=UTC)
    seen = Pool("aws", "us-east-1", "us-east-1a", "p4de.24xlarge", "spot", "A100-80GB", 8)
    held = Pool("aws", "us-east-1", "us-east-1b", "p4de.24xlarge", "spot", "A100-80GB", 8)
    points = [
        (start + timedelta(hours=2), seen, 10.0),  # first row at 2 h, last at 3 h
        (start + timedelta(hours=3), seen, 11.0),
        (start + timedelta(hours=2), held, 12.0),
    ]
    t = trace_from_points(
        points, step_s=3600.0, start=start, end=start + timedelta(hours=8),
        stale_after_s=3600.0, held={held},
    )  # fmt: skip
    by = dict(zip(t.pools, t.prices, strict=True))
    nan = float("nan")
    # Back-filled one gap before its first row only; gone once its last row is over an hour old.
    assert str(by[seen]) == str((nan, 10.0, 10.0, 11.0, 11.0, nan, nan, nan))
    assert by[held] == (12.0,) * 8


# --- SkyPilot catalog series: rows the importer dropped are counted, with why ---------------

SKYPILOT_AWS = Path(__file__).resolve().parents[1] / "data" / "skypilot" / "aws" / "vms.csv"


def dated_catalog(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "2026-11-01" / "aws" / "vms.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def h100_workload(tmp_path: Path) -> Path:
    path = tmp_path / "h.yaml"
    path.write_text(
        "name: sky\nstart: 2026-11-01T00:00:00Z\ndays: 1\nstep: 1h\njobs:\n  list:\n"
        "    - {name: train, arrival: 2h, duration: 3h, gpus: H100:8}\n"
    )
    return path


def test_rows_a_skypilot_catalog_drops_are_one_warning_line_with_counts_and_reasons(
    tmp_path: Path,
) -> None:
    catalog = dated_catalog(tmp_path, SKYPILOT_AWS.read_text())
    code, _, err = invoke("backtest", str(h100_workload(tmp_path)), "--prices", str(catalog))
    assert code == 0, err
    lines = [line for line in err.splitlines() if "rows dropped" in line]
    # The 12-row fixture has CPU types, nan / N/A / 0 / -1 prices and a repeated row: one line,
    # the total equal to the sum of the counts per reason.
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith(f"warning: {catalog}: ") and " rows dropped — " in line
    total = int(line.split(": ")[2].split(" rows dropped")[0])
    counted = sum(int(part.split(" ", 1)[0]) for part in line.split(" — ", 1)[1].split("; "))
    assert total == counted and total >= 5
    assert "price is zero or negative" in line and "no price (empty, nan or N/A)" in line


def test_a_skypilot_catalog_with_no_usable_row_says_why_in_one_line(tmp_path: Path) -> None:
    rows = SKYPILOT_AWS.read_text().splitlines(keepends=True)
    only_bad = rows[0] + rows[1] + "".join(r for r in rows if ",0.0,0.0," in r or "nan,nan" in r)
    catalog = dated_catalog(tmp_path, only_bad)
    code, _, err = invoke("backtest", str(h100_workload(tmp_path)), "--prices", str(catalog))
    one_line_exit_2(code, err, str(catalog), "no usable prices", "3 rows dropped",
                    "price is zero or negative", "not a GPU type")  # fmt: skip


def test_a_workload_saves_on_each_clouds_notice_unless_told_not_to(tmp_path: Path) -> None:
    from router.config.workload import load_workload

    got = dict(load_workload(workload(tmp_path)).workload.notice_s)
    assert got["aws"] == 120.0 and got["gcp"] == 30.0 and got["azure"] == 30.0
    assert load_workload(workload(tmp_path, "save_on_notice: false\n")).workload.notice_s == ()
    code, _, err = invoke("backtest", str(workload(tmp_path, "save_on_notice: maybe\n")))
    one_line_exit_2(code, err, "w.yaml", "save_on_notice", "true or false")
