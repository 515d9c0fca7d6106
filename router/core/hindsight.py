"""The hindsight optimum of one job: the cheapest schedule knowing every future price and outage.

It is a **lower bound** on every policy the backtest replays, on the same traces and cost model,
by construction: whatever a policy may do, the optimum may do too, at no more cost.

- **Wait**: it may idle at any step, for free, and resume on its last pool (a policy waits while
  a zone is blocked, or for spot; the optimum never has to run at a price it would rather skip).
- **Run**: only on a pool available at that step, so it is never interrupted and never
  recomputes work or pays a hand-over; any part of a step, from the job's arrival and up to its
  deadline (a policy asked again inside a step may start there, and stops when its work is
  done). For given pools the cost is linear in the hours of each step, so the least has every
  step at none or all it can run but one: whole steps, the rest of the arrival step or the part
  of the deadline's step at their cap, and one fraction of a step anywhere.
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
in the window − n + 1 places (the slack, plus one). n − 1 units are whole steps and one is the
fraction (what is left, ≤ a step). Two (pools, m) arrays per unit — layer 0, the fraction not
yet run; layer 1, run — hold the least cost to have done it at offset d or earlier on each
pool: the arrays before plus the step's price (layer 1 also from layer 0 plus the fraction's),
a running minimum over d (waiting is free; a gather of the last offered offset when every pool
has one price), then the cheapest move into each pool (region to region). Only the unit being
computed is held, plus every B-th pair for the path (B = 1 when they fit in MEMORY_CELLS, else
about √n; the others are recomputed once); the path is read back from them (each unit ran where
its array first reaches its value; it was the fraction where layer 0 plus the fraction's price
reaches it). A step shorter than a whole one (the arrival's, the deadline's) is solved with it
at its cap and without (where it may hold the fraction): up to four ways; a way whose lower
bound cannot beat the schedule found is skipped. Cost per job: O(n × m × (P + R²)) for P
feasible pools in R regions; memory O(m × P × (n / B + B)), nothing shared between jobs but the
price matrix.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt

from router.core.backtest_model import JobContext, JobRun, Trace
from router.core.hindsight_moves import Moves, cross, distinct
from router.core.hindsight_stretches import (
    StretchProgramme,
    stretch_starts,
    stretch_work,
    triangle,
)

Array = npt.NDArray[np.float64]
MEMORY_CELLS = 4_000_000  # float64 cells (32 MB) of per-unit arrays kept for the path
# Which programme solves a job: the cheaper of the two by its estimated work ("auto"), or one of
# them always ("units", "stretches": the tests hold both to an independent search).
SOLVER = "auto"
_EPS = 1e-9
_TIE = 1e-12  # relative: costs this close are equal (the sooner finish wins)
_SECOND_H = 1 / 3600.0  # a schedule that ends up to a second after its deadline is on time


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
        order = distinct(order, placed, matrix[ctx.first_step :, :], placed_at, rules.transfers)
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
        self.cross = cross(transfers, tuple(regions))
        arrived = (trace.at(ctx.first_step + 1) - ctx.arrived_at).total_seconds() / 3600.0
        self.first_h = min(self.step_h, arrived)  # what is left of the first step (hours)
        self.model = self._moves(0)
        self.deadline_cut = False  # the deadline is inside the last step: a second late is on time
        self.triangle = False  # moves obey the triangle inequality: stretches may be solved

    def _moves(self, steps: int) -> Moves:
        """Moves in a window of `steps` steps: the restore priced at its cheapest price."""
        window = self.price[:steps]
        usable = window[np.isfinite(window)]
        cheapest = float(usable.min()) if usable.size else 0.0
        restore_usd = self.ctx.rules.restore_overhead_s / 3600.0 * cheapest * self.nodes
        return Moves(self.region_of, self.firsts, restore_usd, self.data_in, self.cross)

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

    def caps(self, steps: int, deadline: datetime | None) -> Array:
        """Hours each step offset can run: a whole step, but the rest of the arrival step, and
        the part of the last step before the deadline."""
        caps = np.full(steps, self.step_h)
        caps[0] = min(self.step_h, self.first_h)
        if deadline is not None and steps:
            left = (deadline - self.begins(steps - 1)).total_seconds() / 3600.0
            self.deadline_cut = left < caps[-1]
            caps[-1] = min(caps[-1], left)
        return caps

    def solve(self, steps: int, deadline: datetime | None) -> _Schedule | None:
        """The cheapest schedule in the first `steps` step offsets, finishing by `deadline`.

        A policy may start and stop inside a step (a waiting job is asked again inside one),
        so a step runs anything from 0 to its cap (hours); for a given choice of pools the cost
        is linear in those hours, least with every step at 0 or its cap but one. So: whole
        steps plus one fraction of a step anywhere (`_dp`), and the arrival step and the
        deadline's step, when shorter than a step, each either at its cap (a way of its own)
        or as any other step.
        """
        price = self.price[: max(0, steps)]
        if price.shape[0] == 0 or not np.isfinite(price).any():
            return None
        self.model = model = self._moves(steps)
        self.triangle = triangle(model)
        work_h, nodes, start = self.ctx.job.duration_h, self.nodes, model.start
        self.deadline_cut = False
        caps = self.caps(steps, deadline)
        short = self.step_h - _EPS
        heads = [False] + ([True] if caps[0] < short and steps > 1 else [])
        tails = [False] + ([True] if caps[-1] < short and steps > 1 else [])
        # Each way with a lower bound on its cost (what its fixed steps cost at least, every
        # other hour at the window's cheapest price); one that cannot beat the best is skipped.
        cheapest = _cheapest(price)
        ways: list[tuple[float, float, bool, bool, float]] = []
        for head in heads:
            for tail in tails:
                rest = work_h - (caps[0] if head else 0.0) - (caps[-1] if tail else 0.0)
                if rest <= _EPS:
                    continue  # all of it in those steps: a fraction of one of them (below)
                low = (start + price[0] * (caps[0] * nodes)).min() if head else start.min()
                low += cheapest * nodes * rest
                if tail:
                    low += _cheapest(price[-1:]) * nodes * caps[-1]
                    soonest = self._ends_h(steps - 1, float(caps[-1]))
                else:  # its last unit begins no sooner than this
                    soonest = self._ends_h(int(head) + self._count(rest) - 1, 0.0)
                ways.append((low, soonest, head, tail, rest))
        best: _Found | None = None
        for low, soonest, head, tail, rest in sorted(ways, key=lambda w: (w[0], w[1])):
            if best is not None:
                dearer = low > best.cost * (1 + _EPS)
                if dearer or (low >= best.cost * (1 - _EPS) and soonest >= best.ends):
                    continue
            placed = start + price[0] * (caps[0] * nodes) if head else None
            found = self._dp(price, caps, rest, placed, tail)
            if found is None:
                continue
            if best is None or _better(found, best):
                best = found
        return None if best is None else _Schedule(best.cost, best.runs())

    def _dp(
        self, price: Array, caps: Array, work_h: float, placed: Array | None, tail: bool
    ) -> _Found | None:
        """work_h hours as whole steps and one fraction, from offset 0 — or 1 after the arrival
        step ran to its cap on some pool (`placed`: what that cost per pool) — up to the last
        offset, or before it when the deadline's step runs to its cap (`tail`)."""
        step_h, nodes, model = self.step_h, self.nodes, self.model
        t0 = 0 if placed is None else 1
        end = price.shape[0] - (1 if tail else 0)  # offsets the units may use: t0 … end − 1
        n = self._count(work_h)
        frac_h = work_h - (n - 1) * step_h  # the fraction, in (0, step_h]
        m = end - t0 - n + 1  # offsets each unit can run at: the slack in steps, plus one
        if m <= 0:
            return None
        count = price.shape[1]
        # (pools, steps): a unit's array is contiguous along the offsets it is scanned over.
        cost = np.ascontiguousarray(price[:end].T)
        whole = cost * (step_h * nodes)
        whole[:, caps[:end] < step_h - _EPS] = np.inf
        part = cost * (frac_h * nodes)
        # A fraction may end up to a second after the deadline (rounding), no other step later.
        late = np.full(end, _EPS)
        if self.deadline_cut and end == price.shape[0]:
            late[-1] = _SECOND_H
        part[:, caps[:end] < frac_h - late] = np.inf
        ready0 = model.start if placed is None else model.enter(placed[:, None].copy())[:, 0]
        if self.triangle and SOLVER != "units":
            starts = stretch_starts(whole, part, t0, end)
            if SOLVER == "stretches" or stretch_work(starts, m, count) < _unit_work(n, m, count):
                prog = StretchProgramme(
                    model, whole, part, t0, end, n, ready0, starts, MEMORY_CELLS
                )
                return self._stretched(prog, price, caps, placed, tail, frac_h)
        units = _Units(
            model,
            _Scan(whole, t0, m),
            _Scan(part, t0, m),
            ready0,
            n,
            every=1 if 2 * n * m * count <= MEMORY_CELLS else max(2, math.isqrt(n)),
        )
        for j in range(1, n + 1):
            units.advance(j)
            if j % 64 == 0 and j < n and not units.reachable():
                return None  # not even the latest offset is reachable: no schedule
        final = units.done(n, 1)  # (pools, m): all n done by offset d, the fraction among them
        if tail:
            into = model.enter(final[:, -1:].copy())[:, 0] + price[-1] * (caps[-1] * nodes)
            q_tail = int(np.argmin(into))
            best = float(into[q_tail])
            d_end, q_end = m - 1, -1
            ends = self._ends_h(price.shape[0] - 1, float(caps[-1]))
        else:
            # The earliest finish among the cheapest — to rounding: a later offset's running
            # minimum can undercut it by an ulp, the same costs added in another order.
            d_end = _first_cheapest(final.min(axis=0))
            q_end = int(np.argmin(final[:, d_end]))
            best = float(final[q_end, d_end])
            ends = self._ends_h(t0 + n - 1 + d_end, step_h)  # unless it is the fraction
        if not math.isfinite(best):
            return None

        def runs() -> tuple[tuple[int, int, float], ...]:
            out: list[tuple[int, int, float]] = []
            d, q, layer = d_end, q_end, 1
            if tail:
                out.append((price.shape[0] - 1, q_tail, float(caps[-1])))
                q = self._came_from(final[:, d], q_tail)
            for j in range(n, 0, -1):
                row = units.done(j, layer)[q]  # non-increasing: the unit ran where it first
                d = bisect.bisect_left(row, -float(row[d]), hi=d, key=lambda v: -v)  # got there
                t = t0 + j - 1 + d
                if layer == 1 and self._was_fraction(units, j, q, d, part[q, t], float(row[d])):
                    layer = 0
                    out.append((t, q, frac_h))
                else:
                    out.append((t, q, step_h))
                if j > 1:
                    q = self._came_from(units.done(j - 1, layer)[:, d], q)
            if placed is not None:
                out.append((0, self._came_from(placed, q), float(caps[0])))
            out.reverse()
            return tuple(out)

        # The last unit was the fraction (to rounding, as _was_fraction reads the path back).
        if not tail and units.part_last[q_end, d_end] <= best + abs(best) * _TIE:
            ends = self._ends_h(t0 + n - 1 + d_end, frac_h)
        return _Found(best, ends, runs)

    def _stretched(
        self,
        prog: StretchProgramme,
        price: Array,
        caps: Array,
        placed: Array | None,
        tail: bool,
        frac_h: float,
    ) -> _Found | None:
        """_dp by stretches (router.core.hindsight_stretches): the same schedules, the same
        least cost."""
        step_h, nodes, model = self.step_h, self.nodes, self.model
        last, best = prog.forward()
        at = len(prog.starts) - 1
        if tail:
            final = last[:, 1, -1]
            into = model.enter(final[:, None].copy())[:, 0] + price[-1] * (caps[-1] * nodes)
            q_tail = int(np.argmin(into))
            cost = float(into[q_tail])
            if not math.isfinite(cost):
                return None
            q_end = self._came_from(final, q_tail)
            ends = self._ends_h(price.shape[0] - 1, float(caps[-1]))
        else:
            if best is None:
                return None
            cost, at, _ = best
            q_end, src = prog.finish(cost, at)
            t_last = prog.t0 + prog.starts[at - 1] + src.steps - 1
            ends = self._ends_h(t_last, frac_h if src.fraction else step_h)

        def runs() -> tuple[tuple[int, int, float], ...]:
            out: list[tuple[int, int, float]] = []
            if tail:
                out.append((price.shape[0] - 1, q_tail, float(caps[-1])))
            lag = prog.starts[at] - prog.n
            back, first = prog.back(at, 1, q_end, lag, self._came_from, step_h, frac_h)
            out.extend(back)
            if placed is not None:
                out.append((0, self._came_from(placed, first), float(caps[0])))
            out.reverse()
            return tuple(out)

        return _Found(cost, ends, runs)

    def _was_fraction(
        self, units: _Units, j: int, q: int, d: int, part_usd: float, value: float
    ) -> bool:
        """Whether unit j, run at offset d on pool q for `value` in the fraction's layer, was
        the fraction (reached from the layer without it) rather than a whole step."""
        if j == 1:
            before = float(units.ready0[q])
        else:
            done = units.done(j - 1, 0)[:, d]
            options = done + self.model.column(q)
            before = min(float(done[q]), float(options.min()))
        return before + part_usd <= value * (1 + 1e-12) + 1e-12

    def _ends_h(self, t: int, last_h: float) -> float:
        """Hours from the arrival to the end of a last step at offset t that runs last_h."""
        return (self.begins(t) - self.ctx.arrived_at).total_seconds() / 3600.0 + last_h

    def _count(self, work_h: float) -> int:
        """Steps that work_h hours of whole steps take (the last one partly)."""
        return max(1, math.ceil(work_h / self.step_h - _EPS))

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


