"""The hindsight optimum's programme over the trace's stretches (router.core.hindsight); pure.

Real traces hold still for long: a 32-s availability file changes at a few percent of its
samples, a list price not at all. A **stretch** is a run of steps at which every feasible pool
has the same price and availability. Inside one, where the steps run does not change what they
cost, so the least schedule runs on one pool per stretch, its units at the stretch's start —
provided a move never costs more than two moves through a third pool (`triangle`), so that one
move to the cheapest pool a stretch visits, and one move on from it, never cost more than the
moves of the path they replace; and a step of a stretch holds a whole step or the fraction
alike (the arrival's and the deadline's steps are stretches of their own). That is the unit
programme's own schedule space, so both give the same least cost.

The programme walks time from stretch to stretch with, per pool and per **lag** e (steps spent
idle so far, 0 … m − 1 where m is the slack plus one; the units done are then the steps so far
less e), the least cost to be there in two layers (the fraction not yet run, run), as the unit
programme does. A stretch of k steps at unit cost c (fraction cost f) on pool q runs r of its
steps (0 … k): from lag e to e + k − r, r·c dearer (one of them the fraction: (r − 1)·c + f).
Over r that is a minimum over a window of k lags of ready + e·c, plus (k − e')·c: a sliding
minimum, by doubling. Ready is the least of staying on q and moving in (Moves.enter), as between
units. Cost per job: O(S × m × (P + R²) × log k) for S stretches, against the unit programme's
O(n × m × (P + R²)) for n units; router.core.hindsight takes the cheaper.

The path is read back from the arrays kept at each stretch's start (every B-th when they do not
fit MEMORY_CELLS, the others recomputed once): at each, the job waited the whole stretch when its
array before holds the same value k lags earlier, else it ran r of the stretch's first steps on
the pool, reached from the lag of the window's first least entry (the fewest steps: the earliest
finish). Values are compared exactly: every entry is a minimum of sums that the read-back
recomputes with the same operations.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from router.core.hindsight_moves import Moves

Array = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]
Run = tuple[int, int, float]  # (step offset, pool column, hours)
_TIE = 1e-12  # relative: a later finish must be cheaper by more than this to be preferred


def triangle(model: Moves) -> bool:
    """Whether no move costs more than two moves through a third pool (region to region)."""
    between = model.between
    through = (between[:, :, None] + between[None, :, :]).min(axis=1)
    return bool(np.all(through >= between * (1 - 1e-12)))


def stretch_starts(whole: Array, part: Array, t0: int, end: int) -> list[int]:
    """Offsets (from t0) at which a stretch begins, and end − t0: where a pool's whole-step or
    fraction cost differs from the step before; the first and last step alone (their caps)."""
    span = end - t0
    changed = np.any(whole[:, t0 + 1 : end] != whole[:, t0 : end - 1], axis=0)
    changed |= np.any(part[:, t0 + 1 : end] != part[:, t0 : end - 1], axis=0)
    starts = (np.flatnonzero(changed) + 1).tolist()
    return sorted({0, *([1] if span > 1 else []), *starts, *([span - 1] if span > 1 else []), span})


def stretch_work(starts: list[int], m: int, count: int) -> float:
    """A rough count of the array cells the programme touches (to pick the cheaper one)."""
    cells = 0.0
    for a, b in itertools.pairwise(starts):
        cells += 2 * count * m * (10 + math.log2(max(1, min(b - a, m))))
    return cells + 400.0 * count * (len(starts) - 1)


@dataclass(frozen=True)
class _Source:
    """How a state was reached in a stretch: r steps run from lag `lag` of `layer` (the last of
    them the fraction when `fraction`)."""

    layer: int
    lag: int
    steps: int
    fraction: bool


class StretchProgramme:
    """One way to begin, solved stretch by stretch (module docstring)."""

    def __init__(
        self,
        model: Moves,
        whole: Array,
        part: Array,
        t0: int,
        end: int,
        n: int,
        ready0: Array,
        starts: list[int],
        memory_cells: int,
    ) -> None:
        self.model, self.whole, self.part, self.t0, self.n = model, whole, part, t0, n
        self.ready0, self.starts = ready0, starts
        self.count = whole.shape[0]
        self.m = m = end - t0 - n + 1
        self.lags = np.arange(m, dtype=np.float64)
        self._cost_table()
        cells = 2 * self.count * m * len(starts)
        self.every = 1 if cells <= memory_cells else max(2, math.isqrt(len(starts)))
        self.kept: dict[int, Array] = {}
        self._rebuilt: dict[int, Array] = {}
        self.pinned: dict[int, Array] = {}  # the states around the cheapest finish

    # --- forward ------------------------------------------------------------------------

    def _costs(self, i: int) -> tuple[Array, Array, Mask, int]:
        """Stretch i's whole-step and fraction cost per pool (0 where not offered in a longer
        stretch), which pools it offers, and its length."""
        return self._c[i], self._f[i], self._ok[i], self.starts[i + 1] - self.starts[i]

    def _cost_table(self) -> None:
        at = self.t0 + np.array(self.starts[:-1], dtype=np.int64)
        c, f = self.whole[:, at].T.copy(), self.part[:, at].T.copy()
        longer = np.diff(np.array(self.starts)) > 1
        # In a longer stretch every step holds a whole step or the fraction alike; a single
        # step may hold only the fraction (its cap), and runs one step (no multiples of c).
        ok = np.isfinite(c) | ~longer[:, None]
        c[~ok], f[~ok] = 0.0, 0.0
        self._c, self._f, self._ok = c, f, ok

    def advance(self, i: int, state: Array) -> Array:
        """The (P, 2, m) state at stretch i + 1's start from the one at stretch i's. Only the
        lags of a possible state are computed (at least nothing done, at most every unit):
        the others stay inf. The sliding minimum runs with lags leading (its shifts are then
        contiguous blocks), entering a pool with pools leading (Moves.enter)."""
        m, count, n = self.m, self.count, self.n
        a = self.starts[i]
        c, f, ok, k = self._costs(i)
        b = a + k
        lo, hi, done = max(0, a - n), min(m, b + 1), max(0, b - n)
        out = np.empty_like(state)
        out[:, :, :done] = np.inf
        out[:, :, hi:] = np.inf
        waited = min(max(done, k), hi)  # from here on a lag may also have waited the stretch
        if lo >= hi:  # then done >= hi: nothing is possible
            return out
        ready = self.model.enter(state[:, :, lo:hi], out=np.empty((count, 2, hi - lo)))
        if a < hi:
            ready[:, 0, a - lo] = self.ready0  # nothing done yet: the first placement
        if k == 1:
            frac = ready[:, 0, done - lo :] + f[:, None]
            ran = ready[:, :, done - lo :]
            ran += c[:, None, None]
            self._settle(out, state, ran, frac, done, waited, hi, k)
            return out
        lags = self.lags[lo:hi, None]
        width = hi - lo
        ran = np.empty((width, 2, count))
        np.add(ready.transpose(2, 1, 0), (lags * c)[:, None, :], out=ran)
        ran = _window_min(ran.reshape(width, 2 * count), k).reshape(width, 2, count)
        ran += ((k - lags) * c)[:, None, :]
        frac = ran[:, 0] + (f - c)
        if not ok.all():
            ran[:, :, ~ok] = np.inf
            frac[:, ~ok] = np.inf
        self._settle(
            out, state, ran[done - lo :].transpose(2, 1, 0), frac[done - lo :].T, done, waited,
            hi, k,
        )  # fmt: skip
        return out

    @staticmethod
    def _settle(
        out: Array, state: Array, ran: Array, frac: Array, done: int, waited: int, hi: int, k: int
    ) -> None:
        """out[…, done:hi]: the least of running (ran; the fraction's layer also frac) and, from
        `waited` on, of having waited the whole stretch (the state k lags before)."""
        w = waited - done
        np.minimum(state[:, :, waited - k : hi - k], ran[:, :, w:], out=out[:, :, waited:hi])
        out[:, :, done:waited] = ran[:, :, :w]
        np.minimum(out[:, 1, done:hi], frac, out=out[:, 1, done:hi])

    def start_state(self) -> Array:
        return np.full((self.count, 2, self.m), np.inf)

    def state(self, i: int) -> Array:
        """The state at stretch i's start, kept or recomputed (with the rest of its block)."""
        found = self.kept.get(i)
        if found is None:
            found = self.pinned.get(i)
        if found is None:
            found = self._rebuilt.get(i)
        if found is None:
            base = i - i % self.every
            state = self.kept[base]
            self._rebuilt = {base: state}
            for j in range(base, min(base + self.every, len(self.starts) - 1)):
                state = self.advance(j, state)
                self._rebuilt[j + 1] = state
            found = self._rebuilt[i]
        return found

    def keep(self, i: int, state: Array) -> None:
        if i % self.every == 0 or i == len(self.starts) - 1:
            self.kept[i] = state

    # --- read back ----------------------------------------------------------------------

    def _ready_row(self, before: Array, a: int, q: int, layer: int) -> Array:
        """Pool q's ready cost per lag in `layer` (advance's, with the same sums)."""
        value = before[:, layer, :]
        row: Array = (value + self.model.column(q)[:, None]).min(axis=0)
        np.minimum(row, value[q], out=row)
        if layer == 0 and a < self.m:
            row[a] = self.ready0[q]
        return row

    def source(self, i: int, layer: int, q: int, lag: int, value: float) -> _Source | None:
        """How the state (layer, q, lag) at stretch i + 1's start got `value` in stretch i:
        None when it waited the stretch, else the fewest steps that reach it (the fraction
        last on a tie)."""
        a = self.starts[i]
        c, f, ok, k = self._costs(i)
        before = self.state(i)
        close = value + _TIE * max(1.0, abs(value))  # values as close are ties
        if lag >= k and before[q, layer, lag - k] <= close:
            return None
        lo = max(0, lag - k + 1)
        found: list[_Source] = []
        for src, fraction in ((layer, False), (0, True)) if layer == 1 else ((0, False),):
            if not ok[q]:
                break
            row = self._ready_row(before, a, q, src)
            if k == 1:
                got = row[lag] + (f[q] if fraction else c[q])
                if got <= close:
                    found.append(_Source(src, lag, 1, fraction))
                continue
            window = row[lo : lag + 1] + self.lags[lo : lag + 1] * c[q]
            least = float(window.min())  # the first of the least (to rounding): fewest steps
            at = int(np.argmax(window <= least + _TIE * max(1.0, abs(least))))
            got = float(window[at]) + (k - self.lags[lag]) * c[q]
            if fraction:
                got += f[q] - c[q]
            if got <= close:
                found.append(_Source(src, lo + at, k - lag + lo + at, fraction))
        assert found, "the optimum's read-back found no step that reaches its value"
        return min(found, key=lambda s: (s.steps, not s.fraction))

    def forward(self) -> tuple[Array, tuple[float, int, int] | None]:
        """Every stretch in turn: the last state, and the cheapest state with all n units done
        at the earliest stretch start that holds it (value, that start's index, pool)."""
        n, m = self.n, self.m
        state = self.start_state()
        self.keep(0, state)
        best: tuple[float, int, int] | None = None
        for i in range(len(self.starts) - 1):
            before, state = state, self.advance(i, state)
            self.keep(i + 1, state)
            lag = self.starts[i + 1] - n
            if 0 <= lag < m:
                column = state[:, 1, lag]
                q = int(np.argmin(column))
                v = float(column[q])
                if math.isfinite(v) and (best is None or v < best[0] * (1 - _TIE)):
                    best = (v, i + 1, q)
                    self.pinned = {i: before, i + 1: state}
        return state, best

    def finish(self, value: float, at: int) -> tuple[int, _Source]:
        """Of the pools whose state at stretch start `at` (lag: every unit done) is within a
        tie of `value`, the one whose last stretch ran fewest steps: (pool, how)."""
        lag = self.starts[at] - self.n
        after = self.state(at)
        options = []
        for q in np.flatnonzero(after[:, 1, lag] <= value * (1 + _TIE)).tolist():
            src = self.source(at - 1, 1, q, lag, float(after[q, 1, lag]))
            if src is not None:
                options.append((src.steps, not src.fraction, q, src))
        _, _, q, src = min(options, key=lambda o: (o[0], o[1], o[2]))
        return q, src

    def back(
        self,
        at: int,
        layer: int,
        q: int,
        lag: int,
        came_from: Callable[[Array, int], int],
        step_h: float,
        frac_h: float,
    ) -> tuple[list[Run], int]:
        """The runs (latest first) that reach state (layer, q, lag) at stretch start `at`,
        and the pool the first of them ran on."""
        out: list[Run] = []
        value = float(self.state(at)[q, layer, lag])
        i = at - 1  # the stretch that led there
        while True:
            src = self.source(i, layer, q, lag, value)
            if src is None:  # waited the whole stretch
                lag -= self.starts[i + 1] - self.starts[i]
                i -= 1
                continue
            a = self.starts[i]
            for s in range(src.steps - 1, -1, -1):
                last = s == src.steps - 1
                out.append((self.t0 + a + s, q, float(frac_h if src.fraction and last else step_h)))
            if a - src.lag == 0:  # nothing done before: the first placement
                return out, q
            before = self.state(i)
            q = came_from(before[:, src.layer, src.lag], q)
            layer, lag = src.layer, src.lag
            value = float(before[q, layer, lag])
            i -= 1


def _window_min(x: Array, k: int) -> Array:
    """Per column, the least of each row and the k − 1 rows before it (fewer at the start)."""
    m = x.shape[0]
    if k >= m:
        out: Array = np.minimum.accumulate(x, axis=0)
        return out
    s = 1
    while 2 * s <= k:
        nxt = np.empty_like(x)
        nxt[:s] = x[:s]
        np.minimum(x[s:], x[:-s], out=nxt[s:])
        x, s = nxt, 2 * s
    if s < k:
        nxt = x.copy()
        np.minimum(x[k - s :], x[: m - (k - s)], out=nxt[k - s :])
        x = nxt
    return x
