"""What a placement's nodes said as the job ended there, read from its checkpoint storage.

Each node leaves `exit-<node>.json` when its start-up script ends and `boot-<node>.json` each
time it starts (components/node_exit.py; a local node writes its exit record itself,
components/local_node.py). router.core.node_exit reads them: the exits of this placement (its
group where the node names one, else since it was deployed), minus those a newer boot of the
same node superseded. `route watch` asks whether the job crashed or finished there; a move's
resume-confirmed asks whether the new placement's job ended before it resumed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from router.config import checkpoints as ckpt
from router.core.node_exit import NodeExit, crash_of, exits_of


def placement_exits(outputs: dict[str, Any], placement: str, since: datetime) -> list[NodeExit]:
    """The placement's node exits (stack `placement`, its stack outputs); storage that cannot be
    read is no exit (the cloud's own signals still speak)."""
    url = str(outputs.get("checkpointUrl") or "")
    if not url:
        return []
    try:
        exits, boots = ckpt.node_records(ckpt.checkpoint_store(url))
    except ckpt.CheckpointStorageError:
        return []
    return exits_of(exits, placement, since, group=str(outputs.get("groupId") or ""), boots=boots)


def exits_and_crash(
    record: dict[str, Any], deployed_at: datetime, seen_nodes: dict[str, Any] | None
) -> tuple[list[NodeExit], str | None]:
    """A placement record's node exits and, if they show one, the crash (router.core.node_exit:
    a crash unless the cloud said it took a node back)."""
    stack = str(record.get("stack") or record.get("job") or "")
    exits = placement_exits(record.get("outputs") or {}, stack, deployed_at)
    reclaimed = any(n.get("reclaimed") for n in (seen_nodes or {}).get("nodes") or [])
    return exits, crash_of(exits, reclaimed)
