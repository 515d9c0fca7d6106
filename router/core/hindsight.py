"""The hindsight optimum of one job: the cheapest schedule knowing every future price and outage.

It is a **lower bound** on every policy the backtest replays, on the same traces and cost model,
by construction: whatever a policy may do, the optimum may do too, at no more cost.

- **Wait**: it may idle at any step, for free, and resume on its last pool (a policy waits while
  a zone is blocked, or for spot; the optimum never has to run at a price it would rather skip).
- **Run**: only on a pool available at that step, so it is never interrupted and never
  recomputes work or pays a hand-over; it runs whole steps, except its first step when the job
  arrives within a step (only the rest of that step, as in the simulation) and its last step,
  paid to the minute.
- **Move** to any pool and market the planner allows: the same data and checkpoint egress as a
  policy (router.core.egress), plus the restore overhead as money only — restore_h × the
  cheapest price the job could pay anywhere in its window × node_count — and no time (a policy
  pays those hours at least at that price and finishes later).

Its window: a job with a deadline, up to the deadline (only schedules that finish by it count;
when none does, the optimum is computed as for a job without one and the deadline is reported
missed); a job without one, up to `horizon` — run_backtest passes the step in which the last
replayed policy finished the job, so the optimum bounds every policy that finished it and never
credits waiting longer than any of them did (the end of the trace when none finished).

The programme: work is counted in steps; unit j (1 … n) of the job runs at some step on some
pool, every unit after the one before, so in offsets d = step − (j − 1) each unit has m = steps
in the window − n + 1 places (the slack, plus one). One (pools, m) array per unit holds the
least cost to have done it at offset d or earlier on each pool: the array before plus the
step's price, a running minimum over d (waiting is free; a gather of the last offered offset
when every pool has one price), then the cheapest move into each pool (region to region). Only
the unit being computed is held, plus every B-th array for the path (B = 1 when they fit in
MEMORY_CELLS, else about √n; the others are recomputed once); the path is read back from them
(each unit ran where its array first reaches its value). A job arriving within a step is solved
with and without the rest of that step; a way whose lower bound cannot beat the schedule found
is skipped. Cost per job: O(n × m × (P + R²)) for P feasible pools in R regions; memory
O(m × P × (n / B + B)), nothing shared between jobs but the price matrix.
"""

from __future__ import annotations

import bisect
import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt

from router.core.backtest_model import JobContext, JobRun, Trace
from router.core.decision_model import TransferCosts
from router.core.egress import EgressTable

Array = npt.NDArray[np.float64]
MEMORY_CELLS = 4_000_000  # float64 cells (32 MB) of per-unit arrays kept for the path
_EPS = 1e-9


def price_matrix(trace: Trace) -> Array:
    """(steps, pools) USD per instance-hour; inf where a pool is unavailable or not offered."""
    prices = np.array(trace.prices, dtype=np.float64).T if trace.pools else np.zeros((0, 0))
    usable = np.array(trace.available, dtype=bool).T if trace.pools else np.zeros((0, 0), bool)
    prices[~usable | np.isnan(prices)] = np.inf
    return prices


@dataclass(frozen=True)
class _Found:
    """A solved way to begin: its cost (USD), the offset of its last step, and its path."""

    cost: float
    ends: float  # hours after the arrival
    runs: Callable[[], tuple[tuple[int, int, float], ...]]


@dataclass(frozen=True)
class _Schedule:
    """A solved schedule: cost (USD), and (step offset, pool column, hours) of every run step."""

    cost: float
    runs: tuple[tuple[int, int, float], ...]


