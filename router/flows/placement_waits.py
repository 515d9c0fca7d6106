"""A new placement's waits, counted from the cloud's phases (route migrate's resume-confirmed).

`pulumi up` returns while the nodes still provision, so the wait for the job's resume record
starts when the node poller (router/nodes/) says every node runs, each phase with its own budget
(router/core/startup_budget.py, figures in router/data/node_startup.csv, docs/migration.md). A
rollback names the phase that ran out. While it waits for the resume, the placement's node exit
records (router/flows/node_exits.py) and its node poller are read too: a job that already ended
there fails the wait at once, naming why, instead of both placements billing until the budget
runs out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from router.config import checkpoints as ckpt
from router.config.project import Project
from router.core.errors import OperationFailed, RouteError
from router.core.job.model import Job
from router.core.org import OrgConfig
from router.core.startup_budget import StartupBudget, startup_budget
from router.nodes.node_state import LOST, RUNNING, NodeState

LOCAL_POLL_S = 0.1  # the local poller reads a few small files
CLOUD_POLL_S = 10.0  # a cloud's describe calls: a few a minute, well inside API rate limits


class PhaseTimedOut(OperationFailed):
    """A phase of a new placement's start-up ran past its budget (or its nodes were lost)."""


class JobEnded(OperationFailed):
    """The job on a new placement ended (its nodes exited or were lost) before it resumed."""


def budget_for(job: Job, org: OrgConfig, cloud: str, project: Project) -> StartupBudget:
    """The start-up budget of `job` placed on `cloud` (the local target: its profile, its clock)."""
    from router.config.datafiles import load_startup_figures

    figures = load_startup_figures()
    row, scale = cloud, 1.0
    if cloud == "local":
        from router.config.local_market import load_local_market

        market = load_local_market(org, project.root)
        if market is not None:
            row, scale = market.behaviour.profile or "local", market.behaviour.time_scale
    if row not in figures:
        raise OperationFailed(
            f"router/data/node_startup.csv has no row for {row} — add its boot, pull and notice "
            "figures"
        )
    migration = job.migration
    return startup_budget(
        figures[row],
        image=job.run.image,
        image_gb=job.run.image_size_gb,
        secrets=bool(job.run.secrets),
        restore_overhead_s=job.checkpoint.restore_overhead_s if job.checkpoint else 600.0,
        factor=org.startup.budget_factor,
        nodes_timeout_s=migration.nodes_timeout_s or org.startup.nodes_timeout,
        restore_timeout_s=migration.restore_timeout_s or org.startup.restore_timeout,
        time_scale=scale,
    )


@dataclass(frozen=True)
class NodesRan:
    """How the nodes phase ended."""

    waited_s: float  # real seconds from the start of the wait
    observed: bool  # False when the cloud could not be asked (the restore budget then grows)
    state: dict[str, Any] | None = None
    note: str = ""


def wait_nodes_running(
    placement: dict[str, Any],
    budget: StartupBudget,
    *,
    stack: str,
    poll: Callable[[dict[str, Any]], NodeState | None] | None = None,
    stop_requested: Callable[[], bool] = lambda: False,
) -> NodesRan:
    """Wait until every node of `placement` ({cloud, region, outputs}) runs; PhaseTimedOut past
    the budget or when a node is lost before the group ran."""
    from router.nodes.sources import poll_placement

    ask = poll or poll_placement
    step_s = LOCAL_POLL_S if placement.get("cloud") == "local" else CLOUD_POLL_S
    started = time.monotonic()
    deadline = started + budget.real_nodes_s()
    while True:
        try:
            state = ask(placement)
        except RouteError as exc:  # no credentials, denied: the job's resume still tells
            return NodesRan(time.monotonic() - started, False, note=exc.message)
        if state is None:
            return NodesRan(0.0, False, note="no node poller for this placement")
        # A node lost (not merely not listed yet: a group still creating shows fewer).
        if state.gone or any(n.status == LOST for n in state.nodes):
            raise PhaseTimedOut(f"the nodes of {stack} were lost before they ran ({state.reason})")
        running = sum(1 for n in state.nodes if n.status == RUNNING)
        if state.wanted and running >= state.wanted:
            return NodesRan(time.monotonic() - started, True, state.to_json())
        if time.monotonic() >= deadline:
            raise PhaseTimedOut(
                f"nodes did not run within {budget.said(budget.real_nodes_s())} of `pulumi up` "
                f"returning ({state.cloud}: {running} of {state.wanted} nodes running; budget "
                f"{budget.nodes_basis}) — raise "
                "migration.nodes_timeout or startup.budget_factor if the cloud is that slow"
            )
        if stop_requested():
            return NodesRan(time.monotonic() - started, False, note="stopping")
        time.sleep(step_s)


