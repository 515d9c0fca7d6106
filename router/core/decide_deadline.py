"""decide()'s deadline rules: the slack test and Uniform Progress ("Can't Be Late", NSDI'24)
as changed here (router/core/decide.py's docstring has the rules in order, docs/backtest.md why).
Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from router.core.decide_money import (
    cheapest,
    maybe_move,
    place_text,
    remaining_cost,
    replace_on,
    spot_multiplier,
)
from router.core.decision_model import (
    ON_DEMAND,
    SPOT,
    STAY,
    SWITCH_MARKET,
    Capacity,
    Current,
    Decision,
    History,
    Numbers,
    Progress,
    Rules,
    reliable_floor,
)

# Uniform Progress hedges on on-demand as soon as a job with no spot falls behind its line. Here
# a job with its own deadline may fall behind by this share of its slack (deadline − submission −
# work) first: a short outage is waited out without buying on-demand, a long one is hedged early
# enough to keep slack for the returns to spot that come after it. Calibrated on the real traces
# (docs/benchmarks.md, "Issue 20 round 4": 0 = the published rule, 0.25, 0.5, none).
HEDGE_SLACK_SHARE = 0.25


def hedge_tolerance_h(rules: Rules, progress: Progress) -> float:
    """Hours of work a job with its own deadline may fall behind the line before it hedges."""
    assert rules.deadline is not None
    span_h = (rules.deadline - progress.started_at).total_seconds() / 3600.0
    return HEDGE_SLACK_SHARE * max(0.0, span_h - progress.total_h)


def soft_deadline(
    rules: Rules, progress: Progress, current: Current | None, now: datetime
) -> Rules:
    """The rules with the deadline a job without one gets from rules.spot_wait_s — submitted +
    its work + the wait — while that wait lasts; unchanged otherwise.

    With it decide() waits out spot outages (Uniform Progress) instead of buying on-demand at
    once. Once the slack is down to the reserve (what a return to spot needs) the wait is spent
    and the plain money rules take over: on-demand when there is no spot, back to spot when
    that pays — never on-demand for good, never unfinishable. What it assumes: finishing up to
    spot_wait_s later is worth nothing to the job (0 USD/h of delay within the bound).
    """
    if rules.deadline is not None or not rules.wait_for_spot or rules.spot_wait_s <= 0:
        return rules
    if math.isinf(rules.spot_wait_s):  # `forever`: no deadline, spot_only_decision instead
        return rules
    due = progress.started_at + timedelta(hours=progress.total_h, seconds=rules.spot_wait_s)
    soft = replace(rules, deadline=due)
    _, slack, _ = deadline_slack(soft, progress, current, now)
    if slack - rules.decision_period_s / 3600.0 <= return_reserve_h(rules):
        return rules
    return soft


def deadline_slack(
    rules: Rules,
    progress: Progress,
    current: Current | None,
    now: datetime,
    *,
    spot_now: bool = False,
) -> tuple[float, float, float]:
    """(hours to the deadline, slack, risk), hours: on-demand for good once slack ≤ risk.

    slack = hours left − work left − hours to get onto on-demand (a restart — the launch and
            the restore, Rules.restart_h — and the redo, unless on it);
    risk  = what staying off on-demand until the next decision can cost the slack: the period
            itself, the work the checkpoint interval can still lose on spot (interval − redo
            running there, a whole interval for a job that would take the spot there is now,
            `spot_now`; none while it waits) and one restart as a pad (the least certain
            number; a first start or a pending restore is within it).
    """
    assert rules.deadline is not None
    interrupted = current is None or current.interrupted
    here = None if current is None else current.placement
    on_demand_now = not interrupted and here is not None and here.market != SPOT
    done = progress.checkpointed_h if interrupted else progress.done_h
    work_left = max(0.0, progress.total_h - done)
    redo = 0.0 if interrupted else max(0.0, progress.done_h - progress.checkpointed_h)
    hours_left = (rules.deadline - now).total_seconds() / 3600.0
    to_on_demand_h = 0.0 if on_demand_now else rules.restart_h + redo
    slack = hours_left - work_left - to_on_demand_h
    risk = rules.restart_h + rules.decision_period_s / 3600.0
    if not interrupted and not on_demand_now:
        risk += max(0.0, rules.checkpoint_interval_s / 3600.0 - redo)
    elif interrupted and spot_now:
        risk += rules.checkpoint_interval_s / 3600.0
    return hours_left, slack, risk


def _risk_h(rules: Rules) -> float:
    """The most the slack test's risk can be: a restart, a whole interval and the period."""
    return rules.restart_h + (rules.checkpoint_interval_s + rules.decision_period_s) / 3600.0


