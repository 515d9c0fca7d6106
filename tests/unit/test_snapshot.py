"""The bundled price snapshot: rows are usable offline, consistent and honest about their basis."""

from __future__ import annotations

import csv
import io
import itertools
import re
from collections import defaultdict
from datetime import UTC, date, datetime
from importlib import resources
from pathlib import Path

import pytest

from router.config.datafiles import load_catalog
from router.core.catalog import offers_from_quotes
from router.core.errors import BadInput
from router.core.offers import INTERRUPTION_BUCKETS, Quote
from router.prices.snapshot import (
    COLUMNS,
    load_snapshot,
    parse_snapshot,
    snapshot_date,
    snapshot_regions,
)

HEADER = ",".join(COLUMNS) + ",basis"
GOOD_ROW = "aws,us-east-1,use1-az4,p4de.24xlarge,spot,7.8074,2025-05-01T00:00:00Z,,catalog"

# Documented in docs/price-snapshot.md ("Gaps"): the source lists no spot price for Azure's
# ND H100 v5, and GCP sells a3-highgpu-1g/2g/4g only as Spot (or Flex-start) VMs.
NO_SPOT = {("azure", "Standard_ND96isr_H100_v5")}
NO_ON_DEMAND = {("gcp", "a3-highgpu-1g"), ("gcp", "a3-highgpu-2g"), ("gcp", "a3-highgpu-4g")}
# Catalogued after the snapshot was transcribed: live prices only (docs/price-snapshot.md).
NOT_IN_SNAPSHOT = {("gcp", "a3-megagpu-8g")}
AZ_ID_PREFIX = {
    "us-east-1": "use1",
    "us-east-2": "use2",
    "us-west-2": "usw2",
    "eu-west-1": "euw1",
    "eu-central-1": "euc1",
}
DEFAULT_REGIONS = {
    "aws": ("eu-central-1", "eu-west-1", "us-east-1", "us-east-2", "us-west-2"),
    "gcp": ("asia-northeast1", "europe-west4", "us-central1", "us-east4", "us-west1"),
    "azure": ("eastus", "eastus2", "northeurope", "westeurope", "westus2"),
}


def bundled_rows() -> list[dict[str, str]]:
    text = resources.files("router").joinpath("data", "snapshot.csv").read_text("utf-8")
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return list(csv.DictReader(io.StringIO("\n".join(lines))))


def markets_by_type(quotes: list[Quote]) -> dict[tuple[str, str], set[str]]:
    markets: dict[tuple[str, str], set[str]] = defaultdict(set)
    for q in quotes:
        markets[(q.cloud, q.instance_type)].add(q.market)
    return markets


def test_bundled_snapshot_loads_as_dated_snapshot_quotes() -> None:
    quotes = load_snapshot()
    assert len(quotes) > 1000
    assert {q.source for q in quotes} == {"snapshot"}
    assert {q.cloud for q in quotes} == {"aws", "gcp", "azure"}
    assert all(q.observed_at.tzinfo is not None for q in quotes)
    assert all(q.observed_at.utcoffset() == UTC.utcoffset(None) for q in quotes)


def test_snapshot_date_is_the_date_its_rows_describe() -> None:
    assert snapshot_date() == date(2025, 5, 1)
    assert {q.observed_at.date() for q in load_snapshot()} == {snapshot_date()}


def test_every_snapshot_instance_type_is_in_the_catalog() -> None:
    catalog = load_catalog()
    unknown = {(q.cloud, q.instance_type) for q in load_snapshot()} - {it.key for it in catalog}
    assert unknown == set()
    assert offers_from_quotes(load_snapshot(), catalog).dropped == 0


