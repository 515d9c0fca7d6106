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
from dataclasses import dataclass, field
from typing import Any, Protocol

# A node is one of these, whatever the cloud calls it.
RUNNING, STARTING, LOST = "running", "starting", "lost"


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a group as the cloud reports it."""

    id: str
    status: str  # RUNNING | STARTING | LOST
    detail: str  # the cloud's own words: "terminated (Server.SpotInstanceTermination)"
    reclaimed: bool = False  # the cloud says it took the node back (spot preemption/eviction)


@dataclass(frozen=True, slots=True)
class NodeState:
    """What the cloud says of a placement's group now."""

    cloud: str
    group_id: str
    wanted: int  # nodes the group should have
    nodes: tuple[Node, ...] = field(default_factory=tuple)
    gone: bool = False  # the group itself no longer exists

    @property
    def running(self) -> int:
        return sum(1 for n in self.nodes if n.status == RUNNING)

    @property
    def interrupted(self) -> bool:
        """A node was lost (or never came back): the job cannot go on where it is."""
        if self.gone or any(n.status == LOST for n in self.nodes):
            return True
        present = sum(1 for n in self.nodes if n.status in (RUNNING, STARTING))
        return present < self.wanted

    @property
    def reason(self) -> str:
        """One line for the decision record: which nodes, and what the cloud said."""
        if self.gone:
            return f"{self.cloud}: group {self.group_id} no longer exists"
        lost = [n for n in self.nodes if n.status == LOST]
        if lost:
            what = "reclaimed by the cloud" if any(n.reclaimed for n in lost) else "lost"
            return f"{self.cloud}: {len(lost)} of {self.wanted} nodes {what}: " + "; ".join(
                f"{n.id} {n.detail}" for n in lost[:3]
            )
        present = sum(1 for n in self.nodes if n.status in (RUNNING, STARTING))
        if present < self.wanted:
            return f"{self.cloud}: {present} of {self.wanted} nodes present"
        return f"{self.cloud}: {self.running} of {self.wanted} nodes running"

    def to_json(self) -> dict[str, Any]:
        return {
            "cloud": self.cloud,
            "group_id": self.group_id,
            "wanted": self.wanted,
            "running": self.running,
            "interrupted": self.interrupted,
            "reason": self.reason,
            "nodes": [
                {"id": n.id, "status": n.status, "detail": n.detail, "reclaimed": n.reclaimed}
                for n in self.nodes
            ],
        }


class NodePoller(Protocol):
    """One cloud's node states: the group `group_id` (a stack's `groupId`) in `region`."""

    def __call__(self, group_id: str, region: str) -> NodeState: ...


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