def latest_start(rules: Rules, work_h: float) -> datetime:
    """The latest start that leaves a job the slack to take spot: deadline − work − a restart
    (to get onto on-demand) − the most the slack test risks. A later start would be sent to
    on-demand for good at once, so a price saving on spot could not be had (`route plan`'s
    later start, router/flows/timeshift.py)."""
    assert rules.deadline is not None
    return rules.deadline - timedelta(hours=work_h + rules.restart_h + _risk_h(rules))


def return_reserve_h(rules: Rules) -> float:
    """Slack (hours) a job on on-demand needs to go back to spot: 2 restarts + the most risk.

    On spot its slack counts the restart back to on-demand, and the restart there spends as
    much: 2 restarts (each a launch and a restore); then the slack test must still pass with a
    whole checkpoint interval to lose (restart + interval + period), or the return would be
    followed by a commit.
    """
    return 2 * rules.restart_h + _risk_h(rules)


def spot_overhead_h(rules: Rules, current: Current | None, work_left_h: float) -> float:
    """Hours of slack the work left spends on preemptions if it runs on spot: W × (m(Λ) − 1).

    m(Λ) is router.core.interruption's paid hours per hour of work (restores and lost work) at
    the rate of the spot zone the job runs on or was just lost from (0 off spot, or not placed
    yet: nothing seen to price it with). Each preemption costs the deadline a restore and the
    work at risk, so a job that will run its remaining work on spot must keep that much slack
    for it: waiting out an outage spends slack that would buy far more spot later (an hour
    waited saves one hour of on-demand; the same hour kept for preemptions keeps 1 / (m − 1)
    hours on spot instead of on-demand).
    """
    if current is None or current.placement.market != SPOT:
        return 0.0
    return work_left_h * (spot_multiplier(rules, current.placement) - 1.0)


def hedge_reserve_h(
    rules: Rules, current: Current | None, work_left_h: float, *, own_deadline: bool
) -> float:
    """Slack (hours) below which a job with no spot stops waiting and hedges on on-demand: the
    reserve a return to spot needs, and — a job with its own deadline — the slack its work left
    spends on spot preemptions (spot_overhead_h). A job waiting under migration.spot_wait spends
    its wait on outages: the money rules run it once the wait is spent."""
    reserve = return_reserve_h(rules)
    if own_deadline:
        reserve += spot_overhead_h(rules, current, work_left_h)
    return reserve


def at_most(hours: float, margin: float) -> bool:
    """hours ≤ margin, up to a microsecond: a job asked again at the moment its slack reaches
    the margin (wake_after_h) acts then, whatever the rounding of the times."""
    return hours <= margin + 1e-9


def line_ahead(
    rules: Rules, progress: Progress, current: Current | None, now: datetime
) -> tuple[float, float]:
    """(hours of work ahead of the Uniform Progress line, hours of work the line gains per hour).

    The line runs straight from no work at submission to all of it at the deadline.
    """
    assert rules.deadline is not None
    interrupted = current is None or current.interrupted
    span_h = (rules.deadline - progress.started_at).total_seconds() / 3600.0
    elapsed_h = (now - progress.started_at).total_seconds() / 3600.0
    line = progress.total_h * min(1.0, elapsed_h / span_h) if span_h > 0 else progress.total_h
    done = progress.checkpointed_h if interrupted else progress.done_h
    speed = progress.total_h / span_h if span_h > 0 and elapsed_h < span_h else 0.0
    return done - line, speed


