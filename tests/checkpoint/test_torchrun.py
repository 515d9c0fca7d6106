"""torchrun, 2 ranks on gloo: a spot notice from the fake metadata server mid-run leaves a complete
checkpoint and the marker; a 2-rank resume ends exactly where an uninterrupted run ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from fake_metadata import FakeMetadataServer

from router.checkpoint import Manifest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).parent / "dist_train.py"
STEPS = 40


def torchrun(out: Path, ckpt_url: str, metadata: str | None,
             step_s: float, node_dir: Path | None = None) -> subprocess.Popen[str]:
    out.mkdir(parents=True, exist_ok=True)
    env = {
        **({"SPOTROUTE_NODE_DIR": str(node_dir)} if node_dir else {}),
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "SPOTROUTE_CHECKPOINT_URL": ckpt_url,
        "SPOTROUTE_JOB_ID": "dist-job",
        "SPOTROUTE_NOTICE_SOURCE": "aws" if metadata else "none",
        "SPOTROUTE_METADATA_ENDPOINT": metadata or "",
        "DIST_TRAIN_STEP_S": str(step_s),
        "GLOO_SOCKET_IFNAME": "lo",  # loopback only
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "--max-restarts", "0", str(SCRIPT), str(out), str(STEPS)],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def finals(out: Path) -> list[list[torch.Tensor]]:
    return [torch.load(out / f"final-{rank}.pt") for rank in (0, 1)]


@pytest.mark.slow
def test_torchrun_notice_mid_run_then_two_rank_resume_is_identical(tmp_path: Path) -> None:
    import training

    reference = torchrun(tmp_path / "reference", f"file://{tmp_path}/ref-ckpt", None, 0.0)
    output, _ = reference.communicate(timeout=240)
    assert reference.returncode == 0, output
    expected = finals(tmp_path / "reference")
    assert training.same(expected[0], expected[1])  # DDP keeps the ranks in step

    url = f"file://{tmp_path}/ckpt"
    with FakeMetadataServer() as metadata:
        node_dir = tmp_path / "node"  # what a cloud node's start-up script gives the job
        run = torchrun(tmp_path / "first", url, metadata.endpoint, 0.1, node_dir)
        progress = tmp_path / "first" / "progress"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and run.poll() is None:
            if progress.exists() and progress.read_text() and int(progress.read_text()) >= 10:
                metadata.state.preempt_aws()
                break
            time.sleep(0.05)
        output, _ = run.communicate(timeout=180)
    # torchrun reports its workers' 75 (saved on a notice) as its own 1: the node's start-up
    # script cannot tell that from a crash by the status, so local rank 0 left it a marker.
    assert run.returncode == 1, output
    assert "exitcode  : 75" in output or "exit code 75" in output.lower() or "75" in output, output
    on_node = json.loads((node_dir / "interruption.json").read_text())
    assert (on_node["kind"], on_node["exit_code"], on_node["job_id"]) == ("terminate", 75,
                                                                          "dist-job")
    marker = json.loads((tmp_path / "ckpt" / "interruption.json").read_text())
    assert (marker["cloud"], marker["kind"], marker["job_id"]) == ("aws", "terminate", "dist-job")
    last = marker["last_step"]
    assert 10 <= last < STEPS
    manifest = Manifest.from_json((tmp_path / "ckpt" / f"step-{last:012d}" / "manifest.json")
                                  .read_text())
    assert manifest.world_size == 2
    names = {entry.path for entry in manifest.files}
    assert {"__0_0.distcp", "__1_0.distcp", "rank-00000.json", "rank-00001.json",
            ".metadata"} <= names

    resumed = torchrun(tmp_path / "second", url, None, 0.0)
    output, _ = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, output
    assert int((tmp_path / "second" / "started").read_text()) == last
    got = finals(tmp_path / "second")
    assert training.same(got[0], expected[0]) and training.same(got[1], expected[1])
