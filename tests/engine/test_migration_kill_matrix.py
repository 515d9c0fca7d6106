"""The router SIGKILLed at every journal step of a migration, then `route watch --once`:
exactly one running placement, the checkpoint intact, the journal closed, nothing orphaned.

One job is migrated back and forth between two equally priced regions (so the watcher has no
reason of its own to move it); each kill point is one migration. Real engine, local target.
"""

from __future__ import annotations

import json

import pytest

from router.core.journal import STEPS
from tests.engine.engine_cli import Route, group_pid, no_traceback, wait_for
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


def _converged(route: Route, point: str) -> dict[str, object]:
    record = placement(route, JOB)
    pid = group_pid(record["outputs"])
    where = f"after the kill at {point}"
    assert backend_stacks(route) == [record["stack"]], where
    assert route.job_leaders() == [pid], where
    assert open_journal(route, JOB) is None, where
    running = list((route.home / "sandbox" / ".running").glob("*.json"))
    assert [json.loads(p.read_text())["pid"] for p in running] == [pid], where
    # the checkpoint is intact and the job goes on from it
    step, w = latest_state(route, JOB)
    assert w == expected_w(step), where
    return record


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
    assert after["stack"] == here["stack"]
