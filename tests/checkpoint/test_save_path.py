"""What a synchronous save keeps off the training thread, and that retention stays crash-safe.

Retention (deleting checkpoints beyond `keep`) runs after the commit on its own thread; before, it
ran inside every save, on the training thread for a synchronous one. The cyclic garbage
collector does not run inside the part of a save the training thread waits for. A process
SIGKILLed between the commit and retention, or in the middle of it, leaves a set that restores
the newest checkpoint and that the next save's retention tidies — on file:// and S3 (moto).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from servers import Store, make_store

from router.checkpoint import Checkpointer
from router.checkpoint.storage import Location, open_location


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 4))


def _checkpointer(store: Store, **settings: Any) -> Checkpointer:
    settings = {"interval_s": None, "handle_sigterm": False, **settings}
    return Checkpointer(store.url, storage_options=store.storage_options, **settings)


def _steps(store: Store) -> list[int]:
    fs, root = store.fs_path()
    fs.invalidate_cache()
    names = [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)]
    return sorted(int(n.removeprefix("step-")) for n in names if n.startswith("step-"))


def _complete(store: Store) -> list[int]:
    fs, root = store.fs_path()
    return [s for s in _steps(store) if fs.exists(f"{root}/step-{s:012d}/manifest.json")]


@pytest.fixture
def removals(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, str]]]:
    """(step, thread name) of every checkpoint retention deletes."""
    seen: list[tuple[int, str]] = []
    original = Location.remove_step

    def recording(self: Location, step: int) -> None:
        seen.append((step, threading.current_thread().name))
        original(self, step)

    monkeypatch.setattr(Location, "remove_step", recording)
    yield seen


def test_retention_runs_after_the_commit_off_the_training_thread(
    tmp_path: Path, removals: list[tuple[int, str]]
) -> None:
    store = make_store("file", tmp_path)
    model = _model(1)
    with _checkpointer(store, keep=2) as ckpt:
        for step in range(1, 6):
            assert ckpt.save(step, blocking=True, model=model)
    assert _steps(store) == [4, 5]
    assert sorted(step for step, _ in removals) == [1, 2, 3]
    # Before, the save deleted them itself: on MainThread, inside save(blocking=True).
    assert {name for _, name in removals} == {"spotroute-retention"}


def test_retention_never_deletes_a_step_a_save_has_claimed(tmp_path: Path) -> None:
    from router.checkpoint.retention import Retention

    store = make_store("file", tmp_path)
    model = _model(2)
    with _checkpointer(store, keep=3) as ckpt:
        for step in (1, 2, 3):
            ckpt.save(step, blocking=True, model=model)
    # An older step saved again (a pinned restore, a hand-over) while retention runs after
    # another commit: the directory being written is not deleted under the save.
    retention = Retention(open_location(store.url), keep=1)
    retention.claim_for_save(2)
    retention.apply()
    assert _steps(store) == [2, 3]
    retention.release(2)
    retention.apply()
    assert _steps(store) == [3]


def test_no_garbage_collection_runs_inside_a_synchronous_save(tmp_path: Path) -> None:
    store = make_store("file", tmp_path)
    model = _model(3)
    collections: list[str] = []
    during: list[str] = []  # collections that started inside Checkpointer.save

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase != "start":
            return
        collections.append(threading.current_thread().name)
        frame = sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            if code.co_name == "save" and "router/checkpoint" in code.co_filename:
                during.append(threading.current_thread().name)
                break
            frame = frame.f_back

    threshold = gc.get_threshold()
    with _checkpointer(store) as ckpt:
        ckpt.save(1, blocking=True, model=model)  # imports and first-use work, outside
        gc.callbacks.append(on_gc)
        gc.set_threshold(50, 1, 1)  # a collection every 50 allocations: dozens in a save
        try:
            gc.collect()  # counts from 0: the few allocations before the hold cannot trigger one
            ckpt.save(2, blocking=True, model=model)
            assert gc.isenabled()  # given back after the save
            [object() for _ in range(10)]
            after = list(collections)
            gc.disable()  # an application that turned the collector off keeps it off
            ckpt.save(3, blocking=True, model=model)
            assert not gc.isenabled()
        finally:
            gc.enable()
            gc.set_threshold(*threshold)
            gc.callbacks.remove(on_gc)
    assert during == []
    assert after  # the collector runs again once the save is done


# --- SIGKILL between the commit and retention, and in the middle of it ------------------------

KILL_POINTS = ("before-retention", "manifest-deleted", "one-step-deleted")


def _killed_at(point: str) -> Any:
    """A Location.remove_step that SIGKILLs this process at `point` of the first deletion."""
    original = Location.remove_step

    def remove_step(self: Location, step: int) -> None:
        if point == "before-retention":
            os.kill(os.getpid(), signal.SIGKILL)
        if point == "manifest-deleted":
            self.fs.rm_file(self.step_path(step, "manifest.json"))
            os.kill(os.getpid(), signal.SIGKILL)
        original(self, step)
        os.kill(os.getpid(), signal.SIGKILL)  # one-step-deleted

    return remove_step


def _save_then_die(url: str, options: dict[str, Any], point: str) -> None:
    model = _model(4)
    with Checkpointer(
        url, interval_s=None, handle_sigterm=False, keep=3, storage_options=options
    ) as ckpt:
        ckpt.save(1, blocking=True, model=model)
        ckpt.save(2, blocking=True, model=model)
    Location.remove_step = _killed_at(point)  # type: ignore[method-assign]
    ckpt = Checkpointer(url, interval_s=None, handle_sigterm=False, keep=1, storage_options=options)
    ckpt.save(3, blocking=True, model=model)  # committed; retention then deletes 2 and 1
    ckpt.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["file", "s3"])
@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_kill_between_the_commit_and_retention_leaves_a_consistent_set(
    kind: str, point: str, tmp_path: Path
) -> None:
    store = make_store(kind, tmp_path)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(
        ["torch", "fsspec", "s3fs", "router.checkpoint", "torch.distributed.checkpoint"]
    )
    child = context.Process(target=_save_then_die, args=(store.url, store.storage_options, point))
    child.start()
    child.join(timeout=120)
    assert child.exitcode == -signal.SIGKILL

    left = {
        "before-retention": ([1, 2, 3], [1, 2, 3]),  # (directories, complete ones)
        "manifest-deleted": ([1, 2, 3], [1, 3]),  # step 2 lost its manifest first
        "one-step-deleted": ([1, 3], [1, 3]),
    }[point]
    assert (_steps(store), _complete(store)) == left
    # The newest complete one is restored; a manifest-less one is never taken for complete.
    target = _model(9)
    with _checkpointer(store, keep=1) as again:
        assert again.restore(model=target).step == 3
        assert all(
            torch.equal(a, b)
            for a, b in zip(target.parameters(), _model(4).parameters(), strict=True)
        )
        again.save(4, blocking=True, model=target)
    assert _steps(store) == [4]  # the next commit's retention tidies what the kill left
