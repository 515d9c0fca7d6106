"""Random number generator states as JSON: Python, NumPy, torch CPU and every CUDA device.

Each part is captured only when its library is importable, and restored only when it was
captured, so the same checkpoint works with or without NumPy or CUDA on the resuming node.
"""

from __future__ import annotations

import base64
import functools
import random
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
_guards = threading.local()  # this thread's open `preserved` blocks, innermost last


def capture() -> dict[str, Any]:
    """The current RNG states of this process (JSON-serialisable)."""
    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {"python": [version, list(internal), gauss]}
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        name, keys, pos, has_gauss, cached = numpy.random.get_state()
        state["numpy"] = [name, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)]
    torch = sys.modules.get("torch")
    if torch is not None:
        state["torch"] = _b64(torch.get_rng_state().numpy().tobytes())
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = [_b64(s.numpy().tobytes()) for s in torch.cuda.get_rng_state_all()]
    return state


def restore(state: dict[str, Any]) -> list[str]:
    """Set the RNG states captured by `capture`; returns notes on parts that could not be set.

    Inside a `preserved` block the states set here are the ones the block leaves behind.
    """
    notes: list[str] = []
    if "python" in state:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in state:
        import numpy

        name, keys, pos, has_gauss, cached = state["numpy"]
        numpy.random.set_state(
            (name, numpy.array(keys, dtype=numpy.uint32), pos, has_gauss, cached)
        )
    if "torch" in state or "cuda" in state:
        import torch

        if "torch" in state:
            torch.set_rng_state(_tensor(torch, state["torch"]))
        if "cuda" in state:
            if torch.cuda.is_available() and torch.cuda.device_count() == len(state["cuda"]):
                torch.cuda.set_rng_state_all([_tensor(torch, s) for s in state["cuda"]])
            else:
                notes.append(
                    f"CUDA RNG states for {len(state['cuda'])} devices not restored: this node "
                    f"has {torch.cuda.device_count() if torch.cuda.is_available() else 0}"
                )
    open_guards = getattr(_guards, "stack", [])
    if open_guards:
        open_guards[-1].adopt()
    return notes


class preserved:  # lowercase: used as `with rng.preserved():`, like contextlib's helpers
    """Leaves the global RNGs (Python's `random`, NumPy's, torch's CPU generator) as it found
    them around library work, so a seeded run draws the same numbers on every storage.

    A driver imported on first use may draw at import (s3fs → aiobotocore → httpx → rich, whose
    style ids start from `random.getrandbits`). `adopt()` makes the states current at that
    moment the ones to leave (restore: the checkpoint's states).
    """

    def __init__(self) -> None:
        self._states: tuple[Any, Any, Any] = (None, None, None)
        self._adopted = False

    def _capture(self) -> tuple[Any, Any, Any]:
        numpy = sys.modules.get("numpy")
        torch = sys.modules.get("torch")
        return (
            random.getstate(),
            numpy.random.get_state() if numpy is not None and hasattr(numpy, "random") else None,
            torch.get_rng_state() if torch is not None and hasattr(torch, "get_rng_state")
            else None,
        )

    def adopt(self) -> None:
        self._states, self._adopted = self._capture(), True

    def __enter__(self) -> preserved:
        self._states = self._capture()
        if not hasattr(_guards, "stack"):
            _guards.stack = []
        _guards.stack.append(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        _guards.stack.remove(self)
        if _guards.stack and self._adopted:  # the enclosing block leaves it too
            _guards.stack[-1]._states, _guards.stack[-1]._adopted = self._states, True
        python, numpy_state, torch_state = self._states
        random.setstate(python)
        if numpy_state is not None:
            sys.modules["numpy"].random.set_state(numpy_state)
        if torch_state is not None:
            sys.modules["torch"].set_rng_state(torch_state)


def leaves_rng_alone(method: Callable[P, R]) -> Callable[P, R]:
    """Run `method` inside `preserved()` (the Checkpointer's public methods)."""

    @functools.wraps(method)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        with preserved():
            return method(*args, **kwargs)

    return guarded


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _tensor(torch: Any, encoded: str) -> Any:
    return torch.frombuffer(bytearray(base64.b64decode(encoded)), dtype=torch.uint8)
