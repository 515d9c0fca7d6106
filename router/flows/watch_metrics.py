"""`route watch`'s Prometheus metrics: jobs by state, decisions and moves by reason, dollars
saved, passes and the last successful one, price ages per source — through prometheus_client,
served at /metrics (`--metrics-port`) and written as a node-exporter textfile
(`--metrics-file`, atomically: a temp file in the same directory, then a rename).

Fed by the watcher's results (router.flows.watch_events); imported only when a metrics flag
is given, so prometheus_client never slows `route --help`. The metric names and labels are
documented in docs/cli-json.md.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.exposition import start_http_server, write_to_textfile
from prometheus_client.process_collector import ProcessCollector

from router.core.errors import BadInput, OperationFailed
from router.flows.watch_events import (
    ENGINE_ACTIONS,
    JOB_STATES,
    PassReport,
    Reported,
    reason_code,
    saved_usd,
    states_of,
)

# Passes take seconds (stays) to minutes (a migration waits for a new stack and a resume).
PASS_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


class WatchMetrics:
    """The watcher's metrics on their own registry (the textfile gets these only); the HTTP
    endpoint adds the process's own (process_* : CPU, memory, open files, start time)."""

    def __init__(self, *, holder: str, interval_s: float, version: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.jobs = Gauge("spotroute_watch_jobs", "Jobs by state after the last pass.",
                          ["state"], registry=r)  # fmt: skip
        self.decisions = Counter(
            "spotroute_watch_decisions", "Job reports (decisions, skips, errors) by action and "
            "reason.", ["action", "reason"], registry=r,
        )  # fmt: skip
        self.moves = Counter(
            "spotroute_watch_moves", "Engine actions (move, switch-market, replace, recovered) "
            "by reason and journal outcome.", ["action", "reason", "outcome"], registry=r,
        )  # fmt: skip
        self.saved = Counter(
            "spotroute_watch_saved_usd", "USD the finished moves are expected to save (decide()'s "
            "saving: remaining cost here − there − the move).", registry=r,
        )  # fmt: skip
        self.passes = Counter("spotroute_watch_passes", "Passes over the jobs by result.",
                              ["result"], registry=r)  # fmt: skip
        self.pass_seconds = Histogram(
            "spotroute_watch_pass_duration_seconds", "Seconds a pass took.",
            buckets=PASS_BUCKETS_S, registry=r,
        )  # fmt: skip
        self.last_success = Gauge(
            "spotroute_watch_last_success_timestamp_seconds",
            "Unix time the last pass that could handle the jobs ended.", registry=r,
        )  # fmt: skip
        self.last_pass = Gauge("spotroute_watch_last_pass_timestamp_seconds",
                               "Unix time the last pass ended.", registry=r)  # fmt: skip
        self.price_age = Gauge(
            "spotroute_watch_price_age_seconds", "Per price source, the age of the oldest "
            "price the last pass compared.", ["source"], registry=r,
        )  # fmt: skip
        self.interval = Gauge("spotroute_watch_interval_seconds", "Seconds between passes.",
                              registry=r)  # fmt: skip
        self.info = Info("spotroute_watch", "The watcher: lease holder id, spotroute version.",
                         registry=r)  # fmt: skip
        self.interval.set(interval_s)
        self.info.info({"holder": holder, "version": version})
        for state in JOB_STATES:
            self.jobs.labels(state).set(0)
        for result in ("ok", "failed"):
            self.passes.labels(result)
        self._pass_ages: dict[str, float] = {}
        self._lock = threading.Lock()
        self._server: Any = None
        self._server_thread: threading.Thread | None = None

    # --- fed by the watcher -------------------------------------------------------------------

    def job_done(self, report: Reported) -> None:
        """Count one job's report (called from the watcher's threads as each job finishes)."""
        numbers = (report.decision or {}).get("numbers")
        code = reason_code(report.action, report.reason, numbers)
        self.decisions.labels(report.action, code).inc()
        if report.action in ENGINE_ACTIONS and report.outcome is not None:
            self.moves.labels(report.action, code, report.outcome).inc()
        saving = saved_usd(report)
        if saving > 0:
            self.saved.inc(saving)
        with self._lock:
            for source, age in report.price_ages_s.items():
                self._pass_ages[source] = max(age, self._pass_ages.get(source, 0.0))

    def pass_done(self, done: PassReport) -> None:
        """Set the per-pass gauges; a failed pass keeps the last good states and price ages."""
        ended = done.started_at.timestamp() + done.duration_s
        self.passes.labels("ok" if done.ok else "failed").inc()
        self.pass_seconds.observe(done.duration_s)
        self.last_pass.set(ended)
        with self._lock:
            ages, self._pass_ages = self._pass_ages, {}
        if not done.ok:
            return
        self.last_success.set(ended)
        for state, count in states_of(done.reports).items():
            self.jobs.labels(state).set(count)
        self.price_age.clear()  # a source no job compared any more is dropped, not frozen
        for source, age in sorted(ages.items()):
            self.price_age.labels(source).set(age)

    # --- out ------------------------------------------------------------------------------------

    def serve(self, host: str, port: int) -> str:
        """Serve /metrics on host:port (port 0: a free one) in a daemon thread; its URL."""
        served = CollectorRegistry()
        served.register(_Registered(self.registry))
        ProcessCollector(registry=served)
        try:
            self._server, self._server_thread = start_http_server(port, addr=host, registry=served)
        except socket.gaierror as exc:
            raise BadInput(
                f"--metrics-host {host}: not an address of this machine ({exc.strerror}) — use "
                "127.0.0.1, ::1 or an address an interface has"
            ) from None
        except OSError as exc:
            raise _bind_error(host, port, exc) from None
        bound = self._server.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{bound}/metrics"

    def write_textfile(self, path: Path) -> None:
        """Write the metrics to path for node-exporter's textfile collector, atomically."""
        try:
            write_to_textfile(str(path), self.registry)
        except OSError as exc:
            raise OperationFailed(
                f"--metrics-file {path}: {exc.strerror or exc} — make its directory writable "
                "for the watcher"
            ) from None

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@dataclass(frozen=True)
class _Registered:
    """The watcher's registry as one collector of the served registry (next to process_*)."""

    registry: CollectorRegistry

    def collect(self) -> Any:
        return self.registry.collect()


def check_textfile(path: Path) -> None:
    """Refuse a --metrics-file the textfile collector would never read, before the first pass."""
    if path.suffix != ".prom":
        raise BadInput(
            f"--metrics-file {path}: node-exporter's textfile collector reads only *.prom files "
            f"— name it {path.with_suffix('.prom').name}"
        )
    if not path.parent.is_dir():
        raise BadInput(f"--metrics-file {path}: no directory {path.parent} — create it first")
    if not os.access(path.parent, os.W_OK):
        raise BadInput(f"--metrics-file {path}: {path.parent} is not writable — grant the "
                       "watcher's user write access")  # fmt: skip


def _bind_error(host: str, port: int, exc: OSError) -> BadInput | OperationFailed:
    where = f"--metrics-host {host} --metrics-port {port}"
    if exc.errno == errno.EADDRNOTAVAIL:
        return BadInput(f"{where}: {host} is not an address of this machine — use 127.0.0.1 "
                        "or an address an interface has")  # fmt: skip
    if exc.errno == errno.EADDRINUSE:
        return OperationFailed(f"{where}: the port is in use — choose another --metrics-port "
                               "or stop what listens there")  # fmt: skip
    if exc.errno == errno.EACCES:
        return OperationFailed(f"{where}: not allowed to bind (ports under 1024 need "
                               "privileges) — use a port of 1024 or more, e.g. 9464")  # fmt: skip
    return OperationFailed(f"{where}: {exc.strerror or exc} — choose another address or port")
