"""`route report` counts the hand-over overlap of a move: both placements are paid from the new
stack's up until the old stack is down (issue 24 item 6), read from the records and journals
route migrate writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from router.cli.commands import cli
from router.core.journal import STEPS, Journal
from router.engine.job_records import JobRecords
from router.engine.records import FileRecords, RecordStore
from router.flows.report import Segment, handover_segments, record_ended, report, summarise

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DEPLOYED = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
UP = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)  # the new stack is up: the new one is paid
SWITCH = UP + timedelta(minutes=5)  # resume confirmed: the placement record moves on
DOWN = SWITCH + timedelta(minutes=3)  # the old stack is down: the old one is no longer paid

OLD_PRICE, NEW_PRICE, NODES = 10.0, 6.0, 2  # USD per instance-hour, nodes of the group


def place(cloud: str, price: float, stack: str, at: datetime) -> dict[str, Any]:
    return {
        "job": "llm", "cloud": cloud, "region": "us-east-1", "zone": "us-east-1a",
        "instance_type": "p4de.24xlarge", "market": "spot", "node_count": NODES,
        "price_per_hour": price, "on_demand_price_per_hour": 40.0, "stack": stack,
        "deployed_at": at.isoformat(), "outputs": {"groupId": stack},
    }  # fmt: skip


def journal(
    outcome: str, until: str, times: dict[str, datetime], *, kind: str = "migrate"
) -> Journal:
    """A journal whose steps up to `until` are done at `times[step]` (else at the intent)."""
    j = Journal("m-1", "llm", kind, "llm", "llm.2", {**place("gcp", NEW_PRICE, "llm.2", UP)},  # type: ignore[arg-type]
                "test", DEPLOYED.isoformat())  # fmt: skip
    for step in STEPS[: STEPS.index(until) + 1]:
        at = times.get(step, UP - timedelta(minutes=1))
        j = j.begin(step, at).finish(step, at)
    if outcome == "rolled-back":
        j = j.start_rollback("test").rolled_back(times["rollback"])
    return j


def moved(store: RecordStore, j: Journal) -> None:
    """What route migrate leaves once resume-confirmed switched the record (migrate.py)."""
    before = place("aws", OLD_PRICE, "llm", DEPLOYED)
    record_ended(store, before, SWITCH, "migrated")
    store.put("placements/llm", place("gcp", NEW_PRICE, "llm.2", SWITCH))
    JobRecords(store).write_journal(j)


def test_a_completed_move_counts_both_placements_from_new_stack_up_to_old_stack_down(
    tmp_path: Path,
) -> None:
    store = FileRecords(tmp_path)
    times = {"new-stack-up": UP, "resume-confirmed": SWITCH, "old-stack-down": DOWN, "done": DOWN}
    moved(store, journal("done", "done", times))
    r = report(now=NOW, records=store)
    (llm,) = r.by_job
    # 5 min of the new placement before the hand-over, 3 min of the old one after it.
    assert llm.overlap_s == pytest.approx(480)
    five_min_new, three_min_old = NEW_PRICE * NODES * 5 / 60, OLD_PRICE * NODES * 3 / 60
    assert llm.overlap_cost == pytest.approx(five_min_new + three_min_old)
    assert llm.overlap_cost == pytest.approx(2.00)
    recorded = OLD_PRICE * NODES * (SWITCH - DEPLOYED) / timedelta(hours=1) + NEW_PRICE * NODES * (
        NOW - SWITCH
    ) / timedelta(hours=1)
    assert llm.cost == pytest.approx(recorded + 2.00)
    assert llm.placements == 2  # the overlap is time of the same two placements
    # The on-demand job would have run once: no hand-over in the baseline (4 h × 2 × $40).
    assert llm.baseline == pytest.approx(4 * NODES * 40.0)
    assert llm.hours == pytest.approx(4 + 8 / 60)  # placement-hours: both count while both paid
    roles = {h.role: h for h in r.handovers}
    old, new = roles["old"], roles["new"]
    assert (old.role, old.stack, old.started_at, old.ended_at) == ("old", "llm", SWITCH, DOWN)
    assert (new.role, new.stack, new.started_at, new.ended_at) == ("new", "llm.2", UP, SWITCH)
    assert sum(d.cost for d in r.by_day) == pytest.approx(r.total_cost)
    doc = r.to_json()
    assert doc["by_job"][0]["overlap_s"] == pytest.approx(480)
    assert doc["by_job"][0]["overlap_cost"] == pytest.approx(2.00)
    assert {(h["stack"], h["role"], h["seconds"]) for h in doc["handovers"]} == {
        ("llm", "old", 180.0),
        ("llm.2", "new", 300.0),
    }


def test_an_old_stack_not_yet_down_is_paid_until_now(tmp_path: Path) -> None:
    """A router killed in old-stack-down: the old stack still exists and is still paid."""
    store = FileRecords(tmp_path)
    j = journal("open", "resume-confirmed", {"new-stack-up": UP, "resume-confirmed": SWITCH})
    moved(store, j.begin("old-stack-down", SWITCH))
    (llm,) = report(now=NOW, records=store).by_job
    old_s = (NOW - SWITCH).total_seconds()
    assert llm.overlap_s == pytest.approx(300 + old_s)
    assert llm.overlap_cost == pytest.approx(1.00 + OLD_PRICE * NODES * old_s / 3600)


def test_a_new_stack_brought_up_by_a_killed_router_is_paid_from_its_first_run(
    tmp_path: Path,
) -> None:
    """Killed after new-stack-up acted (before it was marked done), the router's next run an hour
    later finds the stack up and marks it done then: the new placement was paid since the first
    run began, not since the re-run (an upper bound by the length of one `up`)."""
    store = FileRecords(tmp_path)
    first = UP - timedelta(hours=1)
    j = journal("done", "checkpoint-complete", dict.fromkeys(STEPS, first - timedelta(minutes=1)))
    j = j.begin("new-stack-up", first)  # the killed run: begun, acted, never done
    j = j.begin("new-stack-up", UP).finish("new-stack-up", UP)  # the re-run an hour later
    assert Journal.from_json(json.loads(json.dumps(j.to_json()))) == j
    assert j.steps["new-stack-up"].first_begun_at == first.isoformat()
    for step, at in (("checkpoint-copied", UP), ("resume-confirmed", SWITCH),
                     ("old-stack-down", DOWN), ("done", DOWN)):  # fmt: skip
        j = j.begin(step, at).finish(step, at)
    assert j.steps["resume-confirmed"].first_begun_at is None  # run once
    moved(store, j)
    (llm,) = report(now=NOW, records=store).by_job
    assert llm.overlap_s == pytest.approx(3600 + 480)
    assert llm.overlap_cost == pytest.approx(NEW_PRICE * NODES * 1 + 2.00)


def test_a_rolled_back_move_counts_the_new_placement_while_its_stack_was_up(
    tmp_path: Path,
) -> None:
    store = FileRecords(tmp_path)
    store.put("placements/llm", place("aws", OLD_PRICE, "llm", DEPLOYED))
    rollback = UP + timedelta(minutes=6)
    j = journal("rolled-back", "checkpoint-copied", {"new-stack-up": UP, "rollback": rollback})
    JobRecords(store).write_journal(j)
    r = report(now=NOW, records=store)
    (llm,) = r.by_job
    assert llm.placements == 2  # the placement rolled back was paid for too
    assert llm.overlap_s == pytest.approx(360)
    assert llm.overlap_cost == pytest.approx(NEW_PRICE * NODES * 6 / 60)  # $1.20
    assert llm.cost == pytest.approx(OLD_PRICE * NODES * 4 + 1.20)
    assert [(h.role, h.stack) for h in r.handovers] == [("unrecorded", "llm.2")]


def test_a_replacement_after_a_loss_counts_only_the_new_placement_before_it_took_over(
    tmp_path: Path,
) -> None:
    """A re-placement's old nodes were lost (reclaimed): nothing of them is paid past it."""
    store = FileRecords(tmp_path)
    times = {"new-stack-up": UP, "resume-confirmed": SWITCH, "old-stack-down": DOWN, "done": DOWN}
    moved(store, journal("done", "done", times, kind="replace"))
    (llm,) = report(now=NOW, records=store).by_job
    assert llm.overlap_s == pytest.approx(300) and llm.overlap_cost == pytest.approx(1.00)


