"""`route migrate` with the PyTorch example (examples/train, router.checkpoint) on the local target:
the library answers the save request and holds, the new placement restores that step and says
so, the old one stops without an interruption marker, and training ends with the parameters of
a run that never moved. Real CLI, real engine, the example's own job file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.engine.engine_cli import REPO, Route, group_pid, no_traceback, wait_for
from tests.engine.market import backend_stacks, placement, write_market

JOB = "train-example"
STEPS = 1500


def _digest_of_a_run_that_never_moved(route: Route) -> str:
    out = route.project / "straight.txt"
    env = {"PATH": os.environ["PATH"], "SPOTROUTE_CHECKPOINT_URL": f"file://{route.home}/straight",
           "SPOTROUTE_NOTICE_SOURCE": "none", "TRAIN_STEPS": str(STEPS), "TRAIN_STEP_S": "0",
           "TRAIN_RESULT": str(out)}  # fmt: skip
    subprocess.run([sys.executable, str(REPO / "examples" / "train" / "train.py")], env=env,
                   check=True, capture_output=True, timeout=240)  # fmt: skip
    return out.read_text()


@pytest.mark.engine
def test_the_example_trainer_hands_over_to_a_new_placement_and_ends_as_if_it_never_moved(
    route: Route,
) -> None:
    write_market(route, [("local-a", "on-demand", 0.50, 1), ("local-b", "on-demand", 0.60, 1)])
    (route.project / "examples").symlink_to(REPO / "examples")  # what the job's command runs
    doc = yaml.safe_load((REPO / "examples" / "train" / "job.yaml").read_text())
    result = route.home / "moved.txt"
    doc["run"]["env"].update(
        {"TRAIN_STEPS": str(STEPS), "TRAIN_STEP_S": "0.05", "TRAIN_RESULT": str(result)}
    )
    (route.project / "job.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    checkpoints = route.home / "checkpoints" / JOB / JOB

    deployed = route.ok("deploy", "job.yaml", "--yes", "--json").json()
    assert deployed["placement"]["region"] == "local-a"
    old_pid = group_pid(deployed["outputs"])
    wait_for(lambda: (checkpoints / "resumed.json").exists(), 60, "the trainer to restore")

    moved = route("migrate", JOB, "--to", "local/local-b", "--yes", "--json")
    assert moved.returncode == 0, moved
    no_traceback(moved)
    report = moved.json()
    assert report["migrated"] is True, report
    steps = report["journal"]["steps"]
    handed = steps["checkpoint-complete"]["data"]["step"]
    assert handed > 0 and "note" not in steps["checkpoint-complete"]["data"]
    resumed = steps["resume-confirmed"]["data"]
    assert (resumed["step"], resumed["placement"]) == (handed, f"{JOB}.2")
    assert resumed["nodes_running_after_s"] >= 0  # it waited for the new nodes to run first
    record = placement(route, JOB)
    assert (record["region"], record["stack"]) == ("local-b", f"{JOB}.2")
    assert backend_stacks(route) == [f"{JOB}.2"]
    # the new stack's job waits for that step (a copy to other storage lands after it starts)
    assert route.stack_config(f"{JOB}.2")["job"]["env"]["SPOTROUTE_RESTORE_STEP"] == str(handed)
    assert route.job_leaders() == [group_pid(record["outputs"])] != [old_pid]

    # the library answered the request in the manifest, held, and stopped quietly when let go
    manifest = json.loads((checkpoints / f"step-{handed:012d}" / "manifest.json").read_text())
    assert manifest["extra"] == {"request": report["journal"]["id"], "placement": JOB}
    # each placement's node logs in its own directory (its own machine)
    old_node = Path(str(deployed["outputs"]["groupId"]).removeprefix("local-group:")) / "node-0"
    old_log = (old_node / "job.log").read_text()
    assert "holding until the router lets go" in old_log, old_log
    assert "stopped after hand-over" in old_log, old_log
    assert not (checkpoints / "interruption.json").exists()
    assert not (checkpoints / "save-request.json").exists()
    print("migration timings:", json.dumps(report["timings_s"]))
    # route report counts the hand-over (issue 24 item 6): the new placement paid from its
    # stack's up, the old one until its stack was down, each at its own price.
    spend = route.ok("report", "--json").json()
    roles = {h["role"]: h for h in spend["handovers"]}
    assert set(roles) == {"new", "old"}, spend["handovers"]
    assert (roles["new"]["stack"], roles["old"]["stack"]) == (f"{JOB}.2", JOB)
    assert roles["new"]["from"] == steps["new-stack-up"]["done_at"]
    assert roles["new"]["until"] == roles["old"]["from"] == record["deployed_at"]
    assert roles["old"]["until"] == steps["old-stack-down"]["done_at"]
    new_price, old_price = record["price_per_hour"], deployed["placement"]["price_per_hour"]
    assert roles["new"]["cost"] == pytest.approx(new_price * roles["new"]["seconds"] / 3600)
    assert roles["old"]["cost"] == pytest.approx(old_price * roles["old"]["seconds"] / 3600)
    [row] = spend["by_job"]
    assert row["overlap_s"] == pytest.approx(roles["new"]["seconds"] + roles["old"]["seconds"])

    wait_for(result.exists, 180, "the moved job to finish")
    assert result.read_text() == _digest_of_a_run_that_never_moved(route)
    finished = json.loads((checkpoints / "finished.json").read_text())
    assert (finished["step"], finished["placement"]) == (STEPS, f"{JOB}.2")
