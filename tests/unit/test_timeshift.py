"""Time shifting: a later start is suggested only when history shows it was cheaper."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from router.core.timeshift import suggest_start

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def diurnal(days: int = 14, amplitude: float = 0.3, noise: float = 0.0, seed: int = 1):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    out = []
    t = NOW - timedelta(days=days)
    while t <= NOW + timedelta(hours=3):
        # Peak at 12:00 UTC, trough at 00:00 UTC.
        p = 10 * (1 + amplitude * math.cos(2 * math.pi * (t.hour - 12) / 24))
        out.append((t, p * (1 + rng.uniform(-noise, noise))))
        t += timedelta(hours=1)
    return out


def test_waiting_for_the_nightly_trough_is_suggested_with_its_saving():
    s = suggest_start(
        diurnal(), now=NOW, duration_h=3, latest_start=NOW + timedelta(hours=16), node_count=2
    )
    assert s is not None
    assert 12 <= s.delay_h <= 16  # start between 21:00 and 01:00 UTC
    assert s.expected_saving_pct > 20 and s.bore_out == 1.0 and s.days_compared == 14
    assert s.expected_saving_usd == pytest.approx(
        s.expected_saving_pct / 100 * dict(diurnal())[NOW] * 3 * 2
    )
    assert "cheaper on 100 % of them" in s.reason


def test_flat_prices_mean_start_now():
    flat = [(NOW - timedelta(hours=h), 10.0) for h in range(24 * 14)]
    assert (
        suggest_start(flat, now=NOW, duration_h=3, latest_start=NOW + timedelta(hours=12)) is None
    )


def test_window_limits_the_delay():
    # At 09:00 a 4 h wait mirrors the peak (no saving); from the peak at 12:00 it pays.
    assert (
        suggest_start(diurnal(), now=NOW, duration_h=3, latest_start=NOW + timedelta(hours=4))
        is None
    )
    noon = NOW + timedelta(hours=3)
    history = [(t, p) for t, p in diurnal(days=15) if t <= noon]
    s = suggest_start(history, now=noon, duration_h=3, latest_start=noon + timedelta(hours=4))
    assert s is not None and s.delay_h == 4


def test_no_window_or_no_history_means_start_now():
    assert suggest_start(diurnal(), now=NOW, duration_h=3, latest_start=NOW) is None
    assert suggest_start([], now=NOW, duration_h=3, latest_start=NOW + timedelta(hours=9)) is None


def test_noisy_history_that_rarely_bore_it_out_is_not_suggested():
    s = suggest_start(
        diurnal(amplitude=0.01, noise=0.3, seed=4),
        now=NOW,
        duration_h=2,
        latest_start=NOW + timedelta(hours=6),
        min_saving_pct=5,
    )
    assert s is None or s.bore_out >= 0.5


def test_naive_now_is_refused():
    with pytest.raises(ValueError):
        suggest_start(diurnal(), now=datetime(2026, 12, 1), duration_h=1, latest_start=NOW)


def test_later_start_reads_the_price_cache_history(tmp_path):
    from router.config.datafiles import load_egress, load_interruption_model
    from router.core.offers import Quote
    from router.core.org import OrgConfig
    from router.core.planner import plan
    from router.flows.timeshift import later_start
    from router.prices.cache import QuoteCache
    from tests.unit.planner_factories import job, offer

    cache = tmp_path / "prices.sqlite"
    with QuoteCache(cache) as qc:
        qc.add(
            Quote("aws", "us-east-1", "us-east-1a", "p4de.24xlarge", "spot", p, "aws-api", t)
            for t, p in diurnal()
            if t <= NOW
        )
    spec = job(market="spot", duration_hours=3, deadline=NOW + timedelta(hours=19))
    placement = plan(
        spec,
        [offer(price=10.0, zone="us-east-1a")],
        org=OrgConfig(),
        egress=load_egress(),
        now=NOW,
        interruption=load_interruption_model(),
    ).placements[0]
    s = later_start(spec, placement, now=NOW, cache=cache)
    assert s is not None and 12 <= s.delay_h <= 16 and s.bore_out == 1.0
    no_deadline = job(market="spot", duration_hours=3)
    assert later_start(no_deadline, placement, now=NOW, cache=cache) is None


def test_route_plan_shows_the_later_start_in_the_table_and_the_json(monkeypatch, tmp_path):
    from router.core.offers import Quote
    from router.prices.cache import QuoteCache
    from tests.unit.cli_harness import FIXED_NOW, invoke, isolate, write_job

    home = isolate(monkeypatch, tmp_path)
    home.mkdir(parents=True)
    shift = FIXED_NOW - NOW  # the diurnal history, moved to the CLI's pinned clock
    p4de = "p4de.24xlarge"
    with QuoteCache(home / "prices.sqlite3") as qc:
        qc.add(
            Quote("aws", "us-east-1", "us-east-1a", p4de, "spot", p / 10, "aws-api", t + shift)
            for t, p in diurnal()
            if t <= NOW
        )
    text = (
        "name: night-owl\nresources:\n  accelerators: A100-80GB:8\n  clouds: [aws]\n"
        "  regions: [us-east-1]\nmarket: spot\nduration_hours: 3\ncheckpoint:\n  interval: 30m\n"
        f"deadline: {(FIXED_NOW + timedelta(hours=19)).isoformat()}\n"
        "run:\n  image: ghcr.io/acme/trainer:1.0\n  command: [python, train.py]\n"
    )
    job = write_job(tmp_path / "job.yaml", text)

    data = invoke("plan", job, "--json").json()
    best = data["placements"][0]
    assert (best["zone"], best["instance_type"]) == ("us-east-1a", "p4de.24xlarge")
    assert data["time_shift"] is not None and 12 <= data["time_shift"]["delay_h"] <= 16
    table = invoke("plan", job).out
    assert "later start: starting" in table and data["time_shift"]["reason"][:30] in table

    no_deadline = write_job(tmp_path / "plain.yaml", text.replace("deadline:", "# deadline:"))
    assert invoke("plan", no_deadline, "--json").json()["time_shift"] is None


def _placement_and_cache(tmp_path, series):  # type: ignore[no-untyped-def]
    from router.config.datafiles import load_egress, load_interruption_model
    from router.core.offers import Quote
    from router.core.org import OrgConfig
    from router.core.planner import plan
    from router.prices.cache import QuoteCache
    from tests.unit.planner_factories import job, offer

    cache = tmp_path / "prices.sqlite"
    with QuoteCache(cache) as qc:
        qc.add(
            Quote("aws", "us-east-1", "us-east-1a", "p4de.24xlarge", "spot", p, "aws-api", t)
            for t, p in series
            if t <= NOW
        )
    spec = job(market="spot", duration_hours=3, deadline=NOW + timedelta(hours=19))
    placement = plan(
        spec, [offer(price=10.0, zone="us-east-1a")], org=OrgConfig(), egress=load_egress(),
        now=NOW, interruption=load_interruption_model(),
    ).placements[0]  # fmt: skip
    return placement, cache


@pytest.mark.parametrize("hours_to_deadline", [4.0, 13.6, 15.0, 16.5, 17.0, 19.0, 30.0])
def test_a_later_start_always_leaves_the_deadline_its_margin(tmp_path, hours_to_deadline):
    """Issue 20: never a start the deadline cannot afford — the suggested start plus the work,
    a restore and decide()'s risk (restore + checkpoint interval + period) is by the deadline."""
    from router.core.decide import latest_start
    from router.core.decision_model import rules_for_job
    from router.flows.timeshift import later_start
    from tests.unit.planner_factories import job

    placement, cache = _placement_and_cache(tmp_path, diurnal())
    spec = job(market="spot", duration_hours=3, deadline=NOW + timedelta(hours=hours_to_deadline))
    s = later_start(spec, placement, now=NOW, cache=cache)
    rules = rules_for_job(spec, egress=None)
    margin_h = rules.restore_h + rules.restore_h + (1800 + 60) / 3600  # 10 min restore, 30 min
    assert latest_start(rules, 3) == spec.deadline - timedelta(hours=3 + margin_h)
    if s is not None:
        assert s.start_at + timedelta(hours=3 + margin_h) <= spec.deadline
    if hours_to_deadline <= 3 + margin_h:
        assert s is None  # no window at all
    # With the window the old rule (deadline − duration) gave, 16.5 h out would wait past the
    # margin for the trough at 12-16 h.
    if hours_to_deadline == 16.5:
        assert s is not None and s.delay_h <= 16.5 - 3 - margin_h


def test_on_the_real_flat_spot_price_no_later_start_is_suggested(tmp_path):
    """The one real price series in the shared traces: the preemption traces record p3.2xlarge
    spot at a flat $0.918/h (us-east-1c, us-west-2b, us-west-2c, 7 days of 32 s ticks)."""
    import json
    from pathlib import Path

    # The hourly extract kept in the repository (its source inside), checked against the
    # original where the shared traces are on this machine.
    kept = Path(__file__).parents[1] / "data" / "real-p3-spot-us-east-1c-hourly.json"
    extract = json.loads(kept.read_text())
    original = Path("/work/shared/data/real-traces/preemption/1-node/aws-04-22-2023"
                    "/us-east-1c_v100_1.json")
    if original.exists():
        assert json.loads(original.read_text())["prices"][:: extract["every"]] == extract["prices"]
    gap = extract["gap_seconds"] * extract["every"]
    start = NOW - timedelta(seconds=gap * (len(extract["prices"]) - 1))
    series = [(start + timedelta(seconds=i * gap), p) for i, p in enumerate(extract["prices"])]
    assert {p for _, p in series} == {0.918}
    s = suggest_start(series, now=NOW, duration_h=3, latest_start=NOW + timedelta(hours=20))
    assert s is None
