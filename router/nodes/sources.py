"""Node pollers: one module per cloud (aws.py, gcp.py, azure.py, local.py) behind one shape.

Each cloud's module has `poll(group_id, region, ...) -> NodeState`: it asks the cloud's API
(through the real SDK) what became of the nodes of the group the placement's stack created
(stack output `groupId`: an EC2 Fleet id, a GCE managed instance group, an Azure VM scale
set; a local group's launch directory) and says whether the cloud reclaimed any. `route watch`
feeds `interrupted` into decide() as an interruption, exactly like the checkpoint library's
marker; `route migrate` waits for a new placement's nodes to run. `POLLERS` imports a cloud's
module (and its SDK) only when that cloud's job is polled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from router.nodes.node_state import NodeState


def _aws(group_id: str, region: str) -> NodeState:
    from router.nodes import aws

    return aws.poll(group_id, region)


def _gcp(group_id: str, region: str) -> NodeState:
    from router.nodes import gcp

    return gcp.poll(group_id, region)


def _azure(group_id: str, region: str) -> NodeState:
    from router.nodes import azure

    return azure.poll(group_id, region)


def _local(group_id: str, region: str) -> NodeState:
    from router.nodes import local

    return local.poll(group_id, region)


POLLERS: dict[str, Callable[[str, str], NodeState]] = {
    "aws": _aws,
    "gcp": _gcp,
    "azure": _azure,
    "local": _local,
}


def poll_placement(
    record: dict[str, Any], pollers: dict[str, Callable[[str, str], NodeState]] | None = None
) -> NodeState | None:
    """The cloud's view of a placement record's nodes; None when it has no group id."""
    poller = (pollers or POLLERS).get(str(record.get("cloud")))
    group_id = str((record.get("outputs") or {}).get("groupId") or "")
    if poller is None or not group_id:
        return None
    return poller(group_id, str(record.get("region") or ""))
