"""Random number generator states as JSON: Python, NumPy, torch CPU and every CUDA device.

Each part is captured only when its library is importable, and restored only when it was
captured, so the same checkpoint works with or without NumPy or CUDA on the resuming node.
"""

from __future__ import annotations

import base64
import random
import sys
from typing import Any


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
    """Set the RNG states captured by `capture`; returns notes on parts that could not be set."""
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
    return notes


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _tensor(torch: Any, encoded: str) -> Any:
    return torch.frombuffer(bytearray(base64.b64decode(encoded)), dtype=torch.uint8)
