"""The backend's stack locks: who holds one, whether that holder is provably dead, clearing it.

Pulumi's DIY backend writes a lock per running update at
`.pulumi/locks/organization/<project>/<stack>/<uuid>.json` holding the CLI's pid, user, host and
start time (plus an `.attrs` sidecar on some storage drivers). A `kill -9` of `route` leaves it
behind, and every later update of that stack fails with "currently locked". spotroute reads these
locks to say who holds one, and clears a lock whose holder is provably dead: same host, and no
live `pulumi` process with that pid that started before the lock was taken.

`StackLocks` is what the engine needs of a backend; `FileStackLocks` reads file:// state,
router.engine.remote_locks the same keys as S3 objects or PostgreSQL rows. A backend without a
reader (gs://, azblob://) still gets `route unlock`, through `pulumi cancel`, which removes the
stack's locks on every DIY backend.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

LOCKS_DIR = Path(".pulumi") / "locks" / "organization"


@dataclass(frozen=True)
class StackLock:
    """One lock on a stack, as the backend stores it."""

    stack: str
    pid: int
    username: str
    hostname: str
    since: datetime | None  # UTC; None when the lock's timestamp is unreadable
    key: str  # where the backend keeps it (a path for file://)

    def holder(self) -> str:
        """`alice@build-7 (pid 4242) since 2026-12-01 11:07:02 UTC`."""
        when = f" since {self.since:%Y-%m-%d %H:%M:%S} UTC" if self.since else ""
        return f"{self.username}@{self.hostname} (pid {self.pid}){when}"

    def provably_dead(self, *, hostname: str | None = None) -> bool:
        """True when the holder ran on this host and its process is gone (or is another one)."""
        if self.pid <= 0:
            return False  # unreadable lock: nothing proves its holder is gone
        if self.hostname != (hostname or socket.gethostname()):
            return False  # another machine: it may be deploying right now
        return not pulumi_process_alive(self.pid, since=self.since)


class StackLocks(Protocol):
    """Reading and removing a backend's stack locks."""

    def held(self, stack: str) -> list[StackLock]: ...

    def locked_stacks(self) -> list[str]: ...

    def remove(self, lock: StackLock) -> None: ...


@dataclass(frozen=True)
class FileStackLocks:
    """Locks of a file:// backend rooted at `state_dir`, for one Pulumi project."""

    state_dir: Path
    project: str

    def held(self, stack: str) -> list[StackLock]:
        directory = self.state_dir / LOCKS_DIR / self.project / stack
        try:
            names = sorted(p for p in directory.iterdir() if p.suffix == ".json")
        except OSError:
            return []
        return [_parse(stack, p) for p in names]

    def locked_stacks(self) -> list[str]:
        """Every stack name with a lock, including stacks removed since (their lock dir stays)."""
        root = self.state_dir / LOCKS_DIR / self.project
        try:
            dirs = sorted(p for p in root.iterdir() if p.is_dir())
        except OSError:
            return []
        return [d.name for d in dirs if self.held(d.name)]

    def remove(self, lock: StackLock) -> None:
        path = Path(lock.key)
        for p in (path, path.with_name(path.name + ".attrs")):
            p.unlink(missing_ok=True)


def repair_interrupted_writes(state_dir: Path) -> list[Path]:
    """Remove the empty `.attrs` sidecars a killed CLI leaves in a file:// backend; returns them.

    The storage driver writes a blob's attributes next to it before renaming the blob into
    place; a CLI killed in between leaves a 0-byte `<stack>.json.attrs`, and every later
    `pulumi stack ls` fails with "EOF". A missing sidecar is read as "no attributes", so
    removing an empty one loses nothing.
    """
    removed = []
    root = state_dir / ".pulumi"
    try:
        candidates = list(root.rglob("*.attrs"))
    except OSError:
        return []
    for path in candidates:
        try:
            if path.is_file() and path.stat().st_size == 0:
                path.unlink()
                removed.append(path)
        except OSError:
            continue
    return removed


def stack_locks_for(backend_url: str, project: str) -> StackLocks | None:
    """The lock reader of a backend, or None when spotroute cannot read that backend's locks."""
    if backend_url.startswith("file://"):
        return FileStackLocks(Path(backend_url.removeprefix("file://")).expanduser(), project)
    from router.engine.remote_locks import remote_stack_locks

    return remote_stack_locks(backend_url, project)


def _parse(stack: str, path: Path) -> StackLock:
    try:
        body: bytes | None = path.read_bytes()
    except OSError:
        body = None
    return parse_lock(stack, body, str(path))


def parse_lock(stack: str, body: bytes | None, key: str) -> StackLock:
    """A lock from the JSON the CLI wrote (`lockContent` in pkg/backend/diy/lock.go)."""
    try:
        data = json.loads(body or b"")
        pid = int(data.get("pid", 0))
    except (ValueError, TypeError, AttributeError):
        # Unreadable: still a lock (the CLI refuses to update); show it as unknown, never dead.
        return StackLock(stack, 0, "?", "?", None, key)
    return StackLock(
        stack=stack,
        pid=pid,
        username=str(data.get("username", "?"))[:64],
        hostname=str(data.get("hostname", "?"))[:128],
        since=_timestamp(data.get("timestamp")),
        key=key,
    )


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    text = value.strip().replace("Z", "+00:00")
    # Go writes nanoseconds; Python's fromisoformat takes at most microseconds.
    head, dot, rest = text.partition(".")
    if dot:
        digits = "".join(c for c in rest if c.isdigit())
        text = f"{head}.{digits[:6]}{rest[len(digits) :]}"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def pulumi_process_alive(pid: int, *, since: datetime | None = None) -> bool:
    """Whether `pid` is a live pulumi process that could be the one that took a lock `since`."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: cannot prove anything
    proc = Path("/proc") / str(pid)
    try:
        cmdline = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (macOS): a live pid is taken as the holder
    if not cmdline or b"pulumi" not in Path(cmdline[0].decode(errors="replace")).name.encode():
        return False  # the pid was reused by something else
    if since is not None:
        started = _process_start(proc)
        if started is not None and started > since.timestamp() + 2:
            return False  # a newer pulumi that happens to have the same pid
    return True


def _process_start(proc: Path) -> float | None:
    """Start time of a process in Unix seconds (Linux /proc)."""
    try:
        stat = (proc / "stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")
