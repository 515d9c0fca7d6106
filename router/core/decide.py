"""The pure migration decision: where a running job should be now, and the numbers why.

`decide(rules, progress, current, candidates, history, now)` is shared by `route watch` (one
call per job per loop) and `route backtest` (one call per job per time step): the same code
decides in both, so the backtest measures the policy that runs. No I/O and no clock: `now`,
the candidates (placements available now, at today's prices) and the history are parameters.

Candidates: the placements available now minus zones lost within rules.zone_block_s and minus
spot priced above the cheapest on-demand or reserved candidate (decision_model.worth_running:
capacity that can be taken away is never chosen when capacity that cannot costs less).

Actions, checked in this order (the first that applies wins):

  0. finished      → stay.
     crashed       (current.crashed: a node exited by itself with a failure status and no
                   interruption marker, and the cloud did not say it took a node back —
                   router/core/node_exit.py) → crashed: no re-placement, a paid crash loop
                   otherwise; the job is re-placed only when someone deploys it again.
  1. deadline      (rules.deadline set) Uniform Progress, "Can't Be Late" (NSDI'24):
                   the job should have done total_h × (now − started) / (deadline − started).
     a. slack gone: hours left − work left − hours to get onto on-demand < risk (one restore,
        one checkpoint interval of lost work and one decision period) → on-demand for good:
        stay on on-demand, never move again.
     b. on on-demand, spot there: back to spot (switch-market) when ahead of the line by ≥ 2
        restore overheads, or when — behind the line or not — the slack left after two restores
        (there, and back should spot go again) is still ≥ 2 × risk: spot progresses as fast as
        on-demand, so the line only decides what to do while there is no spot; otherwise stay.
     c. interrupted or not placed: spot if any (spot progresses as fast as on-demand); no spot
        → on-demand when behind the line and the slack, one decision period from now, would
        be under the reserve a return to spot needs (2 restores + 2 × risk, rule b's test);
        otherwise wait. Uniform Progress idles rather than pay on-demand while it is ahead;
        behind the line it still waits while the slack absorbs the outage, and it hedges at
        the last call that leaves it enough slack to come back to spot when spot returns.
     d. running on spot, even behind the line: stay on spot (it catches up as fast as
        on-demand would; the money rules may still move it to cheaper spot, or to any market
        once its spot is dearer than on-demand); the slack test (a) guards the deadline.
  2. interrupted   (or not placed yet) → re-place on the cheapest candidate by expected
                   remaining cost, excluding zones lost within rules.zone_block_s (the zone
                   just lost is excluded until the history records this loss).
  3. cheaper elsewhere → move when
        saving = remaining(current) − remaining(target) − migration cost
                 ≥ min_savings_pct % × remaining(current)
     and the last move is at least cooldown_s ago. A move to another market (on-demand → spot
     once spot returns) is a switch-market; otherwise a move.
  4. otherwise     → stay.

Costs (USD; hours of work left W = total_h − done_h, N = node_count instances):
  remaining(p)  = price_per_hour × N × W × m(N × interruptions_per_hour)
                  m(Λ) = (1/Λ + restore_h) (e^(Λ interval_h) − 1) / interval_h, 1 off spot:
                  router.core.interruption's paid hours per hour of work (the planner's
                  interruption term too); the rate is the candidate's, i.e. the advisor bucket
                  updated by the preemptions seen in that pool (route watch's records, or the
                  trace's past in a backtest)
  migration     = restore_h × target price × node_count     (start and load the checkpoint)
                + redo_h × target price × node_count        (done_h − checkpointed_h, lost)
                + handover_h × current price × node_count   (both placements paid meanwhile)
                + egress of the data set to the target region (router.core.egress model)
                + egress of the checkpoint from the current region to the target region
                  (both only when the region changes: a region keeps its staged data)
A re-placement after an interruption pays the restore and the egress terms (no handover: the
old placement is gone; the lost work is already counted in W, which starts at checkpointed_h).

Every Decision carries its Numbers (what was compared) and one line of reason in dollars, so
`route status --history` can say why a job moved or stayed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from router.core.decision_model import (
    CRASHED,
    MOVE,
    ON_DEMAND,
    REPLACE,
    SPOT,
    STAY,
    SWITCH_MARKET,
    WAIT,
    Capacity,
    Current,
    Decision,
    History,
    Numbers,
    Progress,
    Rules,
    reliable_floor,
    same_capacity,
    worth_running,
    zone_key,
)
from router.core.interruption import group_rate, work_multiplier


def remaining_cost(rules: Rules, p: Capacity, work_left_h: float) -> float:
    """Expected USD to finish work_left_h on p at today's price, interruptions included
    (router.core.interruption: the group's rate and the paid hours per hour of work)."""
    rate = p.interruptions_per_hour
    m = 1.0
    if rate > 0:
        m = work_multiplier(
            group_rate(rate, rules.node_count), rules.restore_h, rules.checkpoint_interval_s / 3600
        )
    return p.price_per_hour * rules.node_count * work_left_h * m


def arrival_cost(rules: Rules, p: Capacity, src: Capacity | None, redo_h: float) -> float:
    """USD to get the job running on p: restore, lost work, data and checkpoint egress."""
    t = rules.transfers
    usd = (rules.restore_h + redo_h) * p.price_per_hour * rules.node_count
    if src is None:
        usd += t.data_to(p.cloud, p.region)
    elif (src.cloud, src.region) != (p.cloud, p.region):
        # A region keeps its staged copy of the data; a new region needs both moved in.
        usd += t.data_to(p.cloud, p.region)
        usd += t.checkpoint(src.cloud, src.region, p.cloud, p.region)
    return usd


def _place(p: Capacity) -> str:
    zone = f"/{p.zone}" if p.zone else ""
    return f"{p.cloud} {p.region}{zone} {p.instance_type} {p.market} ${p.price_per_hour:,.2f}/h"


def decide(
    rules: Rules,
    progress: Progress,
    current: Current | None,
    candidates: Sequence[Capacity],
    history: History,
    now: datetime,
) -> Decision:
    """Where the job should run now (stay, move, replace, switch-market or wait), with numbers."""
    if now.tzinfo is None:
        raise ValueError("decide(now=...) must be timezone-aware (UTC)")
    interrupted = current is None or current.interrupted
    done = progress.checkpointed_h if interrupted else progress.done_h
    work_left = max(0.0, progress.total_h - done)
    if progress.finished and not interrupted:
        return Decision(STAY, None, "finished", Numbers(work_left_h=0.0))
    if current is not None and current.crashed:
        return Decision(
            CRASHED, None,
            f"crashed: {current.crashed} — not re-placed (a crash would repeat on any "
            "placement); fix the job, then `route deploy` it again",
            Numbers(work_left_h=work_left), considered=len(candidates),
        )  # fmt: skip

    blocked = history.blocked(now, rules.zone_block_s) if history.lost_zones else frozenset()
    here = None if current is None else current.placement
    if current is not None and current.interrupted:
        lost = zone_key(current.placement)
        # The zone just lost is out until the history records this loss (one at or after the
        # job was placed there: the backtest records it at the interruption, route watch on
        # re-placing); from then on it is out for zone_block_s like any other lost zone.
        if not any(z == lost and at >= current.since for z, at in history.lost_zones):
            blocked = blocked | {lost}
    # Spot dearer than on-demand at this moment is no option (reliable_floor, worth_running).
    usable = worth_running([c for c in candidates if zone_key(c) not in blocked])

    if rules.deadline is not None:
        decision = _deadline(rules, progress, current, usable, history, now, work_left)
        if decision is not None:
            return decision

    if interrupted:
        return _replace(rules, here, usable, work_left, len(candidates), "")
    assert current is not None and here is not None
    return _maybe_move(rules, progress, current, usable, history, now, work_left, len(candidates))


def _cheapest(
    rules: Rules, src: Capacity | None, options: Sequence[Capacity], work_left: float, redo: float
) -> tuple[Capacity, float, float] | None:
    """The option with the least remaining + arrival cost: (option, remaining, arrival)."""
    best: tuple[Capacity, float, float] | None = None
    best_rank: tuple[float, tuple[str, ...]] = (0.0, ())
    for p in options:
        rem = remaining_cost(rules, p, work_left)
        arrive = arrival_cost(rules, p, src, redo)
        rank = (rem + arrive, _name(p))  # ties go by name: input order never matters
        if best is None or rank < best_rank:
            best, best_rank = (p, rem, arrive), rank
    return best


def _name(p: Capacity) -> tuple[str, ...]:
    return (p.cloud, p.region, p.zone or "", p.instance_type, p.market)


def _replace(
    rules: Rules,
    lost: Capacity | None,
    usable: Sequence[Capacity],
    work_left: float,
    considered: int,
    why: str,
    *,
    markets: tuple[str, ...] = (),
    commit: bool = False,
    extra: dict[str, float | None] | None = None,
) -> Decision:
    options = [c for c in usable if not markets or c.market in markets]
    found = _cheapest(rules, lost, options, work_left, 0.0)
    numbers = Numbers(work_left_h=work_left, **(extra or {}))
    if found is None:
        what = "/".join(markets) if markets else "any"
        return Decision(
            WAIT, None, f"{why}no {what} capacity available now: waiting", numbers, commit,
            considered,
        )  # fmt: skip
    target, rem, arrive = found
    numbers = Numbers(
        work_left_h=work_left,
        target_remaining_usd=rem,
        migration_usd=arrive,
        **(extra or {}),
    )
    head = "not placed yet" if lost is None else f"lost {_place(lost)}"
    return Decision(
        REPLACE,
        target,
        f"{why}{head}: re-place on {_place(target)} — ${rem:,.2f} for {work_left:.2f} h "
        f"+ ${arrive:,.2f} to start there",
        numbers,
        commit,
        considered,
    )


def _maybe_move(
    rules: Rules,
    progress: Progress,
    current: Current,
    usable: Sequence[Capacity],
    history: History,
    now: datetime,
    work_left: float,
    considered: int,
    *,
    markets: tuple[str, ...] = (),
    extra: dict[str, float | None] | None = None,
) -> Decision:
    here = current.placement
    redo = max(0.0, progress.done_h - progress.checkpointed_h)
    mine = remaining_cost(rules, here, work_left)
    threshold = rules.min_savings_pct / 100.0 * mine
    handover = rules.handover_s / 3600.0 * here.price_per_hour * rules.node_count
    best: tuple[Capacity, float, float, float] | None = None
    for p in usable:
        if same_capacity(p, here) or (markets and p.market not in markets):
            continue
        # Redo counts as extra work on the new placement, so it enters the arrival cost.
        rem = remaining_cost(rules, p, work_left)
        move = arrival_cost(rules, p, here, redo) + handover
        saving = mine - rem - move
        if best is None or (-saving, _name(p)) < (-best[3], _name(best[0])):
            best = (p, rem, move, saving)
    extra = extra or {}
    if best is None:
        return Decision(
            STAY,
            None,
            f"stay on {_place(here)}: no other capacity to compare",
            Numbers(work_left_h=work_left, current_remaining_usd=mine, **extra),
            considered=considered,
        )
    target, rem, move, saving = best
    cooldown_left = 0.0
    if history.last_move_at is not None:
        cooldown_left = max(0.0, rules.cooldown_s - (now - history.last_move_at).total_seconds())
    numbers = Numbers(
        work_left_h=work_left,
        current_remaining_usd=mine,
        target_remaining_usd=rem,
        migration_usd=move,
        saving_usd=saving,
        threshold_usd=threshold,
        cooldown_left_s=cooldown_left,
        **extra,
    )
    compared = (
        f"{_place(target)} saves ${saving:,.2f} (${mine:,.2f} here − ${rem:,.2f} there − "
        f"${move:,.2f} to move) over {work_left:.2f} h"
    )
    if saving < threshold or saving <= 0:
        return Decision(
            STAY,
            target,
            f"stay: {compared}, under {rules.min_savings_pct:g} % (${threshold:,.2f})",
            numbers,
            considered=considered,
        )
    if cooldown_left > 0:
        return Decision(
            STAY,
            target,
            f"stay: {compared}, but the last move was {_hours(rules.cooldown_s - cooldown_left)} "
            f"ago (cooldown {_hours(rules.cooldown_s)})",
            numbers,
            considered=considered,
        )
    action = SWITCH_MARKET if target.market != here.market else MOVE
    return Decision(action, target, f"{action}: {compared}", numbers, considered=considered)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def deadline_slack(
    rules: Rules, progress: Progress, current: Current | None, now: datetime
) -> tuple[float, float, float]:
    """(hours to the deadline, slack, risk), hours: on-demand for good once slack < risk.

    slack = hours left − work left − hours to get onto on-demand (restore + redo unless on it);
    risk  = what staying off on-demand one more decision period can cost: a restore, a
            checkpoint interval of lost work and the period itself.
    """
    assert rules.deadline is not None
    interrupted = current is None or current.interrupted
    here = None if current is None else current.placement
    on_demand_now = not interrupted and here is not None and here.market != SPOT
    done = progress.checkpointed_h if interrupted else progress.done_h
    work_left = max(0.0, progress.total_h - done)
    redo = 0.0 if interrupted else max(0.0, progress.done_h - progress.checkpointed_h)
    hours_left = (rules.deadline - now).total_seconds() / 3600.0
    to_on_demand_h = 0.0 if on_demand_now else rules.restore_h + redo
    slack = hours_left - work_left - to_on_demand_h
    return hours_left, slack, _risk_h(rules)


def _risk_h(rules: Rules) -> float:
    return rules.restore_h + (rules.checkpoint_interval_s + rules.decision_period_s) / 3600.0


def return_reserve_h(rules: Rules) -> float:
    """Slack (hours) a job on on-demand needs to go back to spot: 2 restores + 2 × risk.

    One restore there and one back should spot go again, and twice the slack test's risk
    (restore + checkpoint interval + decision period), so the slack test still has margin.
    """
    return 2 * rules.restore_h + 2 * _risk_h(rules)


def _deadline(
    rules: Rules,
    progress: Progress,
    current: Current | None,
    usable: Sequence[Capacity],
    history: History,
    now: datetime,
    work_left: float,
) -> Decision | None:
    """Uniform Progress; None when the deadline leaves the choice to the money rules."""
    assert rules.deadline is not None
    interrupted = current is None or current.interrupted
    here = None if current is None else current.placement
    on_demand_now = not interrupted and here is not None and here.market != SPOT
    redo = 0.0 if interrupted else max(0.0, progress.done_h - progress.checkpointed_h)
    hours_left, slack, risk = deadline_slack(rules, progress, current, now)
    span_h = (rules.deadline - progress.started_at).total_seconds() / 3600.0
    elapsed_h = (now - progress.started_at).total_seconds() / 3600.0
    line = progress.total_h * min(1.0, elapsed_h / span_h) if span_h > 0 else progress.total_h
    done = progress.checkpointed_h if interrupted else progress.done_h
    ahead = done - line
    extra: dict[str, float | None] = {"hours_left": hours_left, "slack_h": slack, "ahead_h": ahead}
    n = len(usable)
    on_demand = [c for c in usable if c.market != SPOT]
    spot = [c for c in usable if c.market == SPOT]

    if history.committed_on_demand or slack < risk:
        why = f"deadline: slack {slack:.2f} h < risk {risk:.2f} h — on-demand for good; "
        if on_demand_now:
            assert here is not None
            return Decision(
                STAY, None, f"{why}stay on {_place(here)}", Numbers(work_left, **extra), True, n
            )  # fmt: skip
        return _switch(rules, current, on_demand, work_left, n, why, extra, redo=redo, commit=True)

    if on_demand_now:
        assert current is not None
        if ahead >= 2 * rules.restore_h and spot:
            why = f"deadline: {ahead:.2f} h ahead (≥ 2 restores) — back to spot; "
            return _switch(rules, current, spot, work_left, n, why, extra, redo=redo)
        # Spot is back and progresses as fast as on-demand: behind the line or not, go back
        # while the deadline stays safe after paying the restore there and, should spot go
        # again, the restore back here (the slack test then still has a period of margin).
        if spot and slack >= return_reserve_h(rules):
            spare = slack - 2 * rules.restore_h
            why = f"deadline: slack {spare:.2f} h after two restores ≥ 2 × risk — back to spot; "
            return _switch(rules, current, spot, work_left, n, why, extra, redo=redo)
        return _maybe_move(
            rules, progress, current, on_demand, history, now, work_left, n,
            markets=(ON_DEMAND, "reserved"), extra=extra,
        )  # fmt: skip

    if interrupted:
        # Spot progresses as fast as on-demand: on-demand only when there is no spot to run on.
        if spot:
            why = f"deadline: {ahead:+.2f} h against the line, spot available — spot; "
            return _replace(rules, here, spot, work_left, n, why, extra=extra)
        reserve = return_reserve_h(rules)
        period_h = rules.decision_period_s / 3600.0
        if ahead < 0 and slack - period_h < reserve:
            why = (
                f"deadline: {-ahead:.2f} h behind the line, slack {slack:.2f} h − one period "
                f"< reserve {reserve:.2f} h, no spot — on-demand; "
            )
            return _replace(rules, here, on_demand, work_left, n, why, extra=extra)
        if ahead < 0:
            why = (
                f"deadline: {-ahead:.2f} h behind the line but slack {slack:.2f} h absorbs "
                f"the outage (reserve {reserve:.2f} h) — "
            )
        else:
            why = f"deadline: {ahead:.2f} h ahead of the line — "
        return _replace(rules, here, (), work_left, n, why, markets=(SPOT,), extra=extra)
    assert current is not None
    if current.placement.price_per_hour > reliable_floor(usable):
        # Spot got dearer than on-demand: the money rules over every market decide.
        return _maybe_move(
            rules, progress, current, usable, history, now, work_left, n, extra=extra
        )
    return _maybe_move(
        rules, progress, current, spot, history, now, work_left, n, markets=(SPOT,), extra=extra
    )


def _switch(
    rules: Rules,
    current: Current | None,
    options: Sequence[Capacity],
    work_left: float,
    considered: int,
    why: str,
    extra: dict[str, float | None],
    *,
    redo: float = 0.0,
    commit: bool = False,
) -> Decision:
    """Go to the cheapest of options now: re-place when interrupted, else switch-market."""
    if current is None or current.interrupted:
        lost = None if current is None else current.placement
        return _replace(
            rules, lost, options, work_left, considered, why, commit=commit, extra=extra
        )
    here = current.placement
    found = _cheapest(rules, here, options, work_left, redo)
    if found is None:
        return Decision(
            STAY, None, f"{why}but no capacity of that market now: stay on {_place(here)}",
            Numbers(work_left, **extra), commit, considered,
        )  # fmt: skip
    target, rem, arrive = found
    handover = rules.handover_s / 3600.0 * here.price_per_hour * rules.node_count
    return Decision(
        SWITCH_MARKET,
        target,
        f"{why}switch to {_place(target)}: ${rem:,.2f} for {work_left:.2f} h + "
        f"${arrive + handover:,.2f} to move",
        Numbers(
            work_left_h=work_left,
            current_remaining_usd=remaining_cost(rules, here, work_left),
            target_remaining_usd=rem,
            migration_usd=arrive + handover,
            **extra,
        ),
        commit,
        considered,
    )
