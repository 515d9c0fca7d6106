"""Interruption buckets → expected interruptions per instance-hour."""

from __future__ import annotations

import math

import pytest
from planner_factories import offer

from router.config.datafiles import load_interruption_model
from router.core.errors import BadInput
from router.core.interruption import (
    HOURS_PER_MONTH,
    effective_bucket,
    interruptions_per_hour,
    parse_interruption_csv,
    rate_from_share,
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