def wake_after_h(
    rules: Rules, progress: Progress, current: Current | None, now: datetime
) -> float | None:
    """Hours until a job that waits could be decided otherwise with nothing else changing.

    While a job waits its slack shrinks hour for hour and the line moves on, so decide() would
    answer differently once the slack reaches the risk (or, waiting for spot, the hedge at the
    reserve), the line catches up, or (own deadline) the job falls behind it by the hedge band.
    `route watch` finds out within its period; the backtest asks decide() again at that moment
    inside its step. None without a deadline or crossing.
    """
    own_deadline = rules.deadline is not None
    rules = soft_deadline(rules, progress, current, now)
    if rules.deadline is None:
        return None
    _, slack, risk = deadline_slack(rules, progress, current, now)
    times = [slack - risk]
    if rules.wait_for_spot:
        ahead, speed = line_ahead(rules, progress, current, now)
        interrupted = current is None or current.interrupted
        done = progress.checkpointed_h if interrupted else progress.done_h
        reserve = hedge_reserve_h(
            rules, current, max(0.0, progress.total_h - done), own_deadline=own_deadline
        )
        times.append(slack - rules.decision_period_s / 3600.0 - reserve)
        if speed > 0:
            times.append(ahead / speed)
            if own_deadline:  # the hedge band's edge (hedge_tolerance_h)
                times.append((ahead + hedge_tolerance_h(rules, progress)) / speed)
    future = [t for t in times if t > 1e-9]
    return min(future) if future else None


def deadline_decision(
    rules: Rules,
    progress: Progress,
    current: Current | None,
    usable: Sequence[Capacity],
    history: History,
    now: datetime,
    work_left: float,
    *,
    own_deadline: bool = True,
) -> Decision | None:
    """Uniform Progress; None when the deadline leaves the choice to the money rules.

    own_deadline False: the deadline is the wait's end (soft_deadline), which has no band — a
    job without a deadline spends its wait on outages and hedges only at the reserve.
    """
    assert rules.deadline is not None
    interrupted = current is None or current.interrupted
    here = None if current is None else current.placement
    on_demand_now = not interrupted and here is not None and here.market != SPOT
    spot_now = any(c.market == SPOT for c in usable)
    hours_left, slack, risk = deadline_slack(rules, progress, current, now, spot_now=spot_now)
    ahead, _ = line_ahead(rules, progress, current, now)
    extra: dict[str, float | None] = {"hours_left": hours_left, "slack_h": slack, "ahead_h": ahead}
    n = len(usable)
    on_demand = [c for c in usable if c.market != SPOT]
    spot = [c for c in usable if c.market == SPOT]

    if history.committed_on_demand or at_most(slack, risk):
        why = f"deadline: slack {slack:.2f} h < risk {risk:.2f} h — on-demand for good; "
        if on_demand_now:
            assert here is not None
            return Decision(
                STAY, None, f"{why}stay on {place_text(here)}", Numbers(work_left, **extra), True, n
            )  # fmt: skip
        return _switch(rules, current, on_demand, work_left, n, why, extra, commit=True)

    if not rules.wait_for_spot:
        # The money rules place and move the job (never idle); the deadline only keeps a job on
        # on-demand from going back to spot without the slack a return needs (rule b's reserve).
        if on_demand_now and slack < return_reserve_h(rules):
            assert current is not None
            return maybe_move(
                rules, progress, current, on_demand, history, now, work_left, n,
                markets=(ON_DEMAND, "reserved"), extra=extra,
            )  # fmt: skip
        return None

    if on_demand_now:
        assert current is not None
        # Back to spot (behind the line or not: spot progresses as fast as on-demand) only
        # while the deadline stays safe should the stint fail — the reserve: a restore there,
        # one back, twice the risk — and only where the stint pays for the switch: the money
        # rules over spot decide (a zone lost every 50 minutes keeps ~0.5 h of work, less than
        # a restore and a hand-over cost).
        reserve = return_reserve_h(rules)
        if spot and slack >= reserve:
            back = maybe_move(
                rules, progress, current, spot, history, now, work_left, n,
                markets=(SPOT,), extra=extra,
            )  # fmt: skip
            why = (
                f"deadline: slack {slack:.2f} h ≥ reserve {reserve:.2f} h, back to spot if it "
                "pays — "
            )
            return replace(back, reason=why + back.reason)
        return maybe_move(
            rules, progress, current, on_demand, history, now, work_left, n,
            markets=(ON_DEMAND, "reserved"), extra=extra,
        )  # fmt: skip

    if interrupted:
        # Spot progresses as fast as on-demand: on-demand only when there is no spot to run on.
        if spot:
            why = f"deadline: {ahead:+.2f} h against the line, spot available — spot; "
            return replace_on(rules, here, spot, work_left, n, why, extra=extra)
        reserve = hedge_reserve_h(rules, current, work_left, own_deadline=own_deadline)
        period_h = rules.decision_period_s / 3600.0
        band = hedge_tolerance_h(rules, progress) if own_deadline else None
        if ahead < 0 and at_most(slack - period_h, reserve):
            why = (
                f"deadline: {-ahead:.2f} h behind the line, slack {slack:.2f} h − one period "
                f"< reserve {reserve:.2f} h (a return to spot and the preemptions of the work "
                "left), no spot — on-demand; "
            )
            return replace_on(rules, here, on_demand, work_left, n, why, extra=extra)
        if band is not None and at_most(band, -ahead):
            why = (
                f"deadline: {-ahead:.2f} h behind the line, the band ({band:.2f} h, "
                f"{HEDGE_SLACK_SHARE:.0%} of the slack) spent, no spot — on-demand; "
            )
            return replace_on(rules, here, on_demand, work_left, n, why, extra=extra)
        if ahead < 0:
            why = (
                f"deadline: {-ahead:.2f} h behind the line but slack {slack:.2f} h absorbs "
                f"the outage (reserve {reserve:.2f} h"
                + ("" if band is None else f", band {band:.2f} h")
                + ") — "
            )
        else:
            why = f"deadline: {ahead:.2f} h ahead of the line — "
        return replace_on(rules, here, (), work_left, n, why, markets=(SPOT,), extra=extra)
    assert current is not None
    if current.placement.price_per_hour > reliable_floor(usable):
        # Spot got dearer than on-demand: the money rules over every market decide.
        return maybe_move(rules, progress, current, usable, history, now, work_left, n, extra=extra)
    return maybe_move(
        rules, progress, current, spot, history, now, work_left, n, markets=(SPOT,), extra=extra
    )


