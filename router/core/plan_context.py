"""The planner's per-job context: the job and org config digested once for the per-offer loop.

`JobContext` answers the filter questions of router/core/planner.py (market, size, cloud and
region globs, freshness, price caps, quota) with the one-line rejection reasons users see, and
the cost terms (list price, discount, data access, interruption rate) with per-key caches.
Pure: no I/O, `now` is given.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from datetime import datetime

from router.core.data_access import DataAccess, DataRoute, choose_access, route_data
from router.core.egress import EgressTable
from router.core.gpus import UnknownGpu, gpu_memory_gb
from router.core.interruption import EffectiveBucket, InterruptionModel, evidence_key
from router.core.job.model import Job
from router.core.offers import Offer
from router.core.org import Discount, OrgConfig, Reservation
from router.core.quotas import QuotaBook, QuotaVerdict
from router.core.storage_prices import StoragePrices

SPOT, ON_DEMAND, RESERVED = "spot", "on-demand", "reserved"
RESERVATION_SOURCE = "spotroute.yaml reservation"


class Globs:
    """A list of region globs compiled once; patterns with ':' match "cloud:region"."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = tuple(patterns)
        self._compiled = [(p, re.compile(fnmatch.translate(p)), ":" in p) for p in patterns]

    def first_match(self, cloud: str, region: str) -> str | None:
        for pattern, regex, qualified in self._compiled:
            if regex.match(f"{cloud}:{region}" if qualified else region):
                return pattern
        return None


