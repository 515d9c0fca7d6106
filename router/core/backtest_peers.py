"""The peer users would run instead: SkyPilot's managed-job recovery, as backtest policies; pure.

Modelled from SkyPilot's own source (docs/backtest.md, "The peer", names the files and commits);
facts, not its code:

- **Spot only** (`use_spot: true`), or spot with on-demand listed as a fallback (`any_of`).
- **A launch** (`sky.launch` with failover) tries the locations in its optimizer's order — regions
  by their cheapest price, a region's zones by price then name (catalog `get_region_zones`), each
  launchable (cloud, region, market) a candidate — and takes the first with capacity now. Its
  optimizer prices no egress between regions of one cloud (`Optimizer._egress_cost`: none within
  a cloud) and none across clouds for a task that declares no inputs: price alone ranks.
- **No capacity anywhere**: the launch is retried with exponential backoff (`Backoff`, initial
  60 s, ×1.6, at most 5× the initial: 60, 96, 153.6, 245.76, then 300 s; its ±40 % jitter is
  left at its mean), for ever at the first launch.
- **A preemption** is what the controller sees when it polls the job every 15 s
  (`JOB_STATUS_CHECK_GAP_SECONDS`) and the cluster is no longer UP: recovery starts at that
  poll. FAILOVER relaunches in the same cloud and region first (any zone of it, the preempted
  one included; 3 attempts with backoff), then anywhere (up to 240 attempts with backoff, then
  60 s and again, for ever). EAGER_NEXT_REGION (the default) first blocks the region it ran in
  (3 attempts in the others), then anywhere the same way. Once a launch failed, neither goes
  back to its first step (the launched resources are forgotten).
- No deadline, no zone memory between launches, no migration: a running cluster stays until
  it is preempted or the job ends.

The simulation (router.core.backtest) runs it like every policy: the same candidates (the
planner's feasible pools available at the step), the same job (checkpoints, restore, the save on
a notice), the same accounting (egress when the region changes, restore time paid).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from router.core.backtest_model import JobContext, Slot
from router.core.backtest_policies import Policy, RunState
from router.core.decision_model import REPLACE, SPOT, STAY, WAIT, Action

POLL_S = 15.0  # sky/jobs/utils.py JOB_STATUS_CHECK_GAP_SECONDS
RETRY_INIT_GAP_S = 60.0  # sky/jobs/recovery_strategy.py StrategyExecutor.RETRY_INIT_GAP_SECONDS
BACKOFF_MULTIPLIER = 1.6  # sky/utils/common_utils.py Backoff
BACKOFF_MAX_FACTOR = 5  # Backoff(max_backoff_factor=5): at most 300 s
FIRST_STEP_ATTEMPTS = 3  # _launch(max_retry=3): the same region / the other regions
ANYWHERE_ATTEMPTS = 240  # FailoverStrategyExecutor._MAX_RETRY_CNT ("retry for 4 hours")

EAGER_NEXT_REGION, FAILOVER = "EAGER_NEXT_REGION", "FAILOVER"

LAUNCH, FIRST, ANYWHERE = "launch", "first", "anywhere"  # the controller's loops


def backoff_s(failed: int) -> float:
    """Seconds before the next attempt after `failed` failed attempts of one launch loop."""
    gap = RETRY_INIT_GAP_S * BACKOFF_MULTIPLIER ** (failed - 1)
    return min(gap, BACKOFF_MAX_FACTOR * RETRY_INIT_GAP_S)


@dataclass
class Controller:
    """One managed job's controller between the simulation's calls."""

    loop: str = LAUNCH
    failed: int = 0  # failed attempts in this loop
    next_try: datetime | None = None
    launched: tuple[str, str, str] | None = None  # (cloud, region, market) of the last launch
    lost_since: datetime | None = None  # the start of the placement whose loss is recovered


def failover_order(cands: Sequence[Slot]) -> list[Slot]:
    """The order a launch tries locations: launchables (cloud, region, market) by their cheapest
    zone, then a launchable's zones by price and name."""
    cheapest: dict[tuple[str, str, str], float] = {}
    for c in cands:
        key = (c.cloud, c.region, c.market)
        cheapest[key] = min(cheapest.get(key, c.price_per_hour), c.price_per_hour)
    return sorted(
        cands,
        key=lambda c: (
            cheapest[(c.cloud, c.region, c.market)],
            c.cloud,
            c.region,
            c.market,
            c.price_per_hour,
            c.zone or "",
        ),
    )


