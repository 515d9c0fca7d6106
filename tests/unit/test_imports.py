"""Importing SkyPilot catalog CSVs: per-cloud rules, GCP host + GPU composition, bad files."""

from __future__ import annotations

import gzip
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.core.errors import BadInput
from router.core.offers import Quote
from router.prices.cache import QuoteCache
from router.prices.imports import ImportResult, import_skypilot

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "skypilot"
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Entry:
    """Stands in for router.core.catalog.InstanceType: only the fields the import reads."""

    cloud: str
    instance_type: str
    gpu: str
    gpu_count: int


CATALOG = [
    Entry("aws", "g5.xlarge", "A10G", 1),
    Entry("aws", "g4dn.xlarge", "T4", 1),
    Entry("aws", "p4d.24xlarge", "A100-40GB", 8),
    Entry("aws", "p5.48xlarge", "H100-80GB", 8),
    Entry("gcp", "a2-highgpu-8g", "A100-40GB", 8),
    Entry("gcp", "a2-ultragpu-8g", "A100-80GB", 8),
    Entry("gcp", "n1-standard-8+T4:1", "T4", 1),
    Entry("gcp", "n1-standard-8+T4:2", "T4", 2),
    Entry("gcp", "n1-standard-8+V100:1", "V100", 1),
    Entry("azure", "Standard_NC24ads_A100_v4", "A100-80GB", 1),
    Entry("azure", "Standard_NC4as_T4_v3", "T4", 1),
    Entry("azure", "Standard_NC8ads_A10_v4", "A10", 1),
    Entry("azure", "Standard_ND96amsr_A100_v4", "A100-80GB", 8),
    Entry("azure", "Standard_ND96asr_v4", "A100-40GB", 8),
    Entry("azure", "Standard_NV36ads_A10_v5", "A10", 1),
]


def load(cloud_dir: str) -> ImportResult:
    return import_skypilot(SAMPLES / cloud_dir / "vms.csv", now=NOW, catalog=CATALOG)


def price(result: ImportResult, instance_type: str, zone: str | None, market: str) -> float:
    [match] = [
        q
        for q in result.quotes
        if q.instance_type == instance_type and q.zone == zone and q.market == market
    ]
    return match.price_per_hour


def test_gcp_a2_ultragpu_8g_spot_price_is_host_spot_plus_eight_gpu_spot_row() -> None:
    result = load("gcp")

    # host row: a2-ultragpu-8g us-central1-a spot 3.51864; GPU row: A100-80GB x8 spot 12.5696
    assert price(result, "a2-ultragpu-8g", "us-central1-a", "spot") == 3.51864 + 12.5696
    assert price(result, "a2-ultragpu-8g", "us-central1-a", "on-demand") == 8.79698 + 14.76958


def test_gcp_host_with_only_a_single_gpu_row_pays_for_each_of_its_gpus() -> None:
    result = load("gcp")

    # us-east4-c lists A100-80GB only with count 1: eight of them.
    assert price(result, "a2-ultragpu-8g", "us-east4-c", "spot") == 3.96192 + 1.7697 * 8
    assert price(result, "a2-ultragpu-8g", "us-east4-c", "on-demand") == 9.90664 + 2.07937 * 8


def test_skypilot_a100_gpu_rows_price_the_40gb_a2_highgpu() -> None:
    result = load("gcp")

    assert price(result, "a2-highgpu-8g", "us-central1-a", "spot") == 2.36604 + 9.1776


def test_gcp_n1_host_plus_gpu_rows_become_spotroutes_n1_gpu_types() -> None:
    result = load("gcp")

    n1 = {
        (q.instance_type, q.zone, q.market): q.price_per_hour
        for q in result.quotes
        if q.instance_type.startswith("n1-")
    }
    assert n1 == {
        ("n1-standard-8+T4:1", "us-central1-a", "on-demand"): 0.37997 + 0.35,
        ("n1-standard-8+T4:1", "us-central1-a", "spot"): 0.07965 + 0.14,
        ("n1-standard-8+T4:2", "us-central1-a", "on-demand"): 0.37997 + 0.7,
        ("n1-standard-8+T4:2", "us-central1-a", "spot"): 0.07965 + 0.28,
        ("n1-standard-8+V100:1", "us-central1-a", "on-demand"): 0.37997 + 2.48,
        ("n1-standard-8+V100:1", "us-central1-a", "spot"): 0.07965 + 0.8231,
        # us-west4-b: no host spot price, and T4 listed only singly.
        ("n1-standard-8+T4:1", "us-west4-b", "on-demand"): 0.42795 + 0.37,
        ("n1-standard-8+T4:2", "us-west4-b", "on-demand"): 0.42795 + 0.37 * 2,
    }


