"""Issue 24 item 1: `route deploy --yes` after `route migrate` created the job again in stack
`<job>` beside `<job>.2`: two training processes on one checkpoint directory, `route report`
counting 3 placements. A job has one live placement, and every verb finds it where it moved.
Real engine, local target.
"""

from __future__ import annotations

import pytest

from tests.engine.engine_cli import Route, group_pid, no_traceback, wait_for
from tests.engine.market import (
    backend_stacks,
    has_checkpoint,
    placement,
    write_market,
    write_trainer_job,
)

JOB = "moved"


@pytest.mark.engine
def test_a_redeploy_after_a_move_updates_the_moved_placement_and_never_adds_one(
    route: Route,
) -> None:
    write_market(route, [("local-a", "spot", 1.0, 2), ("local-b", "spot", 1.0, 2)])
    job = write_trainer_job(route, JOB, cooldown="1h")
    first = route.ok("deploy", job.name, "--yes", "--json").json()
    assert first["placement"]["region"] == "local-a"  # the first of two equal prices
    wait_for(lambda: has_checkpoint(route, JOB), 30, "a first checkpoint")
    route.ok("migrate", JOB, "--to", "local/local-b", "--yes")
    moved = placement(route, JOB)
    assert (moved["region"], moved["stack"]) == ("local-b", f"{JOB}.2")
    pid = group_pid(moved["outputs"])

    # preview and deploy plan local-a first, yet act on the job where it runs: nothing to create
    preview = route.ok("preview", job.name)
    no_traceback(preview)
    assert "to create" not in preview.stdout, preview
    again = route.ok("deploy", job.name, "--yes", "--json").json()
    assert again["placement"]["region"] == "local-b" and again["changes"] == {}, again
    assert group_pid(again["outputs"]) == pid
    assert backend_stacks(route) == [f"{JOB}.2"]
    assert route.job_leaders() == [pid]
    assert not route.stack_file(JOB).exists()

    # every verb finds the one live placement
    status = route.ok("status", "--json").json()
    assert [(s["job"], s["region"], s["state"]) for s in status] == [(JOB, "local-b", "running")]
    watched = route.ok("watch", "--once", "--json").json()
    assert [r["action"] for r in watched] == ["stay"], watched
    assert route.job_leaders() == [pid]
    assert route.ok("unlock", JOB).stdout.strip() == f"unlocked {JOB} (it was not locked)"

    # a deploy that would move it is refused in one line pointing at route migrate
    refused = route("deploy", job.name, "--yes", "--to", "local/local-a")
    assert refused.returncode == 1 and len(refused.error_lines()) == 1, refused
    assert f"route migrate {JOB} --to local/local-a" in refused.stderr
    assert backend_stacks(route) == [f"{JOB}.2"] and route.job_leaders() == [pid]

    report = route.ok("report", "--json").json()
    [row] = report["by_job"]
    assert row["job"] == JOB and row["placements"] == 2, row
    route.ok("destroy", JOB, "--yes")
    assert backend_stacks(route) == [] and route.job_leaders() == []
