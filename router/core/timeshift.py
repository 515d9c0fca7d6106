"""Time shifting: would starting later, inside the job's window, have been cheaper? Pure.

`suggest_start(series, now=…, duration_h=…, latest_start=…)` looks at the price history of the
job's best placement (or the cheapest of its placements at each moment) on each of the last
`lookback_days` days: for a start delayed by d hours, the same clock time on day D costs

    cost_D(d) = Σ price(t0_D + d + i·step) × step_h × node_count     over the job's duration

where t0_D is the time of day of `now` on day D (today's part of the window counts only when
the history covers it). It suggests the delay d ≤ latest_start − now with the largest mean
saving 1 − cost_D(d) / cost_D(0), when that mean is at least min_saving_pct and the delay was
cheaper on at least min_bore_out of the days ("how often history bore it out"). The expected
saving in USD applies that share to the cost of starting now at the latest price.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True, slots=True)
class ShiftSuggestion:
    """Start later: when, what it saves (mean over the days compared), how often it did."""

    start_at: datetime
    delay_h: float
    expected_saving_pct: float
    expected_saving_usd: float  # against starting now at the latest price
    bore_out: float  # share of the days compared on which the delay was cheaper, 0-1
    days_compared: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "start_at": self.start_at.isoformat(),
            "delay_h": self.delay_h,
            "expected_saving_pct": self.expected_saving_pct,
            "expected_saving_usd": self.expected_saving_usd,
            "bore_out": self.bore_out,
            "days_compared": self.days_compared,
            "reason": self.reason,
        }


def suggest_start(
    series: Sequence[tuple[datetime, float]],
    *,
    now: datetime,
    duration_h: float,
    latest_start: datetime,
    node_count: int = 1,
    step_s: float = 3600.0,
    lookback_days: int = 14,
    min_saving_pct: float = 5.0,
    min_bore_out: float = 0.5,
) -> ShiftSuggestion | None:
    """The best later start within [now, latest_start] by price history, or None to start now."""
    if now.tzinfo is None:
        raise ValueError("suggest_start(now=...) must be timezone-aware (UTC)")
    if not series or duration_h <= 0 or latest_start <= now:
        return None
    points = sorted(series)
    times = [t for t, _ in points]
    prices = [p for _, p in points]
    step = timedelta(seconds=step_s)
    max_delay = int((latest_start - now) / step)
    if max_delay < 1:
        return None
    pieces = max(1, round(duration_h * 3600 / step_s))
    piece_h = duration_h / pieces

    def price_at(at: datetime) -> float | None:
        i = bisect.bisect_right(times, at) - 1
        return prices[i] if i >= 0 else None

    def cost(start: datetime) -> float | None:
        total = 0.0
        for i in range(pieces):
            at = start + timedelta(hours=i * piece_h)
            if at > times[-1]:
                return None  # history does not reach this far
            p = price_at(at)
            if p is None:
                return None
            total += p * piece_h * node_count
        return total

    baselines: list[tuple[datetime, float]] = []
    for back in range(1, lookback_days + 1):
        day_start = now - timedelta(days=back)
        base = cost(day_start)
        if base is not None and base > 0:
            baselines.append((day_start, base))
    if not baselines:
        return None
    best: tuple[float, int, float, int] | None = None  # (mean saving, delay, bore out, days)
    for delay in range(1, max_delay + 1):
        savings: list[float] = []
        for day_start, base in baselines:
            later = cost(day_start + delay * step)
            if later is not None:
                savings.append(1 - later / base)
        if not savings:
            continue
        mean = sum(savings) / len(savings)
        bore = sum(1 for s in savings if s > 0) / len(savings)
        if best is None or mean > best[0] + 1e-12:
            best = (mean, delay, bore, len(savings))
    if best is None:
        return None
    mean, delay, bore, days = best
    if mean * 100 < min_saving_pct or bore < min_bore_out:
        return None
    now_price = price_at(now) or prices[-1]
    cost_now = now_price * duration_h * node_count
    delay_h = delay * step_s / 3600
    start_at = now + delay * step
    return ShiftSuggestion(
        start_at=start_at,
        delay_h=delay_h,
        expected_saving_pct=100 * mean,
        expected_saving_usd=mean * cost_now,
        bore_out=bore,
        days_compared=days,
        reason=(
            f"starting {delay_h:g} h later ({start_at:%Y-%m-%d %H:%M} UTC) was "
            f"{100 * mean:.0f} % cheaper on average over the last {days} days "
            f"(cheaper on {bore * 100:.0f} % of them): about ${mean * cost_now:,.2f} on "
            f"${cost_now:,.2f}"
        ),
    )
