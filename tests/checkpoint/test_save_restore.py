"""Save and restore through the real fsspec clients: file://, S3 (moto), GCS (fake-gcs-server),
Azure Blob (Azurite). The same suite runs on each."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from servers import Store
from training import build, params, reference, run, same, train_step

from router.checkpoint import Checkpointer, Manifest


def checkpointer(store: Store, **kwargs: object) -> Checkpointer:
    settings: dict[str, object] = {"interval_s": None, "handle_sigterm": False,
                                   "storage_options": store.storage_options}
    settings.update(kwargs)
    return Checkpointer(store.url, **settings)  # type: ignore[arg-type]


def step_dirs(store: Store) -> list[str]:
    fs, root = store.fs_path()
    fs.invalidate_cache()
    return sorted(p.rsplit("/", 1)[-1] for p in fs.ls(root, detail=False) if "step-" in p)


def test_resumed_run_ends_with_the_parameters_of_an_uninterrupted_one(store: Store) -> None:
    expected = reference(seed=1, steps=12)
    with checkpointer(store, every_steps=4) as first:
        run(first, seed=1, steps=6)  # saves at 4; "dies" after 6
    with checkpointer(store, every_steps=4) as second:
        final, started = run(second, seed=1, steps=12)
    assert started == 4
    assert same(final, expected)


def test_manifest_lists_every_file_with_size_and_checksum(store: Store) -> None:
    with checkpointer(store, job_id="job-7") as ckpt:
        model, optimizer, scheduler = build(0)
        train_step(model, optimizer, scheduler)
        ckpt.save(1, blocking=True, model=model, optimizer=optimizer, scheduler=scheduler,
                  epoch=0, user={"note": "first"})
    fs, path = store.fs_path("step-000000000001", "manifest.json")
    manifest = Manifest.from_json(fs.cat_file(path))
    assert (manifest.step, manifest.world_size, manifest.job_id) == (1, 1, "job-7")
    assert manifest.epoch == 0
    names = {entry.path for entry in manifest.files}
    assert {".metadata", "__0_0.distcp", "rank-00000.json"} <= names
    for entry in manifest.files:
        fs2, file_path = store.fs_path("step-000000000001", entry.path)
        assert fs2.info(file_path)["size"] == entry.size


def test_only_the_newest_three_checkpoints_are_kept(store: Store) -> None:
    with checkpointer(store, every_steps=1) as ckpt:
        run(ckpt, seed=2, steps=5, width=8)
    assert step_dirs(store) == [f"step-{s:012d}" for s in (3, 4, 5)]


def test_a_flipped_byte_in_the_newest_checkpoint_falls_back_to_the_previous(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    with checkpointer(store, every_steps=2) as ckpt:
        run(ckpt, seed=3, steps=4, width=8)
    fs, path = store.fs_path("step-000000000004", "__0_0.distcp")
    data = bytearray(fs.cat_file(path))
    data[len(data) // 2] ^= 0x01
    fs.pipe_file(path, bytes(data))
    model, optimizer, scheduler = build(3, 8)
    with caplog.at_level(logging.INFO, logger="spotroute.checkpoint"), checkpointer(store) as again:
        start = again.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    assert start.step == 2
    assert "step 4: damaged (__0_0.distcp checksum" in start.messages[0]
    assert "using step 2" in start.messages[0]
    assert "damaged" in caplog.text  # said where a user sees it, not only returned


def test_a_truncated_newest_checkpoint_falls_back_to_the_previous(store: Store) -> None:
    with checkpointer(store, every_steps=2) as ckpt:
        run(ckpt, seed=4, steps=4, width=8)
    fs, path = store.fs_path("step-000000000004", "__0_0.distcp")
    fs.pipe_file(path, fs.cat_file(path)[:100])
    messages = restore_messages(store)  # step 4 is damaged and set aside; step 2 loads
    assert "has 100 bytes" in " ".join(messages)
    assert messages[0].startswith("step 4: damaged (__0_0.distcp has 100 bytes")
    assert " — set aside as " in messages[0] and messages[0].endswith("; using step 2")
    with checkpointer(store) as again:
        final, started = run(again, seed=4, steps=6, width=8)
    assert started == 2
    assert same(final, reference(seed=4, steps=6, width=8))


def restore_messages(store: Store) -> list[str]:
    model, optimizer, scheduler = build(4, 8)
    with checkpointer(store) as ckpt:
        return ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler).messages


def test_no_checkpoint_starts_from_scratch_and_says_so(store: Store) -> None:
    model, optimizer, scheduler = build(5, 8)
    before = params(model)
    with checkpointer(store) as ckpt:
        start = ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    assert (start.step, start.restored) == (0, False)
    assert start.messages == [f"no complete checkpoint under {store.url} — starting from scratch"]
    assert same(params(model), before)
    assert not optimizer.state  # never touched: a fresh AdamW keeps step 0


def test_a_directory_without_manifest_is_ignored_and_later_removed(store: Store) -> None:
    with checkpointer(store, every_steps=2) as ckpt:
        run(ckpt, seed=6, steps=2, width=8)
    # What a writer killed mid-save leaves: data, no manifest.
    fs, path = store.fs_path("step-000000000003", "__0_0.distcp")
    if store.kind == "file":
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    fs.pipe_file(path, b"partial")
    model, optimizer, scheduler = build(6, 8)
    with checkpointer(store, every_steps=2) as ckpt:
        start = ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler)
        assert start.step == 2
        assert "step 3: incomplete" in start.messages[0]
        for step in range(2, 4):
            train_step(model, optimizer, scheduler, 8)
            ckpt.maybe_save(step + 1)
    assert step_dirs(store) == ["step-000000000002", "step-000000000004"]


def test_the_only_complete_checkpoint_is_never_deleted(store: Store) -> None:
    with checkpointer(store, every_steps=1, keep=1) as ckpt:
        run(ckpt, seed=7, steps=3, width=8)
    assert step_dirs(store) == ["step-000000000003"]


def test_plain_directory_mode_round_trips_files_and_user_state(store: Store,
                                                                tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "weights.bin").write_bytes(bytes(range(256)) * 100)
    (work / "sub" / "notes.txt").write_text("epoch 3")
    with checkpointer(store) as ckpt:
        assert ckpt.save_files(30, work, epoch=3, user={"best": 0.5})
    restored = tmp_path / "restored"
    with checkpointer(store) as ckpt:
        start = ckpt.restore_files(restored)
    assert (start.step, start.epoch, start.user) == (30, 3, {"best": 0.5})
    assert (restored / "weights.bin").read_bytes() == (work / "weights.bin").read_bytes()
    assert (restored / "sub" / "notes.txt").read_text() == "epoch 3"


def test_grad_scaler_and_extra_stateful_objects_are_saved(local_store: Store) -> None:
    model, _optimizer, _ = build(8, 8)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale(torch.tensor(1.0))  # creates the scale tensor, as the first step would
    scaler.update(512.0)
    counter = torch.nn.Module()
    counter.register_buffer("seen", torch.tensor([41]))
    with checkpointer(local_store) as ckpt:
        ckpt.save(1, blocking=True, model=model, scaler=scaler, counter=counter)
    scaler2 = torch.amp.GradScaler("cpu", init_scale=2.0)
    counter2 = torch.nn.Module()
    counter2.register_buffer("seen", torch.tensor([0]))
    model2, _, _ = build(9, 8)
    with checkpointer(local_store) as ckpt:
        ckpt.restore(model=model2, scaler=scaler2, counter=counter2)
    assert scaler2.get_scale() == 512.0
    assert int(counter2.seen) == 41
    assert same(params(model2), params(model))


def test_saving_the_same_step_twice_keeps_the_first(local_store: Store) -> None:
    model, _optimizer, _scheduler = build(10, 8)
    with checkpointer(local_store) as ckpt:
        assert ckpt.save(5, blocking=True, model=model)
        assert not ckpt.save(5, blocking=True, model=model)


def test_async_save_blocks_for_less_than_the_whole_save(local_store: Store) -> None:
    model, optimizer, scheduler = build(11, 512)
    train_step(model, optimizer, scheduler, 512)
    with checkpointer(local_store) as ckpt:
        ckpt.save(1, model=model, optimizer=optimizer)
        report = ckpt.wait()
    assert report is not None and report.error is None and report.save_s is not None
    assert report.blocked_s < report.save_s
    fs, path = local_store.fs_path("step-000000000001", "manifest.json")
    written = json.loads(fs.cat_file(path))
    assert written["blocked_s"] == pytest.approx(report.blocked_s, abs=1e-3)


class Mixed:
    """State with a strided tensor (DCP's generic read path) and bfloat16 (read in place)."""

    def __init__(self, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.grid = torch.randn(6, 4, generator=generator)
        self.half = torch.randn(5, generator=generator).to(torch.bfloat16)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"grid_t": self.grid.t(), "half": self.half}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.grid.t().copy_(state["grid_t"])
        self.half.copy_(state["half"])


def test_a_local_restore_reads_tensors_into_the_models_own_memory(
    local_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, optimizer, scheduler = build(12, 32)
    train_step(model, optimizer, scheduler, 32)
    mixed = Mixed(1)
    with checkpointer(local_store) as ckpt:
        ckpt.save(1, blocking=True, model=model, optimizer=optimizer, mixed=mixed)
    loads: list[object] = []
    real_load = torch.load

    def counting_load(*args: object, **kwargs: object) -> object:
        loads.append(kwargs.get("map_location"))
        return real_load(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch, "load", counting_load)
    fresh, fresh_optimizer, _ = build(13, 32)
    pointers = [p.data_ptr() for p in fresh.parameters()]
    fresh_mixed = Mixed(2)
    with checkpointer(local_store) as ckpt:
        start = ckpt.restore(model=fresh, optimizer=fresh_optimizer, mixed=fresh_mixed)
    assert start.step == 1
    assert [p.data_ptr() for p in fresh.parameters()] == pointers
    assert same(params(fresh), params(model))
    assert torch.equal(fresh_mixed.grid, mixed.grid)
    assert torch.equal(fresh_mixed.half, mixed.half)
    fresh_optimizer.step()  # the restored moments and step count are usable
    # Every record was opened on the meta device only (its offset, not its data), except the
    # strided target, which took DCP's path: one record loaded into a new tensor.
    assert loads.count("cpu") == 1
    assert loads.count("meta") >= len(pointers)


def test_the_only_checkpoint_damaged_in_a_second_file_leaves_the_objects_as_they_were(
    store: Store,
) -> None:
    """A rank's data in two files (io_threads=2), the second damaged: every
    file is checked before any is loaded, so nothing of the damaged checkpoint reaches the
    model (on object stores the rank's files are fetched at once, then checked)."""
    with checkpointer(store, io_threads=2) as ckpt:
        model, optimizer, scheduler = build(5, 8)
        train_step(model, optimizer, scheduler, 8)
        ckpt.save(1, blocking=True, model=model, optimizer=optimizer, scheduler=scheduler)
    fs, path = store.fs_path("step-000000000001", "__0_1.distcp")
    data = bytearray(fs.cat_file(path))
    data[len(data) // 2] ^= 0x01
    fs.pipe_file(path, bytes(data))
    model, optimizer, scheduler = build(9, 8)
    before = params(model)
    with checkpointer(store) as again:
        start = again.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    assert start.step == 0 and "starting from scratch" in start.messages[-1]
    assert "step 1: damaged (__0_1.distcp checksum" in start.messages[0]
    assert same(params(model), before)
