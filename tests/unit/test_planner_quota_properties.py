"""Properties of `plan` with quotas (hypothesis): the one-reason-per-offer invariant still holds,
unknown quotas never reject, and no placement needs more than a known free quota."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from planner_factories import NOW
from test_planner_properties import EGRESS, REGIONS, jobs, offers, orgs

from router.config.datafiles import (
    load_interruption_model,
    load_quota_definitions,
    load_storage_prices,
    load_type_quotas,
)
from router.core.job.model import Job
from router.core.offers import Offer
from router.core.org import OrgConfig
from router.core.planner import RESERVATION_SOURCE, PlanResult, plan
from router.core.quotas import QuotaBook, QuotaReading, quota_keys

TYPES = load_type_quotas()
DEFINITIONS = load_quota_definitions()
UNITS = {(d.cloud, d.quota): d.unit for d in DEFINITIONS}


@st.composite
def quota_books(draw: st.DrawFn) -> QuotaBook:
    """Some quotas read (limit and usage from a few telling values), the rest unknown."""
    readings = []
    for cloud in ("aws", "gcp", "azure"):
        for region in REGIONS[cloud]:
            for quota in quota_keys(TYPES, cloud):
                if draw(st.booleans()):
                    limit = draw(st.sampled_from([0, 8, 96, 192, 1000]))
                    usage = draw(st.sampled_from([0, 0, 8, 96]))
                    readings.append(QuotaReading(cloud, region, quota, limit, usage, "test", NOW))
    return QuotaBook(DEFINITIONS, TYPES, readings, now=NOW + timedelta(seconds=1))


def run(job: Job, given: list[Offer], org: OrgConfig, quotas: QuotaBook | None) -> PlanResult:
    return plan(
        job,
        given,
        org=org,
        egress=EGRESS,
        now=NOW,
        interruption=load_interruption_model(),
        storage=load_storage_prices(),
        quotas=quotas,
    )


common = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@common
@given(jobs(), orgs(), st.lists(offers(), max_size=30), quota_books())
def test_every_offer_is_placed_or_rejected_exactly_once_with_quotas(
    job: Job, org: OrgConfig, given: list[Offer], quotas: QuotaBook
) -> None:
    result = run(job, given, org, quotas)

    seen = [p.offer for p in result.placements] + [r.offer for r in result.rejected]
    assert Counter(id(o) for o in seen if o.source != RESERVATION_SOURCE) == Counter(
        id(o) for o in given
    )
    assert all(r.reason for r in result.rejected)


@common
@given(jobs(), orgs(), st.lists(offers(), max_size=30), quota_books())
def test_no_placement_needs_more_than_a_known_free_quota(
    job: Job, org: OrgConfig, given: list[Offer], quotas: QuotaBook
) -> None:
    mapped = {(t.cloud, t.instance_type): t for t in TYPES}
    for p in run(job, given, org, quotas).placements:
        it = mapped.get((p.cloud, p.instance_type))
        if it is None or p.market not in ("spot", "on-demand"):
            continue
        for group in it.groups(p.market):
            granted = [
                r
                for q in group
                if (r := quotas.readings.get((p.cloud, p.region, q))) is not None and r.limit > 0
            ]
            reading = granted[0] if granted else quotas.readings.get((p.cloud, p.region, group[0]))
            if reading is None:
                assert p.quota_status == "unknown"
                continue
            need = it.per_instance(UNITS[(p.cloud, reading.quota)]) * p.node_count
            assert reading.free >= need


@common
@given(jobs(), orgs(), st.lists(offers(), max_size=30))
def test_unknown_quotas_reject_nothing(job: Job, org: OrgConfig, given: list[Offer]) -> None:
    nothing_read = QuotaBook(DEFINITIONS, TYPES, now=NOW)

    with_book, without = run(job, given, org, nothing_read), run(job, given, org, None)

    assert [p.offer for p in with_book.placements] == [p.offer for p in without.placements]
    assert {p.quota_status for p in with_book.placements} <= {"unknown", "not needed"}
    assert {p.quota_status for p in without.placements} <= {"unchecked"}
