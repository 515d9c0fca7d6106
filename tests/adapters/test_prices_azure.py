"""router.prices.azure against a loopback fake of the Azure Retail Prices, Resource SKUs and
Resource Graph APIs, driven through httpx and the real azure-mgmt-* clients."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from azure.identity import CredentialUnavailableError
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.resourcegraph import ResourceGraphClient

from router.core.errors import BadInput, CredentialsMissing, PriceSourceError
from router.core.offers import Quote
from router.prices.azure import fetch_quotes, fetch_quotes_with_warnings
from router.prices.azure_arm import (
    eviction_rate_query,
    fetch_eviction_rates,
    parse_eviction_rates,
)
from router.prices.request import PriceRequest
from router.prices.source_protocol import Fetched as FetchResult
from tests.adapters.fake_azure import (
    GRAPH_PATH,
    RETAIL_PATH,
    FakeAzure,
    FakeCredential,
    Scripted,
    TlsFiles,
    make_tls,
    vm_price_row,
    vm_sku,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
SUB = "00000000-0000-0000-0000-000000000001"
A100 = "Standard_NC24ads_A100_v4"
A100X2 = "Standard_NC48ads_A100_v4"
T4 = "Standard_NC4as_T4_v3"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("azure-tls"))


@pytest.fixture
def fake(tls: TlsFiles) -> Iterator[FakeAzure]:
    server = FakeAzure(tls).start()
    yield server
    server.close()


@pytest.fixture
def http(tls: TlsFiles) -> Iterator[httpx.Client]:
    with httpx.Client(verify=ssl.create_default_context(cafile=str(tls.ca_path))) as client:
        yield client


@pytest.fixture(autouse=True)
def no_ambient_subscription(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)


class Sleeps(list[float]):
    """Records the back-off waits instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def compute_client(
    fake: FakeAzure, credential: FakeCredential | None = None
) -> ComputeManagementClient:
    return ComputeManagementClient(
        credential=credential or FakeCredential(),
        subscription_id=SUB,
        base_url=fake.url,
        connection_verify=str(fake.tls.ca_path),
    )


def graph_client(fake: FakeAzure) -> ResourceGraphClient:
    return ResourceGraphClient(
        credential=FakeCredential(), base_url=fake.url, connection_verify=str(fake.tls.ca_path)
    )


def request(
    *types: str, regions: tuple[str, ...] = ("eastus",), timeout_s: float = 5.0, attempts: int = 5
) -> PriceRequest:
    return PriceRequest(
        instance_types=types or (A100,),
        regions=regions,
        timeout_s=timeout_s,
        max_attempts=attempts,
    )


def public_fetch(
    fake: FakeAzure, http: httpx.Client, req: PriceRequest, **kwargs: Any
) -> FetchResult:
    """Retail prices only, as with no subscription configured."""
    return fetch_quotes_with_warnings(
        req,
        now=NOW,
        retail_url=fake.url + RETAIL_PATH,
        http=http,
        **kwargs,
    )


def prices(result: FetchResult | list[Quote]) -> dict[tuple[str, str, str], float]:
    quotes = result.quotes if isinstance(result, FetchResult) else result
    return {(q.region, q.instance_type, q.market): q.price_per_hour for q in quotes}


# ---------------------------------------------------------------------------------------------
# Retail Prices API


