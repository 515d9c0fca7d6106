"""The library's side of `route migrate` on every storage (file://, S3 on moto, GCS on
fake-gcs-server, Azure Blob on Azurite): the router's own reader and writer
(router/config/checkpoints.py) ask for a save, see it answered and held, let go, and read the
resume record the new placement writes — the files both sides share, through the real drivers."""

from __future__ import annotations

import contextlib
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


# --- issue 24 item 3: a router that dies mid-move leaves no job in limbo --------------------------


def _train_in_thread(ckpt: Checkpointer, progress: list[int], ended: dict[str, Any],
                     steps: int = 100_000) -> threading.Thread:  # fmt: skip
    def on_step(step: int) -> None:
        progress.append(step)
        time.sleep(0.01)

    def train() -> None:
        try:
            run(ckpt, seed=3, steps=steps, on_step=on_step)
            ended["finished"] = True
        except SystemExit as stop:
            ended["exit"] = stop.code

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    return thread


def test_a_hold_ends_after_its_timeout_is_recorded_and_training_goes_on(store: Store) -> None:
    scheme = store.url.split("://", 1)[0]
    router = router_files.checkpoint_store(store.url, {scheme: store.storage_options})
    old = Checkpointer(store.url, interval_s=None, handle_sigterm=False, notice_sources=[],
                       storage_options=store.storage_options, placement="train",
                       request_poll_s=0.05, asynchronous=False, hold_timeout_s=0.5)  # fmt: skip
    progress: list[int] = []
    ended: dict[str, Any] = {}
    thread = _train_in_thread(old, progress, ended)
    wait_for(lambda: len(progress) > 2, "training to run")

    # The router asks, then dies: nobody withdraws the request or stops the old placement.
    router_files.request_save(router, "m-dead", "train", NOW)
    answer = wait_for(lambda: router_files.answered(router, "m-dead"), "the answer")
    held_at = time.monotonic()
    record = wait_for(lambda: router_files.hold_expired(router, "m-dead"), "the expiry record")
    assert time.monotonic() - held_at < 15
    assert (record["step"], record["placement"]) == (answer.step, "train")
    assert record["held_s"] >= 0.5
    wait_for(lambda: progress[-1] > answer.step + 3, "training to go on after the hold")
    # The stale request still stands (the router's file) and is not answered again.
    assert router_files.checkpoint_store(store.url, {scheme: store.storage_options}).read_json(
        router_files.REQUEST_NAME)["id"] == "m-dead"  # fmt: skip
    assert [c.step for c in router_files.checkpoints(router) if c.request == "m-dead"] == [
        answer.step
    ]
    old.watcher.record(Notice(cloud="local", kind="sigterm", notice_time=datetime.now(UTC)))
    thread.join(30)
    # A restarted process of the same placement does not hold for it either.
    again = checkpointer(store, "train")
    _, restored = run(again, seed=3, steps=progress[-1] + 6)
    again.close()
    assert restored >= answer.step and router_files.answered(router, "m-dead").step == answer.step


def test_a_new_placement_stops_unless_the_router_completes_its_move(store: Store) -> None:
    scheme = store.url.split("://", 1)[0]
    router = router_files.checkpoint_store(store.url, {scheme: store.storage_options})
    with checkpointer(store, "train") as old:
        run(old, seed=3, steps=8)
        old.save(8, blocking=True)

    def new_placement(timeout_s: float) -> Checkpointer:
        return Checkpointer(store.url, interval_s=None, handle_sigterm=False, notice_sources=[],
                            storage_options=store.storage_options, placement="train.2",
                            request_poll_s=0.05, asynchronous=False, restore_step=8,
                            handover_id="m-7", handover_timeout_s=timeout_s)  # fmt: skip

    # The router died after new-stack-up: no handover-complete.json ever comes.
    progress: list[int] = []
    ended: dict[str, Any] = {}
    _train_in_thread(new_placement(0.6), progress, ended).join(60)
    assert ended == {"exit": 0}, ended
    record = router_files.handover_abandoned(router, "m-7")
    assert record is not None and record["placement"] == "train.2"
    assert record["waited_s"] >= 0.6 and record["step"] == progress[-1] + 1

    # The same move completed in time (old stack down) — written by the router after the new
    # job listed its storage: the job reads it afresh, and it is the job from then on.
    router.remove(router_files.ABANDONED_NAME)
    progress.clear()
    ended.clear()
    thread = _train_in_thread(new_placement(3.0), progress, ended, steps=8 + 400)
    wait_for(lambda: len(progress) > 3, "the new placement to train")
    router_files.complete_handover(router, "m-7", "train.2", NOW)
    thread.join(120)
    assert ended == {"finished": True} and progress[-1] == 408
    assert router_files.handover_abandoned(router, "m-7") is None


