"""Issue 24 items 3 and 11, below the engine: the router's reading of the job's hand-over bounds
(router/flows/handover_bounds.py), the example trainer's own bounds (it implements the protocol
with the standard library), and a Ctrl-C the engine noted but no engine call was cut short by.
The real-engine versions: tests/engine/test_handover_bounds_engine.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from router.config import checkpoints as ckpt
from router.core.journal import STEPS, Journal
from router.engine.automation import engine_interrupts
from router.flows.handover_bounds import (
    HANDOVER_ID_ENV,
    complete_probation,
    job_gave_up,
    probation_env,
)

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
TRAIN = Path(__file__).resolve().parents[2] / "examples" / "local-market" / "train.py"


def _journal(old: Path, new: Path, *, upto: str, kind: str = "migrate") -> Journal:
    """A journal with every step before `upto` done, its placements' checkpoints in old/new."""
    j = Journal("m-1", "train", kind, "train", "train.2", {"cloud": "local"}, "why",
                NOW.isoformat())  # fmt: skip
    data = {
        "intent": {"checkpoint_url": str(old)},
        "new-stack-up": {"outputs": {"checkpointUrl": str(new)}},
    }
    for step in STEPS[: STEPS.index(upto)]:
        j = j.begin(step, NOW).finish(step, NOW, data.get(step, {}))
    return j


