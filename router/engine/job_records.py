"""Journals, decisions, watch state and leases of jobs, in the state backend (route watch).

Per job, under <backend>/.spotroute/jobs/<job>/ (file:// backends):

  journal.json        the open migration journal (router.core.journal), written atomically
  journals/<id>.json  closed journals
  decisions.jsonl     every decision route watch made, with its numbers (append-only)
  state.json          what decide() must remember: last move, lost zones, hours run
  lease.json          who may act on the job now, until when

The lease is behind a protocol (`Leases`) so S3 (conditional writes) or postgres (row locks)
backends can implement it; only the file:// backend is implemented yet.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from router.core.errors import OperationFailed
from router.core.journal import Journal


@dataclass(frozen=True, slots=True)
class Lease:
    job: str
    holder: str  # "<host>:<pid>:<start ticks>:<nonce>"
    expires_at: datetime
    last_run_at: datetime | None = None  # when a watcher last finished handling the job


class Leases(Protocol):
    """One actor per job at a time, with expiry so a dead holder's jobs are picked up."""

    def acquire(self, job: str, holder: str, ttl_s: float, now: datetime) -> Lease | None:
        """Take (or renew) the job's lease; None while someone else holds a live one."""
        ...

    def release(self, job: str, holder: str, now: datetime, ran: bool = False) -> None: ...

    def current(self, job: str) -> Lease | None: ...


class JobRecords(Leases, Protocol):
    """Journals, decisions and watch state of jobs, plus their leases."""

    def open_journal(self, job: str) -> Journal | None: ...
    def write_journal(self, journal: Journal) -> None: ...
    def closed_journals(self, job: str) -> list[Journal]: ...
    def append_decision(self, job: str, record: dict[str, Any]) -> None: ...
    def decisions(self, job: str) -> list[dict[str, Any]]: ...
    def read_state(self, job: str) -> dict[str, Any]: ...
    def write_state(self, job: str, state: dict[str, Any]) -> None: ...
    def jobs(self) -> list[str]: ...


def holder_id(nonce: str) -> str:
    """This process as a lease holder: host, pid and start time (PID reuse), plus a nonce."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid) or 0}:{nonce}"


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def holder_dead(holder: str) -> bool:
    """True when the holder ran on this host and its process is gone (no need to wait expiry)."""
    parts = holder.split(":")
    if len(parts) < 4 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return False
    ticks = _start_ticks(int(parts[1]))
    return ticks is None or str(ticks) != parts[2]


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class FileJobRecords:
    """JobRecords on a file:// backend directory (the default local backend included)."""

    def __init__(self, root: Path) -> None:
        self.root = root / ".spotroute" / "jobs"

    def _dir(self, job: str) -> Path:
        return self.root / job

    @contextmanager
    def _locked(self, job: str) -> Iterator[Path]:
        from filelock import FileLock

        directory = self._dir(job)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with FileLock(str(directory / ".lock")):
            yield directory

    # --- leases ----------------------------------------------------------------------------

    def _read_lease(self, directory: Path, job: str) -> Lease | None:
        try:
            data = json.loads((directory / "lease.json").read_text())
            return Lease(
                job,
                str(data["holder"]),
                datetime.fromisoformat(data["expires_at"]),
                datetime.fromisoformat(data["last_run_at"]) if data.get("last_run_at") else None,
            )
        except (OSError, ValueError, KeyError):
            return None

    def _write_lease(self, directory: Path, lease: Lease) -> None:
        _write_atomic(
            directory / "lease.json",
            json.dumps(
                {
                    "holder": lease.holder,
                    "expires_at": lease.expires_at.isoformat(),
                    "last_run_at": lease.last_run_at.isoformat() if lease.last_run_at else None,
                }
            ),
        )

    def acquire(self, job: str, holder: str, ttl_s: float, now: datetime) -> Lease | None:
        with self._locked(job) as directory:
            held = self._read_lease(directory, job)
            live = (
                held is not None
                and held.holder != holder
                and held.expires_at > now
                and not holder_dead(held.holder)
            )
            if live:
                return None
            lease = Lease(
                job, holder, now + timedelta(seconds=ttl_s), held.last_run_at if held else None
            )
            self._write_lease(directory, lease)
            return lease

    def release(self, job: str, holder: str, now: datetime, ran: bool = False) -> None:
        with self._locked(job) as directory:
            held = self._read_lease(directory, job)
            if held is None or held.holder != holder:
                return
            self._write_lease(directory, Lease(job, "", now, now if ran else held.last_run_at))

    def current(self, job: str) -> Lease | None:
        return self._read_lease(self._dir(job), job)

    # --- journals --------------------------------------------------------------------------

    def open_journal(self, job: str) -> Journal | None:
        try:
            data = json.loads((self._dir(job) / "journal.json").read_text())
        except (OSError, ValueError):
            return None
        journal = Journal.from_json(data)
        return journal if journal.outcome == "open" else None

    def write_journal(self, journal: Journal) -> None:
        directory = self._dir(journal.job)
        text = json.dumps(journal.to_json(), indent=1)
        if journal.outcome == "open":
            _write_atomic(directory / "journal.json", text)
            return
        # Closed: archive first, then drop the open one. A kill in between leaves the open copy
        # one step short; recovery runs that last step again (it is idempotent) and closes it.
        _write_atomic(directory / "journals" / f"{journal.id}.json", text)
        (directory / "journal.json").unlink(missing_ok=True)

    def closed_journals(self, job: str) -> list[Journal]:
        directory = self._dir(job) / "journals"
        if not directory.is_dir():
            return []
        found = []
        for path in sorted(directory.glob("*.json")):
            try:
                found.append(Journal.from_json(json.loads(path.read_text())))
            except (OSError, ValueError, KeyError):
                continue
        return sorted(found, key=lambda j: j.created_at)

    # --- decisions and watch state ---------------------------------------------------------

    def append_decision(self, job: str, record: dict[str, Any]) -> None:
        with self._locked(job) as directory, open(directory / "decisions.jsonl", "a") as f:
            f.write(json.dumps(record, default=str) + "\n")

    def decisions(self, job: str) -> list[dict[str, Any]]:
        try:
            lines = (self._dir(job) / "decisions.jsonl").read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a torn last line after a crash
        return out

    def read_state(self, job: str) -> dict[str, Any]:
        try:
            data = json.loads((self._dir(job) / "state.json").read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def write_state(self, job: str, state: dict[str, Any]) -> None:
        _write_atomic(self._dir(job) / "state.json", json.dumps(state, indent=1, default=str))

    def jobs(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())


def job_records_for(backend_url: str) -> FileJobRecords:
    """The job records of a backend; only file:// is implemented (s3/gs/azblob/postgres: later)."""
    parsed = urlparse(backend_url)
    if parsed.scheme != "file":
        raise OperationFailed(
            f"backend {backend_url}: route migrate and route watch keep their journal and leases "
            "beside the stacks, and only file:// backends are supported yet"
        )
    return FileJobRecords(Path(parsed.path))
