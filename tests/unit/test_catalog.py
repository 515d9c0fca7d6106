"""The GPU instance catalog: bundled rows are consistent, lookups and the quote join behave."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.config.datafiles import load_catalog, load_gpus
from router.core.catalog import (
    COLUMNS,
    Catalog,
    InstanceType,
    offers_from_quotes,
    parse_catalog,
    parse_image_limits,
)
from router.core.errors import BadInput
from router.core.gpus import canonical_gpus
from router.core.offers import Quote

NOW = datetime(2026, 1, 1, tzinfo=UTC)
HEADER = ",".join(COLUMNS)
GOOD_ROW = "aws,g5.xlarge,g5,A10G,1,24,4,16,PCIe,,https://aws.amazon.com/ec2/instance-types/g5/"


def quote(cloud: str, instance_type: str, *, market: str = "spot", price: float = 1.0) -> Quote:
    return Quote(
        cloud=cloud,
        region="us-east-1",
        zone="use1-az1",
        instance_type=instance_type,
        market=market,
        price_per_hour=price,
        source="snapshot",
        observed_at=NOW,
        interruption_bucket="<5%",
    )


def test_bundled_catalog_has_gpu_types_on_all_three_clouds() -> None:
    catalog = load_catalog()
    assert {it.cloud for it in catalog} == {"aws", "gcp", "azure"}
    assert all(catalog.for_cloud(cloud) for cloud in ("aws", "gcp", "azure"))


def test_every_row_names_a_canonical_gpu_with_sane_hardware() -> None:
    memory = {gpu.name: gpu.memory_gb for gpu in load_gpus().gpus}
    for it in load_catalog():
        assert it.gpu in canonical_gpus(), it
        assert it.gpu_count in range(1, 17), it
        # Per-GPU memory is the GPU's own (or a larger variant, like p3dn's 32 GB V100).
        assert memory[it.gpu] <= it.gpu_memory_gb <= 2 * memory[it.gpu], it
        assert it.vcpus in range(1, 225), it
        assert it.vcpus <= it.memory_gb <= 4096, it
        assert it.source.startswith("https://"), it


def test_catalog_keys_are_unique() -> None:
    keys = [it.key for it in load_catalog()]
    assert len(keys) == len(set(keys))


AWS_SIZES = ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")
REQUIRED = {
    "aws": [
        "p5.48xlarge",
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p3.2xlarge",
        "p3.8xlarge",
        "p3.16xlarge",
        "p3dn.24xlarge",
        *(f"{family}.{size}" for family in ("g6e", "g6", "g5") for size in AWS_SIZES),
        "g6e.48xlarge",
        "g6.48xlarge",
        "g5.48xlarge",
        *(f"g4dn.{size}" for size in AWS_SIZES if size != "24xlarge"),
        "g4dn.metal",
    ],
    "gcp": [
        *(f"{f}-{n}g" for f in ("a3-highgpu", "a2-ultragpu", "a2-highgpu") for n in (1, 2, 4, 8)),
        "a2-megagpu-16g",
        "a3-megagpu-8g",
        *(f"g2-standard-{v}" for v in (4, 8, 12, 16, 24, 32, 48, 96)),
        "n1-standard-8+T4:1",
        "n1-standard-32+T4:4",
        "n1-standard-16+V100:2",
    ],
    "azure": [
        "Standard_ND96isr_H100_v5",
        "Standard_ND96asr_v4",
        "Standard_ND96amsr_A100_v4",
        "Standard_NC24ads_A100_v4",
        "Standard_NC48ads_A100_v4",
        "Standard_NC96ads_A100_v4",
        "Standard_NC4as_T4_v3",
        "Standard_NC8as_T4_v3",
        "Standard_NC16as_T4_v3",
        "Standard_NC64as_T4_v3",
        "Standard_NV36ads_A10_v5",
        "Standard_NV36adms_A10_v5",
        "Standard_NV72ads_A10_v5",
    ],
}


@pytest.mark.parametrize(("cloud", "names"), sorted(REQUIRED.items()))
def test_catalog_covers_the_supported_instance_types(cloud: str, names: list[str]) -> None:
    catalog = load_catalog()
    missing = [name for name in names if catalog.get(cloud, name) is None]
    assert missing == []


def test_fractional_azure_a10_partitions_are_left_out() -> None:
    catalog = load_catalog()
    for name in ("Standard_NV6ads_A10_v5", "Standard_NV12ads_A10_v5", "Standard_NV18ads_A10_v5"):
        assert catalog.get("azure", name) is None


def test_well_known_specs_match_the_provider_pages() -> None:
    catalog = load_catalog()
    p5 = catalog.get("aws", "p5.48xlarge")
    assert p5 is not None
    assert (p5.gpu, p5.gpu_count, p5.gpu_memory_gb, p5.vcpus, p5.memory_gb) == (
        "H100-80GB",
        8,
        80,
        192,
        2048.0,
    )
    nd = catalog.get("azure", "Standard_ND96asr_v4")
    assert nd is not None
    assert (nd.gpu, nd.gpu_count, nd.vcpus, nd.memory_gb) == ("A100-40GB", 8, 96, 900.0)
    g2 = catalog.get("gcp", "g2-standard-24")
    assert g2 is not None
    assert (g2.gpu, g2.gpu_count, g2.vcpus, g2.memory_gb) == ("L4", 2, 24, 96.0)


def test_gcp_n1_rows_carry_the_accelerator_type_and_the_machine_shape() -> None:
    catalog = load_catalog()
    t4 = catalog.get("gcp", "n1-standard-8+T4:1")
    assert t4 is not None
    assert (t4.gpu, t4.gpu_count, t4.vcpus, t4.memory_gb) == ("T4", 1, 8, 30.0)
    assert t4.accelerator_type == "nvidia-tesla-t4"
    v100 = catalog.get("gcp", "n1-standard-64+V100:8")
    assert v100 is not None
    assert (v100.gpu_count, v100.vcpus, v100.accelerator_type) == (8, 64, "nvidia-tesla-v100")
    a3 = catalog.get("gcp", "a3-highgpu-8g")
    assert a3 is not None
    assert a3.accelerator_type is None


def test_every_attached_gpu_row_is_named_machine_plus_gpu_count() -> None:
    for it in load_catalog():
        if "+" in it.instance_type:
            machine, _, gpus = it.instance_type.partition("+")
            assert it.cloud == "gcp"
            assert machine.startswith("n1-")
            assert gpus == f"{it.gpu}:{it.gpu_count}"
            assert it.accelerator_type


def test_matching_finds_exact_gpu_and_count_on_the_chosen_clouds() -> None:
    catalog = load_catalog()
    found = catalog.matching("A100-80GB", 8, ["aws", "azure"])
    assert {it.key for it in found} == {
        ("aws", "p4de.24xlarge"),
        ("azure", "Standard_ND96amsr_A100_v4"),
    }


def test_matching_without_a_cloud_filter_spans_every_cloud() -> None:
    found = load_catalog().matching("A100-80GB", 8)
    assert {it.cloud for it in found} == {"aws", "gcp", "azure"}
    assert all(it.gpu == "A100-80GB" and it.gpu_count == 8 for it in found)


def test_matching_does_not_mix_gpu_generations_or_counts() -> None:
    catalog = load_catalog()
    assert catalog.matching("A100-40GB", 8, ["aws"]) == (catalog.get("aws", "p4d.24xlarge"),)
    assert catalog.matching("H100-80GB", 3) == ()
    assert catalog.matching("A100-80GB", 8, []) == ()


def test_equivalents_start_with_the_type_then_smaller_hosts_first() -> None:
    catalog = load_catalog()
    g5 = catalog.get("aws", "g5.8xlarge")
    assert g5 is not None
    names = [it.instance_type for it in catalog.equivalents(g5)]
    assert names == ["g5.8xlarge", "g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.16xlarge"]


def test_equivalents_stay_on_the_same_cloud_gpu_and_count() -> None:
    catalog = load_catalog()
    g5 = catalog.get("aws", "g5.12xlarge")
    assert g5 is not None
    assert [it.instance_type for it in catalog.equivalents(g5)] == ["g5.12xlarge", "g5.24xlarge"]
    p5 = catalog.get("aws", "p5.48xlarge")
    assert p5 is not None
    assert catalog.equivalents(p5) == (p5,)


def test_offers_from_quotes_adds_the_hardware_of_each_type() -> None:
    result = offers_from_quotes([quote("aws", "p4de.24xlarge", price=5.84)], load_catalog())
    assert result.dropped == 0
    (offer,) = result.offers
    assert (offer.gpu, offer.gpu_count, offer.gpu_memory_gb, offer.vcpus, offer.memory_gb) == (
        "A100-80GB",
        8,
        80,
        96,
        1152.0,
    )
    assert offer.interconnect.startswith("NVSwitch")
    assert (offer.price_per_hour, offer.market, offer.zone, offer.source) == (
        5.84,
        "spot",
        "use1-az1",
        "snapshot",
    )
    assert offer.interruption_bucket == "<5%"
    assert offer.observed_at == NOW


def test_offers_from_quotes_drops_unknown_types_and_says_which() -> None:
    quotes = [
        quote("aws", "g5.xlarge"),
        quote("aws", "x9.huge"),
        quote("aws", "x9.huge", market="on-demand"),
        quote("gcp", "g5.xlarge"),
    ]
    result = offers_from_quotes(quotes, load_catalog())
    assert [o.instance_type for o in result.offers] == ["g5.xlarge"]
    assert result.dropped == 3
    assert result.unknown_types == (("aws", "x9.huge"), ("gcp", "g5.xlarge"))


def test_load_catalog_reads_a_given_file(tmp_path: Path) -> None:
    path = tmp_path / "instances.csv"
    path.write_text(f"# a comment line\n{HEADER}\n{GOOD_ROW}\n", encoding="utf-8")
    catalog = load_catalog(path)
    assert len(catalog) == 1
    assert catalog.get("aws", "g5.xlarge") == InstanceType(
        cloud="aws",
        instance_type="g5.xlarge",
        family="g5",
        gpu="A10G",
        gpu_count=1,
        gpu_memory_gb=24,
        vcpus=4,
        memory_gb=16.0,
        interconnect="PCIe",
        accelerator_type=None,
        source="https://aws.amazon.com/ec2/instance-types/g5/",
    )


def test_missing_catalog_file_is_bad_input_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.csv"
    with pytest.raises(BadInput, match=r"nope\.csv: cannot read the instance catalog"):
        load_catalog(path)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("aws,g5.xlarge,g5,A100,1,24,4,16,PCIe,,src", "gpu 'A100' is not a canonical GPU name"),
        ("aws,g5.xlarge,g5,A10G,0,24,4,16,PCIe,,src", "gpu_count must be positive"),
        ("aws,g5.xlarge,g5,A10G,one,24,4,16,PCIe,,src", "gpu_count 'one' is not a whole number"),
        ("aws,g5.xlarge,g5,A10G,1,24,4,lots,PCIe,,src", "memory_gb 'lots' is not a number"),
        ("aws,g5.xlarge,g5,A10G,1,24,4,16,PCIe,src", "10 fields, the header has 11"),
        ("oracle,g5.xlarge,g5,A10G,1,24,4,16,PCIe,,src", "cloud 'oracle' is not one of"),
        ("aws,g5.xlarge,g5,A10G,1,24,4,16,PCIe,,", "source is empty"),
        ("gcp,n1-standard-8+T4:2,n1,T4,1,16,8,30,PCIe,nvidia-tesla-t4,src", "names T4:2"),
        ("gcp,n1-standard-8+T4:1,n1,T4,1,16,8,30,PCIe,,src", "accelerator_type is empty"),
        ("aws,g5.xlarge+T4:1,g5,T4,1,16,4,16,PCIe,x,src", "only GCP N1 rows use '+'"),
    ],
)
def test_malformed_catalog_row_is_one_line_error_naming_the_line(row: str, message: str) -> None:
    text = f"# comment\n{HEADER}\n{GOOD_ROW.replace('g5.xlarge', 'g5.2xlarge')}\n{row}\n"
    with pytest.raises(BadInput) as caught:
        parse_catalog(text, "instances.csv")
    assert caught.value.message.startswith("instances.csv line 4: ")
    assert message in caught.value.message
    assert "\n" not in caught.value.message


def test_duplicate_catalog_row_names_both_lines() -> None:
    text = f"{HEADER}\n{GOOD_ROW}\n\n{GOOD_ROW}\n"
    with pytest.raises(BadInput, match=r"line 4: aws g5.xlarge is already on line 2"):
        parse_catalog(text, "instances.csv")


def test_catalog_without_a_needed_column_names_it() -> None:
    text = HEADER.replace(",accelerator_type", "") + "\n"
    with pytest.raises(BadInput, match=r"line 1: header lacks accelerator_type"):
        parse_catalog(text, "instances.csv")


def test_catalog_object_refuses_duplicate_types() -> None:
    (it,) = parse_catalog(f"{HEADER}\n{GOOD_ROW}\n")
    with pytest.raises(ValueError, match="appears twice"):
        Catalog([it, it])


# --- machine images and the GPUs their drivers can drive (router/data/images.csv) ---------------


def _quote(cloud: str, instance_type: str) -> Quote:
    return Quote(
        cloud=cloud,
        region="r",
        zone=None,
        instance_type=instance_type,
        market="on-demand",
        price_per_hour=1.0,
        source="test",
        observed_at=datetime(2026, 12, 1, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("cloud", "instance_type", "why"),
    [
        ("azure", "Standard_NV36ads_A10_v5", "GRID"),
    ],
)
def test_types_the_clouds_image_cannot_drive_get_no_offer_and_say_why(
    cloud: str, instance_type: str, why: str
) -> None:
    result = offers_from_quotes([_quote(cloud, instance_type)], load_catalog())

    assert result.offers == []
    ((refused_cloud, refused_type, reason),) = result.refused
    assert (refused_cloud, refused_type) == (cloud, instance_type)
    assert why in reason and "https://" in reason


@pytest.mark.parametrize(
    ("cloud", "instance_type"),
    [
        ("gcp", "n1-standard-8+V100:1"),  # GCP's image ships the proprietary driver
        # AWS V100 nodes boot the proprietary-driver DLAMI (components/aws.py GPU_IMAGES).
        ("aws", "p3.2xlarge"),
        ("aws", "p3dn.24xlarge"),
        ("aws", "p4d.24xlarge"),
        ("azure", "Standard_NC96ads_A100_v4"),
    ],
)
def test_types_the_image_drives_still_get_offers(cloud: str, instance_type: str) -> None:
    result = offers_from_quotes([_quote(cloud, instance_type)], load_catalog())

    assert [o.instance_type for o in result.offers] == [instance_type]
    assert result.refused == ()


def test_image_limit_rows_need_one_match_a_reason_and_a_source() -> None:
    header = "cloud,image,driver,gpu,family,reason,source\n"
    with pytest.raises(BadInput, match="exactly one of gpu and family"):
        parse_image_limits(header + "aws,img,drv,V100,p3,why,https://x\n")
    with pytest.raises(BadInput, match="reason and source"):
        parse_image_limits(header + "aws,img,drv,V100,,,\n")
