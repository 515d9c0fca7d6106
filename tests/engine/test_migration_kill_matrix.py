"""The router SIGKILLed at every journal step of a migration, then `route watch --once`:
exactly one running placement, the checkpoint intact, the journal closed, nothing orphaned.

One job is migrated back and forth between two equally priced regions (so the watcher has no
reason of its own to move it); each kill point is one migration. Real engine, local target.
A 2-node group (examples/distributed: torchrun, gloo) goes through the steps where two groups
run side by side or one holds: every node of exactly one group runs afterwards, the checkpoint is
the whole group's, and the group resumed from it.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from router.config.checkpoints import latest_checkpoint, missing_ranks
from router.core.journal import STEPS
from tests.engine.engine_cli import REPO, Route, alive, group_pids, no_traceback, wait_for
from tests.engine.market import (
    backend_stacks,
    expected_w,
    has_checkpoint,
    latest_state,
    open_journal,
    placement,
    write_market,
    write_trainer_job,
)

JOB = "matrix"
POINTS = [f"{when}:{step}" for step in STEPS for when in ("before", "after")]


def _converged(route: Route, point: str, job: str = JOB) -> dict[str, Any]:
    """One placement, every node of its group running (and no other), the journal closed."""
    record = placement(route, job)
    pids = sorted(group_pids(record["outputs"]))
    where = f"after the kill at {point}"
    assert backend_stacks(route) == [record["stack"]], where
    # Every live job process (a node, its job, torchrun's workers — session leaders of their
    # own) runs in this placement's launch directory: nothing of another group is left.
    assert set(pids) <= set(route.job_leaders()), where
    launch = str(record["outputs"]["groupId"]).removeprefix("local-group:")
    assert _launch_dirs_running(route) == {launch}, where
    assert open_journal(route, job) is None, where
    running = list((route.home / "sandbox" / ".running").glob("*.json"))
    assert sorted(json.loads(p.read_text())["pid"] for p in running) == pids, where
    return record


def _launch_dirs_running(route: Route) -> set[str]:
    """The launch directories the job processes of this home run in (a node's cwd is its
    directory, launch/node-<i>, and what it starts inherits it)."""
    found = set()
    for pid in route.job_pids():
        with contextlib.suppress(OSError):  # gone since it was listed
            found.add(str(Path(os.readlink(f"/proc/{pid}/cwd")).parent))
    return found


def _trainer_intact(route: Route, point: str) -> None:
    """The checkpoint is intact and the job goes on from it."""
    step, w = latest_state(route, JOB)
    assert w == expected_w(step), f"after the kill at {point}"


@pytest.mark.engine
def test_a_router_killed_at_any_step_of_a_migration_converges_on_the_next_watch(
    route: Route,
) -> None:
    assert len(POINTS) >= 12
    write_market(route, [("local-a", "spot", 1.0, 2), ("local-b", "spot", 1.0, 2)])
    job = write_trainer_job(route, JOB, cooldown="0s")
    route.ok("deploy", job.name, "--yes")
    wait_for(lambda: has_checkpoint(route, JOB), 30, "a first checkpoint")
    outcomes = {}
    for point in POINTS:
        here = placement(route, JOB)["region"]
        there = "local-b" if here == "local-a" else "local-a"
        route.env["SPOTROUTE_KILL_AT"] = point
        try:
            killed = route("migrate", JOB, "--to", f"local/{there}", "--yes")
        finally:
            del route.env["SPOTROUTE_KILL_AT"]
        assert killed.returncode == -9, f"{point}: {killed}"
        recovered = route.ok("watch", "--once", "--json")
        no_traceback(recovered)
        report = recovered.json()[0]
        record = _converged(route, point)
        _trainer_intact(route, point)
        outcomes[point] = (report["action"], report["outcome"], record["region"])
    # Killed before the journal existed, the job stays; from then on recovery finishes the move.
    assert outcomes["before:intent"][0] == "stay"
    for point in POINTS[1:]:
        assert outcomes[point][:2] == ("recovered", "done"), (point, outcomes[point])
    print("kill matrix:", json.dumps(outcomes))
    # Every placement a move left is kept once for `route report`, however often its step re-ran.
    ended = sorted((route.home / "ended" / JOB).glob("*.json"))
    assert len(ended) == len(POINTS) - 1, [p.name for p in ended]
    for path in ended:
        doc = json.loads(path.read_text())
        assert doc["reason"] == "migrated" and doc["started_at"] < doc["ended_at"], doc

    # A target that refuses the launch: the journal rolls back and the job stays where it was.
    here = placement(route, JOB)
    write_market(route, [("local-a", "spot", 1.0, 2), ("local-b", "spot", 1.0, 2),
                         ("local-c", "spot", 0.5, 0)])  # fmt: skip
    failed = route("migrate", JOB, "--to", "local/local-c", "--yes", "--json")
    assert failed.returncode == 1, failed
    assert failed.json()["journal"]["outcome"] == "rolled-back"
    after = _converged(route, "a refused target")
    _trainer_intact(route, "a refused target")
    assert after["stack"] == here["stack"]


GROUP = "dist-example"
# The steps where a group holds for the hand-over, or two groups run side by side.
GROUP_POINTS = ["after:checkpoint-complete", "after:new-stack-up", "after:resume-confirmed"]


@pytest.mark.engine
def test_a_group_killed_mid_migration_converges_with_every_node_on_the_next_watch(
    route: Route,
) -> None:
    write_market(route, [("local-a", "on-demand", 1.0, 2), ("local-b", "on-demand", 1.0, 2)])
    (route.project / "examples").symlink_to(REPO / "examples")  # what the job's command runs
    doc = yaml.safe_load((REPO / "examples" / "distributed" / "job.yaml").read_text())
    doc["migration"] = {"cooldown": "0s"}
    doc["run"]["env"].update({"TRAIN_STEPS": "100000", "TRAIN_STEP_S": "0.05"})
    (route.project / "job.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    checkpoints = route.home / "checkpoints" / GROUP / GROUP
    route.ok("deploy", "job.yaml", "--yes")
    wait_for(lambda: (checkpoints / "resumed.json").exists(), 120, "the group to form and start")
    outcomes = {}
    for point in GROUP_POINTS:
        before = placement(route, GROUP)
        there = "local-b" if before["region"] == "local-a" else "local-a"
        route.env["SPOTROUTE_KILL_AT"] = point
        try:
            killed = route("migrate", GROUP, "--to", f"local/{there}", "--yes")
        finally:
            del route.env["SPOTROUTE_KILL_AT"]
        assert killed.returncode == -9, f"{point}: {killed}"
        recovered = route.ok("watch", "--once", "--json")
        no_traceback(recovered)
        report = recovered.json()[0]
        record = _converged(route, point, GROUP)
        assert len(group_pids(record["outputs"])) == 2
        assert not any(alive(pid) for pid in group_pids(before["outputs"])), point
        outcomes[point] = (report["action"], report["outcome"], record["region"])
        # the newest checkpoint is the whole group's, and the group runs on from it
        info = latest_checkpoint(checkpoints)
        assert info is not None, point
        manifest = json.loads((Path(info.path) / "manifest.json").read_text())
        assert manifest["world_size"] == 2 and missing_ranks(manifest) == [], (point, manifest)
        resumed = json.loads((checkpoints / "resumed.json").read_text())
        assert resumed["placement"] == record["stack"], (point, resumed)
    for point in GROUP_POINTS:
        assert outcomes[point][:2] == ("recovered", "done"), (point, outcomes[point])
    assert [o[2] for o in outcomes.values()] == ["local-b", "local-a", "local-b"], outcomes
    print("group kill matrix:", json.dumps(outcomes))
