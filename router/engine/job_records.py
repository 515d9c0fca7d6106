"""Journals, decisions, watch state and leases of jobs, in the state backend (route watch).

All of it is records of the backend's RecordStore (router.engine.records), so it works on every
backend spotroute keeps records on — file://, s3://, postgres:// — and two watchers on two
machines share it. Keys, per job:

  jobs/<job>/journal          the open migration journal (router.core.journal)
  jobs/<job>/journals/<id>    closed journals
  jobs/<job>/state            what decide() must remember: last move, lost zones, hours run
  jobs/<job>/lease            who may act on the job now, until when (compare-and-set)
  decisions/<job>/<time>-<id> every decision (records.record_decision), oldest first by key

A lease is taken with the store's compare-and-set (`put_if`): read it with its version, and
write ours only if nobody wrote in between, so of two watchers racing for a free or expired
lease exactly one wins, on any backend. The lease is what makes `route migrate`, `route watch`
and a user's `route deploy` of one job exclusive (`holding_lease`).
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from router.core.journal import Journal
from router.engine.lock_holders import current_user
from router.engine.records import RecordStore, decision_history, record_decision

LEASE_TTL_S = 300.0  # a lease not renewed for this long belongs to a stopped router
CAS_TRIES = 5  # lost compare-and-sets before giving up a lease for this pass


# The commands that take a job's lease, named by the nonce of their holder id ("deploy-1a2b").
LEASE_COMMANDS = ("deploy", "destroy", "migrate", "watch")


@dataclass(frozen=True, slots=True)
class Lease:
    job: str
    holder: str  # "<host>:<pid>:<start ticks>:<command>-<nonce>"; "" when released
    expires_at: datetime
    last_run_at: datetime | None = None  # when a watcher last finished handling the job
    user: str = ""  # the holder's login name ("" in leases older routers wrote)
    since: datetime | None = None  # when the holder took it (renewals keep it)

    def to_json(self) -> dict[str, Any]:
        return {
            "holder": self.holder,
            "expires_at": self.expires_at.isoformat(),
            "last_run_at": self.last_run_at.isoformat() if self.last_run_at else None,
            "user": self.user,
            "since": self.since.isoformat() if self.since else None,
        }

    def describe(self) -> str:
        """Who holds the lease, as recorded: "`route deploy` (alice@build-7, pid 4242) since
        2026-12-01 11:07:02 UTC"; "a router on build-7 (pid 4242)" for an older holder."""
        host, _, rest = self.holder.partition(":")
        pid, _, rest = rest.partition(":")
        command = rest.partition(":")[2].partition("-")[0]
        who = f"{self.user}@{host}" if self.user else host or "?"
        # The command that holds it (not advice to run one, which test_advice_commands checks).
        what = "`route " + command + "`" if command in LEASE_COMMANDS else "a router"
        when = f" since {self.since:%Y-%m-%d %H:%M:%S} UTC" if self.since else ""
        return f"{what} ({who}, pid {pid or '?'}){when}"

    @classmethod
    def from_json(cls, job: str, data: dict[str, Any] | None) -> Lease | None:
        if data is None:
            return None
        try:
            last, since = data.get("last_run_at"), data.get("since")
            return cls(
                job,
                str(data["holder"]),
                datetime.fromisoformat(str(data["expires_at"])),
                datetime.fromisoformat(str(last)) if last else None,
                str(data.get("user") or "")[:64],
                datetime.fromisoformat(str(since)).astimezone(UTC) if since else None,
            )
        except (KeyError, TypeError, ValueError):
            return None


def holder_id(nonce: str) -> str:
    """This process as a lease holder: host, pid and start time (PID reuse), plus a nonce that
    starts with the command taking it (`deploy-1a2b`: see LEASE_COMMANDS, Lease.describe)."""
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


