"""The local market through the real CLI and engine: failover at launch, then a job that is
watched, moved for money, kept put by the cooldown, preempted and re-placed from its checkpoint.
"""

from __future__ import annotations

import json

import pytest

from tests.engine.engine_cli import Route, alive, group_pid, no_traceback, only_line, wait_for
from tests.engine.market import (
    backend_stacks,
    expected_w,
    latest_state,
    placement,
    write_market,
    write_trainer_job,
)


@pytest.mark.engine
def test_full_regions_are_cleaned_up_blocked_and_the_next_placement_launches(
    route: Route,
) -> None:
    write_market(
        route,
        [("local-a", "spot", 0.5, 0), ("local-b", "spot", 0.8, 0), ("local-c", "spot", 1.0, 1)],
    )
    job = write_trainer_job(route, "fail")
    deployed = route.ok("deploy", job.name, "--yes", "--json").json()
    tries = [(t["region"], t["outcome"]) for t in deployed["tries"]]
    assert tries == [("local-a", "refused"), ("local-b", "refused"), ("local-c", "launched")]
    assert all("LocalCapacityExhausted" in t["reason"] for t in deployed["tries"][:2])
    assert deployed["placement"]["region"] == "local-c"
    assert route.job_leaders() == [group_pid(deployed["outputs"])]
    blocks = json.loads((route.home / "blocked.json").read_text())
    assert sorted((b["region"], b["zone"]) for b in blocks) == [
        ("local-a", "local-a"), ("local-b", "local-b"),
    ]  # fmt: skip

    # A second job: a and b are blocked (skipped, not tried), c is full → one-line error,
    # and the stack it half-created is gone.
    other = write_trainer_job(route, "second")
    refused = route("deploy", other.name, "--yes")
    assert refused.returncode == 1, refused
    no_traceback(refused)
    line = only_line("\n".join(refused.error_lines()))
    assert "no placement launched after 1 tries" in line
    assert "local-c LocalCapacityExhausted" in line
    assert "skip local/local-a" in refused.stdout and "refused" in refused.stdout
    assert backend_stacks(route) == ["fail"]
    assert not route.stack_file("second").exists()
    assert len(route.job_leaders()) == 1


@pytest.mark.engine
def test_watch_moves_for_money_respects_the_cooldown_and_re_places_after_preemption(
    route: Route,
) -> None:
    market = [("local-a", "spot", 1.10, 2), ("local-b", "spot", 1.40, 2),
              ("local-c", "spot", 1.60, 1)]  # fmt: skip
    write_market(route, market)
    job = write_trainer_job(route, "train")
    first = route.ok("deploy", job.name, "--yes", "--json").json()
    assert first["placement"]["region"] == "local-a"
    # SPOTROUTE_PROJECT_DIR lets the command name a file of the project
    wait_for(lambda: (route.home / "checkpoints" / "train" / "train" / "resumed.json").exists(),
             30, "the trainer to start")  # fmt: skip

    stay = route.ok("watch", "--once", "--json").json()
    assert [(r["job"], r["action"]) for r in stay] == [("train", "stay")], stay
    assert "$" in stay[0]["reason"]

    # local-c gets much cheaper: the watcher moves the job there, in a new stack
    market[2] = ("local-c", "spot", 0.45, 1)
    write_market(route, market)
    moved = route.ok("watch", "--once", "--json").json()
    assert [(r["action"], r["outcome"]) for r in moved] == [("move", "done")], moved
    record = placement(route, "train")
    assert (record["region"], record["stack"]) == ("local-c", "train.2")
    assert backend_stacks(route) == ["train.2"]
    pid = group_pid(record["outputs"])
    assert route.job_leaders() == [pid]
    history = route.ok("status", "train", "--history", "--json").json()
    move = [d for d in history["decisions"] if d["action"] == "move"]
    assert len(move) == 1 and move[0]["acted"] is True
    numbers = move[0]["numbers"]
    assert numbers["saving_usd"] > numbers["threshold_usd"] > 0
    assert [j["outcome"] for j in history["journals"]] == ["done"]
    text = route.ok("status", "train", "--history").stdout
    assert "move" in text and "saves $" in text

    # a cheaper region again, but within the cooldown: stay, and say so
    market[1] = ("local-b", "spot", 0.30, 2)
    write_market(route, market)
    cooled = route.ok("watch", "--once", "--json").json()
    assert cooled[0]["action"] == "stay" and "cooldown" in cooled[0]["reason"], cooled

    # preempted: notice, grace, gone; the watcher re-places it from its last checkpoint,
    # not in the zone just lost
    step_before, _ = latest_state(route, "train")
    pre = route.ok("preempt", "train", "--grace", "5s", "--json").json()
    assert pre["killed"] is False and not alive(pid)
    marker = json.loads((route.home / "checkpoints" / "train" / "train" /
                         "interruption.json").read_text())  # fmt: skip
    assert marker["kind"] == "sigterm" and marker["last_step"] >= step_before
    back = route.ok("watch", "--once", "--json").json()
    assert [(r["action"], r["outcome"]) for r in back] == [("replace", "done")], back
    record = placement(route, "train")
    assert (record["region"], record["stack"]) == ("local-b", "train.3")
    assert backend_stacks(route) == ["train.3"]
    resumed = json.loads((route.home / "checkpoints" / "train" / "train" /
                          "resumed.json").read_text())  # fmt: skip
    assert resumed["placement"] == "train.3" and resumed["step"] >= marker["last_step"]
    assert route.job_leaders() == [group_pid(record["outputs"])]
    # moved twice and preempted once, the parameters are those of an uninterrupted run
    wait_for(lambda: latest_state(route, "train")[0] > resumed["step"], 30, "a new checkpoint")
    step, w = latest_state(route, "train")
    assert w == expected_w(step)
    status = route.ok("status", "--json").json()
    assert [(s["job"], s["state"], s["region"]) for s in status] == [
        ("train", "running", "local-b")
    ]
    assert status[0]["last_decision"]["action"] == "replace"
    assert "lost local local-c" in status[0]["last_decision"]["reason"]
