"""Preemption notices: each cloud's instance metadata endpoint, and SIGTERM on the local target.

Every source has the same shape: `poll()` makes one check (it may wait up to a few seconds) and
returns a `Notice` or None; `acknowledge(notice)` tells the platform the job is ready to go (only
Azure has such a call). Only the standard library is used (urllib), so a training image needs
nothing extra.

  aws    IMDSv2: PUT /latest/api/token, then GET /latest/meta-data/spot/instance-action
         (404 until AWS schedules a stop/terminate, ~2 minutes ahead),
         /latest/meta-data/events/maintenance/scheduled (on-demand too: an active
         instance-stop, instance-retirement, instance-reboot or system-reboot, from `NotBefore`
         on; a risk when first seen, terminal AWS_SCHEDULED_LEAD_S before it) and
         /latest/meta-data/events/recommendations/rebalance (elevated risk, no deadline).
  gcp    GET /computeMetadata/v1/instance/preempted?wait_for_change=true with
         `Metadata-Flavor: Google`: "TRUE" once the VM is preempted (~30 s before it stops);
         then instance/maintenance-event: TERMINATE_ON_HOST_MAINTENANCE 60 s before host
         maintenance stops the VM (a GPU VM cannot live-migrate); and
         instance/upcoming-maintenance?alt=json: a scheduled window (no deadline yet, a risk).
  azure  GET /metadata/scheduledevents with `Metadata: true`: a `Preempt` (>= 30 s ahead),
         `Terminate`, `Reboot` or `Redeploy` event for this VM; acknowledged once the state is
         saved with POST {"StartRequests": [{"EventId": ...}]}. The first call of a VM may
         take up to two minutes (it enables the service): it may wait that long, on the
         watcher's thread, never the training thread's.
  local  SIGTERM (the local target stops a job with SIGTERM, then SIGKILL after a grace period).
"""

from __future__ import annotations

import json
import signal
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

AWS_ENDPOINT = "http://169.254.169.254"
GCP_ENDPOINT = "http://metadata.google.internal"
AZURE_ENDPOINT = "http://169.254.169.254"
AZURE_API_VERSION = "2020-07-01"
# "Scheduled Events is enabled for your service the first time you make a request for events.
# You should expect a delayed response in your first call of up to two minutes" (Azure, Scheduled
# Events for Linux VMs, "Enabling and disabling Scheduled Events").
AZURE_FIRST_CALL_TIMEOUT_S = 130.0
AWS_TOKEN_TTL_S = 21600  # six hours, the IMDSv2 maximum
# EC2 scheduled events after which this instance stops running the job: stopped (EBS-backed) or
# terminated (instance store) by a stop or a retirement, or rebooted — user data does not run
# again on a reboot, so the job does not resume there ("Scheduled events for Amazon EC2
# instances", docs.aws.amazon.com/AWSEC2/latest/UserGuide/monitoring-instances-status-check_sched
# .html). `system-maintenance` only affects the network or power for a while: a risk.
AWS_SCHEDULED_CODES = ("instance-stop", "instance-retirement", "instance-reboot", "system-reboot")
# A scheduled event turns terminal this long before its NotBefore: time for a save of a job
# larger than a spot notice's two minutes allow (the event itself is days or weeks ahead).
AWS_SCHEDULED_LEAD_S = 600.0
# GCE: the maintenance-event value "changes 60 seconds before a maintenance event starts"; for a
# VM with GPUs, host maintenance terminates it (Compute Engine, "Query metadata server for
# maintenance event notices", cloud.google.com/compute/docs/metadata/getting-live-migration-notice).
GCP_TERMINATE = "TERMINATE_ON_HOST_MAINTENANCE"
GCP_MAINTENANCE_LEAD_S = 60.0
# Azure Scheduled Events after which this VM stops running the job: evicted (Preempt), deleted
# (Terminate), restarted (Reboot) or moved to another host (Redeploy); Freeze only pauses it for
# seconds (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events).
AZURE_TERMINAL_EVENTS = ("Preempt", "Terminate", "Reboot", "Redeploy")
# The kinds after which the machine goes away: save, write the marker, exit.
TERMINAL_KINDS = frozenset(
    {"terminate", "stop", "hibernate", "preempted", GCP_TERMINATE, *AZURE_TERMINAL_EVENTS,
     *AWS_SCHEDULED_CODES, "sigterm"}
)  # fmt: skip
# Seconds from a notice to the machine going away where the notice names no time: GCE stops a
# preempted VM ~30 s later, Azure's NotBefore is >= 30 s ahead, the local target sends SIGKILL
# 10 s after SIGTERM; AWS names the time (two minutes ahead).
GRACE_S = {"aws": 120.0, "gcp": 30.0, "azure": 30.0, "local": 10.0}


