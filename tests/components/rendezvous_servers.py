"""Servers the rendezvous tests run against on 127.0.0.1: a metadata server that hands out access
tokens as GCE's and Azure's do, and Azurite over HTTPS with OAuth (it accepts only bearer tokens
with a storage audience, a Microsoft issuer and a valid lifetime — the signature is not checked in
its `basic` mode)."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from xml.etree import ElementTree

from tests.checkpoint.servers import AZURITE_ACCOUNT, AZURITE_BLOB, free_port

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def azure_storage_token(lifetime_s: int = 3600) -> str:
    """A JWT shaped like the one IMDS issues for https://storage.azure.com/ (unsigned)."""
    now = int(time.time())
    claims = {"aud": "https://storage.azure.com", "iss": f"https://sts.windows.net/{TENANT}/",
              "iat": now - 60, "nbf": now - 60, "exp": now + lifetime_s, "tid": TENANT,
              "oid": "0b0b0b0b-1111-2222-3333-444444444444", "appid": "client-1234"}
    header = {"alg": "RS256", "typ": "JWT"}
    return ".".join([_b64(json.dumps(header).encode()), _b64(json.dumps(claims).encode()),
                     _b64(b"not-checked")])


class _TokenHandler(BaseHTTPRequestHandler):
    server: _TokenHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        parsed = urlparse(self.path)
        flavor = self.headers.get("Metadata-Flavor") or self.headers.get("Metadata") or ""
        self.server.requests.append((parsed.path, flavor, parsed.query))
        if parsed.path == "/computeMetadata/v1/instance/service-accounts/default/token":
            if flavor != "Google":
                self._reply(403, {"error": "Missing Metadata-Flavor:Google header"})
                return
            self._reply(200, {"access_token": "ya29.fake", "expires_in": 3599,
                              "token_type": "Bearer"})
        elif parsed.path == "/metadata/identity/oauth2/token":
            if flavor != "true":
                self._reply(400, {"error": "invalid_request", "error_description":
                                  "Required metadata header not specified"})
                return
            self._reply(200, {"access_token": azure_storage_token(), "expires_in": "3599",
                              "token_type": "Bearer", "resource": "https://storage.azure.com/"})
        else:
            self._reply(404, {"error": "not found"})

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _TokenHTTPServer(ThreadingHTTPServer):
    requests: list[tuple[str, str, str]]


class TokenServer:
    """GCE `service-accounts/default/token` and Azure IMDS `identity/oauth2/token`; records
    (path, Metadata-Flavor or Metadata header, query) of every request."""

    def __init__(self) -> None:
        self.httpd = _TokenHTTPServer(("127.0.0.1", 0), _TokenHandler)
        self.httpd.requests = []
        self.requests = self.httpd.requests
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def azure_token(self) -> str:
        return azure_storage_token()

    def __enter__(self) -> TokenServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@dataclass
class AzuriteOAuth:
    """Azurite's blob service over HTTPS, OAuth on; `endpoint` includes the account."""

    ACCOUNT = AZURITE_ACCOUNT
    endpoint: str
    cert: Path
    context: ssl.SSLContext

    def _call(self, method: str, url: str, token: str) -> bytes:
        request = urllib.request.Request(url, method=method, headers={
            "Authorization": f"Bearer {token}", "x-ms-version": "2021-08-06"})
        with urllib.request.urlopen(request, context=self.context, timeout=30) as reply:
            return bytes(reply.read())

    def create_container(self, name: str, token: str) -> None:
        self._call("PUT", f"{self.endpoint}/{name}?restype=container", token)

    def blob_names(self, container: str, prefix: str, token: str) -> list[str]:
        xml = self._call("GET", f"{self.endpoint}/{container}?restype=container&comp=list"
                                f"&prefix={prefix}", token)
        return sorted(n.text or "" for n in ElementTree.fromstring(xml).iter("Name"))


@contextmanager
def azurite_https(workdir: Path) -> Iterator[AzuriteOAuth]:
    if not AZURITE_BLOB.exists():
        raise RuntimeError(f"{AZURITE_BLOB} is missing — run `bash scripts/ensure-test-servers.sh`")
    workdir.mkdir(parents=True, exist_ok=True)
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    port = free_port()
    data = tempfile.mkdtemp(prefix="azurite-oauth-")
    log = workdir / "azurite.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [str(AZURITE_BLOB), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
             data, "--silent", "--disableTelemetry", "--skipApiVersionCheck", "--loose",
             "--oauth", "basic", "--cert", str(cert), "--key", str(key)],
            stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    context = ssl.create_default_context(cafile=str(cert))
    server = AzuriteOAuth(f"https://127.0.0.1:{port}/{AZURITE_ACCOUNT}", cert, context)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"https://127.0.0.1:{port}/", context=context, timeout=2)
                break
            except urllib.error.HTTPError:
                break  # it answered
            except OSError as error:
                if process.poll() is not None or time.monotonic() > deadline:
                    problem = log.read_text()[-2000:]
                    raise RuntimeError(f"Azurite did not start: {problem}") from error
                time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(data, ignore_errors=True)
