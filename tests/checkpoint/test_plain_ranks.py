"""Plain-directory mode under torchrun: two ranks on gloo call save_files at every step, rank 0
uploads, and neither waits for a collective the other never joins."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from router.checkpoint.storage import open_location

ROOT = Path(__file__).resolve().parents[2]

TRAIN = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import torch.distributed as dist

    from router.checkpoint import Checkpointer

    dist.init_process_group("gloo")
    state = Path(sys.argv[1]) / f"state-{dist.get_rank()}"
    state.mkdir(parents=True, exist_ok=True)
    ckpt = Checkpointer.from_env()
    start = ckpt.restore_files(state)
    for step in range(start.step + 1, start.step + 4):
        (state / "progress.txt").write_text(str(step))
        ckpt.save_files(step, state)
    ckpt.close()
    dist.destroy_process_group()
    """
)


@pytest.mark.slow
def test_two_ranks_save_plain_directories_without_waiting_on_each_other(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAIN, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "SPOTROUTE_CHECKPOINT_URL": f"file://{tmp_path}/ckpt",
        "SPOTROUTE_JOB_ID": "plain-ranks",
        "SPOTROUTE_NOTICE_SOURCE": "none",
        "GLOO_SOCKET_IFNAME": "lo",  # loopback only
        "OMP_NUM_THREADS": "1",
    }
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "--max-restarts", "0", str(script), str(tmp_path)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=240,
    )  # fmt: skip

    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    location = open_location(f"file://{tmp_path}/ckpt")
    newest = max(s for s in location.steps() if location.has_manifest(s))
    assert newest == 3 and location.read_manifest(3).mode == "files"
