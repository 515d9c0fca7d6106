"""A loopback fake of the GCP Cloud Billing Catalog and Compute Engine REST APIs.

It speaks the real JSON wire format (camelCase fields, `nextPageToken` paging, aggregated
`items` keyed by "zones/<zone>", Google's `{"error": {...}}` bodies), so the real
google-cloud-billing and google-cloud-compute clients are pointed at it over plain HTTP.
Failures are scripted per API: status codes, stalls, and malformed bodies.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

COMPUTE_SERVICE_ID = "6F81-5844-456A"

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}

_SKUS_PATH = re.compile(r"^/v1/services/(?P<service>[^/]+)/skus$")
_AGGREGATED_PATH = re.compile(
    r"^/compute/v1/projects/(?P<project>[^/]+)/aggregated/(?P<kind>machineTypes|acceleratorTypes)$"
)
# The Compute list filter: `(name = "a2-ultragpu-8g") OR (name = "n1-standard-8")`.
_FILTER_NAME = re.compile(r'name\s*(?:=|eq)\s*"?([A-Za-z0-9._-]+)"?')


def sku(
    description: str,
    *,
    resource_group: str,
    usage_type: str,
    regions: list[str],
    units: int = 0,
    nanos: int = 0,
    usage_unit: str = "h",
    sku_id: str = "0000-0000-0000",
    resource_family: str = "Compute",
) -> dict[str, Any]:
    """One SKU as the Billing Catalog API returns it (one tier starting at 0)."""
    unit_description = {"h": "hour", "GiBy.h": "gibibyte hour"}.get(usage_unit, usage_unit)
    return {
        "name": f"services/{COMPUTE_SERVICE_ID}/skus/{sku_id}",
        "skuId": sku_id,
        "description": description,
        "category": {
            "serviceDisplayName": "Compute Engine",
            "resourceFamily": resource_family,
            "resourceGroup": resource_group,
            "usageType": usage_type,
        },
        "serviceRegions": regions,
        "pricingInfo": [
            {
                "summary": "",
                "pricingExpression": {
                    "usageUnit": usage_unit,
                    "displayQuantity": 1,
                    "tieredRates": [
                        {
                            "startUsageAmount": 0,
                            "unitPrice": {
                                "currencyCode": "USD",
                                "units": str(units),
                                "nanos": nanos,
                            },
                        }
                    ],
                    "usageUnitDescription": unit_description,
                    "baseUnit": "s" if usage_unit == "h" else "By.s",
                    "baseUnitDescription": "second" if usage_unit == "h" else "byte second",
                    "baseUnitConversionFactor": 3600 if usage_unit == "h" else 3865470566400,
                },
                "currencyConversionRate": 1,
                "effectiveTime": "2025-06-01T10:00:00.000Z",
            }
        ],
        "serviceProviderName": "Google",
        "geoTaxonomy": {"type": "MULTI_REGIONAL", "regions": regions},
    }


def machine_type(name: str, zone: str, *, guest_cpus: int, memory_mb: int) -> dict[str, Any]:
    """One machine type entry of an aggregated machineTypes list."""
    return {
        "kind": "compute#machineType",
        "id": str(abs(hash((name, zone))) % 10**12),
        "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
        "name": name,
        "description": f"{guest_cpus} vCPUs",
        "guestCpus": guest_cpus,
        "memoryMb": memory_mb,
        "maximumPersistentDisks": 128,
        "maximumPersistentDisksSizeGb": "263168",
        "zone": zone,
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/p/zones/{zone}/machineTypes/{name}",
        "isSharedCpu": False,
    }


def accelerator_type(name: str, zone: str, *, max_cards: int) -> dict[str, Any]:
    """One accelerator type entry of an aggregated acceleratorTypes list."""
    return {
        "kind": "compute#acceleratorType",
        "id": str(abs(hash((name, zone))) % 10**12),
        "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
        "name": name,
        "description": name,
        "zone": f"https://www.googleapis.com/compute/v1/projects/p/zones/{zone}",
        "selfLink": (
            f"https://www.googleapis.com/compute/v1/projects/p/zones/{zone}/acceleratorTypes/{name}"
        ),
        "maximumCardsPerInstance": max_cards,
    }


@dataclass
class Fault:
    """What the fake does instead of answering, for the next `times` requests to one API."""

    times: int
    status: int = 503
    stall_s: float = 0.0
    body: bytes | None = None
    message: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    page_token: str | None = None  # only requests for this page; None: any page


@dataclass
class Seen:
    """One request the fake received."""

    api: str  # "skus" | "machineTypes" | "acceleratorTypes"
    path: str
    query: dict[str, list[str]]


class FakeGcp:
    """The fake server: set pages and faults, start it, point the clients at `endpoint`."""

    def __init__(self) -> None:
        self.sku_pages: list[list[dict[str, Any]]] = [[]]
        # Each page maps a zone name to the entries offered there.
        self.machine_type_pages: list[dict[str, list[dict[str, Any]]]] = [{}]
        self.accelerator_type_pages: list[dict[str, list[dict[str, Any]]]] = [{}]
        self.faults: dict[str, list[Fault]] = {}
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- scripting -------------------------------------------------------------------------
    def fail(
        self,
        api: str,
        status: int,
        *,
        times: int = 1,
        message: str | None = None,
        headers: dict[str, str] | None = None,
        page_token: str | None = None,
    ) -> None:
        """Answer the next `times` requests to `api` (or to one page) with a Google error."""
        fault = Fault(
            times, status=status, message=message, headers=headers or {}, page_token=page_token
        )
        self.faults.setdefault(api, []).append(fault)

    def stall(self, api: str, seconds: float, *, times: int = 1) -> None:
        """Hold the next `times` requests to `api` for `seconds` before answering anything."""
        self.faults.setdefault(api, []).append(Fault(times, stall_s=seconds))

    def malformed(self, api: str, body: bytes, *, times: int = 1) -> None:
        """Answer the next `times` requests to `api` with 200 and `body` as is."""
        self.faults.setdefault(api, []).append(Fault(times, status=200, body=body))

    def requests_to(self, api: str) -> list[Seen]:
        """The requests received by one API, in order."""
        with self._lock:
            return [s for s in self.seen if s.api == api]

    # --- lifecycle -------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """The base URL the clients use, with its scheme: http://127.0.0.1:<port>."""
        assert self._server is not None, "start() the fake first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeGcp:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGcp:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- serving ---------------------------------------------------------------------------
    def _take_fault(self, api: str, page_token: str) -> Fault | None:
        with self._lock:
            for fault in self.faults.get(api, []):
                if fault.times > 0 and fault.page_token in (None, page_token):
                    fault.times -= 1
                    return fault
            return None

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        query = parse_qs(parts.query)
        api, answer = self._route(parts.path, query)
        with self._lock:
            self.seen.append(Seen(api, parts.path, query))
        fault = self._take_fault(api, query.get("pageToken", [""])[0])
        if fault is not None:
            if fault.stall_s:
                time.sleep(fault.stall_s)
                return  # the client has given up by now; close without answering
            if fault.body is not None:
                _send(handler, fault.status, fault.body, {})
                return
            message = fault.message or f"scripted {fault.status}"
            _send_error(handler, fault.status, message, fault.headers)
            return
        if answer is None:
            _send_error(handler, 404, f"The requested URL {parts.path} was not found.", {})
            return
        _send(handler, 200, json.dumps(answer).encode(), {})

    def _route(self, path: str, query: dict[str, list[str]]) -> tuple[str, dict[str, Any] | None]:
        match = _SKUS_PATH.match(path)
        if match:
            return "skus", self._skus_page(query)
        match = _AGGREGATED_PATH.match(path)
        if match:
            kind = match.group("kind")
            pages = (
                self.machine_type_pages if kind == "machineTypes" else self.accelerator_type_pages
            )
            return kind, _aggregated_page(kind, match.group("project"), pages, query)
        return "unknown", None

    def _skus_page(self, query: dict[str, list[str]]) -> dict[str, Any]:
        index = _page_index(query)
        next_token = f"page-{index + 1}" if index + 1 < len(self.sku_pages) else ""
        return {"skus": self.sku_pages[index], "nextPageToken": next_token}


