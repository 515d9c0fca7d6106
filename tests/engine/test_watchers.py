"""Two watchers over the same job at once take each action once; SIGTERM finishes the step in
flight and leaves the journal for the next pass."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.engine.engine_cli import Route, group_pid, wait_for
from tests.engine.market import (
    backend_stacks,
    expected_w,
    latest_state,
    open_journal,
    placement,
    two_watchers_at_once,
    write_market,
    write_trainer_job,
)

JOB = "watched"


@pytest.mark.engine
def test_two_watchers_move_a_job_once_and_sigterm_leaves_a_journal_to_finish(
    route: Route,
) -> None:
    market = [("local-a", "spot", 1.0, 2), ("local-b", "spot", 1.5, 2), ("local-c", "spot", 1.5, 2)]
    write_market(route, market)
    job = write_trainer_job(route, JOB, cooldown="0s")
    route.ok("deploy", job.name, "--yes")
    wait_for(lambda: (route.home / "checkpoints" / JOB / JOB / "resumed.json").exists(), 30,
             "the trainer to start")  # fmt: skip

    market[1] = ("local-b", "spot", 0.3, 2)
    write_market(route, market)
    results, _actions = two_watchers_at_once(route)
    decisions = route.ok("status", JOB, "--history", "--json").json()
    assert sum(1 for d in decisions["decisions"] if d.get("acted")) == 1
    assert [j["outcome"] for j in decisions["journals"]] == ["done"]
    record = placement(route, JOB)
    assert record["region"] == "local-b" and backend_stacks(route) == [record["stack"]]
    assert route.job_leaders() == [group_pid(record["outputs"])]

    # SIGTERM while a move is under way: the step in flight finishes, the process exits 0,
    # the journal stays open at a step boundary, and the next pass finishes the move.
    market[2] = ("local-c", "spot", 0.1, 2)
    write_market(route, market)
    looping = route.start("watch", "--interval", "1s")
    wait_for(lambda: (open_journal(route, JOB) or {}).get("steps", {}).get("new-stack-up"),
             120, "the watcher to start the new stack")  # fmt: skip
    os.kill(looping.pid, signal.SIGTERM)
    out, err = looping.communicate(timeout=120)
    assert looping.returncode == 0, f"{out}\n{err}"
    assert "Traceback" not in err
    journal = open_journal(route, JOB)
    assert journal is not None and journal["outcome"] == "open"
    assert all(s["state"] == "done" for s in journal["steps"].values()), journal["steps"]
    finished = route.ok("watch", "--once", "--json").json()
    assert [(r["action"], r["outcome"]) for r in finished] == [("recovered", "done")]
    record = placement(route, JOB)
    assert record["region"] == "local-c" and backend_stacks(route) == [record["stack"]]
    assert route.job_leaders() == [group_pid(record["outputs"])]
    step, w = latest_state(route, JOB)
    assert w == expected_w(step)
    print("two watchers:", json.dumps([r.json() for r in results])[:2000])
