"""The GCP live price source against a loopback fake of the Billing Catalog and Compute APIs.

The real google-cloud-billing and google-cloud-compute clients talk REST to the fake, so these
tests cover the wire format, paging, retries, timeouts and error translation as users get them.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fake_gcp import FakeGcp, accelerator_type, machine_type, sku
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import billing_v1, compute_v1

from router.config.datafiles import load_catalog
from router.core.catalog import InstanceType
from router.core.errors import CredentialsMissing, OperationFailed, PriceSourceError
from router.core.offers import Quote
from router.prices import gcp
from router.prices.request import PriceRequest

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PROJECT = "spotroute-test"


# The bundled catalog's rows: a2-ultragpu-8g has 96 vCPUs, 1360 GB and 8 A100-80GB;
# n1-standard-8+T4:1 has 8 vCPUs and 30 GB with one T4 attached.
CATALOG = load_catalog()
A2_ULTRA_8 = CATALOG.get("gcp", "a2-ultragpu-8g")
N1_T4 = CATALOG.get("gcp", "n1-standard-8+T4:1")
N1_32_T4_4 = CATALOG.get("gcp", "n1-standard-32+T4:4")
assert A2_ULTRA_8 is not None and N1_T4 is not None and N1_32_T4_4 is not None

# List prices, USD (units, nanos) per vCPU-hour, GiB-hour or GPU-hour.
A2_CORE = (0, 31_611_000)
A2_RAM = (0, 4_237_000)
A100_80 = (3, 927_170_000)
A2_CORE_SPOT = (0, 12_200_000)
A2_RAM_SPOT = (0, 1_640_000)
A100_80_SPOT = (1, 570_800_000)
N1_CORE = (0, 31_611_000)
N1_RAM = (0, 4_237_000)
T4 = (0, 350_000_000)
N1_CORE_SPOT = (0, 6_980_000)
N1_RAM_SPOT = (0, 936_000)
T4_SPOT = (0, 140_000_000)

# Local SSD, USD per GiB-month (SSD backed Local Storage), billed per hour as month / 730.
LOCAL_SSD = (0, 80_000_000)
LOCAL_SSD_SPOT = (0, 48_000_000)
AMERICAS = ["us-central1", "us-east1"]
EMEA = ["europe-west4"]


def usd(price: tuple[int, int]) -> Decimal:
    return Decimal(price[0]) + Decimal(price[1]) / Decimal(10**9)


def composed(
    row: InstanceType,
    core: tuple[int, int],
    ram: tuple[int, int],
    gpu: tuple[int, int],
    *,
    ssd_gib: int = 0,
    ssd: tuple[int, int] = (0, 0),
) -> float:
    """vCPUs × core + GiB × RAM + GPUs × GPU price (+ bundled local SSD GiB × SSD month / 730),
    with the catalog row's shape."""
    total = (
        row.vcpus * usd(core)
        + Decimal(str(row.memory_gb)) * usd(ram)
        + row.gpu_count * usd(gpu)
        + ssd_gib * usd(ssd) / Decimal(730)
    )
    return float(total)


def _sku(
    description: str,
    group: str,
    usage: str,
    regions: list[str],
    price: tuple[int, int],
    unit: str = "h",
    *,
    family: str = "Compute",
) -> dict[str, Any]:
    return sku(
        description,
        resource_group=group,
        usage_type=usage,
        regions=regions,
        units=price[0],
        nanos=price[1],
        usage_unit=unit,
        resource_family=family,
    )


