"""A local restore that checks each file while reading it into the model (dcp.fused_read), and
the guarantees around it: a damaged newest checkpoint gives way to the previous one, bit-exact;
with no older one left the model is left exactly as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from router.checkpoint import Checkpointer, CheckpointError, dcp, light_restore


def checkpointer(root: Path) -> Checkpointer:
    return Checkpointer(root.as_uri(), interval_s=None, handle_sigterm=False)


def model(seed: int) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 32))


def snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in module.state_dict().items()}


def bit_equal(module: torch.nn.Module, expected: dict[str, torch.Tensor]) -> bool:
    got = module.state_dict()
    return got.keys() == expected.keys() and all(
        torch.equal(got[k].view(torch.uint8), expected[k].view(torch.uint8)) for k in expected)


def data_files(root: Path, step: int) -> list[Path]:
    """The step's DCP data files (a rank writes dcp.io_threads() of them)."""
    return sorted((root / f"step-{step:012d}").glob("*.distcp"))


def flip_in_tensor(root: Path, step: int, tensor: torch.Tensor) -> str:
    """Flip one bit inside the stored bytes of `tensor` (not a header); the file's name."""
    stored = tensor.detach().numpy().tobytes()
    for path in data_files(root, step):
        data = bytearray(path.read_bytes())
        at = data.find(stored)
        if at > 0:
            data[at + 37] ^= 0x10
            path.write_bytes(bytes(data))
            return path.name
    raise AssertionError("the tensor's bytes are stored as they are, in one of the files")


