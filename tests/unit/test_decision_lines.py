"""How a decision reads (issue 32 item 13): a move that would lose money says what it would cost,
never "saves $-1.30"; `route watch`, `route status` and `--history` print the action once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from router.cli import render_deploy, render_status
from router.core.decide import decide
from router.core.decision_model import STAY, Current, History, Progress, Rules
from router.flows.job_status import JobStatus
from router.flows.watch import JobReport
from tests.unit.test_decide import Cap

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RULES = Rules(
    min_savings_pct=20, cooldown_s=3600, checkpoint_interval_s=1800, restore_overhead_s=600,
    handover_s=0,
)  # fmt: skip


def _stay_on_the_cheaper_placement() -> tuple[str, float]:
    here = Cap(zone="us-east-1a", price_per_hour=10.0)
    dearer = Cap(zone="us-east-1b", price_per_hour=10.2)  # the only other placement costs more
    progress = Progress(2.0, 2.0, 10.0, NOW - timedelta(hours=2))
    d = decide(RULES, progress, Current(here, NOW - timedelta(hours=2)), [here, dearer],
               History(), NOW)  # fmt: skip
    assert d.action == STAY and d.numbers.saving_usd is not None
    return d.reason, d.numbers.saving_usd


def test_a_move_that_would_lose_money_says_what_it_would_cost_not_a_negative_saving() -> None:
    reason, saving = _stay_on_the_cheaper_placement()

    assert saving < 0
    assert "saves $-" not in reason and "saves" not in reason
    assert f"would cost ${-saving:,.2f} more" in reason


def test_a_saving_still_reads_as_a_saving() -> None:
    here, there = Cap(price_per_hour=10.0), Cap(zone="us-east-1b", price_per_hour=6.0)
    progress = Progress(2.0, 2.0, 10.0, NOW - timedelta(hours=2))
    d = decide(RULES, progress, Current(here, NOW - timedelta(hours=2)), [here, there],
               History(), NOW)  # fmt: skip
    assert d.numbers.saving_usd is not None and d.numbers.saving_usd > 0
    assert f"saves ${d.numbers.saving_usd:,.2f}" in d.reason
    assert "would cost" not in d.reason


def test_route_watch_prints_the_action_once(capsys: pytest.CaptureFixture[str]) -> None:
    reason, _ = _stay_on_the_cheaper_placement()

    render_deploy.watch_report(JobReport("train", "stay", reason))

    line = capsys.readouterr().out.strip()
    assert line.startswith("train: stay — ") and "stay: " not in line, line
    assert line.count("stay") == 1, line


def test_route_status_and_its_history_print_the_action_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reason, _ = _stay_on_the_cheaper_placement()
    decision = {"at": NOW.isoformat(), "by": "route watch", "action": "stay", "reason": reason}
    status = JobStatus("train", "running", "aws", "us-east-1", "us-east-1a", "p4de.24xlarge",
                       "spot", 1, 10.0, 9.0, NOW, 20.0, 3, last_decision=decision)  # fmt: skip

    render_status.status_table([status], NOW)
    render_status.history({"job": "train", "decisions": [decision], "journals": []})

    out = capsys.readouterr().out
    assert "stay: stay" not in out and "stay: us-east" not in out
    rows = [line for line in out.splitlines() if "route watch" in line or "stay:" in line]
    assert rows and all(line.count("stay") == 1 for line in rows), out
    assert "would cost $" in out