def americas_skus() -> list[dict[str, Any]]:
    """The SKUs an a2-ultragpu and an n1+T4 machine are billed by in the Americas."""
    return [
        _sku("A2 Instance Core running in Americas", "CPU", "OnDemand", AMERICAS, A2_CORE),
        _sku("A2 Instance Ram running in Americas", "RAM", "OnDemand", AMERICAS, A2_RAM, "GiBy.h"),
        _sku(
            "Nvidia Tesla A100 80GB GPU running in Americas", "GPU", "OnDemand", AMERICAS, A100_80
        ),
        _sku(
            "Spot Preemptible A2 Instance Core running in Americas",
            "CPU",
            "Preemptible",
            AMERICAS,
            A2_CORE_SPOT,
        ),
        _sku(
            "Spot Preemptible A2 Instance Ram running in Americas",
            "RAM",
            "Preemptible",
            AMERICAS,
            A2_RAM_SPOT,
            "GiBy.h",
        ),
        _sku(
            "Nvidia Tesla A100 80GB GPU attached to Spot Preemptible VMs running in Americas",
            "GPU",
            "Preemptible",
            AMERICAS,
            A100_80_SPOT,
        ),
        _sku(
            "N1 Predefined Instance Core running in Americas",
            "N1Standard",
            "OnDemand",
            AMERICAS,
            N1_CORE,
        ),
        _sku(
            "N1 Predefined Instance Ram running in Americas",
            "N1Standard",
            "OnDemand",
            AMERICAS,
            N1_RAM,
            "GiBy.h",
        ),
        _sku("Nvidia Tesla T4 GPU running in Americas", "GPU", "OnDemand", AMERICAS, T4),
        _sku(
            "Spot Preemptible N1 Predefined Instance Core running in Americas",
            "N1Standard",
            "Preemptible",
            AMERICAS,
            N1_CORE_SPOT,
        ),
        _sku(
            "Spot Preemptible N1 Predefined Instance Ram running in Americas",
            "N1Standard",
            "Preemptible",
            AMERICAS,
            N1_RAM_SPOT,
            "GiBy.h",
        ),
        _sku(
            "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas",
            "GPU",
            "Preemptible",
            AMERICAS,
            T4_SPOT,
        ),
        _sku(
            "SSD backed Local Storage",
            "LocalSSD",
            "OnDemand",
            AMERICAS + EMEA,
            LOCAL_SSD,
            "GiBy.mo",
            family="Storage",
        ),
        _sku(
            "SSD backed Local Storage attached to Spot Preemptible VMs",
            "LocalSSD",
            "Preemptible",
            AMERICAS + EMEA,
            LOCAL_SSD_SPOT,
            "GiBy.mo",
            family="Storage",
        ),
        # The 40 GB A100 is a different card: its SKU must not price the 80 GB one.
        _sku(
            "Nvidia Tesla A100 GPU running in Americas",
            "GPU",
            "OnDemand",
            AMERICAS,
            (2, 933_908_000),
        ),
    ]


def emea_skus_without_spot_gpu() -> list[dict[str, Any]]:
    """EMEA has A2 cores and RAM in both markets but the spot A100 80GB SKU is missing."""
    return [
        _sku("A2 Instance Core running in Netherlands", "CPU", "OnDemand", EMEA, (0, 34_773_000)),
        _sku(
            "A2 Instance Ram running in Netherlands",
            "RAM",
            "OnDemand",
            EMEA,
            (0, 4_661_000),
            "GiBy.h",
        ),
        _sku(
            "Nvidia Tesla A100 80GB GPU running in Netherlands",
            "GPU",
            "OnDemand",
            EMEA,
            (4, 319_887_000),
        ),
        _sku(
            "Spot Preemptible A2 Instance Core running in Netherlands",
            "CPU",
            "Preemptible",
            EMEA,
            (0, 13_420_000),
        ),
        _sku(
            "Spot Preemptible A2 Instance Ram running in Netherlands",
            "RAM",
            "Preemptible",
            EMEA,
            (0, 1_804_000),
            "GiBy.h",
        ),
    ]


