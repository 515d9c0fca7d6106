"""Trace readers, the backtest and report flows, and their click commands (CliRunner)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from router.cli.commands import cli
from router.config.traces import (
    read_availability,
    read_aws_spot_history,
    read_price_csv,
)
from router.config.workload import load_workload
from router.core.errors import BadInput, RouteError
from router.flows.backtest import backtest, read_skypilot_series
from router.flows.report import Segment, read_segments, summarise

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests" / "data" / "traces"
SMALL = ROOT / "examples" / "backtest-small.yaml"
THIRTY_DAYS = ROOT / "examples" / "backtest-30d.yaml"


def invoke(*args: str) -> tuple[int, str, str]:
    """Run like router.cli main does: RouteError → one line on stderr and its exit code."""
    runner = CliRunner()
    result = runner.invoke(cli, list(args))
    if isinstance(result.exception, RouteError):
        return result.exception.exit_code, result.stdout, f"error: {result.exception.message}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


# --- readers -------------------------------------------------------------------------------


def test_cant_be_late_file_loads_unchanged():
    cbl = read_availability(TRACES / "cbl-availability.json")
    assert cbl.gap_s == 3600 and len(cbl.usable) == 24
    assert cbl.usable[3] is False and cbl.usable[0] is True
    assert cbl.prices is not None and cbl.prices[0] == 12.1


def test_describe_spot_price_history_loads_linux_rows_with_regions():
    got = read_aws_spot_history(TRACES / "spot-price-history.json")
    assert len(got.points) == 4  # the Windows row is left out
    pools = {p.zone: p for _, p, _ in got.points}
    assert pools["us-west-2c"].region == "us-west-2"
    assert pools["us-east-1a"].gpu == "A100-80GB" and pools["us-east-1a"].gpu_count == 8


def test_price_csv_reads_prices_availability_and_buckets():
    got = read_price_csv(TRACES / "prices.csv")
    assert len(got.points) == 6
    spot = next(p for _, p, _ in got.points if p.zone == "us-east-1a")
    assert spot.interruption_bucket == ">20%"
    assert [flag for _, flag in got.available[spot]] == [True, False, True]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("time,cloud\n", "line 1: header is missing region"),
        (
            "time,cloud,region,zone,instance_type,market,price_per_hour\n"
            "2026-11-01T00:00:00Z,aws,us-east-1,,p4de.24xlarge,spot,cheap\n",
            "line 2: price_per_hour 'cheap' is not a number",
        ),
        (
            "# comment\ntime,cloud,region,zone,instance_type,market,price_per_hour\n"
            "2026-11-01,aws,us-east-1,,p4de.24xlarge,spot,1\n",
            "line 3: time '2026-11-01' has no timezone",
        ),
        (
            "time,cloud,region,zone,instance_type,market,price_per_hour\n"
            "2026-11-01T00:00:00Z,aws,us-east-1,,p4de.24xlarge,reserved,1\n",
            "line 2: market 'reserved' is not spot or on-demand",
        ),
    ],
)
def test_malformed_csv_gets_one_line_naming_file_line_and_field(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(BadInput) as err:
        read_price_csv(path)
    assert str(path) in err.value.message and message in err.value.message
    assert "\n" not in err.value.message


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"metadata": {"gap_seconds": 600}, "data": [0, 2]}', "data[1]: 2 must be 0"),
        ('{"metadata": {}, "data": [0]}', "gap_seconds: None must be the seconds"),
        ('{"metadata": {"gap_seconds": 60},\n "data": [0,\n', "line 3: not valid JSON"),
        ('{"metadata": {"gap_seconds": 60}, "data": [0], "prices": [1, 2]}', "prices: must be"),
    ],
)
def test_malformed_availability_gets_one_line(tmp_path, content, message):
    path = tmp_path / "cbl.json"
    path.write_text(content)
    with pytest.raises(BadInput) as err:
        read_availability(path)
    assert message in err.value.message and str(path) in err.value.message


def test_malformed_spot_history_names_the_item_and_field(tmp_path):
    path = tmp_path / "spot.json"
    item = {"AvailabilityZone": "us-east-1a", "InstanceType": "p4de.24xlarge", "SpotPrice": "x"}
    item["Timestamp"] = "2026-11-01T00:00:00Z"
    path.write_text(json.dumps({"SpotPriceHistory": [item]}))
    with pytest.raises(BadInput, match=r"SpotPriceHistory\[0\]: SpotPrice 'x' is not a number"):
        read_aws_spot_history(path)


def test_skypilot_series_dates_each_file_by_its_path(tmp_path):
    source = ROOT / "tests" / "data" / "skypilot" / "aws" / "vms.csv"
    with pytest.raises(BadInput, match="no date in the path"):
        read_skypilot_series([source])
    files = []
    for day in ("2026-11-01", "2026-11-02"):
        target = tmp_path / day / "aws" / "vms.csv"
        target.parent.mkdir(parents=True)
        target.write_bytes(source.read_bytes())
        files.append(target)
    got = read_skypilot_series(files)
    days = sorted({at for at, _, _ in got.points})
    assert days == [datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 2, tzinfo=UTC)]
    assert {p.cloud for _, p, _ in got.points} == {"aws"}


def test_workload_errors_name_the_field(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("start: 2026-11-01T00:00:00Z\njobs:\n  list:\n    - {name: a, gpus: A100}\n")
    with pytest.raises(BadInput, match=r"jobs.list\[0\].gpus: .*ambiguous"):
        load_workload(path)


def test_a_workloads_launch_time_is_read_and_bounded(tmp_path):
    path = tmp_path / "w.yaml"
    head = (
        "start: 2026-11-01T00:00:00Z\njobs:\n  list:\n"
        "    - {name: a, gpus: A100-80GB:8, duration: 2h}\n"
    )
    path.write_text(head)
    assert load_workload(path).workload.launch_s == 0.0  # at once, as before
    path.write_text(head + "launch: 3m\n")
    assert load_workload(path).workload.launch_s == 180.0
    for bad, why in (("2d", "more than a day"), ("-1m", "launch"), ("soon", "launch")):
        path.write_text(head + f"launch: {bad}\n")
        with pytest.raises(BadInput, match=why):
            load_workload(path)


def test_thirty_day_example_is_about_200_gpu_hours_a_day():
    wf = load_workload(THIRTY_DAYS)
    hours = sum(j.gpu_hours for j in wf.workload.jobs)
    assert 195 <= hours / wf.days <= 215
    assert wf.market is not None and len(wf.market.shapes) == 2


# --- flows ---------------------------------------------------------------------------------


def test_backtest_runs_on_a_spot_history_file_with_availability():
    report = backtest(
        SMALL,
        prices=[TRACES / "spot-price-history.json"],
        availability=[f"aws/us-east-1/us-east-1a={TRACES / 'cbl-availability.json'}"],
    )
    r = report.result
    # On-demand prices come from the bundled snapshot (the file has spot prices only).
    assert any(p.market == "on-demand" for p in report.trace.pools)
    assert r.policy("optimum").total_cost <= min(p.total_cost for p in r.policies)
    assert r.policy("spot-fallback").interruptions >= 1


def test_backtest_on_price_csv_uses_its_availability_column():
    report = backtest(SMALL, prices=[TRACES / "prices.csv"])
    spot = next(i for i, p in enumerate(report.trace.pools) if p.zone == "us-east-1a")
    assert report.trace.available[spot][6:9] == (False, False, False)


def test_availability_file_given_as_prices_is_refused():
    with pytest.raises(BadInput, match="pass it with --availability"):
        backtest(SMALL, prices=[TRACES / "cbl-availability.json"])


NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def seg(job: str, cloud: str, market: str, price: float, start_h: float, end_h: float | None):  # type: ignore[no-untyped-def]
    return Segment(
        job, cloud, "us-east-1", "p4de.24xlarge", market, 1, price,
        NOW - timedelta(hours=start_h), None if end_h is None else NOW - timedelta(hours=end_h),
    )  # fmt: skip


def test_report_sums_recoveries_and_migrations_against_on_demand():
    segments = [
        seg("llm", "aws", "spot", 10.0, 30, 20),  # preempted after 10 h
        seg("llm", "gcp", "spot", 8.0, 20, None),  # still running: 20 h
        seg("eval", "aws", "on-demand", 40.0, 5, 3),
    ]
    r = summarise(segments, now=NOW, days=None, on_demand=lambda c, r, t: 40.0)
    llm = next(j for j in r.by_job if j.job == "llm")
    assert llm.placements == 2 and llm.hours == pytest.approx(30)
    assert llm.cost == pytest.approx(100 + 160) and llm.baseline == pytest.approx(1200)
    assert r.total_cost == pytest.approx(340) and r.total_baseline == pytest.approx(1280)
    assert {c.cloud for c in r.by_cloud} == {"aws", "gcp"}
    assert sum(d.cost for d in r.by_day) == pytest.approx(340)


def test_report_days_window_clips_placements():
    r = summarise([seg("llm", "aws", "spot", 10.0, 48, None)], now=NOW, days=1,
                  on_demand=lambda c, r, t: 40.0)  # fmt: skip
    assert r.total_cost == pytest.approx(240)


def test_report_without_on_demand_price_claims_no_saving():
    r = summarise([seg("x", "local", "spot", 1.0, 2, None)], now=NOW, days=None,
                  on_demand=lambda c, r, t: None)  # fmt: skip
    assert r.savings_pct == 0 and "no on-demand price known" in r.notes[0]


def test_report_reads_deploy_records_and_their_history(tmp_path):
    from router.engine.records import FileRecords

    folder = tmp_path / "placements"
    folder.mkdir()
    (folder / "llm.json").write_text(json.dumps({
        "job": "llm", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
        "instance_type": "p4de.24xlarge", "market": "spot", "node_count": 1,
        "price_per_hour": 12.0, "deployed_at": "2026-12-01T10:00:00+00:00", "outputs": {},
        "history": [{"cloud": "gcp", "region": "us-central1", "instance_type": "a2-ultragpu-8g",
                     "market": "spot", "price_per_hour": 15.0, "started_at": "2026-12-01T06:00:00Z",
                     "ended_at": "2026-12-01T10:00:00Z", "reason": "preempted"}],
    }))  # fmt: skip
    segments = read_segments(FileRecords(tmp_path))
    assert [s.cloud for s in segments] == ["gcp", "aws"]
    (folder / "bad.json").write_text('{"job": "bad", "deployed_at": "x", "price_per_hour": 1}')
    with pytest.raises(BadInput, match=r"placements/bad: deployed_at: 'x' is not an ISO 8601 time"):
        read_segments(FileRecords(tmp_path))


# --- commands ------------------------------------------------------------------------------


def test_backtest_command_prints_the_policy_table_and_writes_charts(tmp_path):
    png, page = tmp_path / "bt.png", tmp_path / "bt.html"
    code, out, _ = invoke("backtest", str(SMALL), "--prices", str(TRACES / "prices.csv"),
                          "--chart", str(png))  # fmt: skip
    assert code == 0
    assert "hindsight optimum" in out and "single-cloud on-demand" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = invoke("backtest", str(SMALL), "--prices", str(TRACES / "prices.csv"),
                          "--chart", str(page), "--json")  # fmt: skip
    data = json.loads(out)
    assert code == 0 and [p["name"] for p in data["policies"]][-1] == "optimum"
    text = page.read_text()
    assert "data:image/png;base64," in text and "<table>" in text and "http" not in text


def test_backtest_policies_all_adds_the_benchmark_policies_to_the_table_and_json():
    args = ("backtest", str(SMALL), "--prices", str(TRACES / "prices.csv"))
    code, out, _ = invoke(*args, "--json")
    assert code == 0 and "greedy-deadline" not in [p["name"] for p in json.loads(out)["policies"]]
    code, out, _ = invoke(*args, "--policies", "all", "--json")
    names = [p["name"] for p in json.loads(out)["policies"]]
    assert code == 0 and names[-5:] == [
        "greedy-deadline", "skypilot-eager", "skypilot-failover", "skypilot-eager+od", "optimum"
    ]  # fmt: skip
    code, out, _ = invoke(*args, "--policies", "all")
    assert code == 0 and "greedy (spot or wait" in out
    assert "SkyPilot managed job, EAGER_NEXT_REGION (spot)" in out


def test_a_workload_names_its_own_traces_relative_to_itself(tmp_path):
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "p.csv").write_text((TRACES / "prices.csv").read_text())
    (tmp_path / "traces" / "a.json").write_text((TRACES / "cbl-availability.json").read_text())
    text = SMALL.read_text() + (
        "traces:\n  prices: [traces/p.csv]\n"
        "  availability: [aws/us-east-1/us-east-1a=traces/a.json]\n"
    )
    (tmp_path / "w.yaml").write_text(text)
    wf = load_workload(tmp_path / "w.yaml")
    assert wf.prices == (tmp_path / "traces" / "p.csv",)
    assert wf.availability == (f"aws/us-east-1/us-east-1a={tmp_path / 'traces' / 'a.json'}",)
    report = backtest(tmp_path / "w.yaml")  # no --prices: the workload's own
    assert any("p.csv" in s for s in report.sources) and any("a.json" in s for s in report.sources)
    (tmp_path / "bad.yaml").write_text(SMALL.read_text() + "traces: {prices: p.csv}\n")
    with pytest.raises(BadInput, match=r"bad.yaml: traces.prices: must be a list of file names"):
        load_workload(tmp_path / "bad.yaml")


def test_the_real_trace_example_runs_as_it_is_and_keeps_every_deadline():
    """`route backtest examples/backtest-real-2zones.yaml --policies all`: its own traces, every
    policy but the peer keeps every deadline, and route watch's policy is cheaper than greedy."""
    code, out, _ = invoke("backtest", str(ROOT / "examples" / "backtest-real-2zones.yaml"),
                          "--policies", "all", "--json")  # fmt: skip
    assert code == 0
    data = json.loads(out)
    by = {p["name"]: p for p in data["policies"]}
    assert data["jobs"] == 74 and not data["unplaceable"]
    # Every policy but the peer (SkyPilot knows no deadline) keeps every deadline.
    ours = [p for name, p in by.items() if not name.startswith("skypilot-")]
    assert all(p["deadline_misses"] == 0 and p["unfinished"] == 0 for p in ours)
    assert by["deadline-aware"]["total_cost"] < by["greedy-deadline"]["total_cost"]
    # (the spot-only peer can cost less: it finishes days later, docs/backtest.md "The peer")
    assert by["optimum"]["total_cost"] <= min(p["total_cost"] for p in ours)
    assert any("us-west-2a_v100_8.json" in source for source in data["sources"])


