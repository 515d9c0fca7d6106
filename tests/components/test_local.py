"""The local target's dynamic providers against a real process and a real directory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from components.local import (
    LocalDirectoryProvider,
    LocalProcessProvider,
    parse_group_id,
    process_alive,
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Where the router puts the local target's directories (spotroute:local*Dir)."""
    return tmp_path / "home"


def _props(checkpoint_dir: Path, command: list[str]) -> dict[str, object]:
    return {
        "job_name": "quick",
        "sandbox_dir": str(checkpoint_dir.parent / "home" / "sandbox" / "quick"),
        "command": command,
        "env": {"GREETING": "hi"},
        "image": "",
        "checkpoint_url": f"file://{checkpoint_dir}/",
        "market": "spot",
        "labels": {"team": "ml"},
        "checkpoint_interval_s": 90.0,
    }


def _wait_for(predicate, timeout_s: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


LOOP = [
    "/bin/sh",
    "-c",
    'echo "$GREETING $SPOTROUTE_JOB_ID every $SPOTROUTE_CHECKPOINT_INTERVAL"; '
    'while true; do date > "$SPOTROUTE_CHECKPOINT_DIR/step"; sleep 0.2; done',
]


def test_process_starts_in_sandbox_with_job_env_and_stops_on_delete(
    home: Path, tmp_path: Path
) -> None:
    checkpoints = tmp_path / "ckpt"
    checkpoints.mkdir()
    provider = LocalProcessProvider()
    created = provider.create(_props(checkpoints, LOOP))
    ids = parse_group_id(created.id)
    assert ids is not None
    pid, ticks = ids
    try:
        assert process_alive(pid, ticks)
        assert created.outs["sandbox"] == str(home / "sandbox" / "quick")
        # The job sees its checkpoint directory and its own env, and writes there.
        assert _wait_for(lambda: (checkpoints / "step").exists())
        assert _wait_for(lambda: "hi quick every 90" in Path(created.outs["log_path"]).read_text())
        assert provider.read(created.id, created.outs).id == created.id
    finally:
        provider.delete(created.id, created.outs)
    assert not process_alive(pid, ticks)
    # Once gone, a refresh reads it as deleted.
    assert provider.read(created.id, created.outs).id == ""


def test_process_that_ignores_sigterm_is_killed_after_grace(home: Path, tmp_path: Path) -> None:
    from components import local

    stubborn = ["/bin/sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"]
    created = LocalProcessProvider().create(_props(tmp_path / "ckpt", stubborn))
    pid, ticks = parse_group_id(created.id)  # type: ignore[misc]
    started = time.monotonic()
    local.stop_process(pid, ticks, grace_s=0.5)
    assert not process_alive(pid, ticks)
    assert time.monotonic() - started < 5


def test_changed_command_replaces_but_changed_labels_update_in_place(tmp_path: Path) -> None:
    provider = LocalProcessProvider()
    olds = _props(tmp_path, LOOP)
    relabelled = provider.diff("x", olds, {**olds, "labels": {"team": "infra"}})
    assert relabelled.changes and not relabelled.replaces
    recommanded = provider.diff("x", olds, {**olds, "command": ["/bin/true"]})
    assert recommanded.replaces == ["command"]
    assert not provider.diff("x", olds, dict(olds)).changes


def test_checkpoint_directory_is_private_and_kept_when_it_holds_checkpoints(home: Path) -> None:
    provider = LocalDirectoryProvider()
    directory = home / "checkpoints" / "quick"
    created = provider.create({"job_name": "quick", "directory": str(directory), "labels": {}})
    path = Path(created.id)
    assert path == home / "checkpoints" / "quick"
    assert created.outs["url"] == f"file://{path}/"
    assert path.stat().st_mode & 0o777 == 0o700
    (path / "step-10.pt").write_text("weights")
    provider.delete(created.id, created.outs)
    assert (path / "step-10.pt").read_text() == "weights"
    (path / "step-10.pt").unlink()
    provider.delete(created.id, created.outs)
    assert not path.exists()


def test_a_job_process_that_is_gone_is_replaced_not_reported_deployed(tmp_path: Path) -> None:
    """Issue 12 item 11: a killed deploy or destroy left the state naming a dead process."""
    provider = LocalProcessProvider()
    olds = _props(tmp_path, LOOP)
    dead = provider.diff("local-process:999999:1", olds, dict(olds))
    assert dead.changes and dead.replaces == ["command"]
