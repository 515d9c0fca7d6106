"""Durations as people write them in job.yaml and spotroute.yaml: 90, "15m", "1h30m", "1d"."""

from __future__ import annotations

import math
import re

from router.core.user_values import kind_of, show_value

# A plain number, or amounts with units in the order d, h, m, s ("1h30m"); at least one digit.
DURATION_PATTERN = (
    r"^\s*(?:\d+(?:\.\d+)?|(?=\d)(?:\d+(?:\.\d+)?\s*[dD]\s*)?(?:\d+(?:\.\d+)?\s*[hH]\s*)?"
    r"(?:\d+(?:\.\d+)?\s*[mM]\s*)?(?:\d+(?:\.\d+)?\s*[sS])?)\s*$"
)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([dhms])", re.IGNORECASE)
_SECONDS_PER_UNIT = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_DURATION_EXAMPLES = "write e.g. 30m, 2h, 1h30m, 1d or a number of seconds"


# ---------------------------------------------------------------------------------------------
# value parsers (pure; raise ValueError with a "problem — fix" message)


def parse_duration_s(value: object) -> float:
    """Seconds in a job.yaml duration: 90, "90", "90s", "15m", "2h", "1h30m", "1.5h", "1d"."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {show_value(value)} — {_DURATION_EXAMPLES}")
    if isinstance(value, int | float):
        return _finite(float(value) if abs(value) < 1e300 else math.inf, value)
    if not isinstance(value, str):
        raise ValueError(f"expected a duration, got {kind_of(value)} — {_DURATION_EXAMPLES}")
    text = value.strip()
    if len(text) > 40:
        raise ValueError(f"bad duration {show_value(value)} — {_DURATION_EXAMPLES}")
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return _finite(float(text), value)
    if re.fullmatch(DURATION_PATTERN, text):
        return _finite(
            sum(
                float(n) * _SECONDS_PER_UNIT[unit.lower()]
                for n, unit in _DURATION_PART.findall(text)
            ),
            value,
        )
    raise ValueError(f"bad duration {show_value(value)} — {_DURATION_EXAMPLES}")


MAX_DURATION_S = 10 * 365 * 86400.0  # ten years: longer is a typo, and costs must stay finite


def _finite(seconds: float, value: object) -> float:
    if not math.isfinite(seconds) or seconds > MAX_DURATION_S:
        raise ValueError(
            f"duration {show_value(value)} is longer than ten years — {_DURATION_EXAMPLES}"
        )
    return seconds


FOREVER = "forever"  # migration.spot_wait: wait for spot however long it takes
MAX_SPOT_WAIT_S = 365 * 86400.0  # a longer bounded wait is a typo for `forever`
_WAIT_EXAMPLES = "write e.g. 6h, 12h, 3d, 0 (never wait) or forever (never buy on-demand)"


def parse_spot_wait_s(value: object) -> float:
    """Seconds of migration.spot_wait: a duration up to a year, or `forever` (math.inf)."""
    if isinstance(value, str) and value.strip().lower() == FOREVER:
        return math.inf
    try:
        seconds = parse_duration_s(value)
    except ValueError:
        raise ValueError(f"bad wait {show_value(value)} — {_WAIT_EXAMPLES}") from None
    if seconds < 0:
        raise ValueError(f"{show_value(value)} is negative — {_WAIT_EXAMPLES}")
    if seconds > MAX_SPOT_WAIT_S:
        raise ValueError(f"{show_value(value)} is more than a year — {_WAIT_EXAMPLES}")
    return seconds
