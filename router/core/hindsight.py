"""The hindsight optimum of one job: the cheapest schedule knowing every future price and outage.

A dynamic programme over time steps × (steps of work done, pool). It is a **lower bound** on
every policy the backtest replays, on the same traces and cost model, because each of its
simplifications can only make the optimum cheaper:

- it is never interrupted: it may run on a pool only at steps where the pool is available, so
  it never recomputes lost work, and it needs no hand-over overlap;
- a change of pool pays the data and checkpoint egress of router.core.egress exactly as a policy
  does, plus the restore overhead as money only — restore_h × the cheapest price the job could
  pay anywhere in the window × node_count — and no time (a policy pays those hours at least at
  that price and finishes later);
- a job with a deadline may idle at any step and resume on its last pool for free (Uniform
  Progress waits for spot); a job without one runs from arrival like every policy, idling only
  at steps where no pool is available at all.

Every step of work is step_h hours except the last (the rest of duration_h), paid to the minute
like the simulation. With a deadline, only schedules that finish by it count; when none does,
the optimum is the unconstrained one and the deadline is reported missed.

Cost per job: O(steps × n × (P + R²)) with n = steps of work, P feasible pools and R their
regions (moves are priced region to region), in numpy.
"""

from __future__ import annotations

import math
import weakref
from datetime import timedelta

import numpy as np
import numpy.typing as npt

from router.core.backtest_model import JobContext, JobRun, Trace
from router.core.decision_model import TransferCosts
from router.core.egress import EgressTable

Array = npt.NDArray[np.float64]


def price_matrix(trace: Trace) -> Array:
    """(steps, pools) USD per instance-hour; inf where a pool is unavailable or not offered."""
    prices = np.array(trace.prices, dtype=np.float64).T if trace.pools else np.zeros((0, 0))
    usable = np.array(trace.available, dtype=bool).T if trace.pools else np.zeros((0, 0), bool)
    prices[~usable | np.isnan(prices)] = np.inf
    return prices


def optimum_cost(ctx: JobContext, matrix: Array | None = None) -> JobRun:
    """The cheapest schedule for ctx.job in hindsight (a JobRun with segments, no interruptions)."""
    job, trace, rules = ctx.job, ctx.trace, ctx.rules
    run = JobRun(job.name, deadline=job.deadline, gpu_hours=job.gpu_hours)
    if matrix is None:
        matrix = price_matrix(trace)
    placed_at = [i for i, _ in ctx.pools]
    placed = [trace.pools[i] for i in placed_at]
    # Pools grouped by region: moves are priced region to region.
    order = sorted(range(len(placed)), key=lambda j: (placed[j].cloud, placed[j].region))
    placed_at = [placed_at[j] for j in order]
    placed = [placed[j] for j in order]
    regions: list[tuple[str, str]] = []
    region_of: list[int] = []
    for p in placed:
        key = (p.cloud, p.region)
        if not regions or regions[-1] != key:
            regions.append(key)
        region_of.append(len(regions) - 1)
    firsts = np.array([region_of.index(r) for r in range(len(regions))], dtype=np.int64)

    step_h = trace.step_h
    nodes = job.node_count
    n = max(1, math.ceil(job.duration_h / step_h - 1e-9))
    last_h = job.duration_h - (n - 1) * step_h
    a = ctx.first_step
    price = matrix[a:, placed_at]
    if price.size == 0 or not np.isfinite(price).any():
        return run
    cheapest = float(price[np.isfinite(price)].min())
    restore_usd = rules.restore_overhead_s / 3600.0 * cheapest * nodes
    transfers = rules.transfers
    data_in = np.array([transfers.data_to(c, r) for c, r in regions])
    cross = _cross(transfers, tuple(regions))
    model = _Moves(np.array(region_of, dtype=np.int64), firsts, restore_usd, data_in, cross)

    steps = price.shape[0]
    window = steps
    if job.deadline is None:
        window = min(steps, n + max(48, n))
    solved = _solve(price[:window], model, n, step_h, last_h, nodes, ctx, with_deadline=True)
    if solved is None and window < steps:
        solved = _solve(price, model, n, step_h, last_h, nodes, ctx, with_deadline=True)
    if solved is None and job.deadline is not None:
        solved = _solve(price, model, n, step_h, last_h, nodes, ctx, with_deadline=False)
    if solved is None:
        return run
    best, t_end, path = solved
    run.cost = best
    run.finished_at = trace.at(a + t_end) + timedelta(hours=last_h)
    previous: int | None = None
    for t, j in path:
        hours = last_h if t == t_end else step_h
        usd = float(price[t, j]) * hours * nodes
        if previous is None:
            moved = float(data_in[region_of[j]])
        elif previous != j:
            run.migrations += 1
            moved = model.cost(previous, j)
        else:
            moved = 0.0
        if moved:
            run.extras.append((a + t, moved))
        run.egress_cost += moved - (restore_usd if previous not in (None, j) else 0.0)
        previous = j
        run.segments.append((a + t, a + t + 1, placed_at[j], usd))
    return run


_CROSS: weakref.WeakKeyDictionary[
    EgressTable, dict[tuple[float, tuple[tuple[str, str], ...]], Array]
] = weakref.WeakKeyDictionary()


