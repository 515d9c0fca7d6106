"""The migration journal and the checkpoint files (the job records and leases on every backend:
tests/adapters/test_job_records.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.config import checkpoints as ckpt
from router.core.errors import OperationFailed
from router.core.journal import STEPS, Journal, job_of_stack, next_stack_name

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
TRAIN = Path(__file__).resolve().parents[2] / "examples" / "local-market" / "train.py"


def _journal() -> Journal:
    return Journal("m-1", "train", "migrate", "train", "train.2", {"cloud": "local"}, "why",
                   NOW.isoformat())  # fmt: skip


def test_journal_steps_run_in_order_and_roll_back_only_before_the_point_of_no_return() -> None:
    j = _journal()
    assert j.next_step() == "intent"
    for step in STEPS[: STEPS.index("resume-confirmed")]:
        j = j.begin(step, NOW)
        assert j.next_step() == step  # begun is not done: a kill here re-runs it
        j = j.finish(step, NOW, {"n": step})
    assert j.next_step() == "resume-confirmed" and j.can_roll_back()
    j = j.finish("resume-confirmed", NOW)
    assert not j.can_roll_back()
    j = j.finish("old-stack-down", NOW).finish("done", NOW)
    assert j.outcome == "done" and j.next_step() is None
    assert Journal.from_json(json.loads(json.dumps(j.to_json()))) == j
    assert j.rolled_back(NOW).outcome == "rolled-back"


def test_placement_stacks_are_named_after_the_job_and_never_reused() -> None:
    assert next_stack_name("train", {"train"}) == "train.2"
    assert next_stack_name("train", {"train.2", "train.5", "trainer.9"}) == "train.6"
    assert job_of_stack("train.6") == "train" and job_of_stack("train") == "train"


def _save(directory: Path, step: int, request: str | None = None, torn: bool = False) -> None:
    d = directory / f"step-{step:012d}"
    d.mkdir(parents=True)
    blob = b'{"w": 7}'
    (d / "state.json").write_bytes(blob[:-1] if torn else blob)
    manifest = {"format": ckpt.FORMAT, "step": step, "time": NOW.isoformat(), "world_size": 1,
                "job_id": "train", "mode": "files",
                "files": [{"path": "state.json", "size": len(blob),
                           "crc32": f"{zlib.crc32(blob):08x}"}],
                "extra": {"request": request}}  # fmt: skip
    (d / "manifest.json").write_text(json.dumps(manifest))


def test_only_verified_checkpoints_count_and_requests_are_answered(tmp_path: Path) -> None:
    _save(tmp_path, 4)
    _save(tmp_path, 8, request="m-1")
    _save(tmp_path, 12, torn=True)  # newest, but its file does not match the manifest
    latest = ckpt.latest_checkpoint(tmp_path)
    assert latest is not None and latest.step == 8
    found = ckpt.answered(tmp_path, "m-1")
    assert found is not None and found.step == 8
    ckpt.request_save(tmp_path, "m-2", "train", NOW)
    ckpt.withdraw_request(tmp_path, "m-1")  # not ours: stays
    assert json.loads((tmp_path / ckpt.REQUEST_NAME).read_text())["id"] == "m-2"
    ckpt.withdraw_request(tmp_path, "m-2")
    assert not (tmp_path / ckpt.REQUEST_NAME).exists()
    with pytest.raises(OperationFailed, match="no storage driver for nosuch://"):
        ckpt.checkpoint_store("nosuch://b/k/")


def _trainer(directory: Path, placement: str, steps: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPOTROUTE_CHECKPOINT_DIR": str(directory), "STEPS": str(steps),
           "STEP_S": "0.01", "CHECKPOINT_EVERY": "3", "SPOTROUTE_PLACEMENT_ID": placement}
    return subprocess.Popen([sys.executable, str(TRAIN)], env=env, stdout=subprocess.DEVNULL)


def _wait(predicate: object, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_example_trainer_holds_for_a_hand_over_and_ends_as_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    straight = tmp_path / "straight"
    straight.mkdir()
    assert _trainer(straight, "a", 60).wait(30) == 0
    expected = json.loads((straight / ckpt.FINISHED_NAME).read_text())

    moved = tmp_path / "moved"
    moved.mkdir()
    first = _trainer(moved, "a", 60)
    _wait(lambda: ckpt.latest_checkpoint(moved) is not None)
    ckpt.request_save(moved, "m-1", "a", NOW)
    _wait(lambda: ckpt.answered(moved, "m-1") is not None)
    held = ckpt.answered(moved, "m-1")
    assert held is not None
    time.sleep(0.2)
    assert ckpt.latest_checkpoint(moved).step == held.step  # type: ignore[union-attr]
    second = _trainer(moved, "b", 60)
    _wait(lambda: (ckpt.resumed(moved) or {}).get("placement") == "b")
    assert ckpt.resumed(moved)["step"] == held.step  # type: ignore[index]
    first.terminate()
    assert first.wait(10) == 0 and ckpt.marker(moved) is None  # handed over: no marker
    assert second.wait(30) == 0
    assert json.loads((moved / ckpt.FINISHED_NAME).read_text())["w"] == expected["w"]


def test_checkpoints_the_library_writes_count_for_the_router(tmp_path: Path) -> None:
    from router.checkpoint import Checkpointer

    src = tmp_path / "src"
    src.mkdir()
    (src / "weights.bin").write_bytes(b"\x01" * 4096)
    url = tmp_path / "ckpt"
    library = Checkpointer(f"file://{url}", interval_s=None, handle_sigterm=False,
                           asynchronous=False, notice_sources=[])  # fmt: skip
    assert library.save_files(5, src)
    library.close()
    latest = ckpt.latest_checkpoint(url)
    assert latest is not None and latest.step == 5 and latest.total_bytes >= 4096
    (url / "step-000000000005" / "weights.bin").write_bytes(b"\x02" * 4096)
    assert ckpt.latest_checkpoint(url) is None, "a changed file must not count"


def test_a_resume_record_counts_when_it_names_the_new_stack_or_none_and_is_newer() -> None:
    from router.flows.migrate import _written_by_new_job

    j = _journal().begin("new-stack-up", NOW)
    later, earlier = "2026-12-01T10:00:05+00:00", "2026-12-01T09:59:00+00:00"
    assert _written_by_new_job({"placement": "train.2", "time": earlier}, j)
    assert not _written_by_new_job({"placement": "train", "time": later}, j)  # the old job
    # a cloud node that does not know its stack: only a record written since the stack began
    assert _written_by_new_job({"placement": "", "time": later}, j)
    assert not _written_by_new_job({"placement": "", "time": earlier}, j)
    assert not _written_by_new_job({"placement": "", "time": "2026-12-01T10:00:05"}, j)
