"""What `route watch` says while it runs: its log (text lines for people, or one JSON line per
decision, journal step, pass and error with `--log-format json`) and its Prometheus metrics
(`--metrics-port`, `--metrics-file`). The event shapes live in router.flows.watch_events, the
metrics in router.flows.watch_metrics (imported only when a metrics flag is given).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.core.errors import RouteError
from router.flows.watch_events import JsonLog, PassReport, job_event, pass_events, step_event


@dataclass
class WatchOutput:
    """The sinks of one `route watch` run; `failed` is set when a job or a pass failed."""

    log: JsonLog | None  # None: text lines (or nothing until the end, with --json)
    quiet: bool  # --json: the reports are printed once, at the end
    once: bool  # --once: a failed pass ends the run (route's error line says why)
    metrics: Any = None  # router.flows.watch_metrics.WatchMetrics
    metrics_file: Path | None = None
    failed: bool = False
    passes: int = 0
    reports: list[Any] = field(default_factory=list)  # kept only for --json

    @classmethod
    def open(
        cls,
        *,
        log_format: str,
        as_json: bool,
        once: bool,
        holder: str,
        interval_s: float,
        jobs: tuple[str, ...],
        metrics_host: str,
        metrics_port: int | None,
        metrics_file: Path | None,
    ) -> WatchOutput:
        """Check the metrics flags, start the metrics server, say where it listens."""
        out = cls(JsonLog() if log_format == "json" else None, as_json, once)
        url = None
        if metrics_port is not None or metrics_file is not None:
            from router.flows.watch_metrics import WatchMetrics, check_textfile

            if metrics_file is not None:
                check_textfile(metrics_file)
            out.metrics = WatchMetrics(holder=holder, interval_s=interval_s, version=_version())
            out.metrics_file = metrics_file
            if metrics_port is not None:
                url = out.metrics.serve(metrics_host, metrics_port)
        if out.log is not None:
            out.log.emit({"time": _now().isoformat(), "level": "info", "event": "start",
                          "watcher": holder, "version": _version(), "interval_s": interval_s,
                          "jobs": list(jobs) or None, "metrics_url": url,
                          "metrics_file": str(metrics_file) if metrics_file else None})  # fmt: skip
        elif url is not None:
            print(f"route watch: metrics at {url}", file=sys.stderr, flush=True)
        return out

    def report(self, report: Any) -> None:
        """One job's report (from the watcher's threads)."""
        if report.action == "error":
            self.failed = True
        if self.quiet:
            self.reports.append(report)
        if self.metrics is not None:
            self.metrics.job_done(report)
        if self.log is not None:
            self.log.emit(job_event(report, _now()))
        elif not self.quiet:
            from router.cli import render_deploy

            render_deploy.watch_report(report)

    def step(self, journal: Any, step: str, what: str) -> None:
        """A migration journal step, as the watcher takes it."""
        if self.log is not None:
            self.log.emit(step_event(journal.job, journal.id, step, what, _now()))
        elif not self.quiet:
            from router.cli import render_deploy

            render_deploy.journal_step(f"{journal.job} {step}", what)

    def passed(self, done: PassReport) -> None:
        """A pass ended: metrics (and the textfile) updated, the pass logged."""
        self.passes += 1
        self.failed = self.failed or not done.ok
        problem = None
        if self.metrics is not None:
            self.metrics.pass_done(done)
            if self.metrics_file is not None:
                try:
                    self.metrics.write_textfile(self.metrics_file)
                except RouteError as exc:
                    self.failed, problem = True, exc.message
        if self.log is not None:
            for event in pass_events(done, _now()):
                self.log.emit(event)
        elif done.error is not None and not self.once:
            print(f"error: pass failed: {done.error} — retrying next interval", file=sys.stderr,
                  flush=True)  # fmt: skip
        if problem is not None:
            self.error(problem)

    def error(self, message: str) -> None:
        """A failure of the watcher itself (not of one job), one line."""
        if self.log is not None:
            self.log.emit({"time": _now().isoformat(), "level": "error", "event": "error",
                           "job": None, "reason": message})  # fmt: skip
        else:
            print(f"error: {message}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        if self.log is not None:
            self.log.emit({"time": _now().isoformat(), "level": "info", "event": "stop",
                           "passes": self.passes})  # fmt: skip


def _now() -> datetime:
    return datetime.now(UTC)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("spotroute")
    except PackageNotFoundError:
        return "unknown"