def test_only_linux_spot_and_pay_as_you_go_rows_become_quotes(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_rows = [
        vm_price_row(A100, "eastus", 3.673),
        vm_price_row(A100, "eastus", 0.7346, spot=True),
        vm_price_row(A100, "eastus", 0.9183, low_priority=True),
        vm_price_row(A100, "eastus", 4.409, windows=True),
        vm_price_row(A100, "eastus", 1.4706, spot=True, windows=True),
    ]

    quotes = fetch_quotes(request(), now=NOW, retail_url=fake.url + RETAIL_PATH, http=http)

    assert prices(quotes) == {
        ("eastus", A100, "on-demand"): 3.673,
        ("eastus", A100, "spot"): 0.7346,
    }
    assert {(q.cloud, q.zone, q.source, q.observed_at) for q in quotes} == {
        ("azure", None, "azure-api", NOW)
    }


def test_filter_asks_only_for_requested_sizes_in_each_region(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_rows = [
        vm_price_row(A100, "eastus", 3.673),
        vm_price_row(T4, "westeurope", 0.6),
        vm_price_row(A100X2, "eastus", 7.346),  # not asked for
    ]

    result = public_fetch(fake, http, request(A100, T4, regions=("eastus", "westeurope")))

    filters = sorted(fake.retail_filters())
    assert filters == [
        "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and armRegionName eq "
        f"'{region}' and (armSkuName eq '{A100}' or armSkuName eq '{T4}')"
        for region in ("eastus", "westeurope")
    ]
    assert prices(result) == {
        ("eastus", A100, "on-demand"): 3.673,
        ("westeurope", T4, "on-demand"): 0.6,
    }


def test_prices_follow_next_page_link_through_three_pages(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_page_size = 2
    fake.retail_rows = [
        vm_price_row(sku, "eastus", price, spot=spot)
        for sku, price in ((A100, 3.6), (A100X2, 7.3), (T4, 0.5))
        for spot in (False, True)
    ]

    result = public_fetch(fake, http, request(A100, A100X2, T4))

    assert len(fake.requests_to(RETAIL_PATH)) == 3
    assert [r.query.get("$skip") for r in fake.requests_to(RETAIL_PATH)] == [None, ["2"], ["4"]]
    assert len(result.quotes) == 6


def test_throttled_request_waits_as_retry_after_asks_then_succeeds(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_rows = [vm_price_row(A100, "eastus", 3.673)]
    fake.retail_script = [Scripted(status=429, headers={"Retry-After": "7"}, body=b"{}")]
    sleeps = Sleeps()

    result = public_fetch(fake, http, request(), sleep=sleeps)

    assert sleeps == [7.0]
    assert prices(result) == {("eastus", A100, "on-demand"): 3.673}


def test_persistent_server_error_fails_naming_api_and_region(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_always = Scripted(status=500, body=b'{"error": "boom"}')
    sleeps = Sleeps()

    with pytest.raises(PriceSourceError) as failure:
        public_fetch(fake, http, request(regions=("westus2",), attempts=3), sleep=sleeps)

    assert "Azure Retail Prices API" in failure.value.message
    assert "westus2" in failure.value.message and "HTTP 500" in failure.value.message
    assert "\n" not in failure.value.message
    assert len(fake.requests_to(RETAIL_PATH)) == 3
    assert len(sleeps) == 2


def test_stalled_server_times_out_into_price_source_error(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_always = Scripted(stall_s=30.0)

    with pytest.raises(PriceSourceError) as failure:
        public_fetch(fake, http, request(timeout_s=0.2, attempts=2), sleep=Sleeps())

    assert "timed out" in failure.value.message and "eastus" in failure.value.message


def test_malformed_json_is_a_price_source_error(fake: FakeAzure, http: httpx.Client) -> None:
    fake.retail_script = [Scripted(status=200, body=b'{"Items": [ {"armSkuName": ')]

    with pytest.raises(PriceSourceError, match="malformed JSON"):
        public_fetch(fake, http, request())


def test_region_whose_every_row_lacks_a_price_is_a_price_source_error(
    fake: FakeAzure, http: httpx.Client
) -> None:
    row = vm_price_row(A100, "eastus", 3.673)
    del row["retailPrice"], row["unitPrice"]
    fake.retail_rows = [row]

    with pytest.raises(PriceSourceError, match=r"lacks retailPrice.*API changed"):
        public_fetch(fake, http, request())


def test_one_odd_row_is_skipped_with_a_warning_and_the_region_keeps_its_prices(
    fake: FakeAzure, http: httpx.Client
) -> None:
    odd = vm_price_row(A100, "eastus", 3.9)
    del odd["unitOfMeasure"]
    fake.retail_rows = [vm_price_row(A100, "eastus", 3.673), odd]

    result = public_fetch(fake, http, request())

    assert prices(result.quotes) == {("eastus", A100, "on-demand"): 3.673}
    assert any("row 2 lacks unitOfMeasure — skipped" in w for w in result.warnings)


def test_cloud_services_rows_never_win_over_the_vm_price(
    fake: FakeAzure, http: httpx.Client
) -> None:
    # The shape of a real centralindia payload: the Cloud Services product shares armSkuName
    # with the VM and has a newer effective date; the VM row is the price a VM is billed.
    sku = "Standard_D2as_v5"
    fake.retail_rows = [
        vm_price_row(sku, "centralindia", 0.0556, series="Dasv5", effective="2022-01-01T00:00:00Z"),
        vm_price_row(
            sku,
            "centralindia",
            0.148,
            effective="2024-06-01T00:00:00Z",
            productName="Cloud Services Dasv5 Series",
        ),
    ]

    result = public_fetch(fake, http, request(sku, regions=("centralindia",)))

    assert prices(result.quotes) == {("centralindia", sku, "on-demand"): 0.0556}


@pytest.mark.parametrize(
    "product", ["Virtual Machines NCads A100 v4 Srs Win", "Virtual Machines NCads A100 v4 Win"]
)
def test_windows_in_any_spelling_is_not_a_linux_price(
    fake: FakeAzure, http: httpx.Client, product: str
) -> None:
    fake.retail_rows = [
        vm_price_row(A100, "eastus", 3.673),
        vm_price_row(A100, "eastus", 4.409, productName=product, effective="2024-06-01T00:00:00Z"),
    ]

    assert prices(public_fetch(fake, http, request()).quotes) == {
        ("eastus", A100, "on-demand"): 3.673
    }


def test_announced_future_price_is_ignored_until_it_takes_effect(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_rows = [
        vm_price_row(A100, "eastus", 3.673, effective="2024-01-01T00:00:00Z"),
        vm_price_row(A100, "eastus", 4.0, effective="2025-07-01T00:00:00Z"),
    ]

    assert prices(public_fetch(fake, http, request())) == {("eastus", A100, "on-demand"): 3.673}


def test_region_name_that_could_break_the_filter_is_bad_input(
    fake: FakeAzure, http: httpx.Client
) -> None:
    with pytest.raises(BadInput, match='region "eastus\' or 1 eq 1"'):
        public_fetch(fake, http, request(regions=("eastus' or 1 eq 1",)))
    assert fake.received == []


# ---------------------------------------------------------------------------------------------
# Availability (Resource SKUs) and credentials


def test_location_restricted_size_is_dropped_in_that_region_only(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_rows = [
        vm_price_row(A100, region, 3.673, spot=spot)
        for region in ("eastus", "westus2")
        for spot in (False, True)
    ]
    fake.skus = {
        "eastus": [vm_sku(A100, "eastus", location_restricted=True)],
        "westus2": [vm_sku(A100, "westus2")],
    }

    result = fetch_quotes_with_warnings(
        request(regions=("eastus", "westus2")),
        now=NOW,
        retail_url=fake.url + RETAIL_PATH,
        http=http,
        compute_client=compute_client(fake),
        subscription_id=SUB,
        eviction_rates={},
    )

    assert {(q.region, q.market) for q in result.quotes} == {
        ("westus2", "on-demand"),
        ("westus2", "spot"),
    }
    assert any(
        "restricted in eastus" in w and "NotAvailableForSubscription" in w for w in result.warnings
    )
    sku_requests = fake.requests_to(f"/subscriptions/{SUB}/providers/Microsoft.Compute/skus")
    assert sorted(r.query["$filter"][0] for r in sku_requests) == [
        "location eq 'eastus'",
        "location eq 'westus2'",
    ]


def test_zone_restriction_keeps_region_level_quote_and_says_so(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_rows = [vm_price_row(A100, "eastus", 3.673)]
    fake.skus = {"eastus": [vm_sku(A100, "eastus", restricted_zones=("1", "3"))]}

    result = fetch_quotes_with_warnings(
        request(),
        now=NOW,
        retail_url=fake.url + RETAIL_PATH,
        http=http,
        compute_client=compute_client(fake),
        eviction_rates={},
    )

    assert prices(result) == {("eastus", A100, "on-demand"): 3.673}
    assert result.warnings == [
        f"Azure: {A100} in eastus is restricted in zones 1, 3 (NotAvailableForSubscription); "
        "region-level prices kept"
    ]


def test_size_not_spot_capable_keeps_only_its_pay_as_you_go_quote(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_rows = [
        vm_price_row(A100, "eastus", 3.673),
        vm_price_row(A100, "eastus", 0.7346, spot=True),
    ]
    fake.skus = {"eastus": [vm_sku(A100, "eastus", spot_capable=False)]}

    quotes = fetch_quotes(
        request(),
        now=NOW,
        retail_url=fake.url + RETAIL_PATH,
        http=http,
        compute_client=compute_client(fake),
        eviction_rates={},
    )

    assert prices(quotes) == {("eastus", A100, "on-demand"): 3.673}


def test_without_subscription_public_prices_come_back_with_skipped_checks_listed(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_rows = [vm_price_row(A100, "eastus", 0.7346, spot=True)]

    result = public_fetch(fake, http, request())

    assert prices(result) == {("eastus", A100, "spot"): 0.7346}
    assert result.quotes[0].interruption_bucket is None
    assert len(result.warnings) == 2
    assert all("AZURE_SUBSCRIPTION_ID is not set" in w for w in result.warnings)
    assert fake.requests_to("/subscriptions") == [] and fake.requests_to(GRAPH_PATH) == []


def test_unavailable_azure_credentials_raise_credentials_missing(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_rows = [vm_price_row(A100, "eastus", 3.673)]
    no_login = FakeCredential(CredentialUnavailableError("EnvironmentCredential: not configured"))

    with pytest.raises(CredentialsMissing) as failure:
        fetch_quotes(
            request(),
            now=NOW,
            retail_url=fake.url + RETAIL_PATH,
            http=http,
            compute_client=compute_client(fake, no_login),
            eviction_rates={},
        )

    assert "az login" in failure.value.message and "AZURE_SUBSCRIPTION_ID" in failure.value.message
    assert fake.requests_to("/subscriptions") == []  # no request went out without a token


def test_forbidden_sku_listing_names_the_missing_permission(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_rows = [vm_price_row(A100, "eastus", 3.673)]
    fake.skus_status = 403

    with pytest.raises(PriceSourceError) as failure:
        fetch_quotes(
            request(),
            now=NOW,
            retail_url=fake.url + RETAIL_PATH,
            http=http,
            compute_client=compute_client(fake),
            subscription_id=SUB,
            eviction_rates={},
        )

    assert "Microsoft.Compute/skus/read" in failure.value.message
    assert SUB in failure.value.message and "eastus" in failure.value.message


# ---------------------------------------------------------------------------------------------
# Eviction rates (Resource Graph)


def test_eviction_rate_ranges_map_to_interruption_buckets() -> None:
    rows = [
        {"skuName": "Standard_NC24ads_A100_v4", "location": "eastus", "evictionRate": "0-5"},
        {"skuName": "standard_nc24ads_a100_v4", "location": "westus2", "evictionRate": "5-10"},
        {"skuName": "Standard_NC4as_T4_v3", "location": "eastus", "evictionRate": "10-15"},
        {"skuName": "Standard_NC4as_T4_v3", "location": "westus2", "evictionRate": "15-20"},
        {"skuName": "Standard_NC48ads_A100_v4", "location": "EastUS", "evictionRate": "20+"},
        {"skuName": "Standard_NC48ads_A100_v4", "location": "westus2", "evictionRate": "unknown"},
        {"skuName": "Standard_NC48ads_A100_v4", "location": "northeurope"},
    ]

    assert parse_eviction_rates(rows) == {
        ("eastus", "standard_nc24ads_a100_v4"): "<5%",
        ("westus2", "standard_nc24ads_a100_v4"): "5-10%",
        ("eastus", "standard_nc4as_t4_v3"): "10-15%",
        ("westus2", "standard_nc4as_t4_v3"): "15-20%",
        ("eastus", "standard_nc48ads_a100_v4"): ">20%",
    }


def test_spot_quotes_carry_the_eviction_bucket_from_resource_graph(
    fake: FakeAzure, http: httpx.Client
) -> None:
    fake.retail_rows = [
        vm_price_row(A100, "eastus", 3.673),
        vm_price_row(A100, "eastus", 0.7346, spot=True),
        vm_price_row(T4, "eastus", 0.1578, spot=True),
    ]
    fake.skus = {"eastus": [vm_sku(A100, "eastus"), vm_sku(T4, "eastus")]}
    fake.graph_page_size = 1  # two pages, joined through $skipToken
    fake.graph_rows = [
        {"skuName": A100, "location": "eastus", "evictionRate": "15-20"},
        {"skuName": T4, "location": "eastus", "evictionRate": "0-5"},
    ]

    result = fetch_quotes_with_warnings(
        request(A100, T4),
        now=NOW,
        retail_url=fake.url + RETAIL_PATH,
        http=http,
        compute_client=compute_client(fake),
        graph_client=graph_client(fake),
        subscription_id=SUB,
    )

    buckets = {(q.instance_type, q.market): q.interruption_bucket for q in result.quotes}
    assert buckets == {(A100, "on-demand"): None, (A100, "spot"): "15-20%", (T4, "spot"): "<5%"}
    assert result.warnings == []
    graph_requests = fake.requests_to(GRAPH_PATH)
    assert len(graph_requests) == 2
    assert f"'{A100}', '{T4}'" in graph_requests[0].body.decode()
    assert SUB in graph_requests[0].body.decode()


def test_eviction_query_is_narrowed_to_requested_regions_and_sizes(fake: FakeAzure) -> None:
    fake.graph_rows = [{"skuName": A100, "location": "eastus", "evictionRate": "5-10"}]

    rates = fetch_eviction_rates(
        None, [SUB], graph_client(fake), regions=("eastus",), instance_types=(A100,)
    )

    assert rates == {("eastus", A100.lower()): "5-10%"}
    assert eviction_rate_query(("eastus",), (A100,)) == (
        "SpotResources\n"
        "| where type =~ 'microsoft.compute/skuspotevictionrate/location'\n"
        "| where location in~ ('eastus')\n"
        f"| where sku.name in~ ('{A100}')\n"
        "| project skuName = tostring(sku.name), location = tostring(location), "
        "evictionRate = tostring(properties.evictionRate)"
    )
