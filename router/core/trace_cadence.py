"""When a price series lists a pool, from its source's own cadence; pure.

A source is one price file's rows of one cloud and market (one price list, observed together).
Its rows are observations taken in rounds: a catalog a day, a price cache refreshed every hour,
one row per pool for a list price that never changes. A pool is **gone** when the source moves
on without it — a later round lists other pools but not it — until its next row; a source that
never moves on (one row per pool) keeps every pool for ever, whatever the span of the window.

A round is told from a pool's own cadence (the median time between its rows; the median of the
source's pools for a pool with one row): a row of another pool at least half of that cadence
after the pool's last row belongs to a later round, so rows of one refresh spread over minutes
(one region after another) are one round. A source with no pool seen twice has no cadence: its
pools hold. router.core.backtest_model.trace_from_points applies the spans.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from itertools import pairwise
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from router.core.backtest_model import Pool

# [from, until): the pool is listed from a row of it until a round of its source without it;
# None = open (listed before its first row / for ever after its last).
Span = tuple[datetime | None, datetime | None]


def listed_spans(points: Iterable[tuple[datetime, Pool, float]]) -> dict[Pool, tuple[Span, ...]]:
    """Per pool, the spans one file's rows list it in (each cloud and market a source)."""
    sources: dict[tuple[str, str], dict[Pool, set[datetime]]] = {}
    for at, pool, _ in points:
        sources.setdefault((pool.cloud, pool.market), {}).setdefault(pool, set()).add(at)
    out: dict[Pool, tuple[Span, ...]] = {}
    for pools in sources.values():
        rows = {pool: sorted(times) for pool, times in pools.items()}
        rounds = sorted({t for times in rows.values() for t in times})
        own = {pool: _cadence(times) for pool, times in rows.items()}
        known = [c for c in own.values() if c is not None]
        typical = _median(known) if known else None
        for pool, times in rows.items():
            out[pool] = _spans(times, rounds, own[pool] or typical)
    return out


def merge_spans(*found: Mapping[Pool, Sequence[Span]]) -> dict[Pool, tuple[Span, ...]]:
    """Spans of several files together: a pool is listed where any file lists it."""
    out: dict[Pool, tuple[Span, ...]] = {}
    for spans in found:
        for pool, these in spans.items():
            out[pool] = (*out.get(pool, ()), *these)
    return out


def listed_at(spans: Sequence[Span], edge: datetime) -> bool:
    """Whether the rows before `edge` leave the pool listed (a row of it, no round since)."""
    return any((a is None or a < edge) and (b is None or b >= edge) for a, b in spans)


def _cadence(times: Sequence[datetime]) -> timedelta | None:
    """The median time between a pool's rows; None for a pool seen once."""
    if len(times) < 2:
        return None
    return _median([b - a for a, b in pairwise(times)])


def _median(values: Sequence[timedelta]) -> timedelta:
    """The middle value (the upper of the two middle ones)."""
    return sorted(values)[len(values) // 2]


def _spans(
    rows: Sequence[datetime], rounds: Sequence[datetime], cadence: timedelta | None
) -> tuple[Span, ...]:
    if cadence is None:
        return ((None, None),)  # the source never moved on: listed for ever
    half = cadence / 2
    # Listed before its first row unless an earlier round of the source went without it.
    begin: datetime | None = rows[0] if rounds[0] <= rows[0] - half else None
    spans: list[Span] = []
    for n, this in enumerate(rows):
        later = rows[n + 1] if n + 1 < len(rows) else None
        # The first round after this row's own (half a cadence on): it should list the pool.
        i = bisect_left(rounds, this + half)
        missed = rounds[i] if i < len(rounds) else None
        if later is not None and (missed is None or missed > later - half):
            continue  # that round is the next row's own: listed throughout
        spans.append((begin, missed))
        begin = later
    return tuple(spans)