def machine_zones() -> dict[str, list[dict[str, Any]]]:
    def a2(zone: str) -> dict[str, Any]:
        return machine_type("a2-ultragpu-8g", zone, guest_cpus=96, memory_mb=1360 * 1024)

    def n1(zone: str) -> dict[str, Any]:
        return machine_type("n1-standard-8", zone, guest_cpus=8, memory_mb=30 * 1024)

    def e2(zone: str) -> dict[str, Any]:
        return machine_type("e2-standard-4", zone, guest_cpus=4, memory_mb=16 * 1024)

    return {
        "us-central1-a": [a2("us-central1-a"), n1("us-central1-a"), e2("us-central1-a")],
        "us-central1-b": [n1("us-central1-b")],
        "us-central1-c": [a2("us-central1-c")],
        "us-central1-f": [n1("us-central1-f")],
        "us-east1-b": [e2("us-east1-b")],
        "europe-west4-a": [a2("europe-west4-a"), n1("europe-west4-a")],
        "asia-southeast1-c": [a2("asia-southeast1-c")],
    }


def accelerator_zones() -> dict[str, list[dict[str, Any]]]:
    def t4(zone: str) -> dict[str, Any]:
        return accelerator_type("nvidia-tesla-t4", zone, max_cards=4)

    # us-central1-f offers n1-standard-8 but no T4: n1+T4 cannot run there.
    return {
        "us-central1-a": [t4("us-central1-a")],
        "us-central1-b": [t4("us-central1-b")],
        "us-central1-f": [accelerator_type("nvidia-tesla-v100", "us-central1-f", max_cards=8)],
        "europe-west4-a": [t4("europe-west4-a")],
    }


@pytest.fixture
def fake() -> Iterator[FakeGcp]:
    server = FakeGcp()
    server.sku_pages = [americas_skus() + emea_skus_without_spot_gpu()]
    server.machine_type_pages = [machine_zones()]
    server.accelerator_type_pages = [accelerator_zones()]
    with server:
        yield server


def clients(fake: FakeGcp) -> dict[str, Any]:
    options = ClientOptions(api_endpoint=fake.endpoint)
    anonymous = AnonymousCredentials()
    return {
        "billing_client": billing_v1.CloudCatalogClient(
            transport="rest", client_options=options, credentials=anonymous
        ),
        "compute_client": compute_v1.MachineTypesClient(
            transport="rest", client_options=options, credentials=anonymous
        ),
        "accelerator_client": compute_v1.AcceleratorTypesClient(
            transport="rest", client_options=options, credentials=anonymous
        ),
    }


def fetch(
    fake: FakeGcp,
    *,
    instance_types: tuple[str, ...] = ("a2-ultragpu-8g", "n1-standard-8+T4:1"),
    regions: tuple[str, ...] = ("us-central1",),
    markets: tuple[str, ...] = ("spot", "on-demand"),
    timeout_s: float = 5.0,
    max_attempts: int = 3,
    sleeps: list[float] | None = None,
) -> list[Quote]:
    request = PriceRequest(
        instance_types=instance_types,
        regions=regions,
        markets=markets,
        timeout_s=timeout_s,
        max_attempts=max_attempts,
    )
    recorded = sleeps if sleeps is not None else []
    # No catalog passed: the bundled one is the default.
    return gcp.fetch_quotes(
        request,
        now=NOW,
        project=PROJECT,
        sleep=recorded.append,
        **clients(fake),
    )


def price(quotes: list[Quote], instance_type: str, zone: str, market: str) -> float:
    (match,) = [
        q for q in quotes if (q.instance_type, q.zone, q.market) == (instance_type, zone, market)
    ]
    return match.price_per_hour


# --- composition ----------------------------------------------------------------------------


def test_a2_ultragpu_price_is_its_vcpus_ram_and_eight_gpus_for_each_market(fake: FakeGcp) -> None:
    quotes = fetch(fake)

    on_demand = price(quotes, "a2-ultragpu-8g", "us-central1-a", "on-demand")
    spot = price(quotes, "a2-ultragpu-8g", "us-central1-a", "spot")

    assert on_demand == pytest.approx(
        composed(A2_ULTRA_8, A2_CORE, A2_RAM, A100_80, ssd_gib=3000, ssd=LOCAL_SSD), rel=1e-12
    )
    assert spot == pytest.approx(
        composed(
            A2_ULTRA_8, A2_CORE_SPOT, A2_RAM_SPOT, A100_80_SPOT, ssd_gib=3000, ssd=LOCAL_SSD_SPOT
        ),
        rel=1e-12,
    )
    # 3.034656 + 5.76232 + 31.41736 + the bundled 3,000 GiB local SSD (3000 × 0.08 / 730)
    assert on_demand == pytest.approx(40.214336 + 240 / 730)
    assert spot < on_demand