def test_a_hold_that_ran_out_rolls_the_move_back_while_it_can_be_undone(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    journal = _journal(old, new, upto="resume-confirmed")
    assert job_gave_up(journal) is None
    ckpt.checkpoint_store(old).write_json(ckpt.EXPIRED_NAME, {"id": "m-0", "held_s": 9})
    assert job_gave_up(journal) is None  # another move's record
    ckpt.checkpoint_store(old).write_json(ckpt.EXPIRED_NAME, {"id": "m-1", "held_s": 3600.4})

    reason = job_gave_up(journal)

    assert reason == (
        "the job stopped holding after 3600 s (SPOTROUTE_HOLD_TIMEOUT) and trains on at train"
    )
    # Past resume-confirmed the new placement is the job: roll forward as always.
    assert job_gave_up(_journal(old, new, upto="old-stack-down")) is None
    # A re-placement has no old placement to fall back on.
    assert job_gave_up(_journal(old, new, upto="resume-confirmed", kind="replace")) is None


def test_a_new_placement_that_stopped_waiting_rolls_the_move_back(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    ckpt.checkpoint_store(new).write_json(
        ckpt.ABANDONED_NAME, {"id": "m-1", "step": 42, "waited_s": 1800.2}
    )

    reason = job_gave_up(_journal(old, new, upto="resume-confirmed"))

    assert reason is not None and reason.startswith("the new placement stopped at step 42 after")
    assert "1800 s" in reason and "SPOTROUTE_HANDOVER_TIMEOUT" in reason


def test_a_move_puts_its_new_placement_on_probation_and_completes_it(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    journal = _journal(old, new, upto="resume-confirmed")
    assert probation_env(journal) == {HANDOVER_ID_ENV: "m-1"}
    assert probation_env(replace(journal, kind="replace")) == {}

    complete_probation(journal, NOW)
    complete_probation(journal, datetime(2026, 12, 2, tzinfo=UTC))  # a re-run step: unchanged

    # Both sides are told: the new job stops waiting, the old one stops holding.
    for where in (new, old):
        written = ckpt.checkpoint_store(where).read_json(ckpt.COMPLETE_NAME)
        assert written == {"id": "m-1", "placement": "train.2", "completed_at": NOW.isoformat()}
    complete_probation(replace(journal, kind="replace", id="r-1"), NOW)  # nothing to tell
    assert ckpt.checkpoint_store(new).read_json(ckpt.COMPLETE_NAME)["id"] == "m-1"  # type: ignore[index]


def _trainer(directory: Path, placement: str, **env: str) -> subprocess.Popen[bytes]:
    full = {**os.environ, "SPOTROUTE_CHECKPOINT_DIR": str(directory), "STEPS": "0",
            "STEP_S": "0.01", "CHECKPOINT_EVERY": "3", "SPOTROUTE_PLACEMENT_ID": placement,
            **env}  # fmt: skip
    return subprocess.Popen([sys.executable, str(TRAIN)], env=full, stdout=subprocess.DEVNULL)


def _wait(predicate: object, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_example_trainer_stops_a_new_placement_in_doubt_then_ends_the_stale_hold(
    tmp_path: Path,
) -> None:
    # The defaults' order: the new placement gives up before the old one stops holding, so the
    # two never train at once in the directory they share.
    old = _trainer(tmp_path, "a", SPOTROUTE_HOLD_TIMEOUT="4s")
    try:
        _wait(lambda: ckpt.latest_checkpoint(tmp_path) is not None)
        ckpt.request_save(tmp_path, "m-1", "a", NOW)
        _wait(lambda: ckpt.answered(tmp_path, "m-1") is not None)
        held = ckpt.answered(tmp_path, "m-1")
        assert held is not None
        # new-stack-up, then the router dies: nobody confirms the resume or completes the move.
        new = _trainer(tmp_path, "b", SPOTROUTE_HANDOVER_ID="m-1",
                       SPOTROUTE_HANDOVER_TIMEOUT="0.5s")  # fmt: skip
        assert new.wait(30) == 0
        gave_up = ckpt.handover_abandoned(tmp_path, "m-1")
        assert gave_up is not None and gave_up["placement"] == "b" and gave_up["waited_s"] >= 0.5
        assert ckpt.resumed(tmp_path)["step"] == held.step  # type: ignore[index]
        assert ckpt.hold_expired(tmp_path, "m-1") is None and old.poll() is None  # still holds

        _wait(lambda: ckpt.hold_expired(tmp_path, "m-1") is not None)
        record = ckpt.hold_expired(tmp_path, "m-1")
        assert record is not None and record["step"] == held.step and record["held_s"] >= 4
        _wait(lambda: ckpt.latest_checkpoint(tmp_path).step > gave_up["step"] + 3)  # type: ignore[union-attr]
        assert old.poll() is None, "the old placement trains on"
    finally:
        old.terminate()
        old.wait(10)

    # A move the router completes (resume confirmed): the holding job exits as handed over,
    # the new placement is the job and runs on past its probation.
    moved = tmp_path / "moved"
    moved.mkdir()
    holder = _trainer(moved, "c")
    kept = None
    try:
        _wait(lambda: ckpt.latest_checkpoint(moved) is not None)
        ckpt.request_save(moved, "m-2", "c", NOW)
        _wait(lambda: ckpt.answered(moved, "m-2") is not None)
        kept = _trainer(moved, "d", SPOTROUTE_HANDOVER_ID="m-2", SPOTROUTE_HANDOVER_TIMEOUT="1s")
        _wait(lambda: (ckpt.resumed(moved) or {}).get("placement") == "d")
        ckpt.complete_handover(moved, "m-2", "d", NOW)
        assert holder.wait(10) == 0 and ckpt.marker(moved) is None  # handed over
        time.sleep(2)
        assert kept.poll() is None and ckpt.handover_abandoned(moved, "m-2") is None
    finally:
        for proc in (holder, kept):
            if proc is not None:
                proc.terminate()
                proc.wait(10)


def test_a_ctrl_c_the_engine_noted_reaches_the_callers_handler_when_no_call_was_cut_short() -> None:
    heard: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: heard.append(signum))
    try:
        with engine_interrupts() as interrupted:
            os.kill(os.getpid(), signal.SIGINT)  # between two engine calls: nothing cancelled
            _wait(interrupted, 5)
            assert heard == []  # the engine's handler took it …
        assert heard == [signal.SIGINT]  # … and hands it on: route migrate stops at a step
        with engine_interrupts():
            pass
        assert heard == [signal.SIGINT]  # no Ctrl-C, nothing handed on
    finally:
        signal.signal(signal.SIGINT, previous)
