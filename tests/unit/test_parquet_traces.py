"""Parquet price traces (the CSV's columns), written by pyarrow, read by `route backtest`."""

from __future__ import annotations

import csv
import json
import sys
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from router.config.traces import read_price_csv, read_price_parquet
from router.core.errors import BadInput, OperationFailed
from tests.unit.test_traces_and_commands import SMALL, TRACES, invoke


def csv_rows() -> list[dict[str, str]]:
    with (TRACES / "prices.csv").open() as f:
        return list(csv.DictReader(ln for ln in f if not ln.startswith("#")))


def write_parquet(path: Path, rows: list[dict[str, str]], *, tz: str | None = "UTC") -> Path:
    """The CSV trace as typed Parquet columns: timestamp, float price, bool availability."""
    table = pa.table({
        "time": pa.array([datetime.fromisoformat(r["time"].replace("Z", "+00:00"))
                          .replace(tzinfo=None) for r in rows], pa.timestamp("us", tz=tz)),
        **{c: pa.array([r[c] or None for r in rows], pa.string())
           for c in ("cloud", "region", "zone", "instance_type", "market", "interruption_bucket")},
        "price_per_hour": pa.array([float(r["price_per_hour"]) for r in rows], pa.float64()),
        "available": pa.array([None if r["available"] == "" else r["available"] == "1"
                               for r in rows], pa.bool_()),
    })  # fmt: skip
    pq.write_table(table, path)
    return path


def test_parquet_trace_reads_the_same_points_as_the_csv(tmp_path: Path) -> None:
    got = read_price_parquet(write_parquet(tmp_path / "prices.parquet", csv_rows()))
    want = read_price_csv(TRACES / "prices.csv")
    assert got.points == want.points and got.available == want.available


def test_backtest_on_a_parquet_trace_gives_the_csv_table(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "prices.parquet", csv_rows())
    results = []
    for trace in (TRACES / "prices.csv", path):
        code, out, err = invoke("backtest", str(SMALL), "--prices", str(trace), "--json")
        assert code == 0, err
        data = json.loads(out)
        results.append([(p["name"], p["total_cost"]) for p in data["policies"]])
    assert results[0] == results[1] and len(results[0]) >= 6


def test_parquet_trace_errors_are_one_line_naming_file_row_and_field(tmp_path: Path) -> None:
    rows = csv_rows()
    naive = write_parquet(tmp_path / "naive.parquet", rows, tz=None)
    with pytest.raises(BadInput, match=r"naive\.parquet: row 1: time .* has no timezone"):
        read_price_parquet(naive)
    rows[2]["market"] = "reserved"
    bad = write_parquet(tmp_path / "market.parquet", rows)
    with pytest.raises(BadInput, match=r"market\.parquet: row 3: market 'reserved'"):
        read_price_parquet(bad)
    short = tmp_path / "short.parquet"
    pq.write_table(pa.table({"time": ["2026-11-01T00:00:00Z"], "cloud": ["aws"]}), short)
    with pytest.raises(BadInput, match=r"short\.parquet: columns is missing region, zone"):
        read_price_parquet(short)
    text = tmp_path / "text.parquet"
    text.write_text("time,cloud\n")
    code, _, err = invoke("backtest", str(SMALL), "--prices", str(text))
    assert code == 2 and "text.parquet: not a Parquet file" in err and "\n" not in err.strip()


def test_parquet_without_pyarrow_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_parquet(tmp_path / "prices.parquet", csv_rows())
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # what a missing package raises
    with pytest.raises(OperationFailed, match=r"needs pyarrow — pip install 'spotroute\[parquet"):
        read_price_parquet(path)
