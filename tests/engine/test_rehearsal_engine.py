"""`route rehearse` through the real CLI and engine (CI's rehearsal, docs/rehearsal.md): a day of
the real 4-zone V100 trace, its first 3 jobs, two watchers side by side, with chaos — one of
them SIGKILLed at random moments and a node preempted without notice — and nothing may be lost
or left over."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.engine_cli import REPO, Route, no_traceback

WORKLOAD = REPO / "examples" / "backtest-real-v100.yaml"


@pytest.mark.engine
def test_a_day_of_a_real_trace_with_chaos_loses_nothing_and_names_every_difference(
    route: Route, tmp_path: Path
) -> None:
    done = route(
        "rehearse", str(WORKLOAD), "--jobs", "3", "--days", "1", "--speed", "400", "--chaos",
        "--seed", "7", "--watchers", "2", "--dir", str(tmp_path / "rehearsal"), "--json",
        timeout_s=900,
    )  # fmt: skip
    no_traceback(done)
    data = done.json()
    print({k: data[k] for k in ("realised_cost", "predicted_cost", "diff_pct", "targets",
                                "wall_s", "watcher_kills", "measured")})  # fmt: skip
    for job in data["jobs"]:
        print(job["job"], job["cost_diff_pct"], job["causes"])
    assert done.returncode == 0, data["guarantees"]
    guarantees = data["guarantees"]
    assert guarantees["held"] and guarantees["samples"] > 100
    assert guarantees["leftovers"] == [] and guarantees["checkpoint_regressions"] == []
    assert guarantees["two_placements_training"] == []
    # the chaos happened: watchers were killed and came back, a node went without notice
    assert data["watchers"] == 2
    assert data["watcher_kills"] >= 1 and data["watcher_runs"] == data["watcher_kills"] + 2
    assert len(data["chaos_preemptions"]) == 1
    assert data["targets"]["every_difference_named"], [
        (j["job"], j["causes"]) for j in data["jobs"]
    ]
    assert {j["job"] for j in data["jobs"]} == {"job-017", "job-010", "job-021"}
    # nothing lost: each job's last checkpoint holds every step it reached done once, in order,
    # and a job that finished did all of its steps (one the engine's time kept from finishing
    # inside the day is still running at the trace's end: unfinished, not lost)
    ran = [j["realised"] for j in data["jobs"]]
    assert all(r["digest_ok"] for r in ran), ran
    assert all(r["steps_done"] == r["steps"] for r in ran if r["finished"]), ran
    assert any(r["finished"] for r in ran), ran