def test_gcp_rows_that_give_no_quote_are_counted_by_reason() -> None:
    result = load("gcp")

    assert result.cloud == "gcp"
    assert result.rows_read == 16
    assert len(result.quotes) == 14
    assert result.rows_skipped == 4
    assert result.skipped_reasons == {
        "GPU-only row no spotroute type uses": 1,  # H100 x1: no a3 host in the file
        "no GPU-only row for the host's GPUs in its zone": 1,  # a2-ultragpu-8g europe-west4-a
        "not a GPU type spotroute knows": 1,  # e2-micro
        "price is zero or negative": 1,  # the TPU placeholder row priced 0.0
    }


def test_aws_rows_give_one_quote_per_zone_and_market_with_a_price() -> None:
    result = load("aws")

    assert result.cloud == "aws"
    assert {
        (q.zone, q.market): q.price_per_hour
        for q in result.quotes
        if q.instance_type == "g5.xlarge"
    } == {
        ("use1-az1", "on-demand"): 1.006,
        ("use1-az1", "spot"): 0.4177,
        ("use1-az2", "on-demand"): 1.006,
        ("use1-az2", "spot"): 0.397,
        ("euw2-az3", "on-demand"): 1.277,
    }
    assert price(result, "p4d.24xlarge", "use1-az4", "spot") == 9.8304
    assert len(result.quotes) == 9


def test_aws_placeholder_prices_duplicates_and_unknown_types_are_skipped_by_reason() -> None:
    result = load("aws")

    assert result.rows_read == 12
    assert result.rows_skipped == 7
    assert result.skipped_reasons == {
        "duplicate of an earlier row": 1,
        "no price (empty, nan or N/A)": 2,  # g4dn.xlarge N/A, p4d.24xlarge nan
        "not a GPU type spotroute knows": 2,  # a1.large, g5g.2xlarge (T4g)
        "price is zero or negative": 2,  # p5.48xlarge 0.0 and -1
    }


def test_azure_file_without_zone_column_gives_regional_quotes() -> None:
    result = load("azure")

    assert result.cloud == "azure"
    assert {q.zone for q in result.quotes} == {None}
    assert price(result, "Standard_ND96amsr_A100_v4", None, "spot") == 3.6047
    assert {q.region for q in result.quotes if q.instance_type == "Standard_NC24ads_A100_v4"} == {
        "eastus",
        "westus3",
    }
    assert len(result.quotes) == 12
    assert result.skipped_reasons == {
        "no price (empty, nan or N/A)": 1,
        "not a GPU type spotroute knows": 1,
    }


def test_every_quote_is_stamped_with_the_import_time_and_source() -> None:
    result = load("azure")

    assert {(q.source, q.observed_at, q.cloud) for q in result.quotes} == {
        ("import:skypilot", NOW, "azure")
    }


def test_cloud_is_read_from_instance_names_when_the_path_does_not_say(tmp_path: Path) -> None:
    copy = tmp_path / "catalog-download.csv"
    shutil.copy(SAMPLES / "aws" / "vms.csv", copy)

    result = import_skypilot(copy, now=NOW, catalog=CATALOG)

    assert result.cloud == "aws"
    assert len(result.quotes) == 9


def test_gcp_file_is_recognised_by_its_instance_names(tmp_path: Path) -> None:
    copy = tmp_path / "vms.csv"
    shutil.copy(SAMPLES / "gcp" / "vms.csv", copy)

    assert import_skypilot(copy, now=NOW, catalog=CATALOG).cloud == "gcp"


def test_explicit_cloud_wins_over_the_path() -> None:
    result = import_skypilot(SAMPLES / "aws" / "vms.csv", cloud="azure", now=NOW, catalog=CATALOG)

    assert result.cloud == "azure"
    assert result.quotes == []
    assert result.skipped_reasons == {"not a GPU type spotroute knows": 12}


