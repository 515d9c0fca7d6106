"""Every checkpoint damaged: no crash loop on any storage. The damaged checkpoints are set aside
(kept under damaged/, never restored, counted or deleted again) and the job starts from scratch:
at once where restore checks a checkpoint before reading it (object storage, or the only
checkpoint on a disk); once the process starts again where the newest checkpoint on a disk was
already being read into the model (it cannot hand back fresh objects, so it says so)."""

from __future__ import annotations

from servers import Store
from training import build, params, same, train_step

from router.checkpoint import Checkpointer, CheckpointError


def _checkpointer(store: Store) -> Checkpointer:
    return Checkpointer(store.url, interval_s=None, handle_sigterm=False,
                        storage_options=store.storage_options)


def _save_two_and_damage_both(store: Store) -> None:
    model, optimizer, scheduler = build(5, 64)
    with _checkpointer(store) as ckpt:
        for step in (2, 4):
            train_step(model, optimizer, scheduler, 64)
            ckpt.save(step, blocking=True, model=model, optimizer=optimizer, scheduler=scheduler)
    for step in (2, 4):
        store.flip_bit(f"step-{step:012d}", "__0_0.distcp")  # a bit flipped at rest


def test_every_checkpoint_damaged_is_set_aside_and_the_job_starts_from_scratch(
    store: Store,
) -> None:
    _save_two_and_damage_both(store)
    model, optimizer, scheduler = build(9, 64)
    before = params(model)

    with _checkpointer(store) as first:
        try:
            start = first.restore(model=model, optimizer=optimizer, scheduler=scheduler)
            outcome = "scratch"
        except CheckpointError as error:
            outcome = str(error)
    if store.kind == "file":
        # The newest was read into the model in one pass before its damage showed.
        assert "partly loaded" in outcome and "start the process again" in outcome
    else:
        assert outcome == "scratch" and start.step == 0 and same(params(model), before)
        assert any("set aside as" in m for m in start.messages)

    # Either way the damaged checkpoints left the step directories but are kept.
    assert not [n for n in store.names() if n.startswith("step-")]
    assert [n[:17] for n in store.names("damaged")] == ["step-000000000002",
                                                            "step-000000000004"]

    # The next start (a new process, a re-placed node) finds no checkpoint: from scratch, on
    # every storage, and saves and restores as usual from there.
    model, optimizer, scheduler = build(9, 64)
    with _checkpointer(store) as again:
        start = again.restore(model=model, optimizer=optimizer, scheduler=scheduler)
        assert start.step == 0 and same(params(model), before)
        assert start.messages == [f"no complete checkpoint under {store.url} — starting from "
                                  "scratch"]
        train_step(model, optimizer, scheduler, 64)
        again.save(1, blocking=True, model=model, optimizer=optimizer, scheduler=scheduler)
    with _checkpointer(store) as third:
        assert third.restore(model=build(9, 64)[0]).step == 1


def test_a_store_that_cannot_be_read_is_not_taken_for_damage() -> None:
    from router.checkpoint.dcp import CheckpointDamaged, PartlyLoaded, is_damage

    assert is_damage(CheckpointDamaged("x.distcp checksum 1 differs from the manifest's 2"))
    assert is_damage(PartlyLoaded(CheckpointDamaged("x")))
    assert not is_damage(ConnectionResetError("peer reset"))
    assert not is_damage(PermissionError("AccessDenied"))
