"""The local target's dynamic providers against real node processes and a real directory."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from components.local import LocalDirectoryProvider, LocalProcessProvider
from components.local_nodes import group_alive, live_records, process_alive, stop_group
from router.contract.local_market import ENV_VAR, LocalBehaviour, LocalMarket, parse_trace
from router.contract.local_node import EXITED, STATE_FILE, NodeRecord, launch_dir_of
from router.nodes.local import poll
from router.nodes.node_state import LOST, RUNNING, STARTING


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Where the router puts the local target's directories (spotroute:local*Dir)."""
    return tmp_path / "home"


@pytest.fixture
def groups() -> Iterator[list[str]]:
    """Group ids a test started: stopped at the end whatever happened."""
    started: list[str] = []
    yield started
    for group in started:
        stop_group(group, grace_s=1.0)


def _props(checkpoint_dir: Path, command: list[str], **extra: object) -> dict[str, object]:
    return {
        "job_name": "quick",
        "sandbox_dir": str(checkpoint_dir.parent / "home" / "sandbox" / "quick"),
        "command": command,
        "env": {"GREETING": "hi"},
        "image": "",
        "checkpoint_url": f"file://{checkpoint_dir}/",
        "market": "spot",
        "labels": {"team": "ml"},
        "checkpoint_interval_s": 90.0,
        "placement": "quick",
        **extra,
    }


