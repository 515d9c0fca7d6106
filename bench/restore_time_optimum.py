"""The hindsight optimum when its restores take time, as the policies' do (issue 30's limit).

router.core.hindsight's optimum — the bound every gap in docs/benchmarks.md is measured
against — knows every outage in advance, so it is never preempted, and it pays a move's restore
as money only, with no time. A policy is preempted whenever its zone goes down (it cannot know
it will), and each restart spends the restore on the clock: with deadlines at 1.1–1.5× the work,
that time comes out of the slack. This estimate keeps the optimum's knowledge of the future and
takes that second advantage away: a schedule chosen in hindsight, every (re)start after the
first costing the restore in time on the pool it starts on (whole steps of it; the rest of the
restore as money at that pool's price), idle steps free but a paused job restarting with a
restore (a policy's job waits only without a placement). What it still has that no policy has:
it is never preempted (no lost work) and pays no hand-over.

An estimate, not a bound: it runs whole steps only (the arrival's and the deadline's step count
whole, which favours it; a step run in part, as a policy asked again inside one may, is not
offered, which does not). bench/policy_scenarios.py `--part limits` prints it beside the
optimum; with the restore at 0 s it matches the optimum within those step edges
(docs/benchmarks.md, "Issue 30").
"""

from __future__ import annotations

import math

import numpy as np

from router.core.backtest_model import JobContext


def restore_time_cost(ctx: JobContext, matrix: np.ndarray, restore_s: float | None = None) -> float:
    """Least USD to finish ctx.job by its deadline knowing the future, restores taking time.

    matrix: router.core.hindsight.price_matrix (steps, pools), inf where a pool is not usable.
    restore_s: the restore (default the job's); its whole steps are time without work on the
    pool restarted on, the rest money at that pool's price. inf when no schedule finishes by
    the deadline.
    """
    job, trace = ctx.job, ctx.trace
    assert job.deadline is not None
    step_h = trace.step_h
    restore_h = job.restore_overhead_s / 3600.0 if restore_s is None else restore_s / 3600.0
    lag = math.floor(restore_h / step_h + 1e-9)  # steps of a restart without work
    if lag > 1:
        raise ValueError("a restore of two steps or more is not modelled")
    extra = restore_h / step_h - lag  # the rest of the restore, as money (steps of the price)
    units = job.duration_h / step_h
    whole = math.floor(units + 1e-9)
    frac = units - whole  # the last, partial step of work
    pools = [i for i, _ in ctx.pools]
    due_s = (job.deadline - trace.start).total_seconds()
    last = min(trace.steps, math.ceil(due_s / trace.step_s - 1e-9))
    inf = math.inf
    cost = np.full((len(pools), whole + 1), inf)  # running on a pool, w whole steps done
    idle = np.full(whole + 1, inf)  # placed before, waiting now without a placement
    done = inf
    for step in range(ctx.first_step, last):
        price = matrix[step, pools] * step_h  # USD for the whole step
        usable = np.isfinite(price)
        if frac > 1e-12 and pools:
            # The partial last step, where the job runs (or, a job shorter than a step, starts).
            at = cost[:, whole] if whole else np.zeros(len(pools))
            done = min(done, float(np.min(at + frac * price)))
        best = np.minimum(idle, np.min(cost, axis=0)) if pools else idle.copy()
        new = np.full_like(cost, inf)
        # Go on where it runs: one step of work at this step's price.
        new[:, 1:] = cost[:, :-1] + price[:, None]
        # Restart on a pool, from a placement or from waiting: the restore first.
        restart = (price * (1.0 + extra))[:, None]
        if lag == 1:
            new = np.minimum(new, best[None, :] + restart)
        else:
            new[:, 1:] = np.minimum(new[:, 1:], best[None, :-1] + restart)
        if whole:
            # The job's first start (it may wait for it, for free): no restore.
            new[:, 1] = np.minimum(new[:, 1], price)
        new[~usable, :] = inf
        idle, cost = best, new
        if frac <= 1e-12 and pools:
            done = min(done, float(np.min(cost[:, whole])))
    return done
