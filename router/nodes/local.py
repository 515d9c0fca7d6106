"""The local target: the nodes of a local group (a stack's `groupId`), from their own records.

Each local node (components/local_node.py) writes its record (`node.json`, router/contract/
local_node.py) in its directory at every phase; this reads them as a cloud's poller reads its
API. booting → starting (the cloud has not said "running" yet); pulling and running → running
(the machine runs; the image pull and the job are the start-up script's); exited → lost, with
the exit status; a node whose process is gone without an exit record was killed (its machine
went away) → lost. `reclaimed` when the local cloud took it back (`route preempt`, the local
market withdrawing spot capacity): the node's `reclaim.json`, as a cloud's own word on it.
"""

from __future__ import annotations

from pathlib import Path

from components.local_nodes import group_records, process_alive
from router.contract.local_node import (
    BOOTING,
    EXITED,
    RECLAIM_FILE,
    NodeRecord,
    launch_dir_of,
    legacy_process_of,
)
from router.core.errors import BadInput
from router.nodes.node_state import LOST, RUNNING, STARTING, Node, NodeState


def poll(group_id: str, region: str) -> NodeState:
    """The group's nodes now (either id format: `local-group:…` or `local-process:…`)."""
    legacy = legacy_process_of(group_id)
    if legacy is not None:  # one process of an older stack, no records
        alive = process_alive(*legacy)
        node = Node(f"pid {legacy[0]}", RUNNING if alive else LOST, "running" if alive else "gone")
        return NodeState("local", group_id, 1, (node,))
    if launch_dir_of(group_id) is None:
        raise BadInput(
            f"groupId {group_id!r}: not a local group — expected local-group:<launch directory>"
        )
    found = group_records(group_id)
    if not found:
        return NodeState("local", group_id, 0, gone=True)
    wanted = max((r.nodes for _d, r in found if r is not None), default=len(found))
    return NodeState("local", group_id, wanted, tuple(_node(d, r) for d, r in found))


def _node(node_dir: Path, record: NodeRecord | None) -> Node:
    name = node_dir.name
    reclaimed = (node_dir / RECLAIM_FILE).is_file()
    if record is None:
        return Node(name, LOST, "no record (the node never started)", reclaimed)
    if record.phase == EXITED:
        detail = f"exited with status {record.exit_status}"
        if record.detail:
            detail += f" ({record.detail})"
        return Node(name, LOST, detail, reclaimed or record.reclaimed)
    if not process_alive(record.pid, record.start_ticks):
        return Node(name, LOST, f"gone while {record.phase} (killed)", reclaimed)
    detail = record.phase + (f" ({record.detail})" if record.detail else "")
    return Node(name, STARTING if record.phase == BOOTING else RUNNING, detail)
