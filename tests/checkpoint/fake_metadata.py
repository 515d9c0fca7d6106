"""A loopback instance-metadata server speaking AWS IMDSv2, GCE metadata and Azure Scheduled Events.

Paths, headers, tokens and JSON shapes follow each provider's documentation:
  AWS   PUT /latest/api/token (X-aws-ec2-metadata-token-ttl-seconds) → token; GET
        /latest/meta-data/spot/instance-action and …/events/recommendations/rebalance
        with X-aws-ec2-metadata-token, 404 until set, 401 with a bad or expired token;
        …/events/maintenance/scheduled: the active scheduled events as a JSON list of
        {"NotBefore", "Code", "Description", "EventId", "NotAfter", "State"}, times as
        "21 Jan 2019 09:00:43 GMT" (EC2 User Guide, "Scheduled events for Amazon EC2
        instances", View scheduled events — instance metadata), `[]` with none.
  GCP   GET /computeMetadata/v1/instance/preempted with Metadata-Flavor: Google (403 without),
        "TRUE"/"FALSE", ETag; wait_for_change=true&last_etag=…&timeout_sec=… blocks for a change.
        …/instance/maintenance-event: NONE | MIGRATE_ON_HOST_MAINTENANCE |
        TERMINATE_ON_HOST_MAINTENANCE (cloud.google.com/compute/docs/metadata/
        getting-live-migration-notice); …/instance/upcoming-maintenance?alt=json: the window as
        JSON (can_reschedule, latest_window_start_time, maintenance_reasons, maintenance_status,
        type, window_end_time, window_start_time) or, with nothing scheduled, `{"error": "no
        notifications have been received yet, try again later"}` (cloud.google.com/compute/docs/
        instances/monitor-plan-host-maintenance-event).
  Azure GET /metadata/scheduledevents?api-version=… with Metadata: true → {"DocumentIncarnation",
        "Events": [...]}, the first answer after up to two minutes (`azure_first_call_s`:
        the call that enables the service); POST {"StartRequests": [{"EventId": …}]} acknowledges;
        GET /metadata/instance/compute/name?…&format=text → the VM's name.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


class MetadataState:
    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.tokens: set[str] = set()
        self.token_requests = 0
        self.aws_action: dict[str, Any] | None = None
        self.aws_rebalance: dict[str, Any] | None = None
        self.aws_scheduled: list[dict[str, Any]] = []
        self.gcp_preempted = False
        self.gcp_etag = 1
        self.gcp_maintenance = "NONE"
        self.gcp_upcoming: dict[str, Any] | None = None
        self.azure_events: list[dict[str, Any]] = []
        self.azure_incarnation = 1
        self.azure_vm_name = "job-vm_0"
        self.azure_acks: list[str] = []
        self.azure_first_call_s = 0.0  # how long the first Scheduled Events call takes
        self.azure_enabled = False
        self.azure_first_answered = threading.Event()
        self.requests: list[tuple[str, str]] = []

    def preempt_aws(self, action: str = "terminate") -> None:
        with self.lock:
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 120))
            self.aws_action = {"action": action, "time": when}

    def rebalance_aws(self) -> None:
        with self.lock:
            self.aws_rebalance = {"noticeTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def schedule_aws(self, code: str = "system-reboot", not_before_s: float = 7 * 86400,
                     state: str = "active") -> str:
        """An EC2 scheduled event `not_before_s` from now, its window 30 minutes long."""
        fmt = "%d %b %Y %H:%M:%S GMT"
        event_id = f"instance-event-{secrets.token_hex(8)}"
        with self.lock:
            self.aws_scheduled.append({
                "NotBefore": time.strftime(fmt, time.gmtime(time.time() + not_before_s)),
                "Code": code,
                "Description": {"system-reboot": "scheduled reboot",
                                "instance-retirement": "The instance is running on degraded "
                                "hardware"}.get(code, code),
                "EventId": event_id,
                "NotAfter": time.strftime(fmt, time.gmtime(time.time() + not_before_s + 1800)),
                "State": state,
            })  # fmt: skip
        return event_id

    def preempt_gcp(self) -> None:
        with self.lock:
            self.gcp_preempted = True
            self.gcp_etag += 1
            self.lock.notify_all()

    def maintain_gcp(self, value: str = "TERMINATE_ON_HOST_MAINTENANCE") -> None:
        with self.lock:
            self.gcp_maintenance = value

    def schedule_gcp_maintenance(self, start: str = "2026-12-02T19:00:01Z") -> None:
        with self.lock:
            self.gcp_upcoming = {
                "can_reschedule": "false", "latest_window_start_time": start,
                "maintenance_reasons": ["PLANNED_UPDATE"], "maintenance_status": "PENDING",
                "type": "SCHEDULED", "window_end_time": start.replace("T19", "T21"),
                "window_start_time": start,
            }  # fmt: skip

    def preempt_azure(self, resources: list[str] | None = None, event_type: str = "Preempt",
                      not_before_s: float = 30) -> str:
        event_id = f"{secrets.token_hex(4).upper()}-0000-0000-0000-{secrets.token_hex(6).upper()}"
        with self.lock:
            self.azure_events.append({
                "EventId": event_id,
                "EventType": event_type,
                "ResourceType": "VirtualMachine",
                "Resources": resources if resources is not None else [self.azure_vm_name],
                "EventStatus": "Scheduled",
                "NotBefore": time.strftime("%a, %d %b %Y %H:%M:%S GMT",
                                           time.gmtime(time.time() + not_before_s)),
                "Description": "",
                "EventSource": "Platform",
                "DurationInSeconds": -1,
            })
            self.azure_incarnation += 1
        return event_id


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _send(self, status: int, body: bytes | str, headers: dict[str, str] | None = None,
              content_type: str = "text/plain") -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self) -> None:
        state = self.server.state
        state.requests.append(("PUT", self.path))
        if self.path != "/latest/api/token":
            return self._send(404, "Not Found")
        if "X-Forwarded-For" in self.headers:
            return self._send(403, "Forbidden")
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        if not ttl or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return self._send(400, "Bad Request")
        token = secrets.token_urlsafe(32)
        with state.lock:
            state.tokens.add(token)
            state.token_requests += 1
        self._send(200, token, {"X-aws-ec2-metadata-token-ttl-seconds": ttl})

    def do_GET(self) -> None:
        state = self.server.state
        state.requests.append(("GET", self.path))
        url = urlparse(self.path)
        query = parse_qs(url.query)
        if url.path.startswith("/latest/meta-data/"):
            if self.headers.get("X-aws-ec2-metadata-token") not in state.tokens:
                return self._send(401, "Unauthorized")
            item = url.path.removeprefix("/latest/meta-data/")
            with state.lock:
                value = {"spot/instance-action": state.aws_action,
                         "events/recommendations/rebalance": state.aws_rebalance,
                         "events/maintenance/scheduled": list(state.aws_scheduled)}.get(item)
            if value is None:
                return self._send(404, "Not Found")
            return self._send(200, json.dumps(value))
        if url.path == "/computeMetadata/v1/instance/preempted":
            if self.headers.get("Metadata-Flavor") != "Google" or "X-Forwarded-For" in self.headers:
                return self._send(403, "Forbidden", content_type="text/html")
            with state.lock:
                if query.get("wait_for_change") == ["true"]:
                    last = query.get("last_etag", [""])[0]
                    timeout = float(query.get("timeout_sec", ["60"])[0])
                    deadline = time.monotonic() + timeout
                    while str(state.gcp_etag) == last and time.monotonic() < deadline:
                        state.lock.wait(deadline - time.monotonic())
                body = "TRUE" if state.gcp_preempted else "FALSE"
                etag = str(state.gcp_etag)
            return self._send(200, body, {"Metadata-Flavor": "Google", "ETag": etag},
                              "application/text")
        if url.path in ("/computeMetadata/v1/instance/maintenance-event",
                        "/computeMetadata/v1/instance/upcoming-maintenance"):
            if self.headers.get("Metadata-Flavor") != "Google":
                return self._send(403, "Forbidden", content_type="text/html")
            with state.lock:
                if url.path.endswith("maintenance-event"):
                    return self._send(200, state.gcp_maintenance,
                                      {"Metadata-Flavor": "Google"}, "application/text")
                upcoming = state.gcp_upcoming
            if upcoming is None:
                return self._send(200, json.dumps({"error": "no notifications have been "
                                                  "received yet, try again later"}),
                                  content_type="application/json")
            return self._send(200, json.dumps(upcoming), {"Metadata-Flavor": "Google"},
                              "application/json")
        if url.path == "/metadata/scheduledevents":
            if self.headers.get("Metadata") != "true":
                return self._send(400, json.dumps(
                    {"error": "Bad request. Required metadata header not specified"}),
                    content_type="application/json")
            if not query.get("api-version"):
                return self._send(400, json.dumps({"error": "Bad request. api-version was not "
                                                   "specified in the request"}),
                                  content_type="application/json")
            with state.lock:
                first, state.azure_enabled = not state.azure_enabled, True
            if first and state.azure_first_call_s:
                time.sleep(state.azure_first_call_s)  # enabling the service for this VM
            state.azure_first_answered.set()
            with state.lock:
                document = {"DocumentIncarnation": state.azure_incarnation,
                            "Events": list(state.azure_events)}
            return self._send(200, json.dumps(document), content_type="application/json")
        if url.path == "/metadata/instance/compute/name":
            if self.headers.get("Metadata") != "true":
                return self._send(400, "{}", content_type="application/json")
            return self._send(200, state.azure_vm_name)
        self._send(404, "Not Found")

    def do_POST(self) -> None:
        state = self.server.state
        state.requests.append(("POST", self.path))
        url = urlparse(self.path)
        if url.path != "/metadata/scheduledevents" or self.headers.get("Metadata") != "true":
            return self._send(400, "{}", content_type="application/json")
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        with state.lock:
            for request in body.get("StartRequests", []):
                state.azure_acks.append(request["EventId"])
                state.azure_events = [e for e in state.azure_events
                                      if e["EventId"] != request["EventId"]]
                state.azure_incarnation += 1
        self._send(200, "", content_type="application/json")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: MetadataState


class FakeMetadataServer:
    """Run on 127.0.0.1 on a free port; `endpoint` is its base URL."""

    def __init__(self) -> None:
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.state = MetadataState()
        self.state = self.httpd.state
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeMetadataServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.state.lock:
            self.state.lock.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()