class _Scan:
    """One kind of unit (a whole step, or the fraction) over the offsets: done(j, ready) is
    the least cost with unit j done at offset d or earlier, ending on each pool.

    Waiting is a running minimum over offsets. When every pool has one price wherever it is
    offered (list prices, replayed availability), it is a gather instead: ready-for-the-unit
    costs never rise with the offset, so the cheapest offset ≤ d to have run it is the last
    one the pool was offered at (`last`)."""

    def __init__(self, full: Array, t0: int, m: int) -> None:
        self.full, self.t0, self.m = full, t0, m
        count = full.shape[0]
        offered = np.isfinite(full)
        low = np.where(offered, full, np.inf).min(axis=1)
        high = np.where(offered, full, -np.inf).max(axis=1)
        self.flat = bool(np.all((low == high) | ~offered.any(axis=1)))
        if self.flat:
            steps = np.where(offered, np.arange(full.shape[1], dtype=np.int32), np.int32(-1))
            self.rows = (np.arange(count, dtype=np.int32) * np.int32(m + 1))[:, None]
            # last step ≤ τ each pool was offered, plus its row's start in a padded ready array
            self.last = np.maximum.accumulate(steps, axis=1) + self.rows
            self.price = low[:, None]  # USD per unit on each pool (inf: never offered)
            self._at = np.empty((count, m), dtype=np.int32)

    def differs(self, other: _Scan) -> list[int] | None:
        """The steps at which the two flat scans offer different pools (None: not both flat);
        a unit whose offsets span none of them gathers from the same places in both."""
        if not (self.flat and other.flat):
            return None
        apart = (np.isfinite(self.full) != np.isfinite(other.full)).any(axis=0)
        return [int(t) for t in np.flatnonzero(apart)]

    def index(self, j: int) -> npt.NDArray[np.int32] | None:
        """Where unit j gathers from, per pool and offset (flat scans only)."""
        if not self.flat:
            return None
        t = self.t0 + j - 1
        # max(last − (t − 1), 0) + row start, as max(last + row − (t − 1), row)
        at: npt.NDArray[np.int32] = self._at
        np.subtract(self.last[:, t : t + self.m], np.int32(t - 1), out=at)
        np.maximum(at, self.rows, out=at)
        return at

    def done(self, j: int, padded: Array, at: npt.NDArray[np.int32] | None = None) -> Array:
        """`padded`: (pools, 1 + offsets), ready for unit j after a column of inf (where a
        pool was not offered since offset 0)."""
        t = self.t0 + j - 1  # unit j at offset d runs at step t + d
        if at is None:
            at = self.index(j)
        if at is not None:  # flat
            done: Array = padded.ravel().take(at)
            done += self.price
            return done
        done = padded[:, 1:] + self.full[:, t : t + self.m]
        np.minimum.accumulate(done, axis=1, out=done)  # done at offset d or earlier: waiting
        return done