@pytest.fixture(params=["light", "dcp"])
def restore_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Restore without DCP (a one-rank checkpoint of plain state, the default) or through it."""
    if request.param == "dcp":
        monkeypatch.setattr(light_restore, "eligible", lambda *args: False)
    return str(request.param)


@pytest.fixture
def fused_calls(monkeypatch: pytest.MonkeyPatch, restore_path: str) -> list[bool]:
    """What each single-pass read returned (True: the file was read in the single pass):
    dcp.fused_read through DCP, light_restore.read_file_in_one_pass without."""
    calls: list[bool] = []
    module: Any = dcp if restore_path == "dcp" else light_restore
    name = "fused_read" if restore_path == "dcp" else "read_file_in_one_pass"
    original = getattr(module, name)

    def spy(*args: Any, **kwargs: Any) -> bool:
        try:
            result = original(*args, **kwargs)
        except dcp.CheckpointDamaged:
            calls.append(True)
            raise
        calls.append(result)
        return bool(result)

    monkeypatch.setattr(module, name, spy)
    return calls


def test_the_newest_checkpoint_is_read_in_one_checked_pass(tmp_path: Path,
                                                           fused_calls: list[bool]) -> None:
    saved = model(1)
    with checkpointer(tmp_path) as ckpt:
        ckpt.save(2, blocking=True, model=model(0))
        ckpt.save(4, blocking=True, model=saved)
    target = model(2)
    with checkpointer(tmp_path) as again:
        assert again.restore(model=target).step == 4
    assert fused_calls == [True] * len(data_files(tmp_path, 4))  # every file in one pass
    assert bit_equal(target, snapshot(saved))


def test_a_flipped_tensor_byte_in_the_newest_falls_back_to_the_previous_bit_exactly(
        tmp_path: Path, fused_calls: list[bool]) -> None:
    older, newer = model(1), model(2)
    with checkpointer(tmp_path) as ckpt:
        ckpt.save(2, blocking=True, model=older)
        ckpt.save(4, blocking=True, model=newer)
    damaged = flip_in_tensor(tmp_path, 4, newer.state_dict()["0.weight"])
    files_of_4 = len(data_files(tmp_path, 4))
    target = model(3)
    with checkpointer(tmp_path) as again:
        start = again.restore(model=target)
    assert start.step == 2
    assert f"step 4: damaged ({damaged} checksum" in start.messages[0]
    # step 4 was read into the model (in one pass; once a file is found damaged the rank's
    # files not yet started are not read), step 2 checked first
    assert fused_calls and set(fused_calls) == {True}
    assert len(fused_calls) <= files_of_4
    # The damaged step is set aside: never restored, counted or deleted again.
    assert not (tmp_path / "step-000000000004").exists()
    assert [p.name[:16] for p in (tmp_path / "damaged").iterdir()] == ["step-00000000000"]
    assert bit_equal(target, snapshot(older))


def test_the_only_checkpoint_damaged_leaves_the_model_exactly_as_it_was(
        tmp_path: Path, fused_calls: list[bool]) -> None:
    saved = model(1)
    with checkpointer(tmp_path) as ckpt:
        ckpt.save(4, blocking=True, model=saved)
    flip_in_tensor(tmp_path, 4, saved.state_dict()["1.weight"])
    target = model(3)
    before = snapshot(target)
    with checkpointer(tmp_path) as again:
        start = again.restore(model=target)
    assert start.step == 0
    assert "starting from scratch" in start.messages[-1]
    assert fused_calls == []  # the last candidate is checked before anything is read into it
    assert bit_equal(target, before)


def test_every_checkpoint_damaged_after_a_partial_read_is_an_error(tmp_path: Path,
                                                                  restore_path: str) -> None:
    older, newer = model(1), model(2)
    with checkpointer(tmp_path) as ckpt:
        ckpt.save(2, blocking=True, model=older)
        ckpt.save(4, blocking=True, model=newer)
    flip_in_tensor(tmp_path, 4, newer.state_dict()["0.weight"])
    flip_in_tensor(tmp_path, 2, older.state_dict()["0.weight"])
    with checkpointer(tmp_path) as again, pytest.raises(CheckpointError, match="partly loaded"):
        again.restore(model=model(3))


def test_an_object_the_previous_checkpoint_lacks_is_not_left_half_loaded(
        tmp_path: Path, restore_path: str) -> None:
    older, newer = model(1), model(2)
    optimizer = torch.optim.SGD(newer.parameters(), lr=0.1, momentum=0.9)
    newer(torch.randn(2, 64)).sum().backward()
    optimizer.step()
    with checkpointer(tmp_path) as ckpt:
        ckpt.save(2, blocking=True, model=older)
        ckpt.save(4, blocking=True, model=newer, optimizer=optimizer)
    flip_in_tensor(tmp_path, 4, newer.state_dict()["0.weight"])
    target = model(3)
    fresh = torch.optim.SGD(target.parameters(), lr=0.1, momentum=0.9)
    if restore_path == "dcp":  # DCP reads the optimizer's state in place: it is half loaded
        with checkpointer(tmp_path) as again, pytest.raises(CheckpointError,
                                                            match="optimizer: partly loaded"):
            again.restore(model=target, optimizer=fresh)
        return
    # Without DCP the optimizer's state goes to new tensors, handed over only once every file
    # checked out: the optimizer is untouched, step 2 loads, and it says so.
    with checkpointer(tmp_path) as again:
        start = again.restore(model=target, optimizer=fresh)
    assert start.step == 2 and bit_equal(target, snapshot(older))
    assert "optimizer: not in the checkpoint of step 2; left as it is" in start.messages
    assert not fresh.state


@pytest.mark.parametrize("at", [0, 40, 200, -30])
def test_a_flipped_header_byte_in_the_newest_falls_back_to_the_previous(
        tmp_path: Path, at: int, restore_path: str) -> None:
    older, newer = model(1), model(2)
    with checkpointer(tmp_path) as ckpt:
        ckpt.save(2, blocking=True, model=older)
        ckpt.save(4, blocking=True, model=newer)
    path = tmp_path / "step-000000000004" / "__0_0.distcp"
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01  # a zip or pickle header, not tensor bytes
    path.write_bytes(bytes(data))
    target = model(3)
    with checkpointer(tmp_path) as again:
        start = again.restore(model=target)
    assert start.step == 2
    assert "step 4: damaged (__0_0.distcp checksum" in start.messages[0]
    assert bit_equal(target, snapshot(older))
