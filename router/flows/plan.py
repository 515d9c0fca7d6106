"""From a job file to ranked placements: gathers job, org config and offers; runs the planner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from router.config.datafiles import load_egress, load_interruption_model, load_storage_prices
from router.config.home import spotroute_home
from router.config.job_file import job_warnings, load_job
from router.config.org_file import org_config_for
from router.config.project import Project
from router.core.errors import BadInput
from router.core.interruption import Evidence, EvidenceKey
from router.core.job.model import Job
from router.core.offers import Offer
from router.core.org import OrgConfig
from router.core.placement import Placement, PlanResult
from router.core.planner import plan
from router.flows.startup_size import check_startup_script
from router.flows.zone_evidence import recorded_evidence
from router.prices.book import SOURCE_KINDS, OfferBook, book_now
from router.prices.local import local_offers
from router.prices.quotas.book import open_book_if_cached
from router.prices.quotas.cache import default_path as quota_cache_path

if TYPE_CHECKING:
    from router.core.timeshift import ShiftSuggestion


# A save's duration when job.yaml gives no checkpoint.save_time (seconds): a few GB to object
# storage from one node. Marked "assumed" wherever it is shown.
ASSUMED_SAVE_S = 60.0


@dataclass(frozen=True)
class IntervalAdvice:
    """Young/Daly's checkpoint interval at one placement, and the interval the job will use (s).

    The job's `checkpoint.interval` is what the stack passes the training process
    (SPOTROUTE_CHECKPOINT_INTERVAL), so it always overrides the suggestion; this says how far
    apart the two are.
    """

    save_s: float
    save_s_assumed: bool  # True: ASSUMED_SAVE_S, job.yaml has no checkpoint.save_time
    interruptions_per_hour: float  # the placement's pool, from the interruption model
    young_s: float | None  # None at rate 0: nothing to trade the saves against
    daly_s: float | None
    job_interval_s: float

    @property
    def mtbi_s(self) -> float | None:
        """Mean time between interruptions (seconds); None at rate 0."""
        return 3600.0 / self.interruptions_per_hour if self.interruptions_per_hour > 0 else None

    def to_json(self) -> dict[str, object]:
        return {
            "young_s": self.young_s,
            "daly_s": self.daly_s,
            "save_s": self.save_s,
            "save_s_source": "assumed" if self.save_s_assumed else "job.checkpoint.save_time",
            "interruptions_per_hour": self.interruptions_per_hour,
            "mtbi_s": self.mtbi_s,
            "job_interval_s": self.job_interval_s,
            "interval_in_effect_s": self.job_interval_s,
            "overridden_by_job": True,
        }


def interval_advice(job: Job, placement: Placement) -> IntervalAdvice | None:
    """The suggested checkpoint interval at `placement`; None when the job does not checkpoint."""
    from router.checkpoint.interval import daly_interval_s, young_interval_s

    checkpoint = job.checkpoint
    if checkpoint is None:
        return None
    save_s = checkpoint.save_time_s or ASSUMED_SAVE_S
    rate = placement.interruptions_per_hour
    young = daly = None
    if rate > 0:
        young = young_interval_s(save_s, 3600.0 / rate)
        daly = daly_interval_s(save_s, 3600.0 / rate)
    return IntervalAdvice(
        save_s=save_s,
        save_s_assumed=checkpoint.save_time_s is None,
        interruptions_per_hour=rate,
        young_s=young,
        daly_s=daly,
        job_interval_s=checkpoint.interval_s,
    )


@dataclass(frozen=True)
class PlanReport:
    """A planned job: the ranked placements, the rejected offers, and what was considered."""

    job: Job
    org: OrgConfig
    result: PlanResult
    offers_considered: int
    # A later, historically cheaper start of the best placement inside the job's deadline
    # (router.flows.timeshift); None without a deadline, price history or a saving.
    time_shift: ShiftSuggestion | None = None
    # Per placement, in rank order: the suggested checkpoint interval (None: no checkpoint).
    intervals: tuple[IntervalAdvice | None, ...] = ()
    # Where the offers came from: the source kinds chosen, counts per cloud and kind.
    book: OfferBook | None = None
    # Valid but unwise in the job file, one line each (a credential in plain run.env).
    warnings: tuple[str, ...] = ()


def current_offers(
    job: Job, now: datetime, org: OrgConfig | None = None, project: Project | None = None
) -> list[Offer]:
    """Offers the job could use: cached live/imported quotes over the snapshot, plus local."""
    return current_book(job, now, org, project).offers


def current_book(
    job: Job,
    now: datetime,
    org: OrgConfig | None = None,
    project: Project | None = None,
    kinds: tuple[str, ...] = SOURCE_KINDS,
) -> OfferBook:
    """The job's clouds' offers of the chosen source kinds, plus the local target's (always)."""
    from dataclasses import replace

    from router.config.local_market import load_local_market

    clouds = [c for c in job.resources.clouds if c != "local"]
    book = book_now(clouds, kinds) if clouds else OfferBook([], kinds=kinds)
    market = None
    if "local" in job.resources.clouds and org is not None:
        market = load_local_market(org, project.root if project else None)
    local = local_offers(job, now, market)
    return replace(book, offers=book.offers + local) if local else book


def plan_job(
    job_path: Path,
    *,
    project: Project | None,
    now: datetime,
    require_fresh: bool = False,
    top: int | None = None,
    sources: tuple[str, ...] = SOURCE_KINDS,
    evidence: Mapping[EvidenceKey, Evidence] | None = None,
) -> PlanReport:
    """Load the job and rank every offer that fits it (USD totals over the expected hours).

    `sources` are the price source kinds to plan on (router.prices.book.SOURCE_KINDS);
    `evidence`: what was seen of each spot pool (router.flows.zone_evidence), default read from
    the project's records — the interruption model's update of the advisor buckets.
    """
    if top is not None and top < 1:
        raise BadInput(f"--top must be at least 1, got {top}")
    job = load_job(job_path)
    org = org_config_for(project)
    book = current_book(job, now, org, project, sources)
    offers = book.offers
    # Cached readings only: no cloud SDK on the plan path (`route quotas refresh` reads them).
    quotas = open_book_if_cached(
        quota_cache_path(spotroute_home()), now=now, clouds=job.resources.clouds
    )
    result = plan(
        job,
        offers,
        org=org,
        egress=load_egress(),
        interruption=load_interruption_model().with_evidence(
            evidence if evidence is not None else recorded_evidence(project, now)
        ),
        storage=load_storage_prices(),
        now=now,
        require_fresh=require_fresh or org.require_fresh,
        top=top,
        quotas=quotas,
        refused=book.refused,
    )
    if result.placements:
        # The best placement's cloud must accept the job's start-up script (EC2 user data 16 KB).
        check_startup_script(job, result.placements[0], job_path)
    shift = None
    if result.placements and job.deadline is not None:  # only a deadline leaves room to wait
        from router.flows.timeshift import later_start

        shift = later_start(job, result.placements[0], now=now)
    return PlanReport(
        job=job,
        org=org,
        result=result,
        offers_considered=len(offers) + len(book.refused),
        time_shift=shift,
        intervals=tuple(interval_advice(job, p) for p in result.placements),
        book=book,
        warnings=tuple(job_warnings(job, job_path, project)),
    )
