"""route watch's observation feeds the shared decide(): deadline at risk → on-demand, ahead
again → back to spot, a dead process → re-place, a finished job → stay (no engine involved)."""

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

TRACE = (
    "at,region,market,price_per_hour,capacity\n"
    "0s,local-a,spot,1.00,4\n0s,local-a,on-demand,3.00,4\n0s,local-b,spot,1.05,4\n"
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    (tmp_path / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    (tmp_path / "spotroute.yaml").write_text(
        "clouds: [local]\nlocal_market: {trace: trace.csv, start: '2026-01-01T00:00:00Z'}\n"
    )
    (tmp_path / "trace.csv").write_text(TRACE)
    return Project(tmp_path)


@pytest.fixture
def sleeper() -> Iterator[str]:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stat = Path(f"/proc/{proc.pid}/stat").read_text()
    ticks = stat[stat.rindex(")") + 2 :].split()[19]
    yield f"local-process:{proc.pid}:{ticks}"
    proc.kill()
    proc.wait()


def _record(
    project: Project, market: str, group: str, started: datetime, deadline: str,
    checkpoint_at: datetime | None = None,
) -> dict[str, object]:  # fmt: skip
    job_file = project.root / "job.yaml"
    job_file.write_text(
        "name: dl\nresources: {accelerators: 'T4:1', clouds: [local]}\nmarket: auto\n"
        f"duration_hours: 10\ndeadline: '{deadline}'\n"
        "checkpoint: {interval: 30m, restore_overhead: 10m}\nrun: {command: [/bin/true]}\n"
    )
    ckpt = project.root / "ckpt"
    d = ckpt / "step-000000000001"
    d.mkdir(parents=True, exist_ok=True)
    blob = b"{}"
    (d / "state.json").write_bytes(blob)
    crc = f"{zlib.crc32(blob):08x}"
    (d / "manifest.json").write_text(json.dumps({
        "format": "spotroute-checkpoint/1", "step": 1,
        "time": (checkpoint_at or started).isoformat(), "world_size": 1, "job_id": "dl",
        "mode": "files", "files": [{"path": "state.json", "size": 2, "crc32": crc}]}))  # fmt: skip
    price = 3.0 if market == "on-demand" else 1.0
    return {"job": "dl", "cloud": "local", "region": "local-a", "zone": None,
            "instance_type": "local-process", "market": market, "price_per_hour": price,
            "stack": "dl", "deployed_at": started.isoformat(), "submitted_at": started.isoformat(),
            "run_h_before": 0.0, "job_file": str(job_file),
            "outputs": {"groupId": group, "checkpointUrl": f"file://{ckpt}/"}}  # fmt: skip


def test_a_deadline_at_risk_moves_spot_to_on_demand(project: Project, sleeper: str) -> None:
    now = datetime.now(UTC)
    started = now - timedelta(hours=1)
    # 10 h of work, 1 h done, deadline in 9.5 h: hardly any slack left
    record = _record(project, "spot", sleeper, started, (now + timedelta(hours=9.5)).isoformat())
    seen = observe(project, record, now)
    assert not seen.current.interrupted and seen.progress.total_h == 10
    d = decide(seen.rules, seen.progress, seen.current, seen.candidates, History(), now)
    assert d.action == "switch-market" and d.target is not None
    assert d.target.market == "on-demand" and d.numbers.slack_h is not None


def test_route_watch_weighs_the_notice_window_as_work_at_risk_as_the_backtest_does(
    project: Project, sleeper: str
) -> None:
    from router.config.datafiles import load_startup_figures
    from router.core.decision_model import work_at_risk_s

    now = datetime.now(UTC)
    started = now - timedelta(hours=1)
    # 9 h of work left, checkpointed just now, deadline in 9.75 h: slack 0.58 h after the
    # restore onto on-demand. Losing a whole 30-minute interval on spot would not fit in it
    # (on-demand now); the library's save on the local target's 30-s notice (SIGTERM) does.
    record = _record(
        project, "spot", sleeper, started, (now + timedelta(hours=9.75)).isoformat(), now
    )
    seen = observe(project, record, now)
    notice_s = load_startup_figures()["local"].notice_s
    assert seen.rules.checkpoint_interval_s == notice_s == 30.0
    # The backtest's job_rules calls the same rule with the workload's notice leads.
    assert work_at_risk_s(1800.0, {"local": notice_s}, ["local"]) == notice_s
    d = decide(seen.rules, seen.progress, seen.current, seen.candidates, History(), now)
    assert d.action == "stay" and not d.commit_on_demand, d.reason


def test_ahead_of_the_deadline_on_demand_goes_back_to_spot(project: Project, sleeper: str) -> None:
    now = datetime.now(UTC)
    started = now - timedelta(hours=2)
    record = _record(project, "on-demand", sleeper, started, (now + timedelta(days=3)).isoformat())
    seen = observe(project, record, now)
    d = decide(seen.rules, seen.progress, seen.current, seen.candidates, History(), now)
    assert d.action == "switch-market" and d.target is not None and d.target.market == "spot"
    assert "back to spot" in d.reason


def test_a_gone_process_is_re_placed_outside_its_zone(project: Project) -> None:
    now = datetime.now(UTC)
    # gone after an hour, with a checkpoint of that hour: ahead of the line, so spot again
    record = _record(project, "spot", "local-process:999999:1", now - timedelta(hours=1),
                     (now + timedelta(days=3)).isoformat(), checkpoint_at=now)  # fmt: skip
    seen = observe(project, record, now)
    assert seen.current.interrupted
    d = decide(seen.rules, seen.progress, seen.current, seen.candidates, History(), now)
    assert d.action == "replace" and d.target is not None and d.target.region == "local-b"
    (project.root / "ckpt" / "finished.json").write_text('{"step": 9}')
    assert observe(project, record, now).finished


def _cloud_record(project: Project, now: datetime) -> dict[str, object]:
    record = _record(project, "spot", "fleet-1", now - timedelta(hours=1),
                     (now + timedelta(days=3)).isoformat(), checkpoint_at=now)  # fmt: skip
    return {**record, "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
            "instance_type": "g4dn.xlarge"}  # fmt: skip


def test_a_node_the_cloud_reclaimed_is_an_interruption_and_the_job_is_re_placed(
    project: Project,
) -> None:
    from router.nodes.node_state import LOST, RUNNING, Node, NodeState

    now = datetime.now(UTC)
    record = _cloud_record(project, now)
    asked: list[object] = []

    def reclaimed(r: dict[str, object]) -> NodeState:
        asked.append(r["outputs"])
        return NodeState("aws", "fleet-1", 2, (
            Node("i-1", RUNNING, "running"),
            Node("i-2", LOST, "terminated (Server.SpotInstanceTermination)", reclaimed=True),
        ))  # fmt: skip

    seen = observe(project, record, now, reclaimed)
    assert asked and seen.current.interrupted
    assert seen.nodes is not None and "reclaimed by the cloud" in seen.nodes["reason"]
    d = decide(seen.rules, seen.progress, seen.current, seen.candidates, History(), now)
    assert d.action == "replace" and d.target is not None and d.target.cloud == "local"

    healthy = observe(project, record, now, lambda r: NodeState("aws", "fleet-1", 1, (
        Node("i-1", RUNNING, "running"),)))  # fmt: skip
    assert not healthy.current.interrupted


def test_a_failed_node_poll_is_noted_and_is_not_an_interruption(project: Project) -> None:
    from router.core.errors import CredentialsMissing

    now = datetime.now(UTC)

    def no_credentials(r: dict[str, object]) -> None:
        raise CredentialsMissing("AWS credentials not found — run `aws configure sso`")

    seen = observe(project, _cloud_record(project, now), now, no_credentials)
    assert not seen.current.interrupted
    assert seen.nodes is not None and seen.nodes["interrupted"] is False
    assert seen.nodes["error"] == "AWS credentials not found — run `aws configure sso`"


def _exit(project: Project, node: str, status: int, marker: bool, at: datetime) -> None:
    """An exit record as a cloud node's start-up script writes it (components/node_exit.py)."""
    (project.root / "ckpt" / f"exit-{node}.json").write_text(json.dumps({
        "format": "spotroute-exit/1", "node": node, "status": status,
        "interruption_marker": marker, "job": "dl", "placement": "dl",
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ")}))  # fmt: skip


def _lost(reclaimed: bool) -> object:
    from router.nodes.node_state import LOST, NodeState
    from router.nodes.node_state import Node as CloudNode

    detail = ("terminated (Server.SpotInstanceTermination)" if reclaimed
              else "terminated (Client.InstanceInitiatedShutdown)")  # fmt: skip
    return lambda r: NodeState("aws", "fleet-1", 1, (CloudNode("i-1", LOST, detail, reclaimed),))


def test_a_node_that_crashed_by_itself_is_not_re_placed(project: Project) -> None:
    now = datetime.now(UTC)
    record = _cloud_record(project, now)
    # The job failed; the node powered itself off (EC2 state reason
    # Client.InstanceInitiatedShutdown: "The instance was shut down from the operating system of
    # the instance", https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_StateReason.html).
    _exit(project, "ip-10-42-0-5", 1, False, now - timedelta(minutes=5))

    seen = observe(project, record, now, _lost(reclaimed=False))

    assert seen.current.interrupted and seen.current.crashed is not None
    assert "status 1 (no interruption marker)" in seen.current.crashed
    d = decide(seen.rules, seen.progress, seen.current, seen.candidates, History(), now)
    assert d.action == "crashed" and d.target is None


@pytest.mark.parametrize(
    ("status", "marker", "reclaimed"),
    [(1, True, False),  # torchrun's 1 for a worker that saved on a notice: the marker tells
     (75, False, False),  # the library's own exit after a notice
     (1, False, True)],  # EC2 said Server.SpotInstanceTermination: a reclaim, however it died
)  # fmt: skip
def test_a_node_preempted_is_re_placed(
    project: Project, status: int, marker: bool, reclaimed: bool
) -> None:
    now = datetime.now(UTC)
    record = _cloud_record(project, now)
    _exit(project, "ip-10-42-0-5", status, marker, now - timedelta(minutes=5))

    seen = observe(project, record, now, _lost(reclaimed))

    assert seen.current.interrupted and seen.current.crashed is None
    d = decide(seen.rules, seen.progress, seen.current, seen.candidates, History(), now)
    assert d.action == "replace"


def test_a_group_that_did_not_form_is_re_placed_elsewhere_and_its_zone_blocked(
    project: Project, sleeper: str
) -> None:
    from router.config.blocks import read_blocks
    from router.config.home import spotroute_home
    from router.contract.stack_config import EXIT_GROUP_NOT_FORMED

    now = datetime.now(UTC)
    record = _record(project, "spot", sleeper, now - timedelta(hours=1),
                     (now + timedelta(days=3)).isoformat(), checkpoint_at=now)  # fmt: skip
    # The node's storage stayed unwritable (or a peer never came): the start-up script's own
    # status, written to its exit record before the node powered off.
    _exit(project, "node-0", EXIT_GROUP_NOT_FORMED, False, now - timedelta(minutes=5))

    seen = observe(project, record, now, lambda r: None)

    assert seen.current.interrupted and seen.current.crashed is None
    assert seen.exits == ["node node-0: its group did not form (status 69)"]
    [block] = read_blocks(spotroute_home())
    assert (block.cloud, block.region, block.zone) == ("local", "local-a", "local-a")
    assert block.reason.startswith("GroupDidNotForm: node node-0: its group did not form")
    assert {c.region for c in seen.candidates} == {"local-b"}
    d = decide(seen.rules, seen.progress, seen.current, seen.candidates, History(), now)
    assert d.action == "replace" and d.target is not None and d.target.region == "local-b"
    # Seen again at the next pass: the zone stays blocked once, not escalated to its region.
    observe(project, record, now + timedelta(minutes=1), lambda r: None)
    assert len(read_blocks(spotroute_home())) == 1


def test_a_vm_that_booted_again_after_host_maintenance_is_not_re_placed(project: Project) -> None:
    now = datetime.now(UTC)
    record = {**_cloud_record(project, now), "cloud": "gcp", "region": "us-central1",
              "zone": "us-central1-a", "instance_type": "g2-standard-4", "market": "on-demand"}
    # Host maintenance of an on-demand GPU VM: the job saved on TERMINATE_ON_HOST_MAINTENANCE and
    # exited (marker); with automaticRestart the VM boots again and the start-up script — run at
    # every boot — resumes the job (cloud.google.com/compute/docs/instances/
    # setting-vm-host-options; …/instances/startup-scripts/linux): its boot record follows.
    _exit(project, "sr-dl-vm0", 1, True, now - timedelta(minutes=10))
    assert observe(project, record, now, lambda r: None).current.interrupted

    (project.root / "ckpt" / "boot-sr-dl-vm0.json").write_text(json.dumps({
        "format": "spotroute-boot/1", "node": "sr-dl-vm0", "job": "dl", "placement": "dl",
        "time": (now - timedelta(minutes=6)).strftime("%Y-%m-%dT%H:%M:%SZ")}))  # fmt: skip
    seen = observe(project, record, now, lambda r: None)

    assert not seen.current.interrupted and seen.exits == []
    d = decide(seen.rules, seen.progress, seen.current, seen.candidates, History(), now)
    assert d.action != "replace", "a second copy of a job that runs again"


def test_an_exit_before_this_deployment_is_not_this_ones(project: Project) -> None:
    now = datetime.now(UTC)
    record = _cloud_record(project, now)  # deployed an hour ago
    _exit(project, "ip-10-42-0-5", 1, False, now - timedelta(hours=2))  # the crash before

    seen = observe(project, record, now, lambda r: None)

    assert not seen.current.interrupted and seen.current.crashed is None


def test_every_node_exiting_zero_is_finished_even_without_finished_json(
    project: Project,
) -> None:
    now = datetime.now(UTC)
    record = _cloud_record(project, now)
    _exit(project, "ip-10-42-0-5", 0, False, now - timedelta(minutes=5))

    seen = observe(project, record, now, _lost(reclaimed=False))

    assert seen.finished and seen.finished_step == 1


def test_route_status_says_crashed_until_the_job_is_deployed_again() -> None:
    from router.flows.job_status import _crashed_since_deployed

    crashed = {"at": "2026-12-01T11:00:00+00:00", "action": "crashed", "reason": "crashed: …"}
    assert _crashed_since_deployed(crashed, {"deployed_at": "2026-12-01T10:00:00+00:00"})
    assert not _crashed_since_deployed(crashed, {"deployed_at": "2026-12-01T12:00:00+00:00"})
    assert not _crashed_since_deployed({**crashed, "action": "stay"}, {})


def test_preemptions_route_watch_recorded_price_that_zone_higher(
    project: Project, sleeper: str
) -> None:
    """One interruption model: the records route watch keeps (spot hours up, zones lost) update
    the bucket for the planner's candidates — what decide() compares."""
    from router.engine.records import FileRecords
    from router.flows.watch import _history
    from router.flows.zone_evidence import observed_evidence, recorded_evidence

    now = datetime.now(UTC)
    store = FileRecords(Path(project.root / "home"))
    ran = {"job": "old", "cloud": "local", "region": "local-a", "zone": None, "market": "spot",
           "instance_type": "local-process", "node_count": 1, "price_per_hour": 1.0,
           "started_at": (now - timedelta(hours=10)).isoformat(), "ended_at": now.isoformat()}
    store.put("ended/old/1", ran)
    lost = [[["local", "local-a", "local-a"], (now - timedelta(hours=h)).isoformat(),
             "local-process"] for h in range(1, 10)]  # fmt: skip
    store.put("jobs/old/state", {"lost_zones": lost})
    evidence = observed_evidence(store, now)
    seen = evidence[("local", "local-a", "local-a", "local-process")]
    assert seen.preemptions == 9 and seen.up_h == pytest.approx(10)
    assert recorded_evidence(project, now) == evidence  # route plan reads the same records
    record = _record(project, "spot", sleeper, now - timedelta(hours=1),
                     (now + timedelta(days=3)).isoformat())  # fmt: skip
    plain = {c.region: c.interruptions_per_hour for c in observe(project, record, now).candidates
             if c.market == "spot"}  # fmt: skip
    learned = observe(project, record, now, evidence=evidence, interval_s=30.0)
    rates = {c.region: c.interruptions_per_hour for c in learned.candidates if c.market == "spot"}
    assert rates["local-a"] > 0.5 > plain["local-a"] and rates["local-b"] == plain["local-b"]
    assert learned.rules.decision_period_s == 30.0  # the watch interval is decide()'s period
    # Entries with the instance type (written now) and without (older) are both read back.
    both = {"lost_zones": [lost[0], lost[0][:2]]}
    assert len(_history(both).lost_zones) == 2


def test_the_slack_test_gets_how_fast_the_watcher_acts(project: Project, sleeper: str) -> None:
    """route watch gives decide() its measured pace (router/flows/watch_pace.py): the slowest
    of its last passes as the decision period, its launches' mean as a restart's launch; the
    local target's nodes start within a pass, so nothing is counted before one is measured."""
    now = datetime.now(UTC)
    record = _record(project, "spot", sleeper, now - timedelta(hours=1),
                     (now + timedelta(hours=12)).isoformat())  # fmt: skip
    seen = observe(project, record, now)
    assert seen.rules.launch_s == 0.0 and seen.rules.decision_period_s == 60.0
    seen = observe(project, record, now, interval_s=95.0, launch_s=420.0)
    assert seen.rules.launch_s == 420.0 and seen.rules.decision_period_s == 95.0
    assert seen.rules.restart_h == pytest.approx((420 + 600) / 3600)  # launch + restore
