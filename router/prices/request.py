"""What a live price source is asked for: instance types, regions, markets, and call limits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True, kw_only=True)
class PriceRequest:
    """One refresh of one cloud's prices; timeouts in seconds, per API call."""

    instance_types: tuple[str, ...]  # this cloud's instance type names (from the catalog)
    regions: tuple[str, ...]  # regions to query; never empty
    markets: tuple[str, ...] = ("spot", "on-demand")
    timeout_s: float = 10.0  # per API call
    max_attempts: int = 5  # retries with exponential backoff on throttling / 5xx / timeouts
    max_workers: int = 8  # regions queried concurrently


def observation_time(now: datetime | None) -> datetime:
    """When a fetch observes what it reads: `now` in UTC (the current time if None).

    ValueError for a naive `now`: a source never guesses the time zone of a timestamp.
    """
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    return now.astimezone(UTC)
