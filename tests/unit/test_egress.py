"""Egress prices: what moving a job's data once costs between regions and clouds."""

from __future__ import annotations

import csv

import pytest

from router.config.datafiles import DATA_DIR, load_egress
from router.core.egress import parse_egress_csv
from router.core.errors import BadInput

TABLE = load_egress()
HEADER = "kind,cloud,src,dst,tier_start_gb,tier_end_gb,usd_per_gb,source,date,note\n"


def test_same_region_costs_nothing() -> None:
    moved = TABLE.cost(5000, "aws", "us-east-1", "aws", "us-east-1")
    assert moved.usd == 0.0
    assert moved.rule == "same region (aws us-east-1): no transfer charge"


def test_local_target_costs_nothing_in_either_direction() -> None:
    assert TABLE.cost(5000, "aws", "us-east-1", "local", "local").usd == 0.0
    assert TABLE.cost(5000, "local", "local", "gcp", "us-central1").usd == 0.0


def test_nothing_to_move_costs_nothing() -> None:
    assert TABLE.cost(0, "aws", "us-east-1", "gcp", "us-central1").usd == 0.0


def test_aws_inter_region_from_the_us_is_two_cents() -> None:
    moved = TABLE.cost(1000, "aws", "us-east-1", "aws", "eu-west-1")
    assert moved.usd == pytest.approx(20.0)
    assert moved.rule == "inter-region aws us-east-1 → eu-west-1: 1000 GB × $0.02 = $20.00"


def test_aws_virginia_to_ohio_uses_its_cheaper_pair_rate() -> None:
    assert TABLE.cost(1000, "aws", "us-east-1", "aws", "us-east-2").usd == pytest.approx(10.0)
    assert TABLE.cost(1000, "aws", "us-east-2", "aws", "us-east-1").usd == pytest.approx(10.0)


def test_aws_inter_region_price_depends_on_the_source_region() -> None:
    from_sao_paulo = TABLE.cost(1000, "aws", "sa-east-1", "aws", "us-east-1").usd
    from_virginia = TABLE.cost(1000, "aws", "us-east-1", "aws", "sa-east-1").usd
    assert from_sao_paulo > from_virginia


def test_gcp_inter_region_is_cheaper_within_a_continent_than_across() -> None:
    within = TABLE.cost(1000, "gcp", "us-central1", "gcp", "us-east4").usd
    across = TABLE.cost(1000, "gcp", "us-central1", "gcp", "europe-west4").usd
    to_asia = TABLE.cost(1000, "gcp", "us-central1", "gcp", "asia-east1").usd
    assert (within, across, to_asia) == pytest.approx((20.0, 50.0, 80.0))


def test_azure_inter_region_within_europe_and_between_continents() -> None:
    within = TABLE.cost(1000, "azure", "westeurope", "azure", "northeurope").usd
    across = TABLE.cost(1000, "azure", "westeurope", "azure", "eastus").usd
    assert (within, across) == pytest.approx((20.0, 50.0))


def test_cross_cloud_pays_the_source_clouds_internet_egress() -> None:
    moved = TABLE.cost(2000, "aws", "us-east-1", "gcp", "us-central1")
    assert moved.usd == pytest.approx(180.0)
    assert moved.rule == (
        "internet egress from aws us-east-1 to gcp us-central1, tiered: 2000 GB × $0.09 = $180.00"
    )


def test_transfer_in_is_free_so_the_destination_cloud_does_not_change_the_price() -> None:
    to_gcp = TABLE.cost(2000, "aws", "us-east-1", "gcp", "us-central1").usd
    to_azure = TABLE.cost(2000, "aws", "us-east-1", "azure", "eastus").usd
    assert to_gcp == to_azure


def test_internet_egress_is_tiered_by_volume() -> None:
    moved = TABLE.cost(60_000, "aws", "us-east-1", "azure", "eastus")
    expected = 10_240 * 0.09 + 40_960 * 0.085 + 8_800 * 0.07
    assert moved.usd == pytest.approx(expected)
    assert "10240 GB × $0.09 + 40960 GB × $0.085 + 8800 GB × $0.07" in moved.rule


def test_above_the_last_tier_boundary_the_open_band_applies() -> None:
    moved = TABLE.cost(200_000, "aws", "us-east-1", "gcp", "us-central1")
    expected = 10_240 * 0.09 + 40_960 * 0.085 + 102_400 * 0.07 + 46_400 * 0.05
    assert moved.usd == pytest.approx(expected)


def test_gcp_internet_egress_to_oceania_costs_more() -> None:
    to_sydney = TABLE.cost(500, "gcp", "us-central1", "aws", "ap-southeast-2").usd
    to_virginia = TABLE.cost(500, "gcp", "us-central1", "aws", "us-east-1").usd
    assert (to_sydney, to_virginia) == pytest.approx((500 * 0.19, 500 * 0.12))


def test_azure_internet_egress_from_brazil_uses_zone_3_rates() -> None:
    assert TABLE.cost(100, "azure", "brazilsouth", "aws", "us-east-1").usd == pytest.approx(18.1)


@pytest.mark.parametrize(
    ("cloud", "region", "continent"),
    [
        ("aws", "us-east-1", "NA"),
        ("aws", "ca-central-1", "NA"),
        ("aws", "eu-central-1", "EU"),
        ("aws", "ap-southeast-2", "OC"),
        ("aws", "ap-northeast-1", "ASIA"),
        ("gcp", "northamerica-northeast1", "NA"),
        ("gcp", "europe-west4", "EU"),
        ("gcp", "australia-southeast1", "OC"),
        ("azure", "eastus2", "NA"),
        ("azure", "westeurope", "EU"),
        ("azure", "uksouth", "EU"),
        ("azure", "japaneast", "ASIA"),
        ("azure", "australiaeast", "OC"),
        ("azure", "centralindia", "ASIA"),
    ],
)
def test_regions_map_to_their_continent(cloud: str, region: str, continent: str) -> None:
    assert TABLE.continent(cloud, region) == continent


def test_region_of_unknown_continent_falls_back_to_the_clouds_default_rate() -> None:
    assert TABLE.continent("gcp", "mars-north1") == "??"
    assert TABLE.cost(1000, "gcp", "mars-north1", "gcp", "us-central1").usd == pytest.approx(80.0)


def test_every_price_row_names_its_source_and_date() -> None:
    with (DATA_DIR / "egress.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows
    assert all(row["source"] and row["date"] for row in rows)


def test_tier_gap_in_the_data_file_is_reported_with_its_line() -> None:
    text = HEADER + (
        "internet,aws,*,*,0,100,0.09,page,2026-01-01,\ninternet,aws,*,*,200,,0.05,page,2026-01-01,\n"
    )
    with pytest.raises(BadInput, match=r"egress\.csv line 2: .* gap or overlap at 100 GB"):
        parse_egress_csv(text)


def test_price_row_without_a_source_is_refused() -> None:
    text = HEADER + "inter_region,aws,NA,*,,,0.02,,2026-01-01,\n"
    with pytest.raises(BadInput, match="line 2: every price needs its source page and date"):
        parse_egress_csv(text)


def test_cloud_without_internet_prices_is_a_clear_error() -> None:
    table = parse_egress_csv(HEADER + "internet,aws,*,*,0,,0.09,page,2026-01-01,\n")
    with pytest.raises(BadInput, match="no internet egress price for cloud 'gcp'"):
        table.cost(10, "gcp", "us-central1", "aws", "us-east-1")
