"""What a quota source is asked for: quotas, regions, and call limits (like PriceRequest)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class QuotaRequest:
    """One refresh of one cloud's quotas; timeouts in seconds, per API call."""

    quotas: tuple[str, ...]  # quota codes / metrics / usage names (router/data/quotas.csv)
    regions: tuple[str, ...]  # regions to read; never empty
    timeout_s: float = 10.0
    max_attempts: int = 5
    max_workers: int = 8  # regions read concurrently
