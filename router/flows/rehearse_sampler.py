"""What a rehearsal checks while it runs and when it ends: nothing lost, nothing left over.

The `Sampler` thread looks at the running system a few times a second, from the outside, as a
user could: each job's newest complete checkpoint (never going back), the local nodes that run
(two placements of one job alive only inside a move: an open journal), and which of them train
(the rehearsal job's heartbeat, router/checkpoint/rehearsal_job.py: never two at once).
`leftovers` lists, at the end, what must be gone: node and job processes, processes of the
rehearsal's project (the engine's), held job locks, backend stack locks, live leases, open
journals.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from router.config import checkpoints as ckpt
from router.core.rehearsal_compare import Guarantees
from router.engine.job_records import JobRecords, holder_dead
from router.engine.records import FileRecords
from router.flows.rehearse_project import RehearsalDirs

SAMPLE_EVERY_S = 0.5
FRESH_S = 1.0  # a heartbeat older than this (real seconds) says nothing of now
HEARTBEAT_FILE = "rehearsal.json"  # router/checkpoint/rehearsal_job.py


@dataclass
class Sampler:
    """Samples the guarantees until stopped; its findings are `guarantees()`."""

    dirs: RehearsalDirs
    jobs: Sequence[str]
    every_s: float = SAMPLE_EVERY_S
    samples: int = 0
    regressions: list[str] = field(default_factory=list)
    two_training: list[str] = field(default_factory=list)
    two_placements: list[str] = field(default_factory=list)
    _best: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="rehearsal-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            with contextlib.suppress(Exception):  # a torn read is tried again next sample
                self.sample()

    def sample(self) -> None:
        """One look at every job."""
        from components.local_nodes import live_records

        now = datetime.now(UTC)
        live = live_records(self.dirs.home / "sandbox" / ".running")
        records = JobRecords(FileRecords(self.dirs.home))
        for job in self.jobs:
            self._checkpoint(job, now)
            mine = [r for r in live if r.job == job]
            placements = sorted({r.placement for r in mine})
            training = sorted({r.placement for r in mine if _training(Path(r.node_dir), now)})
            if len(training) > 1:
                self.two_training.append(f"{job}: {', '.join(training)} at {now:%H:%M:%S.%f}")
            if len(placements) > 1 and records.open_journal(job) is None:
                again = {
                    r.placement
                    for r in live_records(self.dirs.home / "sandbox" / ".running")
                    if r.job == job
                }
                if len(again) > 1 and records.open_journal(job) is None:
                    self.two_placements.append(
                        f"{job}: {', '.join(sorted(again))} alive, no move under way, at "
                        f"{now:%H:%M:%S.%f}"
                    )
        self.samples += 1

    def _checkpoint(self, job: str, now: datetime) -> None:
        directory = self.dirs.home / "checkpoints" / job / job
        if not directory.is_dir():
            return
        info = ckpt.latest_checkpoint(ckpt.checkpoint_store(f"file://{directory}/"))
        if info is None:
            return
        best = self._best.get(job)
        if best is not None and info.step < best:
            self.regressions.append(f"{job}: step {info.step} after {best} at {now:%H:%M:%S.%f}")
        self._best[job] = max(best or 0, info.step)

    def guarantees(self, leftovers: Sequence[str]) -> Guarantees:
        return Guarantees(
            samples=self.samples,
            checkpoint_regressions=tuple(self.regressions[:20]),
            two_training=tuple(self.two_training[:20]),
            two_placements=tuple(self.two_placements[:20]),
            leftovers=tuple(leftovers),
        )


def _training(node_dir: Path, now: datetime) -> bool:
    try:
        beat = json.loads((node_dir / HEARTBEAT_FILE).read_text())
        at = datetime.fromisoformat(str(beat["time"]))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return beat.get("state") == "training" and (now - at).total_seconds() <= FRESH_S


def leftovers(dirs: RehearsalDirs, jobs: Sequence[str], *, wait_s: float = 30.0) -> list[str]:
    """What is still there at the end (waits up to `wait_s` for processes to go)."""
    deadline = time.monotonic() + wait_s
    found = _left(dirs, jobs)
    while found and time.monotonic() < deadline:
        time.sleep(0.5)
        found = _left(dirs, jobs)
    return found


def _left(dirs: RehearsalDirs, jobs: Sequence[str]) -> list[str]:
    from components.local_nodes import live_records

    out = [
        f"local node of {r.job} ({r.placement}) still runs: pid {r.pid}"
        for r in live_records(dirs.home / "sandbox" / ".running")
    ]
    out += [f"process {pid} still runs in {cwd}" for pid, cwd in processes_under(dirs.root)]
    out += held_job_locks(dirs.home)
    locks = dirs.home / "state" / ".pulumi" / "locks"
    if locks.is_dir():
        out += [f"backend stack lock left: {p.relative_to(locks)}" for p in locks.rglob("*.json")]
    records = JobRecords(FileRecords(dirs.home))
    now = datetime.now(UTC)
    for job in jobs:
        lease = records.current(job)
        if lease and lease.holder and lease.expires_at > now and not holder_dead(lease.holder):
            out.append(f"{job}: lease still held by {lease.holder}")
        journal = records.open_journal(job)
        if journal is not None:
            out.append(f"{job}: journal {journal.id} ({journal.kind}) still open")
    return out


def held_job_locks(home: Path) -> list[str]:
    """Job locks (SPOTROUTE_HOME/locks/*.lock) some process holds now."""
    from filelock import FileLock, Timeout

    out = []
    for path in sorted((home / "locks").glob("*.lock")):
        lock = FileLock(str(path), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            out.append(f"job lock {path.name} is held")
        else:
            lock.release()
    return out


def processes_under(root: Path) -> list[tuple[int, str]]:
    """(pid, working directory) of live processes working under `root` (not this one)."""
    prefix = str(root.resolve()) + os.sep
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (cwd + os.sep).startswith(prefix) and state not in ("Z", "X"):
            found.append((int(entry.name), cwd))
    return found