def _page_index(query: dict[str, list[str]]) -> int:
    token = query.get("pageToken", [""])[0]
    return int(token.removeprefix("page-")) if token else 0


def _aggregated_page(
    kind: str,
    project: str,
    pages: list[dict[str, list[dict[str, Any]]]],
    query: dict[str, list[str]],
) -> dict[str, Any]:
    index = _page_index(query)
    wanted = set(_FILTER_NAME.findall(query.get("filter", [""])[0]))
    items: dict[str, Any] = {}
    for zone, entries in pages[index].items():
        kept = [e for e in entries if not wanted or e["name"] in wanted]
        if kept:
            items[f"zones/{zone}"] = {kind: kept}
        else:
            items[f"zones/{zone}"] = {
                "warning": {
                    "code": "NO_RESULTS_ON_PAGE",
                    "message": "There are no results for scope 'zones/" + zone + "' on this page.",
                    "data": [{"key": "scope", "value": f"zones/{zone}"}],
                }
            }
    answer: dict[str, Any] = {
        "kind": f"compute#{kind[:-1]}AggregatedList",
        "id": f"projects/{project}/aggregated/{kind}",
        "items": items,
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/{project}/aggregated/{kind}",
    }
    if index + 1 < len(pages):
        answer["nextPageToken"] = f"page-{index + 1}"
    return answer


def _send(
    handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json; charset=UTF-8")
    handler.send_header("Content-Length", str(len(body)))
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def _send_error(
    handler: BaseHTTPRequestHandler, status: int, message: str, headers: dict[str, str]
) -> None:
    reason = {403: "forbidden", 429: "rateLimitExceeded", 503: "backendError"}.get(status, "error")
    body = {
        "error": {
            "code": status,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": reason}],
            "status": _STATUS_NAMES.get(status, "UNKNOWN"),
        }
    }
    _send(handler, status, json.dumps(body).encode(), headers)