def test_every_catalog_type_has_spot_and_on_demand_prices_but_documented_gaps() -> None:
    markets = markets_by_type(load_snapshot())
    for it in load_catalog():
        if it.key in NOT_IN_SNAPSHOT:
            assert it.key not in markets, f"{it.key} has rows now: drop it from NOT_IN_SNAPSHOT"
            continue
        expected = {"spot", "on-demand"}
        if it.key in NO_SPOT:
            expected.discard("spot")
        if it.key in NO_ON_DEMAND:
            expected.discard("on-demand")
        assert markets.get(it.key) == expected, it.key


def test_snapshot_has_one_price_per_place_and_market() -> None:
    quotes = load_snapshot()
    keys = [(q.cloud, q.region, q.zone, q.instance_type, q.market) for q in quotes]
    assert len(keys) == len(set(keys))


def test_every_price_is_a_positive_usd_amount_per_hour() -> None:
    prices = [q.price_per_hour for q in load_snapshot()]
    assert all(0 < price < 200 for price in prices)


def test_spot_never_costs_more_than_on_demand_and_the_cheapest_spot_costs_less() -> None:
    on_demand: dict[tuple[str, str, str], float] = {}
    spot: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for q in load_snapshot():
        key = (q.cloud, q.region, q.instance_type)
        if q.market == "on-demand":
            on_demand[key] = q.price_per_hour
        else:
            spot[key].append(q.price_per_hour)
    compared = 0
    for key, prices in spot.items():
        if key in on_demand:
            # A spot price may reach the on-demand price (AWS caps it there), never exceed it.
            assert max(prices) <= on_demand[key], key
            assert min(prices) < on_demand[key], key
            compared += 1
    assert compared > 200


def test_on_demand_and_azure_prices_are_region_level_spot_is_per_zone_on_aws_and_gcp() -> None:
    for q in load_snapshot():
        if q.market == "on-demand" or q.cloud == "azure":
            assert q.zone is None, q
        elif q.cloud == "aws":
            # AZ IDs (use1-az4): the same physical zone in every account, unlike us-east-1a.
            prefix = AZ_ID_PREFIX[q.region]
            assert q.zone is not None and re.fullmatch(rf"{prefix}-az\d", q.zone), q
        else:
            assert q.zone is not None and re.fullmatch(rf"{q.region}-[a-z]", q.zone), q


def test_snapshot_regions_are_the_default_regions_for_a_live_refresh() -> None:
    for cloud, regions in DEFAULT_REGIONS.items():
        assert snapshot_regions(cloud) == regions
    assert snapshot_regions("local") == ()


def test_large_types_are_offered_in_fewer_regions_than_small_ones() -> None:
    regions: dict[str, set[str]] = defaultdict(set)
    for q in load_snapshot():
        regions[q.instance_type].add(q.region)
    assert regions["p5.48xlarge"] < regions["g4dn.xlarge"]
    assert regions["p4de.24xlarge"] == {"us-east-1", "us-west-2"}
    assert "eu-west-1" not in regions["g6e.xlarge"]


def test_eight_gpu_a100_80gb_spot_prices_differ_across_clouds_by_tens_of_percent() -> None:
    offers = offers_from_quotes(load_snapshot(), load_catalog()).offers
    cheapest: dict[str, float] = {}
    for o in offers:
        if (o.gpu, o.gpu_count, o.market) == ("A100-80GB", 8, "spot"):
            cheapest[o.cloud] = min(cheapest.get(o.cloud, o.price_per_hour), o.price_per_hour)
    assert set(cheapest) == {"aws", "gcp", "azure"}
    ordered = sorted(cheapest.values())
    assert all(b / a > 1.2 for a, b in itertools.pairwise(ordered))


def test_interruption_buckets_are_aws_spot_buckets_or_empty() -> None:
    for q in load_snapshot():
        if q.interruption_bucket is not None:
            assert q.interruption_bucket in INTERRUPTION_BUCKETS
            assert (q.cloud, q.market) == ("aws", "spot")


