"""What a placement's nodes said as the job ended there, read from its checkpoint storage.

Each node leaves `exit-<node>.json` when its start-up script ends and `boot-<node>.json` each
time it starts (components/node_exit.py; a local node writes its exit record itself,
components/local_node.py). router.core.node_exit reads them: the exits of this placement (its
group where the node names one, else since it was deployed), minus those a newer boot of the
same node superseded. `route watch` asks whether the job crashed or finished there; a move's
resume-confirmed asks whether the new placement's job ended before it resumed; when a finished
job ended (`finished_at`, for route report's bill) and whether a group that never formed blocks
its zone (`block_if_unformed`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime
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


def finished_at(
    done: dict[str, Any] | None, exits: Sequence[Any], deployed_at: datetime, now: datetime
) -> datetime:
    """When a finished job ended on its placement: its finished record's time, else its nodes'
    last exit, else now — never before the placement began nor after now (a node's clock)."""
    at: datetime | None = None
    if done is not None and done.get("time"):
        with contextlib.suppress(TypeError, ValueError):
            at = datetime.fromisoformat(str(done["time"]).replace("Z", "+00:00"))
    if at is None:
        at = max((e.at for e in exits if e.at is not None), default=None)
    if at is None:
        return now
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return min(max(at, deployed_at), now)


def block_if_unformed(record: dict[str, Any], exits: list[Any], now: datetime) -> None:
    """A group that never formed (EXIT_GROUP_NOT_FORMED) blocks its zone as a refused launch
    does, so the re-placement goes elsewhere; once, not again while that block stands."""
    from router.config.blocks import updating_blocks
    from router.config.home import spotroute_home
    from router.core.failover import block_after, blocking, group_not_formed
    from router.core.node_exit import unformed_of

    why = unformed_of(exits)
    if why is None:
        return
    cloud, region = str(record.get("cloud") or ""), str(record.get("region") or "")
    zone = record.get("zone") or None
    with updating_blocks(spotroute_home(), now) as blocks:
        if blocking(blocks, cloud, region, zone, now) is None:
            failure = group_not_formed(cloud, why)
            blocks.append(block_after(failure, cloud, region, zone, blocks, now))