def test_a_new_plain_directory_placement_stops_too_unless_the_router_completes_its_move(
    store: Store, tmp_path: Path
) -> None:
    """The plain-directory mode (save_files / due: the rehearsal's jobs, code that is not
    PyTorch) kept training past SPOTROUTE_HANDOVER_TIMEOUT: only maybe_save checked it."""
    scheme = store.url.split("://", 1)[0]
    router = router_files.checkpoint_store(store.url, {scheme: store.storage_options})
    state = tmp_path / "state"
    state.mkdir()
    (state / "value.txt").write_text("8")
    with checkpointer(store, "train") as old:
        old.save_files(8, state)
    new = Checkpointer(store.url, interval_s=None, handle_sigterm=False, notice_sources=[],
                       storage_options=store.storage_options, placement="train.2",
                       request_poll_s=0.05, restore_step=8, handover_id="m-9",
                       handover_timeout_s=0.6)  # fmt: skip
    assert new.restore_files(tmp_path / "restored").step == 8
    step, code = 8, None
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the router died: no handover-complete.json
            step += 1
            if new.due(step):
                new.save_files(step, state)
            time.sleep(0.01)
    except SystemExit as stopped:
        code = stopped.code
    assert code == 0, f"still training at step {step} after 30 s"
    record = router_files.handover_abandoned(router, "m-9")
    assert record is not None and (record["placement"], record["step"]) == ("train.2", step)
    assert record["waited_s"] >= 0.6


def test_a_request_written_after_the_jobs_last_save_is_answered_on_every_store(
    store: Store,
) -> None:
    """The save's retention lists the root; s3fs then answered the request's read from that
    listing (no such file) until the next save — up to a checkpoint interval (issue 24)."""
    scheme = store.url.split("://", 1)[0]
    router = router_files.checkpoint_store(store.url, {scheme: store.storage_options})
    old = checkpointer(store, "train")
    progress: list[int] = []

    def train() -> None:
        def on_step(step: int) -> None:
            progress.append(step)
            if step == 5:  # one save, then none for the rest of the interval
                old.save(step, blocking=True)
            time.sleep(0.01)

        with contextlib.suppress(SystemExit):
            run(old, seed=3, steps=100_000, on_step=on_step)

    threading.Thread(target=train, daemon=True).start()
    wait_for(lambda: len(progress) > 8, "training past its save")
    router_files.request_save(router, "m-late", "train", NOW)
    answer = wait_for(lambda: router_files.answered(router, "m-late"), "the answer", timeout_s=20)
    assert answer.step > 8
    old.watcher.record(Notice(cloud="local", kind="sigterm", notice_time=datetime.now(UTC)))


def test_a_holding_job_exits_as_handed_over_once_the_router_completes_the_move(
    store: Store,
) -> None:
    """resume-confirmed writes handover-complete.json in the old placement's storage too: the old
    one stops at once instead of holding until old-stack-down (or a dead router) ends it."""
    scheme = store.url.split("://", 1)[0]
    router = router_files.checkpoint_store(store.url, {scheme: store.storage_options})
    old = checkpointer(store, "train")
    progress: list[int] = []
    ended: dict[str, Any] = {}
    thread = _train_in_thread(old, progress, ended)
    wait_for(lambda: len(progress) > 2, "training to run")
    router_files.request_save(router, "m-3", "train", NOW)
    answer = wait_for(lambda: router_files.answered(router, "m-3"), "the answer")
    router_files.complete_handover(router, "m-0", "train.2", NOW)  # another move's: not ours
    time.sleep(0.5)
    assert thread.is_alive()

    router_files.complete_handover(router, "m-3", "train.2", NOW)
    thread.join(30)

    assert ended == {"exit": 0} and progress[-1] == answer.step - 1
    assert router_files.marker(router) is None and router_files.hold_expired(router, "m-3") is None
