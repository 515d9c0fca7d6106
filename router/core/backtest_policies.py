"""The backtest's replayed policies: what each does with a job at a step; pure.

Single-cloud on-demand (the baseline), single-cloud spot with on-demand fallback, multi-cloud spot
placed once, multi-cloud with recovery and migration (decide() never idle), deadline-aware
(decide() as route watch runs it), and, with `--policies all`, Can't Be Late's greedy deadline
baseline. `DecidePolicy` calls router.core.decide.decide — the function `route watch` calls —
looked up on the module each call. No policy chooses spot priced above on-demand that fits the
job at that step (worth_running). router.core.backtest steps them through time, asking a
waiting job's policy again inside a step when its answer could change (`wake_h`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from router.core import decide as decision
from router.core.backtest_model import JobContext, Slot
from router.core.backtest_quiet import decide_running_quiet, slack_quiet
from router.core.decision_model import (
    MOVE,
    REPLACE,
    SPOT,
    STAY,
    SWITCH_MARKET,
    WAIT,
    Action,
    Current,
    History,
    Progress,
    Rules,
    worth_running,
    zone_key,
)

ON_DEMAND = "on-demand"


@dataclass
class RunState:
    """The simulated job between steps."""

    done_h: float = 0.0
    checkpointed_h: float = 0.0
    current: Slot | None = None
    since: datetime | None = None
    interrupted: bool = False
    started: bool = False
    overhead_h: float = 0.0
    history: History = field(default_factory=History)
    memo: Any = None  # what a policy keeps of its own between calls (a peer's controller)
    # A re-placement or move under way (Workload.launch_s): its target and the first step that
    # begins with its nodes up; nothing is decided meanwhile (router.core.backtest_replay).
    launching: tuple[Slot, int] | None = None


class Policy(Protocol):
    name: str
    label: str

    def choose(
        self, ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime
    ) -> tuple[Action, Slot | None, str]: ...

    def wake_h(self, ctx: JobContext, state: RunState, now: datetime) -> float | None:
        """Hours until a job this policy keeps waiting could be decided otherwise (None: not
        before the next step): the simulation asks choose() again then, inside the step."""
        ...


def _cheapest(
    ctx: JobContext, state: RunState, cands: Sequence[Slot], markets: tuple[str, ...] = ()
) -> Slot | None:
    rules = ctx.rules
    left = max(0.0, ctx.job.duration_h - state.checkpointed_h)
    best: tuple[float, tuple[str, ...], Slot] | None = None
    for c in cands:
        if markets and c.market not in markets:
            continue
        usd = decision.remaining_cost(rules, c, left) + decision.arrival_cost(
            rules, c, state.current, 0.0
        )
        rank = (usd, (c.cloud, c.region, c.zone or "", c.instance_type, c.market), c)
        if best is None or rank[:2] < best[:2]:
            best = rank
    return None if best is None else best[2]


def _usable(ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime) -> list[Slot]:
    """The candidates not in a blocked zone."""
    blocked = state.history.blocked(now, ctx.rules.zone_block_s)
    return [c for c in cands if zone_key(c) not in blocked]


def _decision_inputs(ctx: JobContext, state: RunState) -> tuple[Progress, Current | None]:
    """The job's progress and its current placement, as router.core.decide takes them."""
    current = None
    if state.current is not None:
        assert state.since is not None
        current = Current(state.current, state.since, state.interrupted)
    progress = Progress(state.done_h, state.checkpointed_h, ctx.job.duration_h, ctx.job.arrival)
    return progress, current


def _running(state: RunState) -> bool:
    return state.current is not None and not state.interrupted


def _place_anywhere(
    ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime, home: str = ""
) -> tuple[Action, Slot | None, str]:
    """The cheapest usable spot placement in any cloud, else the cheapest usable one (`home`
    is not used: every cloud is in)."""
    # Spot dearer than on-demand at this step is no option (worth_running), as in decide().
    usable = worth_running(_usable(ctx, state, cands, now))
    target = _cheapest(ctx, state, usable, (SPOT,)) or _cheapest(ctx, state, usable)
    return (REPLACE, target, "placed") if target else (WAIT, None, "nothing available")


def _on_demand_in_home(
    ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime, home: str
) -> tuple[Action, Slot | None, str]:
    """The cheapest on-demand placement in the home cloud (any cloud's if it sells none)."""
    in_home = [c for c in cands if c.cloud == home and c.market != SPOT]
    target = _cheapest(ctx, state, in_home or [c for c in cands if c.market != SPOT])
    return (REPLACE, target, "baseline") if target else (WAIT, None, "no on-demand")


