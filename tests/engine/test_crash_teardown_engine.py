"""Issues 29 and 32 item 10, through the real engine on the local target: a job that fails by
itself is a crash, not an interruption — the local node leaves the exit record a cloud node's
start-up script would (components/local_node.py), `route watch` does not re-place it, and tears
its placement down so nothing of it bills (a cloud's NAT gateway, public address and stopped
disks), its checkpoints kept. `route status` lists it `crashed` (when, why), `route report`
counts it until the teardown. The teardown is recorded before it acts: a watcher SIGKILLed
before, during or after the destroy leaves it for the next pass, which converges."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from urllib.parse import urlparse

import pytest

from router.engine.locks import FileStackLocks
from router.engine.processes import SIGNAL_HOOK_ENV
from tests.engine.engine_cli import Route, alive, group_pid, no_traceback, wait_for
from tests.engine.test_kill_matrix import engine_processes

pytestmark = pytest.mark.engine

JOB = "crashy"
# Writes a first checkpoint file, then fails by itself: the job's own bug, on any placement.
FAILS = 'echo 1 > "$SPOTROUTE_CHECKPOINT_DIR/step"; exit 3'


def _deploy_and_crash(route: Route) -> Path:
    job_file = route.write_job(JOB, command=FAILS)
    deployed = route.ok("deploy", job_file.name, "--yes", "--json").json()
    pid = group_pid(deployed["outputs"])
    wait_for(lambda: not alive(pid), 30, "the job to fail")
    return Path(urlparse(deployed["outputs"]["checkpointUrl"]).path)


def _ended(route: Route) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted((route.home / "ended" / JOB).glob("*.json"))]


def test_a_local_job_that_fails_by_itself_is_torn_down_once_and_shown_crashed(
    route: Route,
) -> None:
    checkpoints = _deploy_and_crash(route)
    [exit_record] = [json.loads(p.read_text()) for p in checkpoints.glob("exit-*.json")]
    assert (exit_record["status"], exit_record["interruption_marker"]) == (3, False)

    [report] = route.ok("watch", "--once", "--json").json()

    assert (report["job"], report["action"]) == (JOB, "crashed"), report
    assert "node node-0 exited with status 3 (no interruption marker)" in report["reason"]
    assert "destroyed its placement" in report["reason"], report
    assert route.stacks_in_backend() == [], "a crashed job's placement still bills"
    assert (checkpoints / "step").is_file(), "its checkpoints are the user's work: kept"
    # The next passes re-place nothing (issue 32 item 10: 3 placements in 2 passes before).
    assert route.ok("watch", "--once", "--json").json() == []
    assert route.stacks_in_backend() == [] and route.job_pids() == []

    [row] = route.ok("status", "--json").json()
    assert (row["job"], row["state"], row["resources"]) == (JOB, "crashed", 0), row
    assert row["torn_down"]["at"] and "status 3" in row["torn_down"]["why"], row
    assert row["torn_down"]["checkpoints"] and row["cost_so_far"] is not None
    assert row["last_decision"]["action"] == "crashed"
    text = route.ok("status").stdout
    assert f"{JOB} crashed (node node-0 exited with status 3" in " ".join(text.split()), text

    [ended] = _ended(route)
    torn_at = datetime.fromisoformat(row["torn_down"]["at"])
    assert ended["reason"] == "crashed", ended  # counted until the teardown, not until now
    assert abs((datetime.fromisoformat(str(ended["ended_at"])) - torn_at).total_seconds()) < 5
    spend = route.ok("report", "--json").json()
    assert [(j["job"], j["placements"]) for j in spend["by_job"]] == [(JOB, 1)]
    assert any(n.startswith(f"{JOB} crashed on local") and "tore its placement down" in n
               for n in spend["notes"]), spend["notes"]  # fmt: skip

    # `route destroy` forgets it; deployed again, it is a job like any other.
    assert "0 resources deleted" in route.ok("destroy", JOB, "--yes").stdout
    assert route.ok("status", "--json").json() == []


@pytest.mark.parametrize(
    ("env", "moment"),
    [
        ("SPOTROUTE_KILL_AT", "after:teardown-recorded"),  # recorded, nothing destroyed yet
        (SIGNAL_HOOK_ENV, "destroy:3:KILL"),  # in the middle of the engine's destroy
        (SIGNAL_HOOK_ENV, "destroy:end:KILL"),  # the engine's work done, state not yet written
        ("SPOTROUTE_KILL_AT", "after:teardown-destroyed"),  # destroyed, not yet recorded done
    ],
)
def test_a_watcher_killed_during_a_crash_teardown_converges_on_the_next_pass(
    route: Route, env: str, moment: str
) -> None:
    checkpoints = _deploy_and_crash(route)
    route.env[env] = moment
    try:
        killed = route("watch", "--once", "--json")
    finally:
        del route.env[env]
    assert killed.returncode == -9, killed
    teardown = json.loads((route.home / "teardowns" / f"{JOB}.json").read_text())
    assert teardown["reason"] == "crashed" and teardown["done_at"] is None, teardown

    recovered = route.ok("watch", "--once", "--json")

    no_traceback(recovered)
    [report] = recovered.json()
    assert report["action"] == "crashed" and "destroyed its placement" in report["reason"], report
    assert route.stacks_in_backend() == []
    assert FileStackLocks(route.home / "state", "spotroute").held(JOB) == []
    assert engine_processes(route.home) == [] and route.job_pids() == []
    teardown = json.loads((route.home / "teardowns" / f"{JOB}.json").read_text())
    assert teardown["done_at"] is not None
    assert [e["reason"] for e in _ended(route)] == ["crashed"], "counted once, until the teardown"
    assert not (route.home / "placements" / f"{JOB}.json").exists()
    assert (checkpoints / "step").is_file()
    assert route.ok("status", "--json").json()[0]["state"] == "crashed"
    assert route.ok("watch", "--once", "--json").json() == []  # nothing re-placed
