"""What the first rehearsals (route rehearse) found in route watch, each held by a test:

- a job without a deadline re-placed onto on-demand at once when spot was gone: the watcher
  ignored job.yaml `migration.spot_wait` (the backtest's deadline-aware policy waits);
- on a local market with an accelerated clock, the lost-zone block, the hand-over and the
  notice lead were counted in real time, not on the market's clock;
- a placement whose nodes were gone was billed until the watcher's next successful action
  (re-placement or teardown): it now records when it saw them gone (`lost_at`), and route
  report ends the placement there;
- a finished job was billed until the watcher had its stack destroyed (`slow teardown`, minutes
  to hours of a loaded watcher), where a cloud node powers itself off 5 minutes after its job
  (components/startup.py) and a local node exits with it: the watcher now records when the job
  finished (`finished_at`), and route report ends the placement when its nodes powered off.
"""

from __future__ import annotations

import json
import subprocess
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from router.config.project import Project
from router.core.decide import decide
from router.core.decision_model import History
from router.flows.watch import observe

# local-a's spot is out (withdrawn: the rehearsal's market), on-demand is there.
TRACE = (
    "at,region,market,price_per_hour,capacity\n"
    "0s,local-a,spot,1.00,4\n0s,local-a,on-demand,3.00,4\n1s,local-a,spot,-,-\n"
)


def _project(root: Path, monkeypatch: pytest.MonkeyPatch, extra: str = "") -> Project:
    monkeypatch.setenv("SPOTROUTE_HOME", str(root / "home"))
    (root / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    (root / "spotroute.yaml").write_text(
        "clouds: [local]\nlocal_market: {trace: trace.csv, start: '2026-01-01T00:00:00Z'"
        f"{extra}}}\n"
    )
    (root / "trace.csv").write_text(TRACE)
    return Project(root)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    return _project(tmp_path, monkeypatch)


@pytest.fixture
def sleeper() -> Iterator[str]:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stat = Path(f"/proc/{proc.pid}/stat").read_text()
    ticks = stat[stat.rindex(")") + 2 :].split()[19]
    yield f"local-process:{proc.pid}:{ticks}"
    proc.kill()
    proc.wait()


def _record(project: Project, group: str, started: datetime) -> dict[str, object]:
    """A spot placement of a 10-hour job without a deadline, checkpointed at `started`."""
    job_file = project.root / "job.yaml"
    job_file.write_text(
        "name: nd\nresources: {accelerators: 'T4:1', clouds: [local]}\nmarket: auto\n"
        "duration_hours: 10\ncheckpoint: {interval: 30m, restore_overhead: 10m}\n"
        "run: {command: [/bin/true]}\n"
    )
    d = project.root / "ckpt" / "step-000000000001"
    d.mkdir(parents=True, exist_ok=True)
    (d / "state.json").write_bytes(b"{}")
    (d / "manifest.json").write_text(json.dumps({
        "format": "spotroute-checkpoint/1", "step": 1, "time": started.isoformat(),
        "world_size": 1, "job_id": "nd", "mode": "files",
        "files": [{"path": "state.json", "size": 2,
                   "crc32": f"{zlib.crc32(b'{}'):08x}"}]}))  # fmt: skip
    return {"job": "nd", "cloud": "local", "region": "local-a", "zone": None,
            "instance_type": "local-process", "market": "spot", "price_per_hour": 1.0,
            "stack": "nd", "deployed_at": started.isoformat(), "submitted_at": started.isoformat(),
            "run_h_before": 0.0, "job_file": str(job_file),
            "outputs": {"groupId": group,
                        "checkpointUrl": f"file://{project.root / 'ckpt'}/"}}  # fmt: skip


def test_a_job_without_a_deadline_waits_for_spot_as_its_spot_wait_allows(project: Project) -> None:
    now = datetime.now(UTC)
    # its process is gone and no spot is offered anywhere: the job may finish 12 h late
    # (migration.spot_wait's default), so it waits for spot rather than buying on-demand
    record = _record(project, "local-process:999999:1", now - timedelta(hours=1))
    seen = observe(project, record, now)
    assert seen.current.interrupted and seen.rules.spot_wait_s == 12 * 3600
    assert {(c.region, c.market) for c in seen.candidates} == {("local-a", "on-demand")}
    d = decide(seen.rules, seen.progress, seen.current, seen.candidates, History(), now)
    assert d.action == "wait", d.reason


def test_on_an_accelerated_market_its_zones_notice_and_hand_over_run_on_its_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeper: str
) -> None:
    project = _project(tmp_path, monkeypatch, ", profile: aws, time_scale: 400")
    now = datetime.now(UTC)
    seen = observe(project, _record(project, sleeper, now - timedelta(minutes=1)), now)
    # a zone lost is out for an hour and a hand-over takes 5 minutes of the market's clock
    assert seen.rules.zone_block_s == pytest.approx(3600 / 400)
    assert seen.rules.handover_s == pytest.approx(300 / 400)
    # AWS's two-minute notice (router/data/node_startup.csv), on that clock, is what a
    # preemption costs the job that saves on it: not the local target's own 30 s
    assert seen.rules.checkpoint_interval_s == pytest.approx(120 / 400)


