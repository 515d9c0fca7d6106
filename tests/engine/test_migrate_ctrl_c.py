"""Issue 32 item 11: Ctrl-C at every step of `route migrate`, through the real CLI and engine on
the local target: exit 130 and one line — "the move stays journaled; `route migrate JOB`
finishes it" — whatever the step was doing, and the next `route migrate` finishes the move.

SPOTROUTE_KILL_AT=during:<step>:INT (router.flows.move_stops.interrupt_point) sends the Ctrl-C
to the router's process group as the step's first engine command starts (so the `pulumi` CLI
dies of it, as under a terminal), or, in a step that runs none, as its work returns. Before the
fix, a Ctrl-C as old-stack-down began ended in `error: cannot list jobs on file://…/state:
CommandError`, exit 1. One job moves back and forth between two equally priced regions.
"""

from __future__ import annotations

import pytest

from router.core.journal import STEPS
from tests.engine.engine_cli import ENGINE_TIMEOUT_S, Result, Route, no_traceback, wait_for
from tests.engine.market import (
    backend_stacks,
    has_checkpoint,
    open_journal,
    placement,
    write_market,
    write_trainer_job,
)

JOB = "ctrlc"
# The steps where the Ctrl-C reaches a `pulumi` command (the others run none).
ENGINE_STEPS = ("new-stack-up", "old-stack-down")


def _migrate_interrupted(route: Route, step: str, to: str) -> Result:
    route.env["SPOTROUTE_KILL_AT"] = f"during:{step}:INT"
    try:
        proc = route.start("migrate", JOB, "--to", to, "--yes")
        out, err = proc.communicate(timeout=ENGINE_TIMEOUT_S)
    finally:
        del route.env["SPOTROUTE_KILL_AT"]
    return Result(("migrate", JOB), proc.returncode, out, err)


@pytest.mark.engine
def test_ctrl_c_at_every_step_of_a_move_is_the_journaled_stop_and_the_next_run_finishes_it(
    route: Route,
) -> None:
    write_market(route, [("local-a", "spot", 1.0, 2), ("local-b", "spot", 1.0, 2)])
    job = write_trainer_job(route, JOB, cooldown="0s")
    route.ok("deploy", job.name, "--yes")
    wait_for(lambda: has_checkpoint(route, JOB), 60, "a first checkpoint")
    seen: dict[str, str] = {}
    for step in STEPS:
        here = placement(route, JOB)["region"]
        to = "local/local-b" if here == "local-a" else "local/local-a"

        stopped = _migrate_interrupted(route, step, to)

        no_traceback(stopped)
        journal = open_journal(route, JOB)
        if journal is None:  # the Ctrl-C came as the last step returned: the move is complete
            assert step == STEPS[-1] and stopped.returncode == 0, stopped
            seen[step] = "completed"
            continue
        assert stopped.returncode == 130, stopped
        line = (
            f"error: job {JOB}: interrupted before {_next(journal)} — the move stays journaled; "
            f"`route migrate {JOB}` finishes it"
        )
        assert stopped.error_lines() == [line], stopped
        assert "cannot list jobs" not in stopped.stderr and "CommandError" not in stopped.stderr
        if step in ENGINE_STEPS:  # the step the engine command was cut short in stays open
            assert journal["steps"][step]["state"] == "begun", (step, journal["steps"])
        seen[step] = _next(journal)

        finished = route.ok("migrate", JOB, "--yes", "--json")

        assert finished.json()["journal"]["outcome"] in ("done", "rolled-back"), finished
        assert open_journal(route, JOB) is None
        record = placement(route, JOB)
        assert backend_stacks(route) == [record["stack"]], step  # one placement, no orphan
        wait_for(lambda: len(route.job_leaders()) == 1, 60, f"one job process after {step}")
    assert set(seen) == set(STEPS), seen
    assert seen["old-stack-down"] == "old-stack-down", seen  # the moment


def _next(journal: dict[str, object]) -> str:
    """The first step of a journal (as stored) that is not done."""
    steps = journal["steps"]
    assert isinstance(steps, dict)
    return next(s for s in STEPS if (steps.get(s) or {}).get("state") != "done")
