"""A checkpoint whose data is in two files per rank (io_threads=2), damaged in
the second file. The newest of two is read in one pass, so the first file may already be in the
model when the damage is found: the previous checkpoint loads over it. With no older one left,
every file of the rank is checked before any is read: the model is left exactly as it was and
restore starts from scratch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from training import build, params, same, train_step

from router.checkpoint import Checkpointer, Manifest


def _save(url: str, step: int, seed: int) -> list[Any]:
    model, optimizer, scheduler = build(seed)
    for _ in range(step):
        train_step(model, optimizer, scheduler)
    with Checkpointer(url, interval_s=None, handle_sigterm=False, io_threads=2) as ckpt:
        ckpt.save(step, blocking=True, model=model, optimizer=optimizer, scheduler=scheduler)
    return params(model)


def _damage_the_file_read_second(root: Path, step: int) -> None:
    directory = root / f"step-{step:012d}"
    manifest = Manifest.from_json((directory / "manifest.json").read_bytes())
    data_files = sorted(e.path for e in manifest.files if e.path.endswith(".distcp"))
    assert data_files == ["__0_0.distcp", "__0_1.distcp"]
    target = directory / data_files[1]
    blob = bytearray(target.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    target.write_bytes(bytes(blob))


def test_a_partly_loaded_damaged_newest_is_overwritten_by_the_previous(tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    older = _save(url, 2, seed=5)
    _save(url, 4, seed=5)
    _damage_the_file_read_second(tmp_path, 4)
    model, optimizer, scheduler = build(9)
    with Checkpointer(url, interval_s=None, handle_sigterm=False) as ckpt:
        start = ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    assert start.step == 2 and "step 4: damaged (__0_1.distcp checksum" in start.messages[0]
    assert same(params(model), older)


def test_with_no_checkpoint_left_every_file_is_checked_before_any_is_read(
        tmp_path: Path) -> None:
    url = f"file://{tmp_path}"
    _save(url, 3, seed=6)
    _damage_the_file_read_second(tmp_path, 3)
    model, optimizer, scheduler = build(9)
    before = params(model)
    with Checkpointer(url, interval_s=None, handle_sigterm=False) as ckpt:
        start = ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    assert start.step == 0 and "starting from scratch" in start.messages[-1]
    assert "step 3: damaged (__0_1.distcp checksum" in start.messages[0]
    assert same(params(model), before)
