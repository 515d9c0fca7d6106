"""A tiny deterministic training loop that depends on every RNG the library restores.

Each step draws its batch from torch's global RNG, adds NumPy noise, applies dropout and picks a
Python-random learning-rate jitter, so a resume that lost any RNG state, the optimizer's moments,
the scheduler or the step would end with different parameters.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from router.checkpoint import Checkpointer

FEATURES = 64


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build(seed: int, width: int = FEATURES) -> tuple[Any, Any, Any]:
    """(model, optimizer, scheduler), the same for the same seed."""
    torch.set_num_threads(1)
    seed_everything(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Dropout(0.1),
        torch.nn.Linear(width, 8),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.9)
    return model, optimizer, scheduler


def train_step(model: Any, optimizer: Any, scheduler: Any, width: int = FEATURES) -> None:
    inputs = torch.randn(16, width)
    noise = torch.from_numpy(np.random.standard_normal((16, 8)).astype(np.float32))
    target = inputs[:, :8] * 0.5 + 0.01 * noise
    jitter = 1.0 + random.random() * 1e-3
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(inputs), target) * jitter
    loss.backward()
    optimizer.step()
    scheduler.step()


def params(model: Any) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def reference(seed: int, steps: int, width: int = FEATURES) -> list[torch.Tensor]:
    """Parameters after `steps` uninterrupted steps."""
    model, optimizer, scheduler = build(seed, width)
    for _ in range(steps):
        train_step(model, optimizer, scheduler, width)
    return params(model)


def run(ckpt: Checkpointer, seed: int, steps: int, width: int = FEATURES,
        on_step: Any = None) -> tuple[list[torch.Tensor], int]:
    """Resume from `ckpt` and train to `steps`; (final parameters, step it started from)."""
    model, optimizer, scheduler = build(seed, width)
    start = ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    for step in range(start.step, steps):
        train_step(model, optimizer, scheduler, width)
        ckpt.maybe_save(step + 1, data_position=step + 1)
        if on_step is not None:
            on_step(step + 1)
    ckpt.wait()
    return params(model), start.step


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