@dataclass(frozen=True, slots=True)
class Notice:
    """A preemption (or rebalance) notice as one source reported it."""

    cloud: str  # aws | gcp | azure | local
    # aws: terminate | stop | hibernate | rebalance | instance-stop | instance-retirement |
    # instance-reboot | system-reboot | scheduled-event (one of those, or system-maintenance,
    # further ahead: a risk); gcp: preempted | TERMINATE_ON_HOST_MAINTENANCE
    # | upcoming-maintenance | MIGRATE_ON_HOST_MAINTENANCE; azure: Preempt | Terminate | Reboot |
    # Redeploy; local: sigterm
    kind: str
    notice_time: datetime  # when this process saw the notice (UTC)
    deadline: datetime | None = None  # when the platform acts, where it says so (UTC)
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        """True when the machine is going away (a rebalance recommendation is not terminal)."""
        return self.kind in TERMINAL_KINDS

    def seconds_left(self, now: datetime) -> float | None:
        """Seconds until the platform acts: its deadline, else the cloud's usual grace period."""
        if not self.terminal:
            return None
        if self.deadline is not None:
            return (self.deadline - now).total_seconds()
        grace = GRACE_S.get(self.cloud)
        return None if grace is None else grace - (now - self.notice_time).total_seconds()

    def to_json(self) -> dict[str, Any]:
        return {
            "cloud": self.cloud,
            "kind": self.kind,
            "notice_time": self.notice_time.isoformat(),
            "deadline": self.deadline.isoformat() if self.deadline else None,
            "detail": self.detail,
        }


class NoticeSource(Protocol):
    cloud: str

    def poll(self) -> Notice | None:
        """One check; may block up to the source's wait time (seconds)."""
        ...

    def acknowledge(self, notice: Notice) -> None:
        """Tell the platform the job has saved and may be stopped now (no-op where unsupported)."""
        ...

    def close(self) -> None: ...


class MetadataUnavailable(Exception):
    """The metadata endpoint did not answer (not on that cloud, or the network is down)."""


def _now() -> datetime:
    return datetime.now(UTC)


