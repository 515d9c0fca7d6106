"""Live GCP quotas: per region, the limit and usage of each GPU, preemptible GPU and CPU metric,
from Compute Engine `regions.get` (google-cloud-compute `RegionsClient`). Imported only by the
refresh commands. See docs/quotas.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from router.core.errors import BadInput, CredentialsMissing, OperationFailed
from router.core.quotas import QuotaReading
from router.prices.google_api import (
    GoogleFailures,
    default_credentials,
    rest_client,
    retried,
    translated,
)
from router.prices.quotas.request import QuotaRequest
from router.prices.request import observation_time

SOURCE = "gcp-regions"
GET_REGION = "Compute API regions.get"
PERMISSION = "compute.regions.get"
NO_CREDENTIALS = (
    "GCP credentials not found — run `gcloud auth application-default login` or set "
    "GOOGLE_APPLICATION_CREDENTIALS; until then quotas stay unknown"
)
NO_PROJECT = (
    "GCP project not set — run `gcloud config set project PROJECT` or set GOOGLE_CLOUD_PROJECT; "
    "until then quotas stay unknown"
)
_REJECTED_CREDENTIALS = (
    "GCP rejected the credentials or they could not be refreshed — run `gcloud auth "
    "application-default login`; until then quotas stay unknown"
)


class GcpQuotas:
    """GCP quotas (QuotaSource): Compute regions.get quotas per region."""

    def fetch(self, request: QuotaRequest, *, now: datetime) -> list[QuotaReading]:
        return fetch_quotas(request, now=now)


def fetch_quotas(
    request: QuotaRequest,
    *,
    now: datetime | None = None,
    regions_client: Any = None,
    project: str | None = None,
    endpoint: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[QuotaReading]:
    """Limit and usage of each requested metric in each region (GPUs or vCPUs), sorted.

    `regions_client` defaults to google-cloud-compute `RegionsClient` over REST with
    Application Default Credentials; `endpoint` (with scheme) overrides where it connects.
    """
    if not request.regions:
        raise BadInput("GCP quota request has no regions — pass at least one GCP region")
    observed_at = observation_time(now)
    if not request.quotas:
        return []
    credentials: Any = None
    if regions_client is None or project is None:
        credentials, default_project = default_credentials(NO_CREDENTIALS)
        project = project or default_project
    if not project:
        raise CredentialsMissing(NO_PROJECT)
    client = regions_client or _regions_client(credentials, endpoint)
    wanted = set(request.quotas)

    def region_readings(region: str) -> list[QuotaReading]:
        answer = _get_region(client, project, region, request, sleep)
        readings = []
        for quota in answer.quotas:
            metric = str(quota.metric)
            if metric not in wanted:
                continue
            readings.append(
                QuotaReading(
                    cloud="gcp",
                    region=region,
                    quota=metric,
                    unit="gpus" if metric.endswith("_GPUS") else "vcpus",
                    limit=float(quota.limit),
                    usage=float(quota.usage),
                    source=SOURCE,
                    observed_at=observed_at,
                )
            )
        return readings

    with ThreadPoolExecutor(max_workers=max(1, request.max_workers)) as pool:
        futures = [pool.submit(region_readings, region) for region in request.regions]
        readings = [r for future in futures for r in future.result()]
    return sorted(readings, key=lambda r: (r.region, r.quota))


def _get_region(
    client: Any,
    project: str,
    region: str,
    request: QuotaRequest,
    sleep: Callable[[float], None],
) -> Any:
    def call() -> Any:
        # The client's own retry is off: attempts and backoff are ours, per request.
        return client.get(
            request={"project": project, "region": region}, retry=None, timeout=request.timeout_s
        )

    with _translated(project, region, request):
        return retried(call, max_attempts=request.max_attempts, sleep=sleep)


def _translated(project: str, region: str, request: QuotaRequest) -> AbstractContextManager[None]:
    where = f"GCP {GET_REGION} for {region}"
    failures = GoogleFailures(
        no_credentials=NO_CREDENTIALS,
        rejected_credentials=_REJECTED_CREDENTIALS,
        failure=OperationFailed,
        fallback="",
        forbidden=lambda exc: OperationFailed(
            f"{where} was denied in project {project} (HTTP 403) — grant {PERMISSION} "
            "(e.g. roles/compute.viewer) and enable compute.googleapis.com"
        ),
        not_found=lambda exc: OperationFailed(
            f"{where}: project {project!r} or region {region!r} was not found — check "
            "`gcloud config get project` and the region name"
        ),
    )
    return translated(
        where, failures, max_attempts=request.max_attempts, timeout_s=request.timeout_s
    )


def _regions_client(credentials: Any, endpoint: str | None) -> Any:
    from google.cloud import compute_v1

    return rest_client(compute_v1.RegionsClient, credentials, endpoint)
