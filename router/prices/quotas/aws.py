"""Live AWS quotas: EC2 vCPU limits per instance family group (Service Quotas) and their usage
(the `AWS/Usage` CloudWatch metric each quota names). Imported only by `route quotas refresh`
and `route prices refresh`: it pulls in boto3. See docs/quotas.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import boto3
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
)

from router.core.errors import BadInput, CredentialsMissing, OperationFailed
from router.core.quotas import QuotaReading
from router.prices.aws_session import client_config, default_session, require_credentials
from router.prices.quotas.request import QuotaRequest
from router.prices.request import observation_time

SOURCE = "aws-service-quotas"
SERVICE_CODE = "ec2"
GET_SERVICE_QUOTA = "servicequotas:GetServiceQuota"
GET_DEFAULT_QUOTA = "servicequotas:GetAWSDefaultServiceQuota"
GET_METRIC_DATA = "cloudwatch:GetMetricData"
# AWS/Usage publishes one datapoint a minute while something is running; none in this window
# means nothing of that quota is in use.
USAGE_WINDOW = timedelta(minutes=15)
USAGE_PERIOD_S = 60

NO_CREDENTIALS = (
    "AWS credentials not found — run `aws configure sso` / set AWS_PROFILE; until then quotas "
    "stay unknown and never reject a placement"
)
_CREDENTIALS_UNLOADABLE = (
    "AWS credentials could not be loaded ({kind}) — run `aws sso login` / check AWS_PROFILE; "
    "until then quotas stay unknown"
)
_THROTTLING = frozenset(
    {"ThrottlingException", "TooManyRequestsException", "Throttling", "RequestLimitExceeded"}
)
_DENIED = frozenset({"AccessDeniedException", "AccessDenied", "UnauthorizedOperation"})
_REJECTED = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException"}
)


class AwsQuotas:
    """AWS quotas (QuotaSource): Service Quotas limits, CloudWatch AWS/Usage usage."""

    def fetch(self, request: QuotaRequest, *, now: datetime) -> list[QuotaReading]:
        return fetch_quotas(request, now=now)


def fetch_quotas(
    request: QuotaRequest,
    *,
    now: datetime | None = None,
    session: boto3.Session | None = None,
    endpoint_url: str | None = None,
) -> list[QuotaReading]:
    """Limit and usage (vCPUs) of each requested EC2 quota code in each region, sorted."""
    if not request.regions:
        raise BadInput("AWS quota request has no regions — pass at least one AWS region")
    observed_at = observation_time(now)
    if not request.quotas:
        return []
    if session is None:
        session = default_session("; until then quotas stay unknown")
    require_credentials(session, missing=NO_CREDENTIALS, unloadable=_CREDENTIALS_UNLOADABLE)
    config = client_config(request.timeout_s, request.max_attempts)
    clients = {
        region: (
            session.client(
                "service-quotas", region_name=region, config=config, endpoint_url=endpoint_url
            ),
            session.client(
                "cloudwatch", region_name=region, config=config, endpoint_url=endpoint_url
            ),
        )
        for region in request.regions
    }
    with ThreadPoolExecutor(max_workers=max(1, request.max_workers)) as pool:
        futures = [
            pool.submit(_region_readings, region, *clients[region], request, observed_at)
            for region in request.regions
        ]
        # In request order, so the error a user sees does not depend on thread timing.
        readings = [r for future in futures for r in future.result()]
    return sorted(readings, key=lambda r: (r.region, r.quota))


def _region_readings(
    region: str, quotas: Any, cloudwatch: Any, request: QuotaRequest, observed_at: datetime
) -> list[QuotaReading]:
    found: list[Mapping[str, Any]] = []
    for code in request.quotas:
        quota = _service_quota(quotas, region, code)
        if quota is not None:
            found.append(quota)
    usage = _usage(cloudwatch, region, found, observed_at)
    return [
        QuotaReading(
            cloud="aws",
            region=region,
            quota=str(q["QuotaCode"]),
            name=str(q.get("QuotaName", "")),
            unit="vcpus",
            limit=float(q["Value"]),
            usage=usage.get(str(q["QuotaCode"]), 0.0),
            source=SOURCE,
            observed_at=observed_at,
        )
        for q in found
    ]


def _service_quota(client: Any, region: str, code: str) -> Mapping[str, Any] | None:
    """The applied value of a quota; its AWS default when the account has none applied."""
    try:
        with _translated(GET_SERVICE_QUOTA, region):
            return _quota_of(client.get_service_quota(ServiceCode=SERVICE_CODE, QuotaCode=code))
    except _NoSuchQuota:
        pass
    try:
        with _translated(GET_DEFAULT_QUOTA, region):
            return _quota_of(
                client.get_aws_default_service_quota(ServiceCode=SERVICE_CODE, QuotaCode=code)
            )
    except _NoSuchQuota:
        return None  # not a quota in this region: stays unknown


def _quota_of(response: Mapping[str, Any]) -> Mapping[str, Any]:
    quota = response.get("Quota")
    if not isinstance(quota, Mapping) or "Value" not in quota or "QuotaCode" not in quota:
        raise OperationFailed(
            "AWS Service Quotas returned a quota without QuotaCode/Value — retry later"
        )
    return quota


def _usage(
    client: Any, region: str, quotas: Sequence[Mapping[str, Any]], observed_at: datetime
) -> dict[str, float]:
    """Newest AWS/Usage value per quota code (vCPUs in use), from one GetMetricData call."""
    queries = []
    ids: dict[str, str] = {}
    for index, quota in enumerate(quotas):
        metric = quota.get("UsageMetric")
        if not isinstance(metric, Mapping) or not metric.get("MetricName"):
            continue
        query_id = f"q{index}"
        ids[query_id] = str(quota["QuotaCode"])
        dimensions = metric.get("MetricDimensions") or {}
        queries.append(
            {
                "Id": query_id,
                "MetricStat": {
                    "Metric": {
                        "Namespace": str(metric.get("MetricNamespace", "AWS/Usage")),
                        "MetricName": str(metric["MetricName"]),
                        "Dimensions": [
                            {"Name": str(k), "Value": str(v)} for k, v in sorted(dimensions.items())
                        ],
                    },
                    "Period": USAGE_PERIOD_S,
                    "Stat": str(metric.get("MetricStatisticRecommendation") or "Maximum"),
                },
                "ReturnData": True,
            }
        )
    if not queries:
        return {}
    usage: dict[str, float] = {}
    with _translated(GET_METRIC_DATA, region):
        pages = client.get_paginator("get_metric_data").paginate(
            MetricDataQueries=queries,
            StartTime=observed_at - USAGE_WINDOW,
            EndTime=observed_at,
            ScanBy="TimestampDescending",
        )
        for page in pages:
            for result in page.get("MetricDataResults", []):
                code = ids.get(str(result.get("Id")))
                values = result.get("Values") or []
                if code is not None and values and code not in usage:
                    usage[code] = float(values[0])  # newest first
    return usage


class _NoSuchQuota(Exception):
    pass


@contextmanager
def _translated(action: str, region: str) -> Iterator[None]:
    where = f"AWS {action} in {region}"
    try:
        yield
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise CredentialsMissing(NO_CREDENTIALS) from exc
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", "Unknown"))
        if code == "NoSuchResourceException":
            raise _NoSuchQuota(code) from exc
        if code in _DENIED:
            raise OperationFailed(
                f"{where} was denied ({code}) — grant {action} to your AWS identity "
                "(the spotroute deployer has it: docs/quotas.md)"
            ) from exc
        if code in _REJECTED:
            raise CredentialsMissing(
                f"AWS rejected the credentials ({code}) calling {action} — run `aws sso login` "
                "/ check AWS_PROFILE"
            ) from exc
        if code in _THROTTLING:
            raise OperationFailed(f"{where} still throttled ({code}) — retry later") from exc
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        raise OperationFailed(f"{where} failed ({code}, HTTP {status}) — retry later") from exc
    except BotoCoreError as exc:
        raise OperationFailed(
            f"{where} failed ({type(exc).__name__}) — check network access to AWS and retry"
        ) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise OperationFailed(
            f"{where} returned a malformed answer ({type(exc).__name__}) — retry later"
        ) from exc
