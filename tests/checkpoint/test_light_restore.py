"""A restart's restore without torch.distributed.checkpoint (DCP): a one-rank checkpoint of plain
state is read through the save's index.json, with the objects ending exactly as DCP's path leaves
them; a wrapped (compiled) model, a checkpoint without the index or a damaged index take DCP's
path or are set aside as before.

Before, every restore imported DCP (torch.distributed.tensor → sympy) and DCP's state-dict helper
touched torch._dynamo: about a second in a fresh process, 10× a torch.load of the same state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from training import build, seed_everything, train_step

from router.checkpoint import Checkpointer, Manifest, light_restore

ROOT = Path(__file__).resolve().parents[2]


def _checkpointer(root: Path) -> Checkpointer:
    return Checkpointer(root.as_uri(), interval_s=None, handle_sigterm=False)


class Counters:
    """A stateful object with nested dicts, lists, tuples and a tensor in a list."""

    def __init__(self, seed: int) -> None:
        self.state: dict[str, Any] = {
            "seen": seed,
            "names": ["a", str(seed)],
            "pair": (seed, seed + 1),
            "nested": {"deep": {"level": seed * 2}},
            "mixed": [torch.full((3,), float(seed)), 7],
        }

    def state_dict(self) -> dict[str, Any]:
        return self.state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.state = state


def _objects(seed: int, steps: int) -> dict[str, Any]:
    model, optimizer, scheduler = build(seed, 16)
    for _ in range(steps):
        train_step(model, optimizer, scheduler, 16)
    scaler = torch.amp.GradScaler("cpu", init_scale=256.0)
    scaler.scale(torch.tensor(1.0))
    scaler.update(128.0 + seed)
    ema = torch.nn.Linear(16, 4)
    return {
        "model": model,
        "optimizer": optimizer,
        "scheduler": scheduler,
        "scaler": scaler,
        "ema": ema,
        "counters": Counters(seed),
    }


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def test_a_restore_without_dcp_leaves_every_object_as_dcps_path_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = _objects(1, 3)
    with _checkpointer(tmp_path) as ckpt:
        ckpt.save(3, blocking=True, **saved)
    step_dir = tmp_path / "step-000000000003"
    assert (step_dir / light_restore.INDEX_NAME).exists()

    light = _objects(2, 1)
    with _checkpointer(tmp_path) as ckpt:
        assert ckpt.restore(**light).step == 3
    with monkeypatch.context() as patch:
        patch.setattr(light_restore, "eligible", lambda *args: False)
        through_dcp = _objects(2, 1)
        with _checkpointer(tmp_path) as ckpt:
            assert ckpt.restore(**through_dcp).step == 3
    for name in saved:
        assert _same(light[name].state_dict(), through_dcp[name].state_dict()), name
        assert _same(light[name].state_dict(), saved[name].state_dict()), name
    # Both train on identically from there (from the same random state).
    for objects in (light, through_dcp):
        seed_everything(11)
        train_step(objects["model"], objects["optimizer"], objects["scheduler"], 16)
    assert _same(light["model"].state_dict(), through_dcp["model"].state_dict())
    assert _same(light["optimizer"].state_dict(), through_dcp["optimizer"].state_dict())


FRESH = """
import json, sys, torch
from router.checkpoint import Checkpointer
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 4))
objects = {"model": model}
if sys.argv[2] == "optimizer":  # torch.optim imports torch._dynamo itself, when constructed
    objects["optimizer"] = torch.optim.AdamW(model.parameters())
with Checkpointer(sys.argv[1], interval_s=None, handle_sigterm=False) as ckpt:
    step = ckpt.restore(**objects).step
print(json.dumps({"step": step, "weight": model[0].weight.sum().item(),
                  "optimizer_states": len(getattr(objects.get("optimizer"), "state", ())),
                  "imported": sorted(m for m in ("torch.distributed.checkpoint", "torch._dynamo",
                                                 "sympy") if m in sys.modules)}))
"""


@pytest.mark.parametrize("objects", ["model", "optimizer"])
def test_a_restart_restores_without_importing_dcp_or_the_compiler(
    tmp_path: Path, objects: str
) -> None:
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 4))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 16)).sum().backward()
    optimizer.step()
    with _checkpointer(tmp_path) as ckpt:
        ckpt.save(7, blocking=True, model=model, optimizer=optimizer)
    out = subprocess.run(
        [sys.executable, "-c", FRESH, tmp_path.as_uri(), objects],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["step"] == 7
    assert result["weight"] == model[0].weight.sum().item()
    if objects == "model":
        assert result["imported"] == []  # before: all three (DCP pulls in sympy)
    else:
        assert result["optimizer_states"] == 4
        assert result["imported"] == ["sympy", "torch._dynamo"]  # torch.optim's, not DCP


def test_a_compiled_model_takes_dcps_path_and_loads_the_same(tmp_path: Path) -> None:
    plain = build(3, 16)[0]
    with _checkpointer(tmp_path) as ckpt:
        ckpt.save(1, blocking=True, model=plain)
    compiled = torch.compile(build(4, 16)[0])  # an OptimizedModule: "_orig_mod." in its keys
    assert not light_restore.plain_model(compiled)
    with _checkpointer(tmp_path) as ckpt:
        assert ckpt.restore(model=compiled).step == 1
    assert _same(dict(compiled._orig_mod.state_dict()), dict(plain.state_dict()))


def test_a_checkpoint_without_the_index_is_read_through_dcp(tmp_path: Path) -> None:
    saved = _objects(6, 2)
    with _checkpointer(tmp_path) as ckpt:
        ckpt.save(2, blocking=True, **saved)
    # As an earlier version saved it: no index.json, and no entry for it in the manifest.
    step_dir = tmp_path / "step-000000000002"
    (step_dir / light_restore.INDEX_NAME).unlink()
    data = json.loads((step_dir / "manifest.json").read_text())
    data["files"] = [f for f in data["files"] if f["path"] != light_restore.INDEX_NAME]
    Manifest.from_json(json.dumps(data))
    (step_dir / "manifest.json").write_text(json.dumps(data))
    restored = _objects(7, 1)
    with _checkpointer(tmp_path) as ckpt:
        assert ckpt.restore(**restored).step == 2
    for name in saved:
        assert _same(restored[name].state_dict(), saved[name].state_dict()), name


def test_a_damaged_index_is_damage_like_any_file_of_the_step(tmp_path: Path) -> None:
    with _checkpointer(tmp_path) as ckpt:
        ckpt.save(2, blocking=True, model=build(8, 16)[0])
        ckpt.save(4, blocking=True, model=build(9, 16)[0])
    index = tmp_path / "step-000000000004" / light_restore.INDEX_NAME
    index.write_text(index.read_text().replace('"offset":', '"offset" :', 1))
    target = build(10, 16)[0]
    with _checkpointer(tmp_path) as ckpt:
        start = ckpt.restore(model=target)
    assert start.step == 2
    assert start.messages[0].startswith("step 4: damaged (index.json ")
    assert " — set aside as " in start.messages[0]
    assert _same(dict(target.state_dict()), dict(build(8, 16)[0].state_dict()))
