"""A local node's records: what the local target's node processes write and the router reads.

The local target runs a group of `nodes` node processes per placement (components/local.py),
each in its own directory, as separate machines would be: `<launch dir>/node-<i>/`. A node
(components/local_node.py) goes booting → pulling → running → exited and writes its record
(`NodeRecord`, JSON) at each phase to `node.json` in its directory, and a copy to the live index
`<sandbox root>/.running/<pid>-<start ticks>.json` that the local market counts capacity and
quota from and `route destroy` finds processes the engine lost track of in. The router's local
node poller (router/nodes/local.py) reads `node.json` — as a cloud's poller reads its API.

The placement's group id (stack output `groupId`) names the launch directory:
`local-group:<launch dir>`. Stacks deployed before groups existed have `local-process:<pid>:
<start ticks>` (one process, no records); both are understood.

Pure: standard library only, no files (the callers read and write them).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

BOOTING, PULLING, RUNNING, EXITED = "booting", "pulling", "running", "exited"
PHASES = (BOOTING, PULLING, RUNNING, EXITED)
GROUP_PREFIX = "local-group:"
LEGACY_PREFIX = "local-process:"
STATE_FILE = "node.json"  # the node's record, in its directory
SPEC_FILE = "spec.json"  # what the node plays (timings, where to write), no secrets
SCRIPT_FILE = "startup.sh"  # the start-up script the clouds render, with local substitutions
LOG_FILE = "job.log"  # the script's and the job's output
RECLAIM_FILE = "reclaim.json"  # written by whoever takes the node away as a cloud would
RUNNING_DIR = ".running"  # beside the job sandboxes: one record per live node

# Test hook shared with router.engine.processes: `deploy:node-started:KILL` makes the local
# target SIGKILL the route command (OWNER_ENV) right after a group's node processes started —
# the moment a kill -9 used to leak the group (issue 24 item 2).
SIGNAL_HOOK_ENV = "SPOTROUTE_TEST_SIGNAL_AT"
NODE_STARTED_KILL = "deploy:node-started:KILL"
OWNER_ENV = "SPOTROUTE_ROUTE_PROCESS"  # "<pid>:<start ticks>" of the route command


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node of a local group: who it is, where it runs, which phase it is in."""

    job: str
    placement: str  # the stack
    node: int  # 0-based index in the group
    nodes: int  # the group's size
    pid: int
    start_ticks: int  # /proc start time: a pid reused by another process is not this node
    phase: str  # BOOTING | PULLING | RUNNING | EXITED
    region: str
    market: str
    gpus: int  # GPUs this node stands for (the local market's quota counts them)
    node_dir: str
    since: dict[str, str] = field(default_factory=dict)  # phase → ISO time it began
    exit_status: int | None = None  # set in EXITED: the start-up script's status
    reclaimed: bool = False  # the local cloud took it away (route preempt, the market)
    detail: str = ""  # one line: why it exited, what it pulls

    def at(self, phase: str, when: str, **changes: Any) -> NodeRecord:
        """This record in `phase` from `when` (ISO time) on."""
        fields = {**asdict(self), **changes}
        fields["phase"] = phase
        fields["since"] = {**self.since, phase: when}
        return NodeRecord(**fields)

    def to_text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_text(cls, text: str) -> NodeRecord:
        """The record in `text`; ValueError when it is not one (torn, foreign, wrong types)."""
        try:
            data = json.loads(text)
            record = cls(
                job=str(data["job"]),
                placement=str(data["placement"]),
                node=int(data["node"]),
                nodes=int(data["nodes"]),
                pid=int(data["pid"]),
                start_ticks=int(data["start_ticks"]),
                phase=str(data["phase"]),
                region=str(data["region"]),
                market=str(data["market"]),
                gpus=int(data.get("gpus", 0)),
                node_dir=str(data["node_dir"]),
                since={str(k): str(v) for k, v in dict(data.get("since") or {}).items()},
                exit_status=None if data.get("exit_status") is None else int(data["exit_status"]),
                reclaimed=bool(data.get("reclaimed", False)),
                detail=str(data.get("detail", "")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a node record: {exc}") from None
        if record.phase not in PHASES:
            raise ValueError(f"not a node record: phase {record.phase!r}")
        return record


def group_id(launch_dir: str) -> str:
    """The stack output `groupId` of a group launched into `launch_dir`."""
    return GROUP_PREFIX + launch_dir


def launch_dir_of(group: str) -> str | None:
    """The launch directory a `local-group:` id names; None for any other id."""
    if not group.startswith(GROUP_PREFIX) or len(group) == len(GROUP_PREFIX):
        return None
    return group[len(GROUP_PREFIX) :]


def legacy_process_of(group: str) -> tuple[int, int] | None:
    """(pid, start ticks) of a `local-process:<pid>:<ticks>` id; None for any other id."""
    parts = group.split(":")
    if len(parts) != 3 or parts[0] + ":" != LEGACY_PREFIX:
        return None
    try:
        return int(parts[1]), int(parts[2])
    except ValueError:
        return None


def node_dir_name(node: int) -> str:
    return f"node-{node}"