def test_every_row_says_how_its_price_was_obtained() -> None:
    rows = bundled_rows()
    assert {row["basis"] for row in rows} <= {"catalog", "list", "derived"}
    derived = {(row["cloud"], row["region"]) for row in rows if row["basis"] == "derived"}
    # Only the documented gap fills: Azure's European regions and GCP GPU SKU corrections.
    assert {(c, r) for c, r in derived if c == "azure"} == {
        ("azure", "westeurope"),
        ("azure", "northeurope"),
    }
    assert {c for c, _ in derived} == {"azure", "gcp"}
    assert all(row["basis"] == "catalog" for row in rows if row["cloud"] == "aws")
    assert all(
        row["market"] == "on-demand"
        for row in rows
        if row["basis"] == "derived" and row["cloud"] == "gcp"
    )


def test_load_snapshot_reads_a_given_file(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.csv"
    path.write_text(f"# comment\n{HEADER}\n{GOOD_ROW}\n", encoding="utf-8")
    (q,) = load_snapshot(path)
    assert q == Quote(
        cloud="aws",
        region="us-east-1",
        zone="use1-az4",
        instance_type="p4de.24xlarge",
        market="spot",
        price_per_hour=7.8074,
        source="snapshot",
        observed_at=datetime(2025, 5, 1, tzinfo=UTC),
        interruption_bucket=None,
    )
    assert snapshot_regions("aws", path) == ("us-east-1",)
    assert snapshot_date(path) == date(2025, 5, 1)


def test_snapshot_without_the_basis_column_still_loads() -> None:
    text = ",".join(COLUMNS) + "\n" + GOOD_ROW.rsplit(",", 1)[0] + "\n"
    assert len(parse_snapshot(text, "snapshot.csv")) == 1


def test_load_snapshot_returns_a_fresh_list_each_time() -> None:
    first = load_snapshot()
    first.clear()
    assert load_snapshot()


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (GOOD_ROW.replace("7.8074", "cheap"), "price_per_hour 'cheap' is not a number"),
        (GOOD_ROW.replace("7.8074", "-1"), "price_per_hour must be a positive USD amount"),
        (GOOD_ROW.replace("7.8074", "0"), "price_per_hour must be a positive USD amount"),
        (GOOD_ROW.replace(",spot,", ",preemptible,"), "market 'preemptible' is not one of"),
        (GOOD_ROW.replace("Z,,", "Z,often,"), "interruption_bucket 'often' is not one of"),
        (GOOD_ROW.replace("2025-05-01T00:00:00Z", "2025-05-01T00:00:00"), "has no time zone"),
        (GOOD_ROW.replace("2025-05-01T00:00:00Z", "May 1st"), "is not an ISO-8601 time"),
        (GOOD_ROW.replace("aws,", "ibm,", 1), "cloud 'ibm' is not one of"),
        (GOOD_ROW.replace(",catalog", ",guessed"), "basis 'guessed' is not one of"),
        (GOOD_ROW.replace(",us-east-1,", ",,"), "region is empty"),
        (GOOD_ROW + ",extra", "10 fields, the header has 9"),
        (GOOD_ROW, "same cloud, region, zone, instance_type and market as line 3"),
    ],
)
def test_malformed_snapshot_row_is_one_line_error_naming_the_line(row: str, message: str) -> None:
    text = f"# comment\n{HEADER}\n{GOOD_ROW}\n\n{row}\n"
    with pytest.raises(BadInput) as caught:
        parse_snapshot(text, "snapshot.csv")
    assert caught.value.message.startswith("snapshot.csv line 5: ")
    assert message in caught.value.message
    assert "\n" not in caught.value.message


def test_snapshot_without_a_needed_column_names_it() -> None:
    text = HEADER.replace(",observed_at", "") + "\n"
    with pytest.raises(BadInput, match=r"line 1: header lacks observed_at"):
        parse_snapshot(text, "snapshot.csv")


def test_missing_snapshot_file_is_bad_input_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match=r"gone\.csv: cannot read the price snapshot"):
        load_snapshot(tmp_path / "gone.csv")
