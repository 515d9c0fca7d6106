"""Issue 29: a crashed job's teardown, below the engine — the record written before anything is
destroyed (router/flows/teardown.py), what `route status` and `route report` make of it. The
real-engine path, kills included: tests/engine/test_crash_teardown_engine.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from router.engine.records import RecordStore, records_for
from router.flows import teardown
from router.flows.report import record_ended, report

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DEPLOYED = NOW - timedelta(hours=3)


@pytest.fixture
def store(tmp_path: Path) -> RecordStore:
    return records_for(f"file://{tmp_path / 'backend'}", tmp_path / "home", is_default=False)


def _placement(job: str = "llm") -> dict[str, Any]:
    return {"job": job, "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
            "instance_type": "g5.xlarge", "market": "spot", "node_count": 2,
            "price_per_hour": 0.5, "stack": f"{job}.2", "deployed_at": DEPLOYED.isoformat(),
            "outputs": {"checkpointUrl": "s3://acme/llm/", "groupId": "fleet-1"}}  # fmt: skip


WHY = "node ip-10-0-0-7 exited with status 1 (no interruption marker)"


def test_a_teardown_is_open_from_its_record_until_it_is_done(store: RecordStore) -> None:
    begun = teardown.begin(store, _placement(), teardown.CRASHED, WHY, NOW)

    assert teardown.open_teardowns(store) == ["llm"], "a watcher dying here leaves it to the next"
    assert (begun.stack, begun.checkpoints, begun.placement["node_count"]) == (
        "llm.2", "s3://acme/llm/", 2)  # fmt: skip

    done = teardown.finish(store, begun, 14, NOW + timedelta(minutes=2))

    assert teardown.open_teardowns(store) == []
    [crashed] = teardown.crashed_teardowns(store)
    assert crashed == done and (crashed.deleted, crashed.why) == (14, WHY)
    teardown.finish(store, teardown.begin(store, _placement("b"), "finished", "f", NOW), 3, NOW)
    assert [t.job for t in teardown.crashed_teardowns(store)] == ["llm"]
    store.put(teardown.teardown_key("broken"), {"reason": "crashed"})  # damaged: ignored
    assert [t.job for t in teardown.crashed_teardowns(store)] == ["llm"]
    teardown.forget(store, "llm")
    assert teardown.read(store, "llm") is None


def test_route_report_counts_a_crashed_placement_until_its_teardown_and_says_so(
    store: RecordStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    torn = NOW - timedelta(hours=1)
    begun = teardown.begin(store, _placement(), teardown.CRASHED, WHY, torn)
    record_ended(store, _placement(), torn, "crashed")  # what destroy_job writes
    teardown.finish(store, begun, 14, torn)

    spend = report(now=NOW, records=store)

    [job] = spend.by_job
    assert job.hours == pytest.approx(2.0) and job.cost == pytest.approx(2.0 * 2 * 0.5)
    assert (
        "llm crashed on aws us-east-1 (node ip-10-0-0-7 exited with status 1 (no interruption "
        "marker)): route watch tore its placement down at 2026-12-01 11:00 UTC — counted until "
        "then"
    ) in spend.notes


def test_route_status_lists_a_torn_down_crash_with_its_cost_until_then(store: RecordStore) -> None:
    from router.flows.job_status import _torn_down

    class Records:  # the engine's record store is all _torn_down reads of it
        def records(self) -> RecordStore:
            return store

    done = teardown.finish(store, teardown.begin(store, _placement(), teardown.CRASHED, WHY, NOW),
                           14, NOW)  # fmt: skip

    row = _torn_down(Records(), done, NOW + timedelta(days=1))  # type: ignore[arg-type]

    assert (row.state, row.cloud, row.node_count, row.resources) == ("crashed", "aws", 2, 0)
    assert row.cost_so_far == pytest.approx(3 * 2 * 0.5), "billed until the teardown, not now"
    assert row.torn_down == {"at": NOW.isoformat(), "why": WHY, "checkpoints": "s3://acme/llm/"}


@pytest.mark.parametrize(
    ("cloud", "billed_h"),
    [
        # components/startup.py powers a cloud node off 5 minutes after its job exits (AWS
        # terminates it: instance-initiated shutdown behaviour "terminate", components/aws.py)
        ("aws", 1.0 + 5 / 60),
        ("local", 1.0),  # a local node exits with its job
    ],
)
def test_route_report_ends_a_finished_jobs_bill_when_its_nodes_powered_off(
    store: RecordStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cloud: str,
    billed_h: float,
) -> None:  # fmt: skip
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    finished = DEPLOYED + timedelta(hours=1)
    placement = {**_placement(), "cloud": cloud, "finished_at": finished.isoformat()}
    # torn down two hours after the finish (a watcher that was down): not billed meanwhile
    record_ended(store, placement, finished + timedelta(hours=2), "destroyed")
    store.put("placements/live", {**placement, "job": "live"})  # finished, not yet torn down

    spend = report(now=NOW, records=store)

    hours = {j.job: j.hours for j in spend.by_job}
    assert hours == {"llm": pytest.approx(billed_h), "live": pytest.approx(billed_h)}
    # torn down before the power-off (the usual case on a cloud): billed until the teardown
    early = {**placement, "job": "early"}
    record_ended(store, early, finished + timedelta(minutes=1), "destroyed")
    hours = {j.job: j.hours for j in report(now=NOW, records=store).by_job}
    assert hours["early"] == pytest.approx(min(billed_h, 1.0 + 1 / 60))


def test_a_job_done_before_its_placement_was_recorded_is_shown_at_no_hours(
    store: RecordStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A local job that finished while `pulumi up` still ran: billing starts when the placement
    is recorded, its nodes were off by then — the job and its placement are still reported."""
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    placement = {**_placement(), "cloud": "local", "finished_at": DEPLOYED.isoformat()}
    record_ended(store, placement, DEPLOYED + timedelta(minutes=1), "destroyed")

    [job] = report(now=NOW, records=store).by_job

    assert (job.job, job.placements, job.hours, job.cost) == ("llm", 1, 0.0, 0.0)
