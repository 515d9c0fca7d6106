"""A 2-node job through the real CLI and engine on the local target (issue 22, item 4): the
example (examples/distributed: torchrun, c10d at the rendezvous endpoint, DDP over gloo) forms
its group, `route preempt --node 1` takes one node, the whole group saves one step, `route watch`
re-places the group and it resumes from that step; `route migrate` moves the group between local
regions. Either way the final parameters are bit-identical to those of a run that never moved:
the same train.py, run uninterrupted by two torchrun invocations on this machine."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.engine.engine_cli import REPO, Route, alive, group_pids, no_traceback, wait_for
from tests.engine.market import backend_stacks, placement, write_market

JOB = "dist-example"
STEPS = 400
EXAMPLE = REPO / "examples" / "distributed"


@pytest.fixture(scope="module")
def never_moved(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The digest rank 0 writes after STEPS uninterrupted steps: two torchrun agents (one per
    node) on this machine, c10d on a free loopback port, no notices, no router."""
    out = tmp_path_factory.mktemp("never-moved")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        "PATH": os.environ["PATH"],
        "SPOTROUTE_CHECKPOINT_URL": f"file://{out}/ckpt",
        "SPOTROUTE_NOTICE_SOURCE": "none",
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
        "TRAIN_STEPS": str(STEPS),
        "TRAIN_STEP_S": "0",
        "TRAIN_RESULT": str(out / "digest"),
    }
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"127.0.0.1:{port}", "--nnodes", "2", "--nproc-per-node", "1",
                "--max-restarts", "0"]  # fmt: skip
    agents = [
        subprocess.Popen(
            [*torchrun, "--node-rank", str(rank), str(EXAMPLE / "train.py")],
            env=env,
            cwd=out,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    logs = [agent.communicate(timeout=240)[0] for agent in agents]
    assert [agent.returncode for agent in agents] == [0, 0], logs
    return (out / "digest").read_text()


def _deploy_the_example(route: Route, result: Path, market: str) -> dict[str, Any]:
    (route.project / "examples").symlink_to(REPO / "examples")  # what the job's command runs
    doc = yaml.safe_load((EXAMPLE / "job.yaml").read_text())
    doc["market"] = market
    doc["run"]["env"].update(
        {"TRAIN_STEPS": str(STEPS), "TRAIN_STEP_S": "0.05", "TRAIN_RESULT": str(result)}
    )
    (route.project / "job.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    deployed: dict[str, Any] = route.ok("deploy", "job.yaml", "--yes", "--json").json()
    return deployed


def _logs(outputs: dict[str, Any]) -> str:
    """Every node's job.log of a local group (a failed assertion shows them)."""
    group = str(outputs["groupId"])
    nodes = sorted(Path(group.removeprefix("local-group:")).glob("node-*"))
    return "\n".join(f"== {d.name}\n{(d / 'job.log').read_text()}" for d in nodes
                     if (d / "job.log").exists())  # fmt: skip


def _every_rank_saved(checkpoints: Path, step: int) -> None:
    """The checkpoint of `step` is the group's: a manifest of world size 2, both ranks' state."""
    saved = checkpoints / f"step-{step:012d}"
    manifest = json.loads((saved / "manifest.json").read_text())
    assert manifest["world_size"] == 2, manifest
    files = {entry["path"] for entry in manifest["files"]}
    assert {"rank-00000.json", "rank-00001.json"} <= files, files
    for rank in (0, 1):
        state = json.loads((saved / f"rank-{rank:05d}.json").read_text())
        assert (state["step"], state["world_size"]) == (step, 2), state


@pytest.mark.engine
def test_a_preempted_node_saves_the_group_which_is_re_placed_and_ends_as_if_never_moved(
    route: Route, never_moved: str
) -> None:
    write_market(route, [("local-a", "spot", 0.50, 2), ("local-b", "spot", 0.60, 2)])
    result = route.home / "preempted.txt"
    deployed = _deploy_the_example(route, result, "spot")
    assert deployed["placement"]["region"] == "local-a"
    pids = group_pids(deployed["outputs"])
    assert len(pids) == 2
    checkpoints = route.home / "checkpoints" / JOB / JOB
    wait_for(lambda: (checkpoints / "resumed.json").exists(), 120, "the group to form and start")

    # One node of the group is reclaimed: its notice saves every rank at one step.
    pre = route.ok("preempt", JOB, "--node", "1", "--grace", "30s", "--json").json()
    assert (pre["node"], pre["nodes"], pre["pid"], pre["killed"]) == (1, 1, pids[1], False), pre
    wait_for(lambda: not any(alive(pid) for pid in pids), 60, "node 0 to end with its group")
    marker = json.loads((checkpoints / "interruption.json").read_text())
    assert marker["noticed_on"] == ["node-1"], marker
    assert marker["exiting"] is True and 0 < marker["last_step"] < STEPS, marker
    _every_rank_saved(checkpoints, marker["last_step"])

    back = route.ok("watch", "--once", "--json").json()
    assert [(r["action"], r["outcome"]) for r in back] == [("replace", "done")], back
    record = placement(route, JOB)
    assert (record["region"], record["stack"]) == ("local-b", f"{JOB}.2")
    assert backend_stacks(route) == [f"{JOB}.2"]
    new_pids = group_pids(record["outputs"])
    assert len(new_pids) == 2 and not set(new_pids) & set(pids)
    wait_for(lambda: json.loads((checkpoints / "resumed.json").read_text())["placement"]
             == f"{JOB}.2", 120, "the re-placed group to restore")  # fmt: skip
    resumed = json.loads((checkpoints / "resumed.json").read_text())
    assert resumed["step"] == marker["last_step"], resumed

    wait_for(result.exists, 180, "the re-placed group to finish")
    assert result.read_text() == never_moved, _logs(record["outputs"])
    finished = json.loads((checkpoints / "finished.json").read_text())
    assert (finished["step"], finished["placement"]) == (STEPS, f"{JOB}.2")


@pytest.mark.engine
def test_a_group_migrates_between_local_regions_and_ends_as_if_never_moved(
    route: Route, never_moved: str
) -> None:
    write_market(route, [("local-a", "on-demand", 0.50, 2), ("local-b", "on-demand", 0.60, 2)])
    result = route.home / "moved.txt"
    deployed = _deploy_the_example(route, result, "on-demand")
    assert deployed["placement"]["region"] == "local-a"
    old = group_pids(deployed["outputs"])
    checkpoints = route.home / "checkpoints" / JOB / JOB
    wait_for(lambda: (checkpoints / "resumed.json").exists(), 120, "the group to form and start")

    moved = route("migrate", JOB, "--to", "local/local-b", "--yes", "--json")
    assert moved.returncode == 0, f"{moved}\n{_logs(deployed['outputs'])}"
    no_traceback(moved)
    report = moved.json()
    assert report["migrated"] is True, report
    steps = report["journal"]["steps"]
    handed = steps["checkpoint-complete"]["data"]["step"]
    assert 0 < handed < STEPS
    _every_rank_saved(checkpoints, handed)
    resumed = steps["resume-confirmed"]["data"]
    assert (resumed["step"], resumed["placement"]) == (handed, f"{JOB}.2")
    record = placement(route, JOB)
    assert (record["region"], record["stack"]) == ("local-b", f"{JOB}.2")
    assert backend_stacks(route) == [f"{JOB}.2"]
    new = group_pids(record["outputs"])
    assert len(new) == 2 and not any(alive(pid) for pid in old)
    # both old nodes held at the handed step and stopped quietly when let go
    assert not (checkpoints / "interruption.json").exists()
    old_logs = _logs(deployed["outputs"])
    assert old_logs.count("stopped after hand-over") >= 1, old_logs

    wait_for(result.exists, 180, "the moved group to finish")
    assert result.read_text() == never_moved, _logs(record["outputs"])
    finished = json.loads((checkpoints / "finished.json").read_text())
    assert (finished["step"], finished["placement"]) == (STEPS, f"{JOB}.2")


@pytest.mark.engine
def test_the_example_scaled_down_to_one_node_trains_to_the_end(route: Route) -> None:
    # Issue 32, item 9: with node_count 1 the node got no NNODES or NODE_RANK, and torchrun
    # stopped at once (`--node-rank: invalid int value: ''`). A group of one is still a group.
    write_market(route, [("local-a", "on-demand", 0.50, 2)])
    (route.project / "examples").symlink_to(REPO / "examples")
    result = route.home / "one-node.txt"
    doc = yaml.safe_load((EXAMPLE / "job.yaml").read_text())
    doc["node_count"] = 1
    doc["run"]["env"].update({"TRAIN_STEPS": "60", "TRAIN_STEP_S": "0",
                              "TRAIN_RESULT": str(result)})
    (route.project / "job.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    deployed = route.ok("deploy", "job.yaml", "--yes", "--json").json()
    checkpoints = route.home / "checkpoints" / JOB / JOB

    wait_for(result.exists, 180, "the one-node group to finish")
    finished = json.loads((checkpoints / "finished.json").read_text())
    assert finished["step"] == 60, _logs(deployed["outputs"])
    log = _logs(deployed["outputs"])
    assert "rank 0 of 1, master 127.0.0.1" in log, log
    saved = sorted(checkpoints.glob("step-*"))
    assert saved and json.loads((saved[-1] / "manifest.json").read_text())["world_size"] == 1
