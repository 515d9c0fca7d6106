"""The migration decision's data: actions, the rules, the job's progress and placement, the
history, the transfer costs, and the Decision with the numbers compared.

Pure (no I/O, no clock). router.core.decide holds the policies that turn these into a Decision.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

from router.core.egress import EgressTable
from router.core.job.data import cloud_of_url
from router.core.job.model import Job

SPOT, ON_DEMAND = "spot", "on-demand"

Action = Literal["stay", "move", "replace", "switch-market", "wait", "crashed"]
STAY: Action = "stay"
MOVE: Action = "move"
REPLACE: Action = "replace"
SWITCH_MARKET: Action = "switch-market"
WAIT: Action = "wait"
CRASHED: Action = "crashed"  # the job failed by itself there: not re-placed (router/core/node_exit)


class Capacity(Protocol):
    """What decide() needs of a placement; router.core.placement.Placement has all of it."""

    @property
    def cloud(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def zone(self) -> str | None: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def market(self) -> str: ...
    @property
    def price_per_hour(self) -> float: ...  # USD per instance-hour, now
    @property
    def interruptions_per_hour(self) -> float: ...  # per instance-hour, 0 unless spot


def zone_key(p: Capacity) -> tuple[str, str, str]:
    """The capacity pool a preemption takes out: cloud, region and zone (region if none)."""
    return (p.cloud, p.region, p.zone or p.region)


def same_capacity(a: Capacity, b: Capacity) -> bool:
    """True when a and b are the same cloud, region, zone, instance type and market."""
    return (a.cloud, a.region, a.zone, a.instance_type, a.market) == (
        b.cloud,
        b.region,
        b.zone,
        b.instance_type,
        b.market,
    )


C = TypeVar("C", bound=Capacity)


def reliable_floor(candidates: Sequence[Capacity]) -> float:
    """USD/h of the cheapest capacity that is not spot (on-demand, reserved); inf if none."""
    return min((c.price_per_hour for c in candidates if c.market != SPOT), default=float("inf"))


def worth_running(candidates: Sequence[C], floor: float | None = None) -> list[C]:
    """The candidates minus spot priced above the cheapest on-demand or reserved one (USD/h).

    Capacity that can be taken away is never chosen when capacity that cannot costs less at
    the same moment (a $5.00/h spot pool next to $3.06/h on-demand); `floor` defaults to
    reliable_floor(candidates).
    """
    cap = reliable_floor(candidates) if floor is None else floor
    return [c for c in candidates if c.market != SPOT or c.price_per_hour <= cap]


# Answers of an (immutable) egress table, shared by every job that uses it: a backtest asks
# the same (size, from, to) questions for thousands of jobs.
_MOVES: weakref.WeakKeyDictionary[EgressTable, dict[tuple[float, str, str, str, str], float]] = (
    weakref.WeakKeyDictionary()
)


def _moved_usd(table: EgressTable, gb: float, sc: str, sr: str, dc: str, dr: str) -> float:
    memo = _MOVES.get(table)
    if memo is None:
        memo = _MOVES[table] = {}
    key = (gb, sc, sr, dc, dr)
    found = memo.get(key)
    if found is None:
        found = memo[key] = table.cost(gb, sc, sr, dc, dr).usd
    return found


class TransferCosts:
    """USD to move the job's data and checkpoint between regions (router.core.egress), memoised.

    Pure: the memo only remembers answers of the immutable egress table.
    """

    __slots__ = ("_ckpt", "_data", "checkpoint_gb", "data_sets", "table")

    def __init__(
        self,
        table: EgressTable | None,
        *,
        data_sets: Sequence[tuple[str | None, str, float]] = (),
        data_cloud: str | None = None,
        data_region: str = "",
        data_gb: float = 0.0,
        checkpoint_gb: float = 0.0,
    ) -> None:
        """`data_sets`: (cloud, region, GB) of every data set the job reads; `data_cloud`,
        `data_region`, `data_gb` add one more (the single-data-set form)."""
        self.table = table
        extra = ((data_cloud, data_region, data_gb),) if data_cloud is not None else ()
        self.data_sets = tuple(data_sets) + extra
        self.checkpoint_gb = checkpoint_gb
        self._data: dict[tuple[str, str], float] = {}
        self._ckpt: dict[tuple[str, str, str, str], float] = {}

    def data_to(self, cloud: str, region: str) -> float:
        """USD to bring every data set from where it lives to (cloud, region), once."""
        key = (cloud, region)
        found = self._data.get(key)
        if found is None:
            found = 0.0
            if self.table is not None:
                for src_cloud, src_region, gb in self.data_sets:
                    if gb > 0 and src_cloud is not None:
                        found += _moved_usd(self.table, gb, src_cloud, src_region, cloud, region)
            self._data[key] = found
        return found

    def checkpoint(self, src_cloud: str, src_region: str, cloud: str, region: str) -> float:
        """USD to copy the latest checkpoint from the current region to (cloud, region)."""
        key = (src_cloud, src_region, cloud, region)
        found = self._ckpt.get(key)
        if found is None:
            if self.table is None or self.checkpoint_gb <= 0:
                found = 0.0
            else:
                found = _moved_usd(
                    self.table, self.checkpoint_gb, src_cloud, src_region, cloud, region
                )
            self._ckpt[key] = found
        return found


NO_TRANSFERS = TransferCosts(None)
DECISION_PERIOD_S = 60.0  # route watch's default --interval: decide() is asked this often


@dataclass(frozen=True, slots=True)
class Rules:
    """The job's migration settings (job.yaml `migration`, `checkpoint`, `deadline`), seconds."""

    node_count: int = 1
    min_savings_pct: float = 20.0
    cooldown_s: float = 3600.0
    checkpoint_interval_s: float = 1800.0
    restore_overhead_s: float = 600.0
    handover_s: float = 300.0  # both placements run while the new one restores
    zone_block_s: float = 3600.0  # a lost zone is not used again for this long
    decision_period_s: float = DECISION_PERIOD_S  # until decide() is called again
    # From a decision to re-place or move until the new placement's nodes run (the engine's
    # step and the cloud's launch): nobody pays for it, but it spends a deadline's slack, so
    # the slack test counts it with every restart (decide_deadline). 0 = at once.
    launch_s: float = 0.0
    deadline: datetime | None = None
    # With a deadline: wait (idle) for spot while the slack allows — Uniform Progress; False:
    # never idle (the money rules), on-demand for good once the slack is gone.
    wait_for_spot: bool = True
    # Without a deadline (and wait_for_spot): how much later than its work alone takes the job
    # may finish, waiting out spot outages instead of buying on-demand (job.yaml
    # migration.spot_wait); 0 = never idle. decide_deadline.soft_deadline turns it into one.
    spot_wait_s: float = 0.0
    transfers: TransferCosts = NO_TRANSFERS

    @property
    def restore_h(self) -> float:
        return self.restore_overhead_s / 3600.0

    @property
    def restart_h(self) -> float:
        """Hours a (re)start spends of a deadline: the launch, then the paid restore."""
        return (self.launch_s + self.restore_overhead_s) / 3600.0