def test_n1_with_an_attached_t4_costs_the_n1_machine_plus_one_t4(fake: FakeGcp) -> None:
    quotes = fetch(fake)

    assert price(quotes, "n1-standard-8+T4:1", "us-central1-a", "on-demand") == pytest.approx(
        composed(N1_T4, N1_CORE, N1_RAM, T4), rel=1e-12
    )
    assert price(quotes, "n1-standard-8+T4:1", "us-central1-a", "spot") == pytest.approx(
        composed(N1_T4, N1_CORE_SPOT, N1_RAM_SPOT, T4_SPOT), rel=1e-12
    )


def test_quotes_carry_gcp_api_source_zone_and_observation_time(fake: FakeGcp) -> None:
    quotes = fetch(fake)

    assert quotes
    assert {(q.cloud, q.source, q.observed_at, q.interruption_bucket) for q in quotes} == {
        ("gcp", "gcp-api", NOW, None)
    }
    assert all(q.zone is not None and q.zone.startswith(q.region + "-") for q in quotes)


@pytest.mark.parametrize(
    "decoy",
    [
        # Each decoy is dearer than the real SKU, so matching it would raise the price.
        _sku(
            "Commitment v1: A2 Cpu in Americas for 1 Year",
            "CPU",
            "Commit1Yr",
            AMERICAS,
            (0, 90_000_000),
        ),
        _sku(
            "Nvidia Tesla A100 80GB GPU running in Americas", "GPU", "Commit1Yr", AMERICAS, (9, 0)
        ),
        _sku(
            "Reserved Nvidia Tesla A100 80GB GPU running in Americas",
            "GPU",
            "OnDemand",
            AMERICAS,
            (9, 0),
        ),
        _sku(
            "Nvidia Tesla A100 80GB GPU attached to DWS Defined Duration VMs running in Americas",
            "GPU",
            "OnDemand",
            AMERICAS,
            (9, 0),
        ),
        _sku(
            "A2 Instance Core running in Americas (Calendar mode)",
            "CPU",
            "OnDemand",
            AMERICAS,
            (0, 90_000_000),
        ),
        _sku(
            "Sole Tenancy A2 Instance Core running in Americas",
            "CPU",
            "OnDemand",
            AMERICAS,
            (0, 90_000_000),
        ),
        _sku("A2 Instance Core running in Americas", "CPU", "OnDemand", AMERICAS, (0, 90_000_000))
        | {
            "category": {
                "resourceFamily": "License",
                "resourceGroup": "CPU",
                "usageType": "OnDemand",
            }
        },
        _sku(
            "Nvidia Tesla A100 80GB GPU running in Americas",
            "GPU",
            "OnDemand",
            AMERICAS,
            (9, 0),
            unit="GiBy.mo",
        ),
    ],
    ids=[
        "commitment",
        "commit-usage-type",
        "reserved",
        "dws",
        "calendar-mode",
        "sole-tenancy",
        "not-compute",
        "other-unit",
    ],
)
def test_commitment_reserved_dws_and_other_skus_do_not_change_the_price(
    fake: FakeGcp, decoy: dict[str, Any]
) -> None:
    fake.sku_pages = [[decoy, *americas_skus()]]

    quotes = fetch(fake, instance_types=("a2-ultragpu-8g",))

    assert price(quotes, "a2-ultragpu-8g", "us-central1-a", "on-demand") == pytest.approx(
        composed(A2_ULTRA_8, A2_CORE, A2_RAM, A100_80, ssd_gib=3000, ssd=LOCAL_SSD), rel=1e-12
    )


def test_region_missing_a_spot_gpu_sku_gets_on_demand_quotes_only(fake: FakeGcp) -> None:
    quotes = fetch(fake, instance_types=("a2-ultragpu-8g",), regions=("europe-west4",))

    assert {(q.zone, q.market) for q in quotes} == {("europe-west4-a", "on-demand")}


