"""The pure migration decision: where a running job should be now, and the numbers why.

`decide(rules, progress, current, candidates, history, now)` is shared by `route watch` (one
call per job per loop) and `route backtest` (one call per job per time step): the same code
decides in both, so the backtest measures the policy that runs. No I/O and no clock: `now`,
the candidates (placements available now, at today's prices) and the history are parameters.

Candidates: the placements available now minus spot priced above the cheapest on-demand or
reserved candidate (decision_model.worth_running: capacity that can be taken away is never
chosen when capacity that cannot costs less) and minus the zone just lost (until the history
records the loss). A zone lost within rules.zone_block_s is the last spot choice, not out: it
is left out while any other spot is open; otherwise it is used where the rules would not wait
(`_pressed`: no deadline — the money rules would buy on-demand, `forever` would wait however
long — or behind the Uniform Progress line); ahead of the line the job waits the block out.
The backtest offers it only once its trace has it back up; route watch tries it, and a refused
launch blocks it there (router/core/failover.py). Issue 30: the hard block sent jobs behind
their line to on-demand, or made them wait, while the only spot up was the zone lost within
the hour.

Actions, checked in this order (the first that applies wins):

  0. finished      → stay.
     crashed       (current.crashed: a node exited by itself with a failure status and no
                   interruption marker, and the cloud did not say it took a node back —
                   router/core/node_exit.py) → crashed: no re-placement, a paid crash loop
                   otherwise; the job is re-placed only when someone deploys it again.
  1. spot only     (no deadline, rules.spot_wait_s `forever`:
                   decide_deadline.spot_only_decision) → spot whenever there is some,
                   otherwise wait however long, never on-demand; running on spot, the money
                   rules over spot (3); off spot, or on spot dearer than on-demand, rules 2-4.
     deadline      (rules.deadline set, or rules.spot_wait_s on a job without one: the
                   deadline submitted + work + spot_wait — decide_deadline.soft_deadline;
                   router/core/decide_deadline.py) Uniform Progress,
                   "Can't Be Late" (NSDI'24), as changed here (docs/backtest.md says why): the
                   line wants total_h × (now − started) / (deadline − started) done by now.
     a. slack gone: slack ≤ risk → on-demand for good (stay there, never move again), where
        slack = hours left − work left − hours to get onto on-demand (a restore, + the work
        since the checkpoint when running) and risk = a restore (a pad) + the decision period
        (rules.decision_period_s, route watch's interval) + on spot, or about to take spot, the
        work the checkpoint interval can still lose (interval − work since the checkpoint).
     With rules.wait_for_spot False (the backtest's `migrate`): no return from on-demand to
     spot under the reserve (b), otherwise the money rules (2-4) — never idle.
     b. on on-demand, spot there, slack ≥ the reserve (2 restores + restore + checkpoint
        interval + period: a return that fails must still pass the slack test): back to spot
        when the money rules over spot (3) say the switch pays — behind the line or not, spot
        progresses as fast as on-demand; otherwise stay (or a cheaper on-demand).
     c. interrupted or not placed: spot if any; no spot → on-demand when behind the line and
        the slack one decision period from now would be under the hedge reserve — the reserve
        (b: the last call that still allows a return to spot) plus, for a job with its own
        deadline, the slack its work left spends on spot preemptions, W × (m(Λ) − 1) at the
        rate of the zone it runs on or lost (decide_deadline.spot_overhead_h: an hour of slack
        waited saves an hour of on-demand, the same hour kept for preemptions keeps
        1 / (m − 1) hours on spot) — or, a job with its own deadline, when it is behind
        the line by more than the hedge band (a quarter of its slack at submission,
        decide_deadline.HEDGE_SLACK_SHARE: long outages are hedged early enough to leave slack
        for later returns to spot); otherwise wait (ahead of the line, or while the slack and
        the band absorb the outage; a job waiting under migration.spot_wait has no band).
        A job that waits is asked again when its answer could change (wake_after_h): the
        backtest does so inside a step.
     d. running on spot, even behind the line: stay on spot (it catches up as fast as
        on-demand would; the money rules may still move it to cheaper spot, or to any market
        once its spot is dearer than on-demand); the slack test (a) guards the deadline.
  2. interrupted   (or not placed yet) → re-place on the cheapest candidate by expected
                   remaining cost (blocked zones last, the zone just lost out: above).
  3. cheaper elsewhere → move when
        saving = remaining(current, h) − remaining(target, h) − migration cost
                 ≥ min_savings_pct % × remaining(current, h)
     over h = min(work left, the work the target keeps before it is lost — s(Λ) of
     router.core.interruption: a spot zone lost every 50 minutes keeps ~0.5 h of work, so a
     move there must pay for itself in that half hour), and the last move is at least
     cooldown_s ago. Spot against spot the target is priced at the higher of the two rates: a
     running spot placement is not left for a lower rate alone (GPU spot up-times are
     heavy-tailed; a stint that lasted tends to go on). A move to another market (on-demand →
     spot once spot returns) is a switch-market; otherwise a move.
  4. otherwise     → stay.

Costs (USD; hours of work left W = total_h − done_h, N = node_count instances):
  remaining(p)  = price_per_hour × N × W × m(N × interruptions_per_hour)
                  m(Λ) = e^(Λ R)(e^(Λ I) − 1)/(Λ I), R = restore_h, I = interval_h, 1 off spot:
                  router.core.interruption's paid hours per hour of work (the planner's
                  interruption term too); the rate is the candidate's, i.e. the advisor bucket
                  updated by the preemptions seen in that pool (route watch's records, or the
                  trace's past in a backtest)
  migration     = restore_h × target price × node_count     (start and load the checkpoint)
                + handover_h × current price × node_count   (both placements paid meanwhile)
                + egress of the data set to the target region (router.core.egress model)
                + egress of the checkpoint from the current region to the target region
                  (both only when the region changes: a region keeps its staged data)
A move loses no work: `route migrate` asks the job for a checkpoint and waits for it before the
new placement starts (router/flows/migrate.py), and the hand-over pays the overlap. A
re-placement after an interruption pays the restore and the egress terms (no handover: the old
placement is gone; the lost work is already counted in W, which starts at checkpointed_h).

Every Decision carries its Numbers (what was compared) and one line of reason in dollars, so
`route status --history` can say why a job moved or stayed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from router.core.decide_deadline import (
    at_most,
    deadline_decision,
    deadline_slack,
    hedge_tolerance_h,
    latest_start,
    line_ahead,
    return_reserve_h,
    soft_deadline,
    spot_only_decision,
    waits_forever,
    wake_after_h,
)
from router.core.decide_money import arrival_cost, maybe_move, remaining_cost, replace_on
from router.core.decision_model import (
    CRASHED,
    SPOT,
    STAY,
    Capacity,
    Current,
    Decision,
    History,
    Numbers,
    Progress,
    Rules,
    worth_running,
    zone_key,
)

__all__ = [
    "arrival_cost",
    "at_most",
    "deadline_slack",
    "decide",
    "hedge_tolerance_h",
    "latest_start",
    "remaining_cost",
    "return_reserve_h",
    "wake_after_h",
]


def _pressed(rules: Rules, progress: Progress, current: Current | None, now: datetime) -> bool:
    """True when waiting is not the rules' answer: no deadline (the money rules would buy
    on-demand; `forever` waits however long), or behind the Uniform Progress line."""
    if rules.deadline is None:
        return True
    ahead, _ = line_ahead(rules, progress, current, now)
    return ahead < 0


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
    out: frozenset[tuple[str, str, str]] = frozenset()
    if current is not None and current.interrupted:
        lost = zone_key(current.placement)
        # The zone just lost is out until the history records this loss (one at or after the
        # job was placed there: the backtest records it at the interruption, route watch on
        # re-placing); from then on it is blocked for zone_block_s like any other lost zone.
        if not any(z == lost and at >= current.since for z, at in history.lost_zones):
            out = frozenset({lost})
    open_ = [c for c in candidates if zone_key(c) not in blocked | out]
    # Spot dearer than on-demand at this moment is no option (reliable_floor, worth_running).
    usable = worth_running(open_)
    own_deadline = rules.deadline is not None
    # A job without a deadline may wait out an outage (spot_wait); spot that is there but
    # dearer than on-demand is no outage: waiting would not bring it back.
    spot_not_priced_out = any(c.market == SPOT for c in open_) == any(
        c.market == SPOT for c in usable
    )
    if spot_not_priced_out:
        rules = soft_deadline(rules, progress, current, now)
    if (
        blocked
        and not any(c.market == SPOT for c in open_)
        and _pressed(rules, progress, current, now)
    ):
        # A blocked zone is the last spot choice: with no other spot open it beats on-demand,
        # and waiting once the job is behind its line (the backtest offers it only once the
        # trace has it back up; route watch tries it, and a refused launch blocks it there:
        # router/core/failover.py). Ahead of the line the job waits it out, as before.
        open_ = [c for c in candidates if zone_key(c) not in out
                 and (c.market == SPOT or zone_key(c) not in blocked)]  # fmt: skip
        usable = worth_running(open_)

    if waits_forever(rules) and spot_not_priced_out:
        found = spot_only_decision(rules, progress, current, usable, history, now, work_left)
        if found is not None:
            return found

    if rules.deadline is not None:
        decision = deadline_decision(
            rules, progress, current, usable, history, now, work_left, own_deadline=own_deadline
        )
        if decision is not None and not own_deadline:
            # The "deadline" in its reason is the wait's end, not one the user gave.
            until = rules.deadline.strftime("%Y-%m-%d %H:%M UTC")
            why = f"no deadline, waiting for spot until {until} (migration.spot_wait): "
            return replace(decision, reason=why + decision.reason.removeprefix("deadline: "))
        if decision is not None:
            return decision

    if interrupted:
        return replace_on(rules, here, usable, work_left, len(candidates), "")
    assert current is not None and here is not None
    return maybe_move(rules, progress, current, usable, history, now, work_left, len(candidates))
