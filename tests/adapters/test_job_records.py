"""Journals, decisions, watch state and leases of jobs on every backend spotroute keeps records on:
file://, S3 (moto's server) and PostgreSQL, real servers on 127.0.0.1."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from router.core.journal import STEPS, Journal
from router.engine.job_records import JobRecords, holder_dead, holder_id
from router.engine.records import records_for
from tests.backend_servers import SharedBackend

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@pytest.fixture(params=["file", "s3", "postgres"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "file":
        return f"file://{tmp_path / 'shared'}"
    backend: SharedBackend = request.getfixturevalue(f"{request.param}_backend")
    return backend.url


def job_records(url: str, home: Path) -> JobRecords:
    """One engineer's (one watcher's) view of the backend: its own home, its own client."""
    return JobRecords(records_for(url, home, is_default=False))


def _journal() -> Journal:
    return Journal("m-1", "train", "migrate", "train", "train.2", {"cloud": "local"}, "why",
                   NOW.isoformat())  # fmt: skip


def test_a_migration_journal_written_by_one_watcher_is_resumed_by_another(
    backend_url: str, tmp_path: Path
) -> None:
    first = job_records(backend_url, tmp_path / "a")
    second = job_records(backend_url, tmp_path / "b")
    j = _journal()
    for step in STEPS[:3]:  # killed after checkpoint-complete
        j = j.begin(step, NOW).finish(step, NOW, {"step": step})
        first.write_journal(j)
    found = second.open_journal("train")
    assert found == j and found.next_step() == STEPS[3]
    assert second.jobs() == ["train"]
    second.write_journal(found.rolled_back(NOW))
    assert first.open_journal("train") is None
    assert [x.outcome for x in first.closed_journals("train")] == ["rolled-back"]

    first.append_decision("train", {"action": "stay", "reason": "$1 < $2"})
    second.append_decision("train", {"action": "move", "reason": "$9 > $2"})
    second.append_decision("train", {"action": "outcome", "reason": "migrate done"})
    assert [d["action"] for d in first.decisions("train")] == ["stay", "move", "outcome"]
    assert (first.last_decision("train") or {}).get("action") == "move"
    assert first.last_decision("eval") is None
    first.write_state("train", {"last_move_at": NOW.isoformat(), "moves": 1})
    assert second.read_state("train") == {"last_move_at": NOW.isoformat(), "moves": 1}
    assert second.read_state("eval") == {}


def test_a_lease_excludes_other_watchers_until_released_or_expired(
    backend_url: str, tmp_path: Path
) -> None:
    mine = job_records(backend_url, tmp_path / "a")
    theirs = job_records(backend_url, tmp_path / "b")
    me, other = holder_id("a"), "elsewhere:1:1:b"
    assert mine.acquire("train", me, 60, NOW) is not None
    assert theirs.acquire("train", other, 60, NOW) is None
    assert mine.acquire("train", me, 60, NOW + timedelta(seconds=30)) is not None  # renewal
    assert theirs.acquire("train", other, 60, NOW + timedelta(seconds=61)) is None  # renewed
    lease = theirs.acquire("train", other, 60, NOW + timedelta(seconds=91))  # expired: theirs
    assert lease is not None and lease.holder == other
    assert mine.acquire("train", me, 60, NOW + timedelta(seconds=92)) is None
    mine.release("train", me, NOW)  # not ours any more: a no-op
    assert (mine.current("train") or lease).holder == other
    theirs.release("train", other, NOW + timedelta(seconds=95), ran=True)
    freed = mine.current("train")
    assert freed is not None and freed.holder == "" and freed.last_run_at is not None
    assert mine.acquire("train", me, 60, NOW + timedelta(seconds=96)) is not None


def test_a_lease_of_a_dead_watcher_on_this_host_is_taken_at_once(
    backend_url: str, tmp_path: Path
) -> None:
    records = job_records(backend_url, tmp_path / "a")
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    dead = f"{os.uname().nodename}:{proc.pid}:1:c"
    assert holder_dead(dead)
    assert records.acquire("train", dead, 600, NOW) is not None
    assert records.acquire("train", holder_id("me"), 600, NOW) is not None


def test_watchers_racing_for_free_leases_each_lease_goes_to_exactly_one(
    backend_url: str, tmp_path: Path
) -> None:
    watchers = [job_records(backend_url, tmp_path / f"w{i}") for i in range(4)]
    jobs = [f"job-{n}" for n in range(6)]
    winners: dict[str, list[int]] = {job: [] for job in jobs}
    latencies: list[float] = []
    gate = threading.Barrier(len(watchers))
    lock = threading.Lock()
    errors: list[str] = []

    def race(i: int) -> None:
        try:
            for job in jobs:
                gate.wait(timeout=60)
                started = time.perf_counter()
                got = watchers[i].acquire(job, f"elsewhere:{i}:1:w", 300, NOW)
                with lock:
                    latencies.append(time.perf_counter() - started)
                    if got is not None:
                        winners[job].append(i)
        except Exception as exc:  # a failed backend call must name itself, not hang the others
            errors.append(f"watcher {i}: {type(exc).__name__}: {exc}")
            gate.abort()

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(watchers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert all(len(w) == 1 for w in winners.values()), winners
    for job, (i,) in winners.items():
        lease = watchers[0].current(job)
        assert lease is not None and lease.holder == f"elsewhere:{i}:1:w"
    # uncontended: the cost of one acquire + release on this backend (docs/benchmarks.md)
    alone = watchers[0]
    solo = []
    for n in range(20):
        started = time.perf_counter()
        assert alone.acquire("solo", "elsewhere:9:1:s", 300, NOW) is not None
        solo.append(time.perf_counter() - started)
        alone.release("solo", "elsewhere:9:1:s", NOW, ran=bool(n % 2))
    scheme = backend_url.split(":", 1)[0]
    print(f"lease acquire {scheme}: uncontended median {statistics.median(solo) * 1e3:.1f} ms, "
          f"4-way race median {statistics.median(latencies) * 1e3:.1f} ms, "
          f"max {max(latencies) * 1e3:.1f} ms")  # fmt: skip