def _spot_in_home_first(
    ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime, home: str
) -> tuple[Action, Slot | None, str]:
    """The next usable spot zone in the home cloud, else on-demand there."""
    usable = _usable(ctx, state, cands, now)
    if any(c.cloud == home for c in cands):
        usable = [c for c in usable if c.cloud == home]
    # (a job whose GPU the home cloud does not sell at all uses the other clouds)
    usable = worth_running(usable)
    target = _cheapest(ctx, state, usable, (SPOT,)) or _cheapest(ctx, state, usable)
    return (REPLACE, target, "fallback") if target else (WAIT, None, "nothing in home cloud")


Place = Callable[
    [JobContext, RunState, Sequence[Slot], datetime, str], tuple[Action, Slot | None, str]
]


class PlacedUntilInterrupted:
    """Keeps a running placement; `place` chooses one at arrival and after an interruption
    (`home`: the cloud a single-cloud policy places in, "" for all clouds)."""

    stays_while_running = True  # STAY whatever the candidates (backtest_replay)

    def __init__(self, name: str, label: str, place: Place, home: str = "") -> None:
        self.name, self.label, self.place, self.home = name, label, place, home

    def wake_h(self, ctx: JobContext, state: RunState, now: datetime) -> float | None:
        return None

    def quiet_until(self, ctx: JobContext, state: RunState, now: datetime) -> datetime | None:
        """Never of its own: it stays until interrupted, places when the candidates allow."""
        return None

    def choose(
        self, ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime
    ) -> tuple[Action, Slot | None, str]:
        if _running(state):
            return STAY, None, ""
        return self.place(ctx, state, cands, now, self.home)


def deploy_placement(
    ctx: JobContext, state: RunState, cands: Sequence[Slot]
) -> tuple[Action, Slot | None, str]:
    """What `route deploy` places a job on when it is submitted (Workload.first_placement
    "deploy"): the planner's cheapest offered placement, spot or on-demand, by the same cost
    (compute and expected interruptions, decide.remaining_cost) — it does not wait for spot.
    Nothing offered: the deploy is refused, and submitted again at the next step."""
    target = _cheapest(ctx, state, cands)
    return (REPLACE, target, "route deploy") if target else (WAIT, None, "route deploy refused")


class DecidePolicy:
    """All clouds through router.core.decide.decide — the rules `route watch` runs — with the
    job's deadline; `wait_for_spot` picks how decide() keeps it (Rules.wait_for_spot)."""

    deployed = True  # its jobs are submitted by `route deploy` (Workload.first_placement)

    def __init__(self, name: str, label: str, *, wait_for_spot: bool) -> None:
        self.name, self.label, self.wait_for_spot = name, label, wait_for_spot

    def _rules(self, ctx: JobContext) -> Rules:
        if ctx.job.deadline is None:  # deadline-aware may wait for spot (Rules.spot_wait_s)
            return ctx.rules if self.wait_for_spot else ctx.money_rules
        return ctx.deadline_rules if self.wait_for_spot else ctx.guard_rules

    def wake_h(self, ctx: JobContext, state: RunState, now: datetime) -> float | None:
        progress, current = _decision_inputs(ctx, state)
        return decision.wake_after_h(self._rules(ctx), progress, current, now)

    def quiet_until(self, ctx: JobContext, state: RunState, now: datetime) -> datetime | None:
        """When decide() could answer otherwise, the candidates unchanged (backtest_quiet)."""
        rules = self._rules(ctx)
        progress, current = _decision_inputs(ctx, state)
        if current is None or current.interrupted:
            return now  # waiting: asked every step (its answer moves with the slack and line)
        cands = ctx.candidates(ctx.step_at(now))
        committed = state.history.committed_on_demand
        return decide_running_quiet(ctx, rules, progress, current, committed, cands, now)

    def choose(
        self, ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime
    ) -> tuple[Action, Slot | None, str]:
        rules = self._rules(ctx)
        progress, current = _decision_inputs(ctx, state)
        # Looked up on the module each call, so the backtest runs whatever decide() is now.
        d = decision.decide(rules, progress, current, cands, state.history, now)
        if d.commit_on_demand and not state.history.committed_on_demand:
            state.history = History(
                state.history.last_move_at, state.history.lost_zones, committed_on_demand=True
            )
        target = d.target if d.action in (MOVE, SWITCH_MARKET, REPLACE) else None
        assert target is None or isinstance(target, Slot)
        return d.action, target, d.reason


