"""The labels route watch's metrics and JSON log use: a reason code for every decision decide()
makes, a job state for every report, the saving counted — bounded sets, never free text."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from router.core.decide import decide
from router.core.decision_model import Current, Decision, History, Progress, Rules
from router.flows.watch import JobReport
from router.flows.watch_events import (
    JOB_STATES,
    REASON_CODES,
    JsonLog,
    job_state,
    reason_code,
    saved_usd,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)
RULES = Rules(min_savings_pct=20, cooldown_s=3600, handover_s=0)


@dataclass(frozen=True)
class Cap:
    zone: str = "us-east-1a"
    price_per_hour: float = 10.0
    market: str = "spot"
    cloud: str = "aws"
    region: str = "us-east-1"
    instance_type: str = "p4de.24xlarge"
    interruptions_per_hour: float = 0.0


def code_of(d: Decision) -> str:
    return reason_code(d.action, d.reason, d.numbers.to_json())


def progress(done: float = 2.0, total: float = 10.0) -> Progress:
    return Progress(done, done, total, NOW - 2 * H)


HERE = Current(Cap(), NOW - 2 * H)
CHEAP = Cap("us-east-1b", 5.0)


@pytest.mark.parametrize(
    ("decision", "action", "code"),
    [
        (decide(RULES, progress(), HERE, [CHEAP], History(), NOW), "move", "cheaper"),
        (decide(RULES, progress(), HERE, [Cap("us-east-1b", 9.5)], History(), NOW),
         "stay", "under-threshold"),
        (decide(RULES, progress(), HERE, [CHEAP], History(last_move_at=NOW - H / 6), NOW),
         "stay", "cooldown"),
        (decide(RULES, progress(), HERE, [Cap()], History(), NOW), "stay", "no-alternative"),
        (decide(RULES, progress(), Current(Cap(), NOW - H, interrupted=True), [CHEAP],
                History(), NOW), "replace", "interrupted"),
        (decide(RULES, progress(0.0), None, [CHEAP], History(), NOW), "replace", "not-placed"),
        (decide(RULES, progress(0.0), None, [], History(), NOW), "wait", "no-capacity"),
        (decide(Rules(deadline=NOW + 8.5 * H), progress(), HERE,
                [CHEAP, Cap(None, 30.0, "on-demand")], History(), NOW),
         "switch-market", "deadline"),
        (decide(RULES, progress(10.0), HERE, [CHEAP], History(), NOW), "stay", "finished"),
    ],
)  # fmt: skip
def test_every_kind_of_decision_gets_its_reason_code(
    decision: Decision, action: str, code: str
) -> None:
    assert decision.action == action, decision.reason
    assert code_of(decision) == code
    assert code in REASON_CODES


@pytest.mark.parametrize(
    ("action", "reason", "code"),
    [
        ("recovered", "finished the open journal of a migrate", "journal-open"),
        ("skipped", "lease held by host:1:2:ab", "lease-held"),
        ("skipped", "no placement recorded (deployed elsewhere?)", "no-record"),
        ("skipped", "job j: the lease was taken over by host:3:4:cd", "lease-lost"),
        ("finished", "finished at step 9", "finished"),
        ("crashed", "crashed: node i-1 exited with status 1 (no interruption marker) — destroyed "
         "its placement (14 resources) so nothing bills", "crashed"),
        ("error", "job j: its job file /x.yaml is gone — redeploy it", "error"),
    ],
)
def test_reports_that_are_not_decisions_get_a_code_too(action: str, reason: str, code: str) -> None:
    assert reason_code(action, reason, None) == code


@pytest.mark.parametrize(
    ("action", "outcome", "reason", "state"),
    [
        ("stay", None, "", "running"),
        ("move", "done", "", "running"),
        ("move", "rolled-back", "", "running"),  # still on the old placement
        ("move", "open", "", "moving"),
        ("replace", "done", "", "running"),
        ("replace", "rolled-back", "", "interrupted"),
        ("recovered", "rolled-back", "finished the open journal of a replace", "interrupted"),
        ("recovered", "done", "finished the open journal of a migrate", "running"),
        ("wait", None, "", "waiting"),
        ("finished", None, "", "finished"),
        ("crashed", None, "", "crashed"),  # not running: torn down, never re-placed
        ("skipped", None, "", "skipped"),
        ("error", None, "", "error"),
    ],
)
def test_a_job_state_follows_the_action_and_its_journal_outcome(
    action: str, outcome: str | None, reason: str, state: str
) -> None:
    assert job_state(action, outcome, reason) == state
    assert state in JOB_STATES


def test_only_a_finished_money_move_counts_as_dollars_saved() -> None:
    move = decide(RULES, progress(), HERE, [CHEAP], History(), NOW).to_json()
    assert move["numbers"]["saving_usd"] > 0

    done = JobReport("j", "move", "m", move, "m-1", "done")
    assert saved_usd(done) == move["numbers"]["saving_usd"]
    assert saved_usd(JobReport("j", "move", "m", move, "m-1", "rolled-back")) == 0.0
    assert saved_usd(JobReport("j", "stay", "s", move)) == 0.0
    replaced = decide(RULES, progress(), Current(Cap(), NOW, True), [CHEAP], History(), NOW)
    assert saved_usd(JobReport("j", "replace", "r", replaced.to_json(), "r-1", "done")) == 0.0


def test_a_log_line_is_one_strict_json_line_even_with_odd_numbers() -> None:
    out = io.StringIO()
    JsonLog(out).emit({"event": "decision", "numbers": {"x": float("nan"), "y": float("inf")},
                       "reason": "a\nb\u2028c"})  # fmt: skip

    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")
    assert json.loads(text) == {"event": "decision", "numbers": {"x": None, "y": None},
                                "reason": "a\nb\u2028c"}  # fmt: skip
