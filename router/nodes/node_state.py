"""What a node poller answers: `Node`, `NodeState` and the `NodePoller` shape, for every cloud.

The cloud modules (aws.py, gcp.py, azure.py, local.py) import these; the registry
(sources.py) imports the cloud modules. Imports point one way: registry → cloud → this module.
"""

from __future__ import annotations

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
