"""The local target's nodes seen from outside: liveness, stopping, records, the market's checks.

A node is a process group (components/local_node.py is its leader; the start-up script and the
job are its members), so stopping one is stopping a machine: SIGTERM to the node, which passes
it on to the job and records how the job ended; after the grace period SIGKILL to the whole
group. Every node keeps its record in its directory (`node.json`) and a copy in the live index
`.running/` beside the sandboxes (router/contract/local_node.py): the local market counts
capacity and quota there, and `route destroy` finds there the nodes the engine lost track of.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from datetime import datetime
from pathlib import Path

from router.contract.local_market import LocalMarket
from router.contract.local_node import (
    RECLAIM_FILE,
    RUNNING_DIR,
    STATE_FILE,
    NodeRecord,
    launch_dir_of,
    legacy_process_of,
)

STOP_GRACE_S = 10.0  # SIGTERM first so the job can write a last checkpoint, then SIGKILL
_POLL_S = 0.05


# --- processes ----------------------------------------------------------------------------------


def free_port() -> int:
    """A loopback TCP port no one listens on now: a group's master port. Cloud nodes of a group
    each have their own address and use torchrun's default; local groups share one host."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stat(pid: int) -> list[str] | None:
    """Fields 3… of /proc/<pid>/stat (state first); None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (guards against PID reuse)."""
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X"):  # zombie or dead: finished, not yet reaped
        return None
    return int(fields[19])


def process_alive(pid: int, ticks: int) -> bool:
    """True while the process started by the local target is running."""
    return pid > 0 and start_ticks(pid) == ticks


def group_members(pgid: int) -> list[int]:
    """Live processes of process group `pgid` (a node and everything it started)."""
    found = []
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            fields = _stat(int(entry.name))
            if fields is not None and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
                found.append(int(entry.name))
    return found


def descendants(roots: list[int]) -> list[int]:
    """Live processes started, directly or not, by `roots`, in any session."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            fields = _stat(int(entry.name))
            if fields is not None and fields[0] not in ("Z", "X"):
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def machine_processes(pgid: int) -> list[int]:
    """Everything running on a node: its process group and what that started in other sessions
    (torchrun starts each worker in a session of its own, so a process group is not a machine)."""
    members = group_members(pgid)
    return sorted({*members, *descendants(members)})


def stop_nodes(nodes: list[tuple[int, int]], grace_s: float = STOP_GRACE_S) -> tuple[float, bool]:
    """Stop nodes (pid, start ticks) as machines stop: SIGTERM to each node at once (it passes
    it to its job), SIGKILL to everything still running on a node after `grace_s`. (seconds
    until all was gone, whether SIGKILL was needed)."""
    started = time.monotonic()
    # (pid, start ticks) of every process seen on each node: a worker whose parent is gone is
    # no longer a descendant, but it still runs on that machine.
    seen: dict[int, set[tuple[int, int]]] = {pid: set() for pid, _t in nodes}

    def running(node: int) -> bool:
        for pid in machine_processes(node):
            ticks = start_ticks(pid)
            if ticks is not None:
                seen[node].add((pid, ticks))
        return any(process_alive(pid, ticks) for pid, ticks in seen[node])

    for pid, _t in nodes:
        running(pid)  # before the notice: what it started, while its parents still live
    for pid, ticks in nodes:
        if process_alive(pid, ticks):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    # A node already gone may have left its job running (a SIGKILLed node): its group counts.
    left = [pid for pid, _t in nodes if running(pid)]
    while left and time.monotonic() - started < grace_s:
        time.sleep(_POLL_S)
        left = [pid for pid in left if running(pid)]
    if not left:
        return time.monotonic() - started, False
    for node in left:
        running(node)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(node, signal.SIGKILL)
        for pid, ticks in seen[node]:
            if process_alive(pid, ticks):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while any(running(pid) for pid in left) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    return time.monotonic() - started, True


def stop_node(pid: int, ticks: int, grace_s: float = STOP_GRACE_S) -> tuple[float, bool]:
    """stop_nodes for one node."""
    return stop_nodes([(pid, ticks)], grace_s)


# --- records ------------------------------------------------------------------------------------


def running_dir(sandbox_dir: str) -> Path:
    """The live index: beside the job sandboxes, every local node of this spotroute home."""
    return Path(sandbox_dir).parent / RUNNING_DIR


def write_text_atomic(path: Path, text: str) -> None:
    """`text` into `path` whole: a reader sees the old file or the new one, never half of one."""
    staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    staged.write_text(text)
    staged.replace(path)


def index_entry(running: Path, record: NodeRecord) -> Path:
    return running / f"{record.pid}-{record.start_ticks}.json"


def write_record(record: NodeRecord, running: Path) -> None:
    """The node's record in its directory and, while it lives, in the live index."""
    text = record.to_text()
    write_text_atomic(Path(record.node_dir) / STATE_FILE, text)
    running.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_text_atomic(index_entry(running, record), text)