class SkyPilotRecovery:
    """A SkyPilot managed job: spot (or spot, then on-demand) by price, recovered by `strategy`."""

    wakes_per_step = 256  # retries every 60-300 s: a long step holds many
    peer = True  # its finishes do not widen the optimum's window (router.core.backtest)
    stays_while_running = True  # a running cluster stays until preempted (backtest_replay)

    def __init__(self, name: str, label: str, strategy: str, *, on_demand: bool) -> None:
        self.name, self.label, self.strategy, self.on_demand = name, label, strategy, on_demand

    def wake_h(self, ctx: JobContext, state: RunState, now: datetime) -> float | None:
        ctl = state.memo
        if _running(state) or not isinstance(ctl, Controller) or ctl.next_try is None:
            return None
        return max(0.0, (ctl.next_try - now).total_seconds() / 3600.0)

    def quiet_until(self, ctx: JobContext, state: RunState, now: datetime) -> datetime | None:
        """Running: never of its own (it stays until preempted); waiting: its next attempt."""
        ctl = state.memo
        if _running(state) or not isinstance(ctl, Controller):
            return None
        return ctl.next_try

    def choose(
        self, ctx: JobContext, state: RunState, cands: Sequence[Slot], now: datetime
    ) -> tuple[Action, Slot | None, str]:
        if _running(state):
            return STAY, None, ""
        ctl = state.memo if isinstance(state.memo, Controller) else Controller()
        state.memo = ctl
        lost = state.current
        if lost is not None and state.since is not None and ctl.lost_since != state.since:
            # Preempted: the controller sees it at its next poll of the job, then recovers.
            polls = -(-(now - state.since).total_seconds() // POLL_S)
            ctl.lost_since = state.since
            ctl.loop, ctl.failed = FIRST, 0
            ctl.next_try = state.since + timedelta(seconds=polls * POLL_S)
        if ctl.next_try is None:
            ctl.next_try = now  # submitted: the first launch at once
        while ctl.next_try <= now + timedelta(microseconds=1):
            target = next(iter(failover_order(self._allowed(ctl, cands))), None)
            if target is not None:
                ctl.launched = (target.cloud, target.region, target.market)
                ctl.next_try, ctl.loop, ctl.failed = None, LAUNCH, 0
                why = "launched" if lost is None else f"recovered ({self.strategy})"
                return REPLACE, target, why
            self._failed(ctl)
        return WAIT, None, f"no capacity ({ctl.loop}, {ctl.failed} failed): retry at backoff"

    def _allowed(self, ctl: Controller, cands: Sequence[Slot]) -> list[Slot]:
        mine = [c for c in cands if self.on_demand or c.market == SPOT]
        if ctl.loop != FIRST or ctl.launched is None:
            return mine
        if self.strategy == FAILOVER:  # the launched resources in their region, any zone
            return [c for c in mine if (c.cloud, c.region, c.market) == ctl.launched]
        return [c for c in mine if (c.cloud, c.region, c.market) != ctl.launched]

    def _failed(self, ctl: Controller) -> None:
        """One attempt found no capacity: when the controller tries again, and in which loop."""
        assert ctl.next_try is not None
        ctl.failed += 1
        if ctl.loop == FIRST and ctl.failed >= FIRST_STEP_ATTEMPTS:
            # The first step gave up (its launched resources are forgotten): anywhere, at once.
            ctl.loop, ctl.failed, ctl.launched = ANYWHERE, 0, None
            return
        if ctl.loop == ANYWHERE and ctl.failed >= ANYWHERE_ATTEMPTS:
            ctl.failed = 0  # "Retrying to recover the cluster in 60 s", a fresh backoff after
            ctl.next_try += timedelta(seconds=RETRY_INIT_GAP_S)
            return
        ctl.next_try += timedelta(seconds=backoff_s(ctl.failed))


def _running(state: RunState) -> bool:
    return state.current is not None and not state.interrupted


def skypilot_policies() -> tuple[Policy, ...]:
    """SkyPilot managed jobs: EAGER_NEXT_REGION (the default), FAILOVER, and the default with
    on-demand as a fallback (`any_of` spot + on-demand)."""
    return (
        SkyPilotRecovery(
            "skypilot-eager", "SkyPilot managed job, EAGER_NEXT_REGION (spot)",
            EAGER_NEXT_REGION, on_demand=False,
        ),
        SkyPilotRecovery(
            "skypilot-failover", "SkyPilot managed job, FAILOVER (spot)", FAILOVER,
            on_demand=False,
        ),
        SkyPilotRecovery(
            "skypilot-eager+od", "SkyPilot managed job, EAGER_NEXT_REGION, spot + on-demand",
            EAGER_NEXT_REGION, on_demand=True,
        ),
    )  # fmt: skip
