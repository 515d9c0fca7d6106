"""Would this job be cheaper started later? The price cache's history through
router.core.timeshift.suggest_start, for `route plan` to show next to the best placement.

The job's window ends at its deadline minus its expected duration and the margin decide() keeps
(a restore and the slack test's risk: router.core.decide.latest_start — a later start would be
sent to on-demand for good at once, so the spot saving could not be had); job.yaml has no
separate start window, so a job without a deadline gets no suggestion.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from router.core.decide import latest_start
from router.core.decision_model import rules_for_job
from router.core.job.model import Job
from router.core.placement import Placement
from router.core.timeshift import ShiftSuggestion, suggest_start


def later_start(
    job: Job,
    placement: Placement,
    *,
    now: datetime,
    cache: Path | None = None,
    lookback_days: int = 14,
) -> ShiftSuggestion | None:
    """A later start for `placement` inside the job's deadline, from the cache's price history."""
    from router.config.home import cache_path
    from router.prices.cache import QuoteCache

    if job.deadline is None:
        return None
    rules = rules_for_job(job, egress=None)
    latest = latest_start(rules, job.duration_hours)
    if latest <= now:
        return None
    path = cache or cache_path()
    if not path.exists():
        return None
    with QuoteCache(path) as quotes:
        history = quotes.history(
            cloud=placement.cloud,
            instance_type=placement.instance_type,
            region=placement.region,
            market=placement.market,
            since=now - timedelta(days=lookback_days + 1),
            until=now,
        )
    series = [
        (q.observed_at, q.price_per_hour)
        for q in history
        if placement.zone is None or q.zone in (None, placement.zone)
    ]
    return suggest_start(
        series,
        now=now,
        duration_h=job.duration_hours,
        latest_start=latest,
        node_count=job.node_count,
        lookback_days=lookback_days,
    )