def test_first_nonzero_tier_is_the_price_when_a_free_tier_leads(fake: FakeGcp) -> None:
    tiered = _sku("Nvidia Tesla T4 GPU running in Americas", "GPU", "OnDemand", AMERICAS, T4)
    paid_tier = tiered["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]
    tiered["pricingInfo"][0]["pricingExpression"]["tieredRates"] = [
        {"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 0}},
        {**paid_tier, "startUsageAmount": 1},
    ]
    fake.sku_pages = [
        [s for s in americas_skus() if "Tesla T4 GPU running" not in s["description"]] + [tiered]
    ]

    quotes = fetch(fake, instance_types=("n1-standard-8+T4:1",), markets=("on-demand",))

    assert price(quotes, "n1-standard-8+T4:1", "us-central1-a", "on-demand") == pytest.approx(
        composed(N1_T4, N1_CORE, N1_RAM, T4), rel=1e-12
    )


# --- availability ---------------------------------------------------------------------------


def test_quotes_only_for_requested_regions_and_zones_offering_machine_and_gpu(
    fake: FakeGcp,
) -> None:
    quotes = fetch(fake, markets=("on-demand",))

    zones = {(q.instance_type, q.zone) for q in quotes}
    assert zones == {
        ("a2-ultragpu-8g", "us-central1-a"),
        ("a2-ultragpu-8g", "us-central1-c"),
        # us-central1-f offers n1-standard-8 but not the T4.
        ("n1-standard-8+T4:1", "us-central1-a"),
        ("n1-standard-8+T4:1", "us-central1-b"),
    }


def test_instance_types_not_requested_are_neither_asked_for_nor_quoted(fake: FakeGcp) -> None:
    quotes = fetch(fake, instance_types=("a2-ultragpu-8g",))

    assert {q.instance_type for q in quotes} == {"a2-ultragpu-8g"}
    (asked,) = fake.requests_to("machineTypes")
    assert asked.query["filter"] == ['(name = "a2-ultragpu-8g")']
    assert fake.requests_to("acceleratorTypes") == []  # no attached GPU in the request


def test_attached_gpu_zone_needs_enough_cards_per_instance(fake: FakeGcp) -> None:
    fake.machine_type_pages = [
        {
            zone: [machine_type("n1-standard-32", zone, guest_cpus=32, memory_mb=120 * 1024)]
            for zone in ("us-central1-a", "us-central1-b")
        }
    ]
    fake.accelerator_type_pages = [
        {
            "us-central1-a": [accelerator_type("nvidia-tesla-t4", "us-central1-a", max_cards=4)],
            "us-central1-b": [accelerator_type("nvidia-tesla-t4", "us-central1-b", max_cards=2)],
        }
    ]

    quotes = fetch(fake, instance_types=("n1-standard-32+T4:4",))

    assert {q.zone for q in quotes} == {"us-central1-a"}
    assert price(quotes, "n1-standard-32+T4:4", "us-central1-a", "on-demand") == pytest.approx(
        composed(N1_32_T4_4, N1_CORE, N1_RAM, T4), rel=1e-12
    )


def test_every_page_of_skus_and_machine_types_is_read(fake: FakeGcp) -> None:
    skus = americas_skus()
    fake.sku_pages = [skus[:4], skus[4:9], skus[9:]]
    zones = machine_zones()
    fake.machine_type_pages = [
        {"us-central1-a": zones["us-central1-a"]},
        {"us-central1-c": zones["us-central1-c"], "us-central1-b": zones["us-central1-b"]},
    ]

    quotes = fetch(fake)

    assert {(q.instance_type, q.zone, q.market) for q in quotes} == {
        (t, z, m)
        for t, z in [
            ("a2-ultragpu-8g", "us-central1-a"),
            ("a2-ultragpu-8g", "us-central1-c"),
            ("n1-standard-8+T4:1", "us-central1-a"),
            ("n1-standard-8+T4:1", "us-central1-b"),
        ]
        for m in ("spot", "on-demand")
    }
    assert [r.query.get("pageToken") for r in fake.requests_to("skus")] == [
        None,
        ["page-1"],
        ["page-2"],
    ]
    assert len(fake.requests_to("machineTypes")) == 2


# --- retries, timeouts, malformed answers -----------------------------------------------------


def test_throttled_request_is_retried_after_the_servers_retry_after(fake: FakeGcp) -> None:
    fake.fail("skus", 429, times=1, headers={"Retry-After": "2"})
    sleeps: list[float] = []

    quotes = fetch(fake, sleeps=sleeps)

    assert price(quotes, "a2-ultragpu-8g", "us-central1-a", "on-demand") == pytest.approx(
        composed(A2_ULTRA_8, A2_CORE, A2_RAM, A100_80, ssd_gib=3000, ssd=LOCAL_SSD), rel=1e-12
    )
    assert sleeps == [2.0]
    assert len(fake.requests_to("skus")) == 2


def test_retry_on_a_later_page_repeats_only_that_page(fake: FakeGcp) -> None:
    skus = americas_skus()
    fake.sku_pages = [skus[:6], skus[6:]]
    fake.fail("skus", 503, times=1, page_token="page-1")

    quotes = fetch(fake, markets=("on-demand",))

    assert price(quotes, "n1-standard-8+T4:1", "us-central1-a", "on-demand") == pytest.approx(
        composed(N1_T4, N1_CORE, N1_RAM, T4), rel=1e-12
    )
    assert [r.query.get("pageToken") for r in fake.requests_to("skus")] == [
        None,
        ["page-1"],
        ["page-1"],
    ]


@pytest.mark.parametrize(
    ("api", "named"),
    [
        ("skus", "Cloud Billing Catalog API"),
        ("machineTypes", "machineTypes.aggregatedList"),
        ("acceleratorTypes", "acceleratorTypes.aggregatedList"),
    ],
)
def test_persistent_503_fails_with_one_line_naming_the_api_and_region(
    fake: FakeGcp, api: str, named: str
) -> None:
    fake.fail(api, 503, times=100)

    with pytest.raises(PriceSourceError) as raised:
        fetch(fake, max_attempts=3)

    message = raised.value.message
    assert named in message and "us-central1" in message and "503" in message
    assert "\n" not in message
    assert len(fake.requests_to(api)) == 3


def test_stalled_server_times_out_quickly_into_price_source_error(fake: FakeGcp) -> None:
    fake.stall("skus", 30.0, times=100)
    started = time.monotonic()

    with pytest.raises(PriceSourceError) as raised:
        fetch(fake, timeout_s=0.3, max_attempts=2)

    assert time.monotonic() - started < 10.0  # far less than the 30 s the server would hang
    assert "timed out" in raised.value.message
    assert "Cloud Billing Catalog API" in raised.value.message
    assert len(fake.requests_to("skus")) == 2


@pytest.mark.parametrize(
    ("api", "body"),
    [
        ("skus", b"{not json"),
        ("skus", b'{"skus": "not a list"}'),
        ("skus", b"<html>Service temporarily unavailable</html>"),
        ("machineTypes", b'{"items": ["zones/us-central1-a"]}'),
    ],
)
def test_malformed_answer_fails_with_price_source_error(
    fake: FakeGcp, api: str, body: bytes
) -> None:
    fake.malformed(api, body)

    with pytest.raises(PriceSourceError) as raised:
        fetch(fake)

    assert "malformed" in raised.value.message
    assert "\n" not in raised.value.message


# --- credentials and permissions --------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_missing_credentials_raise_credentials_missing_with_the_login_hint(
    fake: FakeGcp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-key.json"))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    dead = f"127.0.0.1:{closed_port()}"
    monkeypatch.setenv("GCE_METADATA_HOST", dead)
    monkeypatch.setenv("GCE_METADATA_IP", dead)
    for name in ("GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    request = PriceRequest(instance_types=("a2-ultragpu-8g",), regions=("us-central1",))

    with pytest.raises(CredentialsMissing) as raised:
        gcp.fetch_quotes(
            request,
            now=NOW,
            catalog=CATALOG,
            billing_endpoint=fake.endpoint,
            compute_endpoint=fake.endpoint,
        )

    assert raised.value.message == (
        "GCP credentials not found — run `gcloud auth application-default login` or set "
        "GOOGLE_APPLICATION_CREDENTIALS; without credentials spotroute uses the bundled snapshot"
    )
    assert fake.seen == []


def test_compute_permission_denied_names_the_missing_permission(fake: FakeGcp) -> None:
    fake.fail(
        "machineTypes",
        403,
        times=100,
        message=f"Required 'compute.machineTypes.list' permission for 'projects/{PROJECT}'",
    )

    with pytest.raises(OperationFailed) as raised:
        fetch(fake)

    assert not isinstance(raised.value, PriceSourceError)
    assert "compute.machineTypes.list" in raised.value.message
    assert PROJECT in raised.value.message
    assert len(fake.requests_to("machineTypes")) == 1  # a denial is not retried


def test_accelerator_permission_denied_names_the_missing_permission(fake: FakeGcp) -> None:
    fake.fail("acceleratorTypes", 403, times=100)

    with pytest.raises(OperationFailed) as raised:
        fetch(fake)

    assert "compute.acceleratorTypes.list" in raised.value.message


def test_billing_api_disabled_says_to_enable_it(fake: FakeGcp) -> None:
    fake.fail(
        "skus",
        403,
        message="Cloud Billing API has not been used in project 123 before or it is disabled.",
    )

    with pytest.raises(OperationFailed) as raised:
        fetch(fake)

    assert "cloudbilling.googleapis.com" in raised.value.message
    assert "\n" not in raised.value.message


def test_spot_only_request_returns_spot_quotes_only(fake: FakeGcp) -> None:
    quotes = fetch(fake, markets=("spot",))

    assert quotes
    assert {q.market for q in quotes} == {"spot"}


def test_default_clients_use_application_default_credentials_and_project(
    fake: FakeGcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    import google.auth

    def application_default(**_: Any) -> tuple[AnonymousCredentials, str]:
        return AnonymousCredentials(), "adc-project"

    monkeypatch.setattr(google.auth, "default", application_default)
    request = PriceRequest(instance_types=("n1-standard-8+T4:1",), regions=("us-central1",))

    quotes = gcp.fetch_quotes(
        request, now=NOW, billing_endpoint=fake.endpoint, compute_endpoint=fake.endpoint
    )

    assert {(q.zone, q.market) for q in quotes} == {
        (z, m) for z in ("us-central1-a", "us-central1-b") for m in ("spot", "on-demand")
    }
    assert {r.path for r in fake.requests_to("machineTypes")} == {
        "/compute/v1/projects/adc-project/aggregated/machineTypes"
    }


# --- machines the real SKUs price differently (issue: prices our fakes agreed with) --------

# The bundled catalog's row: its accelerator_type is empty (N1 attachments only), so the price
# source must know that the a3-megagpu GPU is billed by the "H100 80GB Mega" SKU.
A3_MEGA_8 = CATALOG.get("gcp", "a3-megagpu-8g")
assert A3_MEGA_8 is not None
A3_HIGH_1 = CATALOG.get("gcp", "a3-highgpu-1g")
assert A3_HIGH_1 is not None
A3_CORE = (0, 24_000_000)
A3_RAM = (0, 3_000_000)
A3PLUS_CORE = (0, 29_000_000)
A3PLUS_RAM = (0, 3_500_000)
H100_MEGA = (11, 0)
H100 = (10, 0)
H100_SPOT = (2, 500_000_000)
A3_CORE_SPOT = (0, 8_000_000)
A3_RAM_SPOT = (0, 1_000_000)


def a3_skus() -> list[dict[str, Any]]:
    """A3 and A3Plus vCPU/RAM SKUs and the H100 / H100 Mega GPU SKUs, as the Catalog lists them."""
    on_demand = "OnDemand"
    return [
        _sku("A3 Instance Core running in Americas", "CPU", on_demand, AMERICAS, A3_CORE),
        _sku("A3 Instance Ram running in Americas", "RAM", on_demand, AMERICAS, A3_RAM, "GiBy.h"),
        _sku("A3Plus Instance Core running in Americas", "CPU", on_demand, AMERICAS, A3PLUS_CORE),
        _sku(
            "A3Plus Instance Ram running in Americas",
            "RAM",
            on_demand,
            AMERICAS,
            A3PLUS_RAM,
            "GiBy.h",
        ),
        _sku(
            "Nvidia H100 80GB Mega GPU running in Americas", "GPU", on_demand, AMERICAS, H100_MEGA
        ),
        _sku("Nvidia H100 80GB GPU running in Americas", "GPU", on_demand, AMERICAS, H100),
        _sku(
            "Spot Preemptible A3 Instance Core running in Americas",
            "CPU",
            "Preemptible",
            AMERICAS,
            A3_CORE_SPOT,
        ),
        _sku(
            "Spot Preemptible A3 Instance Ram running in Americas",
            "RAM",
            "Preemptible",
            AMERICAS,
            A3_RAM_SPOT,
            "GiBy.h",
        ),
        _sku(
            "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Americas",
            "GPU",
            "Preemptible",
            AMERICAS,
            H100_SPOT,
        ),
    ]


def fetch_a3(fake: FakeGcp, instance_type: str, catalog: list[InstanceType]) -> list[Quote]:
    fake.sku_pages = [a3_skus() + americas_skus()]
    row = catalog[0]
    fake.machine_type_pages = [
        {
            "us-central1-a": [
                machine_type(
                    instance_type,
                    "us-central1-a",
                    guest_cpus=row.vcpus,
                    memory_mb=int(row.memory_gb * 1024),
                )
            ]
        }
    ]
    request = PriceRequest(instance_types=(instance_type,), regions=("us-central1",))
    return gcp.fetch_quotes(request, now=NOW, project=PROJECT, catalog=catalog, **clients(fake))


def test_a3_megagpu_is_priced_by_the_a3plus_skus_not_the_a3_ones(fake: FakeGcp) -> None:
    quotes = fetch_a3(fake, "a3-megagpu-8g", [A3_MEGA_8])

    expected = composed(A3_MEGA_8, A3PLUS_CORE, A3PLUS_RAM, H100_MEGA, ssd_gib=6000, ssd=LOCAL_SSD)
    assert price(quotes, "a3-megagpu-8g", "us-central1-a", "on-demand") == pytest.approx(
        expected, rel=1e-12
    )
    assert expected != pytest.approx(
        composed(A3_MEGA_8, A3_CORE, A3_RAM, H100_MEGA, ssd_gib=6000, ssd=LOCAL_SSD)
    )
    # ... and its GPUs by the H100 Mega SKU, not the plain H100 one the catalog's GPU names.
    assert expected != pytest.approx(
        composed(A3_MEGA_8, A3PLUS_CORE, A3PLUS_RAM, H100, ssd_gib=6000, ssd=LOCAL_SSD)
    )


def test_a3_highgpu_1g_gets_a_spot_quote_but_no_on_demand_one(fake: FakeGcp) -> None:
    quotes = fetch_a3(fake, "a3-highgpu-1g", [A3_HIGH_1])

    assert [q.market for q in quotes] == ["spot"]
    assert quotes[0].price_per_hour == pytest.approx(
        composed(A3_HIGH_1, A3_CORE_SPOT, A3_RAM_SPOT, H100_SPOT, ssd_gib=750, ssd=LOCAL_SSD_SPOT),
        rel=1e-12,
    )


def test_machine_with_bundled_ssd_gets_no_quote_when_the_ssd_sku_is_missing(
    fake: FakeGcp,
) -> None:
    fake.sku_pages = [[s for s in americas_skus() if "Local Storage" not in s["description"]]]

    quotes = fetch(fake)

    assert {q.instance_type for q in quotes} == {"n1-standard-8+T4:1"}