class _Units:
    """The n units of one way to begin, in two layers: 0, every unit so far a whole step; 1,
    the fraction among them. done(j, layer): (pools, offsets) — every `every`-th unit's kept,
    and the last's; the others recomputed from the last kept one when the path is rebuilt."""

    def __init__(
        self, model: Moves, whole: _Scan, part: _Scan, ready0: Array, n: int, *, every: int
    ) -> None:
        self.model, self.whole, self.part, self.n, self.every = model, whole, part, n, every
        count, m = len(ready0), whole.m
        self.ready0 = ready0
        first = np.full((count, m + 1), np.inf)
        first[:, 1:] = ready0[:, None]
        self.start: tuple[Array, Array] = (first, np.full((count, m + 1), np.inf))
        self.ready = self.start
        self.part_last: Array = self.start[1]
        self.apart = part.differs(whole)  # None, or where the fraction's offsets differ
        if self.apart is not None:
            finite = np.isfinite(whole.price)
            self.delta = np.zeros_like(whole.price)
            self.delta[finite] = whole.price[finite] - part.price[finite]
        self.kept: dict[int, tuple[Array, Array]] = {}
        self._rebuilt: dict[int, tuple[Array, Array]] = {}

    def _done(self, j: int, ready: tuple[Array, Array]) -> tuple[Array, Array]:
        at = self.whole.index(j)
        whole = self.whole.done(j, ready[0], at)
        t = self.whole.t0 + j - 1
        if self.apart is not None and not any(t <= a < t + self.whole.m for a in self.apart):
            # the same offsets: each pool's one price, for less time
            part = whole - self.delta
        else:
            part = self.part.done(j, ready[0])
        if j == self.n:  # the last unit as the fraction: whether the job ends inside its step
            self.part_last = part.copy()
        if j > 1:
            np.minimum(part, self.whole.done(j, ready[1], at), out=part)
        return whole, part

    def _enter(self, done: tuple[Array, Array]) -> tuple[Array, Array]:
        """Ready for the next unit (padded, see _Scan.done): stay, or move in from any pool."""
        out = []
        for layer in done:
            padded = np.empty((layer.shape[0], layer.shape[1] + 1))
            padded[:, 0] = np.inf
            padded[:, 1:] = layer
            self.model.enter(padded[:, 1:])
            out.append(padded)
        return out[0], out[1]

    def advance(self, j: int) -> None:
        """Unit j done, from the ready arrays of unit j − 1."""
        done = self._done(j, self.ready)
        keep = j % self.every == 0 or j == self.n
        if keep:
            self.kept[j] = done
        if j < self.n:
            self.ready = self._enter(done)

    def reachable(self) -> bool:
        """Whether the latest offset is reachable in either layer (else: no schedule)."""
        return any(bool(np.isfinite(r[:, -1]).any()) for r in self.ready)

    def done(self, j: int, layer: int) -> Array:
        """Unit j's done array in a layer, kept or recomputed (with the rest of its block)."""
        found = self.kept.get(j) or self._rebuilt.get(j)
        if found is None:
            base = j - j % self.every
            ready = self.start if base == 0 else self._enter(self.kept[base])
            self._rebuilt = {}
            for k in range(base + 1, min(base + self.every, self.n + 1)):
                done = self._done(k, ready)
                self._rebuilt[k] = done
                ready = self._enter(done)
            found = self._rebuilt[j]
        return found[layer]


def _first_cheapest(costs: Array) -> int:
    """The first index whose cost is the least to rounding (_TIE), not the least to the ulp."""
    least = float(costs.min())
    if not math.isfinite(least):
        return int(np.argmin(costs))
    return int(np.flatnonzero(costs <= least + abs(least) * _TIE)[0])


def _better(found: _Found, best: _Found) -> bool:
    """Cheaper, or as cheap (to rounding: two programmes add the same costs in other orders)
    and sooner done."""
    if found.cost < best.cost * (1 - _TIE):
        return True
    return found.cost <= best.cost * (1 + _TIE) and found.ends < best.ends


def _unit_work(n: int, m: int, count: int) -> float:
    """A rough count of the array cells the unit programme touches (router.core.hindsight_
    stretches.stretch_work counts the same for its own)."""
    return n * (2.0 * count * m * 12 + 600.0 * count)


def _cheapest(price: Array) -> float:
    usable = price[np.isfinite(price)]
    return float(usable.min()) if usable.size else math.inf


def _by(ends: datetime, deadline: datetime | None) -> bool:
    return deadline is None or ends <= deadline + timedelta(seconds=1)
