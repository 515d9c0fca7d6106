"""A damaged `.metadata` (DCP's index of a checkpoint) is damage like any other file's: the step
is set aside (one line says so), its slot is free for retention, and that step is saved again.

Before, DCP reported it as `AssertionError: metadata is None` (after falling back to a rank-local
`__0.metadata` that is not in the manifest), which did not count as damage: the step kept its
manifest, so the next save of that step was skipped and retention counted it as complete. With
every `.metadata` damaged and preemptions more frequent than the saves the damaged steps blocked,
a job never got past them. On file:// and S3 (moto's server).
"""

from __future__ import annotations

import itertools
import multiprocessing
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
import torch
from segments import run_segment
from servers import Store, make_store
from training import build, reference, run, same

from router.checkpoint import Checkpointer

WIDTH = 16


def _checkpointer(store: Store, **settings: Any) -> Checkpointer:
    settings = {"interval_s": None, "handle_sigterm": False, **settings}
    return Checkpointer(store.url, storage_options=store.storage_options, **settings)


def _damage_metadata(store: Store, step: int) -> None:
    store.flip_bit(f"step-{step:012d}", ".metadata")  # a bit flipped at rest


def _steps(store: Store) -> list[str]:
    return [name for name in store.names() if name.startswith("step-")]


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_a_damaged_newest_metadata_is_set_aside_and_that_step_saved_again(
    kind: str, tmp_path: Path
) -> None:
    store = make_store(kind, tmp_path)
    with _checkpointer(store, every_steps=2, keep=2) as ckpt:
        run(ckpt, seed=11, steps=4, width=WIDTH)
    _damage_metadata(store, 4)

    model, optimizer, scheduler = build(11, WIDTH)
    with _checkpointer(store) as again:
        start = again.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    assert start.step == 2
    # One line: what is damaged, where it went, what is used instead.
    line = start.messages[0]
    assert line.startswith("step 4: damaged (.metadata checksum "), line
    assert f" — set aside as {store.url}/damaged/step-000000000004-" in line
    assert line.endswith("; using step 2")
    assert not any("metadata is None" in m for m in start.messages)
    assert _steps(store) == ["step-000000000002"]
    assert [n[:17] for n in store.names("damaged")] == ["step-000000000004"]

    # Step 4 is saved again (before, its damaged manifest made the save a no-op), and the
    # damaged one no longer holds one of the `keep` slots: steps 4 and 6 are kept, 2 goes.
    with _checkpointer(store, every_steps=2, keep=2) as resumed:
        final, started = run(resumed, seed=11, steps=6, width=WIDTH)
    assert started == 2
    assert _steps(store) == ["step-000000000004", "step-000000000006"]
    assert same(final, reference(seed=11, steps=6, width=WIDTH))
    with _checkpointer(store) as last:
        assert last.restore(model=build(11, WIDTH)[0]).step == 6


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_a_damaged_file_of_a_plain_directory_checkpoint_is_set_aside_too(
    kind: str, tmp_path: Path
) -> None:
    store = make_store(kind, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    with _checkpointer(store) as ckpt:
        for step in (1, 2):
            (work / "state.bin").write_bytes(bytes([step]) * 4096)
            assert ckpt.save_files(step, work)
    fs, path = store.fs_path("step-000000000002", "state.bin")
    fs.pipe_file(path, bytes([9]) * 4096)  # same size, other bytes

    with _checkpointer(store) as again:
        start = again.restore_files(tmp_path / "back")
        assert start.step == 1 and (tmp_path / "back" / "state.bin").read_bytes()[:1] == b"\x01"
        assert start.messages[0].startswith("step 2: damaged (state.bin checksum ")
        assert f" — set aside as {store.url}/damaged/step-000000000002-" in start.messages[0]
        assert start.messages[0].endswith("; using step 1")
        assert again.save_files(2, work)  # saved again, not taken for a complete one
    assert _steps(store) == ["step-000000000001", "step-000000000002"]


# --- every .metadata damaged, a job preempted more often than the damaged steps are apart ------

TOTAL_STEPS = 15
KILL_AFTER = 5  # steps into each segment: more often than the three damaged steps (3, 6, 9)
SEED = 12


def _segment(url: str, options: dict[str, Any], result_path: str, out: Connection) -> None:
    import training

    from router.checkpoint import Checkpointer

    # Synchronous saves every 3 steps: a step reported after a save step is on storage.
    ckpt = Checkpointer(
        url,
        interval_s=None,
        every_steps=3,
        handle_sigterm=False,
        asynchronous=False,
        storage_options=options,
    )
    final, started = training.run(
        ckpt, seed=SEED, steps=TOTAL_STEPS, width=WIDTH, on_step=lambda step: out.send(step)
    )
    torch.save(final, result_path)
    ckpt.close()
    out.send(("started", started))


def _context() -> Any:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(
        [
            "torch",
            "numpy",
            "fsspec",
            "router.checkpoint",
            "training",
            "s3fs",
            "torch.distributed.checkpoint",
            "torch.distributed.checkpoint.state_dict",
            "torch._dynamo",
            "fsspec.implementations.local",
            "xxhash",
        ]
    )
    return context


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["file", "s3"])
def test_every_metadata_damaged_a_job_killed_every_few_steps_still_makes_progress(
    kind: str, tmp_path: Path
) -> None:
    store = make_store(kind, tmp_path)
    with _checkpointer(store, every_steps=3) as ckpt:
        run(ckpt, seed=SEED, steps=9, width=WIDTH)
    for step in (3, 6, 9):
        _damage_metadata(store, step)

    context = _context()
    result = str(tmp_path / "final.pt")
    starts: list[int] = []
    for _ in range(5):
        first, exitcode, killed = run_segment(
            context,
            _segment,
            (store.url, store.storage_options, result),
            lambda first, step: step >= first - 1 + KILL_AFTER,
        )
        assert first is not None, f"segment exited with {exitcode} before its first step"
        starts.append(first - 1)
        if not killed:
            assert exitcode == 0
            break
        assert exitcode == -9
    # Each segment resumes from the last save of the one before — at least the save before the
    # step it was killed after (0, then 3, 6, 9, 12 when the kill lands at once; on a loaded
    # machine the child may finish a step and its save before the SIGKILL lands). Before, every
    # segment started from 0 again: the saves of steps 3, 6, 9 were skipped.
    assert starts[0] == 0 and len(starts) >= 2
    for before, after in itertools.pairwise(starts):
        assert after % 3 == 0 and after >= (before + KILL_AFTER) // 3 * 3, starts
    assert same(torch.load(result), reference(seed=SEED, steps=TOTAL_STEPS, width=WIDTH))
    assert [n[:17] for n in store.names("damaged")] == [
        "step-000000000003",
        "step-000000000006",
        "step-000000000009",
    ]
