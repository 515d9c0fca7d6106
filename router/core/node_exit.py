"""Pure: what a placement's nodes said when they stopped running the job, and whether that was a
crash (stop paying for it) or a preemption (re-place it).

Each node's start-up script writes `exit-<node>.json` next to the checkpoints when the job (or
the script) ends (components/node_exit.py): the exit status and whether the checkpoint library
left its interruption marker on the node, i.e. saved on a notice and exited. The rule, per exit
of the placement's own run:

  interruption marker          preempted (whatever the status: torchrun turns a worker's 75
                               into its own 1)
  status 0                     exited: finished or handed over
  status 75                    preempted (EX_TEMPFAIL: saved, resume me)
  status 137 or 143            killed by SIGKILL / SIGTERM with no marker: the machine going
                               away without a notice the job saw (or the OOM killer) — not
                               taken for a crash
  status 69                    unformed (EXIT_GROUP_NOT_FORMED): the node's group never formed
                               — its storage stayed unwritable, or a peer never came. The place
                               failed, not the job: re-place it elsewhere and block the zone
                               (router/core/failover.group_not_formed), never a crash
  any other status             crashed: the job (or the script before it) failed by itself

A placement crashed when one of its nodes crashed and the cloud did not itself say it took a
node back (EC2 `Server.SpotInstanceTermination`, GCE `compute.instances.preempted`, an Azure
Spot VM deallocated by eviction: router/nodes/) — a reclaim can kill a job in odd ways.

An exit counts only while the node has not booted again since: each boot the script writes
`boot-<node>.json`, and a VM that restarts and resumes the job by itself (GCE host maintenance of
an on-demand VM: automatic restart, the start-up script runs at every boot) leaves a boot newer
than its exit — that exit is over, the node runs the job again. A local node's exit names its
group (its launch directory), which tells its placement apart from any other without a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from router.contract.stack_config import EXIT_GROUP_NOT_FORMED

Outcome = Literal["exited", "preempted", "killed", "unformed", "crashed"]
EXIT_PREEMPTED = 75
KILLED_STATUSES = (137, 143)  # 128 + SIGKILL, 128 + SIGTERM (docker, bash)
EXIT_FORMAT = "spotroute-exit/1"
BOOT_FORMAT = "spotroute-boot/1"


@dataclass(frozen=True, slots=True)
class NodeExit:
    """One node's word on how the job ended there."""

    node: str
    status: int
    marker: bool  # the library saved on a notice and exited
    placement: str  # the stack that ran it
    at: datetime | None
    group: str = ""  # the group it belonged to, where the node says (the local target)

    @property
    def outcome(self) -> Outcome:
        """exited | preempted | killed | crashed, by the rule in the module docstring."""
        if self.marker or self.status == EXIT_PREEMPTED:
            return "preempted"
        if self.status == 0:
            return "exited"
        if self.status in KILLED_STATUSES:
            return "killed"
        if self.status == EXIT_GROUP_NOT_FORMED:
            return "unformed"
        return "crashed"

    def describe(self) -> str:
        if self.outcome == "unformed":
            return f"node {self.node}: its group did not form (status {self.status})"
        marker = "with" if self.marker else "no"
        return f"node {self.node} exited with status {self.status} ({marker} interruption marker)"


def parse_exit(record: Mapping[str, Any]) -> NodeExit | None:
    """A record the nodes wrote, or None for anything else (another format, damaged)."""
    if record.get("format") != EXIT_FORMAT:
        return None
    try:
        status = int(record["status"])
        at = datetime.fromisoformat(str(record["time"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return None
    marker = record.get("interruption_marker") is True
    return NodeExit(str(record.get("node") or "?"), status, marker,
                    str(record.get("placement") or ""), at,
                    str(record.get("group") or ""))  # fmt: skip


@dataclass(frozen=True, slots=True)
class NodeBoot:
    """One node's word that its start-up script ran (again): it runs the job from then on."""

    node: str
    placement: str
    at: datetime


def parse_boot(record: Mapping[str, Any]) -> NodeBoot | None:
    """A boot record the nodes wrote, or None for anything else."""
    if record.get("format") != BOOT_FORMAT:
        return None
    try:
        at = datetime.fromisoformat(str(record["time"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return None
    return NodeBoot(str(record.get("node") or "?"), str(record.get("placement") or ""), at)


def exits_of(
    records: Iterable[Mapping[str, Any]],
    placement: str,
    since: datetime,
    *,
    group: str = "",
    boots: Iterable[Mapping[str, Any]] = (),
) -> list[NodeExit]:
    """This placement's exits: of its group where the node names one, else since it was deployed
    (a redeploy of the same stack starts over); minus those a newer boot of the node superseded."""
    found = [e for r in records if (e := parse_exit(r)) is not None]
    mine = [e for e in found
            if (e.group == group if e.group and group else
                e.placement in ("", placement) and e.at is not None and e.at >= since)]  # fmt: skip
    booted = [b for r in boots if (b := parse_boot(r)) and b.placement in ("", placement)]
    return [e for e in mine if not any(b.node == e.node and e.at is not None and b.at > e.at
                                       for b in booted)]  # fmt: skip


def crash_of(exits: Iterable[NodeExit], reclaimed_by_cloud: bool) -> str | None:
    """Why the placement crashed (one line), or None: not a crash."""
    if reclaimed_by_cloud:
        return None
    crashed = [e for e in exits if e.outcome == "crashed"]
    if not crashed:
        return None
    more = f" (+{len(crashed) - 1} more node(s))" if len(crashed) > 1 else ""
    return crashed[0].describe() + more


def unformed_of(exits: Iterable[NodeExit]) -> str | None:
    """Why the placement's group never formed (one line), or None; a crash is asked first."""
    unformed = [e for e in exits if e.outcome == "unformed"]
    if not unformed:
        return None
    more = f" (+{len(unformed) - 1} more node(s))" if len(unformed) > 1 else ""
    return unformed[0].describe() + more


def all_exited(exits: Iterable[NodeExit]) -> bool:
    """True when nodes said so and every one exited 0: the job ended there by itself."""
    seen = list(exits)
    return bool(seen) and all(e.outcome == "exited" for e in seen)
