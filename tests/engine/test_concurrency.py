"""Two deploys of one job at once, and Ctrl-C in the middle of a deploy, through the real CLI."""

from __future__ import annotations

import os
import signal

import pytest

from tests.engine.engine_cli import (
    Result,
    Route,
    group_pid,
    no_traceback,
    only_line,
    wait_for,
)

JOB = "twice"


@pytest.mark.engine
def test_second_concurrent_deploy_of_a_job_fails_at_once_and_one_process_runs(
    route: Route,
) -> None:
    job_file = route.write_job(JOB)
    started = [route.start("deploy", job_file.name, "--yes", "--json") for _ in range(2)]
    results = []
    for proc in started:
        out, err = proc.communicate(timeout=240)
        results.append(Result(("deploy", job_file.name), proc.returncode, out, err))

    assert sorted(r.returncode for r in results) == [0, 1], "\n\n".join(map(str, results))
    winner = next(r for r in results if r.returncode == 0)
    loser = next(r for r in results if r.returncode == 1)
    no_traceback(loser)
    said = [line for line in loser.error_lines() if "is being changed by " in line]
    assert said and "(pid " in said[0] and "route unlock" in said[0], loser  # who, and the fix
    assert loser.stdout == "", "a refused --json deploy must print no JSON"

    pid = group_pid(winner.json()["outputs"])
    assert route.job_leaders() == [pid]
    status = route.ok("status", "--json").json()
    assert [(s["job"], s["state"]) for s in status] == [(JOB, "running")]
    # The refusal is one line: no progress summary claiming "no changes" before it.
    only_line(loser.stderr)


@pytest.mark.engine
def test_ctrl_c_during_deploy_exits_cleanly_and_leaves_the_job_deployable(route: Route) -> None:
    job_file = route.write_job(JOB)
    deploying = route.start("deploy", job_file.name, "--yes", "--json")
    # The stack file appears when the router writes the config, right before the preview: a
    # Ctrl-C from there on lands in the engine or between its calls; both must stop cleanly.
    wait_for(
        lambda: route.stack_file(JOB).exists() or deploying.poll() is not None,
        180,
        "the router to write the stack config",
    )
    assert deploying.poll() is None, "deploy finished before it could be interrupted"
    os.killpg(deploying.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    out, err = deploying.communicate(timeout=180)
    interrupted = Result(("deploy", job_file.name), deploying.returncode, out, err)

    assert interrupted.returncode == 130, interrupted
    no_traceback(interrupted)
    assert len(interrupted.error_lines()) == 1, interrupted
    assert "interrupted" in interrupted.error_lines()[0], interrupted
    # Nothing half-changed: the stack file is back to what it was (absent for a new job).
    assert not route.stack_file(JOB).exists(), interrupted

    # Not left locked: the next deploy goes through, and exactly one job process runs.
    again = route("deploy", job_file.name, "--yes", "--json")
    assert again.returncode == 0, f"{interrupted}\n\n{again}"
    pid = group_pid(again.json()["outputs"])
    wait_for(
        lambda: route.job_leaders() == [pid],
        15,
        f"only the deployed job process {pid} to run (found {route.job_leaders()})",
    )
