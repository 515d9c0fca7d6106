"""The rehearsal's light job (router/checkpoint/rehearsal_job.py) as the local target runs it:
paced steps, plain-directory checkpoints, a SIGTERM notice saved and exited 75, a restart that
takes its restore overhead and goes on from the saved step to the digest of all steps done once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from router.checkpoint.rehearsal_job import HEARTBEAT_FILE, digest

ROOT = Path(__file__).resolve().parents[2]


def _start(tmp: Path, node: str, steps: int) -> tuple[subprocess.Popen[bytes], Path]:
    work = tmp / node
    work.mkdir()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "SPOTROUTE_CHECKPOINT_URL": f"file://{tmp / 'ckpt'}/",
        "SPOTROUTE_CHECKPOINT_INTERVAL": "0.2",
        "SPOTROUTE_NOTICE_SOURCE": "local",  # SIGTERM, as the local target's nodes send it
        "SPOTROUTE_PLACEMENT_ID": node,
        "REHEARSAL_STEPS": str(steps),
        "REHEARSAL_STEP_S": "0.02",
        "REHEARSAL_RESTORE_S": "0.6",
        "REHEARSAL_LOG": str(tmp / "events.jsonl"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "router.checkpoint.rehearsal_job"],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return proc, work


def _events(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait_for(predicate, timeout_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_notice_is_saved_and_the_restart_finishes_all_the_work_once(tmp_path: Path) -> None:
    steps = 150
    first, work = _start(tmp_path, "a", steps)
    _wait_for(lambda: any(e["event"] == "saved" for e in _events(tmp_path)))
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=30) == 75  # saved on the notice, then EX_TEMPFAIL
    stopped = [e for e in _events(tmp_path) if e["event"] == "stopped"]
    assert len(stopped) == 1 and 0 < stopped[0]["step"] < steps
    marker = json.loads((tmp_path / "ckpt" / "interruption.json").read_text())
    assert marker["last_step"] == stopped[0]["step"]
    assert json.loads((work / HEARTBEAT_FILE).read_text())["state"] == "stopped"

    began = time.monotonic()
    second, work = _start(tmp_path, "b", steps)
    assert second.wait(timeout=60) == 0
    events = [e for e in _events(tmp_path) if e["placement"] == "b"]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[1] == "restored" and kinds[-1] == "finished"
    # it went on from the step it saved, took its restore overhead first, and paced the rest
    assert events[1]["step"] == stopped[0]["step"]
    assert time.monotonic() - began >= 0.6 + (steps - events[1]["step"]) * 0.02
    assert events[-1] == {**events[-1], "step": steps, "digest": digest(steps)}
    assert (tmp_path / "ckpt" / "finished.json").exists()
    assert json.loads((work / HEARTBEAT_FILE).read_text())["state"] == "done"


def test_the_digest_tells_work_done_once_from_work_skipped_or_redone() -> None:
    assert digest(3) == digest(3, 2, digest(2))
    assert digest(4) != digest(4, 2, digest(3))  # step 2 done twice
    assert digest(4) != digest(4, 3, digest(2))  # step 2 skipped
