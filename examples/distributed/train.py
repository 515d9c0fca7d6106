"""A small distributed PyTorch training (CPU, DDP over gloo) that survives preemption as a group.

Run under torchrun, one agent per node; deployed by spotroute (examples/distributed/job.yaml)
each node's command is

    torchrun --rdzv-backend c10d --rdzv-endpoint $SPOTROUTE_RDZV_ENDPOINT \\
        --nnodes $NNODES --node-rank $NODE_RANK --nproc-per-node 1 examples/distributed/train.py

with the variables the group's rendezvous exports (docs/components.md, "Rendezvous"). By hand,
on one machine, two shells:

    SPOTROUTE_CHECKPOINT_URL=file:///tmp/dist-ckpt GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1 \\
        torchrun --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:29400 --nnodes 2 \\
        --nproc-per-node 1 examples/distributed/train.py

Every rank builds the same model (one seed), trains on its own shard of each batch, and DDP
averages the gradients. router.checkpoint saves every rank's state at one step: a notice on any
node (SIGTERM on the local target, the metadata service on a cloud) makes the whole group save
that step and exit 75, and a save request from `route migrate` is answered by every rank at one
step. Restarted, the group resumes from it; at the end rank 0 prints a digest of the
parameters, and a run that was preempted, moved and resumed prints the digest of one that never
moved.

Settings (environment): TRAIN_STEPS (default 300), TRAIN_STEP_S (sleep per step, default 0.02),
TRAIN_SEED (0), TRAIN_RESULT (a path rank 0 writes the final digest to).
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
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

# Run from a checkout: this repository's router/ first (a training image installs the package).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from router.checkpoint import Checkpointer

BATCH = 32  # the group's batch; each rank takes its 1/world_size share
FEATURES = 32


def main() -> None:
    steps = int(os.environ.get("TRAIN_STEPS", "300"))
    step_s = float(os.environ.get("TRAIN_STEP_S", "0.02"))
    seed = int(os.environ.get("TRAIN_SEED", "0"))
    torch.set_num_threads(1)  # bit-identical results on CPU, run after run
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(seed)  # the same initial weights on every rank
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, 64), torch.nn.ReLU(), torch.nn.Dropout(0.1),
        torch.nn.Linear(64, 1),
    )  # fmt: skip
    # Each rank's own RNG streams (dropout differs per rank): the library saves and restores them
    # per rank, so a resume continues every rank's stream, not only rank 0's.
    random.seed(seed * 1000 + rank)
    np.random.seed(seed * 1000 + rank)
    torch.manual_seed(seed * 1000 + rank)
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    # A fixed synthetic data set; the data position is the step, so a resume continues the
    # same shuffled order.
    data_rng = torch.Generator().manual_seed(seed)
    inputs = torch.randn(4096, FEATURES, generator=data_rng)
    targets = inputs @ torch.randn(FEATURES, 1, generator=data_rng) + 0.1
    share = BATCH // world

    with Checkpointer.from_env() as ckpt:
        start = ckpt.restore(model=ddp, optimizer=optimizer, scheduler=scheduler)
        print(f"train[{rank}/{world}]: starting at step {start.step} of {steps}", flush=True)
        batches_per_epoch = len(inputs) // BATCH
        for step in range(start.step, steps):
            epoch, index = divmod(step, batches_per_epoch)
            order = torch.randperm(len(inputs), generator=torch.Generator().manual_seed(epoch))
            first = index * BATCH + rank * share
            batch = order[first : first + share]
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(inputs[batch]), targets[batch])
            loss.backward()
            optimizer.step()
            scheduler.step()
            if rank == 0 and (step + 1) % 50 == 0:
                print(f"train: step {step + 1} loss {loss.item():.5f}", flush=True)
            # Every rank agrees here: saves when the interval has passed; on a notice on any node
            # the group saves this step and exits 75; on the router's save request the group
            # saves this step and holds until the hand-over is done.
            ckpt.maybe_save(step + 1, epoch=epoch, data_position={"epoch": epoch, "batch": index})
            time.sleep(step_s)
        ckpt.save(steps, blocking=True)
        ckpt.mark_finished(steps)
    if rank == 0:
        digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
        print(f"train: done at step {steps}, parameters sha256 {digest.hexdigest()}", flush=True)
        if os.environ.get("TRAIN_RESULT"):
            with open(os.environ["TRAIN_RESULT"], "w") as handle:
                handle.write(digest.hexdigest() + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
