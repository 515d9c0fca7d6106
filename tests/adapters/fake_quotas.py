"""Loopback fakes of the quota APIs router.prices.quotas reads, in their real wire formats.

- AWS (`FakeAwsQuotas`, plain HTTP, one server for both services; the region is read from the
  SigV4 credential scope, as AWS routes by endpoint):
  - Service Quotas, JSON 1.1: `POST /` with `X-Amz-Target: ServiceQuotasV20190624.<Op>` →
    `{"Quota": {...}}` or `{"__type": "NoSuchResourceException", "Message": ...}`.
  - CloudWatch, JSON 1.0 (the protocol botocore picks of those CloudWatch offers): `POST /`
    with `X-Amz-Target: GraniteServiceVersion20100801.GetMetricData` → `{"MetricDataResults":
    [...]}`, timestamps as epoch seconds.
  Point boto3 at it with `endpoint_url=` or, for a `route` process, AWS_ENDPOINT_URL.
- GCP (`FakeGcpRegions`, plain HTTP): Compute `GET /compute/v1/projects/{p}/regions/{r}` →
  a Region with `quotas: [{metric, limit, usage}]`.
- Azure (`FakeAzureUsage`, TLS with the throwaway CA of fake_azure): Compute
  `GET /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/usages` →
  `{"value": [Usage], "nextLink": ...}`.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.adapters.fake_azure import TOKEN, TlsFiles

# Real AWS/Usage dimensions of the EC2 vCPU quotas ("Class" names the family group and market).
AWS_USAGE_CLASS = {
    "L-417A185B": "P/OnDemand",
    "L-DB2E81BA": "G/OnDemand",
    "L-7212CCBC": "P/Spot",
    "L-C4BD4855": "P5/Spot",
    "L-3819A6DF": "G/Spot",
}
AWS_QUOTA_NAMES = {
    "L-417A185B": "Running On-Demand P instances",
    "L-DB2E81BA": "Running On-Demand G and VT instances",
    "L-7212CCBC": "All P4, P3 and P2 Spot Instance Requests",
    "L-C4BD4855": "All P5 Spot Instance Requests",
    "L-3819A6DF": "All G and VT Spot Instance Requests",
}
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/(?P<region>[a-z0-9-]+)/(?P<service>[a-z0-9-]+)/")


class _Server:
    """A ThreadingHTTPServer on 127.0.0.1 whose handler calls `self.handle(handler, body)`."""

    tls: TlsFiles | None = None

    def __init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the fake first"
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Any:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                owner.handle(self, b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                owner.handle(self, self.rfile.read(length))

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.tls.cert_path, self.tls.key_path)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        raise NotImplementedError


def _send(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    content_type: str,
    headers: dict[str, str] | None = None,
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


# --------------------------------------------------------------------------------------------
# AWS


@dataclass
class AwsQuota:
    value: float
    applied: bool = True  # False: only GetAWSDefaultServiceQuota knows it


@dataclass
class FakeAwsQuotas(_Server):
    """Quotas per (region, code) and vCPUs in use per (region, usage class)."""

    quotas: dict[tuple[str, str], AwsQuota] = field(default_factory=dict)
    usage: dict[tuple[str, str], float] = field(default_factory=dict)
    deny: set[str] = field(default_factory=set)  # operations answered AccessDeniedException
    calls: list[tuple[str, str]] = field(default_factory=list)  # (region, operation)

    def __post_init__(self) -> None:
        _Server.__init__(self)

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        scope = _SCOPE.search(handler.headers.get("Authorization", ""))
        region = scope.group("region") if scope else "us-east-1"
        target = handler.headers.get("X-Amz-Target", "")
        operation = target.rpartition(".")[2]
        with self.lock:
            self.calls.append((region, operation))
        if target.startswith("GraniteServiceVersion20100801."):
            self._cloudwatch(handler, region, operation, body)
            return
        if operation in self.deny:
            self._json_error(handler, 400, "AccessDeniedException", "not authorized")
            return
        request = json.loads(body or b"{}")
        code = request.get("QuotaCode", "")
        quota = self.quotas.get((region, code))
        if operation == "GetServiceQuota" and (quota is None or not quota.applied):
            self._json_error(handler, 400, "NoSuchResourceException", "The request failed")
            return
        if operation == "GetAWSDefaultServiceQuota" and quota is None:
            self._json_error(handler, 400, "NoSuchResourceException", "The request failed")
            return
        if operation not in ("GetServiceQuota", "GetAWSDefaultServiceQuota"):
            self._json_error(handler, 400, "UnknownOperationException", operation)
            return
        assert quota is not None
        answer = {
            "Quota": {
                "ServiceCode": "ec2",
                "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
                "QuotaArn": f"arn:aws:servicequotas:{region}:123456789012:ec2/{code}",
                "QuotaCode": code,
                "QuotaName": AWS_QUOTA_NAMES.get(code, code),
                "Value": quota.value,
                "Unit": "None",
                "Adjustable": True,
                "GlobalQuota": False,
                "UsageMetric": {
                    "MetricNamespace": "AWS/Usage",
                    "MetricName": "ResourceCount",
                    "MetricDimensions": {
                        "Class": AWS_USAGE_CLASS.get(code, "Standard/OnDemand"),
                        "Resource": "vCPU",
                        "Service": "EC2",
                        "Type": "Resource",
                    },
                    "MetricStatisticRecommendation": "Maximum",
                },
                "QuotaAppliedAtLevel": "ACCOUNT",
            }
        }
        _send(handler, 200, json.dumps(answer).encode(), "application/x-amz-json-1.1")

    def _cloudwatch(
        self, handler: BaseHTTPRequestHandler, region: str, operation: str, body: bytes
    ) -> None:
        if operation != "GetMetricData" or "GetMetricData" in self.deny:
            body = json.dumps({"__type": "AccessDenied", "message": "not authorized"}).encode()
            _send(handler, 400, body, "application/x-amz-json-1.0")
            return
        request = json.loads(body)
        results = []
        for query in request["MetricDataQueries"]:
            dims = {d["Name"]: d["Value"] for d in query["MetricStat"]["Metric"]["Dimensions"]}
            used = self.usage.get((region, dims.get("Class", "")))
            stamp = int(datetime.now(UTC).timestamp())
            results.append(
                {
                    "Id": query["Id"],
                    "Label": "ResourceCount",
                    "Timestamps": [stamp] if used is not None else [],
                    "Values": [float(used)] if used is not None else [],
                    "StatusCode": "Complete",
                }
            )
        answer = {"MetricDataResults": results, "Messages": []}
        _send(handler, 200, json.dumps(answer).encode(), "application/x-amz-json-1.0")

    @staticmethod
    def _json_error(handler: BaseHTTPRequestHandler, status: int, code: str, text: str) -> None:
        body = json.dumps({"__type": code, "Message": text}).encode()
        _send(handler, status, body, "application/x-amz-json-1.1")


# --------------------------------------------------------------------------------------------
# GCP

_REGION_PATH = re.compile(r"^/compute/v1/projects/(?P<project>[^/]+)/regions/(?P<region>[^/]+)$")


@dataclass
class FakeGcpRegions(_Server):
    """Quotas per region: region → metric → (limit, usage); `status` answers every request."""

    quotas: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    status: int = 200
    fail_next: list[int] = field(default_factory=list)  # statuses answered first, one each
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _Server.__init__(self)

    @property
    def endpoint(self) -> str:
        return self.url

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        path = urlsplit(handler.path).path
        with self.lock:
            self.seen.append(path)
            scripted = self.fail_next.pop(0) if self.fail_next else None
        if scripted is not None:
            error = {"error": {"code": scripted, "message": "scripted", "errors": []}}
            _send(handler, scripted, json.dumps(error).encode(), "application/json")
            return
        match = _REGION_PATH.match(path)
        if self.status != 200 or match is None or match["region"] not in self.quotas:
            status = self.status if self.status != 200 else 404
            error = {"error": {"code": status, "message": "scripted", "errors": []}}
            _send(handler, status, json.dumps(error).encode(), "application/json")
            return
        region = match["region"]
        answer = {
            "kind": "compute#region",
            "id": "1000",
            "name": region,
            "description": region,
            "status": "UP",
            "zones": [
                f"https://www.googleapis.com/compute/v1/projects/{match['project']}/zones/{region}-a"
            ],
            "quotas": [
                {"metric": metric, "limit": limit, "usage": usage}
                for metric, (limit, usage) in sorted(self.quotas[region].items())
            ],
            "selfLink": f"https://www.googleapis.com/compute/v1/projects/{match['project']}"
            f"/regions/{region}",
        }
        _send(handler, 200, json.dumps(answer).encode(), "application/json")


# --------------------------------------------------------------------------------------------
# Azure

_USAGES_PATH = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.Compute/locations/(?P<loc>[^/]+)/usages$"
)


@dataclass
class FakeAzureUsage(_Server):
    """vCPU usages per location: location → usage name → (limit, current); paged by 2."""

    tls_files: TlsFiles | None = None
    usages: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    status: int = 200
    page_size: int = 2

    def __post_init__(self) -> None:
        _Server.__init__(self)
        self.tls = self.tls_files

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        parts = urlsplit(handler.path)
        match = _USAGES_PATH.match(parts.path)
        if handler.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._error(handler, 401, "AuthenticationFailed")
            return
        if self.status != 200:
            self._error(handler, self.status, "AuthorizationFailed")
            return
        if match is None:
            self._error(handler, 404, "NotFound")
            return
        entries = [
            {
                "unit": "Count",
                "currentValue": current,
                "limit": limit,
                "name": {"value": name, "localizedValue": f"{name} vCPUs"},
            }
            for name, (limit, current) in self.usages.get(match["loc"], {}).items()
        ]
        skip = int(parse_qs(parts.query).get("$skip", ["0"])[0])
        page = entries[skip : skip + self.page_size]
        answer: dict[str, Any] = {"value": page}
        if skip + self.page_size < len(entries):
            answer["nextLink"] = (
                f"{self.url}{parts.path}?api-version=2024-07-01&$skip={skip + self.page_size}"
            )
        _send(handler, 200, json.dumps(answer).encode(), "application/json")

    @staticmethod
    def _error(handler: BaseHTTPRequestHandler, status: int, code: str) -> None:
        body = json.dumps({"error": {"code": code, "message": code}}).encode()
        _send(handler, status, body, "application/json")
