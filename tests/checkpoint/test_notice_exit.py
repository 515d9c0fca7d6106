"""After a notice, both interruption markers say when the checkpoint was complete (`saved_at`).

The exit status comes later: SystemExit(75) unwinds the training code and runs its `finally`
blocks and at-exit handlers, then the interpreter shuts down (about a second for a process that
imported torch, docs/checkpoints.md). The node's start-up script and the router read the time
the state was safe from the markers, not from the exit.
"""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime
from pathlib import Path

import pytest
from servers import Store
from training import build, train_step

from router.checkpoint import EXIT_PREEMPTED, Checkpointer, Manifest


def test_both_markers_record_when_the_checkpoint_was_complete(
    local_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node_dir = tmp_path / "node"
    monkeypatch.setenv("SPOTROUTE_NODE_DIR", str(node_dir))
    model, optimizer, scheduler = build(31, 8)
    ckpt = Checkpointer(local_store.url, interval_s=None, every_steps=100, job_id="train-2")
    ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    with pytest.raises(SystemExit) as exited:
        for step in range(1, 20):
            train_step(model, optimizer, scheduler, 8)
            if step == 4:
                os.kill(os.getpid(), signal.SIGTERM)  # the local target's destroy, docker stop
            ckpt.maybe_save(step)
    assert exited.value.code == EXIT_PREEMPTED

    fs, root = local_store.fs_path()
    marker = json.loads(fs.cat_file(f"{root}/interruption.json"))
    on_node = json.loads((node_dir / "interruption.json").read_text())
    assert marker["last_step"] == on_node["last_step"] == 4
    saved_at = datetime.fromisoformat(on_node["saved_at"])
    assert marker["saved_at"] == on_node["saved_at"]
    notice_time = datetime.fromisoformat(marker["notice_time"])
    written_at = datetime.fromisoformat(marker["written_at"])
    assert notice_time <= saved_at <= written_at
    assert marker["notice_to_saved_s"] == pytest.approx(
        (saved_at - notice_time).total_seconds(), abs=0.002
    )
    manifest = Manifest.from_json(fs.cat_file(f"{root}/step-000000000004/manifest.json"))
    assert datetime.fromisoformat(manifest.time) <= saved_at  # the manifest (s) came first
