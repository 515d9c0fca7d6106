"""Azure live prices: retail quotes, filtered by Resource SKU availability, with eviction rates.

Three Azure APIs, each optional beyond the first:
- Retail Prices API (public, no auth): Linux pay-as-you-go and spot prices per region.
- Resource SKUs API (ARM, needs a subscription): drops sizes the subscription cannot launch
  in a region (a "Location" restriction) or cannot launch as spot (LowPriorityCapable False).
- Resource Graph `SpotResources` (ARM): the trailing 28-day spot eviction rate per size and
  region, attached to spot quotes as spotroute's interruption bucket.
Without AZURE_SUBSCRIPTION_ID only the first runs; the skipped checks are listed in
`Fetched.warnings`. See docs/prices-azure.md.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import httpx

from router.core.errors import BadInput, CredentialsMissing, PriceSourceError
from router.core.offers import Quote
from router.prices.request import PriceRequest
from router.prices.retry import retry_call
from router.prices.sources import Fetched

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

RETAIL_PRICES_URL = "https://prices.azure.com/api/retail/prices"
SOURCE = "azure-api"

CREDENTIALS_HINT = (
    "Azure credentials not found — run `az login` or set AZURE_CLIENT_ID/AZURE_TENANT_ID "
    "with workload identity; set AZURE_SUBSCRIPTION_ID"
)

# Azure's published eviction-rate ranges (percent, trailing 28 days) → spotroute's buckets,
# which are AWS Spot Advisor's interruption-frequency buckets (core.offers.INTERRUPTION_BUCKETS).
EVICTION_RATE_BUCKETS: dict[str, str] = {
    "0-5": "<5%",
    "5-10": "5-10%",
    "10-15": "10-15%",
    "15-20": "15-20%",
    "20+": ">20%",
}

EVICTION_RATE_QUERY_TYPE = "microsoft.compute/skuspotevictionrate/location"

# Long OData filters risk URL-length limits; a few requests per region are cheap.
_SKUS_PER_REQUEST = 20
_BASE_DELAY_S = 0.5
_MAX_DELAY_S = 30.0
_MAX_PAGES = 1000  # a guard against a NextPageLink / skip-token loop, far above real page counts
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class ResourceSkuOperations(Protocol):
    """The slice of azure-mgmt-compute's `resource_skus` operations used here."""

    def list(self, *, filter: str | None = None, **kwargs: Any) -> Iterable[Any]: ...


class ComputeClient(Protocol):
    """What the availability check needs of `azure.mgmt.compute.ComputeManagementClient`."""

    @property
    def resource_skus(self) -> ResourceSkuOperations: ...


class ResourceGraphClient(Protocol):
    """What the eviction-rate query needs of `azure.mgmt.resourcegraph.ResourceGraphClient`."""

    def resources(self, query: Any, **kwargs: Any) -> Any: ...


@dataclass(frozen=True)
class _SkuAvailability:
    offered: bool  # launchable in the region (no Location restriction)
    spot_capable: bool
    restricted_zones: tuple[str, ...] = ()
    reason: str = ""


class _HttpStatusError(Exception):
    def __init__(self, status_code: int, retry_after_s: float | None) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code
        self.retry_after_s = retry_after_s


class AzurePrices:
    """Azure as a PriceSource: retail prices, plus eviction rates and availability when it can."""

    def fetch(self, request: PriceRequest, *, now: datetime) -> Fetched:
        return fetch_quotes_with_warnings(request, now=now)