def work_at_risk_s(
    interval_s: float, notice_s: Mapping[str, float], clouds: Iterable[str]
) -> float:
    """Seconds of work a spot preemption can cost: the checkpoint interval, or the notice lead
    when the checkpoint library saves on the notice in every one of `clouds` (the longest of
    their leads, so never less than is lost). The backtest (job_rules) and route watch use it."""
    leads = [notice_s.get(c) for c in set(clouds)]
    if not leads or any(lead is None for lead in leads):
        return interval_s
    return min(interval_s, max(lead for lead in leads if lead is not None))


def rules_for_job(
    job: Job,
    *,
    egress: EgressTable | None,
    checkpoint_gb: float = 0.0,
    handover_s: float = 300.0,
    zone_block_s: float = 3600.0,
    decision_period_s: float = DECISION_PERIOD_S,
) -> Rules:
    """decide()'s rules from job.yaml (migration, checkpoint, deadline, data, node_count).

    checkpoint_gb: size of the latest checkpoint (the checkpoint library's manifest says);
    decision_period_s: how often `route watch` calls decide() (its --interval).
    """
    ckpt = job.checkpoint
    return Rules(
        node_count=job.node_count,
        min_savings_pct=job.migration.min_savings_pct,
        cooldown_s=job.migration.cooldown_s,
        checkpoint_interval_s=ckpt.interval_s if ckpt is not None else 0.0,
        restore_overhead_s=ckpt.restore_overhead_s if ckpt is not None else 0.0,
        handover_s=handover_s,
        zone_block_s=zone_block_s,
        decision_period_s=decision_period_s,
        deadline=job.deadline,
        spot_wait_s=job.migration.spot_wait_s,
        transfers=TransferCosts(egress, data_sets=job_data_sets(job), checkpoint_gb=checkpoint_gb),
    )


