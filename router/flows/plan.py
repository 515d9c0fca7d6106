"""From a job file to ranked placements: gathers job, org config and offers; runs the planner."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from router.config.datafiles import load_egress, load_interruption_model
from router.config.job_file import load_job
from router.config.org_file import org_config_for
from router.config.project import Project
from router.core.errors import BadInput
from router.core.job.model import Job
from router.core.offers import Offer
from router.core.org import OrgConfig
from router.core.placement import PlanResult
from router.core.planner import plan
from router.prices.book import offers_now
from router.prices.local import local_offers


@dataclass(frozen=True)
class PlanReport:
    """A planned job: the ranked placements, the rejected offers, and what was considered."""

    job: Job
    org: OrgConfig
    result: PlanResult
    offers_considered: int


def current_offers(job: Job, now: datetime) -> list[Offer]:
    """Offers the job could use: cached live/imported quotes over the snapshot, plus local."""
    clouds = [c for c in job.resources.clouds if c != "local"]
    return (offers_now(clouds) if clouds else []) + local_offers(job, now)


def plan_job(
    job_path: Path,
    *,
    project: Project | None,
    now: datetime,
    require_fresh: bool = False,
    top: int | None = None,
) -> PlanReport:
    """Load the job and rank every offer that fits it (USD totals over the expected hours)."""
    if top is not None and top < 1:
        raise BadInput(f"--top must be at least 1, got {top}")
    job = load_job(job_path)
    org = org_config_for(project)
    offers = current_offers(job, now)
    result = plan(
        job,
        offers,
        org=org,
        egress=load_egress(),
        interruption=load_interruption_model(),
        now=now,
        require_fresh=require_fresh or org.require_fresh,
        top=top,
    )
    return PlanReport(job=job, org=org, result=result, offers_considered=len(offers))