def test_a_move_clipped_by_days_counts_only_the_overlap_inside_the_window(tmp_path: Path) -> None:
    store = FileRecords(tmp_path)
    times = {"new-stack-up": UP, "resume-confirmed": SWITCH, "old-stack-down": DOWN, "done": DOWN}
    moved(store, journal("done", "done", times))
    window_h = (NOW - SWITCH).total_seconds() / 3600  # starts at the hand-over
    (llm,) = report(now=NOW, days=window_h / 24, records=store).by_job
    assert llm.overlap_s == pytest.approx(180) and llm.overlap_cost == pytest.approx(1.00)


def test_report_command_shows_the_overlap_in_the_table_and_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path))
    monkeypatch.setattr("router.cli.options.now", lambda: NOW)
    times = {"new-stack-up": UP, "resume-confirmed": SWITCH, "old-stack-down": DOWN, "done": DOWN}
    moved(FileRecords(tmp_path), journal("done", "done", times))
    result = CliRunner().invoke(cli, ["report", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["by_job"][0]["overlap_cost"] == pytest.approx(2.00)
    assert len(data["handovers"]) == 2
    result = CliRunner().invoke(cli, ["report"])
    assert result.exit_code == 0, result.output
    assert "hand-over overlap" in result.stdout and "8.0 min" in result.stdout
    assert "left: hand-over → its stack down" in result.stdout and "3.0 min" in result.stdout


# --- property: any chain of moves -----------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    moves=st.lists(
        st.tuples(
            st.integers(1, 3600),  # s from the last hand-over until the new stack is up
            st.integers(0, 900),  # s from up until the hand-over
            st.integers(0, 900),  # s from the hand-over until the old stack is down
            st.sampled_from([0.5, 1.0, 6.0, 12.5]),  # the new placement's price
        ),
        min_size=1,
        max_size=4,
    ),
    nodes=st.integers(1, 4),
)
def test_moves_add_exactly_their_overlap_to_the_cost_and_nothing_to_the_baseline(
    moves: list[tuple[int, int, int, float]], nodes: int
) -> None:
    """A chain of moves: the report's cost is the recorded spans plus, per move, the new price
    from up to the hand-over and the old price from the hand-over to the old stack's down; the
    baseline and the number of placements are those of the recorded spans alone."""
    start = DEPLOYED
    price, stack = OLD_PRICE, "llm"
    segments: list[Segment] = []
    journals: list[Journal] = []
    expected_s = expected_usd = 0.0
    for i, (to_up, to_switch, to_down, new_price) in enumerate(moves):
        up = start + timedelta(seconds=to_up)
        switch = up + timedelta(seconds=to_switch)
        down = switch + timedelta(seconds=to_down)
        segments.append(Segment("llm", "aws", "us-east-1", "p4de.24xlarge", "spot", nodes, price,
                                start, switch, "migrated", 40.0, stack))  # fmt: skip
        new_stack = f"llm.{i + 2}"
        j = Journal(f"m-{i}", "llm", "migrate", stack, new_stack,
                    {"price_per_hour": new_price}, "test", start.isoformat())  # fmt: skip
        for step in STEPS:
            at = {"new-stack-up": up, "resume-confirmed": switch}.get(step, down)
            j = j.begin(step, at).finish(step, at)
        journals.append(j)
        expected_s += to_switch + to_down
        expected_usd += (new_price * to_switch + price * to_down) * nodes / 3600
        start, price, stack = switch, new_price, new_stack
    segments.append(Segment("llm", "aws", "us-east-1", "p4de.24xlarge", "spot", nodes, price,
                            start, None, "", 40.0, stack))  # fmt: skip
    now = start + timedelta(hours=2)  # after the last old stack's down (≤ 900 s past start)
    alone = summarise(segments, now=now, days=None, on_demand=lambda c, r, t: None)
    extra = handover_segments(segments, journals, now)
    r = summarise(segments + extra, now=now, days=None, on_demand=lambda c, r, t: None)
    (job,) = r.by_job
    assert job.overlap_s == pytest.approx(expected_s)
    assert job.overlap_cost == pytest.approx(expected_usd)
    assert r.total_cost == pytest.approx(alone.total_cost + expected_usd)
    assert r.total_baseline == pytest.approx(alone.total_baseline)
    assert job.placements == len(moves) + 1
    assert sum(h.cost for h in r.handovers) == pytest.approx(expected_usd)
    assert sum(d.cost for d in r.by_day) == pytest.approx(r.total_cost)
