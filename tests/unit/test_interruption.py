"""Interruption buckets → expected interruptions per instance-hour."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from planner_factories import offer

from router.config.datafiles import load_interruption_model
from router.core.errors import BadInput
from router.core.interruption import (
    HOURS_PER_MONTH,
    PRIOR_WEIGHT_H,
    Evidence,
    SeriesEvidence,
    effective_bucket,
    evidence_key,
    group_rate,
    interruption_usd,
    interruptions_per_hour,
    parse_interruption_csv,
    posterior_rate,
    rate_from_share,
    work_multiplier,
)
from router.core.offers import INTERRUPTION_BUCKETS

MODEL = load_interruption_model()


def test_bucket_rate_reproduces_the_monthly_share_as_a_poisson_process() -> None:
    rate = interruptions_per_hour(offer(bucket="5-10%"), MODEL)
    assert rate == pytest.approx(-math.log(1 - 0.075) / 720)
    # The chance of at least one interruption over a 30-day month is the bucket midpoint.
    monthly_share = 1 - math.exp(-rate * HOURS_PER_MONTH)
    assert monthly_share == pytest.approx(0.075)


def test_open_ended_bucket_uses_its_documented_representative_share() -> None:
    assert MODEL.share_per_month[">20%"] == 0.30


def test_riskier_buckets_have_higher_rates() -> None:
    rates = [MODEL.rate_per_hour("aws", "spot", b) for b in INTERRUPTION_BUCKETS]
    assert rates == sorted(rates)
    assert len(set(rates)) == len(rates)


def test_on_demand_and_reserved_are_never_interrupted() -> None:
    assert interruptions_per_hour(offer(market="on-demand"), MODEL) == 0.0
    assert MODEL.rate_per_hour("aws", "reserved", None) == 0.0
    assert effective_bucket(offer(market="on-demand"), MODEL).bucket is None


def test_gcp_spot_without_a_bucket_assumes_the_worst_and_says_why() -> None:
    found = effective_bucket(offer("a2-ultragpu-8g", bucket=None), MODEL)
    assert (found.bucket, found.assumed) == (">20%", True)
    assert "GCP publishes no spot preemption rate" in found.note


def test_quote_with_a_bucket_uses_it_as_is() -> None:
    found = effective_bucket(offer(bucket="10-15%"), MODEL)
    assert (found.bucket, found.assumed) == ("10-15%", False)


def test_cloud_without_a_default_uses_the_worst_bucket() -> None:
    found = MODEL.bucket_for("oci", "spot", None)
    assert (found.bucket, found.assumed) == (">20%", True)


def test_share_of_one_is_not_a_rate() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        rate_from_share(1.0)


def test_data_file_missing_a_bucket_is_refused() -> None:
    text = (
        "kind,bucket,cloud,market,share_per_month,source,date,note\n"
        "bucket,<5%,,,0.025,page,2026-01-01,\n"
    )
    with pytest.raises(BadInput, match=r"no share_per_month for bucket\(s\) 5-10%"):
        parse_interruption_csv(text)


# --- evidence, groups and the paid-hours multiplier (one model for planner, decide, backtest) --


def test_without_evidence_the_rate_is_the_buckets() -> None:
    prior = MODEL.rate_per_hour("aws", "spot", ">20%")
    assert posterior_rate(prior, None) == prior
    assert MODEL.rate_for("aws", "us-west-2", "us-west-2b", "p3.2xlarge", "spot", ">20%") == prior


def test_observed_preemptions_outweigh_the_advisor_bucket() -> None:
    # ">20 %/month" says one interruption in ~2,000 h; the pool was seen lost 10 times in 10 h.
    prior = MODEL.rate_per_hour("aws", "spot", ">20%")
    seen = Evidence(up_h=10.0, preemptions=10)
    rate = posterior_rate(prior, seen)
    assert rate == pytest.approx((prior * PRIOR_WEIGHT_H + 10) / (PRIOR_WEIGHT_H + 10))
    assert 0.25 < rate < 1.0 and rate > 500 * prior
    # A pool up a long time without a loss drifts below its bucket, never to zero.
    calm = posterior_rate(prior, Evidence(up_h=1000.0, preemptions=0))
    assert 0 < calm < prior
    key = evidence_key("aws", "us-west-2", "us-west-2b", "p3.2xlarge")
    model = MODEL.with_evidence({key: seen})
    assert model.rate_for("aws", "us-west-2", "us-west-2b", "p3.2xlarge", "spot", ">20%") == rate
    # Other pools, and on-demand, are not touched by that evidence.
    assert model.rate_for("aws", "us-west-2", "us-west-2c", "p3.2xlarge", "spot", ">20%") == prior
    assert model.rate_for("aws", "us-west-2", "us-west-2b", "p3.2xlarge", "on-demand", None) == 0


def test_a_group_of_n_nodes_is_interrupted_n_times_as_often() -> None:
    assert group_rate(0.01, 8) == pytest.approx(0.08)
    one = interruption_usd(10.0, 1, 24, 0.01, 1 / 6, 0.5)
    eight = interruption_usd(10.0, 8, 24, 0.01, 1 / 6, 0.5)
    # Eight times the nodes paid while restoring, eight times as many losses: about 64 ×.
    assert eight == pytest.approx(64 * one, rel=0.05)


rates = st.floats(1e-6, 2.0)
node_counts = st.integers(1, 64)


@given(rates, node_counts, st.floats(0.01, 720.0))
def test_a_group_is_lost_when_any_node_is_one_minus_the_product_of_survivals(
    rate: float, nodes: int, hours: float
) -> None:
    """P(group lost within t) = 1 - (1 - p)^N, p a node's: independent nodes, any one stops it."""
    p = 1 - math.exp(-rate * hours)
    group_lost = 1 - math.exp(-group_rate(rate, nodes) * hours)
    assert group_lost == pytest.approx(1 - (1 - p) ** nodes, rel=1e-9, abs=1e-12)