class GreedyDeadline:
    """Can't Be Late's greedy baseline: spot when there is some, else wait; on-demand for good
    at the last safe moment (the same slack test as decide())."""

    name = "greedy-deadline"
    label = "greedy (spot or wait, on-demand at the last moment)"

    def wake_h(self, ctx: JobContext, state: RunState, now: datetime) -> float | None:
        if ctx.job.deadline is None:
            return None
        progress, current = _decision_inputs(ctx, state)
        _, slack, risk = decision.deadline_slack(ctx.deadline_rules, progress, current, now)
        return slack - risk if slack - risk > 1e-9 else None

    def quiet_until(self, ctx: JobContext, state: RunState, now: datetime) -> datetime | None:
        """Its slack test only (backtest_quiet.slack_quiet); nothing without a deadline."""
        if ctx.job.deadline is None:
            return None
        if state.history.committed_on_demand:
            on_it = _running(state) and state.current is not None
            return None if on_it and state.current.market != SPOT else now  # type: ignore[union-attr]
        progress, current = _decision_inputs(ctx, state)
        return slack_quiet(ctx.deadline_rules, progress, current, now)

    def choose(
        self, ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime
    ) -> tuple[Action, Slot | None, str]:
        running = _running(state)
        if ctx.job.deadline is None:
            return (STAY, None, "") if running else _place_anywhere(ctx, state, cands, now)
        progress, current = _decision_inputs(ctx, state)
        usable = worth_running(_usable(ctx, state, cands, now))
        spot_now = any(c.market == SPOT for c in usable)
        _, slack, risk = decision.deadline_slack(
            ctx.deadline_rules, progress, current, now, spot_now=spot_now
        )
        if state.history.committed_on_demand or decision.at_most(slack, risk):
            if not state.history.committed_on_demand:
                h = state.history
                state.history = History(h.last_move_at, h.lost_zones, True)
            if running and state.current is not None and state.current.market != SPOT:
                return STAY, None, ""
            target = _cheapest(ctx, state, _usable(ctx, state, cands, now), (ON_DEMAND,))
            if target is not None:
                kind = SWITCH_MARKET if running else REPLACE
                return kind, target, "slack gone: on-demand for good"
        if running:
            return STAY, None, ""
        target = _cheapest(ctx, state, usable, (SPOT,))
        return (REPLACE, target, "spot") if target else (WAIT, None, "no spot: waiting")


POLICY_SETS = ("default", "all")


def policy_set(home_cloud: str, which: str = "default") -> tuple[Policy, ...]:
    """The policies of `route backtest --policies`: default, or all (+ the benchmark ones)."""
    if which not in POLICY_SETS:
        raise ValueError(f"policy set {which!r} is not one of {', '.join(POLICY_SETS)}")
    chosen = policies(home_cloud)
    return (*chosen, *benchmark_policies()) if which == "all" else chosen


def benchmark_policies() -> tuple[Policy, ...]:
    """Published baselines to compare against — Can't Be Late's greedy, and the peers users would
    run instead (SkyPilot's managed-job recovery, router.core.backtest_peers); not spotroute's."""
    from router.core.backtest_peers import skypilot_policies

    return (GreedyDeadline(), *skypilot_policies())


def policies(home_cloud: str) -> tuple[Policy, ...]:
    """The replayed policies, baseline first (the optimum is computed separately)."""
    return (
        # Single cloud, on-demand: the cheapest on-demand placement in the home cloud, kept.
        PlacedUntilInterrupted(
            "on-demand", "single-cloud on-demand", _on_demand_in_home, home_cloud
        ),
        # Single cloud, spot first; when interrupted, the next spot zone there, else on-demand.
        PlacedUntilInterrupted(
            "spot-fallback",
            "single-cloud spot + on-demand fallback",
            _spot_in_home_first,
            home_cloud,
        ),
        # All clouds, spot, placed once: the cheapest at arrival; re-placed only when interrupted.
        PlacedUntilInterrupted("spot-once", "multi-cloud spot, placed once", _place_anywhere),
        # decide() never idle (Rules.wait_for_spot False): the money rules, the deadline kept by
        # the slack test (on-demand for good once the slack is gone).
        DecidePolicy(
            "migrate", "multi-cloud + recovery + migration, never idle", wait_for_spot=False
        ),
        # decide() with each job's own rules, exactly what route watch runs: waiting for spot
        # while the slack allows (Uniform Progress as changed here).
        DecidePolicy(
            "deadline-aware", "deadline-aware, as route watch runs it", wait_for_spot=True
        ),
    )
