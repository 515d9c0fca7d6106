"""Issue 12 items 2-3 without the engine: stack locks (holder, provably dead), orphans."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.engine.locks import FileStackLocks, pulumi_process_alive
from router.engine.processes import (
    OWNER_ENV,
    find_orphans,
    guarded_python,
    owner_token,
    signal_hook,
)


def _write_lock(state: Path, stack: str, pid: int, host: str) -> Path:
    path = state / ".pulumi" / "locks" / "organization" / "spotroute" / stack / "a-b-c.json"
    path.parent.mkdir(parents=True)
    stamp = "2026-12-01T11:07:02.623634871Z"  # as the Go CLI writes it (nanoseconds)
    path.write_text(
        json.dumps({"pid": pid, "username": "ann", "hostname": host, "timestamp": stamp})
    )
    (path.parent / "a-b-c.json.attrs").write_text("{}")
    return path


def test_a_lock_whose_process_is_gone_on_this_host_is_provably_dead(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    _write_lock(tmp_path, "quickstart", gone.pid, socket.gethostname())
    locks = FileStackLocks(tmp_path, "spotroute")
    [lock] = locks.held("quickstart")
    assert (
        lock.holder()
        == f"ann@{socket.gethostname()} (pid {gone.pid}) since 2026-12-01 11:07:02 UTC"
    )
    assert lock.since == datetime(2026, 12, 1, 11, 7, 2, 623634, tzinfo=UTC)
    assert lock.provably_dead()
    locks.remove(lock)
    assert locks.held("quickstart") == []
    assert list((tmp_path / ".pulumi" / "locks").rglob("*.attrs")) == []


def test_a_lock_held_on_another_host_is_never_cleared(tmp_path: Path) -> None:
    _write_lock(tmp_path, "quickstart", 1, "someone-elses-laptop")
    [lock] = FileStackLocks(tmp_path, "spotroute").held("quickstart")
    assert not lock.provably_dead()


def test_a_reused_pid_that_is_not_pulumi_does_not_keep_a_lock(tmp_path: Path) -> None:
    # This test process is alive but is not a pulumi CLI: the lock's owner is gone.
    _write_lock(tmp_path, "quickstart", os.getpid(), socket.gethostname())
    [lock] = FileStackLocks(tmp_path, "spotroute").held("quickstart")
    assert not pulumi_process_alive(os.getpid())
    assert lock.provably_dead()


def test_an_unreadable_lock_is_shown_as_held_and_never_cleared(tmp_path: Path) -> None:
    path = _write_lock(tmp_path, "quickstart", 1, "h")
    path.write_text("{not json")
    [lock] = FileStackLocks(tmp_path, "spotroute").held("quickstart")
    assert lock.pid == 0 and not lock.provably_dead(hostname="?")


def _spawn_engine_like(home: Path, owner: str) -> subprocess.Popen[bytes]:
    """A process that looks like an engine plugin: `pulumi` in its command line, our env."""
    env = {**os.environ, "SPOTROUTE_HOME": str(home), OWNER_ENV: owner}
    argv = [sys.executable, "-c", "import time; time.sleep(30)", "pulumi.dynamic"]
    return subprocess.Popen(argv, env=env)


def test_engine_processes_of_a_dead_route_command_are_orphans(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = _spawn_engine_like(tmp_path, f"{dead.pid}:12345")
    owned = _spawn_engine_like(tmp_path, owner_token())  # this process is alive: not an orphan
    try:
        time.sleep(0.2)
        found = {o.pid for o in find_orphans(tmp_path)}
        assert orphan.pid in found and owned.pid not in found
    finally:
        for p in (orphan, owned):
            p.kill()
            p.wait()


def test_guarded_plugin_interpreter_exits_when_its_parent_dies(tmp_path: Path) -> None:
    python = guarded_python(tmp_path, sys.executable)
    # parent: a shell that starts the guarded python (sleeping in a module) and is then killed
    (tmp_path / "napper.py").write_text("import time\ntime.sleep(30)\n")
    parent = subprocess.Popen(
        ["/bin/sh", "-c", f"{python} -u -m napper & echo $!; wait"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    time.sleep(0.5)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and Path(f"/proc/{child}").exists():
        state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            break
        time.sleep(0.1)
    else:
        if Path(f"/proc/{child}").exists():
            os.kill(child, 9)
            pytest.fail("the guarded plugin outlived its parent by 5 s")


def test_signal_hook_is_off_unless_the_test_variable_names_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SPOTROUTE_TEST_SIGNAL_AT", raising=False)
    assert signal_hook("deploy") is None
    monkeypatch.setenv("SPOTROUTE_TEST_SIGNAL_AT", "destroy:3:KILL")
    assert signal_hook("deploy") is None and signal_hook("destroy") is not None


def test_signal_hook_at_end_signals_at_the_engines_summary_event_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    killed: list[tuple[int, int]] = []
    monkeypatch.setenv("SPOTROUTE_TEST_SIGNAL_AT", "destroy:end:KILL")
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append((pid, sig)))
    hook = signal_hook("destroy")
    assert hook is not None
    for _ in range(30):
        hook(SimpleNamespace(summary_event=None))
    assert killed == []
    hook(SimpleNamespace(summary_event=object()))
    assert killed == [(os.getpid(), 9)]


def test_a_failing_restore_of_the_stack_file_does_not_hide_the_original_error(
    tmp_path: Path,
) -> None:
    from router.core.errors import OperationFailed
    from router.engine.automation import config_transaction

    stack_file = tmp_path / "stacks" / "Pulumi.job.yaml"
    stack_file.parent.mkdir()
    stack_file.write_text("config: {}\n")
    with pytest.raises(OperationFailed) as err, config_transaction(stack_file):
        stack_file.parent.chmod(0o500)
        stack_file.chmod(0o400)
        raise OperationFailed("job job: the original problem")
    stack_file.parent.chmod(0o700)
    assert err.value.message.startswith("job job: the original problem")


def test_empty_attrs_sidecar_left_by_a_killed_cli_is_removed(tmp_path: Path) -> None:
    from router.engine.locks import repair_interrupted_writes

    stacks = tmp_path / ".pulumi" / "stacks" / "spotroute"
    stacks.mkdir(parents=True)
    (stacks / "job.json").write_text("{}")
    (stacks / "job.json.attrs").write_text("")  # what `pulumi stack ls` failed on with "EOF"
    (stacks / "job.json.bak.attrs").write_text('{"user.content_type": "x"}')
    assert repair_interrupted_writes(tmp_path) == [stacks / "job.json.attrs"]
    assert (stacks / "job.json.bak.attrs").exists()
