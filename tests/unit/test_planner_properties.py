"""Properties of `plan` over generated jobs, org configs and offers (hypothesis)."""

from __future__ import annotations

import fnmatch
from collections import Counter
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from planner_factories import NOW
from pydantic import ValidationError

from router.config.datafiles import load_egress, load_interruption_model, load_storage_prices
from router.core.job.model import Job
from router.core.offers import INTERRUPTION_BUCKETS, Offer
from router.core.org import OrgConfig
from router.core.placement import PlanResult
from router.core.planner import RESERVATION_SOURCE, feasible_offers, plan

# instance type → (cloud, gpu, gpu_count, gpu_memory_gb, vcpus, memory_gb)
TYPES = {
    "p4de.24xlarge": ("aws", "A100-80GB", 8, 80, 96, 1152.0),
    "p5.48xlarge": ("aws", "H100-80GB", 8, 80, 192, 2048.0),
    "g5.xlarge": ("aws", "A10G", 1, 24, 4, 16.0),
    "a2-ultragpu-8g": ("gcp", "A100-80GB", 8, 80, 96, 1360.0),
    "a2-ultragpu-1g": ("gcp", "A100-80GB", 1, 80, 12, 170.0),
    "Standard_ND96amsr_A100_v4": ("azure", "A100-80GB", 8, 80, 96, 1900.0),
    "local-a100x8": ("local", "A100-80GB", 8, 80, 96, 1024.0),
}
REGIONS = {
    "aws": ("us-east-1", "us-west-2", "eu-west-1"),
    "gcp": ("us-central1", "europe-west4"),
    "azure": ("eastus", "westeurope"),
    "local": ("local",),
}
GLOBS = ("us-*", "eu*", "*west*", "gcp:us-*", "local")
ACCELERATORS = ("A100-80GB:8", "A100-80GB:1", "H100-80GB:8", "A10G:1")
RESERVATIONS = [
    {"cloud": "aws", "region": "us-east-1", "instance_type": "p4de.24xlarge", "count": 2,
     "price_per_hour": 20.0},
    {"cloud": "gcp", "region": "europe-west4", "instance_type": "a2-ultragpu-8g", "count": 1,
     "price_per_hour": 25.0, "marginal_price_per_hour": 3.0},
    {"cloud": "azure", "region": "eastus", "instance_type": "Standard_Unknown", "count": 4,
     "price_per_hour": 9.0},
]  # fmt: skip
EGRESS = load_egress()
MAX_EXAMPLES = 120

prices = st.sampled_from([0.0, 1.0, 9.5, 10.0, 12.25, 40.0]) | st.floats(0, 100)


