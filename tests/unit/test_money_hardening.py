"""Issue 12 items 5-6: every cost finite or the input refused; strict JSON; cache rows checked."""

from __future__ import annotations

import json
import math
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from router.core.errors import BadInput
from router.core.offers import Quote
from router.core.strict_json import dumps, loads_strict
from router.prices.cache import QuoteCache
from tests.unit.cli_harness import FIXED_NOW, isolate, route, write_job

HUGE_ON_DEMAND_JOB = """\
name: huge
resources:
  accelerators: A100-80GB:8
  clouds: [aws]
market: on-demand
duration_hours: {hours}
node_count: 64
run:
  command: [python, train.py]
"""


def _quote(price: float, observed_at: datetime, region: str = "us-east-1") -> Quote:
    return Quote("aws", region, None, "p4de.24xlarge", "on-demand", price, "aws-api", observed_at)


@pytest.mark.parametrize("hours", ["1.0e+308", "1" + "0" * 400, ".inf", ".nan", "1e5"])
def test_duration_that_makes_costs_infinite_is_refused_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, hours: str
) -> None:
    isolate(monkeypatch, tmp_path)
    job = write_job(tmp_path / "job.yaml", HUGE_ON_DEMAND_JOB.format(hours=hours))
    for args in (("plan", job), ("plan", job, "--json"), ("validate", job)):
        run = route(monkeypatch, capsys, *args)
        assert run.code == 2, (args, run)
        assert run.err_lines and "duration_hours" in run.err_lines[0], run.err
        assert "nan" not in run.out.lower() and "infinity" not in run.out.lower()


def test_plan_json_is_strict_and_every_cost_finite(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path)
    job = write_job(tmp_path / "job.yaml", HUGE_ON_DEMAND_JOB.format(hours="87600"))
    run = route(monkeypatch, capsys, "plan", job, "--json")
    assert run.code == 0, run.err
    data = loads_strict(run.out)
    for p in data["placements"]:
        assert all(math.isfinite(p[k]) for k in ("compute_cost", "total_cost", "egress_cost"))


def test_the_one_json_writer_refuses_nan_and_escapes_terminal_controls() -> None:
    with pytest.raises(ValueError):
        dumps({"total": float("nan")})
    text = dumps({"region": "us-\x1b]0;owned\x07east-1\x9b"})
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert json.loads(text)["region"] == "us-\x1b]0;owned\x07east-1\x9b"


def test_cache_refuses_zero_negative_and_non_finite_prices_on_the_way_in(tmp_path: Path) -> None:
    with QuoteCache(tmp_path / "p.sqlite3") as cache:
        stored = cache.add(
            [_quote(p, FIXED_NOW) for p in (-120.0, 0.0, math.nan, math.inf, 1e12)]
            + [_quote(1.0, FIXED_NOW, region="us-\x1b]0;x\x07east-1")]
            + [_quote(32.77, FIXED_NOW)],
            now=FIXED_NOW,
        )
        assert stored == 1 and cache.refused == 6
        assert [q.price_per_hour for q in cache.latest(now=FIXED_NOW)] == [32.77]


def _insert_raw(path: Path, price: object, observed_us: object) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO quotes (cloud, region, zone, instance_type, market, price_per_hour,"
            " source, observed_at_us) VALUES ('aws','us-east-1','','p4de.24xlarge','on-demand',"
            " ?, 'aws-api', ?)",
            (price, observed_us),
        )


@pytest.mark.parametrize(
    ("price", "observed_us", "says"),
    [
        (-120.0, 1_700_000_000_000_000, "cannot be trusted"),
        (0.0, 1_700_000_000_000_000, "cannot be trusted"),
        ("cheap", 1_700_000_000_000_000, "not a number"),
        (3.0, 10**18 * 9, "out of range"),
    ],
)
def test_bad_cache_rows_are_refused_on_the_way_out_with_one_line(
    tmp_path: Path, price: object, observed_us: object, says: str
) -> None:
    path = tmp_path / "p.sqlite3"
    QuoteCache(path).close()
    _insert_raw(path, price, observed_us)
    with QuoteCache(path) as cache, pytest.raises(BadInput) as err:
        cache.latest(now=FIXED_NOW)
    assert says in err.value.message and "\n" not in err.value.message


def test_future_dated_quote_is_clamped_flagged_and_never_hides_a_newer_one(tmp_path: Path) -> None:
    path = tmp_path / "p.sqlite3"
    QuoteCache(path).close()
    future_us = int(
        (FIXED_NOW + timedelta(days=365) - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1e6
    )
    _insert_raw(path, 1.0, future_us)
    with QuoteCache(path) as cache:
        only = cache.latest(now=FIXED_NOW)
        assert only[0].clock_skewed and only[0].observed_at == FIXED_NOW
        cache.add([_quote(30.0, FIXED_NOW - timedelta(hours=1))], now=FIXED_NOW)
        newest = cache.latest(now=FIXED_NOW)
        assert [(q.price_per_hour, q.clock_skewed) for q in newest] == [(30.0, False)]
        # and on the way in, a future quote is stored as observed now, so it ages normally
        cache.add([_quote(2.0, FIXED_NOW + timedelta(days=30), region="us-west-2")], now=FIXED_NOW)
        west = [
            q for q in cache.latest(now=FIXED_NOW + timedelta(days=2)) if q.region == "us-west-2"
        ]
        assert west[0].observed_at == FIXED_NOW


def test_planner_treats_a_clock_skewed_quote_as_stale() -> None:
    from dataclasses import replace

    from router.config.datafiles import load_catalog, load_egress, load_interruption_model
    from router.core.catalog import offers_from_quotes
    from router.core.job.problems import check_data
    from router.core.org import OrgConfig
    from router.core.planner import plan

    job, problems = check_data(
        {
            "name": "j",
            "resources": {"accelerators": "A100-80GB:8", "clouds": ["aws"]},
            "market": "on-demand",
            "duration_hours": 1,
            "run": {"command": ["true"]},
        },
        "job.yaml",
    )
    assert job is not None, problems
    q = replace(_quote(30.0, FIXED_NOW), clock_skewed=True)
    offers = offers_from_quotes([q], load_catalog()).offers
    result = plan(
        job,
        offers,
        org=OrgConfig(),
        egress=load_egress(),
        interruption=load_interruption_model(),
        now=FIXED_NOW,
    )
    assert result.placements[0].stale
    assert any("clock skew" in r for r in result.placements[0].reasons)
    refused = plan(
        job,
        offers,
        org=OrgConfig(),
        egress=load_egress(),
        interruption=load_interruption_model(),
        now=FIXED_NOW,
        require_fresh=True,
    )
    assert not refused.placements