def _parse_iso(value: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _parse_http_date(value: str) -> datetime | None:
    """An RFC 2822 date ("21 Jan 2019 09:00:43 GMT", "Mon, 19 Sep 2016 18:29:47 GMT"), in UTC;
    month names are read the same in every locale."""
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _request(
    url: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    timeout_s: float = 2.0,
) -> tuple[int, bytes, dict[str, str]]:
    """(status, body, headers); 4xx answers are returned, not raised. Never uses a proxy."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    # Metadata endpoints are link-local: an HTTP(S)_PROXY from the environment must not apply.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout_s) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read(), dict(error.headers or {})
    except (urllib.error.URLError, OSError) as error:
        raise MetadataUnavailable(f"{method} {url}: {error}") from error


class AwsNotices:
    """EC2 spot instance-action, scheduled events and rebalance recommendation through IMDSv2."""

    cloud = "aws"

    def __init__(
        self, endpoint: str = AWS_ENDPOINT, *, timeout_s: float = 2.0,
        scheduled_lead_s: float = AWS_SCHEDULED_LEAD_S,
    ) -> None:  # fmt: skip
        self.endpoint = endpoint.rstrip("/")
        self.timeout_s = timeout_s
        self.scheduled_lead_s = scheduled_lead_s
        self._token: str | None = None
        self._rebalance_seen: str | None = None
        self._scheduled_seen: set[str] = set()  # events already reported as a risk (EventId)

    def _fetch_token(self) -> str:
        status, body, _ = _request(
            f"{self.endpoint}/latest/api/token",
            method="PUT",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": str(AWS_TOKEN_TTL_S)},
            timeout_s=self.timeout_s,
        )
        if status != 200:
            raise MetadataUnavailable(f"IMDSv2 token request answered HTTP {status}")
        return body.decode().strip()

    def _get(self, path: str) -> tuple[int, bytes]:
        for _attempt in range(2):
            if self._token is None:
                self._token = self._fetch_token()
            status, body, _ = _request(
                f"{self.endpoint}/latest/meta-data/{path}",
                headers={"X-aws-ec2-metadata-token": self._token},
                timeout_s=self.timeout_s,
            )
            if status != 401:  # 401: the token expired; fetch a new one once
                return status, body
            self._token = None
        return status, body

    def poll(self) -> Notice | None:
        status, body = self._get("spot/instance-action")
        if status == 200:
            action = json.loads(body)
            return Notice(
                cloud="aws",
                kind=str(action.get("action", "terminate")),
                notice_time=_now(),
                deadline=_parse_iso(str(action.get("time", ""))),
                detail=action,
            )
        scheduled = self._scheduled()
        if scheduled is not None:
            return scheduled
        status, body = self._get("events/recommendations/rebalance")
        if status == 200:
            recommendation = json.loads(body)
            notice_time = str(recommendation.get("noticeTime", ""))
            if notice_time != self._rebalance_seen:  # report each recommendation once
                self._rebalance_seen = notice_time
                return Notice(cloud="aws", kind="rebalance", notice_time=_now(),
                              detail=recommendation)
        return None

    def _scheduled(self) -> Notice | None:
        """The active scheduled event that ends this instance's job soonest: terminal from
        `scheduled_lead_s` before its NotBefore, a risk (reported once) before that.

        The category holds a JSON list of the instance's active events, each {"NotBefore",
        "Code", "Description", "EventId", "NotAfter", "State"} with times as "21 Jan 2019
        09:00:43 GMT"; completed and canceled ones move to events/maintenance/history (EC2,
        "Instance metadata categories" and "View scheduled events").
        """
        status, body = self._get("events/maintenance/scheduled")
        if status != 200:
            return None
        try:
            events = json.loads(body or b"[]")
        except ValueError:
            return None
        now = _now()
        found: list[tuple[datetime, dict[str, Any]]] = []
        for event in events if isinstance(events, list) else []:
            if not isinstance(event, dict) or str(event.get("State", "active")) != "active":
                continue
            found.append((_parse_http_date(str(event.get("NotBefore", ""))) or now, event))
        if not found:
            return None
        ending = [(at, e) for at, e in found if e.get("Code") in AWS_SCHEDULED_CODES]
        at, event = min(ending or found, key=lambda pair: pair[0])
        code = str(event.get("Code") or "")
        if code in AWS_SCHEDULED_CODES and (at - now).total_seconds() <= self.scheduled_lead_s:
            return Notice(cloud="aws", kind=code, notice_time=now, deadline=at, detail=event)
        event_id = str(event.get("EventId") or code)
        if event_id in self._scheduled_seen:
            return None
        self._scheduled_seen.add(event_id)
        return Notice(cloud="aws", kind="scheduled-event", notice_time=now, deadline=at,
                      detail=event)  # fmt: skip

    def acknowledge(self, notice: Notice) -> None:
        return None  # EC2 has no acknowledgement: the instance stops at action["time"]

    def close(self) -> None:
        return None


class GcpNotices:
    """GCE `instance/preempted` (long-polled with wait_for_change), then, without waiting,
    `instance/maintenance-event` and `instance/upcoming-maintenance`."""

    cloud = "gcp"
    poll_waits = True  # poll() itself long-polls: the watcher polls again at once

    def __init__(self, endpoint: str = GCP_ENDPOINT, *, wait_s: int = 5) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.wait_s = wait_s
        self._etag: str | None = None
        self._seen: set[str] = set()  # non-terminal notices already reported (each once)

    def _get(self, key: str, query: str = "", wait_s: float = 0.0) -> tuple[int, bytes, str]:
        url = f"{self.endpoint}/computeMetadata/v1/instance/{key}" + (f"?{query}" if query else "")
        status, body, headers = _request(
            url, headers={"Metadata-Flavor": "Google"}, timeout_s=wait_s + 5
        )
        return status, body, headers.get("ETag") or headers.get("etag") or ""

    def poll(self) -> Notice | None:
        query = ""
        if self._etag is not None:
            # Blocks until the value changes or timeout_sec passes, so the watcher loop is cheap.
            query = f"wait_for_change=true&timeout_sec={self.wait_s}&last_etag={self._etag}"
        status, body, etag = self._get("preempted", query, self.wait_s)
        if status != 200:
            raise MetadataUnavailable(f"GCE metadata answered HTTP {status}")
        self._etag = etag or self._etag or "0"
        if body.decode().strip().upper() == "TRUE":
            return Notice(cloud="gcp", kind="preempted", notice_time=_now())
        return self._maintenance() or self._upcoming()

    def _maintenance(self) -> Notice | None:
        """Host maintenance 60 s ahead: TERMINATE_ON_HOST_MAINTENANCE stops a GPU VM."""
        status, body, _ = self._get("maintenance-event")
        value = body.decode().strip() if status == 200 else "NONE"
        now = _now()
        if value == GCP_TERMINATE:
            return Notice(cloud="gcp", kind=value, notice_time=now,
                          deadline=now + timedelta(seconds=GCP_MAINTENANCE_LEAD_S))
        if value and value != "NONE" and value not in self._seen:  # MIGRATE_ON_HOST_MAINTENANCE
            self._seen.add(value)
            return Notice(cloud="gcp", kind=value, notice_time=now)
        if value == "NONE":
            self._seen.discard("MIGRATE_ON_HOST_MAINTENANCE")
        return None

    def _upcoming(self) -> Notice | None:
        """A scheduled maintenance window (hours or days ahead): a risk, reported once per window.

        The key answers 200 with JSON (`window_start_time`, `maintenance_status`, `type`, …) when
        maintenance is scheduled, otherwise an error or `NONE` (Compute Engine, "Monitor and plan
        for a host maintenance event", cloud.google.com/compute/docs/instances/
        monitor-plan-host-maintenance-event).
        """
        status, body, _ = self._get("upcoming-maintenance", "alt=json")
        if status != 200:
            return None
        try:
            answer = json.loads(body)
        except ValueError:
            return None  # the literal NONE: nothing scheduled
        window = answer.get("window_start_time") if isinstance(answer, dict) else None
        if not window or f"upcoming:{window}" in self._seen:
            return None
        self._seen.add(f"upcoming:{window}")
        return Notice(cloud="gcp", kind="upcoming-maintenance", notice_time=_now(),
                      deadline=_parse_iso(str(window)), detail=answer)

    def acknowledge(self, notice: Notice) -> None:
        return None  # GCE stops the VM ~30 s after preemption whatever the guest does

    def close(self) -> None:
        return None


class AzureNotices:
    """Azure Scheduled Events for this VM that end its job (Preempt, Terminate, Reboot, Redeploy),
    acknowledged through StartRequests once the state is saved."""

    cloud = "azure"

    def __init__(
        self, endpoint: str = AZURE_ENDPOINT, *, timeout_s: float = 2.0,
        first_call_timeout_s: float = AZURE_FIRST_CALL_TIMEOUT_S,
    ) -> None:  # fmt: skip
        self.endpoint = endpoint.rstrip("/")
        self.timeout_s = timeout_s
        self.first_call_timeout_s = first_call_timeout_s
        self._answered = False  # the service answered once: it is enabled, calls are quick
        self._vm_name: str | None = None
        self._looked_up_name = False

    @property
    def _events_url(self) -> str:
        return f"{self.endpoint}/metadata/scheduledevents?api-version={AZURE_API_VERSION}"

    def _this_vm(self) -> str | None:
        if not self._looked_up_name:
            self._looked_up_name = True
            status, body, _ = _request(
                f"{self.endpoint}/metadata/instance/compute/name"
                "?api-version=2021-02-01&format=text",
                headers={"Metadata": "true"},
                timeout_s=self.timeout_s,
            )
            self._vm_name = body.decode().strip() if status == 200 else None
        return self._vm_name

    def poll(self) -> Notice | None:
        # Until the service has answered once, a call may take up to two minutes while it is
        # enabled: wait that long (the watcher's thread polls; training never waits on it).
        timeout_s = self.timeout_s if self._answered else self.first_call_timeout_s
        status, body, _ = _request(
            self._events_url, headers={"Metadata": "true"}, timeout_s=timeout_s
        )
        if status != 200:
            raise MetadataUnavailable(f"Azure Scheduled Events answered HTTP {status}")
        self._answered = True
        document = json.loads(body)
        vm = self._this_vm()
        for event in document.get("Events", []):
            kind = str(event.get("EventType") or "")
            if kind not in AZURE_TERMINAL_EVENTS:
                continue  # Freeze: a pause of seconds, nothing to save for
            resources = event.get("Resources") or []
            if vm and resources and vm not in resources:
                continue  # an event for another VM of the same scale set
            deadline = _parse_http_date(str(event.get("NotBefore") or ""))
            return Notice(
                cloud="azure",
                kind=kind,
                notice_time=_now(),
                deadline=deadline,
                detail={
                    "EventId": event.get("EventId"),
                    "DocumentIncarnation": document.get("DocumentIncarnation"),
                    "Resources": resources,
                },
            )
        return None

    def acknowledge(self, notice: Notice) -> None:
        event_id = notice.detail.get("EventId")
        if not event_id:
            return
        body = json.dumps({"StartRequests": [{"EventId": event_id}]}).encode()
        _request(
            self._events_url,
            method="POST",
            headers={"Metadata": "true", "Content-Type": "application/json"},
            body=body,
            timeout_s=self.timeout_s,
        )

    def close(self) -> None:
        return None


class SigtermNotices:
    """SIGTERM as a notice (the local target, `docker stop`, a node's shutdown, torchrun)."""

    cloud = "local"
    poll_waits = True  # poll() waits on the handler's event: it returns as the signal lands

    def __init__(self, *, wait_s: float = 1.0, install: bool = True) -> None:
        self.wait_s = wait_s
        self._received = threading.Event()
        self._received_at: datetime | None = None
        self._previous: Any = None
        self._installed = False
        if install and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
            self._installed = True

    def _handle(self, signum: int, frame: Any) -> None:
        self.trigger()

    def trigger(self) -> None:
        """Behave as if SIGTERM arrived (for sources that cannot install a handler)."""
        if self._received_at is None:
            self._received_at = _now()
        self._received.set()

    @property
    def received(self) -> bool:
        """True once SIGTERM arrived (set by the handler itself, before any thread sees it)."""
        return self._received.is_set()

    def poll(self) -> Notice | None:
        return self.poll_now() if self._received.wait(self.wait_s) else None

    def poll_now(self) -> Notice | None:
        """The SIGTERM notice if the signal has arrived; never waits."""
        if not self._received.is_set():
            return None
        return Notice(cloud=self.cloud, kind="sigterm", notice_time=self._received_at or _now())

    def acknowledge(self, notice: Notice) -> None:
        return None

    def close(self) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous or signal.SIG_DFL)
            self._installed = False


def source_for(cloud: str, endpoint: str | None = None) -> NoticeSource | None:
    """The metadata source for `cloud` (aws, gcp, azure); None for local / none."""
    if cloud == "aws":
        return AwsNotices(endpoint or AWS_ENDPOINT)
    if cloud == "gcp":
        return GcpNotices(endpoint or GCP_ENDPOINT)
    if cloud == "azure":
        return AzureNotices(endpoint or AZURE_ENDPOINT)
    if cloud in ("local", "none", ""):
        return None
    raise ValueError(f"SPOTROUTE_NOTICE_SOURCE: unknown source {cloud!r} — use aws, gcp, azure, "
                     "local or none")
