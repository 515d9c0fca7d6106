"""How fast route watch acts, counted by the deadline slack test (router/flows/watch_pace.py,
Rules.launch_s and decision_period_s): a launch spends slack with every restart, and the next
decision may be a slow pass away. The rehearsal found the watcher moving a job from on-demand
back to spot with the slack of an instant launch and a one-second pass, and missing its deadline
when the spot went (docs/rehearsal.md)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from router.config.datafiles import load_startup_figures
from router.core.decide import decide
from router.core.decide_deadline import deadline_slack, return_reserve_h
from router.core.decision_model import MOVE, STAY, SWITCH_MARKET, History
from router.core.journal import Journal, StepRecord, launch_seconds
from router.flows.watch_pace import PASSES_KEPT, WatchPace, boot_prior_s
from tests.unit.test_decide import NOW, RULES, H, od, prog, running, spot

# 2 h of work left on on-demand, deadline 3.5 h away: 1.5 h of slack on on-demand.
RULES_DL = replace(RULES, deadline=NOW + 3.5 * H, decision_period_s=60)
PROGRESS = prog(done=8.0, total=10.0, started_at=NOW - 8 * H)


def test_a_launch_is_counted_with_every_restart_of_the_slack_test() -> None:
    slow = replace(RULES_DL, launch_s=1800)
    on_spot = running(spot(5))
    _, slack, risk = deadline_slack(RULES_DL, PROGRESS, on_spot, NOW)
    _, slack_slow, risk_slow = deadline_slack(slow, PROGRESS, on_spot, NOW)
    assert slack - slack_slow == pytest.approx(0.5)  # getting onto on-demand takes the launch
    assert risk_slow - risk == pytest.approx(0.5)  # and its pad is a restart, launch included
    assert return_reserve_h(slow) - return_reserve_h(RULES_DL) == pytest.approx(1.5)  # 3 of them


def test_on_demand_goes_back_to_spot_only_with_the_slack_of_a_real_launch() -> None:
    here, cands = running(od(20)), [od(20), spot(5)]
    quick = decide(RULES_DL, PROGRESS, here, cands, History(), NOW)
    assert quick.action in (MOVE, SWITCH_MARKET) and quick.target == spot(5)
    slow = decide(replace(RULES_DL, launch_s=1800), PROGRESS, here, cands, History(), NOW)
    assert slow.action == STAY  # a 30-min launch: a preemption there would miss the deadline
    slow_passes = decide(replace(RULES_DL, decision_period_s=3600), PROGRESS, here, cands,
                         History(), NOW)  # fmt: skip
    assert slow_passes.action == STAY  # decided on again only an hour later: too late


def test_the_pace_is_the_slowest_recent_pass_and_the_mean_launch() -> None:
    pace = WatchPace()
    assert pace.decision_period_s(60.0) == 60.0 and pace.launch_s() is None
    assert pace.launch_s(150.0) == 150.0  # nothing measured: the prior
    pace.passed(2.0)
    pace.passed(340.0)
    assert pace.decision_period_s(60.0) == 340.0  # a pass that ran engine steps
    for _ in range(PASSES_KEPT):
        pace.passed(1.0)
    assert pace.decision_period_s(60.0) == 60.0  # the slow pass is no longer recent
    opened = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    for minutes in (4, 6):
        up = (opened + timedelta(minutes=minutes)).isoformat()
        pace.launched(_journal(opened, up))
    pace.launched(_journal(opened, None))  # rolled back before its stack was up: no launch
    assert pace.launch_s(150.0) == pytest.approx(300.0)


def _journal(opened: datetime, up_at: str | None) -> Journal:
    steps = {"new-stack-up": StepRecord("done", opened.isoformat(), up_at)} if up_at else {}
    return Journal("j1", "job", "replace", "job", "job-2", {}, "lost", opened.isoformat(), steps)


def test_a_journal_launch_is_from_its_opening_to_its_new_stack_up() -> None:
    opened = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert launch_seconds(_journal(opened, "2026-12-01T12:07:30Z")) == 450.0
    assert launch_seconds(_journal(opened, None)) is None


def test_before_any_launch_the_clouds_boot_is_the_prior() -> None:
    figures = load_startup_figures()
    # router/data/node_startup.csv: the slowest boot of the clouds the job may launch on.
    assert boot_prior_s(figures, {"aws", "gcp"}) == max(
        figures["aws"].boot_s, figures["gcp"].boot_s
    )
    assert boot_prior_s(figures, {"local"}) == 0.0  # local nodes start within a pass
