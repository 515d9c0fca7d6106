"""Live GCP prices: spot and on-demand quotes per zone, composed from Compute Engine SKUs.

GCP does not price GPU machine types as a whole: an a2/a3/g2 machine (or an n1 machine with
GPUs attached) is billed per vCPU, per GiB of RAM and per GPU. This module lists the Compute
Engine SKUs from the Cloud Billing Catalog API, composes each catalog instance type's hourly
price from them, and asks the Compute API which zones offer the machine (and accelerator).
Imported only by `route prices refresh`. See docs/prices-gcp.md.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol

import requests
from google.api_core import exceptions as api_exceptions
from google.auth import exceptions as auth_exceptions
from google.protobuf import json_format

from router.core.errors import BadInput, CredentialsMissing, OperationFailed, PriceSourceError
from router.core.offers import Quote
from router.prices.request import PriceRequest
from router.prices.retry import retry_call
from router.prices.sources import Fetched

SOURCE = "gcp-api"
# The Compute Engine service in the Cloud Billing Catalog (https://cloud.google.com/skus).
COMPUTE_BILLING_SERVICE = "services/6F81-5844-456A"

LIST_SKUS = "Cloud Billing Catalog API services.skus.list"
LIST_MACHINE_TYPES = "Compute API machineTypes.aggregatedList"
LIST_ACCELERATOR_TYPES = "Compute API acceleratorTypes.aggregatedList"
PERMISSIONS: Mapping[str, str] = {
    LIST_MACHINE_TYPES: "compute.machineTypes.list",
    LIST_ACCELERATOR_TYPES: "compute.acceleratorTypes.list",
}

NO_CREDENTIALS = (
    "GCP credentials not found — run `gcloud auth application-default login` or set "
    "GOOGLE_APPLICATION_CREDENTIALS; without credentials spotroute uses the bundled snapshot"
)
NO_PROJECT = (
    "GCP project not set — run `gcloud config set project PROJECT` or set "
    "GOOGLE_CLOUD_PROJECT; without it spotroute uses the bundled snapshot"
)

# Machine series (or, where a family is billed apart, the family) → the words its vCPU and RAM
# SKUs use ("A2 Instance Core running in Americas", "N1 Predefined Instance Ram running in
# EMEA"). a3-megagpu is billed by the "A3Plus Instance" SKUs, not "A3 Instance"
# (https://cloud.google.com/compute/vm-instance-pricing#accelerator-optimized). A family entry
# wins over its series. Series not listed get no quote.
SERIES_SKU_NAMES: Mapping[str, str] = {
    "a2": "A2 Instance",
    "a3": "A3 Instance",
    "a3-megagpu": "A3Plus Instance",
    "g2": "G2 Instance",
    "n1": "N1 Predefined Instance",
}
# Machine types whose price includes local SSD they always come with (GiB), billed by the
# "SSD backed Local Storage" SKU per GiB-month: a2-ultragpu-* and a3-*gpu-8g
# (https://cloud.google.com/compute/docs/accelerator-optimized-machines, "Bundled local SSD").
BUNDLED_LOCAL_SSD_GIB: Mapping[str, int] = {
    "a2-ultragpu-1g": 375,
    "a2-ultragpu-2g": 750,
    "a2-ultragpu-4g": 1500,
    "a2-ultragpu-8g": 3000,
    "a3-highgpu-1g": 750,
    "a3-highgpu-2g": 1500,
    "a3-highgpu-4g": 3000,
    "a3-highgpu-8g": 6000,
    "a3-megagpu-8g": 6000,
}
LOCAL_SSD = "SSD backed Local Storage"
# GCP prices storage per month of 730 hours (https://cloud.google.com/compute/disks-image-pricing).
HOURS_PER_MONTH = Decimal(730)
# Sold only as spot or through DWS flex-start/calendar mode: no on-demand price exists
# (https://cloud.google.com/compute/docs/accelerator-optimized-machines#a3-high-vms).
NO_ON_DEMAND: frozenset[str] = frozenset({"a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g"})
# Compute accelerator type → the model words of its GPU SKU ("Nvidia Tesla A100 80GB GPU ...").
ACCELERATOR_SKU_MODELS: Mapping[str, str] = {
    "nvidia-tesla-t4": "T4",
    "nvidia-tesla-v100": "V100",
    "nvidia-tesla-a100": "A100",
    "nvidia-a100-80gb": "A100 80GB",
    "nvidia-h100-80gb": "H100 80GB",
    "nvidia-h100-mega-80gb": "H100 80GB Mega",
    "nvidia-l4": "L4",
}
# Canonical GPU → accelerator type, for catalog rows that do not name one.
GPU_ACCELERATOR_TYPES: Mapping[str, str] = {
    "T4": "nvidia-tesla-t4",
    "V100": "nvidia-tesla-v100",
    "A100-40GB": "nvidia-tesla-a100",
    "A100-80GB": "nvidia-a100-80gb",
    "H100-80GB": "nvidia-h100-80gb",
    "L4": "nvidia-l4",
}
# Machine families whose bundled GPU is billed by its own GPU SKU, not the canonical GPU's: the
# a3-megagpu H100 is the "H100 80GB Mega" SKU (the catalog row says only H100-80GB, and its
# accelerator_type column is for N1 attachments).
FAMILY_ACCELERATOR_TYPES: Mapping[str, str] = {"a3-megagpu": "nvidia-h100-mega-80gb"}
# The same GPU is spelled differently in some regions' SKUs.
_GPU_MODEL_SPELLINGS: Mapping[str, str] = {
    "H100 Mega 80GB": "H100 80GB Mega",
    "H100 80GB Plus": "H100 80GB Mega",
}
# Descriptions with these words price something other than a plain on-demand or spot VM:
# committed use, sole-tenant nodes, custom shapes, DWS flex-start / calendar-mode blocks,
# reservations (some are $0 placeholders), extended memory, premium images.
EXCLUDED_SKU_WORDS: tuple[str, ...] = (
    "commitment",
    "sole tenancy",
    "sole-tenancy",
    "custom",
    "dws",
    "calendar mode",
    "flex start",
    "defined duration",
    "reserved",
    "reservation",
    "extended",
    "premium",
    "virtual workstation",
    "capacity optimized",
)
_USAGE_TYPE_MARKETS: Mapping[str, str] = {"OnDemand": "on-demand", "Preemptible": "spot"}
_USAGE_UNITS: Mapping[str, str] = {"core": "h", "ram": "GiBy.h", "gpu": "h", "ssd": "GiBy.mo"}

_SPOT_PREFIX = re.compile(r"^(?:spot )?preemptible ", re.IGNORECASE)
_SPOT_ATTACHED = re.compile(r" attached to (?:spot )?preemptible vms", re.IGNORECASE)
_RUNNING_IN = re.compile(r"^(?P<thing>.+?) running in (?P<place>.+)$")
_CORE_OR_RAM = re.compile(r"^(?P<series>.+) (?P<part>Core|Ram)$")
_GPU = re.compile(r"^Nvidia (?:Tesla )?(?P<model>.+) GPU$")

_RETRYABLE: tuple[type[BaseException], ...] = (
    api_exceptions.TooManyRequests,
    api_exceptions.InternalServerError,
    api_exceptions.BadGateway,
    api_exceptions.ServiceUnavailable,
    api_exceptions.GatewayTimeout,  # DeadlineExceeded is its subclass
    requests.exceptions.Timeout,
    requests.exceptions.ConnectionError,
    auth_exceptions.TransportError,
)
BASE_DELAY_S = 0.5
MAX_DELAY_S = 8.0

# (market, region, part, name): part is "core" | "ram" | "gpu" | "ssd"; name is the series
# words ("A2 Instance"), the GPU model ("A100 80GB") or LOCAL_SSD. SSD rates are per GiB-hour.
RateKey = tuple[str, str, str, str]


class GcpHardware(Protocol):
    """What pricing needs of one catalog instance type (router.core.catalog.InstanceType has it)."""

    @property
    def cloud(self) -> str: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def vcpus(self) -> int: ...
    @property
    def memory_gb(self) -> float: ...
    @property
    def gpu(self) -> str: ...
    @property
    def gpu_count(self) -> int: ...
    @property
    def accelerator_type(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Machine:
    """A GCP instance type as billed: machine type, its shape, and its GPUs.

    `instance_type` is the catalog name: the machine type, or `<machine>+<GPU>:<count>` when
    the GPUs are attached to an N1 machine (`attached`). `memory_gib` is GiB: GCP's "GB" of
    machine memory are GiB (memoryMb / 1024), the unit RAM SKUs are billed in.
    """

    instance_type: str
    machine_type: str
    series: str
    vcpus: int
    memory_gib: float
    gpu_count: int
    accelerator_type: str
    attached: bool
    local_ssd_gib: int = 0

    @property
    def sku_series(self) -> str:
        """The series words of its vCPU and RAM SKUs (a family entry wins over its series)."""
        family = self.machine_type.rsplit("-", 1)[0]
        return SERIES_SKU_NAMES.get(family, SERIES_SKU_NAMES[self.series])


@dataclass(frozen=True, slots=True)
class SkuRate:
    """One Compute Engine SKU reduced to what composition needs: USD per hour or GiB-hour."""

    market: str
    part: str
    name: str
    regions: tuple[str, ...]
    price: Decimal


def machine_from_hardware(hardware: GcpHardware) -> Machine | None:
    """The billed shape of one catalog row, or None when its series/GPU is not priced here."""
    machine_type = hardware.instance_type.partition("+")[0]
    series = machine_type.split("-", 1)[0]
    if series not in SERIES_SKU_NAMES:
        return None
    accelerator = (
        hardware.accelerator_type
        or FAMILY_ACCELERATOR_TYPES.get(machine_type.rsplit("-", 1)[0])
        or GPU_ACCELERATOR_TYPES.get(hardware.gpu, "")
    )
    if hardware.gpu_count > 0 and accelerator not in ACCELERATOR_SKU_MODELS:
        return None
    return Machine(
        instance_type=hardware.instance_type,
        machine_type=machine_type,
        series=series,
        vcpus=int(hardware.vcpus),
        memory_gib=float(hardware.memory_gb),
        gpu_count=int(hardware.gpu_count),
        accelerator_type=accelerator,
        attached="+" in hardware.instance_type,
        local_ssd_gib=BUNDLED_LOCAL_SSD_GIB.get(machine_type, 0),
    )


def sku_rate(
    *,
    description: str,
    resource_family: str,
    usage_type: str,
    service_regions: Sequence[str],
    usage_unit: str,
    unit_prices: Sequence[tuple[str, int, int]],
) -> SkuRate | None:
    """The rate of a vCPU, RAM or GPU SKU for on-demand or spot VMs, or None for any other SKU.

    `unit_prices` are the tiers' (currency, units, nanos), in tier order; the first non-zero
    tier is the price (a leading $0 tier is a free allowance, an all-$0 SKU is a placeholder).
    """
    market = _USAGE_TYPE_MARKETS.get(usage_type)
    lowered = description.lower()
    is_local_ssd = lowered.startswith(LOCAL_SSD.lower())
    if market is None or resource_family != ("Storage" if is_local_ssd else "Compute"):
        return None
    if any(word in lowered for word in EXCLUDED_SKU_WORDS):
        return None
    plain = _SPOT_ATTACHED.sub("", _SPOT_PREFIX.sub("", description))
    if plain != description and market != "spot":
        return None  # a preemptible description filed as OnDemand: not a VM price we know
    running = _RUNNING_IN.match(plain)
    part: str | None
    if is_local_ssd:
        # "SSD backed Local Storage[ attached to Spot Preemptible VMs][ in <place>]"
        part, name = "ssd", LOCAL_SSD
    elif running is None:
        return None
    else:
        part, name = _part_and_name(running.group("thing"))
    if part is None or usage_unit != _USAGE_UNITS[part]:
        return None
    price = next(
        (
            Decimal(units) + Decimal(nanos) / Decimal(10**9)
            for currency, units, nanos in unit_prices
            if currency in ("", "USD") and (units or nanos)
        ),
        None,
    )
    if price is None or price <= 0:
        return None
    if part == "ssd":
        price = price / HOURS_PER_MONTH
    return SkuRate(market, part, name, tuple(service_regions), price)


def rate_table(rates: Iterable[SkuRate]) -> dict[RateKey, Decimal]:
    """Rates by (market, region, part, name); where two SKUs overlap, the higher one is kept."""
    table: dict[RateKey, Decimal] = {}
    for rate in rates:
        for region in rate.regions:
            key = (rate.market, region, rate.part, rate.name)
            # Overlaps should not happen; if they do, overstating beats routing to a phantom deal.
            table[key] = max(table.get(key, rate.price), rate.price)
    return table


def compose_price(
    machine: Machine, rates: Mapping[RateKey, Decimal], market: str, region: str
) -> Decimal | None:
    """USD per hour: vCPUs × core + GiB × RAM + GPUs × GPU rate + bundled local SSD GiB × SSD
    rate; None if a rate is missing (an understated price would route to a phantom deal) or the
    machine is not sold in that market."""
    if market == "on-demand" and machine.machine_type in NO_ON_DEMAND:
        return None
    series_name = machine.sku_series
    core = rates.get((market, region, "core", series_name))
    ram = rates.get((market, region, "ram", series_name))
    if core is None or ram is None:
        return None
    total = core * machine.vcpus + ram * Decimal(str(machine.memory_gib))
    if machine.gpu_count:
        gpu = rates.get((market, region, "gpu", ACCELERATOR_SKU_MODELS[machine.accelerator_type]))
        if gpu is None:
            return None
        total += gpu * machine.gpu_count
    if machine.local_ssd_gib:
        ssd = rates.get((market, region, "ssd", LOCAL_SSD))
        if ssd is None:
            return None
        total += ssd * machine.local_ssd_gib
    return total


def compose_quotes(
    machines: Iterable[Machine],
    rates: Mapping[RateKey, Decimal],
    zones: Mapping[str, Iterable[str]],
    *,
    regions: Iterable[str],
    markets: Sequence[str],
    observed_at: datetime,
) -> list[Quote]:
    """One quote per offered zone in `regions`, per market and priced instance type."""
    wanted_regions = set(regions)
    quotes: list[Quote] = []
    for machine in machines:
        for zone in sorted(set(zones.get(machine.instance_type, ()))):
            region = zone_region(zone)
            if region not in wanted_regions:
                continue
            for market in markets:
                price = compose_price(machine, rates, market, region)
                if price is None:
                    continue
                quotes.append(
                    Quote(
                        cloud="gcp",
                        region=region,
                        zone=zone,
                        instance_type=machine.instance_type,
                        market=market,
                        price_per_hour=float(price),
                        source=SOURCE,
                        observed_at=observed_at,
                    )
                )
    return sorted(quotes, key=lambda q: (q.region, q.zone or "", q.instance_type, q.market))


def zone_region(zone: str) -> str:
    """The region of a zone: "us-central1-a" → "us-central1"."""
    return zone.rpartition("-")[0]


class GcpPrices:
    """GCP prices (PriceSource): Billing Catalog SKUs composed per Compute machine type."""

    def fetch(self, request: PriceRequest, *, now: datetime) -> Fetched:
        return Fetched(fetch_quotes(request, now=now))


def fetch_quotes(
    request: PriceRequest,
    *,
    now: datetime | None = None,
    billing_client: Any = None,
    compute_client: Any = None,
    accelerator_client: Any = None,
    catalog: Iterable[GcpHardware] | None = None,
    project: str | None = None,
    billing_endpoint: str | None = None,
    compute_endpoint: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Quote]:
    """Spot and on-demand quotes (USD per instance-hour) for every offered zone, sorted.

    Clients default to google-cloud-billing `CloudCatalogClient` and google-cloud-compute
    `MachineTypesClient` / `AcceleratorTypesClient` over REST with Application Default
    Credentials; `*_endpoint` (with scheme) overrides where those default clients connect.
    `catalog` defaults to the GCP rows of `router.core.catalog.load_catalog()`.
    """
    if not request.regions:
        raise BadInput("GCP price request has no regions — pass at least one GCP region")
    observed_at = _utc(now)
    markets = [m for m in request.markets if m in _USAGE_TYPE_MARKETS.values()]
    wanted = set(request.instance_types)
    rows = catalog if catalog is not None else _default_catalog()
    machines = [
        machine
        for row in rows
        if row.cloud == "gcp"
        and row.instance_type in wanted
        and (machine := machine_from_hardware(row)) is not None
    ]
    if not machines or not markets:
        return []

    attached = sorted({m.accelerator_type for m in machines if m.attached})
    credentials: Any = None
    if (
        billing_client is None
        or compute_client is None
        or (attached and accelerator_client is None)
        or project is None
    ):
        credentials, default_project = _default_credentials()
        project = project or default_project
    if not project:
        raise CredentialsMissing(NO_PROJECT)
    billing = billing_client or _billing_client(credentials, billing_endpoint)
    compute = compute_client or _compute_client("MachineTypesClient", credentials, compute_endpoint)
    accelerators = None
    if attached:
        accelerators = accelerator_client or _compute_client(
            "AcceleratorTypesClient", credentials, compute_endpoint
        )
    calls = _Calls(request, sleep)

    with ThreadPoolExecutor(max_workers=max(1, min(3, request.max_workers))) as pool:
        skus = pool.submit(calls.list_skus, billing)
        machine_zones = pool.submit(
            calls.list_zones,
            compute,
            LIST_MACHINE_TYPES,
            project,
            sorted({m.machine_type for m in machines}),
        )
        accelerator_zones = (
            pool.submit(calls.list_zones, accelerators, LIST_ACCELERATOR_TYPES, project, attached)
            if accelerators is not None
            else None
        )
        # In a fixed order, so the error a user sees does not depend on thread timing.
        rates = rate_table(skus.result())
        offered = machine_zones.result()
        offered_accelerators = accelerator_zones.result() if accelerator_zones else {}

    zones = {
        machine.instance_type: _machine_zones(machine, offered, offered_accelerators)
        for machine in machines
    }
    return compose_quotes(
        machines,
        rates,
        zones,
        regions=request.regions,
        markets=markets,
        observed_at=observed_at,
    )


def _machine_zones(
    machine: Machine,
    machine_zones: Mapping[str, Mapping[str, int]],
    accelerator_zones: Mapping[str, Mapping[str, int]],
) -> set[str]:
    zones = set(machine_zones.get(machine.machine_type, {}))
    if machine.attached:
        # An N1 zone counts only if it also offers enough of the accelerator.
        cards = accelerator_zones.get(machine.accelerator_type, {})
        zones = {z for z in zones if cards.get(z, 0) >= machine.gpu_count}
    return zones


class _Calls:
    """The API calls of one fetch, each page retried with backoff and errors made one-liners."""

    def __init__(self, request: PriceRequest, sleep: Callable[[float], None]) -> None:
        self.request = request
        self.sleep = sleep

    def list_skus(self, client: Any) -> list[SkuRate]:
        rates: list[SkuRate] = []
        token = ""
        with self._translated(LIST_SKUS, None):
            while True:
                page = self._page(
                    client.list_skus, {"parent": COMPUTE_BILLING_SERVICE, "page_token": token}
                )
                for sku in page.skus:
                    rate = _rate_of(sku)
                    if rate is not None:
                        rates.append(rate)
                token = page.next_page_token
                if not token:
                    return rates

    def list_zones(
        self, client: Any, api: str, project: str, names: Sequence[str]
    ) -> dict[str, dict[str, int]]:
        """Zones offering each name: name → zone → max GPUs per instance (0 for machine types)."""
        found: dict[str, dict[str, int]] = {}
        name_filter = " OR ".join(f'(name = "{name}")' for name in names)
        wanted = set(names)
        token = ""
        with self._translated(api, project):
            while True:
                page = self._page(
                    client.aggregated_list,
                    {"project": project, "filter": name_filter, "page_token": token},
                )
                for scope, scoped in page.items.items():
                    if not scope.startswith("zones/"):
                        continue
                    zone = scope.removeprefix("zones/")
                    for entry in _scoped_entries(api, scoped):
                        if entry.name not in wanted or entry.deprecated.state in (
                            "OBSOLETE",
                            "DELETED",
                        ):
                            continue
                        cards = int(getattr(entry, "maximum_cards_per_instance", 0) or 0)
                        found.setdefault(entry.name, {})[zone] = cards
                token = page.next_page_token
                if not token:
                    return found

    def _page(self, method: Callable[..., Any], page_request: dict[str, Any]) -> Any:
        """One page of a listing; a retry repeats that page, not the whole listing."""

        def call() -> Any:
            # The client's own retry is off: attempts and backoff are ours, per request.
            pager = method(request=page_request, retry=None, timeout=self.request.timeout_s)
            return next(iter(pager.pages))

        return retry_call(
            call,
            is_retryable=lambda exc: isinstance(exc, _RETRYABLE),
            max_attempts=self.request.max_attempts,
            base_delay_s=BASE_DELAY_S,
            max_delay_s=MAX_DELAY_S,
            sleep=self.sleep,
            retry_after=_retry_after_s,
        )

    @contextmanager
    def _translated(self, api: str, project: str | None) -> Iterator[None]:
        """Turn client failures into one-line RouteErrors naming the API and regions."""
        request = self.request
        where = f"GCP {api} for {_regions_text(request.regions)}"
        attempts = f"{request.max_attempts} attempts, {request.timeout_s:g} s each"
        try:
            yield
        except auth_exceptions.DefaultCredentialsError as exc:
            raise CredentialsMissing(NO_CREDENTIALS) from exc
        except auth_exceptions.RefreshError as exc:
            raise CredentialsMissing(_REJECTED_CREDENTIALS) from exc
        except api_exceptions.Unauthorized as exc:
            raise CredentialsMissing(_REJECTED_CREDENTIALS) from exc
        except api_exceptions.Forbidden as exc:
            raise _forbidden(api, project, exc) from exc
        except api_exceptions.NotFound as exc:
            if project is not None:
                raise OperationFailed(
                    f"{where}: project {project!r} was not found — set the project "
                    "(`gcloud config set project`, GOOGLE_CLOUD_PROJECT) or pass it explicitly"
                ) from exc
            raise PriceSourceError(f"{where} answered 404 Not Found — retry later") from exc
        except api_exceptions.TooManyRequests as exc:
            raise PriceSourceError(
                f"{where} still throttled (HTTP 429) after {request.max_attempts} attempts — "
                "retry later or use the bundled snapshot"
            ) from exc
        except (requests.exceptions.Timeout, api_exceptions.GatewayTimeout) as exc:
            raise PriceSourceError(
                f"{where} timed out ({attempts}) — check network access to Google APIs, "
                "raise the timeout, or use the bundled snapshot"
            ) from exc
        except (requests.exceptions.ConnectionError, auth_exceptions.TransportError) as exc:
            raise PriceSourceError(
                f"{where} could not connect ({request.max_attempts} attempts) — check network "
                "access to Google APIs, or use the bundled snapshot"
            ) from exc
        except api_exceptions.GoogleAPICallError as exc:
            raise PriceSourceError(
                f"{where} failed (HTTP {exc.code}) after {request.max_attempts} attempts — "
                "retry later or use the bundled snapshot"
            ) from exc
        except (json_format.ParseError, ValueError, TypeError) as exc:
            raise PriceSourceError(
                f"{where} returned a malformed answer ({_one_line(exc)}) — retry later or "
                "use the bundled snapshot"
            ) from exc


_REJECTED_CREDENTIALS = (
    "GCP rejected the credentials or they could not be refreshed — run `gcloud auth "
    "application-default login`; without credentials spotroute uses the bundled snapshot"
)


def _forbidden(api: str, project: str | None, exc: api_exceptions.Forbidden) -> OperationFailed:
    if api == LIST_SKUS:
        # The catalog needs no IAM role, only the API enabled where the credentials bill quota.
        return OperationFailed(
            f"GCP {api} was refused (HTTP 403) — enable cloudbilling.googleapis.com "
            "(`gcloud services enable cloudbilling.googleapis.com`) in the project your "
            "credentials use; no IAM role is needed"
        )
    return OperationFailed(
        f"GCP {api} was denied in project {project} (HTTP 403) — grant {PERMISSIONS[api]} "
        "(e.g. roles/compute.viewer) to your GCP identity and enable compute.googleapis.com"
    )


def _scoped_entries(api: str, scoped: Any) -> Sequence[Any]:
    if api == LIST_MACHINE_TYPES:
        return list(scoped.machine_types)
    return list(scoped.accelerator_types)


def _rate_of(sku: Any) -> SkuRate | None:
    pricing = list(sku.pricing_info)
    if not pricing:
        return None
    expression = pricing[0].pricing_expression
    return sku_rate(
        description=str(sku.description),
        resource_family=str(sku.category.resource_family),
        usage_type=str(sku.category.usage_type),
        service_regions=[str(r) for r in sku.service_regions],
        usage_unit=str(expression.usage_unit),
        unit_prices=[
            (
                str(tier.unit_price.currency_code),
                int(tier.unit_price.units),
                int(tier.unit_price.nanos),
            )
            for tier in expression.tiered_rates
        ],
    )


def _retry_after_s(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP-date: fall back to jittered backoff


def _default_credentials() -> tuple[Any, str | None]:
    import google.auth

    try:
        credentials, project = google.auth.default(
            scopes=["https://www.googleapis.com/auth/cloud-platform"]
        )
    except auth_exceptions.DefaultCredentialsError as exc:
        raise CredentialsMissing(NO_CREDENTIALS) from exc
    return credentials, project


def _client_options(endpoint: str | None) -> Any:
    from google.api_core.client_options import ClientOptions

    return ClientOptions(api_endpoint=endpoint) if endpoint else None


def _billing_client(credentials: Any, endpoint: str | None) -> Any:
    from google.cloud import billing_v1

    return billing_v1.CloudCatalogClient(
        transport="rest", credentials=credentials, client_options=_client_options(endpoint)
    )


def _compute_client(name: str, credentials: Any, endpoint: str | None) -> Any:
    from google.cloud import compute_v1

    client_class = getattr(compute_v1, name)
    return client_class(
        transport="rest", credentials=credentials, client_options=_client_options(endpoint)
    )


def _default_catalog() -> Sequence[GcpHardware]:
    from router.config.datafiles import load_catalog

    return load_catalog().for_cloud("gcp")


def _regions_text(regions: Sequence[str]) -> str:
    shown = ", ".join(regions[:3])
    return shown if len(regions) <= 3 else f"{shown} and {len(regions) - 3} more regions"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _part_and_name(thing: str) -> tuple[str | None, str]:
    gpu = _GPU.match(thing)
    if gpu is not None:
        model = gpu.group("model")
        return "gpu", _GPU_MODEL_SPELLINGS.get(model, model)
    core_or_ram = _CORE_OR_RAM.match(thing)
    if core_or_ram is not None and core_or_ram.group("series") in SERIES_SKU_NAMES.values():
        part = "core" if core_or_ram.group("part") == "Core" else "ram"
        return part, core_or_ram.group("series")
    return None, thing


def _utc(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    return now.astimezone(UTC)
