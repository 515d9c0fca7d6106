"""The router's side of the hand-over files (router/config/checkpoints.py) on every storage a
checkpoint URL can name: a local directory, S3 (moto's server), GCS (fake-gcs-server) and Azure
Blob (Azurite), ending with a real Mover's checkpoint steps answered by the checkpoint library.
The router finds each server as it would a cloud: through the environment the drivers read
(AWS_ENDPOINT_URL, STORAGE_EMULATOR_HOST, AZURE_STORAGE_CONNECTION_STRING)."""

from __future__ import annotations

import json
import time
import uuid
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.config import checkpoints as ckpt
from router.core.errors import OperationFailed
from tests.checkpoint.servers import STARTERS, StorageServer

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module", params=["file", "s3", "gcs", "azure"])
def server(request: pytest.FixtureRequest) -> Iterator[StorageServer | None]:
    if request.param == "file":
        yield None
        return
    started = STARTERS[request.param]()
    yield started
    started.stop()


@pytest.fixture
def url(server: StorageServer | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh checkpoint URL on the server, its endpoint and credentials in the environment."""
    if server is None:
        return f"file://{tmp_path}/ckpt"
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    return f"{server.url}/job-{uuid.uuid4().hex[:8]}"


def _put(url: str, name: str, blob: bytes) -> None:
    fs, root = ckpt.storage_fs(url)
    path = f"{root.rstrip('/')}/{name}"
    if fs.protocol in ("file", ("file", "local")):
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    fs.pipe_file(path, blob)


def _checkpoint(url: str, step: int, *, request: str | None = None, torn: bool = False) -> None:
    """A checkpoint as examples/local-market/train.py writes one: state.json, manifest last."""
    blob = json.dumps({"w": step}).encode()
    name = f"step-{step:012d}"
    _put(url, f"{name}/state.json", blob[:-1] if torn else blob)
    manifest = {"format": ckpt.FORMAT, "step": step, "time": NOW.isoformat(), "world_size": 1,
                "mode": "files", "extra": {"request": request, "placement": "train"},
                "files": [{"path": "state.json", "size": len(blob),
                           "crc32": f"{zlib.crc32(blob):08x}"}]}  # fmt: skip
    _put(url, f"{name}/manifest.json", json.dumps(manifest).encode())


def test_save_requests_are_written_whole_withdrawn_only_by_their_owner(url: str) -> None:
    store = ckpt.checkpoint_store(url)
    assert ckpt.resumed(store) is None and ckpt.finished(store) is None
    ckpt.request_save(store, "m-1", "train", NOW)
    ckpt.request_save(url, "m-1", "train", datetime(2026, 12, 2, tzinfo=UTC))  # a re-run step
    asked = ckpt.checkpoint_store(url).read_json(ckpt.REQUEST_NAME)
    assert asked == {"id": "m-1", "placement": "train", "requested_at": NOW.isoformat()}
    ckpt.withdraw_request(store, "m-0")  # a request of another migration: not ours
    assert store.read_json(ckpt.REQUEST_NAME) is not None
    ckpt.withdraw_request(store, "m-1")
    assert store.read_json(ckpt.REQUEST_NAME) is None
    ckpt.withdraw_request(store, "m-1")  # twice: nothing left to do, no error
    if store.is_local:  # the temp name a write goes through is gone
        assert sorted(p.name for p in Path(store.root).iterdir()) == []

    _put(url, ckpt.RESUMED_NAME, b'{"step": 12, "placement": "train.2", "time": "t"}')
    _put(url, ckpt.FINISHED_NAME, b"not json")  # half a file never counts
    assert ckpt.resumed(store) == {"step": 12, "placement": "train.2", "time": "t"}
    assert ckpt.finished(store) is None


def test_a_file_the_job_writes_after_the_router_listed_is_read_afresh(url: str) -> None:
    """s3fs answered a read from its listing cache: a file written by another process after the
    router listed the root read as missing (the job's hold-expired record, never seen), one
    rewritten longer read cut to its old size (issue 24)."""
    store = ckpt.checkpoint_store(url)
    _checkpoint(url, 4)
    latest = ckpt.latest_checkpoint(store)  # the router lists the root
    assert latest is not None and latest.step == 4
    fs, root = ckpt.storage_fs(url)
    other = type(fs)(**fs.storage_options, skip_instance_cache=True)  # another process's driver

    def job_writes(name: str, blob: bytes) -> None:
        other.pipe_file(f"{root.rstrip('/')}/{name}", blob)

    job_writes(ckpt.RESUMED_NAME, b'{"step": 4, "placement": "train.2", "time": "t"}')
    job_writes(ckpt.EXPIRED_NAME, json.dumps({"id": "m-1", "step": 4, "held_s": 61.5}).encode())
    said = ckpt.resumed(store)
    assert said is not None and said["placement"] == "train.2"
    expired = ckpt.hold_expired(store, "m-1")
    assert expired is not None and expired["held_s"] == 61.5
    assert ckpt.latest_checkpoint(store) is not None  # listed again in between
    job_writes(ckpt.RESUMED_NAME, b'{"step": 4000, "placement": "train.3", "time": "later on"}')
    assert ckpt.resumed(store) == {"step": 4000, "placement": "train.3", "time": "later on"}


def test_only_complete_checkpoints_count_and_the_answer_to_a_request_is_found(url: str) -> None:
    store = ckpt.checkpoint_store(url)
    assert ckpt.latest_checkpoint(store) is None
    _checkpoint(url, 4)
    _checkpoint(url, 8, request="m-1")
    _checkpoint(url, 12, torn=True)  # newest, but a file is shorter than its manifest says
    _put(url, "step-000000000016/state.json", b"{}")  # a save in flight: no manifest yet
    latest = ckpt.latest_checkpoint(store)
    assert latest is not None and (latest.step, latest.placement) == (8, "train")
    assert latest.total_bytes == len(json.dumps({"w": 8}))
    answer = ckpt.answered(store, "m-1")
    assert answer is not None and answer.step == 8
    assert ckpt.answered(store, "m-2") is None
    assert [c.step for c in ckpt.complete_checkpoints(store)] == [8, 4]


def test_route_watch_reads_progress_from_this_storage(url: str) -> None:
    from router.flows.watch import checkpoint_progress

    _checkpoint(url, 4)
    _checkpoint(url, 8)
    latest, done, error = checkpoint_progress(url)
    assert latest is not None and latest.step == 8 and done is None and error is None
    _put(url, "finished.json", b'{"step": 9}')
    assert checkpoint_progress(url)[1] == {"step": 9}


def test_storage_route_watch_cannot_read_is_noted_not_fatal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from router.flows.watch import checkpoint_progress

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    latest, done, error = checkpoint_progress("s3://no-such-bucket/job")
    assert latest is None and done is None
    assert error is not None and error.startswith("checkpoints at s3://no-such-bucket/job: ")
    assert checkpoint_progress("") == (None, None, None)


def test_a_url_no_driver_can_read_is_one_clean_error() -> None:
    with pytest.raises(OperationFailed, match="no storage driver for nosuch://"):
        ckpt.checkpoint_store("nosuch://bucket/job")
    with pytest.raises(OperationFailed, match="no checkpointUrl"):
        ckpt.checkpoint_store("")


def test_the_movers_checkpoint_steps_run_on_this_storage_with_the_library_answering(
    url: str, tmp_path: Path
) -> None:
    """checkpoint-requested and checkpoint-complete of a real Mover against a job that uses the
    checkpoint library on this storage (plain-directory mode, found through the environment)."""
    import threading

    from router.checkpoint import Checkpointer, Notice
    from router.core.journal import Journal
    from router.flows.migrate import Mover

    job = Checkpointer(url, interval_s=None, every_steps=50, handle_sigterm=False,
                       notice_sources=[], placement="train", request_poll_s=0.05)  # fmt: skip
    ended: dict[str, object] = {}

    def train() -> None:
        state = tmp_path / "state"
        state.mkdir()
        try:
            for step in range(1, 100_000):
                (state / "w.txt").write_text(str(step))
                if job.due(step):
                    job.save_files(step, state)
                time.sleep(0.005)
        except SystemExit as stop:
            ended["exit"] = stop.code

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    journal = Journal("m-7", "train", "migrate", "train", "train.2", {"cloud": "aws"}, "test",
                      NOW.isoformat()).finish("intent", NOW, {"checkpoint_url": url})  # fmt: skip
    mover = Mover(None, None, "test", None, checkpoint_timeout_s=60)  # type: ignore[arg-type]
    asked = mover._checkpoint_requested(journal)
    assert asked == {"request": "m-7", "dir": url}
    complete = mover._checkpoint_complete(journal)
    assert complete["step"] > 0 and complete["bytes"] > 0, complete
    job.watcher.record(Notice(cloud="aws", kind="terminate", notice_time=datetime.now(UTC)))
    thread.join(30)
    assert ended == {"exit": 0}, "the job stops quietly once handed over"
    job.close()