@st.composite
def offers(draw: st.DrawFn) -> Offer:
    itype = draw(st.sampled_from(sorted(TYPES)))
    cloud, gpu, gpus, gpu_mem, vcpus, mem = TYPES[itype]
    region = draw(st.sampled_from(REGIONS[cloud]))
    market = draw(st.sampled_from(["spot", "on-demand", "reserved", "spot", "preemptible"]))
    return Offer(
        cloud=cloud,
        region=region,
        zone=draw(st.sampled_from([None, f"{region}a", f"{region}b"])),
        instance_type=itype,
        gpu=gpu,
        gpu_count=gpus,
        gpu_memory_gb=draw(st.sampled_from([gpu_mem, gpu_mem, gpu_mem // 2])),
        vcpus=draw(st.sampled_from([vcpus, vcpus // 4])),
        memory_gb=mem,
        market=market,
        price_per_hour=draw(prices),
        source=draw(st.sampled_from([f"{cloud}-api", "snapshot", "import:skypilot"])),
        observed_at=NOW - timedelta(seconds=draw(st.sampled_from([0, 60, 3600, 30 * 3600]))),
        interruption_bucket=draw(st.sampled_from([None, *INTERRUPTION_BUCKETS])),
        # A local market region says how many instances it runs at once; the clouds do not.
        capacity=draw(st.sampled_from([None, 0, 1, 2, 4])) if cloud == "local" else None,
    )


@st.composite
def jobs(draw: st.DrawFn) -> Job:
    spec: dict[str, Any] = {
        "name": "prop",
        "resources": {
            "accelerators": draw(st.lists(st.sampled_from(ACCELERATORS), min_size=1, max_size=2)),
            "min_vcpus": draw(st.sampled_from([0, 0, 32])),
            "clouds": draw(
                st.lists(st.sampled_from(["aws", "gcp", "azure", "local"]), min_size=1, unique=True)
            ),
            "regions": {
                "allow": draw(st.lists(st.sampled_from(GLOBS), max_size=2)),
                "deny": draw(st.lists(st.sampled_from(GLOBS), max_size=1)),
            },
        },
        "market": draw(st.sampled_from(["spot", "on-demand", "reserved", "auto"])),
        "max_price_per_hour": draw(st.none() | st.sampled_from([5.0, 10.0, 50.0])),
        "duration_hours": draw(st.sampled_from([0.5, 10, 72.25])),
        "node_count": draw(st.integers(1, 4)),
        "checkpoint": draw(st.none() | st.just({"interval_s": 1800, "restore_overhead_s": 600})),
        "run": {"command": ["python", "train.py"]},
    }
    if draw(st.booleans()):
        cloud = draw(st.sampled_from(["aws", "gcp", "azure"]))
        scheme = {"aws": "s3", "gcp": "gs", "azure": "az"}[cloud]
        spec["data"] = {
            "url": f"{scheme}://bucket/data",
            "region": draw(st.sampled_from(REGIONS[cloud])),
            "size_gb": draw(st.sampled_from([0, 100, 2000, 60_000])),
            "passes": draw(st.sampled_from([1, 3, 0.5])),
            "access": draw(st.sampled_from(["auto", "stream", "copy"])),
            "start_while_copying": draw(st.booleans()),
        }
        if draw(st.booleans()):
            spec["data"]["replicas"] = [{"url": "gs://mirror/data", "region": "us-central1"}]
    try:
        return Job.model_validate(spec)
    except ValidationError:
        assume(False)
        raise


@st.composite
def orgs(draw: st.DrawFn) -> OrgConfig:
    reservations = draw(st.lists(st.sampled_from(RESERVATIONS), max_size=2))
    discounts = draw(
        st.lists(
            st.sampled_from(
                [
                    {"cloud": "aws", "family": "p4*", "percent": 10},
                    {"cloud": "gcp", "percent": 100},
                    {"cloud": "azure", "market": "spot", "percent": 33.3},
                ]
            ),
            max_size=2,
        )
    )
    return OrgConfig.model_validate(
        {
            "clouds": draw(
                st.lists(st.sampled_from(["aws", "gcp", "azure", "local"]), min_size=1, unique=True)
            ),
            "regions": {"deny": draw(st.lists(st.sampled_from(GLOBS), max_size=1))},
            "reservations": reservations,
            "discounts": discounts,
            "budgets": {
                "max_price_per_hour": draw(st.none() | st.just(30.0)),
                "max_job_cost": draw(st.none() | st.just(2000.0)),
            },
            "max_quote_age_s": draw(st.sampled_from([3600, 86_400])),
        }
    )


def run(job: Job, given_offers: list[Offer], org: OrgConfig, fresh: bool = False) -> PlanResult:
    return plan(
        job,
        given_offers,
        org=org,
        egress=EGRESS,
        now=NOW,
        require_fresh=fresh,
        interruption=load_interruption_model(),
        storage=load_storage_prices(),
    )


common = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,  # a shared CI box: correctness here, speed in bench/planner_bench.py
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@common
@given(jobs(), orgs(), st.lists(offers(), max_size=30))
def test_totals_always_add_up_exactly(job: Job, org: OrgConfig, given_offers: list[Offer]) -> None:
    for p in run(job, given_offers, org).placements:
        terms = (p.compute_cost, p.egress_cost, p.storage_cost, p.staging_cost)
        assert sum(terms) + p.interruption_cost == p.total_cost
        assert min(*terms, p.interruption_cost) >= 0


@common
@given(jobs(), orgs(), st.lists(offers(), max_size=30))
def test_placements_are_sorted_by_total_then_tie_breaks(
    job: Job, org: OrgConfig, given_offers: list[Offer]
) -> None:
    keys = [
        (p.total_cost, p.interruptions_per_hour, p.price_age_s, p.cloud, p.region,
         p.zone is not None, p.zone or "", p.instance_type, p.market)
        for p in run(job, given_offers, org).placements
    ]  # fmt: skip
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)


@common
@given(jobs(), orgs(), st.lists(offers(), max_size=30))
def test_feasible_offers_are_exactly_what_plan_places(
    job: Job, org: OrgConfig, given_offers: list[Offer]
) -> None:
    # The backtest's shortcut (the same filters, no Placements, no ranking) places the same.
    def key(o: Any) -> tuple[Any, ...]:
        return (o.cloud, o.region, o.zone, o.instance_type, o.market)

    placements = run(job, given_offers, org).placements
    placed = Counter((key(p), p.interruptions_per_hour) for p in placements)
    found = feasible_offers(
        job, given_offers, org=org, egress=EGRESS, now=NOW,
        interruption=load_interruption_model(), storage=load_storage_prices(),
    )  # fmt: skip
    assert Counter((key(o), rate) for o, rate in found) == placed


@common
@given(jobs(), orgs(), st.lists(offers(), max_size=30), st.randoms(use_true_random=False))
def test_result_does_not_depend_on_the_order_of_the_offers(
    job: Job, org: OrgConfig, given_offers: list[Offer], rng: Any
) -> None:
    shuffled = list(given_offers)
    rng.shuffle(shuffled)

    first, second = run(job, given_offers, org), run(job, shuffled, org)

    assert first.placements == second.placements
    assert Counter(first.rejected) == Counter(second.rejected)


@common
@given(jobs(), orgs(), st.lists(offers(), max_size=30), st.booleans(), st.integers(0, 3))
def test_every_offer_is_placed_or_rejected_exactly_once(
    job: Job, org: OrgConfig, given_offers: list[Offer], fresh: bool, repeated: int
) -> None:
    given_offers = given_offers + given_offers[:repeated]  # the same objects listed again
    result = run(job, given_offers, org, fresh)

    seen = [p.offer for p in result.placements] + [r.offer for r in result.rejected]
    from_input = Counter(id(o) for o in seen if o.source != RESERVATION_SOURCE)
    assert from_input == Counter(id(o) for o in given_offers)
    reserved = [o for o in seen if o.source == RESERVATION_SOURCE]
    uses_reservations = job.market in ("reserved", "auto")
    assert len(reserved) == (len(org.reservations) if uses_reservations else 0)
    assert all(r.reason for r in result.rejected)
    assert result.rejected_count == len(result.rejected)


@common
@given(jobs(), orgs(), st.lists(offers(), max_size=30), st.booleans())
def test_placements_never_violate_the_jobs_or_the_orgs_constraints(
    job: Job, org: OrgConfig, given_offers: list[Offer], fresh: bool
) -> None:
    wanted = {(a.gpu, a.count) for a in job.resources.accelerators}
    for p in run(job, given_offers, org, fresh).placements:
        o = p.offer
        assert (p.gpu, p.gpu_count) in wanted
        assert o.vcpus >= job.resources.min_vcpus
        assert p.cloud in job.resources.clouds and p.cloud in org.clouds
        for deny in (*job.resources.regions.deny, *org.regions.deny):
            assert not _matches(deny, p.cloud, p.region)
        for allow in (job.resources.regions.allow, org.regions.allow):
            assert not allow or any(_matches(glob, p.cloud, p.region) for glob in allow)
        if job.market in ("spot", "on-demand", "reserved"):
            assert p.market == job.market
        assert p.market in ("spot", "on-demand", "reserved")
        if p.market == "spot":
            assert job.checkpoint is not None
        if p.market == "reserved" and p.price_source == RESERVATION_SOURCE:
            assert job.market in ("reserved", "auto")
        for cap in (job.max_price_per_hour, org.budgets.max_price_per_hour):
            assert cap is None or p.price_per_hour <= cap
        assert org.budgets.max_job_cost is None or p.total_cost <= org.budgets.max_job_cost
        assert not (fresh and p.stale)
        assert p.stale == (p.price_age_s > org.max_quote_age_s)
        # A group is placed in one place: never where fewer than node_count fit (capacity 0
        # is a full region, refused at launch as on a cloud).
        assert o.capacity in (None, 0) or o.capacity >= job.node_count


@common
@given(jobs(), orgs(), st.lists(offers(), max_size=30))
def test_a_place_too_small_for_the_group_is_rejected_for_its_capacity(
    job: Job, org: OrgConfig, given_offers: list[Offer]
) -> None:
    result = run(job, given_offers, org)
    placed = {id(p.offer) for p in result.placements}
    for o in given_offers:
        if o.capacity and o.capacity < job.node_count:
            assert id(o) not in placed
    for r in result.rejected:
        if r.filter == "capacity":
            assert r.offer.capacity and r.offer.capacity < job.node_count
            assert f"the group needs {job.node_count} in one place" in r.reason


def _matches(glob: str, cloud: str, region: str) -> bool:
    return fnmatch.fnmatchcase(f"{cloud}:{region}" if ":" in glob else region, glob)


@common
@given(st.integers(1, 4), st.lists(st.sampled_from([None, 0, 1, 2, 3, 4, 8]), max_size=8))
def test_a_local_region_is_placed_exactly_when_the_whole_group_fits_or_it_is_full_now(
    nodes: int, capacities: list[int | None]
) -> None:
    job = Job.model_validate({
        "name": "group", "resources": {"accelerators": "A100-80GB:8", "clouds": ["local"]},
        "market": "on-demand", "duration_hours": 2, "node_count": nodes,
        "run": {"command": ["python", "train.py"]},
    })  # fmt: skip
    given_offers = [
        Offer(cloud="local", region=f"local-{i}", zone=None, instance_type="local-a100x8",
              gpu="A100-80GB", gpu_count=8, gpu_memory_gb=80, vcpus=96, memory_gb=1024.0,
              market="on-demand", price_per_hour=1.0 + i, source="local market",
              observed_at=NOW, capacity=capacity)
        for i, capacity in enumerate(capacities)
    ]  # fmt: skip
    result = run(job, given_offers, OrgConfig())

    placed = {p.region for p in result.placements}
    rejected = {r.offer.region: r.filter for r in result.rejected}
    for o in given_offers:
        fits = o.capacity is None or o.capacity == 0 or o.capacity >= nodes
        assert (o.region in placed) == fits
        assert rejected.get(o.region) == (None if fits else "capacity")