def restore_timed_out(budget: StartupBudget, stack: str, extra_s: float = 0.0) -> PhaseTimedOut:
    """The rollback reason when the job's resume record did not come in time."""
    return PhaseTimedOut(
        f"job did not restore within {budget.said(budget.real_restore_s() + extra_s)} of its "
        f"nodes running on {stack} (budget {budget.restore_basis}) — raise "
        "migration.restore_timeout, run.image_size_gb or checkpoint.restore_overhead if it "
        "needs longer"
    )


def recorded_budget(up: dict[str, Any]) -> StartupBudget:
    """The budget new-stack-up recorded (a journal begun by an older router has none: floors)."""
    if up.get("budget"):
        return StartupBudget.from_json(up["budget"])
    return StartupBudget("", 0.0, 0.0, (), nodes_basis="the default", restore_basis="the default")


@dataclass
class EndWatch:
    """Whether the job on a new placement already ended there: its nodes' exit records since
    `since` and the cloud's node poller, each read at most every `every_s` (a listing and a
    cloud call, not one per resume poll)."""

    placement: dict[str, Any]  # {cloud, region, outputs}
    stack: str
    since: datetime
    poll: Callable[[dict[str, Any]], NodeState | None] | None = None
    every_s: float | None = None  # default: the local target's poll, else a cloud's
    _next: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        if self.every_s is None:
            local = self.placement.get("cloud") == "local"
            self.every_s = LOCAL_POLL_S if local else CLOUD_POLL_S

    def ended(self, *, now: bool = False) -> str | None:
        """Why the job is over there (one line), or None while it may still resume; `now`
        reads at once, whenever the last read was."""
        from router.flows.node_exits import placement_exits
        from router.nodes.sources import poll_placement

        if not now and time.monotonic() < self._next:
            return None
        self._next = time.monotonic() + (self.every_s or 0.0)
        outputs = self.placement.get("outputs") or {}
        exits = placement_exits(outputs, self.stack, self.since)
        if exits:
            more = f" (+{len(exits) - 1} more node(s))" if len(exits) > 1 else ""
            return exits[0].describe() + more
        try:
            state = (self.poll or poll_placement)(self.placement)
        except RouteError:  # no credentials, denied: the exit records and the budget still tell
            return None
        if state is not None and (state.gone or any(n.status == LOST for n in state.nodes)):
            return state.reason
        return None


def wait_resumed(
    directory: ckpt.CheckpointStore,
    accept: Callable[[dict[str, Any]], bool],
    budget: StartupBudget,
    end: EndWatch,
    *,
    extra_s: float = 0.0,
    poll_s: float = LOCAL_POLL_S,
    alive: Callable[[], bool] = lambda: True,
) -> dict[str, Any]:
    """The job's resume record on the new placement once `accept` takes it; JobEnded as soon as
    the job ended there (`alive()` false, an exit record, a node lost), PhaseTimedOut past the
    restore budget (+ `extra_s`)."""
    deadline = time.monotonic() + budget.real_restore_s() + extra_s
    while True:
        said = ckpt.resumed(directory)
        if said is not None and accept(said):
            return said
        gone = not alive()
        why = end.ended(now=gone)
        if gone or why is not None:
            raise JobEnded(f"the job on {end.stack} exited before it resumed"
                           + (f": {why}" if why else ""))  # fmt: skip
        if time.monotonic() > deadline:
            raise restore_timed_out(budget, end.stack, extra_s)
        time.sleep(poll_s)
