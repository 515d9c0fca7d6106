"""Checkpointer.from_env: the SPOTROUTE_* settings a stack passes, a bad one refused with the
variable's name; and how many files a rank writes at once (io_threads)."""

from __future__ import annotations

from pathlib import Path

import pytest
from training import build, train_step

from router.checkpoint import Checkpointer, CheckpointError, dcp


def from_env(tmp_path: Path, **variables: str) -> Checkpointer:
    env = {"SPOTROUTE_CHECKPOINT_URL": tmp_path.as_uri(), "SPOTROUTE_NOTICE_SOURCE": "none",
           **variables}
    return Checkpointer.from_env(env)


def test_the_settings_come_from_the_variables(tmp_path: Path) -> None:
    with from_env(tmp_path, SPOTROUTE_CHECKPOINT_INTERVAL="10m", SPOTROUTE_CHECKPOINT_KEEP="5",
                  SPOTROUTE_CHECKPOINT_THREADS="3", SPOTROUTE_JOB_ID="j-1",
                  SPOTROUTE_CHECKPOINT_ASYNC="0", SPOTROUTE_PLACEMENT_ID="train.2") as ckpt:
        assert (ckpt.interval_s, ckpt.keep, ckpt.io_threads) == (600.0, 5, 3)
        assert (ckpt.job_id, ckpt.asynchronous, ckpt.placement) == ("j-1", False, "train.2")
    with from_env(tmp_path) as default:
        assert (default.keep, default.io_threads) == (3, dcp.io_threads(local=True))


@pytest.mark.parametrize("name", ["SPOTROUTE_CHECKPOINT_KEEP", "SPOTROUTE_CHECKPOINT_THREADS"])
@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_a_bad_count_names_the_variable(tmp_path: Path, name: str, value: str) -> None:
    with pytest.raises(CheckpointError, match=f"{name}='{value}' is not a whole number of at "
                                              "least 1 — set it to e.g."):
        from_env(tmp_path, **{name: value})


def test_io_threads_files_are_written_per_rank_and_read_back(tmp_path: Path) -> None:
    model, optimizer, scheduler = build(1, 8)
    train_step(model, optimizer, scheduler, 8)
    with Checkpointer(tmp_path.as_uri(), interval_s=None, handle_sigterm=False,
                      io_threads=3) as ckpt:
        ckpt.save(1, blocking=True, model=model, optimizer=optimizer, scheduler=scheduler)
    files = sorted(p.name for p in (tmp_path / "step-000000000001").glob("*.distcp"))
    assert files == ["__0_0.distcp", "__0_1.distcp", "__0_2.distcp"]
    again, optimizer2, scheduler2 = build(2, 8)
    with Checkpointer(tmp_path.as_uri(), interval_s=None, handle_sigterm=False) as ckpt:
        assert ckpt.restore(model=again, optimizer=optimizer2, scheduler=scheduler2).step == 1
    assert all(a.equal(b) for a, b in zip(model.parameters(), again.parameters(), strict=True))


def test_io_threads_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="io_threads must be at least 1"):
        Checkpointer(tmp_path.as_uri(), io_threads=0)


@pytest.mark.parametrize(("local_world_size", "cpus", "threads", "local_threads"),
                         [(None, 2, 2, 1), ("1", 16, 4, 4), ("8", 16, 2, 1), ("4", 2, 1, 1),
                          ("x", 2, 2, 1), ("1", 6, 4, 3)])
def test_the_default_is_a_thread_per_cpu_of_the_rank_at_most_four(
        monkeypatch: pytest.MonkeyPatch, local_world_size: str | None, cpus: int,
        threads: int, local_threads: int) -> None:
    """An object store: a file per CPU of the rank. A local disk: one per two CPUs (each
    writing thread keeps a second CPU checksumming beside it)."""
    if local_world_size is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local_world_size)
    monkeypatch.setattr(dcp.os, "cpu_count", lambda: cpus)
    assert dcp.io_threads() == threads
    assert dcp.io_threads(local=True) == local_threads
