"""The hindsight optimum of one job: the cheapest schedule knowing every future price and outage.

A dynamic programme over time steps × (steps of work done, pool). It is a **lower bound** on
every policy the backtest replays, on the same traces and cost model, because each of its
simplifications can only make the optimum cheaper:

- it is never interrupted: it may run on a pool only at steps where the pool is available, so
  it never recomputes lost work, and it needs no hand-over overlap;
- a change of pool pays the data and checkpoint egress of router.egress exactly as a policy
  does, plus the restore overhead as money only — restore_h × the cheapest price the job could
  pay anywhere in the window × node_count — and no time (a policy pays those hours at least at
  that price and finishes later);
- a job with a deadline may idle at any step and resume on its last pool for free (Uniform
  Progress waits for spot); a job without one runs from arrival like every policy, idling only
  at steps where no pool is available at all.

Every step of work is step_h hours except the last (the rest of duration_h), paid to the minute
like the simulation. With a deadline, only schedules that finish by it count; when none does,
the optimum is the unconstrained one and the deadline is reported missed.

Cost per job: O(steps × n × P²) with n = steps of work and P = feasible pools, in numpy.
"""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import numpy.typing as npt

from router.core.backtest import JobContext, JobRun

Array = npt.NDArray[np.float64]
STAY_ON, START = -1, -2


def optimum_cost(ctx: JobContext) -> JobRun:
    """The cheapest schedule for ctx.job in hindsight (a JobRun with segments, no interruptions)."""
    job, trace, rules = ctx.job, ctx.trace, ctx.rules
    run = JobRun(job.name, deadline=job.deadline, gpu_hours=job.gpu_hours)
    pools = [i for i, _ in ctx.pools]
    count = len(pools)
    step_h = trace.step_h
    nodes = job.node_count
    n = max(1, math.ceil(job.duration_h / step_h - 1e-9))
    last_h = job.duration_h - (n - 1) * step_h
    a = ctx.first_step
    horizon = trace.steps

    price = np.full((horizon - a, count), np.inf)
    for j, i in enumerate(pools):
        series = trace.prices[i]
        avail = trace.available[i]
        for t in range(a, horizon):
            p = series[t]
            if avail[t] and p == p:
                price[t - a, j] = p
    if not np.isfinite(price).any():
        return run
    cheapest = float(price[np.isfinite(price)].min())

    restore_usd = rules.restore_overhead_s / 3600.0 * cheapest * nodes
    transfers = rules.transfers
    placed = [trace.pools[i] for i in pools]
    start = np.array([transfers.data_to(p.cloud, p.region) for p in placed])
    move = np.empty((count, count))
    for x, src in enumerate(placed):
        for y, dst in enumerate(placed):
            if x == y:
                move[x, y] = np.inf  # staying is not a move
            elif (src.cloud, src.region) == (dst.cloud, dst.region):
                move[x, y] = restore_usd
            else:
                move[x, y] = (
                    restore_usd
                    + transfers.data_to(dst.cloud, dst.region)
                    + transfers.checkpoint(src.cloud, src.region, dst.cloud, dst.region)
                )

    best, finish = _solve(price, start, move, n, step_h, last_h, nodes, ctx, with_deadline=True)
    if finish is None and job.deadline is not None:
        best, finish = _solve(price, start, move, n, step_h, last_h, nodes, ctx, False)
    if finish is None:
        return run
    t_end, path = finish
    run.cost = best
    run.finished_at = trace.at(a + t_end) + timedelta(hours=last_h)
    previous = None
    for t, j in path:
        hours = last_h if t == t_end else step_h
        usd = float(price[t, j]) * hours * nodes
        if previous is not None and previous != j:
            run.migrations += 1
        if previous is None or previous != j:
            run.egress_cost += float(start[j] if previous is None else move[previous, j])
        previous = j
        run.segments.append((a + t, a + t + 1, pools[j], usd))
    run.egress_cost -= restore_usd * run.migrations
    return run


def _solve(
    price: Array,
    start: Array,
    move: Array,
    n: int,
    step_h: float,
    last_h: float,
    nodes: int,
    ctx: JobContext,
    with_deadline: bool,
) -> tuple[float, tuple[int, list[tuple[int, int]]] | None]:
    job, trace = ctx.job, ctx.trace
    a = ctx.first_step
    steps, count = price.shape
    deadline = job.deadline if with_deadline else None
    may_idle = deadline is not None
    full = price * step_h * nodes
    final = price * last_h * nodes
    # value[k, q]: least USD with k steps of work done, last on pool q (k = 0 unused).
    value = np.full((n, count), np.inf)
    not_started = 0.0
    best = math.inf
    finish: tuple[int, int] | None = None
    parents: list[npt.NDArray[np.int64]] = []
    idled: list[npt.NDArray[np.bool_]] = []
    for t in range(steps):
        at = trace.at(a + t)
        if deadline is not None and at >= deadline:
            break
        # entry[k, q]: at the start of step t on q with k steps done, by staying or moving.
        moved = value[:, :, None] + move[None, :, :]
        from_pool = moved.argmin(axis=1)
        via_move = np.take_along_axis(moved, from_pool[:, None, :], axis=1)[:, 0, :]
        entry = np.minimum(value, via_move)
        parent = np.where(value <= via_move, STAY_ON, from_pool).astype(np.int64)
        started = not_started + start
        better = started < entry[0]
        entry[0] = np.where(better, started, entry[0])
        parent[0] = np.where(better, START, parent[0])
        parents.append(parent)
        done_here = entry[n - 1] + final[t]
        q = int(done_here.argmin())
        ends = at + timedelta(hours=last_h)
        if done_here[q] < best and (deadline is None or ends <= deadline + timedelta(seconds=1)):
            best, finish = float(done_here[q]), (t, q)
        advanced = np.full((n, count), np.inf)
        advanced[1:] = entry[:-1] + full[t]
        idle_ok = may_idle or not np.isfinite(price[t]).any()
        if idle_ok:
            idle = value < advanced
            advanced = np.where(idle, value, advanced)
        else:
            idle = np.zeros((n, count), dtype=bool)
            not_started = math.inf
        idled.append(idle)
        value = advanced
        if not np.isfinite(value).any() and not math.isfinite(not_started):
            break
    if finish is None:
        return math.inf, None
    return best, (finish[0], _path(finish, n, parents, idled))


def _path(
    finish: tuple[int, int],
    n: int,
    parents: list[npt.NDArray[np.int64]],
    idled: list[npt.NDArray[np.bool_]],
) -> list[tuple[int, int]]:
    """(step, pool) of every step the optimum runs, oldest first."""
    t, q = finish
    k = n - 1
    path = [(t, q)]
    while True:
        parent = int(parents[t][k, q])
        if parent == START:
            break
        if parent != STAY_ON:
            q = parent
        # value[k, q] at step t was reached at step t - 1, by running or idling there.
        t -= 1
        while idled[t][k, q]:
            t -= 1
        k -= 1
        path.append((t, q))
    path.reverse()
    return path
