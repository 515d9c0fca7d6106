"""Issue 29: while a move waits for its new placement to resume, the placement's own exit records
and node poller are read too — a job that ended there rolls the move back at once, naming why,
instead of both placements billing until the restore budget runs out. Below the engine: the
journal's resume-confirmed step (router/flows/migrate.py) against a checkpoint directory and a
node poller; the real-engine path is tests/engine/ (a crashed local job)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from router.core.journal import STEPS, Journal
from router.flows.migrate import Mover, StepFailed
from router.nodes import sources
from router.nodes.node_state import LOST, RUNNING, Node, NodeState

BEGUN = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
RESTORE_S = 8.0  # the restore budget, real seconds: the old code waited all of it


def _journal(new: Path) -> Journal:
    """A move of `train` to `train.2` on AWS, every step before resume-confirmed done."""
    place = {"cloud": "aws", "region": "us-east-1", "zone": "us-east-1a", "market": "spot",
             "instance_type": "g5.xlarge"}  # fmt: skip
    j = Journal("m-1", "train", "migrate", "train", "train.2", place, "why", BEGUN.isoformat())
    data = {
        "new-stack-up": {
            "placement": place,
            "outputs": {"checkpointUrl": f"file://{new}/", "groupId": "fleet-1"},
            "budget": {"cloud": "aws", "nodes_s": 60.0, "restore_s": RESTORE_S, "parts": {}},
        },
        "checkpoint-complete": {"step": 3},
    }
    for step in STEPS[: STEPS.index("resume-confirmed")]:
        j = j.begin(step, BEGUN).finish(step, BEGUN, data.get(step, {}))
    return j


@pytest.fixture
def nodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What the AWS node poller answers, call after call (the last answer repeats)."""
    answers = [RUNNING]

    def poll(group_id: str, region: str) -> NodeState:
        status = answers.pop(0) if len(answers) > 1 else answers[0]
        detail = "terminated (Client.InstanceInitiatedShutdown)" if status == LOST else status
        return NodeState("aws", group_id, 1, (Node("i-1", status, detail),))

    monkeypatch.setitem(sources.POLLERS, "aws", poll)
    monkeypatch.setattr("router.flows.placement_waits.CLOUD_POLL_S", 0.05)
    monkeypatch.setattr("router.core.startup_budget.MIN_RESTORE_S", 0.0)
    yield answers


def _mover() -> Mover:
    # Nothing of the engine or the record store is reached before the job resumes.
    return Mover(cast(Any, None), cast(Any, None), "test", cast(Any, None))


def _exit(directory: Path, node: str, status: int, placement: str, at: datetime) -> None:
    """An exit record as a cloud node's start-up script writes it (components/node_exit.py)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"exit-{node}.json").write_text(json.dumps({
        "format": "spotroute-exit/1", "node": node, "status": status,
        "interruption_marker": False, "job": "train", "placement": placement,
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ")}))  # fmt: skip


def _resume(new: Path) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(StepFailed) as failed:
        _mover()._resume_confirmed(_journal(new))
    return failed.value.message, time.monotonic() - started


def test_a_new_placement_whose_job_crashed_fails_the_wait_at_once(
    tmp_path: Path, nodes: list[str]
) -> None:
    new = tmp_path / "new"
    _exit(new, "ip-10-0-0-7", 1, "train.2", BEGUN + timedelta(minutes=2))

    message, took_s = _resume(new)

    assert message == ("the job on train.2 exited before it resumed: node ip-10-0-0-7 exited "
                       "with status 1 (no interruption marker)")  # fmt: skip
    assert took_s < RESTORE_S / 2, "it waited for the restore budget"


def test_a_new_placement_whose_node_the_cloud_lost_fails_the_wait_at_once(
    tmp_path: Path, nodes: list[str]
) -> None:
    nodes[:] = [RUNNING, LOST]  # ran (the nodes phase ends), then the instance went away

    message, took_s = _resume(tmp_path / "new")

    assert message.startswith("the job on train.2 exited before it resumed: aws: 1 of 1 nodes "
                              "lost: i-1 terminated")  # fmt: skip
    assert took_s < RESTORE_S / 2, "it waited for the restore budget"


def test_other_placements_exits_and_older_ones_leave_the_wait_to_its_budget(
    tmp_path: Path, nodes: list[str]
) -> None:
    new = tmp_path / "new"
    _exit(new, "ip-10-0-0-8", 0, "train", BEGUN + timedelta(minutes=2))  # the old placement's
    _exit(new, "ip-10-0-0-9", 1, "train.2", BEGUN - timedelta(hours=1))  # before this move

    message, took_s = _resume(new)

    assert message.startswith("job did not restore within 8 s of its nodes running on train.2")
    assert took_s >= RESTORE_S * 0.9
