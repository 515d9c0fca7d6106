"""How often to checkpoint: Young's and Daly's optimum intervals, and interval strings. Pure.

With a save taking δ seconds and interruptions arriving on average every M seconds, the interval τ
between checkpoints that minimises expected lost work plus save time is, to first order (Young,
1974), τ = √(2δM); Daly (2006) adds higher-order terms, τ = √(2δM)·(1 + ⅓√(δ/2M) + ⅑(δ/2M)) − δ
for δ < 2M, and τ = M otherwise.
"""

from __future__ import annotations

import math
import re

SECONDS_PER_HOUR = 3600.0
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*", re.IGNORECASE)
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def young_interval_s(save_s: float, mtbi_s: float) -> float:
    """Young's optimum checkpoint interval √(2 × save time × mean time between interruptions), s."""
    if save_s < 0 or mtbi_s <= 0:
        raise ValueError("save_s must be >= 0 and mtbi_s > 0")
    return math.sqrt(2.0 * save_s * mtbi_s)


def daly_interval_s(save_s: float, mtbi_s: float) -> float:
    """Daly's higher-order optimum interval (seconds); equals M when a save takes ≥ 2M."""
    if save_s < 0 or mtbi_s <= 0:
        raise ValueError("save_s must be >= 0 and mtbi_s > 0")
    if save_s >= 2.0 * mtbi_s:
        return mtbi_s
    ratio = save_s / (2.0 * mtbi_s)
    return math.sqrt(2.0 * save_s * mtbi_s) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - save_s


def suggested_interval_s(save_s: float, interruptions_per_hour: float) -> float | None:
    """Young's interval for a placement's interruption rate (per instance-hour); None at rate 0.

    Rate 0 (on-demand, reserved) has no optimum: checkpoint as the job's own interval says.
    """
    if interruptions_per_hour < 0:
        raise ValueError("interruptions_per_hour must be >= 0")
    if interruptions_per_hour == 0:
        return None
    return young_interval_s(save_s, SECONDS_PER_HOUR / interruptions_per_hour)


def parse_interval_s(text: str) -> float:
    """Seconds in "90", "90s", "30m", "1.5h", "1d", or a sum such as "1h30m"."""
    total, position = 0.0, 0
    cleaned = text.strip()
    if not cleaned:
        raise ValueError("empty interval — use e.g. 30m, 1h or a number of seconds")
    while position < len(cleaned):
        match = _DURATION.match(cleaned, position)
        if not match or match.end() == position:
            raise ValueError(f"{text!r} is not an interval — use e.g. 30m, 1h or 600")
        total += float(match.group(1)) * _UNIT_S[(match.group(2) or "s").lower()]
        position = match.end()
    return total