def waits_forever(rules: Rules) -> bool:
    """A job without a deadline whose migration.spot_wait is `forever`: spot only."""
    return rules.deadline is None and rules.wait_for_spot and math.isinf(rules.spot_wait_s)


def spot_only_decision(
    rules: Rules,
    progress: Progress,
    current: Current | None,
    usable: Sequence[Capacity],
    history: History,
    now: datetime,
    work_left: float,
) -> Decision | None:
    """migration.spot_wait `forever`: spot whenever there is some, otherwise wait however long
    (never on-demand), moving between spot pools by the money rules; None (the money rules over
    every market) for a job running off spot, or on spot dearer than on-demand (decide() does not
    hold a job for spot that is up but dearer: waiting would not bring a cheaper one back).
    """
    interrupted = current is None or current.interrupted
    here = None if current is None else current.placement
    spot = [c for c in usable if c.market == SPOT]
    why = "no deadline, waiting for spot however long (migration.spot_wait: forever): "
    if interrupted:
        return replace_on(rules, here, spot, work_left, len(usable), why, markets=(SPOT,))
    assert current is not None and here is not None
    if here.market != SPOT or here.price_per_hour > reliable_floor(usable):
        return None
    return maybe_move(
        rules, progress, current, spot, history, now, work_left, len(usable), markets=(SPOT,)
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
    commit: bool = False,
) -> Decision:
    """Go to the cheapest of options now: re-place when interrupted, else switch-market."""
    if current is None or current.interrupted:
        lost = None if current is None else current.placement
        return replace_on(
            rules, lost, options, work_left, considered, why, commit=commit, extra=extra
        )
    here = current.placement
    found = cheapest(rules, here, options, work_left, 0.0)  # a move saves a checkpoint first
    if found is None:
        return Decision(
            STAY, None, f"{why}but no capacity of that market now: stay on {place_text(here)}",
            Numbers(work_left, **extra), commit, considered,
        )  # fmt: skip
    target, rem, arrive = found
    handover = rules.handover_s / 3600.0 * here.price_per_hour * rules.node_count
    return Decision(
        SWITCH_MARKET,
        target,
        f"{why}switch to {place_text(target)}: ${rem:,.2f} for {work_left:.2f} h + "
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