def test_a_file_whose_cloud_cannot_be_told_asks_for_cloud_flag(tmp_path: Path) -> None:
    mystery = tmp_path / "prices.csv"
    mystery.write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,"
        "Region,AvailabilityZone\nbigbox,H100,8,192,2048,,50.0,20.0,north,north-1\n"
    )

    with pytest.raises(BadInput) as raised:
        import_skypilot(mystery, now=NOW, catalog=CATALOG)

    assert str(mystery) in raised.value.message
    assert "--cloud aws|gcp|azure" in raised.value.message


def test_imported_quotes_land_in_the_cache_and_reimporting_adds_nothing(tmp_path: Path) -> None:
    result = load("gcp")

    with QuoteCache(tmp_path / "prices.sqlite3") as cache:
        assert cache.add(result.quotes) == 14
        assert cache.add(load("gcp").quotes) == 0
        stored: list[Quote] = cache.latest(instance_types=["a2-ultragpu-8g"], markets=["spot"])

    assert {q.zone: q.price_per_hour for q in stored} == {
        "us-central1-a": 3.51864 + 12.5696,
        "us-east4-c": 3.96192 + 1.7697 * 8,
    }


def test_missing_file_is_bad_input_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "aws" / "vms.csv"

    with pytest.raises(BadInput) as raised:
        import_skypilot(missing, now=NOW, catalog=CATALOG)

    assert str(missing) in raised.value.message
    assert "no such file" in raised.value.message


def test_a_file_that_is_not_a_csv_names_the_missing_columns(tmp_path: Path) -> None:
    not_csv = tmp_path / "aws" / "vms.csv"
    not_csv.parent.mkdir()
    not_csv.write_text('{"InstanceType": "p4d.24xlarge", "Price": 32.77}\n')

    with pytest.raises(BadInput) as raised:
        import_skypilot(not_csv, now=NOW, catalog=CATALOG)

    message = raised.value.message
    assert str(not_csv) in message
    assert "missing columns InstanceType, AcceleratorName" in message
    assert "\n" not in message


def test_a_header_without_spot_prices_names_that_column(tmp_path: Path) -> None:
    partial = tmp_path / "gcp" / "vms.csv"
    partial.parent.mkdir()
    partial.write_text(
        "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,"
        "AvailabilityZone,Price\na2-ultragpu-8g,96.0,1360.0,,,,us-central1,us-central1-a,8.79698\n"
    )

    with pytest.raises(BadInput) as raised:
        import_skypilot(partial, now=NOW, catalog=CATALOG)

    assert "missing column SpotPrice" in raised.value.message


def test_a_compressed_file_is_reported_as_not_utf8(tmp_path: Path) -> None:
    packed = tmp_path / "aws" / "vms.csv"
    packed.parent.mkdir()
    packed.write_bytes(gzip.compress((SAMPLES / "aws" / "vms.csv").read_bytes()))

    with pytest.raises(BadInput) as raised:
        import_skypilot(packed, now=NOW, catalog=CATALOG)

    assert str(packed) in raised.value.message
    assert "not UTF-8" in raised.value.message


def test_an_empty_file_is_bad_input(tmp_path: Path) -> None:
    empty = tmp_path / "azure" / "vms.csv"
    empty.parent.mkdir()
    empty.write_text("")

    with pytest.raises(BadInput) as raised:
        import_skypilot(empty, now=NOW, catalog=CATALOG)

    assert "empty file" in raised.value.message


def test_an_unsupported_cloud_flag_is_bad_input() -> None:
    with pytest.raises(BadInput) as raised:
        import_skypilot(SAMPLES / "aws" / "vms.csv", cloud="oci", now=NOW, catalog=CATALOG)

    assert "'oci'" in raised.value.message
    assert "aws, gcp, azure" in raised.value.message


def test_spotroutes_own_catalog_recognises_the_sample_gpu_types() -> None:
    gcp = import_skypilot(SAMPLES / "gcp" / "vms.csv", now=NOW)
    aws = import_skypilot(SAMPLES / "aws" / "vms.csv", now=NOW)
    azure = import_skypilot(SAMPLES / "azure" / "vms.csv", now=NOW)

    assert price(gcp, "a2-ultragpu-8g", "us-central1-a", "spot") == 3.51864 + 12.5696
    assert price(gcp, "n1-standard-8+T4:1", "us-central1-a", "spot") == 0.07965 + 0.14
    assert price(gcp, "n1-standard-8+V100:1", "us-central1-a", "on-demand") == 0.37997 + 2.48
    assert price(aws, "p4d.24xlarge", "use1-az4", "on-demand") == 32.7726
    assert price(azure, "Standard_ND96asr_v4", None, "spot") == 2.99167