def test_the_real_trace_examples_replay_the_shared_traces_unchanged():
    """examples/real-traces are copies of /work/shared/data/real-traces (data kept, prices left
    out); checked against the originals where they are on this machine."""
    shared = Path("/work/shared/data/real-traces")
    copies = sorted((ROOT / "examples" / "real-traces").rglob("*.json"))
    assert len(copies) == 8
    for copy in copies:
        kind = copy.parent.name
        sub = {"availability": "aws-10-26-2022", "preemption": "aws-04-22-2023"}[kind]
        original = shared / kind / "1-node" / sub / copy.name
        mine = json.loads(copy.read_text())
        assert set(mine) == {"metadata", "data"} and mine["data"]
        if original.exists():
            theirs = json.loads(original.read_text())
            assert mine["data"] == theirs["data"] and mine["metadata"] == theirs["metadata"]


def test_backtest_command_bad_input_is_one_line_exit_2(tmp_path):
    code, _, err = invoke("backtest", str(tmp_path / "missing.yaml"))
    assert code == 2 and err.startswith("error: ") and "no such file" in err
    code, _, err = invoke("backtest", str(SMALL), "--chart", "x.svg")
    assert code == 2 and "must end in .png or .html" in err


def test_report_command_on_a_home_with_placements(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path))
    folder = tmp_path / "placements"
    folder.mkdir()
    start = (datetime.now(UTC) - timedelta(hours=3)).isoformat()
    (folder / "llm.json").write_text(json.dumps({
        "job": "llm", "cloud": "aws", "region": "us-east-1", "instance_type": "p4de.24xlarge",
        "market": "spot", "node_count": 1, "price_per_hour": 12.0, "deployed_at": start,
    }))  # fmt: skip
    code, out, _ = invoke("report", "--json", "--out", str(tmp_path / "r.html"))
    data = json.loads(out)
    assert code == 0 and data["by_job"][0]["job"] == "llm"
    assert data["total_cost"] == pytest.approx(36.0, rel=0.01)
    assert data["savings_pct"] > 50  # against the snapshot's on-demand p4de price
    code, out, _ = invoke("report", "--days", "1")
    assert code == 0 and "llm" in out and "saved" in out
