"""Azure Retail Prices API: paged OData queries per region, rows → Linux VM quotes.

The public API needs no auth. One request per region and chunk of sizes, each page retried
with backoff (honouring Retry-After); rows that are not a Linux pay-as-you-go or spot VM price
(Windows, Cloud Services, Low Priority, future or $0 meters) are left out. Used by
router.prices.azure; see docs/prices-azure.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from router.core.errors import PriceSourceError
from router.core.offers import Quote
from router.prices.request import PriceRequest
from router.prices.retry import retry_call

RETAIL_PRICES_URL = "https://prices.azure.com/api/retail/prices"
SOURCE = "azure-api"

# Long OData filters risk URL-length limits; a few requests per region are cheap.
_SKUS_PER_REQUEST = 20
_BASE_DELAY_S = 0.5
_MAX_DELAY_S = 30.0
_MAX_PAGES = 1000  # a guard against a NextPageLink loop, far above real page counts


class _HttpStatusError(Exception):
    def __init__(self, status_code: int, retry_after_s: float | None) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code
        self.retry_after_s = retry_after_s


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


def retail_quotes(
    region: str,
    request: PriceRequest,
    markets: tuple[str, ...],
    observed_at: datetime,
    retail_url: str,
    http: httpx.Client,
    sleep: Callable[[float], None],
) -> tuple[list[Quote], list[str]]:
    """One region's quotes (USD per instance-hour) and the rows skipped, one line each."""
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
