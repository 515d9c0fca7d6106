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
from router.core.journal import STEPS, job_of_stack
from router.engine.processes import SIGNAL_HOOK_ENV
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
    # The live index lists exactly these nodes. It is read the way the router reads it
    # (live_records): an entry of a node that is gone — one SIGKILLed with the router, which
    # could not remove its own entry — is pruned on that read, not counted.
    from components.local_nodes import live_records

    running = live_records(route.home / "sandbox" / ".running")
    assert sorted(r.pid for r in running) == pids, where
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
    # ... and route report counts each move's hand-over as its journal has it (issue 24 item 6):
    # the new placement from its stack's first `up` (a killed run's included), the old one until
    # its stack's down, however often those steps re-ran.
    spend = route.ok("report", "--json").json()
    got = {(h["stack"], h["role"]): (h["from"], h["until"]) for h in spend["handovers"]}
    closed = (route.home / "jobs" / JOB / "journals").glob("*.json")
    journals = [json.loads(p.read_text()) for p in closed]
    assert len(journals) == len(POINTS) - 1
    # after:new-stack-up: the stack came up in the killed run; the watch ran the step again
    assert any(j["steps"]["new-stack-up"].get("first_begun_at") for j in journals)
    for j in journals:
        up, down = j["steps"]["new-stack-up"], j["steps"]["old-stack-down"]
        assert got[(j["to_stack"], "new")][0] == (up.get("first_begun_at") or up["done_at"]), j
        assert got[(j["from_stack"], "old")][1] == down["done_at"], j

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


def _locks_of(route: Route, job: str) -> list[str]:
    """Every engine lock on a stack of the job, on stacks deleted since included."""
    root = route.home / "state" / ".pulumi" / "locks" / "organization" / "spotroute"
    return sorted(
        str(p.relative_to(root))
        for p in root.glob("*/*.json")
        if job_of_stack(p.parent.name) == job
    )


@pytest.mark.engine
def test_a_router_killed_at_the_end_of_old_stack_down_leaves_no_lock_behind(route: Route) -> None:
    """Issue 24 items 4-5: killed at the end of old-stack-down (the old stack's destroy at its
    summary event: SPOTROUTE_TEST_SIGNAL_AT=destroy:end:KILL), the engine's lock stayed on the old
    stack; `route status` and `route unlock` kept it, and `route unlock JOB` said "no deployed
    job" once the job had moved. Now each clears it, in one line, and the next watch converges.

    The dying engine (SIGINT from its dead parent) may still unlock by itself before the next
    command, or linger until that command's orphan sweep stops it, lock left: a race. So the job
    moves (at most 6 times) until status and unlock have each cleared a lock left behind; at least
    one must have, and after every command no lock is left on any stack of the job."""
    write_market(route, [("local-a", "spot", 1.0, 2), ("local-b", "spot", 1.0, 2)])
    job = write_trainer_job(route, JOB, cooldown="0s")
    route.ok("deploy", job.name, "--yes")
    wait_for(lambda: has_checkpoint(route, JOB), 30, "a first checkpoint")
    commands, cleared_by = [("status", "--json"), ("unlock", JOB)], []
    for move in range(6):
        here = placement(route, JOB)["region"]
        there = "local-b" if here == "local-a" else "local-a"
        route.env[SIGNAL_HOOK_ENV] = "destroy:end:KILL"
        try:
            killed = route("migrate", JOB, "--to", f"local/{there}", "--yes")
        finally:
            del route.env[SIGNAL_HOOK_ENV]
        assert killed.returncode == -9, killed
        assert open_journal(route, JOB) is not None
        if move == 0:  # no deploy while the move is open: one line naming the fix
            refused = route("deploy", job.name, "--yes")
            assert refused.returncode == 1 and len(refused.error_lines()) == 1, refused
            assert "under way" in refused.stderr and "route watch --once" in refused.stderr
        then = commands[move % 2]
        ran = route.ok(*then)
        no_traceback(ran)
        assert _locks_of(route, JOB) == [], (then, _locks_of(route, JOB), ran)
        if "cleared the lock on stack" in ran.stderr:
            cleared_by.append(then[0])
        recovered = route.ok("watch", "--once", "--json").json()
        assert [(r["action"], r["outcome"]) for r in recovered] == [("recovered", "done")]
        _converged(route, "the end of old-stack-down")
        assert _locks_of(route, JOB) == []
        if {"status", "unlock"} <= set(cleared_by):
            break
    print("locks cleared by:", cleared_by)
    assert cleared_by, "no kill left a lock behind in 6 moves"
    # The job's name finds it wherever it moved; a stack's name is read as its job's.
    assert route.ok("unlock", JOB).stdout.strip() == f"unlocked {JOB} (it was not locked)"
    stack = placement(route, JOB)["stack"]
    assert route.ok("unlock", stack).stdout.strip() == f"unlocked {JOB} (it was not locked)"


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
