"""Run under torchrun: DDP on gloo (CPU), checkpointed with Checkpointer.from_env().

    torchrun --standalone --nproc-per-node 2 tests/checkpoint/dist_train.py OUT_DIR STEPS

Each rank draws different data (its own RNG streams), so a resume has to restore every rank's
RNG, not only rank 0's. Rank 0 writes its step to OUT_DIR/progress; each rank writes its final
parameters to OUT_DIR/final-<rank>.pt. DIST_TRAIN_STEP_S slows steps so a test can act mid-run.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).parent))

import training

from router.checkpoint import Checkpointer

SEED = 31


def main() -> None:
    out, steps = Path(sys.argv[1]), int(sys.argv[2])
    step_s = float(os.environ.get("DIST_TRAIN_STEP_S", "0"))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model, optimizer, scheduler = training.build(SEED, 16)  # same initial weights everywhere
    training.seed_everything(SEED * 100 + rank)  # different data on each rank
    ddp = DistributedDataParallel(model)
    ckpt = Checkpointer.from_env(every_steps=4)
    start = ckpt.restore(model=ddp, optimizer=optimizer, scheduler=scheduler)
    if rank == 0:
        (out / "started").write_text(str(start.step))
    for step in range(start.step, steps):
        training.train_step(ddp, optimizer, scheduler, 16)
        if rank == 0:
            (out / "progress").write_text(str(step + 1))
        ckpt.maybe_save(step + 1, data_position=step + 1)
        time.sleep(step_s)
    ckpt.save(steps, blocking=True)
    ckpt.close()
    torch.save(training.params(model), out / f"final-{rank}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
