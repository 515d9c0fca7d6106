"""A loopback HTTPS fake of the Azure APIs router.prices.azure calls, in their real wire formats.

- Retail Prices API: `GET /api/retail/prices?$filter=...` → {BillingCurrency, CustomerEntityId,
  CustomerEntityType, Items, NextPageLink, Count}, paged through NextPageLink links back to here.
- Resource SKUs (ARM): `GET /subscriptions/{sub}/providers/Microsoft.Compute/skus?api-version=
  ...&$filter=location eq '...'` → {value: [ResourceSku], nextLink}.
- Resource Graph (ARM): `POST /providers/Microsoft.ResourceGraph/resources?api-version=...`
  → {totalRecords, count, resultTruncated, $skipToken?, data: [...]}.

It serves TLS with a throwaway CA made at test time, because azure-core's bearer-token policy
refuses to send a token over plain http; the real SDK clients trust that CA through
`connection_verify=<ca file>` and are otherwise used exactly as in production.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from azure.core.credentials import AccessToken
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

RETAIL_PATH = "/api/retail/prices"
GRAPH_PATH = "/providers/Microsoft.ResourceGraph/resources"
SKUS_PATH = re.compile(r"^/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.Compute/skus$")
TOKEN = "fake-arm-token"


# --------------------------------------------------------------------------------------------
# TLS material


@dataclass(frozen=True)
class TlsFiles:
    ca_path: Path
    cert_path: Path
    key_path: Path


def make_tls(directory: Path) -> TlsFiles:
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it, as PEM files."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "spotroute test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    files.ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


class FakeCredential:
    """A TokenCredential that hands out a fixed bearer token (or raises `error`)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        if self.error is not None:
            raise self.error
        return AccessToken(TOKEN, int(time.time()) + 3600)


# --------------------------------------------------------------------------------------------
# Wire-format builders


def vm_price_row(
    arm_sku: str,
    region: str,
    price: float,
    *,
    spot: bool = False,
    low_priority: bool = False,
    windows: bool = False,
    series: str = "NCads A100 v4",
    effective: str = "2024-01-01T00:00:00Z",
    **overrides: Any,
) -> dict[str, Any]:
    """One Retail Prices API item for a VM size, as the API returns it."""
    meter = arm_sku.removeprefix("Standard_").replace("_", " ")
    suffix = " Spot" if spot else " Low Priority" if low_priority else ""
    row: dict[str, Any] = {
        "currencyCode": "USD",
        "tierMinimumUnits": 0.0,
        "retailPrice": price,
        "unitPrice": price,
        "armRegionName": region,
        "location": region,
        "effectiveStartDate": effective,
        "meterId": f"meter-{arm_sku}-{region}-{suffix.strip() or 'std'}-{windows}",
        "meterName": meter + suffix,
        "productId": "DZH318Z08M22",
        "skuId": f"DZH318Z08M22/{len(meter):04d}",
        "productName": f"Virtual Machines {series} Series" + (" Windows" if windows else ""),
        "skuName": meter + suffix,
        "serviceName": "Virtual Machines",
        "serviceId": "DZH313Z7MMC8",
        "serviceFamily": "Compute",
        "unitOfMeasure": "1 Hour",
        "type": "Consumption",
        "isPrimaryMeterRegion": True,
        "armSkuName": arm_sku,
    }
    row.update(overrides)
    return row


def vm_sku(
    name: str,
    region: str,
    *,
    location_restricted: bool = False,
    restricted_zones: tuple[str, ...] = (),
    spot_capable: bool = True,
    zones: tuple[str, ...] = ("1", "2", "3"),
) -> dict[str, Any]:
    """One Resource SKUs API entry for a VM size in one region, as ARM returns it."""
    restrictions: list[dict[str, Any]] = []
    if location_restricted:
        restrictions.append(
            {
                "type": "Location",
                "values": [region],
                "restrictionInfo": {"locations": [region]},
                "reasonCode": "NotAvailableForSubscription",
            }
        )
    if restricted_zones:
        restrictions.append(
            {
                "type": "Zone",
                "values": [region],
                "restrictionInfo": {"locations": [region], "zones": list(restricted_zones)},
                "reasonCode": "NotAvailableForSubscription",
            }
        )
    return {
        "resourceType": "virtualMachines",
        "name": name,
        "tier": "Standard",
        "size": name.removeprefix("Standard_"),
        "family": "standardNCADSA100v4Family",
        "locations": [region],
        "locationInfo": [{"location": region, "zones": list(zones), "zoneDetails": []}],
        "capabilities": [
            {"name": "vCPUs", "value": "24"},
            {"name": "LowPriorityCapable", "value": "True" if spot_capable else "False"},
        ],
        "restrictions": restrictions,
    }


# --------------------------------------------------------------------------------------------
# The server


