"""`route status`: every job in the backend (or one), with its placement, the price then and
now, how long it has been up and what it cost so far, its latest decision and who holds its lock.
A crashed job `route watch` tore down (router/flows/teardown.py) is listed too, with no stack:
`crashed`, when and why, what it cost until the teardown, where its checkpoints are.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from router.config.project import Project
from router.config.stack_files import read_stack_file
from router.core.errors import OperationFailed
from router.engine.automation import Engine
from router.engine.processes import sweep_orphans
from router.flows.jobs import (
    Notify,
    clear_stale_locks,
    engine_for,
    job_of_stack,
    recover,
)
from router.flows.live_placement import placement_key
from router.flows.teardown import Teardown, crashed_teardowns


@dataclass(frozen=True)
class JobStatus:
    job: str
    state: str  # running | deployed | stopped | updating | empty | crashed | locked
    cloud: str | None
    region: str | None
    zone: str | None
    instance_type: str | None
    market: str | None
    node_count: int
    price_per_hour: float | None  # USD per instance-hour at placement time
    best_price_now: float | None  # cheapest known offer of the same shape and market now
    up_since: datetime | None
    cost_so_far: float | None  # USD
    resources: int
    last_decision: dict[str, Any] | None = None  # route watch/migrate/preempt's latest, if any
    locked_by: str | None = None  # who holds the backend's lock on the stack, and since when
    problem: str | None = None  # why part of the job's record could not be read
    torn_down: dict[str, Any] | None = None  # crashed: {at, why, checkpoints} of the teardown

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "state": self.state,
            "cloud": self.cloud,
            "region": self.region,
            "zone": self.zone,
            "instance_type": self.instance_type,
            "market": self.market,
            "node_count": self.node_count,
            "price_per_hour": self.price_per_hour,
            "best_price_now": self.best_price_now,
            "up_since": self.up_since.isoformat() if self.up_since else None,
            "cost_so_far": self.cost_so_far,
            "resources": self.resources,
            "last_decision": self.last_decision,
            "locked_by": self.locked_by,
            "problem": self.problem,
            "torn_down": self.torn_down,
        }


def job_status(
    *, project: Project, now: datetime, job: str | None = None, notify: Notify | None = None
) -> list[JobStatus]:
    """Every job found in the backend (or one), with its placement, price then and now, and cost.

    A job whose record cannot be read is listed with the problem; the others are unaffected.
    """
    engine = engine_for(project)
    if sweep_orphans(engine.home):
        (notify or (lambda _line: None))("stopped engine processes left by a killed route command")
    if engine.repair_backend():
        (notify or (lambda _line: None))("repaired a state file a killed engine left half-written")
    stacks = [s for s in engine.list_stacks() if job is None or job_of_stack(s.name) == job]
    torn = [t for t in crashed_teardowns(engine.records()) if job is None or t.job == job]
    if job is not None and not stacks and not torn:
        raise OperationFailed(
            f"no deployed job '{job}' on backend {engine.backend.url} — see `route status`"
        )
    offers: list[Any] = []
    statuses = []
    placements = engine.records().list("placements/") if stacks else {}
    by_job: dict[str, list[Any]] = {}
    for s in stacks:
        by_job.setdefault(job_of_stack(s.name), []).append(s)
    chosen = []
    for name, group in by_job.items():
        record = placements.get(placement_key(name)) or {}
        current = record.get("stack") or name
        # The job's current placement; during a hand-over the other stack is its new one.
        chosen.append((name, next((s for s in group if s.name == current), group[0]), record))
    for name, s, record in sorted(chosen, key=lambda c: c[0]):
        clear_stale_locks(engine, name, notify)  # e.g. on a stack a killed move deleted
        recover(engine, s.name, notify)
        held = engine.held_locks(s.name)
        locked_by = held[0].holder() if held else None
        try:
            status = _one_status(project, name, s, record, now, offers)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            status = JobStatus(
                name,
                "unknown",
                None,
                None,
                None,
                None,
                None,
                1,
                None,
                None,
                None,
                None,
                s.resource_count or 0,
                problem=f"the placement record of {name} is unreadable ({type(exc).__name__}) — "
                f"`route deploy` the job again to rewrite it",
            )
        status = replace(status, last_decision=_last_decision(engine, name))
        if _crashed_since_deployed(status.last_decision, record):
            status = replace(status, state="crashed")  # route watch stopped re-placing it
        if locked_by:
            status = replace(status, state="locked", locked_by=locked_by)
        statuses.append(status)
    listed = {s.job for s in statuses}
    statuses += [_torn_down(engine, t, now) for t in torn if t.job not in listed]
    return sorted(statuses, key=lambda s: s.job)


def _torn_down(engine: Engine, t: Teardown, now: datetime) -> JobStatus:
    """A crashed job whose placement route watch tore down (or is tearing down: `at` null):
    what it was, until when it billed."""
    p = t.placement
    up_since = datetime.fromisoformat(p["deployed_at"]) if p.get("deployed_at") else None
    price = float(p["price_per_hour"]) if p.get("price_per_hour") is not None else None
    nodes = int(p.get("node_count") or 1)
    ended = datetime.fromisoformat(t.done_at) if t.done_at else now
    hours = (ended - up_since).total_seconds() / 3600 if up_since else None
    cost = price * nodes * hours if price is not None and hours is not None else None
    return JobStatus(
        t.job, "crashed", p.get("cloud"), p.get("region"), p.get("zone"), p.get("instance_type"),
        p.get("market"), nodes, price, None, up_since, cost, 0,
        last_decision=_last_decision(engine, t.job),
        torn_down={"at": t.done_at, "why": t.why, "checkpoints": t.checkpoints or None},
    )  # fmt: skip


def _one_status(
    project: Project, name: str, s: Any, record: Any, now: datetime, offers: list[Any]
) -> JobStatus:
    from router.prices.book import OfferFilter, offers_now, select_offers

    if not isinstance(record, dict):
        raise TypeError("not a JSON object")
    config = read_stack_file(project.stack_config_path(s.name))
    cloud = record.get("cloud") or config.get("cloud")
    market = record.get("market") or config.get("market")
    gpu, gpu_count = (
        record.get("gpu") or config.get("gpu"),
        record.get("gpu_count") or config.get("gpuCount"),
    )
    best = None
    if cloud and cloud != "local" and gpu and gpu_count:
        if not offers:
            offers.extend(offers_now())
        same = select_offers(
            offers,
            OfferFilter(gpu=gpu, gpu_count=int(gpu_count), markets=(market,) if market else ()),
        )
        best = same[0].price_per_hour if same else None
    elif cloud == "local":
        best = float(record.get("price_per_hour", 0.0))
    up_since = datetime.fromisoformat(record["deployed_at"]) if record.get("deployed_at") else None
    price = record.get("price_per_hour", config.get("pricePerHour"))
    if price is not None:
        price = float(price)
    nodes = int(record.get("node_count") or config.get("nodeCount") or 1)
    cost = (
        price * nodes * (now - up_since).total_seconds() / 3600
        if price is not None and up_since
        else None
    )
    return JobStatus(
        job=name,
        state=_state(s, record),
        cloud=_text(cloud),
        region=_text(record.get("region") or config.get("region")),
        zone=_text(record.get("zone") or config.get("zone") or None),
        instance_type=_text(
            record.get("instance_type") or (config.get("instanceTypes") or [None])[0]
        ),
        market=_text(market),
        node_count=nodes,
        price_per_hour=price,
        best_price_now=best,
        up_since=up_since,
        cost_so_far=cost,
        resources=s.resource_count or 0,
    )


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"expected text, got {type(value).__name__}")


def _last_decision(engine: Engine, job: str) -> dict[str, Any] | None:
    """The job's latest recorded decision: when, by whom, what and why."""
    from router.engine.job_records import JobRecords

    d = JobRecords(engine.records()).last_decision(job)
    return None if d is None else {k: d.get(k) for k in ("at", "by", "action", "reason")}


def _crashed_since_deployed(decision: dict[str, Any] | None, record: Any) -> bool:
    """The latest decision is `crashed`, made for this deployment (not before a redeploy)."""
    if not decision or decision.get("action") != "crashed":
        return False
    deployed = record.get("deployed_at") if isinstance(record, dict) else None
    return not deployed or str(decision.get("at") or "") >= str(deployed)


def _state(summary: Any, record: dict[str, Any]) -> str:
    if summary.update_in_progress:
        return "updating"
    if not summary.resource_count:
        return "empty"
    if record.get("cloud") == "local" and (record.get("outputs") or {}).get("groupId"):
        from router.nodes.node_state import LOST, RUNNING
        from router.nodes.sources import poll_placement

        nodes = poll_placement(record)
        if nodes is None or nodes.gone or all(n.status == LOST for n in nodes.nodes):
            return "stopped"
        # What a cloud console shows: running once every node runs, starting before.
        return "running" if all(n.status == RUNNING for n in nodes.nodes) else "starting"
    return "deployed"