def optimum_cost(
    ctx: JobContext, matrix: Array | None = None, *, horizon: int | None = None
) -> JobRun:
    """The cheapest schedule for ctx.job in hindsight (a JobRun with segments, no interruptions).

    `horizon`: the step (exclusive, of the trace) a job without a deadline must finish by —
    and one whose deadline cannot be met; default the end of the trace.
    """
    job, trace = ctx.job, ctx.trace
    run = JobRun(job.name, deadline=job.deadline, gpu_hours=job.gpu_hours)
    if matrix is None:
        matrix = price_matrix(trace)
    problem = _Problem(ctx, matrix)
    end = trace.steps if horizon is None else min(trace.steps, horizon)
    solved = None
    if job.deadline is not None:
        solved = problem.solve(problem.steps_before(job.deadline), job.deadline)
    if solved is None:
        solved = problem.solve(end - ctx.first_step, None)
    if solved is not None:
        problem.record(solved, run)
    return run


class _Problem:
    """One job: its feasible pools' prices from its first step on, and what moves cost."""

    def __init__(self, ctx: JobContext, matrix: Array) -> None:
        trace, rules = ctx.trace, ctx.rules
        self.ctx = ctx
        self.step_h = trace.step_h
        self.nodes = ctx.job.node_count
        placed_at = [i for i, _ in ctx.pools]
        placed = [trace.pools[i] for i in placed_at]
        # Pools grouped by region: moves are priced region to region.
        order = sorted(range(len(placed)), key=lambda j: (placed[j].cloud, placed[j].region))
        self.placed_at = [placed_at[j] for j in order]
        placed = [placed[j] for j in order]
        self.price: Array = matrix[ctx.first_step :, self.placed_at]
        regions: list[tuple[str, str]] = []
        region_of: list[int] = []
        for p in placed:
            key = (p.cloud, p.region)
            if not regions or regions[-1] != key:
                regions.append(key)
            region_of.append(len(regions) - 1)
        self.region_of = np.array(region_of, dtype=np.int64)
        self.firsts = np.array([region_of.index(r) for r in range(len(regions))], dtype=np.int64)
        transfers = rules.transfers
        self.data_in = np.array([transfers.data_to(c, r) for c, r in regions])
        self.cross = _cross(transfers, tuple(regions))
        arrived = (trace.at(ctx.first_step + 1) - ctx.arrived_at).total_seconds() / 3600.0
        self.first_h = min(self.step_h, arrived)  # what is left of the first step (hours)
        self.model = self._moves(0)

    def _moves(self, steps: int) -> _Moves:
        """Moves in a window of `steps` steps: the restore priced at its cheapest price."""
        window = self.price[:steps]
        usable = window[np.isfinite(window)]
        cheapest = float(usable.min()) if usable.size else 0.0
        restore_usd = self.ctx.rules.restore_overhead_s / 3600.0 * cheapest * self.nodes
        return _Moves(self.region_of, self.firsts, restore_usd, self.data_in, self.cross)

    def begins(self, t: int) -> datetime:
        """When the job's part of step offset t begins (the arrival, in the first step)."""
        if t == 0:
            return self.ctx.arrived_at
        return self.ctx.trace.at(self.ctx.first_step + t)

    def steps_before(self, deadline: datetime) -> int:
        """How many step offsets begin before the deadline."""
        trace = self.ctx.trace
        if deadline <= self.ctx.arrived_at:
            return 0
        ahead = (deadline - trace.at(self.ctx.first_step)).total_seconds() / trace.step_s
        return max(1, min(int(self.price.shape[0]), math.ceil(ahead - _EPS)))

    def solve(self, steps: int, deadline: datetime | None) -> _Schedule | None:
        """The cheapest schedule in the first `steps` step offsets, finishing by `deadline`."""
        price = self.price[:steps]
        if price.shape[0] == 0 or not np.isfinite(price).any():
            return None
        self.model = model = self._moves(steps)
        work_h, nodes, start = self.ctx.job.duration_h, self.nodes, model.start
        # Each way to begin, with a lower bound on its cost (the data brought in, then every
        # hour at the window's cheapest price) and its earliest last step; a way that can
        # neither cost less than a schedule found nor end earlier at that cost is skipped.
        ways: list[tuple[float, float, Callable[[], _Found | None]]] = []
        if self.first_h >= self.step_h - _EPS:  # arrived on a step boundary: every step whole
            low = start.min() + _cheapest(price) * nodes * work_h
            soonest = self._soonest(0, work_h)
            ways.append((low, soonest, lambda: self._units(price, work_h, 0, None, deadline)))
        else:
            h0, later = self.first_h, _cheapest(price[1:])
            low = start.min() + later * nodes * work_h
            soonest = self._soonest(1, work_h)
            ways.append((low, soonest, lambda: self._units(price, work_h, 1, None, deadline)))
            if work_h <= h0 + _EPS:  # done within the rest of the first step
                cost = start + price[0] * (work_h * nodes)
                q = int(np.argmin(cost))
                ends = self.begins(0) + timedelta(hours=work_h)
                if math.isfinite(cost[q]) and _by(ends, deadline):
                    done = _Found(float(cost[q]), work_h, lambda: ((0, q, work_h),))
                    ways.append((done.cost, work_h, lambda: done))
            else:  # the rest of the first step on some pool, then whole steps
                placed = start + price[0] * (h0 * nodes)
                low = placed.min() + later * nodes * (work_h - h0)
                rest = work_h - h0
                soonest = self._soonest(1, rest)
                ways.append((low, soonest, lambda: self._units(price, rest, 1, placed, deadline)))
        best: _Found | None = None
        for low, soonest, solve in sorted(ways, key=lambda w: (w[0], w[1])):
            if best is not None:
                dearer = low > best.cost * (1 + _EPS)
                if dearer or (low >= best.cost * (1 - _EPS) and soonest >= best.ends):
                    continue
            found = solve()
            if found is None:
                continue
            if best is None or (found.cost, found.ends) < (best.cost, best.ends):
                best = found
        return None if best is None else _Schedule(best.cost, best.runs())

    def _ends_h(self, t: int, last_h: float) -> float:
        """Hours from the arrival to the end of a last step at offset t that runs last_h."""
        return (self.begins(t) - self.ctx.arrived_at).total_seconds() / 3600.0 + last_h

    def _soonest(self, t0: int, work_h: float) -> float:
        """The earliest end (hours after the arrival) of work_h in whole steps from offset t0."""
        n = self._count(work_h)
        return self._ends_h(t0 + n - 1, work_h - (n - 1) * self.step_h)

    def _count(self, work_h: float) -> int:
        """Steps that work_h hours of whole steps take (the last one partly)."""
        return max(1, math.ceil(work_h / self.step_h - _EPS))

    def _units(
        self,
        price: Array,
        work_h: float,
        t0: int,
        placed: Array | None,
        deadline: datetime | None,
    ) -> _Found | None:
        """work_h hours in whole steps from offset t0 on, the last to the minute: from a fresh
        start, or after the first step ran on some pool (`placed`: what that cost per pool).
        The path is rebuilt only when asked for (the cheaper way to begin wins first)."""
        step_h, nodes, model = self.step_h, self.nodes, self.model
        n = self._count(work_h)
        last_h = work_h - (n - 1) * step_h
        steps = price.shape[0]
        while steps > t0 and not _by(self.begins(steps - 1) + timedelta(hours=last_h), deadline):
            steps -= 1
        m = steps - t0 - n + 1  # offsets each unit can run at: the slack in steps, plus one
        if m <= 0:
            return None
        count = price.shape[1]
        # (pools, steps): a unit's array is contiguous along the offsets it is scanned over.
        cost = np.ascontiguousarray(price[:steps].T)
        units = _Units(
            model,
            cost * (step_h * nodes),
            t0,
            m,
            model.start if placed is None else model.enter(placed[:, None].copy())[:, 0],
            every=1 if n * m * count <= MEMORY_CELLS else max(2, math.isqrt(n)),
        )
        ready = units.ready0
        for j in range(1, n):
            ready = units.next(j, ready)
            if j % 64 == 0 and not np.isfinite(ready[:, -1]).any():
                return None  # not even the latest offset is reachable: no schedule
        final = ready + cost[:, t0 + n - 1 : t0 + n - 1 + m] * (last_h * nodes)
        d_end = int(np.argmin(final.min(axis=0)))  # the earliest finish among the cheapest
        q_end = int(np.argmin(final[:, d_end]))
        best = float(final[q_end, d_end])
        if not math.isfinite(best):
            return None

        def runs() -> tuple[tuple[int, int, float], ...]:
            d, q = d_end, q_end
            out = [(t0 + n - 1 + d, q, last_h)]
            for j in range(n - 1, 0, -1):
                done = units.done(j, n)  # unit j done at offset ≤ d, per pool
                q = self._came_from(done[:, d], q)
                row = done[q]  # non-increasing: unit j ran where it first reached its value
                d = bisect.bisect_left(row, -float(row[d]), hi=d, key=lambda v: -v)
                out.append((t0 + j - 1 + d, q, step_h))
            if placed is not None:
                out.append((0, self._came_from(placed, q), self.first_h))
            out.reverse()
            return tuple(out)

        return _Found(best, self._ends_h(t0 + n - 1 + d_end, last_h), runs)

    def _came_from(self, value: Array, q: int) -> int:
        """The pool the optimum was on before entering q (q itself when it stayed there)."""
        options = value + self.model.column(q)
        p = int(np.argmin(options))
        return q if value[q] <= options[p] else p

    def record(self, schedule: _Schedule, run: JobRun) -> None:
        """Fill run with the schedule: cost, merged segments, moves, egress, finished_at."""
        model, nodes, a = self.model, self.nodes, self.ctx.first_step
        previous: int | None = None
        for t, j, hours in schedule.runs:
            usd = float(self.price[t, j]) * hours * nodes
            if previous is None:
                moved = float(model.start[j])
            elif previous != j:
                run.migrations += 1
                moved = model.cost(previous, j)
            else:
                moved = 0.0
            if moved:
                run.extras.append((a + t, moved))
            run.egress_cost += moved - (model.restore_usd if previous not in (None, j) else 0.0)
            run.cost += moved + usd
            previous = j
            seg, pool = run.segments, self.placed_at[j]
            if seg and seg[-1][2] == pool and seg[-1][1] == a + t:
                seg[-1] = (seg[-1][0], a + t + 1, pool, seg[-1][3] + usd)
            else:
                seg.append((a + t, a + t + 1, pool, usd))
        t, _, hours = schedule.runs[-1]
        run.finished_at = self.begins(t) + timedelta(hours=hours)


