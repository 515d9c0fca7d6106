"""A storage server behind a proxy that refuses a new grant's requests for its first seconds.

The clouds take a while to put a new grant in force, and refuse the identity meanwhile: GCP IAM
"typically 2 minutes, potentially 7 minutes or longer"
(https://cloud.google.com/iam/docs/access-change-propagation), Azure role assignments up to 10
minutes (https://learn.microsoft.com/azure/role-based-access-control/troubleshooting), AWS IAM is
eventually consistent (https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_general.html).
A job's grant on its checkpoint prefix is made by its stack just before the nodes boot, so a
node's first requests can meet exactly that. `FreshGrantProxy` stands in front of a real server
(moto, fake-gcs-server, Azurite) and answers every request with the provider's own refusal until
`refuse_s` after it started (the grant), then passes requests through unchanged.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

# Each provider's answer to a request its grant does not (yet) allow.
# S3: 403 AccessDenied, https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html
# Cloud Storage JSON API: 403 forbidden, naming the missing permission,
#   https://cloud.google.com/storage/docs/json_api/v1/status-codes#403-forbidden
# Blob Storage: 403 AuthorizationPermissionMismatch ("This request is not authorized to perform
#   this operation using this permission."), with x-ms-error-code,
#   https://learn.microsoft.com/rest/api/storageservices/blob-service-error-codes
REFUSALS: dict[str, tuple[str, dict[str, str], bytes]] = {
    "s3": (
        "application/xml",
        {},
        (
            b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
            b"<Message>Access Denied</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>"
        ),
    ),
    "gcs": (
        "application/json; charset=UTF-8",
        {},
        json.dumps(
            {
                "error": {
                    "code": 403,
                    "message": "sr-llm@acme-ml.iam.gserviceaccount.com does not have"
                    " storage.objects.create access to the Google Cloud Storage object. Permission"
                    " 'storage.objects.create' denied on resource (or it may not exist).",
                    "errors": [{"domain": "global", "reason": "forbidden", "message": "denied"}],
                }
            }
        ).encode(),
    ),
    "azure": (
        "application/xml",
        {"x-ms-error-code": "AuthorizationPermissionMismatch"},
        (
            b'<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthorizationPermissionMismatch'
            b"</Code><Message>This request is not authorized to perform this operation using this"
            b" permission.</Message></Error>"
        ),
    ),
}
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection"}


class _Handler(BaseHTTPRequestHandler):
    server: _ProxyServer
    protocol_version = "HTTP/1.1"  # keep-alive, and `Expect: 100-continue` answered

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        self._pass()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_GET

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline().strip():  # trailers
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _pass(self) -> None:
        body = self._body()
        proxy = self.server.proxy
        if proxy.refusing():
            with proxy.lock:
                proxy.refused += 1
            content_type, extra, refusal = REFUSALS[proxy.kind]
            self._reply(403, {"Content-Type": content_type, **extra}, refusal)
            return
        with proxy.lock:
            proxy.forwarded += 1
        upstream = urlparse(proxy.upstream)
        port = upstream.port or (443 if upstream.scheme == "https" else 80)
        connection: http.client.HTTPConnection = (
            http.client.HTTPSConnection(
                upstream.hostname or "", port, timeout=60, context=proxy.upstream_context
            )
            if upstream.scheme == "https"
            else http.client.HTTPConnection(upstream.hostname or "", port, timeout=60)
        )
        try:
            connection.putrequest(
                self.command, self.path, skip_host=True, skip_accept_encoding=True
            )
            for name, value in self.headers.items():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    connection.putheader(name, value)
            connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            reply = connection.getresponse()
            data = reply.read()
            headers = {k: v for k, v in reply.getheaders() if k.lower() not in _HOP_BY_HOP}
        finally:
            connection.close()
        self._reply(reply.status, headers, data, head=self.command == "HEAD")

    def _reply(self, status: int, headers: dict[str, str], data: bytes, head: bool = False) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if not (name.lower() == "content-length" and not head):
                self.send_header(name, value)
        if not head:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    proxy: FreshGrantProxy


class FreshGrantProxy:
    """`endpoint` refuses every request as `kind` (s3, gcs, azure) does for `refuse_s` from its
    start, then forwards to `upstream`; counts what it `refused` and `forwarded`. With `cert` and
    `key` it serves HTTPS (Azurite with OAuth runs on HTTPS); `upstream_context` verifies an
    HTTPS upstream."""

    def __init__(
        self,
        upstream: str,
        kind: str,
        refuse_s: float,
        *,
        cert: Path | None = None,
        key: Path | None = None,
        upstream_context: ssl.SSLContext | None = None,
    ) -> None:
        self.upstream, self.kind, self.refuse_s = upstream.rstrip("/"), kind, refuse_s
        self.upstream_context = upstream_context
        self.refused = self.forwarded = 0
        self.lock = threading.Lock()
        self.granted_at = time.monotonic()
        self.httpd = _ProxyServer(("127.0.0.1", 0), _Handler)
        self.httpd.proxy = self
        scheme = "http"
        if cert is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(cert), str(key) if key else None)
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        # The upstream's path (Azurite's account) stays part of every URL the client builds.
        path = urlparse(self.upstream).path
        self.endpoint = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}{path}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def refusing(self) -> bool:
        return time.monotonic() - self.granted_at < self.refuse_s

    def __enter__(self) -> FreshGrantProxy:
        self.granted_at = time.monotonic()  # the grant is made as the proxy starts
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
