"""Live Azure quotas: per location, vCPU limit and usage of each VM family, the regional total
and the regional low-priority (spot) total, from Compute `usage.list` (azure-mgmt-compute).
Needs a subscription (AZURE_SUBSCRIPTION_ID). Imported only by the refresh commands.
See docs/quotas.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from router.core.errors import BadInput, CredentialsMissing, OperationFailed
from router.core.quotas import QuotaReading
from router.prices.quotas.request import QuotaRequest

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

SOURCE = "azure-usage"
PERMISSION = "Microsoft.Compute/locations/usages/read"
NO_SUBSCRIPTION = (
    "Azure quotas need a subscription — set AZURE_SUBSCRIPTION_ID and run `az login`; until "
    "then Azure quotas stay unknown"
)
CREDENTIALS_HINT = (
    "Azure credentials not found — run `az login` or set AZURE_CLIENT_ID/AZURE_TENANT_ID with "
    "workload identity; until then Azure quotas stay unknown"
)


class UsageOperations(Protocol):
    """The slice of azure-mgmt-compute's `usage` operations used here."""

    def list(self, location: str, **kwargs: Any) -> Iterable[Any]: ...


class ComputeClient(Protocol):
    """What quota reading needs of `azure.mgmt.compute.ComputeManagementClient`."""

    @property
    def usage(self) -> UsageOperations: ...


class AzureQuotas:
    """Azure quotas (QuotaSource): Compute usage per location."""

    def fetch(self, request: QuotaRequest, *, now: datetime) -> list[QuotaReading]:
        return fetch_quotas(request, now=now)


def fetch_quotas(
    request: QuotaRequest,
    *,
    now: datetime | None = None,
    compute_client: ComputeClient | None = None,
    credential: TokenCredential | None = None,
    subscription_id: str | None = None,
) -> list[QuotaReading]:
    """vCPU limit and usage of each requested usage name in each location, sorted."""
    if not request.regions:
        raise BadInput("Azure quota request has no regions — pass at least one Azure region")
    observed_at = now or datetime.now(UTC)
    if observed_at.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    if not request.quotas:
        return []
    owned = None
    if compute_client is None:
        subscription = subscription_id or os.environ.get("AZURE_SUBSCRIPTION_ID") or None
        if not subscription:
            raise CredentialsMissing(NO_SUBSCRIPTION)
        owned = _compute_client(credential or _default_credential(), subscription)
        compute_client = owned
    # Usage names differ in case between regions and API versions ("StandardNCADSA100v4Family").
    wanted = {quota.lower(): quota for quota in request.quotas}
    client = compute_client
    kwargs = {
        "retry_total": max(0, request.max_attempts - 1),
        "connection_timeout": request.timeout_s,
        "read_timeout": request.timeout_s,
    }

    def region_readings(region: str) -> list[QuotaReading]:
        from azure.core.exceptions import AzureError, ClientAuthenticationError, HttpResponseError

        try:
            usages = list(client.usage.list(region, **kwargs))
        except ClientAuthenticationError as exc:
            raise CredentialsMissing(CREDENTIALS_HINT) from exc
        except HttpResponseError as exc:
            status = getattr(exc, "status_code", None)
            if status == 403:
                raise OperationFailed(
                    f"Azure Compute usage in {region} was denied (HTTP 403) — grant "
                    f"{PERMISSION} (the Reader role has it)"
                ) from exc
            raise OperationFailed(
                f"Azure Compute usage in {region} failed (HTTP {status}) — retry later"
            ) from exc
        except AzureError as exc:
            raise OperationFailed(
                f"Azure Compute usage in {region} failed ({type(exc).__name__}) — check network "
                "access to management.azure.com and retry"
            ) from exc
        readings = []
        for usage in usages:
            name = getattr(usage, "name", None)
            value = str(getattr(name, "value", "") or "")
            quota = wanted.get(value.lower())
            if quota is None:
                continue
            readings.append(
                QuotaReading(
                    cloud="azure",
                    region=region,
                    quota=quota,
                    name=str(getattr(name, "localized_value", "") or ""),
                    unit="vcpus",
                    limit=float(usage.limit),
                    usage=float(usage.current_value),
                    source=SOURCE,
                    observed_at=observed_at,
                )
            )
        return readings

    try:
        with ThreadPoolExecutor(max_workers=max(1, request.max_workers)) as pool:
            futures = [pool.submit(region_readings, region) for region in request.regions]
            readings = [r for future in futures for r in future.result()]
    finally:
        if owned is not None:
            owned.close()  # type: ignore[attr-defined]
    return sorted(readings, key=lambda r: (r.region, r.quota))


def _default_credential() -> TokenCredential:
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


def _compute_client(credential: TokenCredential, subscription: str) -> ComputeClient:
    from azure.mgmt.compute import ComputeManagementClient

    client: ComputeClient = ComputeManagementClient(credential, subscription)
    return client
