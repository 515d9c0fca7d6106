"""spotroute's record store on each backend, against real servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from router.engine.records import (
    FileRecords,
    Held,
    RecordStore,
    S3Records,
    decision_history,
    record_decision,
    records_for,
    redacted,
    s3_client_args,
)
from tests.backend_servers import REPO, SharedBackend

HOLD = """
import os, sys, time
sys.path.insert(0, {repo!r})
from router.engine.records import records_for
from pathlib import Path
store = records_for({url!r}, Path({home!r}), is_default={default!r})
with store.exclusive("job-train"):
    print("held", flush=True)
    time.sleep(600)
"""


Store = tuple[RecordStore, str, dict[str, str]]  # the store, its URL, the env it needs


@pytest.fixture(params=["file", "s3", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "file":
        url = f"file://{tmp_path / 'shared'}"
        return records_for(url, tmp_path / "home", is_default=False), url, {}
    backend: SharedBackend = request.getfixturevalue(f"{request.param}_backend")
    return records_for(backend.url, tmp_path / "home", is_default=False), backend.url, backend.env


def test_records_written_by_one_home_are_read_by_another(
    store: Store, tmp_path: Path
) -> None:
    first, url, _env = store
    second = records_for(url, tmp_path / "other-home", is_default=False)
    first.put("placements/train", {"job": "train", "price_per_hour": 3.67})
    first.put("placements/eval", {"job": "eval", "price_per_hour": 0.5})
    record_decision(first, "train", {"action": "stay", "savings_pct": 4.0})
    record_decision(first, "train", {"action": "move", "savings_pct": 31.0})

    assert second.get("placements/train") == {"job": "train", "price_per_hour": 3.67}
    assert sorted(second.list("placements/")) == ["placements/eval", "placements/train"]
    assert [d["action"] for d in decision_history(second, "train")] == ["stay", "move"]
    assert decision_history(second, "eval") == []

    second.delete("placements/train")
    assert first.get("placements/train") is None
    assert list(first.list("placements/")) == ["placements/eval"]


def test_a_lock_held_by_another_process_refuses_at_once_and_is_free_after_release(
    store: Store, tmp_path: Path
) -> None:
    records, url, env = store
    holder = subprocess.Popen(
        [sys.executable, "-c",
         HOLD.format(repo=str(REPO), url=url, home=str(tmp_path / "h2"), default=False)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, **env},
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(Held) as held, records.exclusive("job-train"):
            pass
        assert time.monotonic() - started < 5, "a held lock must refuse at once"
        assert f"(pid {holder.pid}) since " in held.value.holder, "the refusal says who holds it"
        assert held.value.holder in str(held.value)
        with records.exclusive("job-other"):  # other names are independent
            pass
    finally:
        holder.send_signal(signal.SIGTERM)  # dies without releasing: the file/PG lock goes too
        holder.wait(timeout=30)
    if isinstance(records, S3Records):
        return  # an S3 lock of a dead process frees on expiry: see the next test
    deadline = time.monotonic() + 10
    while True:
        try:
            with records.exclusive("job-train"):
                break
        except Held:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_s3_lock_left_by_a_dead_process_is_taken_over_after_it_expires(
    s3_backend: SharedBackend, tmp_path: Path
) -> None:
    records = S3Records(s3_backend.url)
    key = records._key("locks/job-train")
    dead = {"holder": "alice@laptop pid 1", "expires_at": time.time() + 600}
    records._s3.put_object(Bucket=records.bucket, Key=key, Body=json.dumps(dead).encode())
    with pytest.raises(Held, match="alice@laptop"), records.exclusive("job-train"):
        pass
    dead["expires_at"] = time.time() - 1
    records._s3.put_object(Bucket=records.bucket, Key=key, Body=json.dumps(dead).encode())
    other = S3Records(s3_backend.url)
    with records.exclusive("job-train"), pytest.raises(Held), other.exclusive("job-train"):
        pass  # now ours: a second taker is refused
    assert records.get("locks/job-train") is None, "released on exit"


def test_default_backend_keeps_placements_where_they_always_were(tmp_path: Path) -> None:
    store = records_for(f"file://{tmp_path / 'state'}", tmp_path, is_default=True)
    store.put("placements/train", {"job": "train"})
    assert json.loads((tmp_path / "placements" / "train.json").read_text()) == {"job": "train"}
    assert isinstance(store, FileRecords)


def test_s3_url_is_read_the_way_pulumi_reads_it() -> None:
    bucket, prefix, kwargs = s3_client_args(
        "s3://team-state/spotroute?endpoint=127.0.0.1:9000&disableSSL=true"
        "&s3ForcePathStyle=true&region=eu-west-1"
    )
    assert (bucket, prefix) == ("team-state", "spotroute/.spotroute/")
    assert kwargs["endpoint_url"] == "http://127.0.0.1:9000"
    assert kwargs["region_name"] == "eu-west-1"
    assert s3_client_args("s3://b?endpoint=minio:9000")[2]["endpoint_url"] == "https://minio:9000"


def test_passwords_never_appear_in_where() -> None:
    assert redacted("postgres://pulumi:hunter2@db:5432/state") == "postgres://pulumi:****@db:5432/state"


def test_a_file_lock_taken_an_instant_before_names_its_holder_not_another_process(
    tmp_path: Path,
) -> None:
    """Two routers racing for a job on one file:// backend: the winner takes the OS lock, then
    writes its name beside it. The loser, refused in between, waits up to 2 s for that name
    (CI saw `being changed by another process` in tests/engine/test_two_homes.py)."""
    import threading

    from filelock import FileLock

    records = FileRecords(tmp_path / "shared")
    locks = tmp_path / "shared" / "locks"
    locks.mkdir(parents=True)
    with FileLock(str(locks / "job-train.lock"), timeout=0):  # taken, not yet named
        namer = threading.Timer(
            0.5, lambda: (locks / "job-train.holder").write_text("bob@build-2 (pid 7) since now")
        )
        namer.start()
        with pytest.raises(Held) as held, records.exclusive("job-train"):
            pass
        namer.join()
    assert held.value.holder == "bob@build-2 (pid 7) since now"
    (locks / "job-train.holder").unlink()
    never_named = FileLock(str(locks / "job-train.lock"), timeout=0)
    with never_named, pytest.raises(Held) as held, records.exclusive("job-train"):
        pass
    assert held.value.holder == "another process"
