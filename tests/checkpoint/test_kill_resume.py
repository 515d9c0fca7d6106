"""SIGKILL at 20 seeded points, each followed by a resume: the end equals an uninterrupted run.

Each training segment is a child process forked from a fork server that has imported torch (so a
segment starts in milliseconds, not seconds). The parent reads the child's step count from a pipe
and kills it at the chosen step after a chosen delay, which lands kills mid-step, mid-staging,
mid-upload and mid-manifest. Saves are asynchronous, every 3 steps.
"""

from __future__ import annotations

import multiprocessing
import random
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
import torch
from segments import run_segment

TOTAL_STEPS = 48
KILLS = 20
SEED = 8
WIDTH = 192  # ~40k parameters + AdamW moments: a save takes long enough to be interrupted


def _segment(url: str, result_path: str, out: Connection) -> None:
    import training

    from router.checkpoint import Checkpointer

    ckpt = Checkpointer(url, interval_s=None, every_steps=3, handle_sigterm=False)
    final, started = training.run(ckpt, seed=SEED, steps=TOTAL_STEPS, width=WIDTH,
                                  on_step=lambda step: out.send(step))
    out.send(("started", started))
    torch.save(final, result_path)
    ckpt.close()
    out.send("done")


def _context() -> Any:
    context = multiprocessing.get_context("forkserver")
    # What a segment would otherwise import each time (DCP's state_dict helpers pull in dynamo).
    context.set_forkserver_preload([
        "torch", "numpy", "fsspec", "router.checkpoint", "training",
        "torch.distributed.checkpoint", "torch.distributed.checkpoint.state_dict", "torch._dynamo",
        "fsspec.implementations.local", "xxhash",
    ])
    return context


@pytest.mark.slow
def test_sigkill_at_twenty_seeded_points_then_resume_matches_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    import training

    rng = random.Random(1234)
    kill_steps = sorted(rng.sample(range(2, TOTAL_STEPS - 2), KILLS))
    delays_s = [rng.choice([0.0, 0.0005, 0.002, 0.005, 0.01, 0.02]) for _ in kill_steps]
    url = f"file://{tmp_path}/ckpt"
    result = str(tmp_path / "final.pt")
    context = _context()
    resumed_from: list[int] = []
    for kill_step, delay_s in [*zip(kill_steps, delays_s, strict=True), (None, 0.0)]:
        first, exitcode, _ = run_segment(
            context, _segment, (url, result),
            lambda _, step, at=kill_step: at is not None and step >= at, delay_s)
        assert exitcode is not None
        if kill_step is not None:
            assert exitcode == -9, f"segment ended by itself at step {kill_step}"
        else:
            assert exitcode == 0
        if first is not None:
            resumed_from.append(first - 1)
    assert len(resumed_from) == KILLS + 1
    assert resumed_from[0] == 0 and max(resumed_from) > 0
    final = torch.load(result)
    assert training.same(final, training.reference(seed=SEED, steps=TOTAL_STEPS, width=WIDTH))