def read_record(path: Path) -> NodeRecord | None:
    try:
        return NodeRecord.from_text(path.read_text())
    except (OSError, ValueError):
        return None


def live_records(running: Path) -> list[NodeRecord]:
    """The nodes that run now (entries of nodes that are gone are removed)."""
    found = []
    if not running.is_dir():
        return []
    for entry in sorted(running.glob("*.json")):
        record = read_record(entry)
        if record is None or not process_alive(record.pid, record.start_ticks):
            entry.unlink(missing_ok=True)
            continue
        found.append(record)
    return found


def nodes_of_job(running: Path, job: str, placement: str | None = None) -> list[NodeRecord]:
    """Live nodes of `job` (of its placement `placement` only, when given)."""
    return [
        r
        for r in live_records(running)
        if r.job == job and (placement is None or r.placement == placement)
    ]


def group_records(group: str) -> list[tuple[Path, NodeRecord | None]]:
    """(node directory, its record or None) for each node of a `local-group:` id."""
    launch = launch_dir_of(group)
    if launch is None:
        return []
    root = Path(launch)
    dirs = sorted(
        (d for d in root.glob("node-*") if d.is_dir()), key=lambda d: int(d.name.split("-")[1])
    )
    return [(d, read_record(d / STATE_FILE)) for d in dirs]


def group_alive(group: str) -> bool:
    """True while any node of the group (either id format) runs."""
    legacy = legacy_process_of(group)
    if legacy is not None:
        return process_alive(*legacy)
    return any(
        r is not None and process_alive(r.pid, r.start_ticks) for _d, r in group_records(group)
    )


def stop_group(group: str, grace_s: float = STOP_GRACE_S) -> tuple[float, bool]:
    """Stop every node of the group (either id format) together; (seconds, SIGKILL needed)."""
    legacy = legacy_process_of(group)
    if legacy is not None:
        return stop_node(*legacy, grace_s=grace_s)
    return stop_nodes([(r.pid, r.start_ticks) for _d, r in group_records(group) if r], grace_s)


def mark_reclaimed(node_dir: Path, by: str, at: datetime, notice_s: float) -> None:
    """Say, as the cloud would, that the node is being taken back (before it is stopped)."""
    import json

    text = json.dumps({"by": by, "at": at.isoformat(), "notice_s": notice_s})
    write_text_atomic(node_dir / RECLAIM_FILE, text)


# --- the local market: capacity, quota and spot price, checked at launch as the clouds do --------


def check_launch(
    running: Path,
    market: LocalMarket | None,
    *,
    region: str,
    kind: str,
    max_price: float,
    nodes: int,
    gpus_per_node: int,
    now: datetime,
) -> None:
    """Refuse a launch the local market cannot take, with a cloud-style error code.

    Codes (router.core.failover knows them): LocalCapacityExhausted — the region offers no such
    market now or has fewer free nodes than the group needs; LocalQuotaExceeded — the region's
    GPU quota would be exceeded (as GCP's `Quota 'NVIDIA_A100_GPUS' exceeded`); LocalSpotPriceTooLow
    — the spot price is above the job's cap (spotroute:maxPrice), as AWS's SpotMaxPriceTooLow.
    """
    if market is None:
        return
    row = market.at(now).get((region, kind))
    if row is None or row.capacity <= 0:
        raise RuntimeError(
            f"LocalCapacityExhausted: local region {region} has no {kind} capacity now; "
            "try another region or market"
        )
    live = live_records(running)
    used = sum(1 for r in live if (r.region, r.market) == (region, kind))
    if used + nodes > row.capacity:
        raise RuntimeError(
            f"LocalCapacityExhausted: local region {region} has no {kind} capacity left for "
            f"{nodes} node(s) ({used} of {row.capacity} in use); try another region or market"
        )
    quota = market.behaviour.quota_in(region)
    if quota is not None:
        in_use = sum(r.gpus for r in live if r.region == region)
        wanted = nodes * gpus_per_node
        if in_use + wanted > quota:
            raise RuntimeError(
                f"LocalQuotaExceeded: local region {region} GPU quota {quota}: {in_use} in use, "
                f"{wanted} more asked; request more quota (local_market.quota) or use another "
                "region"
            )
    if kind == "spot" and 0 < max_price < row.price_per_hour:
        raise RuntimeError(
            f"LocalSpotPriceTooLow: your spot price cap ${max_price:g}/h is below the current "
            f"spot price ${row.price_per_hour:g}/h in local region {region}"
        )
