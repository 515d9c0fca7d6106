"""When a replayed policy's answer can change: the quiet spans the event replay skips; pure.

router.core.backtest_replay asks a policy again at every change of the job's candidates (a
price, an availability, a listing), when a lost zone's block runs out, and at the time its
`quiet_until(ctx, state, now)` returns: the earliest moment its answer could differ from the one
it just gave with all of those unchanged (None: not before they change; `now`: at every step).
Asking sooner is always right; later would change the backtest. The step replay asks at every
step, and tests/unit/test_backtest_events.py holds the two to the same runs.

Between two changes of the candidates time still moves: the job progresses, its deadline comes
nearer, the cooldown runs out, and each spot pool's learned interruption rate (the trace's past,
router.core.interruption) drifts. What each policy's answer reads of these, from its rules:

- placed once, or the peer: a running job stays until interrupted; a waiting one waits until the
  candidates or the blocks change (the peer: until its next launch attempt);
- greedy (Can't Be Late's): the slack test only; slack − risk falls at most 2 h an hour (the
  hours left, and the work since the checkpoint on spot), so the answer holds for half of it;
- decide() waiting: asked every step. (`decide.wake_after_h` tells when a waiting job's answer
  can change, but not a crossing at the very moment it is asked — a job that arrives is exactly
  on its Uniform Progress line and behind it a second later — which the step replay catches at
  the next step; the waits are short, so asking at every step costs little);
- decide() running: see `decide_running_quiet`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from router.core import decide as decision
from router.core.backtest_model import JobContext, Slot
from router.core.decision_model import SPOT, Current, Progress, Rules

_MARGIN = 1e-9  # relative: an answer this close to changing is asked every step


def slack_quiet(
    rules: Rules, progress: Progress, current: Current | None, now: datetime
) -> datetime | None:
    """Until half the slack above the risk is gone (slack − risk falls at most 2 h an hour:
    the hours left, and the work since the checkpoint while on spot); `now` once it is none."""
    _, slack, risk = decision.deadline_slack(rules, progress, current, now)
    margin = slack - risk
    if margin <= 1e-9:
        return now
    return now + timedelta(hours=margin / 2)


def decide_running_quiet(
    ctx: JobContext,
    rules: Rules,
    progress: Progress,
    current: Current,
    committed: bool,
    candidates: tuple[Slot, ...],
    now: datetime,
) -> datetime | None:
    """When decide() could answer a running job other than `stay`, its candidates unchanged.

    decide() moves a running job when a target saves enough (decide_money.maybe_move) or when
    the slack test commits it to on-demand (decide_deadline). With the candidates' prices and
    markets fixed and the placement's own rate fixed (the running slot keeps the rate it was
    placed at), its answer can change only through the learned rates of the other pools, the
    work left and the slack. Cases where none of these can make it move:

    - on spot, not committed, no other spot pool cheaper, none of on-demand cheaper than the
      spot's own expected cost per hour of work after the move threshold: a spot target is
      priced at the higher of the two rates (never better than staying), an on-demand one saves
      (per hour of work) at most the spot's remaining cost less its price, and both terms only
      fall as the work left does — so `stay` holds; its own deadline can only commit it once
      the slack is gone (slack_quiet); a soft deadline (spot_wait) holds only with more slack
      than the reserve, more than the risk;
    - on on-demand (or reserved) with no spot among the candidates and nothing cheaper of its
      own market: no target saves; the slack there stays as it is while the job runs (an
      own deadline: slack_quiet); committed with an own deadline: it stays for good.

    Anything else is asked every step (`now`).
    """
    here = current.placement
    assert isinstance(here, Slot)
    own_deadline = rules.deadline is not None
    others = [c for c in candidates if c.pool != here.pool]
    floor = min((c.price_per_hour for c in candidates if c.market != SPOT), default=float("inf"))
    if here.market == SPOT:
        if committed or here.price_per_hour > floor:
            return now
        if any(c.market == SPOT and c.price_per_hour < here.price_per_hour for c in others):
            return now
        # What an hour of work costs here (interruptions included) above the move threshold,
        # against on-demand's hour: a move there cannot save enough while this holds.
        per_hour = decision.remaining_cost(rules, here, 1.0)
        keep = max(0.0, 1.0 - min(rules.min_savings_pct, 100.0) / 100.0)
        if per_hour * keep >= floor * rules.node_count * (1.0 - _MARGIN):
            return now
        return slack_quiet(rules, progress, current, now) if own_deadline else None
    if committed and own_deadline:
        return None  # on-demand for good
    if any(c.market == SPOT for c in candidates):
        return now  # back to spot reads the learned rates: asked every step
    if any(c.market != SPOT and c.price_per_hour < here.price_per_hour for c in others):
        return now
    return slack_quiet(rules, progress, current, now) if own_deadline else None
