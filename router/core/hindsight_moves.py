"""What moving between pools costs the hindsight optimum (router.core.hindsight); pure.

`Moves`: the restore as money, and data and checkpoint egress region to region (router.core.
egress, the policies' model), entered span by span; `distinct`: the pools the optimum can tell
apart.
"""

from __future__ import annotations

import weakref

import numpy as np
import numpy.typing as npt

from router.core.backtest_model import Pool
from router.core.decision_model import TransferCosts
from router.core.egress import EgressTable

Array = npt.NDArray[np.float64]


def distinct(
    order: list[int],
    placed: list[Pool],
    prices: Array,
    placed_at: list[int],
    transfers: TransferCosts,
) -> list[int]:
    """The pools in `order` less those the optimum cannot tell from an earlier one: the same
    price and availability at every step, and moved to and from at the same cost (the same
    region, or no egress anywhere). Every argmin takes the first of equals, so such a pool is
    never on the path: dropping it changes nothing but the work (two on-demand regions at one
    list price, say)."""
    regions = {(p.cloud, p.region) for p in placed}
    data = {transfers.data_to(c, r) for c, r in regions}
    free = len(data) <= 1 and all(
        transfers.checkpoint(*a, *b) == 0.0 for a in regions for b in regions if a != b
    )
    seen: set[tuple[bytes, tuple[str, str] | None]] = set()
    kept = []
    for j in order:
        where = None if free else (placed[j].cloud, placed[j].region)
        key = (prices[:, placed_at[j]].tobytes(), where)
        if key not in seen:
            seen.add(key)
            kept.append(j)
    return kept


_CROSS: weakref.WeakKeyDictionary[
    EgressTable, dict[tuple[float, tuple[tuple[str, str], ...]], Array]
] = weakref.WeakKeyDictionary()


def cross(transfers: TransferCosts, regions: tuple[tuple[str, str], ...]) -> Array:
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


class Moves:
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

    def enter(self, value: Array, out: Array | None = None) -> Array:
        """(P, …): the least of staying on each pool and moving there from any pool — in place,
        or into `out` (value left as it is)."""
        if out is None:
            out = value
        if len(self.firsts) == 1:
            np.minimum(value, value.min(axis=0) + self.restore_usd, out=out)
            return out
        between = self.between
        if len(self.spans) > 3:  # many regions: one pass over (regions, regions, offsets)
            per_region = np.minimum.reduceat(value, self.firsts, axis=0)
            moves = between.reshape(between.shape + (1,) * (value.ndim - 1))
            best = (per_region[:, None] + moves).min(axis=0)
            np.minimum(value, best[self.region_of], out=out)
            return out
        # A few regions (the usual case): span by span, no (R, R, m) temporary.
        per_region = np.empty((len(self.spans), *value.shape[1:]))
        for r, (a, b) in enumerate(self.spans):
            value[a:b].min(axis=0, out=per_region[r])
        for r, (a, b) in enumerate(self.spans):
            into = per_region[0] + between[0, r]
            for s in range(1, len(self.spans)):
                np.minimum(into, per_region[s] + between[s, r], out=into)
            np.minimum(value[a:b], into, out=out[a:b])
        return out