# Below the cap that keeps m finite (Λ (R + I) < 50: a job that never finishes at any price).
@given(st.floats(1e-6, 0.1), node_counts, st.floats(0.0, 2.0), st.floats(0.05, 4.0))
def test_every_node_pays_the_whole_groups_restore_and_losses(
    rate: float, nodes: int, restore_h: float, interval_h: float
) -> None:
    """The restore of a group takes as long as one node's (all load at once) and every node
    is paid through it: per node, a bigger group never costs less."""
    usd = interruption_usd(3.0, nodes, 10.0, rate, restore_h, interval_h)
    m = work_multiplier(nodes * rate, restore_h, interval_h)
    assert usd == pytest.approx(3.0 * nodes * 10.0 * (m - 1), rel=1e-9)
    one_more = interruption_usd(3.0, nodes + 1, 10.0, rate, restore_h, interval_h)
    assert one_more / (nodes + 1) >= usd / nodes * (1 - 1e-12)


def test_paid_hours_per_hour_of_work_match_the_linear_term_at_small_rates() -> None:
    assert work_multiplier(0.0, 1 / 6, 0.5) == 1.0
    small = work_multiplier(1e-4, 1 / 6, 0.5)
    assert small - 1 == pytest.approx(1e-4 * (1 / 6 + 0.25), rel=1e-3)
    # A pool lost every 20 minutes with 30-minute checkpoints hardly progresses.
    assert work_multiplier(3.0, 1 / 6, 0.5) > 3
    assert math.isfinite(work_multiplier(1e6, 1 / 6, 0.5))


def test_series_evidence_sees_only_the_past_within_the_lookback() -> None:
    # 10-minute steps: up, up, down (a preemption at step 2), up, up, down (another at 5).
    ev = SeriesEvidence([True, True, False, True, True, False], step_h=1 / 6)
    assert ev.at(0) == Evidence(0.0, 0)
    assert ev.at(2) == Evidence(pytest.approx(2 / 6), 0)  # step 2 itself is not the past yet
    assert ev.at(3) == Evidence(pytest.approx(2 / 6), 1)
    assert ev.at(6) == Evidence(pytest.approx(4 / 6), 2)
    # Half an hour back from step 6 covers steps 3-5: two up, the loss at step 5.
    assert ev.at(6, lookback_h=0.5) == Evidence(pytest.approx(2 / 6), 1)
