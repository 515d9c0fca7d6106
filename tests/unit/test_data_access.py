"""How a job reads its data: stream vs copy, the nearest replica, staging time, checkpoint moves.

Worked cases use the list prices recorded in router/data/egress.csv and storage.csv:
- AWS internet egress, first 10 TB/month: $0.09/GB — Amazon S3 pricing, "Data Transfer OUT From
  Amazon S3 To Internet" (https://aws.amazon.com/s3/pricing/), the same bands as the Amazon EC2
  On-Demand Pricing data-transfer section the CSV cites.
- GCS Standard storage in us-central1: $0.020/GB-month — Cloud Storage pricing
  (https://cloud.google.com/storage/pricing), pro rata over a 730-hour month.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.config.datafiles import load_egress, load_storage_prices
from router.core.data_access import (
    COPY,
    STREAM,
    DataAccess,
    data_access,
    move_cost,
    transfer_hours,
)
from router.core.errors import BadInput
from router.core.job.data import Data
from router.core.storage_prices import HOURS_PER_MONTH, parse_storage_csv

EGRESS = load_egress()
STORAGE = load_storage_prices()

TWO_TB_IN_S3 = {"url": "s3://acme-datasets/corpus/", "region": "us-east-1", "size_gb": 2000}
GCS_REPLICA = {"url": "gs://acme-mirror/corpus/", "region": "us-central1"}


def dataset(**fields: Any) -> Data:
    return Data.model_validate({**TWO_TB_IN_S3, **fields})


def at_gcp_us_central1(
    data: Data, *, price: float = 12.0, nodes: int = 1, hours: float = 24
) -> DataAccess:
    return data_access(
        data,
        "gcp",
        "us-central1",
        hours=hours,
        wait_usd_per_hour=price * nodes,
        egress=EGRESS,
        storage=STORAGE,
    )


# --- worked cases ------------------------------------------------------------------------------


def test_two_tb_in_s3_read_three_times_from_gcp_streams_at_egress_per_pass() -> None:
    access = at_gcp_us_central1(dataset(passes=3, access="stream"))
    # 2000 GB × $0.09 (AWS internet egress, first 10 TB) = $180.00 per pass.
    assert access.route.once.usd == pytest.approx(180.00)
    assert access.stream_usd == pytest.approx(540.00)
    assert access.usd == pytest.approx(540.00)
    assert access.egress_usd == pytest.approx(540.0)
    assert access.storage_usd == access.chosen_staging_usd == 0.0


def test_two_tb_in_s3_copied_to_gcp_pays_egress_once_storage_and_staging() -> None:
    access = at_gcp_us_central1(dataset(passes=3, access="copy"))
    # Staging: 2000 GB × 8 bit / 1 Gbps = 16,000 s = 4.444 h, the GPUs ($12.00/h) waiting.
    assert access.route.staging_hours == pytest.approx(4.4444, abs=1e-4)
    assert access.staging_usd == pytest.approx(53.33, abs=0.005)
    # Storage: 2000 GB × $0.020/GB-month × (24 + 4.444) h / 730 h = $1.56.
    assert access.route.storage_hours == pytest.approx(28.4444, abs=1e-4)
    assert access.storage_usd == pytest.approx(2000 * 0.020 * (24 + 16000 / 3600) / 730)
    assert access.storage_usd == pytest.approx(1.56, abs=0.005)
    # 180.00 + 1.56 + 53.33 = 234.89, against 540.00 streamed.
    assert access.copy_usd == pytest.approx(234.89, abs=0.005)
    assert access.egress_usd == pytest.approx(180.00)


def test_auto_picks_the_copy_for_two_tb_three_passes_and_says_by_how_much() -> None:
    access = at_gcp_us_central1(dataset(passes=3))
    assert (access.access, access.chosen_by) == (COPY, "cheaper")
    assert access.usd == pytest.approx(234.89, abs=0.005)
    line = access.summary()
    assert "stream $180.00/pass × 3 = $540.00" in line
    assert "+ $53.33 staging (4.44 h at 1 Gbps × $12.00/h) = $234.89" in line
    assert "copy (cheaper by $305.11)" in line


def test_a_gcs_replica_next_to_the_gpus_makes_egress_zero_and_streaming_free() -> None:
    access = at_gcp_us_central1(dataset(passes=3, replicas=[GCS_REPLICA]))
    assert access.route.source.url == GCS_REPLICA["url"]
    assert access.route.source_index == 1
    assert access.route.once.usd == 0.0
    assert access.stream_usd == 0.0
    # Copying from the replica would still pay storage and staging: 0 + 1.56 + 53.33.
    assert access.copy_usd == pytest.approx(54.89, abs=0.005)
    assert (access.access, access.usd) == (STREAM, 0.0)
    assert "replica gs://acme-mirror/corpus/, nearer: $0.00 vs $180.00" in access.summary()


def test_starting_on_partial_data_overlaps_the_staging_time() -> None:
    access = at_gcp_us_central1(dataset(passes=3, start_while_copying=True))
    assert access.staging_usd == 0.0
    assert access.route.storage_hours == 24
    assert access.copy_usd == pytest.approx(180.0 + 2000 * 0.020 * 24 / 730)
    assert "overlapped: start_while_copying" in access.summary()


def test_a_faster_copy_rate_shortens_staging() -> None:
    access = at_gcp_us_central1(dataset(passes=3, copy_gbps=10))
    assert access.route.staging_hours == pytest.approx(16000 / 3600 / 10)


def test_forced_stream_says_what_copying_would_have_saved() -> None:
    access = at_gcp_us_central1(dataset(passes=3, access="stream"))
    assert access.chosen_by == "job"
    assert "the other mode would save $305.11" in access.summary()


def test_one_pass_streams_like_the_planner_always_priced_it() -> None:
    access = at_gcp_us_central1(dataset())
    assert access.access == STREAM
    assert access.usd == pytest.approx(180.0)


def test_checkpoint_move_is_the_same_transfer_as_a_copy() -> None:
    moved = move_cost(
        500, "aws", "us-east-1", "gcp", "us-central1", egress=EGRESS, wait_usd_per_hour=12.0
    )
    assert moved.egress.usd == pytest.approx(500 * 0.09)
    assert moved.hours == pytest.approx(500 * 8 / 3600)
    assert moved.wait_usd == pytest.approx(500 * 8 / 3600 * 12.0)
    assert moved.usd == pytest.approx(45.0 + 13.33, abs=0.005)
    same_region = move_cost(500, "gcp", "us-central1", "gcp", "us-central1", egress=EGRESS)
    assert (same_region.egress.usd, same_region.wait_usd) == (0.0, 0.0)


def test_copy_mode_egress_and_staging_equal_move_cost() -> None:
    access = at_gcp_us_central1(dataset(passes=3, access="copy"))
    moved = move_cost(
        2000, "aws", "us-east-1", "gcp", "us-central1", egress=EGRESS, wait_usd_per_hour=12.0
    )
    assert access.copy_usd == pytest.approx(moved.usd + access.storage_usd)


def test_transfer_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="above 0 Gbps"):
        transfer_hours(10, 0)


def test_storage_csv_rows_need_a_source() -> None:
    with pytest.raises(BadInput, match="line 2: every price needs its source page and date"):
        parse_storage_csv("cloud,region,usd_per_gb_month,source,date,note\naws,*,0.02,,,\n")


def test_storage_first_matching_glob_wins_and_local_is_free() -> None:
    assert STORAGE.rate("gcp", "us-central1").usd_per_gb_month == 0.020  # type: ignore[union-attr]
    assert STORAGE.rate("gcp", "us-west2").usd_per_gb_month == 0.023  # type: ignore[union-attr]
    assert STORAGE.cost(1000, "local", "local", 10).usd == 0.0
    assert STORAGE.cost(730, "aws", "us-east-1", HOURS_PER_MONTH).usd == pytest.approx(730 * 0.023)


# --- properties --------------------------------------------------------------------------------

PLACES = [
    ("aws", "us-east-1"),
    ("aws", "us-west-2"),
    ("aws", "eu-west-1"),
    ("aws", "ap-southeast-1"),
    ("gcp", "us-central1"),
    ("gcp", "europe-west4"),
    ("azure", "eastus"),
    ("azure", "westeurope"),
    ("local", "local"),
]
SCHEME = {"aws": "s3://b/x", "gcp": "gs://b/x", "azure": "az://c/x", "local": "file:///d"}
sizes = st.sampled_from([0, 1, 100, 2000, 12_000, 60_000, 200_000]) | st.floats(0, 300_000)
passes = st.floats(0.01, 100)
places = st.sampled_from(PLACES)


@st.composite
def datasets(draw: st.DrawFn, /, **fixed: Any) -> Data:
    main = draw(places)
    replicas = [{"url": SCHEME[c], "region": r} for c, r in draw(st.lists(places, max_size=3))]
    fields = {
        "url": SCHEME[main[0]],
        "region": main[1],
        "size_gb": draw(sizes),
        "passes": draw(passes),
        "access": draw(st.sampled_from(["auto", "stream", "copy"])),
        "replicas": replicas,
        "copy_gbps": draw(st.sampled_from([0.1, 1.0, 10.0]) | st.floats(0.05, 100)),
        "start_while_copying": draw(st.booleans()),
    }
    fields.update(fixed)
    return Data.model_validate(fields)


def priced(data: Data, place: tuple[str, str], hours: float, wait: float) -> DataAccess:
    return data_access(
        data, *place, hours=hours, wait_usd_per_hour=wait, egress=EGRESS, storage=STORAGE
    )


hours_st = st.floats(0.1, 1000)
wait_st = st.floats(0, 500)
props = settings(max_examples=150, deadline=None)


@props
@given(datasets(), places, hours_st, wait_st, st.floats(0.01, 50))
def test_stream_cost_grows_linearly_with_passes_and_copy_cost_does_not(
    data: Data, place: tuple[str, str], hours: float, wait: float, factor: float
) -> None:
    more = data.model_copy(update={"passes": data.passes * factor})
    a, b = priced(data, place, hours, wait), priced(more, place, hours, wait)
    assert b.stream_usd == pytest.approx(a.stream_usd * factor, rel=1e-9, abs=1e-9)
    assert b.stream_usd == pytest.approx(a.route.once.usd * data.passes * factor, rel=1e-9)
    assert b.copy_usd == a.copy_usd


@props
@given(datasets(access="auto"), places, hours_st, wait_st)
def test_the_chosen_mode_is_never_dearer_than_the_other(
    data: Data, place: tuple[str, str], hours: float, wait: float
) -> None:
    access = priced(data, place, hours, wait)
    assert access.usd == min(access.stream_usd, access.copy_usd)
    assert access.usd <= access.stream_usd and access.usd <= access.copy_usd


@props
@given(datasets(), places, hours_st, wait_st)
def test_the_nearest_replica_is_never_worse_than_any_single_copy(
    data: Data, place: tuple[str, str], hours: float, wait: float
) -> None:
    best = priced(data, place, hours, wait)
    for loc in data.locations:
        alone = data.model_copy(
            update={"url": loc.url, "cloud": loc.cloud, "region": loc.region, "replicas": ()}
        )
        single = priced(alone, place, hours, wait)
        assert best.stream_usd <= single.stream_usd
        assert best.copy_usd <= single.copy_usd
        assert best.usd <= single.usd


@props
@given(datasets(), places, hours_st, wait_st)
def test_the_chosen_modes_parts_add_up_to_its_cost(
    data: Data, place: tuple[str, str], hours: float, wait: float
) -> None:
    access = priced(data, place, hours, wait)
    parts = access.egress_usd + access.storage_usd + access.chosen_staging_usd
    assert parts == pytest.approx(access.usd, rel=1e-12, abs=1e-12)
    assert min(access.egress_usd, access.storage_usd, access.chosen_staging_usd) >= 0
