"""examples/train/train.py as a user runs it: stopped with SIGTERM mid-run (what the local target
does on destroy, and a cloud's shutdown does to a container), started again, it finishes with the
parameters of a run that was never interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "train" / "train.py"
STEPS = 200


def start(url: str, result: Path, step_s: float) -> subprocess.Popen[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "SPOTROUTE_CHECKPOINT_URL": url,
        "SPOTROUTE_JOB_ID": "train-example",
        "SPOTROUTE_CHECKPOINT_INTERVAL": "0.5s",
        "TRAIN_STEPS": str(STEPS),
        "TRAIN_STEP_S": str(step_s),
        "TRAIN_RESULT": str(result),
    }
    return subprocess.Popen([sys.executable, str(SCRIPT)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


@pytest.mark.slow
def test_example_stopped_with_sigterm_resumes_and_ends_like_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    plain = start(f"file://{tmp_path}/plain", tmp_path / "plain.txt", 0.0)
    output, _ = plain.communicate(timeout=180)
    assert plain.returncode == 0, output

    url = f"file://{tmp_path}/ckpt"
    first = start(url, tmp_path / "first.txt", 0.02)
    assert first.stdout is not None
    lines = []
    for line in first.stdout:
        lines.append(line)
        if "step 100 " in line:
            time.sleep(0.3)
            os.killpg(first.pid, signal.SIGTERM)  # as components/local.py stops a job
            break
    output = "".join(lines) + first.communicate(timeout=60)[0]
    assert first.returncode == 75, output
    marker = json.loads((tmp_path / "ckpt" / "interruption.json").read_text())
    assert (marker["cloud"], marker["kind"], marker["exit_code"]) == ("local", "sigterm", 75)
    assert marker["last_step"] >= 100

    second = start(url, tmp_path / "second.txt", 0.0)
    output, _ = second.communicate(timeout=180)
    assert second.returncode == 0, output
    assert f"starting at step {marker['last_step']} of {STEPS}" in output
    assert (tmp_path / "second.txt").read_text() == (tmp_path / "plain.txt").read_text()
