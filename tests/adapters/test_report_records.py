"""`route report` over each record store: placements and ended jobs read from the backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from router.engine.records import RecordStore, records_for
from router.flows.report import ended_record, read_segments, record_ended, report
from tests.backend_servers import SharedBackend

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


@pytest.fixture(params=["file", "s3", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> RecordStore:
    if request.param == "file":
        return records_for(f"file://{tmp_path / 'shared'}", tmp_path / "home", is_default=False)
    backend: SharedBackend = request.getfixturevalue(f"{request.param}_backend")
    return records_for(backend.url, tmp_path / "home", is_default=False)


def placement(job: str, cloud: str, market: str, price: float, hours_ago: float) -> dict:  # type: ignore[type-arg]
    return {
        "job": job, "cloud": cloud, "region": "us-east-1", "zone": "us-east-1a",
        "instance_type": "p4de.24xlarge", "market": market, "gpu": "A100-80GB", "gpu_count": 8,
        "node_count": 1, "price_per_hour": price, "stack": job,
        "deployed_at": (NOW - timedelta(hours=hours_ago)).isoformat(), "outputs": {"groupId": "x"},
    }  # fmt: skip


def test_ended_record_keeps_start_end_price_paid_and_gpu_hours() -> None:
    doc = ended_record(placement("llm", "aws", "spot", 12.5, 4), NOW, "destroyed")
    assert doc["started_at"] == (NOW - timedelta(hours=4)).isoformat()
    assert doc["ended_at"] == NOW.isoformat() and doc["reason"] == "destroyed"
    assert doc["hours"] == pytest.approx(4) and doc["cost"] == pytest.approx(50.0)
    assert doc["gpu_hours"] == pytest.approx(32) and "outputs" not in doc


def test_report_reads_live_and_ended_jobs_from_the_backend(
    store: RecordStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    # A job that ran 10 h on spot and was destroyed 2 h ago; what `route destroy` does:
    ended = placement("eval", "aws", "spot", 10.0, 12)
    store.put("placements/eval", ended)
    record_ended(store, store.get("placements/eval"), NOW - timedelta(hours=2), "destroyed")
    store.delete("placements/eval")
    # Writing the same end twice (a destroy run again) keeps one record.
    record_ended(store, ended, NOW - timedelta(hours=2), "destroyed")
    store.put("placements/llm", placement("llm", "aws", "spot", 12.0, 3))  # still running

    assert sorted(s.job for s in read_segments(store)) == ["eval", "llm"]
    r = report(now=NOW, records=store)
    by_job = {j.job: j for j in r.by_job}
    assert by_job["eval"].hours == pytest.approx(10) and by_job["eval"].cost == pytest.approx(100)
    assert by_job["llm"].hours == pytest.approx(3) and by_job["llm"].cost == pytest.approx(36)
    assert r.total_cost == pytest.approx(136)
    assert r.savings_pct > 50  # against the snapshot's on-demand p4de.24xlarge price
    # --days clips the ended job to the part inside the window
    assert report(now=NOW, days=0.25, records=store).total_cost == pytest.approx(4 * 10 + 3 * 12)


def test_report_with_nothing_recorded_names_the_backend(store: RecordStore) -> None:
    r = report(now=NOW, records=store)
    assert r.total_cost == 0 and store.where in r.notes[0] and "deploy a job first" in r.notes[0]


def test_report_of_a_project_reads_the_org_configs_s3_backend(
    s3_backend: SharedBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from router.config.project import find_project

    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    (tmp_path / "Pulumi.yaml").write_text("name: team\nruntime: python\n")
    (tmp_path / "spotroute.yaml").write_text(f"backend_url: {s3_backend.url}\n")
    teammate = records_for(s3_backend.url, tmp_path / "other-home", is_default=False)
    record_ended(teammate, placement("sweep", "aws", "spot", 8.0, 5), NOW, "destroyed")

    r = report(now=NOW, project=find_project(override=tmp_path))
    assert [(j.job, round(j.cost, 6)) for j in r.by_job] == [("sweep", 40.0)]


def test_local_market_placements_are_measured_against_its_on_demand_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from router.config.project import Project

    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    (tmp_path / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    (tmp_path / "spotroute.yaml").write_text(
        "clouds: [local]\nlocal_market: {start: '2026-12-01T00:00:00Z', offers: ["
        "{region: local-a, market: spot, price_per_hour: 1.0, capacity: 1},"
        "{region: local-a, market: on-demand, price_per_hour: 4.0, capacity: 1}]}\n"
    )
    project = Project(tmp_path)
    store = records_for(f"file://{tmp_path / 'shared'}", tmp_path / "home", is_default=False)
    local = {**placement("train", "local", "spot", 1.0, 2), "region": "local-a",
             "zone": None, "instance_type": "local-process"}  # fmt: skip
    store.put("placements/train", local)

    r = report(now=NOW, records=store, project=project)
    assert r.total_cost == pytest.approx(2.0) and r.total_baseline == pytest.approx(8.0)
    assert not any("no on-demand price known" in n for n in r.notes)
    # Without the project's market the local target has no on-demand price: no saving claimed.
    bare = report(now=NOW, records=store)
    assert bare.total_baseline == pytest.approx(2.0)
    assert any("no on-demand price known for local local-process" in n for n in bare.notes)
