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
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

from router.core.errors import PriceSourceError
from router.core.offers import Quote
from router.prices.azure_arm import (
    ComputeClient,
    ResourceGraphClient,
    apply_availability,
    check_names,
    default_credential,
    fetch_eviction_rates,
    make_compute_client,
    make_graph_client,
    region_availability,
)
from router.prices.azure_retail import RETAIL_PRICES_URL, retail_quotes
from router.prices.request import PriceRequest
from router.prices.source_protocol import Fetched

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential


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
    check_names("region", request.regions)
    check_names("instance type", request.instance_types)
    markets = tuple(m for m in request.markets if m in ("spot", "on-demand"))
    if not markets or not request.regions or not request.instance_types:
        return Fetched(quotes=[])

    subscription = subscription_id or os.environ.get("AZURE_SUBSCRIPTION_ID") or None
    warnings: list[str] = []
    owned: list[Any] = []  # clients built here, closed here
    try:
        if compute_client is None and subscription:
            credential = credential or default_credential()
            compute_client = make_compute_client(credential, subscription)
            owned.append(compute_client)
        if compute_client is None:
            warnings.append(
                "Azure availability check skipped: AZURE_SUBSCRIPTION_ID is not set, so quotes may "
                "include sizes your subscription cannot launch — set it and run `az login`"
            )

        want_eviction = "spot" in markets and eviction_rates is None
        if want_eviction and graph_client is None and subscription:
            credential = credential or default_credential()
            graph_client = make_graph_client(credential)
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
        quotes, skipped = retail_quotes(
            region, request, markets, observed_at, retail_url, http, sleep
        )
        if compute_client is None or not quotes:
            return quotes, skipped
        availability = region_availability(compute_client, region, request, subscription)
        available, notes = apply_availability(quotes, availability, region)
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
