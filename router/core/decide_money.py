"""decide()'s money rules: expected remaining cost, the cost of arriving on a placement, the
cheapest re-placement and the move test (saving ≥ min_savings_pct % outside the cooldown). Pure.

The formulas are in router/core/decide.py's docstring (router.core.interruption prices spot).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from router.core.decision_model import (
    MOVE,
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
    same_capacity,
)
from router.core.interruption import group_rate, stint_work_h, work_multiplier


def remaining_cost(rules: Rules, p: Capacity, work_left_h: float) -> float:
    """Expected USD to finish work_left_h on p at today's price, interruptions included
    (router.core.interruption: the group's rate and the paid hours per hour of work)."""
    return _remaining(rules, p.price_per_hour, p.interruptions_per_hour, work_left_h)


def _remaining(rules: Rules, price: float, rate: float, work_left_h: float) -> float:
    return price * rules.node_count * work_left_h * _multiplier(rules, rate)


def spot_multiplier(rules: Rules, p: Capacity) -> float:
    """Paid hours per hour of work on p (1 off spot): router.core.interruption's m(Λ) at p's
    rate for the job's group, restore and work at risk."""
    return _multiplier(rules, p.interruptions_per_hour)


def _multiplier(rules: Rules, rate: float) -> float:
    if rate <= 0:
        return 1.0
    return work_multiplier(
        group_rate(rate, rules.node_count), rules.restore_h, rules.checkpoint_interval_s / 3600
    )


def stint_h(rules: Rules, p: Capacity) -> float:
    """Hours of work p keeps on average before it is lost (inf off spot): interruption model."""
    rate = p.interruptions_per_hour
    if rate <= 0:
        return math.inf
    return stint_work_h(
        group_rate(rate, rules.node_count), rules.restore_h, rules.checkpoint_interval_s / 3600
    )


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


def place_text(p: Capacity) -> str:
    zone = f"/{p.zone}" if p.zone else ""
    return f"{p.cloud} {p.region}{zone} {p.instance_type} {p.market} ${p.price_per_hour:,.2f}/h"


def cheapest(
    rules: Rules, src: Capacity | None, options: Sequence[Capacity], work_left: float, redo: float
) -> tuple[Capacity, float, float] | None:
    """The option with the least remaining + arrival cost: (option, remaining, arrival)."""
    best: tuple[Capacity, float, float] | None = None
    best_rank: tuple[float, float, float, tuple[str, ...]] = (0.0, 0.0, 0.0, ())
    for p in options:
        rem = remaining_cost(rules, p, work_left)
        arrive = arrival_cost(rules, p, src, redo)
        # Ties go by interruption rate, price, then name: input order never matters.
        rank = (rem + arrive, p.interruptions_per_hour, p.price_per_hour, _name(p))
        if best is None or rank < best_rank:
            best, best_rank = (p, rem, arrive), rank
    return best


def _tie(usd: float, p: Capacity) -> tuple[float, float, float, tuple[str, ...]]:
    return (usd, p.interruptions_per_hour, p.price_per_hour, _name(p))


def _name(p: Capacity) -> tuple[str, ...]:
    return (p.cloud, p.region, p.zone or "", p.instance_type, p.market)


def replace_on(
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
    found = cheapest(rules, lost, options, work_left, 0.0)
    numbers = Numbers(work_left_h=work_left, **(extra or {}))
    if found is None:
        what = "/".join(markets) + " " if markets else ""  # never "no any capacity"
        return Decision(
            WAIT, None, f"{why}no {what}capacity available now: waiting", numbers, commit,
            considered,
        )  # fmt: skip
    target, rem, arrive = found
    numbers = Numbers(
        work_left_h=work_left,
        target_remaining_usd=rem,
        migration_usd=arrive,
        **(extra or {}),
    )
    head = "not placed yet" if lost is None else f"lost {place_text(lost)}"
    return Decision(
        REPLACE,
        target,
        f"{why}{head}: re-place on {place_text(target)} — ${rem:,.2f} for {work_left:.2f} h "
        f"+ ${arrive:,.2f} to start there",
        numbers,
        commit,
        considered,
    )


def maybe_move(
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
    mine = remaining_cost(rules, here, work_left)
    handover = rules.handover_s / 3600.0 * here.price_per_hour * rules.node_count
    # (target, its remaining, move cost, saving, horizon h, here over h)
    best: tuple[Capacity, float, float, float, float, float] | None = None
    for p in usable:
        if same_capacity(p, here) or (markets and p.market not in markets):
            continue
        # A move pays off only over the work the target keeps before it is lost (then the job
        # moves on anyway): the saving is counted over min(work left, its stint's work).
        h = min(work_left, stint_h(rules, p))
        rate = p.interruptions_per_hour
        if here.market == SPOT and p.market == SPOT:
            # A running spot placement is not left for a lower rate alone: it has lasted so
            # far, and GPU spot up-times are heavy-tailed (most stints end within minutes, the
            # ones that last go on). Spot against spot, the price decides.
            rate = max(rate, here.interruptions_per_hour)
        rem = _remaining(rules, p.price_per_hour, rate, h)
        mine_h = mine if h >= work_left else remaining_cost(rules, here, h)
        # A move saves a checkpoint first (route migrate's save request): no work is lost.
        move = arrival_cost(rules, p, here, 0.0) + handover
        saving = mine_h - rem - move
        if best is None or _tie(-saving, p) < _tie(-best[3], best[0]):
            best = (p, rem, move, saving, h, mine_h)
    extra = extra or {}
    if best is None:
        return Decision(
            STAY,
            None,
            f"stay on {place_text(here)}: no other capacity to compare",
            Numbers(work_left_h=work_left, current_remaining_usd=mine, **extra),
            considered=considered,
        )
    target, rem, move, saving, horizon, mine_h = best
    threshold = rules.min_savings_pct / 100.0 * mine_h
    cooldown_left = 0.0
    if history.last_move_at is not None:
        cooldown_left = max(0.0, rules.cooldown_s - (now - history.last_move_at).total_seconds())
    numbers = Numbers(
        work_left_h=work_left,
        current_remaining_usd=mine_h,
        target_remaining_usd=rem,
        migration_usd=move,
        saving_usd=saving,
        threshold_usd=threshold,
        cooldown_left_s=cooldown_left,
        **extra,
    )
    over = (
        f"{work_left:.2f} h"
        if horizon >= work_left
        else (f"the {horizon:.2f} h of work it keeps before it is lost (of {work_left:.2f} h)")
    )
    compared = (
        f"{place_text(target)} {saving_text(saving)} (${mine_h:,.2f} here − ${rem:,.2f} there − "
        f"${move:,.2f} to move) over {over}"
    )
    if saving < threshold or saving <= 0:
        # A move that would lose money is not "under" the threshold: it is no saving at all.
        under = f", under {rules.min_savings_pct:g} % (${threshold:,.2f})" if saving > 0 else ""
        return Decision(
            STAY,
            target,
            f"stay: {compared}{under}",
            numbers,
            considered=considered,
        )
    if cooldown_left > 0:
        return Decision(
            STAY,
            target,
            f"stay: {compared}, but the last move was "
            f"{hours_text(rules.cooldown_s - cooldown_left)} ago (cooldown "
            f"{hours_text(rules.cooldown_s)})",
            numbers,
            considered=considered,
        )
    action = SWITCH_MARKET if target.market != here.market else MOVE
    return Decision(action, target, f"{action}: {compared}", numbers, considered=considered)


def saving_text(saving_usd: float) -> str:
    """ "saves $2.50", or "would cost $1.30 more" when the move would lose money (a negative
    saving printed as "saves $-1.30" reads as a saving)."""
    if saving_usd <= -0.005:  # at least a cent, as printed
        return f"would cost ${-saving_usd:,.2f} more"
    return f"saves ${max(saving_usd, 0.0):,.2f}"


def hours_text(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"