def test_a_placement_seen_lost_is_recorded_so_and_billed_until_then(project: Project) -> None:
    from router.engine.records import FileRecords
    from router.flows.report import read_segments
    from router.flows.watch import Watcher

    started = datetime.now(UTC) - timedelta(hours=1)
    records = FileRecords(project.root / "home")
    records.put("placements/nd", _record(project, "local-process:999999:1", started))
    watcher = Watcher(project, interval_s=60)
    [report] = watcher.once(["nd"])
    assert report.action == "wait", report.reason
    lost = records.get("placements/nd")
    assert lost is not None and lost["lost_at"] >= started.isoformat()
    [segment] = read_segments(records)
    assert segment.ended_at == datetime.fromisoformat(lost["lost_at"])
    # seen again: the first sighting stays
    watcher.once(["nd"])
    assert records.get("placements/nd")["lost_at"] == lost["lost_at"]  # type: ignore[index]


def test_a_re_placed_job_counts_the_hours_it_ran_up_to_the_loss_not_to_the_switch(
    tmp_path: Path,
) -> None:
    """route watch's progress estimate (run_h_before) after a re-placement: the hours between
    the loss and the new placement resuming (the engine bringing it up) were no work."""
    from types import SimpleNamespace

    from router.core.journal import Journal
    from router.engine.job_records import JobRecords
    from router.engine.records import FileRecords
    from router.flows.migrate import Mover

    records = FileRecords(tmp_path)
    now = datetime.now(UTC)
    place = {"cloud": "local", "region": "local-a", "zone": None, "market": "spot",
             "instance_type": "local-process", "price_per_hour": 1.0}  # fmt: skip
    records.put("placements/nd", {**place, "job": "nd", "stack": "nd", "run_h_before": 0.5,
                                  "deployed_at": (now - timedelta(hours=3)).isoformat(),
                                  "lost_at": (now - timedelta(hours=2)).isoformat()})  # fmt: skip
    journal = Journal("r-1", "nd", "replace", "nd", "nd.2", place, "lost", now.isoformat())
    engine = SimpleNamespace(records=lambda: records)
    mover = Mover(None, engine, "me", JobRecords(records))  # type: ignore[arg-type]
    mover._switch_record(journal, {"placement": place, "outputs": {}})
    moved = records.get("placements/nd")
    assert moved is not None and moved["stack"] == "nd.2"
    assert moved["run_h_before"] == pytest.approx(1.5, abs=1e-3)


def test_a_launch_the_accelerated_market_refused_blocks_its_zone_on_that_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Half an hour of the market's clock (router.core.failover.ZONE_BLOCK_S), not half a real
    hour: on a 400× rehearsal that would be the zone out for the rest of the week."""
    from types import SimpleNamespace

    from router.config.org_file import org_config_for
    from router.core.failover import ZONE_BLOCK_S, classify_launch_error
    from router.flows.launch import _block, _clock_scale

    project = _project(tmp_path, monkeypatch, ", profile: aws, time_scale: 400")
    failure = classify_launch_error("LocalCapacityExhausted: local region local-a has none")
    assert failure is not None
    place = SimpleNamespace(cloud="local", region="local-a", zone=None)
    scale = _clock_scale(org_config_for(project), project, place)  # type: ignore[arg-type]
    block = _block(tmp_path / "home", failure, place, scale)  # type: ignore[arg-type]
    assert (block.until - block.at).total_seconds() == pytest.approx(ZONE_BLOCK_S / 400)
    elsewhere = SimpleNamespace(cloud="aws", region="us-east-1", zone="us-east-1a")
    assert _clock_scale(org_config_for(project), project, elsewhere) == 1.0  # type: ignore[arg-type]


def test_a_finished_job_is_billed_until_its_nodes_powered_off_not_until_its_teardown(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from router.engine.records import FileRecords
    from router.flows import watch
    from router.flows.report import read_segments
    from router.flows.watch import Watcher

    started = datetime.now(UTC) - timedelta(hours=2)
    finished = started + timedelta(hours=1)
    records = FileRecords(project.root / "home")
    records.put("placements/nd", _record(project, "local-process:999999:1", started))
    (project.root / "ckpt" / "finished.json").write_text(
        json.dumps({"step": 1, "time": finished.isoformat()})
    )
    seen: list[dict[str, object]] = []

    def tear_down(self: Watcher, job: str, pending: object) -> watch.JobReport:
        # what the teardown finds: the live record as the pass left it (the engine's part,
        # destroying and writing the ended record, is tests/engine/test_watch_engine.py's)
        seen.append(dict(records.get(f"placements/{job}") or {}))
        return watch.JobReport(job, "finished", "torn down")

    monkeypatch.setattr(Watcher, "_tear_down", tear_down)
    [report] = Watcher(project, interval_s=60).once(["nd"])

    assert report.action == "finished", report.reason
    assert seen and seen[0]["finished_at"] == finished.isoformat()
    [segment] = read_segments(records)
    # a local node exits with its job: nothing bills after the finish, an hour before now
    assert segment.ended_at == finished


def test_a_finished_record_without_a_time_or_from_a_clock_ahead_is_taken_as_now() -> None:
    from router.flows.node_exits import finished_at

    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    deployed = now - timedelta(hours=3)
    assert finished_at({"step": 4}, [], deployed, now) == now
    ahead = (now + timedelta(minutes=3)).isoformat()
    assert finished_at({"step": 4, "time": ahead}, [], deployed, now) == now
    before = (deployed - timedelta(hours=1)).isoformat()  # a clock behind: not before it began
    assert finished_at({"step": 4, "time": before}, [], deployed, now) == deployed
    assert finished_at({"step": 4, "time": "soon"}, [], deployed, now) == now