class JobContext:
    """Everything about the job and org config the per-offer loop needs, computed once."""

    def __init__(
        self,
        job: Job,
        org: OrgConfig,
        egress: EgressTable,
        now: datetime,
        require_fresh: bool,
        interruption: InterruptionModel,
        storage: StoragePrices | None,
        quotas: QuotaBook | None = None,
    ) -> None:
        self.job, self.org, self.now = job, org, now
        self.quotas = quotas
        self._quota_cache: dict[tuple[str, str, str, str], QuotaVerdict] = {}
        self.require_fresh = require_fresh
        self.max_quote_age_s = float(org.max_quote_age_s)
        self.node_count = job.node_count
        self.hours = job.duration_hours
        resources = job.resources
        self.min_vcpus = resources.min_vcpus
        self.min_memory_gb = resources.min_memory_gb

        self.gpu_req: dict[str, dict[int, int]] = {}
        for alt in resources.accelerators:
            try:
                memory = gpu_memory_gb(alt.gpu)
            except UnknownGpu:
                memory = 0  # an unlisted GPU: its name alone decides
            counts = self.gpu_req.setdefault(alt.gpu, {})
            counts[alt.count] = max(counts.get(alt.count, 0), memory)
        self.accelerators = " or ".join(f"{a.gpu}×{a.count}" for a in resources.accelerators)
        self._wrong_model: dict[str, str] = {}

        self.job_clouds = tuple(resources.clouds)
        self.org_clouds = tuple(org.clouds)
        # Deny lists are checked before allow lists: deny wins wherever it is written.
        self._deny = (
            (Globs(resources.regions.deny), "job.yaml resources.regions.deny"),
            (Globs(org.regions.deny), "spotroute.yaml regions.deny"),
        )
        self._allow = (
            (Globs(resources.regions.allow), "job.yaml resources.regions.allow"),
            (Globs(org.regions.allow), "spotroute.yaml regions.allow"),
        )

        self.market_reason = self._market_reasons(job)
        self.market_ok = {market: not why for market, why in self.market_reason.items()}
        self.place_ok: dict[tuple[str, str], bool] = {}
        self.job_cap = job.max_price_per_hour
        self.org_cap = org.budgets.max_price_per_hour
        self.max_job_cost = org.budgets.max_job_cost

        checkpoint = job.checkpoint
        self.restore_h = checkpoint.restore_overhead_s / 3600.0 if checkpoint is not None else 0.0
        self.interval_h = checkpoint.interval_s / 3600.0 if checkpoint is not None else 0.0
        self.lost_hours_per_interruption = self.restore_h + self.interval_h / 2
        self._egress = egress
        self._storage = storage
        self.has_data = bool(job.data)
        self._route_cache: dict[tuple[str, str], tuple[DataRoute, ...]] = {}
        self._interruption = interruption
        self._interruption_cache: dict[
            tuple[str, str, str | None, str, str | None, str], tuple[float, EffectiveBucket]
        ] = {}
        self._discount_cache: dict[tuple[str, str, str], Discount | None] = {}
        self.reservations: dict[int, Reservation] = {}

    # --- filters -------------------------------------------------------------------------
    def wrong_model_reason(self, o: Offer) -> str:
        why = self._wrong_model.get(o.gpu)
        if why is None:
            why = self._wrong_model[o.gpu] = (
                f"{o.gpu or 'no GPU'} is not one of the job's accelerators ({self.accelerators})"
            )
        return why

    def accelerator_reason(self, o: Offer) -> str:
        need_memory = self.gpu_req.get(o.gpu, {}).get(o.gpu_count)
        if need_memory is None:
            return f"{o.gpu_count}× {o.gpu} per instance, the job asks for {self.accelerators}"
        return f"{o.gpu} reports {o.gpu_memory_gb} GB per GPU, the job needs {need_memory} GB"

    def size_reason(self, o: Offer) -> str:
        if o.vcpus < self.min_vcpus:
            return f"{o.vcpus} vCPUs, the job needs at least {self.min_vcpus} (resources.min_vcpus)"
        return (
            f"{o.memory_gb:g} GB memory, the job needs at least {self.min_memory_gb:g} "
            "(resources.min_memory_gb)"
        )

    def check_place(self, cloud: str, region: str) -> bool:
        """Whether (cloud, region) passes the cloud and region filters; remembers the answer."""
        ok = self.place_ok[(cloud, region)] = not self.place_reason(cloud, region)
        return ok

    def place_reason_of(self, o: Offer) -> str:
        return self.place_reason(o.cloud, o.region)

    def place_filter_of(self, o: Offer) -> str:
        """The filter that excludes a misplaced offer: "cloud" or "region"."""
        misplaced_cloud = o.cloud not in self.job_clouds or o.cloud not in self.org_clouds
        return "cloud" if misplaced_cloud else "region"

    def place_reason(self, cloud: str, region: str) -> str:
        """Why (cloud, region) is excluded, or '' when it is allowed."""
        if cloud not in self.job_clouds:
            clouds = ", ".join(self.job_clouds)
            return f"cloud {cloud} is not in the job's resources.clouds ({clouds})"
        if cloud not in self.org_clouds:
            clouds = ", ".join(self.org_clouds)
            return f"cloud {cloud} is not allowed by spotroute.yaml clouds ({clouds})"
        for globs, where in self._deny:
            pattern = globs.first_match(cloud, region)
            if pattern is not None:
                return f"region {region} is denied by {where} '{pattern}'"
        for globs, where in self._allow:
            if globs.patterns and globs.first_match(cloud, region) is None:
                return f"region {region} is not in {where} ({', '.join(globs.patterns)})"
        return ""

    @staticmethod
    def _market_reasons(job: Job) -> dict[str, str]:
        market = job.market
        out: dict[str, str] = {}
        for offered in (SPOT, ON_DEMAND, RESERVED):
            if market == RESERVED and offered != RESERVED:
                out[offered] = (
                    "job market is reserved: only reservations from spotroute.yaml are considered"
                )
            elif market in (SPOT, ON_DEMAND) and offered != market:
                out[offered] = f"job market is {market}: {offered} offers are not considered"
            elif offered == SPOT and job.checkpoint is None:
                out[offered] = (
                    f"spot capacity can be interrupted and job '{job.name}' does not checkpoint — "
                    "add `checkpoint:` (interval, restore_overhead) to job.yaml, or use "
                    "market: on-demand"
                )
            else:
                out[offered] = ""
        return out

    def market_reason_of(self, o: Offer) -> str:
        why = self.market_reason.get(o.market)
        if why is None:
            return f"market {o.market!r} is not spot, on-demand or reserved"
        return why

    def duplicate_reason(self, winner: Offer) -> str:
        age_h = max(0.0, (self.now - winner.observed_at).total_seconds()) / 3600
        return (
            f"superseded by a fresher quote for the same capacity ({winner.source}, "
            f"{age_h:.1f} h old)"
        )

    def stale_reason(self, age_s: float) -> str:
        return (
            f"price is {age_s / 3600:.1f} h old (max {self.max_quote_age_s / 3600:g} h) — "
            "run `route prices refresh`"
        )

    def price_cap_reason(self, price: float, discount: Discount | None) -> str:
        after = " after discount" if discount is not None else ""
        if self.job_cap is not None and price > self.job_cap:
            return (
                f"${price:,.2f}/h{after} exceeds max_price_per_hour "
                f"${self.job_cap:,.2f}/h (job.yaml)"
            )
        if self.org_cap is not None and price > self.org_cap:
            return (
                f"${price:,.2f}/h{after} exceeds budgets.max_price_per_hour "
                f"${self.org_cap:,.2f}/h (spotroute.yaml)"
            )
        return ""

    def capacity_reason(self, o: Offer) -> str:
        """Why a place that runs fewer than node_count instances at once cannot take the group;
        "" when it can or its capacity is not known."""
        # Capacity 0 is a region out of capacity now, which a cloud says only at launch: it is
        # tried and refused there, as on the clouds (the failover path). Fewer than node_count
        # but some is a place the group can never fit: a group is placed in one place.
        if o.capacity is None or o.capacity == 0 or o.capacity >= self.node_count:
            return ""
        return (
            f"{o.region} runs {o.capacity} instance(s) at once and the group needs "
            f"{self.node_count} in one place — lower node_count or raise the region's capacity "
            "(local_market in spotroute.yaml)"
        )

    def quota(self, o: Offer) -> QuotaVerdict | None:
        """The quota verdict for the job's node_count instances of the offer; None: unchecked."""
        if self.quotas is None:
            return None
        if o.source == RESERVATION_SOURCE and id(o) in self.reservations:
            return QuotaVerdict("not needed")  # owned capacity: already launched or reserved
        key = (o.cloud, o.region, o.instance_type, o.market)
        found = self._quota_cache.get(key)
        if found is None:
            found = self._quota_cache[key] = self.quotas.check(*key, self.node_count)
        return found

    # --- cost terms ----------------------------------------------------------------------
    def list_price(self, o: Offer) -> float:
        reservation = self.reservations.get(id(o)) if self.reservations else None
        return reservation.price_per_hour if reservation is not None else o.price_per_hour

    def discount(self, o: Offer) -> Discount | None:
        if o.source == RESERVATION_SOURCE and id(o) in self.reservations:
            return None  # the marginal price of owned capacity is already what it costs
        key = (o.cloud, o.instance_type, o.market)
        if key not in self._discount_cache:
            self._discount_cache[key] = self.org.discount_for(*key)
        return self._discount_cache[key]

    def data_access(self, cloud: str, region: str, price: float) -> tuple[DataAccess, ...]:
        """Each data set's cheapest source and access mode at (cloud, region) and $/h `price`."""
        key = (cloud, region)
        routes = self._route_cache.get(key)
        if routes is None:
            assert self._storage is not None  # set whenever the job has data
            routes = self._route_cache[key] = tuple(
                route_data(
                    d, cloud, region, hours=self.hours, egress=self._egress, storage=self._storage
                )
                for d in self.job.data
            )
        wait_usd_per_hour = price * self.node_count
        return tuple(choose_access(r, wait_usd_per_hour) for r in routes)

    def evidence_note(self, o: Offer) -> str:
        """What was seen of the offer's pool (route watch's records), for the reasons, or ""."""
        seen = self._interruption.evidence.get(
            evidence_key(o.cloud, o.region, o.zone, o.instance_type)
        )
        if seen is None:
            return ""
        return f", updated by {seen.preemptions} preemption(s) seen in {seen.up_h:,.1f} h up"

    def interruption(self, o: Offer) -> tuple[float, EffectiveBucket]:
        """Interruptions per instance-hour (bucket prior and evidence) and the bucket used."""
        model = self._interruption
        # Without evidence the rate depends on the bucket only: a smaller cache key.
        where = (o.region, o.zone, o.instance_type) if model.evidence else ("", None, "")
        key = (o.cloud, o.market, o.interruption_bucket, *where)
        found = self._interruption_cache.get(key)
        if found is None:
            found = (
                model.rate_for(o.cloud, o.region, o.zone, o.instance_type, o.market,
                               o.interruption_bucket),
                model.bucket_for(o.cloud, o.market, o.interruption_bucket),
            )  # fmt: skip
            self._interruption_cache[key] = found
        return found