class _Units:
    """The units of one way to begin, one at a time. done(j): (pools, offsets) least cost with
    unit j done at that offset or earlier, ending on that pool — every `every`-th kept, the
    others recomputed from the last kept one when the path is rebuilt.

    Waiting is a running minimum over offsets. When every pool has one price wherever it is
    offered (list prices, replayed availability), it is a gather instead: ready-for-the-unit
    costs never rise with the offset, so the cheapest offset ≤ d to have run it is the last
    one the pool was offered at (`last`)."""

    def __init__(
        self, model: _Moves, full: Array, t0: int, m: int, ready0: Array, *, every: int
    ) -> None:
        self.model, self.full, self.t0, self.m, self.every = model, full, t0, m, every
        count = len(ready0)
        self.ready0: Array = np.broadcast_to(ready0[:, None], (count, m))
        self.kept: dict[int, Array] = {}
        self._rebuilt: dict[int, Array] = {}
        offered = np.isfinite(full)
        low = np.where(offered, full, np.inf).min(axis=1)
        high = np.where(offered, full, -np.inf).max(axis=1)
        self.flat = bool(np.all((low == high) | ~offered.any(axis=1)))
        if self.flat:
            steps = np.where(offered, np.arange(full.shape[1]), -1)
            self.last = np.maximum.accumulate(steps, axis=1)  # last step ≤ τ it was offered
            self.price = low[:, None]  # USD per step on each pool (inf: never offered)
            self.rows = (np.arange(count) * (m + 1))[:, None]

    def _done(self, j: int, ready: Array) -> Array:
        t = self.t0 + j - 1  # unit j at offset d runs at step t + d
        if self.flat:
            padded = np.empty((len(ready), self.m + 1))
            padded[:, 0] = np.inf  # where the pool was not offered since offset 0
            padded[:, 1:] = ready
            at = self.last[:, t : t + self.m] - (t - 1)
            np.maximum(at, 0, out=at)
            at += self.rows
            done: Array = padded.ravel().take(at)
            done += self.price
            return done
        done = ready + self.full[:, t : t + self.m]
        np.minimum.accumulate(done, axis=1, out=done)  # done at offset d or earlier: waiting
        return done

    def next(self, j: int, ready: Array) -> Array:
        """Ready for unit j+1 from ready for unit j."""
        done = self._done(j, ready)
        if j % self.every == 0:
            self.kept[j] = done
            done = done.copy()
        return self.model.enter(done)

    def done(self, j: int, n: int) -> Array:
        """Unit j's done array, kept or recomputed (with the rest of its block, once)."""
        found = self.kept.get(j)
        if found is None:
            found = self._rebuilt.get(j)
        if found is None:
            base = j - j % self.every
            ready = self.ready0 if base == 0 else self.model.enter(self.kept[base].copy())
            self._rebuilt = {}
            for k in range(base + 1, min(base + self.every, n)):
                done = self._done(k, ready)
                self._rebuilt[k] = done
                ready = self.model.enter(done.copy())
            found = self._rebuilt[j]
        return found


