"""Live AWS prices: spot and on-demand quotes per availability zone, with Spot Advisor buckets.

Imported only by `route prices refresh`: it pulls in boto3. See docs/prices-aws.md for the
APIs, IAM actions, and retry behaviour.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

import boto3
import httpx
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    CredentialRetrievalError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
    SSOError,
    TokenRetrievalError,
)

from router.core.errors import BadInput, CredentialsMissing, OperationFailed, PriceSourceError
from router.core.offers import INTERRUPTION_BUCKETS, Quote
from router.prices.aws_session import client_config, default_session, require_credentials
from router.prices.request import PriceRequest, observation_time
from router.prices.source_protocol import Fetched

SOURCE = "aws-api"
SPOT_ADVISOR_URL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
# The Price List query API is served from a few regions only; us-east-1 has every region's prices.
PRICING_REGION = "us-east-1"
SPOT_PRODUCT_DESCRIPTIONS: tuple[str, ...] = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
# Plain Linux, shared tenancy, no bundled software, a running (not reserved-idle) instance,
# bought on demand: `marketoption` also has "CapacityBlock" rows (EC2 Capacity Blocks for ML),
# which are not an on-demand price even where the Price List shows them at $0.00.
ON_DEMAND_FILTERS: tuple[tuple[str, str], ...] = (
    ("operatingSystem", "Linux"),
    ("marketoption", "OnDemand"),
    ("tenancy", "Shared"),
    ("preInstalledSw", "NA"),
    ("capacitystatus", "Used"),
    ("licenseModel", "No License required"),
)

DESCRIBE_OFFERINGS = "ec2:DescribeInstanceTypeOfferings"
DESCRIBE_SPOT_HISTORY = "ec2:DescribeSpotPriceHistory"
GET_PRODUCTS = "pricing:GetProducts"

NO_CREDENTIALS = (
    "AWS credentials not found — run `aws configure sso` / set AWS_PROFILE, "
    "or use the bundled snapshot (omit `route prices refresh`)"
)

_THROTTLING_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestThrottled",
        "RequestThrottledException",
        "EC2ThrottledException",
        "SlowDown",
    }
)
_DENIED_CODES = frozenset(
    {"AuthFailure", "UnauthorizedOperation", "AccessDenied", "AccessDeniedException"}
)
_REJECTED_CREDENTIAL_CODES = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
    }
)

# Credentials that exist but cannot be loaded now (expired SSO session, failing
# credential_process): the fix is the same as for missing ones.
_CREDENTIAL_LOAD_ERRORS = (SSOError, TokenRetrievalError, CredentialRetrievalError)
CREDENTIALS_UNLOADABLE = (
    "AWS credentials could not be loaded ({kind}) — run `aws sso login` / check AWS_PROFILE, "
    "or use the bundled snapshot (omit `route prices refresh`)"
)

ZoneType = tuple[str, str]  # (availability zone, instance type)


class AwsPrices:
    """AWS prices (PriceSource): spot price history, the Price List API, the Spot Advisor."""

    def fetch(self, request: PriceRequest, *, now: datetime) -> Fetched:
        warnings: list[str] = []
        return Fetched(fetch_quotes(request, now=now, warnings=warnings), warnings)


def fetch_quotes(
    request: PriceRequest,
    *,
    now: datetime | None = None,
    session: boto3.Session | None = None,
    endpoint_url: str | None = None,
    interruption_buckets: Mapping[tuple[str, str], str] | None = None,
    fetch_advisor: bool = True,
    advisor_url: str = SPOT_ADVISOR_URL,
    warnings: list[str] | None = None,
) -> list[Quote]:
    """Spot and on-demand quotes (USD per instance-hour) for every offered AZ, sorted.

    Buckets come from `interruption_buckets` ((region, instance_type) → label) when given,
    else from the Spot Instance Advisor at `advisor_url` when `fetch_advisor`; an advisor
    failure only leaves `interruption_bucket` None. A Price List product that does not have
    the documented shape is skipped with one line in `warnings` (when given), so one odd
    product never fails its region; a region where every product is malformed still fails.
    """
    skipped: list[str] = warnings if warnings is not None else []
    if not request.regions:
        raise BadInput("AWS price request has no regions — pass at least one AWS region")
    observed_at = observation_time(now)
    want_spot = "spot" in request.markets
    want_on_demand = "on-demand" in request.markets
    if not request.instance_types or not (want_spot or want_on_demand):
        return []

    if session is None:
        session = default_session(", or use the bundled snapshot (omit `route prices refresh`)")
    require_credentials(session, missing=NO_CREDENTIALS, unloadable=CREDENTIALS_UNLOADABLE)
    config = client_config(
        request.timeout_s, request.max_attempts, pool=max(10, request.max_workers)
    )
    # Clients are thread-safe but creating them from one Session is not: build them here.
    ec2_clients = {
        region: session.client("ec2", region_name=region, config=config, endpoint_url=endpoint_url)
        for region in request.regions
    }
    pricing_client = (
        session.client(
            "pricing", region_name=PRICING_REGION, config=config, endpoint_url=endpoint_url
        )
        if want_on_demand
        else None
    )

    wants_advisor = want_spot and interruption_buckets is None and fetch_advisor
    # One extra worker for the advisor download, so it never holds up a region.
    workers = max(1, request.max_workers) + (1 if wants_advisor else 0)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        advisor: Future[dict[tuple[str, str], str]] | None = None
        if wants_advisor:
            advisor = pool.submit(_advisor_or_empty, advisor_url, request.timeout_s)
        futures = [
            pool.submit(
                _region_quotes,
                region,
                ec2_clients[region],
                pricing_client,
                request,
                observed_at,
                want_spot=want_spot,
                skipped=skipped,
            )
            for region in request.regions
        ]
        try:
            # In request order, so the error a user sees does not depend on thread timing.
            quotes = [quote for future in futures for quote in future.result()]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        buckets: Mapping[tuple[str, str], str] = (
            interruption_buckets
            if interruption_buckets is not None
            else (advisor.result() if advisor is not None else {})
        )
    return sorted(_with_buckets(quotes, buckets), key=_quote_order)


def parse_spot_advisor(doc: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """Map (region, instance_type) → interruption bucket label from Spot Advisor data (Linux)."""
    try:
        labels = _range_labels(doc.get("ranges"))
        regions = doc["spot_advisor"]
        if not isinstance(regions, Mapping):
            raise ValueError("'spot_advisor' is not an object")
        buckets: dict[tuple[str, str], str] = {}
        for region, systems in regions.items():
            linux = systems.get("Linux", {}) if isinstance(systems, Mapping) else None
            if not isinstance(linux, Mapping):
                raise ValueError(f"spot_advisor.{region}.Linux is not an object")
            for instance_type, stats in linux.items():
                index = stats["r"]
                if not isinstance(index, int) or index not in labels:
                    raise ValueError(f"spot_advisor.{region}.Linux.{instance_type}.r is {index!r}")
                buckets[(str(region), str(instance_type))] = labels[index]
        return buckets
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise PriceSourceError(
            f"Spot Instance Advisor data is malformed ({_describe(exc)}) — "
            "retry later; interruption buckets stay unknown meanwhile"
        ) from exc


def fetch_spot_advisor(
    url: str = SPOT_ADVISOR_URL,
    *,
    timeout_s: float = 10.0,
    client: httpx.Client | None = None,
) -> dict[tuple[str, str], str]:
    """Download the public Spot Instance Advisor data and parse it; `timeout_s` per phase."""
    own_client = client is None
    http = client if client is not None else httpx.Client(timeout=timeout_s)
    try:
        response = http.get(url, timeout=timeout_s)
        response.raise_for_status()
        doc = response.json()
    except httpx.TimeoutException as exc:
        raise PriceSourceError(
            f"Spot Instance Advisor data at {url} timed out after {timeout_s:g} s — "
            "check network access or retry later"
        ) from exc
    except httpx.HTTPStatusError as exc:
        raise PriceSourceError(
            f"Spot Instance Advisor data at {url} answered HTTP "
            f"{exc.response.status_code} — retry later"
        ) from exc
    except httpx.HTTPError as exc:
        raise PriceSourceError(
            f"Spot Instance Advisor data at {url} could not be fetched "
            f"({type(exc).__name__}) — check network access"
        ) from exc
    except ValueError as exc:
        raise PriceSourceError(
            f"Spot Instance Advisor data at {url} is not JSON — retry later"
        ) from exc
    finally:
        if own_client:
            http.close()
    if not isinstance(doc, Mapping):
        raise PriceSourceError(
            f"Spot Instance Advisor data at {url} is not a JSON object — retry later"
        )
    return parse_spot_advisor(doc)


def parse_price_list_item(item: str | Mapping[str, Any]) -> tuple[str, float] | None:
    """(instance type, on-demand USD per hour) from one Price List product, or None if unpriced.

    Raises ValueError when the product JSON does not have the documented shape.
    """
    try:
        product_doc = json.loads(item) if isinstance(item, str) else item
        attributes = product_doc["product"]["attributes"]
        instance_type = attributes["instanceType"]
        # Local Zones and Wavelength zones carry their own, higher prices.
        if attributes.get("locationType", "AWS Region") != "AWS Region":
            return None
        # The server-side filter asks for OnDemand; a Capacity Block row that slips through
        # (older filters, cached answers) must never pass for an on-demand price.
        if attributes.get("marketoption", "OnDemand") != "OnDemand":
            return None
        prices: list[float] = []
        for term in product_doc.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term["priceDimensions"].values():
                if dimension.get("unit", "Hrs") != "Hrs":
                    continue
                price = float(dimension["pricePerUnit"]["USD"])
                if price > 0:
                    prices.append(price)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"unexpected PriceList product ({_describe(exc)})") from exc
    if not prices:
        return None
    return str(instance_type), min(prices)


def latest_spot_prices(history: Iterable[Mapping[str, Any]]) -> dict[ZoneType, float]:
    """Latest spot price (USD per hour) per (zone, instance type) across product descriptions."""
    latest: dict[ZoneType, tuple[datetime, float]] = {}
    for entry in history:
        try:
            key = (str(entry["AvailabilityZone"]), str(entry["InstanceType"]))
            stamp = entry["Timestamp"]
            price = float(entry["SpotPrice"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"unexpected SpotPriceHistory entry ({_describe(exc)})") from exc
        if not isinstance(stamp, datetime):
            raise ValueError(f"unexpected SpotPriceHistory Timestamp {stamp!r}")
        seen = latest.get(key)
        # Newest wins; on a tie the cheaper one, so the result never depends on page order.
        if seen is None or (stamp, -price) > (seen[0], -seen[1]):
            latest[key] = (stamp, price)
    return {key: price for key, (_, price) in latest.items()}


def zones_by_instance_type(offerings: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Availability zones offering each instance type, from InstanceTypeOfferings entries."""
    zones: dict[str, set[str]] = {}
    for offering in offerings:
        try:
            zones.setdefault(str(offering["InstanceType"]), set()).add(str(offering["Location"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"unexpected InstanceTypeOfferings entry ({_describe(exc)})") from exc
    return zones


def _region_quotes(
    region: str,
    ec2: Any,
    pricing: Any,
    request: PriceRequest,
    observed_at: datetime,
    *,
    want_spot: bool,
    skipped: list[str],
) -> list[Quote]:
    with _translated_errors(DESCRIBE_OFFERINGS, region, request):
        offerings = _paginate(
            ec2,
            "describe_instance_type_offerings",
            "InstanceTypeOfferings",
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": list(request.instance_types)}],
        )
        zones = zones_by_instance_type(offerings)
    # Asking the price APIs only about offered types avoids InvalidParameterValue for types
    # a region has never had.
    offered = tuple(t for t in request.instance_types if zones.get(t))
    if not offered:
        return []

    quotes: list[Quote] = []
    if want_spot:
        with _translated_errors(DESCRIBE_SPOT_HISTORY, region, request):
            history = _paginate(
                ec2,
                "describe_spot_price_history",
                "SpotPriceHistory",
                StartTime=observed_at,
                InstanceTypes=list(offered),
                ProductDescriptions=list(SPOT_PRODUCT_DESCRIPTIONS),
            )
            spot = latest_spot_prices(history)
        quotes.extend(
            _quote(region, zone, instance_type, "spot", price, observed_at)
            for (zone, instance_type), price in spot.items()
            if zone in zones.get(instance_type, set())
        )
    if pricing is not None:
        for instance_type in offered:
            with _translated_errors(GET_PRODUCTS, region, request):
                price = _on_demand_price(pricing, region, instance_type, skipped)
            if price is None:
                continue
            quotes.extend(
                _quote(region, zone, instance_type, "on-demand", price, observed_at)
                for zone in sorted(zones[instance_type])
            )
    return quotes


def _on_demand_price(
    pricing: Any, region: str, instance_type: str, skipped: list[str]
) -> float | None:
    filters = [
        {"Type": "TERM_MATCH", "Field": field, "Value": value}
        for field, value in (
            ("instanceType", instance_type),
            ("regionCode", region),
            *ON_DEMAND_FILTERS,
        )
    ]
    items = _paginate(
        pricing,
        "get_products",
        "PriceList",
        ServiceCode="AmazonEC2",
        Filters=filters,
        FormatVersion="aws_v1",
    )
    prices: list[float] = []
    odd: list[str] = []
    for item in items:
        try:
            parsed = parse_price_list_item(item)
        except ValueError as exc:
            odd.append(str(exc))
            continue
        if parsed is not None and parsed[0] == instance_type:
            prices.append(parsed[1])
    if odd and len(odd) == len(items):
        raise ValueError(odd[0])  # nothing usable: the API changed, not one odd product
    skipped.extend(
        f"AWS Price List: {region} {instance_type}: skipped a product ({reason})" for reason in odd
    )
    # Several SKUs can survive the filters (e.g. a re-published product); the lowest is
    # what a new instance is billed.
    return min(prices) if prices else None


def _paginate(client: Any, operation: str, result_key: str, **params: Any) -> list[Any]:
    items: list[Any] = []
    for page in client.get_paginator(operation).paginate(**params):
        if not isinstance(page, Mapping):
            raise ValueError(f"page is {type(page).__name__}, not an object")
        items.extend(page.get(result_key, []))
    return items


def _quote(
    region: str, zone: str, instance_type: str, market: str, price: float, observed_at: datetime
) -> Quote:
    return Quote(
        cloud="aws",
        region=region,
        zone=zone,
        instance_type=instance_type,
        market=market,
        price_per_hour=price,
        source=SOURCE,
        observed_at=observed_at,
    )


def _with_buckets(
    quotes: Iterable[Quote], buckets: Mapping[tuple[str, str], str]
) -> Iterator[Quote]:
    for quote in quotes:
        bucket = buckets.get((quote.region, quote.instance_type))
        if quote.market == "spot" and bucket is not None:
            yield replace(quote, interruption_bucket=bucket)
        else:
            yield quote


def _quote_order(quote: Quote) -> tuple[str, str, str, str]:
    return (quote.region, quote.zone or "", quote.instance_type, quote.market)


def _advisor_or_empty(url: str, timeout_s: float) -> dict[tuple[str, str], str]:
    # The advisor only enriches quotes: losing it must never lose the prices.
    try:
        return fetch_spot_advisor(url, timeout_s=timeout_s)
    except PriceSourceError:
        return {}


def _range_labels(ranges: object) -> dict[int, str]:
    """Bucket label per advisor index "r"; the doc's own labels, normalised to ours."""
    defaults = dict(enumerate(INTERRUPTION_BUCKETS))
    if ranges is None:
        return defaults
    if not isinstance(ranges, list):
        raise ValueError("'ranges' is not a list")
    labels: dict[int, str] = {}
    for entry in ranges:
        index, label = entry["index"], str(entry["label"]).replace(" ", "")
        if label in INTERRUPTION_BUCKETS:
            labels[int(index)] = label
        elif int(index) in defaults:
            labels[int(index)] = defaults[int(index)]
        else:
            raise ValueError(f"unknown range {label!r} at index {index!r}")
    return labels or defaults


@contextmanager
def _translated_errors(action: str, region: str, request: PriceRequest) -> Iterator[None]:
    """Turn botocore failures and malformed answers into one-line RouteErrors."""
    where = f"AWS {action} in {region}"
    try:
        yield
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise CredentialsMissing(NO_CREDENTIALS) from exc
    except _CREDENTIAL_LOAD_ERRORS as exc:
        raise CredentialsMissing(CREDENTIALS_UNLOADABLE.format(kind=type(exc).__name__)) from exc
    except ClientError as exc:
        raise _client_error(exc, action, region, request) from exc
    except (ReadTimeoutError, ConnectTimeoutError) as exc:
        raise PriceSourceError(
            f"{where} timed out ({request.max_attempts} attempts, {request.timeout_s:g} s each) "
            "— check network access to AWS, raise the timeout, or use the bundled snapshot"
        ) from exc
    except EndpointConnectionError as exc:
        raise PriceSourceError(
            f"{where} could not connect to {exc.kwargs.get('endpoint_url')} — check network "
            "access to AWS and that the region exists, or use the bundled snapshot"
        ) from exc
    except BotoCoreError as exc:
        raise PriceSourceError(
            f"{where} failed ({type(exc).__name__}) — retry later or use the bundled snapshot"
        ) from exc
    except ValueError as exc:
        raise PriceSourceError(
            f"{where} returned a malformed answer: {exc} — retry later or use the bundled snapshot"
        ) from exc


def _client_error(
    exc: ClientError, action: str, region: str, request: PriceRequest
) -> OperationFailed:
    error: Mapping[str, Any] = exc.response.get("Error", {})
    code = str(error.get("Code", "Unknown"))
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    where = f"AWS {action} in {region}"
    if code in _THROTTLING_CODES:
        return PriceSourceError(
            f"{where} still throttled ({code}) after {request.max_attempts} attempts — retry "
            "later or lower max_workers, or use the bundled snapshot"
        )
    if code in _DENIED_CODES:
        return OperationFailed(
            f"{where} was denied ({code}) — grant the IAM action {action} to your AWS "
            "identity, or use the bundled snapshot"
        )
    if code in _REJECTED_CREDENTIAL_CODES:
        return CredentialsMissing(
            f"AWS rejected the credentials ({code}) calling {action} — run `aws sso login` / "
            "check AWS_PROFILE, or use the bundled snapshot (omit `route prices refresh`)"
        )
    if code == "OptInRequired":
        return OperationFailed(
            f"{where}: region {region} is not enabled for this AWS account (OptInRequired) — "
            "enable it or remove it from the regions"
        )
    return PriceSourceError(
        f"{where} failed ({code}, HTTP {status}) after {request.max_attempts} attempts — "
        "retry later or use the bundled snapshot"
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing {exc.args[0]!r}"
    return f"{type(exc).__name__}: {exc}"