def job_data_sets(job: Job) -> tuple[tuple[str | None, str, float], ...]:
    """(cloud, region, GB) of every data set of the job, where its main copy lives."""
    return tuple((d.cloud or cloud_of_url(d.url), d.region, d.size_gb) for d in job.data)


@dataclass(frozen=True, slots=True)
class Progress:
    """How far the job is, in hours of work; started_at begins the Uniform Progress line."""

    done_h: float  # useful work done so far
    checkpointed_h: float  # work the last complete checkpoint holds (≤ done_h)
    total_h: float  # expected work in all (job.yaml duration_hours)
    started_at: datetime  # when the job was submitted

    @property
    def finished(self) -> bool:
        return self.done_h >= self.total_h - 1e-9


@dataclass(frozen=True, slots=True)
class Current:
    """The placement the job is on (or was on, when interrupted) and since when."""

    placement: Capacity
    since: datetime
    interrupted: bool = False  # preempted, capacity lost, process gone
    crashed: str | None = None  # why the job failed by itself there (its nodes said), if it did


@dataclass(frozen=True, slots=True)
class History:
    """What decide() must remember between calls: the last move and the zones lost lately."""

    last_move_at: datetime | None = None
    lost_zones: tuple[tuple[tuple[str, str, str], datetime], ...] = ()
    committed_on_demand: bool = False  # deadline slack was gone at some call: stay there

    def blocked(self, now: datetime, block_s: float) -> frozenset[tuple[str, str, str]]:
        """Zones lost less than block_s ago."""
        return frozenset(z for z, at in self.lost_zones if (now - at).total_seconds() < block_s)


@dataclass(frozen=True, slots=True)
class Numbers:
    """What was compared (USD, hours); None where a term did not apply."""

    work_left_h: float
    current_remaining_usd: float | None = None
    target_remaining_usd: float | None = None
    migration_usd: float | None = None
    saving_usd: float | None = None
    threshold_usd: float | None = None
    hours_left: float | None = None  # until the deadline
    slack_h: float | None = None  # hours left − work left − hours to get onto on-demand
    ahead_h: float | None = None  # done − the Uniform Progress line
    cooldown_left_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class Decision:
    """stay / move / replace / switch-market / wait / crashed, to which placement, and why."""

    action: Action
    target: Capacity | None
    reason: str
    numbers: Numbers
    commit_on_demand: bool = False  # record in History: deadline slack is gone
    considered: int = field(default=0)  # candidates compared

    def to_json(self) -> dict[str, Any]:
        t = self.target
        return {
            "action": self.action,
            "target": None
            if t is None
            else {
                "cloud": t.cloud,
                "region": t.region,
                "zone": t.zone,
                "instance_type": t.instance_type,
                "market": t.market,
                "price_per_hour": t.price_per_hour,
            },
            "reason": self.reason,
            "numbers": self.numbers.to_json(),
            "commit_on_demand": self.commit_on_demand,
            "considered": self.considered,
        }