def _wait_for(predicate, timeout_s: float = 15.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _records(group: str) -> list[NodeRecord]:
    launch = Path(launch_dir_of(group) or "")
    return [
        NodeRecord.from_text((d / STATE_FILE).read_text()) for d in sorted(launch.glob("node-*"))
    ]


LOOP = [
    "/bin/sh",
    "-c",
    'echo "$GREETING $SPOTROUTE_JOB_ID every $SPOTROUTE_CHECKPOINT_INTERVAL of'
    ' $SPOTROUTE_NODE_COUNT at $HOME"; '
    'while true; do date > "$SPOTROUTE_CHECKPOINT_DIR/step-$$"; sleep 0.2; done',
]


def test_a_group_runs_each_node_in_its_own_sandbox_with_the_job_env_and_stops_on_delete(
    home: Path, tmp_path: Path, groups: list[str]
) -> None:
    checkpoints = tmp_path / "ckpt"
    checkpoints.mkdir()
    provider = LocalProcessProvider()
    ranked = [
        *LOOP[:2],
        'echo "rank $NODE_RANK of $NNODES via $MASTER_ADDR:$MASTER_PORT"; ' + LOOP[2],
    ]
    created = provider.create(_props(checkpoints, ranked, node_count=2, gpu_count=1))
    groups.append(created.id)
    assert created.outs["sandbox"] == str(home / "sandbox" / "quick")
    nodes = _records(created.id)
    assert [(n.node, n.nodes, n.job, n.placement) for n in nodes] == [
        (0, 2, "quick", "quick"),
        (1, 2, "quick", "quick"),
    ]
    assert len({n.node_dir for n in nodes}) == 2  # two machines, two sandboxes
    # Each node has its own live record with its index and phase, found by the market.
    assert _wait_for(lambda: {r.phase for r in live_records(home / "sandbox" / ".running")}
                     == {"running"})  # fmt: skip
    assert sorted(r.node for r in live_records(home / "sandbox" / ".running")) == [0, 1]
    # Both jobs see their checkpoint directory and the job's env, through the start-up script.
    assert _wait_for(lambda: len(list(checkpoints.glob("step-*"))) == 2)
    for node in nodes:
        log = Path(node.node_dir) / "job.log"
        assert _wait_for(lambda log=log: f"hi quick every 90 of 2 at {log.parent}" in
                         log.read_text())  # fmt: skip
    # They formed one group through the rendezvous in the checkpoint directory: a rank each, one
    # master on loopback, on a port of this group's own (hand-over groups share the host).
    ranks = [re.search(r"rank (\d) of 2 via 127\.0\.0\.1:(\d+)",
                       (Path(n.node_dir) / "job.log").read_text()) for n in nodes]  # fmt: skip
    assert all(ranks), [(Path(n.node_dir) / "job.log").read_text() for n in nodes]
    assert sorted(m.group(1) for m in ranks if m) == ["0", "1"]
    assert len({m.group(2) for m in ranks if m}) == 1
    assert sorted(p.name for p in (checkpoints / "rendezvous" / "quick").glob("*.json")) == [
        "node-0.json", "node-1.json"]  # fmt: skip
    assert Path(created.outs["log_path"]) == Path(nodes[0].node_dir) / "job.log"
    assert provider.read(created.id, created.outs).id == created.id
    state = poll(created.id, "local")
    assert (state.wanted, state.running, state.interrupted) == (2, 2, False)

    provider.delete(created.id, created.outs)
    assert not group_alive(created.id)
    # Each node recorded how its job ended (SIGTERM: 143), as a machine that was stopped.
    assert [(r.phase, r.exit_status) for r in _records(created.id)] == [(EXITED, 143)] * 2
    assert live_records(home / "sandbox" / ".running") == []
    assert provider.read(created.id, created.outs).id == ""  # a refresh drops it


def _job_started(log_path: str) -> bool:
    """The node's script formed its group (of one) and went on to the job."""
    log = Path(log_path)
    return log.is_file() and "rendezvous: formed generation" in log.read_text()


def test_a_stop_reaches_the_job_not_the_script_so_the_node_records_the_jobs_status(
    home: Path, tmp_path: Path, groups: list[str]
) -> None:
    saves = ["/bin/sh", "-c", "trap 'sleep 0.3; exit 75' TERM; while true; do sleep 0.1; done"]
    created = LocalProcessProvider().create(_props(tmp_path / "ckpt", saves))
    groups.append(created.id)
    assert _wait_for(lambda: _job_started(created.outs["log_path"]))
    time.sleep(0.3)  # the shell has set its trap
    stop_group(created.id, grace_s=5.0)
    [record] = _records(created.id)
    assert (record.phase, record.exit_status) == (EXITED, 75), record
    assert "job exited with status 75" in Path(created.outs["log_path"]).read_text()


def test_a_job_that_fails_by_itself_leaves_the_exit_record_a_cloud_node_would(
    home: Path, tmp_path: Path, groups: list[str]
) -> None:
    from datetime import timedelta

    from router.config.checkpoints import node_exits
    from router.core.node_exit import crash_of, exits_of

    checkpoints = tmp_path / "ckpt"
    created = LocalProcessProvider().create(_props(checkpoints, ["/bin/sh", "-c", "exit 3"]))
    groups.append(created.id)
    assert _wait_for(lambda: _records(created.id)[0].phase == EXITED)
    [path] = checkpoints.glob("exit-*.json")
    record = json.loads(path.read_text())
    assert (record["format"], record["node"], record["status"], record["group"]) == (
        "spotroute-exit/1", "node-0", 3, created.id)
    assert (record["interruption_marker"], record["placement"]) == (False, "quick")
    # What route watch reads: this group's node crashed — even though it exited before the
    # placement was recorded (its deployed_at is later than the exit).
    later = datetime.now(UTC) + timedelta(minutes=1)
    exits = exits_of(node_exits(checkpoints), "quick", later, group=created.id)
    assert crash_of(exits, reclaimed_by_cloud=False) == (
        "node node-0 exited with status 3 (no interruption marker)")


def test_a_local_job_that_saved_on_a_notice_says_so_in_its_exit_record(
    home: Path, tmp_path: Path, groups: list[str]
) -> None:
    # What router.checkpoint does on a notice: the marker in SPOTROUTE_NODE_DIR, then exit 75.
    saves = ["/bin/sh", "-c", "trap 'echo {} > \"$SPOTROUTE_NODE_DIR/interruption.json\"; exit 1'"
             " TERM; while true; do sleep 0.1; done"]  # fmt: skip
    created = LocalProcessProvider().create(_props(tmp_path / "ckpt", saves))
    groups.append(created.id)
    assert _wait_for(lambda: _records(created.id)[0].phase == "running")
    time.sleep(0.3)  # the shell has set its trap
    stop_group(created.id, grace_s=5.0)
    [path] = (tmp_path / "ckpt").glob("exit-*.json")
    record = json.loads(path.read_text())
    assert (record["status"], record["interruption_marker"]) == (1, True)


def test_a_job_that_ignores_sigterm_is_killed_after_the_grace(
    home: Path, tmp_path: Path, groups: list[str]
) -> None:
    stubborn = ["/bin/sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"]
    created = LocalProcessProvider().create(_props(tmp_path / "ckpt", stubborn))
    groups.append(created.id)
    # A node stopped before its script runs ends by itself (nothing to kill): wait until the
    # job runs and has set its trap, or a loaded machine makes this test pass vacuously or fail.
    assert _wait_for(lambda: _job_started(created.outs["log_path"]))
    time.sleep(0.3)
    [node] = _records(created.id)
    started = time.monotonic()
    _seconds, killed = stop_group(created.id, grace_s=0.5)
    assert killed and not process_alive(node.pid, node.start_ticks)
    assert time.monotonic() - started < 8
    # Killed with its machine: no exit record, so the poller says lost (killed).
    [lost] = poll(created.id, "local").nodes
    assert lost.status == LOST and "killed" in lost.detail


def test_nodes_boot_and_pull_on_the_local_markets_clock_after_create_returned(
    home: Path, tmp_path: Path, groups: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Create returns while the node boots (an EC2 instant fleet returns pending instances); on
    a 600× clock the aws profile's 150 s boot is 0.25 s and a 10 GB pull at 12 s/GB 0.2 s."""
    market = LocalMarket(
        parse_trace("at,region,market,price_per_hour,capacity\n0s,local-a,spot,1,4\n", "t"),
        datetime.now(UTC),
        LocalBehaviour("aws", 600, boot_s=150, pull_s_per_gb=12, image_gb=10, notice_s=120),
    )
    monkeypatch.setenv(ENV_VAR, market.to_env())
    props = _props(tmp_path / "ckpt", LOOP, region="local-a", image="example/train:1")
    created = LocalProcessProvider().create(props)
    groups.append(created.id)
    seen = [poll(created.id, "local").nodes[0]]
    assert seen[0].status == STARTING and seen[0].detail.startswith("booting")
    while seen[-1].detail.split()[0] != "running":
        time.sleep(0.02)
        node = poll(created.id, "local").nodes[0]
        if node.detail != seen[-1].detail:
            seen.append(node)
        assert len(seen) < 10 and seen[-1].status != LOST, seen
    phases = [n.detail.split()[0] for n in seen]
    assert phases == ["booting", "pulling", "running"], seen
    assert [n.status for n in seen] == [STARTING, RUNNING, RUNNING]
    record = _records(created.id)[0]
    booted = datetime.fromisoformat(record.since["pulling"]) - datetime.fromisoformat(
        record.since["booting"]
    )
    assert booted.total_seconds() >= 0.25 - 0.02


def test_the_local_market_refuses_a_group_over_capacity_or_gpu_quota(
    home: Path, tmp_path: Path, groups: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    market = LocalMarket(
        parse_trace("at,region,market,price_per_hour,capacity\n0s,local-a,spot,1,3\n", "t"),
        datetime.now(UTC),
        LocalBehaviour(quota_gpus=(("local-a", 4),)),
    )
    monkeypatch.setenv(ENV_VAR, market.to_env())
    provider = LocalProcessProvider()
    first = provider.create(
        _props(tmp_path / "ckpt", LOOP, region="local-a", node_count=2, gpu_count=2)
    )
    groups.append(first.id)
    # 2 nodes × 2 GPUs use the quota of 4; capacity (3 nodes) has room for one more node.
    with pytest.raises(RuntimeError, match="LocalQuotaExceeded: local region local-a GPU quota 4"):
        provider.create(
            _props(tmp_path / "ckpt", LOOP, region="local-a", gpu_count=1, placement="b")
        )
    with pytest.raises(RuntimeError, match=r"LocalCapacityExhausted: .* \(2 of 3 in use\)"):
        provider.create(
            _props(tmp_path / "ckpt", LOOP, region="local-a", node_count=2, placement="c")
        )
    assert len(live_records(home / "sandbox" / ".running")) == 2


def test_a_create_ends_nodes_of_its_placement_the_engine_lost_track_of(
    home: Path, tmp_path: Path, groups: list[str]
) -> None:
    """Issue 24 item 2: a deploy killed right after the nodes started left them untracked (the
    engine kept a pending create); the next create of that placement must not run a second."""
    provider = LocalProcessProvider()
    lost = provider.create(_props(tmp_path / "ckpt", LOOP))
    other = provider.create(_props(tmp_path / "ckpt", LOOP, placement="quick.2"))
    groups += [lost.id, other.id]
    again = provider.create(_props(tmp_path / "ckpt", LOOP))
    groups.append(again.id)
    assert not group_alive(lost.id)
    assert group_alive(again.id) and group_alive(other.id)  # another placement is not touched
    running = live_records(home / "sandbox" / ".running")
    assert sorted(r.placement for r in running) == ["quick", "quick.2"]


def test_the_node_runs_the_clouds_start_up_script_and_secrets_only_in_its_environment(
    home: Path, tmp_path: Path, groups: list[str]
) -> None:
    secret = "s3cr3t-value-7f"
    props = _props(tmp_path / "ckpt", LOOP, secret_env={"HF_TOKEN": secret})
    created = LocalProcessProvider().create(props)
    groups.append(created.id)
    [node] = _records(created.id)
    script = (Path(node.node_dir) / "startup.sh").read_text()
    assert script.startswith("#!/bin/bash\n# spotroute start-up script for job quick")
    assert "export SPOTROUTE_NOTICE_SOURCE=local" in script
    assert "export SPOTROUTE_PLACEMENT_ID=quick" in script and "docker" not in script
    assert "shutdown" not in script
    environ = Path(f"/proc/{node.pid}/environ").read_bytes().split(b"\0")
    assert f"HF_TOKEN={secret}".encode() in environ
    for path in (home / "sandbox").rglob("*"):
        assert not path.is_file() or secret.encode() not in path.read_bytes(), path


def test_changed_command_or_node_count_replaces_but_changed_labels_update_in_place(
    tmp_path: Path,
) -> None:
    provider = LocalProcessProvider()
    olds = _props(tmp_path, LOOP)
    relabelled = provider.diff("x", olds, {**olds, "labels": {"team": "infra"}})
    assert relabelled.changes and not relabelled.replaces
    recommanded = provider.diff("x", olds, {**olds, "command": ["/bin/true"]})
    assert recommanded.replaces == ["command"]
    assert provider.diff("x", olds, {**olds, "node_count": 2}).replaces == ["node_count"]
    # A stack of an older spotroute has no node_count: one node, no change.
    assert not provider.diff("x", olds, {**olds, "node_count": 1}).changes
    assert not provider.diff("x", olds, dict(olds)).changes


def test_checkpoint_directory_is_private_and_refuses_deletion_while_it_holds_checkpoints(
    home: Path,
) -> None:
    """Like S3, whose DeleteBucket answers 409 BucketNotEmpty "The bucket you tried to delete is
    not empty" (docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html), and GCS, which
    deletes only an empty bucket (cloud.google.com/storage/docs/deleting-buckets)."""
    provider = LocalDirectoryProvider()
    directory = home / "checkpoints" / "quick"
    created = provider.create({"job_name": "quick", "directory": str(directory), "labels": {}})
    path = Path(created.id)
    assert path == home / "checkpoints" / "quick"
    assert created.outs["url"] == f"file://{path}/"
    assert path.stat().st_mode & 0o777 == 0o700
    (path / "quick" / "step-000000000010").mkdir(parents=True)
    (path / "quick" / "step-000000000010" / "manifest.json").write_text("{}")
    with pytest.raises(RuntimeError, match=r"BucketNotEmpty: .* \(1 file\(s\), e\.g\. quick/"):
        provider.delete(created.id, created.outs)
    assert (path / "quick" / "step-000000000010" / "manifest.json").read_text() == "{}"
    (path / "quick" / "step-000000000010" / "manifest.json").unlink()
    provider.delete(created.id, created.outs)  # empty directories only: it goes
    assert not path.exists()


def test_a_group_whose_nodes_are_gone_is_replaced_not_reported_deployed(tmp_path: Path) -> None:
    """Issue 12 item 11: a killed deploy or destroy left the state naming a dead process."""
    provider = LocalProcessProvider()
    olds = _props(tmp_path, LOOP)
    for dead in ("local-process:999999:1", f"local-group:{tmp_path}/gone"):
        diff = provider.diff(dead, olds, dict(olds))
        assert diff.changes and diff.replaces == ["command"], dead


def test_node_records_round_trip_and_refuse_foreign_text() -> None:
    record = NodeRecord("j", "j.2", 1, 2, os.getpid(), 5, "running", "local-a", "spot", 8, "/d")
    assert NodeRecord.from_text(record.to_text()) == record
    later = record.at(EXITED, "2026-12-01T10:00:00+00:00", exit_status=75)
    assert (later.phase, later.exit_status, later.since) == (
        EXITED,
        75,
        {EXITED: later.since[EXITED]},
    )
    for text in (
        "{}",
        "[]",
        "not json",
        json.dumps({**json.loads(record.to_text()), "phase": "x"}),
    ):
        with pytest.raises(ValueError, match="not a node record"):
            NodeRecord.from_text(text)


def test_a_spot_node_whose_capacity_the_market_withdraws_gets_the_notice_then_is_killed(
    home: Path, tmp_path: Path, groups: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The aws profile's two-minute notice on a 600× clock is 0.2 s: the job hears SIGTERM (the
    local notice source), then the node is taken away; the poller says reclaimed."""
    trace = "at,region,market,price_per_hour,capacity\n0s,local-a,spot,1,2\n10m,local-a,spot,1,0\n"
    market = LocalMarket(
        parse_trace(trace, "t"), datetime.now(UTC), LocalBehaviour("aws", 600, notice_s=120)
    )
    monkeypatch.setenv(ENV_VAR, market.to_env())
    heard = tmp_path / "ckpt" / "heard-term"
    slow_saver = ["/bin/sh", "-c", f"trap 'touch {heard}; sleep 5; exit 75' TERM; "
                  "while true; do sleep 0.1; done"]  # fmt: skip
    created = LocalProcessProvider().create(_props(tmp_path / "ckpt", slow_saver, region="local-a"))
    groups.append(created.id)
    assert _wait_for(lambda: _records(created.id)[0].phase == EXITED, timeout_s=20)
    [record] = _records(created.id)
    assert heard.exists() and (record.exit_status, record.reclaimed) == (137, True), record
    [node] = poll(created.id, "local").nodes
    assert node.status == LOST and node.reclaimed
    assert "local market" in (Path(record.node_dir) / "reclaim.json").read_text()


def test_the_checkpoint_directory_survives_stack_destroy_but_the_nodes_do_not(
    tmp_path: Path,
) -> None:
    """Issue 21 item 1 on the local target: a destroy must converge with checkpoints in the bucket,
    which refuses deletion while not empty — so the component retains it (the user's work)."""
    import pulumi
    from harness import run_components

    from components import local
    from components.args import (
        CheckpointBucketArgs,
        JobCommand,
        JobIdentityArgs,
        NetworkArgs,
        SpotGpuGroupArgs,
    )

    kept: dict[str, bool] = {}

    def build() -> None:
        def record(args: pulumi.ResourceTransformationArgs) -> None:
            kept[args.name] = bool(args.opts.retain_on_delete)

        pulumi.runtime.register_stack_transformation(record)
        network = local.Network("j", NetworkArgs(job_name="j", region="local"))
        bucket = local.CheckpointBucket(
            "j",
            CheckpointBucketArgs(
                job_name="j", region="local", local_directory=str(tmp_path / "ckpt")
            ),
        )
        identity = local.JobIdentity(
            "j", JobIdentityArgs(job_name="j", region="local", checkpoint_prefix="j/"), bucket
        )
        local.SpotGpuGroup(
            "j",
            SpotGpuGroupArgs(
                job_name="j", region="local", zone="", instance_types=("local-process",),
                market="spot", max_price_per_hour=1.0, node_count=2, gpu="T4", gpu_count=1,
                boot_disk_gb=10, job=JobCommand(image="", command=("/bin/true",)),
                local_sandbox=str(tmp_path / "sandbox"),
            ),
            network, identity, bucket,
        )  # fmt: skip

    def directory(_name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        return {"url": f"file://{inputs['directory']}/", "path": inputs["directory"]}

    run_components(build, states={"pulumi-python:dynamic/spotroute:LocalDirectory": directory})
    assert {name for name, keep in kept.items() if keep} == {"j-dir"}
    assert "j-process" in kept


def test_route_status_says_starting_while_a_node_boots_then_running(
    home: Path, tmp_path: Path, groups: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from router.flows.job_status import _state

    market = LocalMarket(
        parse_trace("at,region,market,price_per_hour,capacity\n0s,local-a,spot,1,4\n", "t"),
        datetime.now(UTC),
        LocalBehaviour("gcp", 100, boot_s=150),  # 1.5 s of real boot
    )
    monkeypatch.setenv(ENV_VAR, market.to_env())
    created = LocalProcessProvider().create(_props(tmp_path / "ckpt", LOOP, region="local-a"))
    groups.append(created.id)
    summary = SimpleNamespace(update_in_progress=False, resource_count=7)
    record = {"cloud": "local", "region": "local-a", "outputs": {"groupId": created.id}}
    assert _state(summary, record) == "starting"
    assert _wait_for(lambda: _state(summary, record) == "running")
    stop_group(created.id)
    assert _state(summary, record) == "stopped"


def test_a_node_looks_at_an_accelerated_market_often_enough_to_see_a_short_outage(
    tmp_path: Path,
) -> None:
    """A node checks its market at least every 30 s of the market's clock (and every second):
    on a rehearsal's 400× clock a 1-s check would run a zone's 32-s outage past the node unseen."""
    from components.local_node import _Node

    def node(market: LocalMarket | None) -> _Node:
        spec = {"job": "j", "placement": "j", "node": 0, "nodes": 1, "region": "local-a",
                "market": "spot", "gpus": 0, "running_dir": str(tmp_path / ".running"),
                "market_spec": market.to_env() if market else ""}  # fmt: skip
        return _Node(tmp_path, spec)

    trace = parse_trace("at,region,market,price_per_hour,capacity\n0s,local-a,spot,1,2\n", "t")
    fast = LocalMarket(trace, datetime.now(UTC), LocalBehaviour("aws", 400, notice_s=120))
    assert node(fast).check_every_s == pytest.approx(30 / 400)
    assert node(None).check_every_s == 1.0