def _cheapest(price: Array) -> float:
    usable = price[np.isfinite(price)]
    return float(usable.min()) if usable.size else math.inf


def _by(ends: datetime, deadline: datetime | None) -> bool:
    return deadline is None or ends <= deadline + timedelta(seconds=1)


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
    """Move costs between pools: restore money, plus data and checkpoint egress across regions.

    `between[r, s]`: a move from a pool in region r to one in region s (r = s: the restore).
    """

    def __init__(
        self,
        region_of: npt.NDArray[np.int64],
        firsts: npt.NDArray[np.int64],
        restore_usd: float,
        data_in: Array,
        cross: Array,
    ) -> None:
        self.start: Array = data_in[region_of]  # first placement: bring the data in
        self.restore_usd = restore_usd
        between = restore_usd + data_in[None, :] + cross
        np.fill_diagonal(between, restore_usd)
        if not np.any(between - restore_usd):  # no egress anywhere: regions do not matter
            region_of = np.zeros_like(region_of)
            firsts, between = firsts[:1], between[:1, :1]
        self.region_of, self.firsts, self.between = region_of, firsts, between
        ends = [*firsts[1:].tolist(), len(region_of)][: len(firsts)]
        self.spans = list(zip(firsts.tolist(), ends, strict=True))  # pools of each region

    def cost(self, src: int, dst: int) -> float:
        return float(self.between[self.region_of[src], self.region_of[dst]])

    def column(self, dst: int) -> Array:
        """Cost of moving to dst from every pool (dst itself too: never better than staying)."""
        out: Array = self.between[self.region_of, self.region_of[dst]]
        return out

    def enter(self, value: Array) -> Array:
        """(P, m), in place: the least of staying on each pool and moving there from any pool."""
        if len(self.firsts) == 1:
            np.minimum(value, value.min(axis=0) + self.restore_usd, out=value)
            return value
        between = self.between
        if len(self.spans) > 3:  # many regions: one pass over (regions, regions, offsets)
            per_region = np.minimum.reduceat(value, self.firsts, axis=0)
            best = (per_region[:, None, :] + between[:, :, None]).min(axis=0)
            np.minimum(value, best[self.region_of], out=value)
            return value
        # A few regions (the usual case): span by span, no (R, R, m) temporary.
        per_region = np.empty((len(self.spans), value.shape[1]))
        for r, (a, b) in enumerate(self.spans):
            value[a:b].min(axis=0, out=per_region[r])
        for r, (a, b) in enumerate(self.spans):
            into = per_region[0] + between[0, r]
            for s in range(1, len(self.spans)):
                np.minimum(into, per_region[s] + between[s, r], out=into)
            np.minimum(value[a:b], into, out=value[a:b])
        return value