@dataclass
class Scripted:
    """A canned answer served instead of the normal one: status, headers, raw body, or a stall."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    stall_s: float = 0.0


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


class FakeAzure:
    """State and recorded requests of the fake; run it with `start()` / `close()`."""

    def __init__(self, tls: TlsFiles) -> None:
        self.tls = tls
        self.retail_rows: list[dict[str, Any]] = []
        self.retail_page_size = 100
        self.retail_script: list[Scripted] = []  # served first, one per request, in order
        self.retail_always: Scripted | None = None  # served to every retail request if set
        self.skus: dict[str, list[dict[str, Any]]] = {}  # region → Resource SKU entries
        self.skus_status = 200
        self.graph_rows: list[dict[str, Any]] = []
        self.graph_page_size = 1000
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeAzure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.tls.cert_path, self.tls.key_path)
        fake = self

        class Handler(_Handler):
            owner = fake

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        # Handshake in the handler thread, so one stalled client cannot block accept().
        server.socket = context.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- what tests assert on

    def requests_to(self, path_prefix: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.path.startswith(path_prefix)]

    def retail_filters(self) -> list[str]:
        return [
            r.query["$filter"][0] for r in self.requests_to(RETAIL_PATH) if "$filter" in r.query
        ]

    # -- handlers (called from server threads)

    def _record(self, handler: BaseHTTPRequestHandler, body: bytes) -> Received:
        parts = urlsplit(handler.path)
        received = Received(
            method=handler.command,
            path=parts.path,
            query=parse_qs(parts.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body,
        )
        with self._lock:
            self.received.append(received)
        return received

    def _next_scripted(self) -> Scripted | None:
        with self._lock:
            if self.retail_script:
                return self.retail_script.pop(0)
        return self.retail_always

    def serve_retail(self, req: Received) -> Scripted:
        scripted = self._next_scripted()
        if scripted is not None:
            if scripted.stall_s:
                self._release.wait(scripted.stall_s)
            return scripted
        odata = req.query.get("$filter", [""])[0]
        skip = int(req.query.get("$skip", ["0"])[0])
        matching = [row for row in self.retail_rows if _odata_matches(odata, row)]
        page = matching[skip : skip + self.retail_page_size]
        next_skip = skip + self.retail_page_size
        next_link = None
        if next_skip < len(matching):
            next_link = f"{self.url}{RETAIL_PATH}?" + urlencode(
                {"$filter": odata, "$skip": next_skip}
            )
        return _json(
            200,
            {
                "BillingCurrency": "USD",
                "CustomerEntityId": "Default",
                "CustomerEntityType": "Retail",
                "Items": page,
                "NextPageLink": next_link,
                "Count": len(page),
            },
        )

    def serve_skus(self, req: Received) -> Scripted:
        if req.headers.get("authorization") != f"Bearer {TOKEN}":
            return _arm_error(401, "AuthenticationFailed", "Authentication failed.")
        if self.skus_status != 200:
            return _arm_error(self.skus_status, "AuthorizationFailed", "Not allowed.")
        odata = req.query.get("$filter", [""])[0]
        match = re.fullmatch(r"location eq '([^']+)'", odata)
        entries = (
            self.skus.get(match.group(1), [])
            if match
            else [e for entries in self.skus.values() for e in entries]
        )
        return _json(200, {"value": entries})

    def serve_graph(self, req: Received) -> Scripted:
        if req.headers.get("authorization") != f"Bearer {TOKEN}":
            return _arm_error(401, "AuthenticationFailed", "Authentication failed.")
        request = json.loads(req.body)
        token = (request.get("options") or {}).get("$skipToken")
        start = int(token) if token else 0
        page = self.graph_rows[start : start + self.graph_page_size]
        answer: dict[str, Any] = {
            "totalRecords": len(self.graph_rows),
            "count": len(page),
            "resultTruncated": "false",
            "data": page,
            "facets": [],
        }
        if start + self.graph_page_size < len(self.graph_rows):
            answer["$skipToken"] = str(start + self.graph_page_size)
        return _json(200, answer)


class _Handler(BaseHTTPRequestHandler):
    owner: FakeAzure
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._dispatch(self.rfile.read(length))

    def _dispatch(self, body: bytes) -> None:
        req = self.owner._record(self, body)
        if req.method == "GET" and req.path == RETAIL_PATH:
            answer = self.owner.serve_retail(req)
        elif req.method == "GET" and SKUS_PATH.match(req.path):
            answer = self.owner.serve_skus(req)
        elif req.method == "POST" and req.path == GRAPH_PATH:
            answer = self.owner.serve_graph(req)
        else:
            answer = _arm_error(404, "NotFound", f"no fake for {req.method} {req.path}")
        try:
            self.send_response(answer.status)
            headers = {"Content-Type": "application/json", **answer.headers}
            headers["Content-Length"] = str(len(answer.body))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer.body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass  # the client gave up (timeout test)


def _json(status: int, payload: Any) -> Scripted:
    return Scripted(status=status, body=json.dumps(payload).encode())


def _arm_error(status: int, code: str, message: str) -> Scripted:
    return _json(status, {"error": {"code": code, "message": message}})


def _odata_matches(odata: str, row: dict[str, Any]) -> bool:
    """Evaluate the OData subset the client sends: `field eq 'v'`, `and`, one `or` group."""
    for name, value in re.findall(r"(\w+) eq '([^']*)'", odata.split("(")[0]):
        column = "type" if name == "priceType" else name
        if str(row.get(column, "")).lower() != value.lower():
            return False
    if "(" in odata:
        alternatives = re.findall(r"(\w+) eq '([^']*)'", odata.split("(", 1)[1])
        if not any(str(row.get(n, "")).lower() == v.lower() for n, v in alternatives):
            return False
    return True
