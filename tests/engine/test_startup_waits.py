"""Issue 21 item 3: a migration's waits count from the cloud's phases, not from `pulumi up`.

The local target plays the AWS profile (router/data/node_startup.csv: boot 150 s, `docker pull`
12 s per GB, a 10 GB image by default) on a clock 60 × faster than real time, so each new
placement takes 4.5 simulated minutes from `up` returning to the job starting — well past the
fixed 120 s the router used to allow from `up`. A migration to a region whose nodes never run
rolls back naming that phase; one to a region that is merely slow converges. Real engine, real
node processes, the example trainer.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from router.contract.local_node import NodeRecord
from tests.engine.engine_cli import Route, group_pid, no_traceback, wait_for
from tests.engine.market import (
    backend_stacks,
    expected_w,
    has_checkpoint,
    latest_state,
    placement,
    write_trainer_job,
)

JOB = "slowboot"
SCALE = 60


def _market(route: Route) -> None:
    offers = ", ".join(
        f"{{region: {r}, market: spot, price_per_hour: 1.0, capacity: 2}}"
        for r in ("local-a", "local-b", "local-c")
    )
    (route.project / "spotroute.yaml").write_text(
        "clouds: [local]\n"
        f"local_market:\n  offers: [{offers}]\n  profile: aws\n  time_scale: {SCALE}\n"
        "  boot: {local-c: 10h}   # a region whose nodes never come up in time\n"
    )


def _job(route: Route) -> Path:
    path = write_trainer_job(route, JOB, cooldown="0s")
    doc = yaml.safe_load(path.read_text())
    doc["run"]["image"] = "example/trainer:1"  # pulled, in simulated time, by every new node
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _node_record(route: Route, job: str) -> NodeRecord:
    group = str(placement(route, job)["outputs"]["groupId"]).removeprefix("local-group:")
    return NodeRecord.from_text((Path(group) / "node-0" / "node.json").read_text())


def _step(journal: dict[str, Any], name: str) -> dict[str, Any]:
    data: dict[str, Any] = journal["steps"][name]["data"]
    return data


@pytest.mark.engine
def test_a_new_placement_slow_to_come_up_converges_and_one_that_never_runs_rolls_back(
    route: Route,
) -> None:
    _market(route)
    job = _job(route)
    route.ok("deploy", job.name, "--yes")
    wait_for(lambda: has_checkpoint(route, JOB), 60, "a first checkpoint")
    first = placement(route, JOB)

    # --- local-c: its nodes boot for 10 simulated hours; the nodes phase runs out → rollback
    stuck = route("migrate", JOB, "--to", "local/local-c", "--yes", "--json")
    no_traceback(stuck)
    assert stuck.returncode == 1, stuck
    journal = stuck.json()["journal"]
    assert journal["outcome"] == "rolled-back", journal
    reason = journal["rollback_reason"]
    assert reason.startswith("nodes did not run within 1800 s (30 s real at time scale 60)"), reason
    assert "local: 0 of 1 nodes running" in reason and "2 × boot 150 s (aws)" in reason, reason
    assert placement(route, JOB)["stack"] == first["stack"]
    assert backend_stacks(route) == [first["stack"]]
    assert route.job_leaders() == [group_pid(first["outputs"])]

    # --- local-b: boot 150 s + a 10 GB pull 120 s = 4.5 simulated minutes; converges
    moved = route.ok("migrate", JOB, "--to", "local/local-b", "--yes", "--json")
    journal = moved.json()["journal"]
    assert journal["outcome"] == "done", journal
    budget = _step(journal, "new-stack-up")["budget"]
    assert (budget["cloud"], budget["nodes_s"], budget["time_scale"]) == ("aws", 300.0, SCALE)
    assert budget["parts"]["pull"] == 120.0  # 10 GB × 12 s/GB
    resumed = _step(journal, "resume-confirmed")
    assert resumed["nodes_running_after_s"] >= 0, resumed  # it waited for the nodes first
    node = _node_record(route, JOB)
    since = {phase: datetime.fromisoformat(at) for phase, at in node.since.items()}
    came_up_s = (since["running"] - since["booting"]).total_seconds() * SCALE
    assert came_up_s >= 270 * 0.95, node.since  # 4.5 simulated minutes from launch to the job
    assert came_up_s > 120  # the old fixed budget from `up` would have rolled it back
    record = placement(route, JOB)
    assert record["region"] == "local-b" and backend_stacks(route) == [record["stack"]]
    assert route.job_leaders() == [group_pid(record["outputs"])]
    step, w = latest_state(route, JOB)
    assert w == expected_w(step)


@pytest.mark.engine
def test_a_node_that_boots_longer_than_the_old_fixed_budget_from_up_still_converges(
    route: Route,
) -> None:
    """On a real clock: local-b's nodes boot 130 s (an AWS GPU node's 150 s, rounded down), so
    the job cannot say it resumed within 120 s of `up` returning — the old fixed budget rolled
    every such migration back. Counted from the nodes running (budget 2 × 150 s) it converges."""
    (route.project / "spotroute.yaml").write_text(
        "clouds: [local]\nlocal_market:\n  offers: ["
        "{region: local-a, market: spot, price_per_hour: 1.0, capacity: 2}, "
        "{region: local-b, market: spot, price_per_hour: 1.0, capacity: 2}]\n"
        "  profile: aws\n  boot: {local-a: 0s, local-b: 130s}\n"
    )
    job = write_trainer_job(route, JOB, cooldown="0s")
    route.ok("deploy", job.name, "--yes")
    wait_for(lambda: has_checkpoint(route, JOB), 60, "a first checkpoint")
    moved = route("migrate", JOB, "--to", "local/local-b", "--yes", "--json")
    assert moved.returncode == 0, moved
    journal = moved.json()["journal"]
    assert journal["outcome"] == "done", journal["rollback_reason"]
    node = _node_record(route, JOB)
    since = {phase: datetime.fromisoformat(at) for phase, at in node.since.items()}
    assert (since["running"] - since["booting"]).total_seconds() >= 130
    record = placement(route, JOB)
    assert record["region"] == "local-b" and route.job_leaders() == [group_pid(record["outputs"])]
