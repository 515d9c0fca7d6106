"""Issue 32 item 11: a Ctrl-C that reaches the engine command a move's step is running ends the
move at that step, journaled, exit 130 — never a backend error.

The real Mover runs a journal on a file:// record store; the engine is replaced by one whose
`pulumi stack ls` fails as the real one does when the terminal's SIGINT reaches it (the Automation
API's CommandError, turned by Engine.list_stacks into "cannot list jobs on …: CommandError").
tests/engine/test_migrate_ctrl_c.py does the same through the real CLI and engine.
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from router.core.errors import Interrupted, OperationFailed
from router.core.journal import STEPS, Journal
from router.engine.job_records import JobRecords, holder_id
from router.engine.records import FileRecords
from router.flows.migrate import Mover
from router.flows.move_stops import journaled_stop, stopped_at_a_step

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
JOB = "train"


class CtrlCEngine:
    """An engine whose every command is cut short by the Ctrl-C the terminal sent with it."""

    def __init__(self, stop: list[bool]) -> None:
        self.stop = stop

    def list_stacks(self) -> list[Any]:
        signal.raise_signal(signal.SIGINT)  # the router notes it (route migrate's handler)
        raise OperationFailed("cannot list jobs on file:///state: CommandError")


def _journal_at(step: str) -> Journal:
    journal = Journal("m-1", JOB, "migrate", JOB, f"{JOB}.2", {"cloud": "local"}, "test",
                      NOW.isoformat())  # fmt: skip
    for done in STEPS[: STEPS.index(step)]:
        journal = journal.begin(done, NOW).finish(done, NOW, {})
    return journal


@pytest.fixture
def stopping() -> Any:
    """route migrate's handler: a first Ctrl-C is only noted (tests deliver it in-process)."""
    noted: list[bool] = []
    previous = signal.signal(signal.SIGINT, lambda _s, _f: noted.append(True))
    yield noted
    signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_that_kills_the_engine_command_of_old_stack_down_is_the_journaled_stop(
    tmp_path: Path, stopping: list[bool]
) -> None:
    records = JobRecords(FileRecords(tmp_path / "home"))
    journal = _journal_at("old-stack-down")
    records.write_journal(journal)
    mover = Mover(None, CtrlCEngine(stopping), holder_id("migrate-1"), records,  # type: ignore[arg-type]
                  stop_requested=lambda: bool(stopping))  # fmt: skip

    with pytest.raises(Interrupted) as err:
        mover.run(journal)

    assert stopping == [True]
    assert err.value.exit_code == 130
    assert err.value.message == (
        f"job {JOB}: interrupted before old-stack-down — the move stays journaled; "
        f"`route migrate {JOB}` finishes it"
    )
    left = records.open_journal(JOB)
    assert left is not None and left.next_step() == "old-stack-down"
    assert left.steps["old-stack-down"].state == "begun"  # begun, not done: the next run redoes it


def test_without_a_stop_the_same_failure_is_the_backend_s(tmp_path: Path) -> None:
    records = JobRecords(FileRecords(tmp_path / "home"))
    journal = _journal_at("old-stack-down")
    records.write_journal(journal)

    class Failing:
        def list_stacks(self) -> list[Any]:
            raise OperationFailed("cannot list jobs on file:///state: permission denied")

    mover = Mover(None, Failing(), holder_id("migrate-1"), records)  # type: ignore[arg-type]
    with pytest.raises(OperationFailed) as err:
        mover.run(journal)
    assert not isinstance(err.value, Interrupted)
    assert "permission denied" in err.value.message


def test_the_stop_line_is_the_same_whichever_way_the_move_stopped() -> None:
    journal = _journal_at("new-stack-up").begin("new-stack-up", NOW)
    with pytest.raises(Interrupted) as err:
        stopped_at_a_step(journal)
    assert err.value.message == journaled_stop(journal)
    assert "interrupted before new-stack-up — the move stays journaled" in err.value.message
