"""The staging copy of an asynchronous save: CPU tensors copied by several threads at once.

What a training step waits for in an asynchronous save is this copy (DCP writes the copy in the
background). DCP's DefaultStager copies one tensor after another on one thread; a single thread
does not reach the memory bandwidth of a machine, two or more do (torch's copy releases the
GIL). The copy goes into memory kept from the previous save, so no save after the first
page-faults a fresh copy of the state. State holding anything but plain CPU tensors (CUDA
tensors, DTensors, sharded tensors) is staged by DCP's DefaultStager, unchanged.
"""

from __future__ import annotations

import copy
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

CHUNK_BYTES = 16 << 20  # a large tensor is copied in pieces of this size, spread over threads


class NotPlainCpu(Exception):
    """The state holds a tensor this stager leaves to DCP's DefaultStager."""


class ParallelStager:
    """DCP's AsyncStager: a copy of the state in CPU memory, reused between saves.

    `stage` returns once the copy is complete, so the caller may change its state right after.
    """

    _synchronize_after_execute = False  # nothing is left to wait for when stage returns

    def __init__(self, threads: int | None = None) -> None:
        self.threads = max(1, threads if threads is not None else min(4, os.cpu_count() or 1))
        self._buffers: dict[tuple[Any, ...], Any] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._fallback: Any = None

    @property
    def should_synchronize_after_execute(self) -> bool:
        return False

    def synchronize_staging(self) -> None:
        """Nothing to do: `stage` waits for its copy."""

    def stage(self, state_dict: dict[str, Any]) -> dict[str, Any]:
        copies: list[tuple[Any, Any]] = []
        try:
            staged = self._staged(state_dict, (), copies, {})
        except NotPlainCpu:
            return self._default_stager().stage(state_dict)  # type: ignore[no-any-return]
        self._copy_all(copies)
        # Buffers this state no longer has (a tensor gone or reshaped) are not kept for ever.
        in_use = {id(buffer) for buffer, _ in copies}
        self._buffers = {k: b for k, b in self._buffers.items() if id(b) in in_use}
        return staged  # type: ignore[no-any-return]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._fallback is not None:
            self._fallback.close()
            self._fallback = None
        self._buffers.clear()

    # --- the copy -----------------------------------------------------------------------------

    def _staged(self, value: Any, path: tuple[Any, ...], copies: list[tuple[Any, Any]],
                memo: dict[int, Any]) -> Any:
        """`value` with every tensor replaced by its staging buffer (copied later), the rest
        deep-copied; a tensor met twice (tied weights) gets one buffer, as deepcopy would."""
        import torch

        if isinstance(value, torch.Tensor):
            if id(value) in memo:
                return memo[id(value)]
            if (type(value) not in (torch.Tensor, torch.nn.Parameter) or value.device.type != "cpu"
                    or value.layout != torch.strided or value.is_quantized):
                raise NotPlainCpu
            key = (path, value.dtype, tuple(value.shape))
            buffer = self._buffers.get(key)
            if buffer is None:
                buffer = torch.empty(value.shape, dtype=value.dtype)
                self._buffers[key] = buffer
            copies.append((buffer, value))
            memo[id(value)] = buffer
            return buffer
        if isinstance(value, dict):
            result = copy.copy(value)
            for name, item in value.items():
                result[name] = self._staged(item, (*path, name), copies, memo)
            return result
        if isinstance(value, list):
            return [self._staged(item, (*path, i), copies, memo) for i, item in enumerate(value)]
        if type(value) is tuple:
            return tuple(self._staged(item, (*path, i), copies, memo)
                         for i, item in enumerate(value))
        return copy.deepcopy(value)

    def _copy_all(self, copies: list[tuple[Any, Any]]) -> None:
        """Every (buffer, tensor) copy, large contiguous tensors cut into pieces, on the pool."""
        pieces: list[tuple[Any, Any]] = []
        for buffer, tensor in copies:
            size = tensor.numel() * tensor.element_size()
            if self.threads == 1 or size <= CHUNK_BYTES or not tensor.is_contiguous():
                pieces.append((buffer, tensor))
                continue
            flat_buffer, flat = buffer.view(-1), tensor.detach().view(-1)
            step = max(1, CHUNK_BYTES // tensor.element_size())
            for start in range(0, flat.numel(), step):
                pieces.append((flat_buffer[start:start + step], flat[start:start + step]))
        if self.threads == 1 or len(pieces) < 2:
            _copy_lane(pieces)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="spotroute-stage")
        lanes = [pieces[i::self.threads] for i in range(self.threads)]
        for future in [self._pool.submit(_copy_lane, lane) for lane in lanes if lane]:
            future.result()

    def _default_stager(self) -> Any:
        if self._fallback is None:
            from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

            self._fallback = DefaultStager(StagingOptions(
                use_pinned_memory=False, use_shared_memory=False, use_async_staging=False,
                use_non_blocking_copy=False))
        return self._fallback


def _copy_lane(lane: list[tuple[Any, Any]]) -> None:
    import torch

    with torch.no_grad():
        for buffer, tensor in lane:
            buffer.copy_(tensor)
