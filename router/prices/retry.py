"""Retry a call with capped exponential backoff and full jitter (shared by the price sources)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def backoff_delay_s(attempt: int, *, base_delay_s: float, max_delay_s: float) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based): full jitter, capped."""
    # Full jitter spreads concurrent region workers apart instead of retrying in lockstep.
    ceiling = min(max_delay_s, base_delay_s * (2 ** (attempt - 1)))
    return random.uniform(0.0, ceiling)


def retry_call(
    fn: Callable[[], T],
    *,
    is_retryable: Callable[[BaseException], bool],
    max_attempts: int,
    base_delay_s: float,
    max_delay_s: float,
    sleep: Callable[[float], None] = time.sleep,
    retry_after: Callable[[BaseException], float | None] | None = None,
) -> T:
    """Call `fn` up to `max_attempts` times; re-raise the last error or a non-retryable one.

    `retry_after(exc)` may return the server-requested wait in seconds (e.g. a Retry-After
    header); it replaces the jittered delay but is still capped at `max_delay_s`.
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    attempt = 1
    while True:
        try:
            return fn()
        except Exception as exc:
            if attempt >= max_attempts or not is_retryable(exc):
                raise
            requested_s = retry_after(exc) if retry_after is not None else None
            if requested_s is not None:
                delay_s = min(max_delay_s, max(0.0, requested_s))
            else:
                delay_s = backoff_delay_s(
                    attempt, base_delay_s=base_delay_s, max_delay_s=max_delay_s
                )
            sleep(delay_s)
            attempt += 1
