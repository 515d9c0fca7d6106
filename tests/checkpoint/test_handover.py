"""The library's side of `route migrate` on every storage (file://, S3 on moto, GCS on
fake-gcs-server, Azure Blob on Azurite): the router's own reader and writer
(router/config/checkpoints.py) ask for a save, see it answered and held, let go, and read the
resume record the new placement writes — the files both sides share, through the real drivers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from servers import Store
from training import reference, run, same

from router.checkpoint import Checkpointer, CheckpointError, Notice
from router.config import checkpoints as router_files

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def checkpointer(store: Store, placement: str) -> Checkpointer:
    return Checkpointer(store.url, interval_s=None, handle_sigterm=False, notice_sources=[],
                        storage_options=store.storage_options, placement=placement,
                        request_poll_s=0.05, asynchronous=False)  # fmt: skip


def wait_for(what: Callable[[], Any], label: str, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := what()):
        assert time.monotonic() < deadline, f"timed out waiting for {label}"
        time.sleep(0.05)
    return value


def test_a_save_request_is_answered_held_released_and_the_new_placement_confirms(
    store: Store,
) -> None:
    scheme = store.url.split("://", 1)[0]
    router = router_files.checkpoint_store(store.url, {scheme: store.storage_options})
    old = checkpointer(store, "train")
    progress: list[int] = []
    ended: dict[str, Any] = {}

    def train() -> None:
        def on_step(step: int) -> None:
            progress.append(step)
            time.sleep(0.01)

        try:
            run(old, seed=3, steps=100_000, on_step=on_step)
        except SystemExit as stop:
            ended["exit"] = stop.code

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    started = wait_for(lambda: router_files.resumed(router), "the resume record")
    assert (started["step"], started["placement"]) == (0, "train")
    wait_for(lambda: len(progress) > 2, "training to run")

    # A migration that rolls back: the job saves at the next step, holds, goes on when let go.
    router_files.request_save(router, "m-1", "train", NOW)
    first = wait_for(lambda: router_files.answered(router, "m-1"), "the answer to m-1")
    assert first.placement == "train"
    before = list(progress)
    time.sleep(0.3)
    # held inside maybe_save(step), before the loop's on_step(step)
    assert progress == before and before[-1] == first.step - 1, "progress while held"
    router_files.withdraw_request(router, "m-1")
    wait_for(lambda: progress[-1] > first.step, "training to go on after the rollback")

    # A migration that goes through: answered, held; the new placement restores that step while
    # the request still stands (it names the old placement), then the old one is stopped.
    router_files.request_save(router, "m-2", "train", NOW)
    handed = wait_for(lambda: router_files.answered(router, "m-2"), "the answer to m-2")
    assert handed.step > first.step
    new = checkpointer(store, "train.2")
    final, restored = run(new, seed=3, steps=handed.step + 5)
    new.close()
    assert restored == handed.step
    said = router_files.resumed(router)
    assert said is not None and (said["step"], said["placement"]) == (handed.step, "train.2")
    assert same(final, reference(seed=3, steps=handed.step + 5))
    old.watcher.record(Notice(cloud="local", kind="sigterm", notice_time=datetime.now(UTC)))
    thread.join(30)
    assert ended == {"exit": 0} and progress[-1] == handed.step - 1
    assert router_files.marker(router) is None, "a handed-over job is not an interruption"


def test_a_new_placement_on_other_storage_waits_for_the_copy_of_the_handed_over_step(
    local_store: Store, tmp_path: Path
) -> None:
    from router.config.checkpoint_copy import copy_checkpoint

    source = Store("file", f"file://{tmp_path}/old", {}, {})
    with checkpointer(source, "train") as old:
        run(old, seed=5, steps=6)
        old.save(6, blocking=True)
    new = Checkpointer(local_store.url, interval_s=None, handle_sigterm=False, notice_sources=[],
                       placement="train.2", restore_step=6, restore_wait_s=60)  # fmt: skip
    copier = threading.Timer(0.5, copy_checkpoint, (source.url, local_store.url, 6))
    copier.start()  # the router's checkpoint-copied step, after the new job started
    final, restored = run(new, seed=5, steps=8)
    new.close()
    assert restored == 6 and same(final, reference(seed=5, steps=8))

    late = Checkpointer(f"file://{tmp_path}/empty", interval_s=None, handle_sigterm=False,
                        notice_sources=[], restore_step=6, restore_wait_s=0.3)  # fmt: skip
    with pytest.raises(CheckpointError, match=r"step 6 did not arrive .* within 0 s"):
        late.restore_files(tmp_path / "out")
    late.close()
