"""Azure Resource Manager checks behind Azure quotes: Resource SKU availability, eviction rates.

Both need a subscription. Resource SKUs drop sizes the subscription cannot launch in a region
(a "Location" restriction) or cannot launch as spot (LowPriorityCapable False); Resource Graph
`SpotResources` gives the trailing 28-day spot eviction rate per size and region. The SDKs
(azure-identity, azure-mgmt-compute, azure-mgmt-resourcegraph) are imported only when called.
Used by router.prices.azure; see docs/prices-azure.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from router.core.errors import BadInput, CredentialsMissing, PriceSourceError
from router.core.offers import Quote
from router.prices.request import PriceRequest

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

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
_MAX_PAGES = 1000  # a guard against a skip-token loop, far above real page counts
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
    check_names("region", regions)
    check_names("instance type", instance_types)
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
        client = make_graph_client(credential)
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


# ---------------------------------------------------------------------------------------------
# Resource SKUs (availability)


def region_availability(
    client: ComputeClient, region: str, request: PriceRequest, subscription: str | None
) -> dict[str, _SkuAvailability]:
    """Each VM size's availability in `region` for the subscription, keyed by lower-cased name."""
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


def apply_availability(
    quotes: list[Quote], availability: Mapping[str, _SkuAvailability], region: str
) -> tuple[list[Quote], list[str]]:
    """The quotes the subscription can buy, and one note per size dropped or restricted."""
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


def default_credential() -> TokenCredential:
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


def make_compute_client(credential: TokenCredential, subscription: str) -> ComputeClient:
    from azure.mgmt.compute import ComputeManagementClient

    client: ComputeClient = ComputeManagementClient(credential, subscription)
    return client


def make_graph_client(credential: TokenCredential) -> ResourceGraphClient:
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


def check_names(kind: str, names: Iterable[str]) -> None:
    for name in names:
        if not _NAME.match(name):
            raise BadInput(
                f"Azure prices: {kind} {name!r} is not an Azure name (letters, digits, '_' and "
                "'-' only) — use the ARM form, e.g. 'eastus' or 'Standard_NC24ads_A100_v4'"
            )


def _kql_list(names: Sequence[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)