class JobRecords:
    """Journals, decisions, watch state and leases of jobs, on one RecordStore."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store

    @property
    def where(self) -> str:
        return self.store.where

    # --- leases ----------------------------------------------------------------------------

    def acquire(self, job: str, holder: str, ttl_s: float, now: datetime) -> Lease | None:
        """Take (or renew) the job's lease; None while someone else holds a live one."""
        key = f"jobs/{job}/lease"
        for _ in range(CAS_TRIES):
            doc, version = self.store.get_versioned(key)
            held = Lease.from_json(job, doc)
            if (
                held is not None
                and held.holder not in ("", holder)
                and held.expires_at > now
                and not holder_dead(held.holder)
            ):
                return None
            since = held.since if held is not None and held.holder == holder else None
            lease = Lease(
                job,
                holder,
                now + timedelta(seconds=ttl_s),
                held.last_run_at if held else None,
                current_user(),
                since or now,  # a renewal keeps when the holder took it
            )
            if self.store.put_if(key, lease.to_json(), version) is not None:
                return lease
            # another watcher wrote in between: read again (it may hold it now)
        return None

    def release(self, job: str, holder: str, now: datetime, ran: bool = False) -> None:
        """Give the lease up (only our own); `ran` records that the job was handled now."""
        key = f"jobs/{job}/lease"
        for _ in range(CAS_TRIES):
            doc, version = self.store.get_versioned(key)
            held = Lease.from_json(job, doc)
            if held is None or held.holder != holder:
                return
            free = Lease(job, "", now, now if ran else held.last_run_at)
            if self.store.put_if(key, free.to_json(), version) is not None:
                return

    def current(self, job: str) -> Lease | None:
        return Lease.from_json(job, self.store.get(f"jobs/{job}/lease"))

    # --- journals --------------------------------------------------------------------------

    def open_journal(self, job: str) -> Journal | None:
        data = self.store.get(f"jobs/{job}/journal")
        if data is None:
            return None
        journal = Journal.from_json(data)
        return journal if journal.outcome == "open" else None

    def write_journal(self, journal: Journal) -> None:
        doc = journal.to_json()
        if journal.outcome == "open":
            self.store.put(f"jobs/{journal.job}/journal", doc)
            return
        # Closed: archive first, then drop the open one. A kill in between leaves the open copy
        # one step short; recovery runs that last step again (it is idempotent) and closes it.
        self.store.put(f"jobs/{journal.job}/journals/{journal.id}", doc)
        self.store.delete(f"jobs/{journal.job}/journal")

    def closed_journals(self, job: str) -> list[Journal]:
        found = []
        for doc in self.store.list(f"jobs/{job}/journals/").values():
            try:
                found.append(Journal.from_json(doc))
            except (KeyError, TypeError, ValueError):
                continue
        return sorted(found, key=lambda j: j.created_at)

    # --- decisions and watch state ---------------------------------------------------------

    def append_decision(self, job: str, record: dict[str, Any]) -> None:
        record_decision(self.store, job, record)

    def decisions(self, job: str) -> list[dict[str, Any]]:
        return decision_history(self.store, job)

    def last_decision(
        self, job: str, skip: tuple[str, ...] = ("outcome",)
    ) -> dict[str, Any] | None:
        """The newest decision whose action is not in `skip`, reading from the newest back
        (route status lists many jobs: it must not read every job's whole history)."""
        for key in reversed(self.store.keys(f"decisions/{job}/")):
            doc = self.store.get(key)
            if doc is not None and doc.get("action") and doc.get("action") not in skip:
                return doc
        return None

    def read_state(self, job: str) -> dict[str, Any]:
        return self.store.get(f"jobs/{job}/state") or {}

    def write_state(self, job: str, state: dict[str, Any]) -> None:
        self.store.put(f"jobs/{job}/state", state)

    def jobs(self) -> list[str]:
        """Every job with records here (journal, state or lease)."""
        return sorted({k.split("/")[1] for k in self.store.keys("jobs/") if k.count("/") >= 2})


@contextmanager
def holding_lease(
    records: JobRecords, job: str, holder: str, ttl_s: float = LEASE_TTL_S
) -> Iterator[Lease | None]:
    """Hold the job's lease for the block, renewed every ttl_s/3 s from a thread; yields None
    (and holds nothing) while another router holds a live one."""
    lease = records.acquire(job, holder, ttl_s, datetime.now(UTC))
    if lease is None:
        yield None
        return
    done = threading.Event()

    def renew() -> None:  # a long engine call must not let the lease expire under it
        while not done.wait(ttl_s / 3):
            try:
                records.acquire(job, holder, ttl_s, datetime.now(UTC))
            except Exception:  # the store unreachable for a moment: the next renewal tries again
                continue

    renewer = threading.Thread(target=renew, name=f"lease-{job}", daemon=True)
    renewer.start()
    try:
        yield lease
    finally:
        done.set()
        renewer.join()
        records.release(job, holder, datetime.now(UTC))
