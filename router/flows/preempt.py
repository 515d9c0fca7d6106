"""`route preempt JOB`: take a local job's capacity away the way a cloud does.

Notice, lead time, kill: each node (or only the one `--node` names) is marked reclaimed (its
`reclaim.json`, the cloud's own word that the node poller reads), gets SIGTERM — which the node
passes to the job, the checkpoint library's local notice source — and its whole process group
SIGKILL once the lead time is over.
The lead time is the local market's profile's notice (AWS two minutes, GCP and Azure 30 s,
router/data/node_startup.csv; on its accelerated clock), else 30 s; `--grace` sets it. The stack
is left as it is — like a preempted spot instance, the placement is simply gone — and `route
watch` notices and re-places the job from its last checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from router.config.project import Project
from router.core.errors import BadInput, OperationFailed

DEFAULT_GRACE_S = 30.0  # without a local market profile: GCP's and Azure's notice


@dataclass(frozen=True)
class Preemption:
    job: str
    pid: int  # the first preempted node's process
    notice_at: datetime
    gone_after_s: float  # seconds from the notice until every node was gone
    killed: bool  # True when the grace period ran out and SIGKILL was needed
    grace_s: float  # real seconds
    nodes: int = 1  # how many nodes were preempted
    node: int | None = None  # the one node asked for (`--node`), else None: every node


def notice_lead_s(project: Project) -> float:
    """Real seconds of notice the local target gives: its profile's, on its clock; else 30 s."""
    from router.config.local_market import load_local_market
    from router.config.org_file import org_config_for

    market = load_local_market(org_config_for(project), project.root)
    if market is None or not market.behaviour.notice_s:
        return DEFAULT_GRACE_S
    return market.behaviour.real_s(market.behaviour.notice_s)


def preempt_job(
    job: str, *, project: Project, grace_s: float | None = None, node: int | None = None
) -> Preemption:
    """Reclaim every node of the job's local group, or only node `node` (its index, 0 … N−1):
    notice, `grace_s` (default: the profile's notice), SIGKILL; OperationFailed if nothing of it
    runs."""
    from components.local_nodes import group_records, mark_reclaimed, process_alive, stop_nodes
    from router.contract.local_node import legacy_process_of
    from router.engine.job_records import JobRecords
    from router.flows.jobs import engine_for
    from router.flows.live_placement import read_placement

    if grace_s is not None and grace_s < 0:
        raise BadInput(f"--grace: {grace_s:g} — use seconds ≥ 0")
    if node is not None and node < 0:
        raise BadInput(f"--node: {node} is not a node index — use 0 for the first node")
    engine = engine_for(project)
    record = read_placement(engine.records(), job)
    if record is None:
        raise OperationFailed(f"no deployed job '{job}' — see `route status`")
    if record.get("cloud") != "local":
        raise OperationFailed(
            f"job {job} runs on {record.get('cloud')}: route preempt acts on the local target "
            "only (the clouds preempt on their own)"
        )
    grace = notice_lead_s(project) if grace_s is None else grace_s
    group = str((record.get("outputs") or {}).get("groupId", ""))
    legacy = legacy_process_of(group)
    # In node order (node-0 … node-N−1); a node without a record yet has pid 0: not running.
    nodes: list[tuple[int, int, Path | None]] = (
        [(*legacy, None)]
        if legacy is not None
        else [(r.pid, r.start_ticks, d) if r else (0, 0, d) for d, r in group_records(group)]
    )
    if node is not None:
        if nodes and node >= len(nodes):
            raise BadInput(
                f"--node: job {job} has no node {node} — its group has {len(nodes)} node(s), "
                f"use 0 … {len(nodes) - 1}"
            )
        nodes = nodes[node : node + 1]
    nodes = [n for n in nodes if process_alive(n[0], n[1])]
    if not nodes:
        what = f"node {node} of job {job}" if node is not None else f"job {job}"
        raise OperationFailed(f"{what} is not running — nothing to preempt")
    notice_at = datetime.now(UTC)
    for _pid, _ticks, node_dir in nodes:
        if node_dir is not None:
            mark_reclaimed(node_dir, "route preempt", notice_at, grace)
    gone_after_s, killed = stop_nodes([(pid, ticks) for pid, ticks, _d in nodes], grace)
    outcome = Preemption(job, nodes[0][0], notice_at, gone_after_s, killed, grace, len(nodes), node)
    which = f"node {node}" if node is not None else f"{len(nodes)} node(s)"
    JobRecords(engine.records()).append_decision(
        job,
        {
            "at": notice_at.isoformat(),
            "by": "route preempt",
            "action": "preempted",
            "reason": f"local preemption of {which}: SIGTERM, {grace:g} s notice"
            + (", then SIGKILL" if killed else f"; exited after {outcome.gone_after_s:.1f} s"),
            "placement": {k: record.get(k) for k in ("stack", "cloud", "region", "zone", "market")},
        },
    )
    return outcome