# --- rows spotroute does not plan on, and says so ------------------------------------------------

AWS_HEADER = ("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,"
              "SpotPrice,Region,AvailabilityZone\n")


def _aws_file(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "aws" / "vms.csv"
    path.parent.mkdir()
    path.write_text(AWS_HEADER + "".join(f"{row}\n" for row in rows))
    return path


def test_gcp_gpu_rows_whose_host_rows_are_missing_are_said_not_called_unused() -> None:
    catalog = [*CATALOG, Entry("gcp", "a3-highgpu-1g", "H100-80GB", 1)]
    result = import_skypilot(SAMPLES / "gcp" / "vms.csv", now=NOW, catalog=catalog)
    # The H100:1 row of us-central1-a: spotroute's a3-highgpu-1g uses it, but the file has no
    # a3-highgpu-1g row there. (With CATALOG alone no type uses it: test above.)
    assert result.skipped_reasons["GPU-only row whose host machines have no row in its zone"] == 1
    assert "GPU-only row no spotroute type uses" not in result.skipped_reasons
    assert result.rows_skipped == 4
    assert result.notes == (
        "gcp H100:1 GPU rows: no host row in their zone for spotroute's a3-highgpu-1g — GPU "
        "rows price nothing without one (a catalog gap, not a GPU spotroute lacks) (1 row)",
    )


def test_rows_whose_gpus_disagree_with_the_catalog_are_not_imported_and_said(
    tmp_path: Path,
) -> None:
    path = _aws_file(
        tmp_path,
        "p5.48xlarge,H100,12.0,192.0,2048.0,,98.32,31.464,us-east-2,use2-az2",
        "g4dn.xlarge,V100,1.0,4.0,16.0,,0.526,0.2,us-east-1,use1-az4",
        "g5.xlarge,A10G,1.0,4.0,16.0,,1.006,0.4177,us-east-1,use1-az1",
    )
    result = import_skypilot(path, now=NOW, catalog=CATALOG)
    assert {q.instance_type for q in result.quotes} == {"g5.xlarge"}
    assert result.skipped_reasons == {"GPUs disagree with spotroute's catalog": 2}
    assert result.notes == (
        "aws g4dn.xlarge: the file says 1× V100, spotroute's catalog (router/data/instances.csv, "
        "from the provider's page) 1× T4 — not imported (1 row)",
        "aws p5.48xlarge: the file says 12× H100, spotroute's catalog (router/data/instances.csv, "
        "from the provider's page) 8× H100-80GB — not imported (1 row)",
    )


def test_a_spot_price_equal_to_on_demand_is_a_placeholder_and_only_on_demand_is_imported(
    tmp_path: Path,
) -> None:
    path = _aws_file(
        tmp_path,
        "g5.xlarge,A10G,1.0,4.0,16.0,,1.006,1.006,us-east-1,use1-az1",
        "g5.xlarge,A10G,1.0,4.0,16.0,,1.006,1.006,us-east-1,use1-az2",
        "a1.large,,,2.0,4.0,,0.051,0.051,us-east-1,use1-az2",  # not spotroute's: not said
    )
    result = import_skypilot(path, now=NOW, catalog=CATALOG)
    assert {(q.zone, q.market) for q in result.quotes} == {
        ("use1-az1", "on-demand"), ("use1-az2", "on-demand")}
    assert result.rows_skipped == 1  # a1.large; the g5 rows gave their on-demand quote
    assert result.notes == (
        "aws g5.xlarge: SpotPrice equals Price, a placeholder — its spot price is not imported "
        "(2 rows)",
    )


def test_cli_import_prints_each_flagged_type_and_json_lists_the_notes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit.cli_harness import isolate, route

    isolate(monkeypatch, tmp_path)
    path = _aws_file(tmp_path, "p5.48xlarge,H100,12.0,192.0,2048.0,,98.32,31.464,us-east-2,"
                     "use2-az2")
    run = route(monkeypatch, capsys, "prices", "import", path, "--format", "skypilot")
    assert run.code == 0, run
    assert run.out.splitlines()[1].startswith("  flagged aws p5.48xlarge: the file says 12× H100")
    run = route(monkeypatch, capsys, "prices", "import", path, "--format", "skypilot", "--json")
    assert run.json()["notes"][0].startswith("aws p5.48xlarge: the file says 12× H100")
