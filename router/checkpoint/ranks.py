"""The few collectives the checkpointer needs, for one process or a torch.distributed group.

Two private gloo groups keep the checkpointer's traffic apart from the training's: `control` is
used from the training thread (agreeing on the step and on notices, choosing what to restore),
`save` from the background thread that finishes an asynchronous save (DCP's own planning, the
checksum gather, the closing barrier). Collectives of one group never run on two threads at once.
"""

from __future__ import annotations

import os
import sys
from typing import Any


class Ranks:
    """This process alone: rank 0 of 1."""

    rank = 0
    world_size = 1
    local_rank = 0
    distributed = False
    control_group: Any = None
    save_group: Any = None

    def all_max(self, values: list[int]) -> list[int]:
        return list(values)

    def broadcast(self, obj: Any) -> Any:
        return obj

    def all_gather(self, obj: Any, *, save: bool = False) -> list[Any]:
        return [obj]

    def barrier(self, *, save: bool = False) -> None:
        return None


class TorchRanks(Ranks):
    """Every rank of an initialised torch.distributed default group (torchrun, SLURM, ...)."""

    distributed = True

    def __init__(self) -> None:
        import torch.distributed as dist

        self._dist = dist
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        # Every rank creates both groups in the same order (here, in the Checkpointer
        # constructor), as new_group requires.
        self.control_group = dist.new_group(backend="gloo")
        self.save_group = dist.new_group(backend="gloo")

    def all_max(self, values: list[int]) -> list[int]:
        import torch

        tensor = torch.tensor(values, dtype=torch.int64)
        self._dist.all_reduce(tensor, op=self._dist.ReduceOp.MAX, group=self.control_group)
        return [int(v) for v in tensor.tolist()]

    def broadcast(self, obj: Any) -> Any:
        box = [obj]
        self._dist.broadcast_object_list(box, src=0, group=self.control_group)
        return box[0]

    def all_gather(self, obj: Any, *, save: bool = False) -> list[Any]:
        out: list[Any] = [None] * self.world_size
        group = self.save_group if save else self.control_group
        self._dist.all_gather_object(out, obj, group=group)
        return out

    def barrier(self, *, save: bool = False) -> None:
        self._dist.barrier(group=self.save_group if save else self.control_group)


def current_ranks() -> Ranks:
    """TorchRanks when torch.distributed is initialised with more than one rank, else Ranks."""
    if "torch" not in sys.modules:  # not imported: nobody can have set up a process group
        return Ranks()
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return TorchRanks()
    return Ranks()
