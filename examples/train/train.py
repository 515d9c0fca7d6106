"""A small PyTorch training job (CPU, seconds) that survives preemption with router.checkpoint.

    SPOTROUTE_CHECKPOINT_URL=file:///tmp/train-ckpt python examples/train/train.py

Deployed by spotroute (examples/train/job.yaml) the stack sets SPOTROUTE_CHECKPOINT_URL,
SPOTROUTE_CHECKPOINT_INTERVAL, SPOTROUTE_JOB_ID, SPOTROUTE_PLACEMENT_ID and
SPOTROUTE_NOTICE_SOURCE. Stop it (SIGTERM, or a spot notice on a cloud) and it saves, writes
interruption.json next to its checkpoints and exits 75; start it again and it resumes from that
step. It takes part in `route migrate`: the library answers the router's save request at the next
step (in `maybe_save`) and holds, and `restore` writes the resume record the router waits for.
At the end it prints a digest of its parameters: an interrupted, moved and resumed run prints the
same digest as one that was never interrupted.

Settings (environment): TRAIN_STEPS (default 300), TRAIN_STEP_S (sleep per step, default 0.02),
TRAIN_SEED (0), TRAIN_RESULT (a path to write the final digest to).
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

# Run from a checkout: this repository's router/ first (a training image installs the package).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from router.checkpoint import Checkpointer

BATCH = 32
FEATURES = 32


def main() -> None:
    steps = int(os.environ.get("TRAIN_STEPS", "300"))
    step_s = float(os.environ.get("TRAIN_STEP_S", "0.02"))
    seed = int(os.environ.get("TRAIN_SEED", "0"))
    torch.set_num_threads(1)  # bit-identical results on CPU, run after run
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)

    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Dropout(0.1),
        torch.nn.Linear(64, 1),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    # A fixed synthetic data set; the data position is the step, so a resume continues the
    # same shuffled order.
    data_rng = torch.Generator().manual_seed(seed)
    inputs = torch.randn(4096, FEATURES, generator=data_rng)
    targets = inputs @ torch.randn(FEATURES, 1, generator=data_rng) + 0.1

    with Checkpointer.from_env() as ckpt:
        start = ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler)
        print(f"train: starting at step {start.step} of {steps}", flush=True)
        batches_per_epoch = len(inputs) // BATCH
        for step in range(start.step, steps):
            epoch, index = divmod(step, batches_per_epoch)
            order = torch.randperm(len(inputs), generator=torch.Generator().manual_seed(epoch))
            batch = order[index * BATCH:(index + 1) * BATCH]
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs[batch]), targets[batch])
            loss.backward()
            optimizer.step()
            scheduler.step()
            if (step + 1) % 50 == 0:
                print(f"train: step {step + 1} loss {loss.item():.5f}", flush=True)
            # Saves when the interval has passed; on a notice saves now and exits 75; on the
            # router's save request saves now and holds until the hand-over is done.
            ckpt.maybe_save(step + 1, epoch=epoch, data_position={"epoch": epoch, "batch": index})
            time.sleep(step_s)
        ckpt.save(steps, blocking=True)
        ckpt.mark_finished(steps)
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
    print(f"train: done at step {steps}, parameters sha256 {digest.hexdigest()}", flush=True)
    if os.environ.get("TRAIN_RESULT"):
        with open(os.environ["TRAIN_RESULT"], "w") as handle:
            handle.write(digest.hexdigest() + "\n")


if __name__ == "__main__":
    main()
