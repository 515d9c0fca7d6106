"""Issue 32 item 12: a deploy or destroy refused because another holds the job's lease names the
holder as recorded (command, user, host, pid, since when), and a refused lock never names
"unknown@…" for want of a USER variable.

Before: every refusal said "being moved or watched by a router on HOST (pid N)", whoever held the
lease (a user's own `route deploy` too), and a lease given back in the instant between the refusal
and the read of its holder gave "a router on ? (pid ?)".
"""

from __future__ import annotations

import os
import pwd
import re
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.config.project import Project
from router.core.errors import OperationFailed
from router.engine.job_records import LEASE_COMMANDS, JobRecords, holder_id
from router.engine.lock_holders import current_user, holder_name
from router.engine.records import FileRecords
from router.flows.live_placement import exclusive_of_moves
from tests.unit.projects import infra_project

JOB = "train"
SINCE = re.compile(r" since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FileRecords:
    project: Project = infra_project(tmp_path, monkeypatch)
    return FileRecords(project.root.parent / "home")


@pytest.mark.parametrize("command", LEASE_COMMANDS)
def test_a_refusal_names_the_command_user_host_pid_and_since_when(
    store: FileRecords, command: str
) -> None:
    records = JobRecords(store)
    assert records.acquire(JOB, holder_id(f"{command}-1a2b"), 300, datetime.now(UTC))

    with pytest.raises(OperationFailed) as err, exclusive_of_moves(store, JOB, doing="destroy"):
        pytest.fail("the destroy went ahead while another held the job")

    me = f"({current_user()}@{socket.gethostname()}, pid {os.getpid()})"
    message = err.value.message
    assert message.startswith(f"job {JOB} is held by `route {command}` {me} since "), message
    assert SINCE.search(message) and message.endswith(
        "(`route status` shows the job's move, if any)"
    )
    assert "moved or watched" not in message and "\n" not in message


def test_since_is_when_the_lease_was_taken_not_its_last_renewal(store: FileRecords) -> None:
    records, holder = JobRecords(store), holder_id("watch-1a2b")
    taken = datetime(2026, 12, 1, 11, 7, 2, tzinfo=UTC)
    assert records.acquire(JOB, holder, 300, taken)
    renewed = records.acquire(JOB, holder, 300, datetime(2026, 12, 1, 11, 9, 0, tzinfo=UTC))

    assert renewed is not None and renewed.since == taken
    lease = records.current(JOB)
    assert lease is not None
    assert lease.describe().endswith(" since 2026-12-01 11:07:02 UTC")


def test_a_lease_given_back_as_it_was_refused_is_taken_on_a_second_ask(
    store: FileRecords, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder gives the lease back between our refused ask and our read of who holds it:
    ask again (as a refused lock waits for its holder's name) instead of naming nobody."""
    records = JobRecords(store)
    ask = JobRecords.acquire
    asked: list[str] = []

    def busy_once(self: JobRecords, job: str, holder: str, ttl_s: float, now: datetime):  # type: ignore[no-untyped-def]
        asked.append(holder)
        return None if len(asked) == 1 else ask(self, job, holder, ttl_s, now)

    monkeypatch.setattr(JobRecords, "acquire", busy_once)
    ran: list[bool] = []
    with exclusive_of_moves(store, JOB, doing="deploy"):
        ran.append(True)

    assert ran == [True] and len(asked) >= 2
    lease = records.current(JOB)
    assert lease is not None and lease.holder == ""  # given back after the block


def test_a_lock_holder_without_a_user_variable_is_named_by_the_account(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    account = pwd.getpwuid(os.getuid()).pw_name

    assert holder_name().startswith(f"{account}@{socket.gethostname()} (pid {os.getpid()})")
    assert current_user() == account