def fetch_quotes(
    request: PriceRequest,
    *,
    now: datetime | None = None,
    retail_url: str = RETAIL_PRICES_URL,
    http: httpx.Client | None = None,
    compute_client: ComputeClient | None = None,
    graph_client: ResourceGraphClient | None = None,
    credential: TokenCredential | None = None,
    subscription_id: str | None = None,
    eviction_rates: Mapping[tuple[str, str], str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Quote]:
    """Azure spot and on-demand quotes (USD per instance-hour, region-level) for the request."""
    return fetch_quotes_with_warnings(
        request,
        now=now,
        retail_url=retail_url,
        http=http,
        compute_client=compute_client,
        graph_client=graph_client,
        credential=credential,
        subscription_id=subscription_id,
        eviction_rates=eviction_rates,
        sleep=sleep,
    ).quotes


def fetch_quotes_with_warnings(
    request: PriceRequest,
    *,
    now: datetime | None = None,
    retail_url: str = RETAIL_PRICES_URL,
    http: httpx.Client | None = None,
    compute_client: ComputeClient | None = None,
    graph_client: ResourceGraphClient | None = None,
    credential: TokenCredential | None = None,
    subscription_id: str | None = None,
    eviction_rates: Mapping[tuple[str, str], str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Fetched:
    """Like `fetch_quotes`, plus one-line warnings naming checks skipped or sizes dropped.

    The availability check and eviction rates need a subscription: `subscription_id`, else
    AZURE_SUBSCRIPTION_ID. Clients not injected are built from `credential`, else
    azure-identity's DefaultAzureCredential. Raises PriceSourceError, CredentialsMissing, BadInput.
    """
    observed_at = now or datetime.now(UTC)
    if observed_at.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    _check_names("region", request.regions)
    _check_names("instance type", request.instance_types)
    markets = tuple(m for m in request.markets if m in ("spot", "on-demand"))
    if not markets or not request.regions or not request.instance_types:
        return Fetched(quotes=[])

    subscription = subscription_id or os.environ.get("AZURE_SUBSCRIPTION_ID") or None
    warnings: list[str] = []
    owned: list[Any] = []  # clients built here, closed here
    try:
        if compute_client is None and subscription:
            credential = credential or _default_credential()
            compute_client = _compute_client(credential, subscription)
            owned.append(compute_client)
        if compute_client is None:
            warnings.append(
                "Azure availability check skipped: AZURE_SUBSCRIPTION_ID is not set, so quotes may "
                "include sizes your subscription cannot launch — set it and run `az login`"
            )

        want_eviction = "spot" in markets and eviction_rates is None
        if want_eviction and graph_client is None and subscription:
            credential = credential or _default_credential()
            graph_client = _graph_client(credential)
            owned.append(graph_client)
        if want_eviction and graph_client is None:
            warnings.append(
                "Azure spot eviction rates skipped: AZURE_SUBSCRIPTION_ID is not set, so Azure "
                "spot quotes carry no interruption bucket — set it and run `az login`"
            )

        if http is None:
            http = httpx.Client(timeout=request.timeout_s)
            owned.append(http)

        region_quotes, rates = _fetch_all(
            request,
            markets=markets,
            observed_at=observed_at,
            retail_url=retail_url,
            http=http,
            compute_client=compute_client,
            graph_client=graph_client if want_eviction else None,
            subscription=subscription,
            sleep=sleep,
            warnings=warnings,
        )
    finally:
        for client in owned:
            client.close()

    if eviction_rates is not None:
        rates = {(r.lower(), s.lower()): b for (r, s), b in eviction_rates.items()}
    quotes = [
        _with_bucket(q, rates.get((q.region.lower(), q.instance_type.lower())))
        if q.market == "spot"
        else q
        for q in region_quotes
    ]
    quotes.sort(key=lambda q: (q.region, q.instance_type, q.market))
    return Fetched(quotes=quotes, warnings=warnings)


def parse_eviction_rates(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """Map Resource Graph eviction-rate rows to {(region, size): bucket}, both keys lower-case.

    Rows carry `location`, `skuName` and `evictionRate` ("0-5" … "20+"); rows with an unknown
    rate or missing fields are left out (the quote then has no bucket rather than a wrong one).
    """
    rates: dict[tuple[str, str], str] = {}
    for row in rows:
        region = row.get("location")
        sku = row.get("skuName")
        rate = row.get("evictionRate")
        if not (isinstance(region, str) and isinstance(sku, str) and isinstance(rate, str)):
            continue
        bucket = EVICTION_RATE_BUCKETS.get(rate.replace("%", "").replace(" ", ""))
        if bucket and region and sku:
            rates[(region.lower(), sku.lower())] = bucket
    return rates


def eviction_rate_query(regions: Sequence[str] = (), instance_types: Sequence[str] = ()) -> str:
    """The Resource Graph (KQL) query for spot eviction rates, narrowed to regions and sizes."""
    _check_names("region", regions)
    _check_names("instance type", instance_types)
    lines = ["SpotResources", f"| where type =~ '{EVICTION_RATE_QUERY_TYPE}'"]
    if regions:
        lines.append(f"| where location in~ ({_kql_list(regions)})")
    if instance_types:
        lines.append(f"| where sku.name in~ ({_kql_list(instance_types)})")
    lines.append(
        "| project skuName = tostring(sku.name), location = tostring(location), "
        "evictionRate = tostring(properties.evictionRate)"
    )
    return "\n".join(lines)


def fetch_eviction_rates(
    credential: TokenCredential | None,
    subscription_ids: Sequence[str],
    client: ResourceGraphClient | None = None,
    *,
    regions: Sequence[str] = (),
    instance_types: Sequence[str] = (),
    timeout_s: float = 10.0,
    max_attempts: int = 5,
) -> dict[tuple[str, str], str]:
    """Spot eviction buckets {(region, size): bucket} from Azure Resource Graph (`SpotResources`).

    `client` defaults to a ResourceGraphClient on `credential`; `timeout_s` is per HTTP call.
    Raises CredentialsMissing or PriceSourceError.
    """
    from azure.core.exceptions import AzureError, ClientAuthenticationError, HttpResponseError
    from azure.mgmt.resourcegraph.models import QueryRequest, QueryRequestOptions

    owned = client is None
    if client is None:
        if credential is None:
            raise CredentialsMissing(CREDENTIALS_HINT)
        client = _graph_client(credential)
    query = eviction_rate_query(regions, instance_types)
    call_kwargs = _azure_call_kwargs(timeout_s, max_attempts)
    rows: list[Mapping[str, Any]] = []
    skip_token: str | None = None
    try:
        for _ in range(_MAX_PAGES):
            options = QueryRequestOptions(result_format="objectArray", skip_token=skip_token)
            body = QueryRequest(
                subscriptions=list(subscription_ids) or None, query=query, options=options
            )
            response = client.resources(body, **call_kwargs)
            data = getattr(response, "data", None)
            if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
                raise PriceSourceError(
                    "Azure Resource Graph API returned eviction rates in an unexpected shape "
                    "(no `data` object array) — retry later; spot quotes work without them"
                )
            rows.extend(data)
            skip_token = getattr(response, "skip_token", None)
            if not skip_token:
                break
    except ClientAuthenticationError as exc:
        raise CredentialsMissing(CREDENTIALS_HINT) from exc
    except HttpResponseError as exc:
        raise PriceSourceError(
            _arm_failure(
                "Azure Resource Graph API",
                "eviction rates",
                exc,
                permission="Microsoft.ResourceGraph/resources/read",
            )
        ) from exc
    except AzureError as exc:
        raise PriceSourceError(
            f"Azure Resource Graph API: eviction rates failed ({type(exc).__name__}) — "
            "check network access to management.azure.com and retry"
        ) from exc
    finally:
        if owned:
            client.close()  # type: ignore[attr-defined]
    return parse_eviction_rates(rows)


def retail_filter(region: str, instance_types: Sequence[str]) -> str:
    """The Retail Prices API OData `$filter` for pay-as-you-go VM prices of sizes in one region."""
    skus = " or ".join(f"armSkuName eq '{sku}'" for sku in instance_types)
    return (
        "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
        f"and armRegionName eq '{region}' and ({skus})"
    )


# Windows in every spelling the Retail Prices API uses in product names: "… Series Windows",
# "… Srs Win", "Virtual Machines … Win".
_WINDOWS = re.compile(r"\bwin(dows)?\b", re.IGNORECASE)


def market_of(row: Mapping[str, Any]) -> str | None:
    """A Retail Prices row's market: "spot", "on-demand", or None (not a Linux VM price).

    None for Windows rows (they include the licence; spotroute runs Linux images), Cloud
    Services rows (the classic PaaS roles share `armSkuName` and the service name with VMs but
    are billed differently — one real payload priced Standard_D2as_v5 in centralindia at $0.148
    through them, against $0.0556 for the VM), and Low Priority rows.
    """
    sku_name = str(row.get("skuName", ""))
    product = str(row.get("productName", ""))
    if _WINDOWS.search(product) or _WINDOWS.search(sku_name):
        return None
    if "cloud services" in product.lower():
        return None
    # Low Priority is the retired Batch/VMSS predecessor of spot; it cannot be bought as spot.
    if sku_name.endswith(" Low Priority"):
        return None
    if sku_name.endswith(" Spot"):
        return "spot"
    return "on-demand"


# ---------------------------------------------------------------------------------------------
# Orchestration


def _fetch_all(
    request: PriceRequest,
    *,
    markets: tuple[str, ...],
    observed_at: datetime,
    retail_url: str,
    http: httpx.Client,
    compute_client: ComputeClient | None,
    graph_client: ResourceGraphClient | None,
    subscription: str | None,
    sleep: Callable[[float], None],
    warnings: list[str],
) -> tuple[list[Quote], dict[tuple[str, str], str]]:
    def region_task(region: str) -> tuple[list[Quote], list[str]]:
        quotes, skipped = _retail_quotes(
            region, request, markets, observed_at, retail_url, http, sleep
        )
        if compute_client is None or not quotes:
            return quotes, skipped
        availability = _region_availability(compute_client, region, request, subscription)
        available, notes = _apply_availability(quotes, availability, region)
        return available, [*skipped, *notes]

    workers = max(1, min(request.max_workers, len(request.regions) + 1))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="azure-prices")
    try:
        eviction: Future[dict[tuple[str, str], str]] | None = None
        if graph_client is not None:
            eviction = pool.submit(
                fetch_eviction_rates,
                None,
                [subscription] if subscription else [],
                graph_client,
                regions=request.regions,
                instance_types=request.instance_types,
                timeout_s=request.timeout_s,
                max_attempts=request.max_attempts,
            )
        per_region = [pool.submit(region_task, region) for region in request.regions]
        quotes: list[Quote] = []
        for future in per_region:
            region_quotes, region_warnings = future.result()
            quotes.extend(region_quotes)
            warnings.extend(region_warnings)
        rates: dict[tuple[str, str], str] = {}
        if eviction is not None:
            try:
                rates = eviction.result()
            except PriceSourceError as exc:
                # Eviction rates only enrich spot quotes; the prices stand without them.
                warnings.append(f"{exc.message} (spot quotes have no interruption bucket)")
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return quotes, rates


def _with_bucket(quote: Quote, bucket: str | None) -> Quote:
    if bucket is None:
        return quote
    return Quote(
        cloud=quote.cloud,
        region=quote.region,
        zone=quote.zone,
        instance_type=quote.instance_type,
        market=quote.market,
        price_per_hour=quote.price_per_hour,
        source=quote.source,
        observed_at=quote.observed_at,
        interruption_bucket=bucket,
    )


# ---------------------------------------------------------------------------------------------
# Retail Prices API


def _retail_quotes(
    region: str,
    request: PriceRequest,
    markets: tuple[str, ...],
    observed_at: datetime,
    retail_url: str,
    http: httpx.Client,
    sleep: Callable[[float], None],
) -> tuple[list[Quote], list[str]]:
    rows: list[Mapping[str, Any]] = []
    for start in range(0, len(request.instance_types), _SKUS_PER_REQUEST):
        chunk = request.instance_types[start : start + _SKUS_PER_REQUEST]
        params = {"$filter": retail_filter(region, chunk)}
        rows.extend(_retail_rows(region, retail_url, params, request, http, sleep))
    return _quotes_from_rows(rows, region, request.instance_types, markets, observed_at)


def _retail_rows(
    region: str,
    url: str,
    params: dict[str, str] | None,
    request: PriceRequest,
    http: httpx.Client,
    sleep: Callable[[float], None],
) -> Iterator[Mapping[str, Any]]:
    page_url: str | None = url
    page = 0
    while page_url:
        page += 1
        if page > _MAX_PAGES:
            raise PriceSourceError(
                f"Azure Retail Prices API: region {region} returned more than {_MAX_PAGES} pages "
                "— narrow the instance types"
            )
        body = _get_page(region, page_url, params, request, http, sleep)
        if body.get("BillingCurrency", "USD") != "USD":
            raise PriceSourceError(
                f"Azure Retail Prices API: region {region} answered in "
                f"{body.get('BillingCurrency')}, not USD — do not set currencyCode on the URL"
            )
        items = body.get("Items")
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise PriceSourceError(
                f"Azure Retail Prices API: region {region} page {page} has no `Items` list — "
                "retry later; if it persists the API changed and spotroute needs an update"
            )
        yield from items
        next_link = body.get("NextPageLink")
        # The next link carries the filter and $skip itself.
        page_url, params = (next_link if isinstance(next_link, str) else None), None


def _get_page(
    region: str,
    url: str,
    params: dict[str, str] | None,
    request: PriceRequest,
    http: httpx.Client,
    sleep: Callable[[float], None],
) -> dict[str, Any]:
    timeout = httpx.Timeout(request.timeout_s)

    def attempt() -> httpx.Response:
        response = http.get(url, params=params, timeout=timeout)
        if response.status_code != 200:
            raise _HttpStatusError(response.status_code, _retry_after_s(response))
        return response

    host = urlsplit(url).netloc
    try:
        response = retry_call(
            attempt,
            is_retryable=_is_retryable,
            max_attempts=request.max_attempts,
            base_delay_s=_BASE_DELAY_S,
            max_delay_s=_MAX_DELAY_S,
            sleep=sleep,
            retry_after=lambda exc: (
                exc.retry_after_s if isinstance(exc, _HttpStatusError) else None
            ),
        )
    except _HttpStatusError as exc:
        if exc.status_code == 429 or exc.status_code >= 500:
            raise PriceSourceError(
                f"Azure Retail Prices API: region {region} failed after {request.max_attempts} "
                f"attempts (HTTP {exc.status_code}) — retry later; cached and snapshot prices "
                "still work"
            ) from exc
        raise PriceSourceError(
            f"Azure Retail Prices API: region {region} was refused (HTTP {exc.status_code}) — "
            "check the region and instance type names"
        ) from exc
    except httpx.TimeoutException as exc:
        raise PriceSourceError(
            f"Azure Retail Prices API: region {region} timed out {request.max_attempts} times "
            f"({request.timeout_s:g} s each) — check network access to {host} or raise the timeout"
        ) from exc
    except httpx.TransportError as exc:
        raise PriceSourceError(
            f"Azure Retail Prices API: region {region} unreachable ({type(exc).__name__}) — "
            f"check network access to {host}"
        ) from exc
    try:
        body = response.json()
    except ValueError as exc:
        raise PriceSourceError(
            f"Azure Retail Prices API: region {region} returned malformed JSON — retry later; "
            "if it persists the API changed and spotroute needs an update"
        ) from exc
    if not isinstance(body, dict):
        raise PriceSourceError(
            f"Azure Retail Prices API: region {region} returned JSON that is not an object — "
            "retry later; if it persists the API changed and spotroute needs an update"
        )
    return body


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, _HttpStatusError):
        return exc.status_code in (408, 429) or exc.status_code >= 500
    return isinstance(exc, httpx.TransportError)  # timeouts, resets, refused connections


def _retry_after_s(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


_REQUIRED_ROW_FIELDS = ("armSkuName", "armRegionName", "skuName", "productName", "unitOfMeasure")


def _quotes_from_rows(
    rows: Sequence[Mapping[str, Any]],
    region: str,
    instance_types: Sequence[str],
    markets: tuple[str, ...],
    observed_at: datetime,
) -> tuple[list[Quote], list[str]]:
    wanted = {sku.lower(): sku for sku in instance_types}
    best: dict[tuple[str, str], tuple[datetime, float]] = {}
    skipped: list[str] = []
    for index, row in enumerate(rows):
        missing = [f for f in _REQUIRED_ROW_FIELDS if not isinstance(row.get(f), str)]
        price = row.get("retailPrice", row.get("unitPrice"))
        if not isinstance(price, int | float) or isinstance(price, bool):
            missing.append("retailPrice")
        if missing:
            # One odd product never fails its region: skip it and say so.
            skipped.append(
                f"Azure Retail Prices API: region {region} row {index + 1} lacks "
                f"{', '.join(missing)} — skipped"
            )
            continue
        if row.get("currencyCode", "USD") != "USD":
            raise PriceSourceError(
                f"Azure Retail Prices API: region {region} row {index + 1} is priced in "
                f"{row.get('currencyCode')}, not USD — do not set currencyCode on the URL"
            )
        sku = wanted.get(str(row["armSkuName"]).lower())
        market = market_of(row)
        if (
            sku is None
            or market not in markets
            or str(row["armRegionName"]).lower() != region.lower()
            or row["unitOfMeasure"] != "1 Hour"
            or row.get("type", "Consumption") != "Consumption"
            or float(price) <= 0.0  # zero rows are placeholders for sizes not sold
        ):
            continue
        effective = _effective_start(row)
        if effective is not None and effective > observed_at:
            continue  # announced future price
        key = (sku, market)
        candidate = (effective or datetime.min.replace(tzinfo=UTC), float(price))
        kept = best.get(key)
        # Newest effective price wins; on a tie the cheaper meter (Azure bills the lower one).
        if kept is None or (candidate[0], -candidate[1]) > (kept[0], -kept[1]):
            best[key] = candidate
    if skipped and len(skipped) == len(rows):
        raise PriceSourceError(
            f"{skipped[0].removesuffix(' — skipped')} (and every other row) — the API changed "
            "and spotroute needs an update"
        )
    quotes = [
        Quote(
            cloud="azure",
            region=region,
            zone=None,
            instance_type=sku,
            market=market,
            price_per_hour=price_per_hour,
            source=SOURCE,
            observed_at=observed_at,
        )
        for (sku, market), (_, price_per_hour) in best.items()
    ]
    return quotes, skipped


def _effective_start(row: Mapping[str, Any]) -> datetime | None:
    value = row.get("effectiveStartDate")
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# ---------------------------------------------------------------------------------------------
# Resource SKUs (availability)


def _region_availability(
    client: ComputeClient, region: str, request: PriceRequest, subscription: str | None
) -> dict[str, _SkuAvailability]:
    from azure.core.exceptions import AzureError, ClientAuthenticationError, HttpResponseError

    api = "Azure Resource SKUs API"
    try:
        skus = list(
            client.resource_skus.list(
                filter=f"location eq '{region}'",
                **_azure_call_kwargs(request.timeout_s, request.max_attempts),
            )
        )
    except ClientAuthenticationError as exc:
        raise CredentialsMissing(CREDENTIALS_HINT) from exc
    except HttpResponseError as exc:
        raise PriceSourceError(
            _arm_failure(
                api,
                f"region {region}",
                exc,
                permission="Microsoft.Compute/skus/read",
                subscription=subscription,
                skip_hint=", or unset AZURE_SUBSCRIPTION_ID to skip the check",
            )
        ) from exc
    except AzureError as exc:
        raise PriceSourceError(
            f"{api}: region {region} failed ({type(exc).__name__}) after {request.max_attempts} "
            "attempts — check network access to management.azure.com, or unset "
            "AZURE_SUBSCRIPTION_ID to skip the availability check"
        ) from exc
    return _sku_availability(skus, region)


def _sku_availability(skus: Iterable[Any], region: str) -> dict[str, _SkuAvailability]:
    # Keyed by lower-cased size name; entries are SDK models or plain JSON dicts.
    result: dict[str, _SkuAvailability] = {}
    for sku in skus:
        if _text(_field(sku, "resource_type", "resourceType")).lower() != "virtualmachines":
            continue
        name = _text(_field(sku, "name", "name"))
        if not name:
            continue
        offered, reason, zones = True, "", list[str]()
        for restriction in _field(sku, "restrictions", "restrictions") or []:
            kind = _text(_field(restriction, "type", "type")).lower()
            info = _field(restriction, "restriction_info", "restrictionInfo")
            locations = _field(info, "locations", "locations") or _field(
                restriction, "values_property", "values"
            )
            if region.lower() not in {_text(loc).lower() for loc in locations or []}:
                continue
            code = _text(_field(restriction, "reason_code", "reasonCode")) or "restricted"
            if kind == "location":
                offered, reason = False, code
            elif kind == "zone":
                zones.extend(_text(z) for z in _field(info, "zones", "zones") or [])
                reason = reason or code
        spot_capable = True
        for capability in _field(sku, "capabilities", "capabilities") or []:
            if _text(_field(capability, "name", "name")) == "LowPriorityCapable":
                spot_capable = _text(_field(capability, "value", "value")).lower() == "true"
        result[name.lower()] = _SkuAvailability(
            offered=offered,
            spot_capable=spot_capable,
            restricted_zones=tuple(sorted(set(zones))),
            reason=reason,
        )
    return result


def _apply_availability(
    quotes: list[Quote], availability: Mapping[str, _SkuAvailability], region: str
) -> tuple[list[Quote], list[str]]:
    kept: list[Quote] = []
    notes: list[str] = []
    for sku in sorted({q.instance_type for q in quotes}):
        state = availability.get(sku.lower())
        if state is None:
            notes.append(f"Azure: {sku} is not offered in {region}; its prices were dropped")
        elif not state.offered:
            notes.append(
                f"Azure: {sku} is restricted in {region} for this subscription ({state.reason}); "
                "its prices were dropped — request access with a quota/region support ticket"
            )
        elif state.restricted_zones:
            # Quotes are region-level; Azure places a non-zonal VM in any allowed zone.
            notes.append(
                f"Azure: {sku} in {region} is restricted in zones "
                f"{', '.join(state.restricted_zones)} ({state.reason}); region-level prices kept"
            )
    for quote in quotes:
        state = availability.get(quote.instance_type.lower())
        if state is None or not state.offered:
            continue
        if quote.market == "spot" and not state.spot_capable:
            continue
        kept.append(quote)
    return kept, notes


def _field(obj: Any, attribute: str, key: str) -> Any:
    # azure-mgmt-compute models expose attributes; JSON dicts (and other SDK versions) use keys.
    if obj is None:
        return None
    if isinstance(obj, Mapping) and key in obj:
        return obj[key]
    value = getattr(obj, attribute, None)
    return None if callable(value) else value


def _text(value: Any) -> str:
    if value is None:
        return ""
    return str(getattr(value, "value", value))


# ---------------------------------------------------------------------------------------------
# Azure SDK plumbing


def _default_credential() -> TokenCredential:
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


def _compute_client(credential: TokenCredential, subscription: str) -> ComputeClient:
    from azure.mgmt.compute import ComputeManagementClient

    client: ComputeClient = ComputeManagementClient(credential, subscription)
    return client


def _graph_client(credential: TokenCredential) -> ResourceGraphClient:
    from azure.mgmt.resourcegraph import ResourceGraphClient as SdkResourceGraphClient

    client: ResourceGraphClient = SdkResourceGraphClient(credential)
    return client


def _azure_call_kwargs(timeout_s: float, max_attempts: int) -> dict[str, Any]:
    # azure-core's RetryPolicy already backs off on 408/429/5xx and honours Retry-After;
    # these per-call options apply the request's limits to injected clients too.
    return {
        "retry_total": max(0, max_attempts - 1),
        "connection_timeout": timeout_s,
        "read_timeout": timeout_s,
    }


def _arm_failure(
    api: str,
    what: str,
    exc: Any,
    *,
    permission: str,
    subscription: str | None = None,
    skip_hint: str = "",
) -> str:
    status = getattr(exc, "status_code", None)
    scope = f" for subscription {subscription}" if subscription else ""
    if status == 403:
        return (
            f"{api}: {what} denied{scope} (HTTP 403) — grant {permission} "
            f"(the Reader role has it){skip_hint}"
        )
    return f"{api}: {what} failed{scope} (HTTP {status}) — retry later{skip_hint}"


def _check_names(kind: str, names: Iterable[str]) -> None:
    for name in names:
        if not _NAME.match(name):
            raise BadInput(
                f"Azure prices: {kind} {name!r} is not an Azure name (letters, digits, '_' and "
                "'-' only) — use the ARM form, e.g. 'eastus' or 'Standard_NC24ads_A100_v4'"
            )


def _kql_list(names: Sequence[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)
