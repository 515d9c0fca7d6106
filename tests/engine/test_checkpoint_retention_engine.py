"""Through the real engine: `route destroy` keeps a job's checkpoints (issue 21 item 1), also for
a stack whose state predates retention — the router writes the bucket's fate into the state
(`pulumi stack export` / `import`) before it destroys, so the engine forgets the checkpoint
directory instead of asking its provider to delete it; and `route watch` destroys a finished
job's placement so that nothing of it bills, keeping its checkpoints (item 4)."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.engine.engine_cli import Route, alive, group_pid, no_traceback, wait_for

pytestmark = pytest.mark.engine

JOB = "keeper"
# Checkpoints, says it ran to the end (the checkpoint library's finished.json) and exits.
FINISHES = (
    'echo 3 > "$SPOTROUTE_CHECKPOINT_DIR/step"; '
    'printf \'{"step": 3, "time": "%s"}\' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" '
    '> "$SPOTROUTE_CHECKPOINT_DIR/finished.json"'
)
LOCAL_DIRECTORY = "pulumi-python:dynamic/spotroute:LocalDirectory"


def directories_in_state(route: Route, job: str) -> list[dict[str, object]]:
    state = json.loads(route.pulumi("stack", "export", "--stack", job).stdout)
    return [r for r in state["deployment"]["resources"] if r["type"] == LOCAL_DIRECTORY]


def test_destroy_keeps_the_checkpoints_of_a_stack_deployed_before_retention(
    route: Route, tmp_path: Path
) -> None:
    job_file = route.write_job(JOB)
    deployed = route.ok("deploy", job_file.name, "--yes", "--json").json()
    checkpoints = Path(urlparse(deployed["outputs"]["checkpointUrl"]).path)
    wait_for((checkpoints / "step").exists, 30, "the job's first checkpoint")
    # The program retains the directory now...
    [directory] = directories_in_state(route, JOB)
    assert directory.get("retainOnDelete") is True
    # ...a stack deployed before it did not: its state has no retainOnDelete.
    state = json.loads(route.pulumi("stack", "export", "--stack", JOB).stdout)
    for resource in state["deployment"]["resources"]:
        resource.pop("retainOnDelete", None)
    exported = tmp_path / "before-retention.json"
    exported.write_text(json.dumps(state))
    route.pulumi("stack", "import", "--stack", JOB, "--file", str(exported))
    assert directories_in_state(route, JOB)[0].get("retainOnDelete") is None
    # An empty directory among the checkpoints: the provider's delete would remove it.
    (checkpoints / "step-000000000007").mkdir()

    destroyed = route.ok("destroy", JOB, "--yes")

    no_traceback(destroyed)
    assert f"kept its checkpoints: {deployed['outputs']['checkpointUrl']}" in destroyed.stdout
    assert route.stacks_in_backend() == []
    assert (checkpoints / "step").is_file()
    assert (checkpoints / "step-000000000007").is_dir(), "the engine deleted the checkpoints"


def test_watch_destroys_a_finished_jobs_placement_and_keeps_its_checkpoints(route: Route) -> None:
    job_file = route.write_job("done", command=FINISHES)
    deployed = route.ok("deploy", job_file.name, "--yes", "--json").json()
    checkpoints = Path(urlparse(deployed["outputs"]["checkpointUrl"]).path)
    pid = group_pid(deployed["outputs"])
    wait_for(lambda: not alive(pid), 30, "the job to finish")
    assert (checkpoints / "finished.json").is_file()

    [report] = route.ok("watch", "--once", "--json").json()

    assert (report["job"], report["action"]) == ("done", "finished"), report
    assert "destroyed its placement" in report["reason"] and "checkpoints kept" in report["reason"]
    assert route.stacks_in_backend() == [], "a finished job's placement still bills"
    assert not route.stack_file("done").exists()
    assert (checkpoints / "finished.json").is_file() and (checkpoints / "step").is_file()
    # The teardown is a decision like any other, and the spend stays in the report.
    history = route.ok("status", "done", "--history", "--json").json()
    assert [d["action"] for d in history["decisions"]][-1] == "finished"
    [row] = route.ok("report", "--json").json()["by_job"]
    assert row["job"] == "done" and row["placements"] == 1
    # The next pass has nothing left to watch.
    assert route.ok("watch", "--once", "--json").json() == []
