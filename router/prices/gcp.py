"""Live GCP prices: spot and on-demand quotes per zone, composed from Compute Engine SKUs.

GCP does not price GPU machine types as a whole: an a2/a3/g2 machine (or an n1 machine with
GPUs attached) is billed per vCPU, per GiB of RAM and per GPU. This module lists the Compute
Engine SKUs from the Cloud Billing Catalog API, composes each catalog instance type's hourly
price from them (router.prices.gcp_skus), and asks the Compute API which zones offer the
machine (and accelerator). Imported only by `route prices refresh`. See docs/prices-gcp.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from google.api_core import exceptions as api_exceptions

from router.core.errors import (
    BadInput,
    CredentialsMissing,
    OperationFailed,
    PriceSourceError,
    RouteError,
)
from router.core.offers import Quote
from router.prices.gcp_skus import (
    USAGE_TYPE_MARKETS,
    GcpHardware,
    Machine,
    SkuRate,
    compose_quotes,
    machine_from_hardware,
    rate_of_sku,
    rate_table,
)
from router.prices.google_api import (
    GoogleFailures,
    default_credentials,
    rest_client,
    retried,
    translated,
)
from router.prices.request import PriceRequest, observation_time
from router.prices.source_protocol import Fetched

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
    observed_at = observation_time(now)
    markets = [m for m in request.markets if m in USAGE_TYPE_MARKETS.values()]
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
        credentials, default_project = default_credentials(NO_CREDENTIALS)
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
                    rate = rate_of_sku(sku)
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

        return retried(call, max_attempts=self.request.max_attempts, sleep=self.sleep)

    def _translated(self, api: str, project: str | None) -> AbstractContextManager[None]:
        """Turn client failures into one-line RouteErrors naming the API and regions."""
        request = self.request
        where = f"GCP {api} for {_regions_text(request.regions)}"

        def not_found(exc: api_exceptions.NotFound) -> RouteError:
            if project is not None:
                return OperationFailed(
                    f"{where}: project {project!r} was not found — set the project "
                    "(`gcloud config set project`, GOOGLE_CLOUD_PROJECT) or pass it explicitly"
                )
            return PriceSourceError(f"{where} answered 404 Not Found — retry later")

        failures = GoogleFailures(
            no_credentials=NO_CREDENTIALS,
            rejected_credentials=_REJECTED_CREDENTIALS,
            failure=PriceSourceError,
            fallback="use the bundled snapshot",
            forbidden=lambda exc: _forbidden(api, project, exc),
            not_found=not_found,
        )
        return translated(
            where, failures, max_attempts=request.max_attempts, timeout_s=request.timeout_s
        )


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


def _billing_client(credentials: Any, endpoint: str | None) -> Any:
    from google.cloud import billing_v1

    return rest_client(billing_v1.CloudCatalogClient, credentials, endpoint)


def _compute_client(name: str, credentials: Any, endpoint: str | None) -> Any:
    from google.cloud import compute_v1

    return rest_client(getattr(compute_v1, name), credentials, endpoint)


def _default_catalog() -> Sequence[GcpHardware]:
    from router.config.datafiles import load_catalog

    return load_catalog().for_cloud("gcp")


def _regions_text(regions: Sequence[str]) -> str:
    shown = ", ".join(regions[:3])
    return shown if len(regions) <= 3 else f"{shown} and {len(regions) - 3} more regions"