def _cross(transfers: TransferCosts, regions: tuple[tuple[str, str], ...]) -> Array:
    """Checkpoint egress region → region (inf on the diagonal), shared by jobs alike."""
    table = transfers.table
    memo = None
    if table is not None:
        memo = _CROSS.get(table)
        if memo is None:
            memo = _CROSS[table] = {}
        found = memo.get((transfers.checkpoint_gb, regions))
        if found is not None:
            return found
    made = np.array(
        [
            [
                np.inf if x == y else transfers.checkpoint(*regions[x], *regions[y])
                for y in range(len(regions))
            ]
            for x in range(len(regions))
        ]
    ).reshape(len(regions), len(regions))
    if memo is not None:
        memo[(transfers.checkpoint_gb, regions)] = made
    return made


class _Moves:
    """Move costs between pools: restore money, plus data and checkpoint egress across regions."""

    def __init__(
        self,
        region_of: npt.NDArray[np.int64],
        firsts: npt.NDArray[np.int64],
        restore_usd: float,
        data_in: Array,
        cross: Array,
    ) -> None:
        self.region_of, self.firsts = region_of, firsts
        self.restore_usd, self.data_in, self.cross = restore_usd, data_in, cross
        self.start = data_in[region_of]  # first placement: bring the data in

    def cost(self, src: int, dst: int) -> float:
        rs, rd = int(self.region_of[src]), int(self.region_of[dst])
        if rs == rd:
            return self.restore_usd
        return float(self.restore_usd + self.data_in[rd] + self.cross[rs, rd])

    def column(self, dst: int) -> Array:
        """Cost of moving to dst from every pool (dst itself too: never better than staying)."""
        rd = int(self.region_of[dst])
        out: Array = self.restore_usd + self.data_in[rd] + self.cross[self.region_of, rd]
        out[self.region_of == rd] = self.restore_usd
        return out

    def best_arrival(self, value: Array) -> Array:
        """(n, P): least value[k, p'] + cost(p' → q) over every p' (p' = q included, harmless)."""
        per_region = np.minimum.reduceat(value, self.firsts, axis=1)  # (n, R)
        into = (per_region[:, :, None] + self.cross[None, :, :]).min(axis=1)  # (n, R)
        other = into + self.data_in[None, :]
        best_region = np.minimum(per_region, other) + self.restore_usd
        arrival: Array = best_region[:, self.region_of]
        return arrival


def _solve(
    price: Array,
    model: _Moves,
    n: int,
    step_h: float,
    last_h: float,
    nodes: int,
    ctx: JobContext,
    with_deadline: bool,
) -> tuple[float, int, list[tuple[int, int]]] | None:
    job, trace = ctx.job, ctx.trace
    a = ctx.first_step
    steps, count = price.shape
    deadline = job.deadline if with_deadline else None
    may_idle = deadline is not None
    full = price * step_h * nodes
    final = price * last_h * nodes
    # value[k, q]: least USD with k steps of work done, last on pool q (row 0 stays inf).
    value = np.full((n, count), np.inf)
    not_started = 0.0
    best = math.inf
    finish: tuple[int, int] | None = None
    values: list[Array] = []
    entries: list[Array] = []
    waiting: list[float] = []
    for t in range(steps):
        at = trace.at(a + t)
        if deadline is not None and at >= deadline:
            break
        entry = np.minimum(value, model.best_arrival(value))
        entry[0] = np.minimum(entry[0], not_started + model.start)
        values.append(value)
        entries.append(entry)
        waiting.append(not_started)
        done_here = entry[n - 1] + final[t]
        q = int(done_here.argmin())
        ends = at + timedelta(hours=last_h)
        if done_here[q] < best and (deadline is None or ends <= deadline + timedelta(seconds=1)):
            best, finish = float(done_here[q]), (t, q)
        advanced = np.full((n, count), np.inf)
        advanced[1:] = entry[:-1] + full[t]
        if may_idle or not np.isfinite(price[t]).any():
            advanced = np.minimum(advanced, value)
        else:
            not_started = math.inf
        value = advanced
        if not np.isfinite(value).any() and not math.isfinite(not_started):
            break
    if finish is None:
        return None
    return best, finish[0], _path(finish, n, model, full, values, entries, waiting)


def _path(
    finish: tuple[int, int],
    n: int,
    model: _Moves,
    full: Array,
    values: list[Array],
    entries: list[Array],
    waiting: list[float],
) -> list[tuple[int, int]]:
    """(step, pool) of every step the optimum runs, oldest first, rebuilt from the values."""
    t, q = finish
    k = n - 1
    path = [(t, q)]
    while True:
        target = entries[t][k, q]
        if k == 0 and abs(waiting[t] + model.start[q] - target) <= 1e-6 * max(1.0, target):
            break
        value = values[t][k]
        if abs(value[q] - target) > 1e-6 * max(1.0, target):
            q = int((value + model.column(q)).argmin())
        # values[t][k, q] was reached at an earlier step by running there (or kept by idling).
        t -= 1
        while t > 0 and not _ran(entries[t][k - 1, q] + full[t, q], values[t + 1][k, q]):
            t -= 1
        k -= 1
        path.append((t, q))
    path.reverse()
    return path


def _ran(via_run: float, reached: float) -> bool:
    return bool(abs(via_run - reached) <= 1e-6 * max(1.0, abs(reached)))
