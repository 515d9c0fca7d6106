"""What `route watch` tells the outside world about each pass: the events of its JSON log and
the values its Prometheus metrics count (docs/cli-json.md has the log's schema).

Fed only by the watcher's results (router.flows.watch `JobReport` per job, `PassReport` per
pass), so the loop keeps no second account. Labels are small closed sets — a job's state, a
decision's reason code — never the one-line reasons themselves, which carry dollar figures and
would make every decision a new time series.
"""

from __future__ import annotations

import math
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, Protocol

# A job's state after a pass (the gauge `spotroute_watch_jobs{state}`), every one always set.
JOB_STATES = (
    "running", "moving", "interrupted", "waiting", "finished", "crashed", "skipped", "error",
)  # fmt: skip

# Why a job got its action (`reason` of the decision metrics and `reason_code` in the log).
REASON_CODES = (
    "cheaper",  # move / switch-market: the saving beat min_savings_pct and the cooldown is over
    "under-threshold",  # stay: another placement saves, but less than min_savings_pct
    "cooldown",  # stay: it would save enough, but the last move is too recent
    "no-alternative",  # stay: no other placement to compare
    "deadline",  # the deadline rule (Uniform Progress) chose the action
    "interrupted",  # replace: the placement was lost (marker, process gone, nodes reclaimed)
    "not-placed",  # replace: the job had no placement
    "no-capacity",  # wait: nothing to run on now
    "finished",  # the job wrote finished.json
    "crashed",  # the job failed by itself (its nodes' exit records): placement torn down
    "journal-open",  # recovered: a migration a killed router left open was finished
    "lease-held",  # skipped: another watcher holds the job's lease
    "lease-lost",  # skipped: the lease ran out while acting
    "no-record",  # skipped: no placement record for the job
    "error",  # the job could not be handled this pass
    "other",
)

ENGINE_ACTIONS = ("move", "switch-market", "replace", "recovered")


class Reported(Protocol):
    """What the events read of a router.flows.watch.JobReport."""

    job: str
    action: str
    reason: str
    decision: dict[str, Any] | None
    journal: str | None
    outcome: str | None
    router_s: float
    decide_s: float
    engine_s: float
    price_ages_s: dict[str, float]


@dataclass(frozen=True)
class PassReport:
    """One pass of the watcher: when it began, how long it took (s), each job's report, or why
    the pass as a whole failed (the jobs could not be listed: backend unreachable)."""

    started_at: datetime
    duration_s: float
    reports: tuple[Any, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def reason_code(action: str, reason: str, numbers: Mapping[str, Any] | None) -> str:
    """The reason of a job's action as one of REASON_CODES (from decide()'s numbers and words)."""
    numbers = numbers or {}
    if action == "error":
        return "error"
    if action == "finished" or reason == "finished":
        return "finished"
    if action == "crashed":
        return "crashed"
    if action == "recovered":
        return "journal-open"
    if action == "skipped":
        if reason.startswith("lease held"):
            return "lease-held"
        return "no-record" if reason.startswith("no placement recorded") else "lease-lost"
    if reason.startswith("deadline:"):
        return "deadline"
    if action == "replace":
        return "not-placed" if "not placed yet" in reason else "interrupted"
    if action == "wait":
        return "no-capacity"
    if action in ("move", "switch-market"):
        return "cheaper"
    if action == "stay":
        saving, threshold = numbers.get("saving_usd"), numbers.get("threshold_usd")
        if saving is None:
            return "no-alternative"
        if threshold is not None and saving >= threshold and saving > 0:
            return "cooldown"  # it saves enough: only the cooldown kept it
        return "under-threshold"
    return "other"


def job_state(action: str, outcome: str | None, reason: str = "") -> str:
    """Where the job stands after its action this pass: one of JOB_STATES."""
    if action in ("finished", "crashed", "skipped", "error"):
        return action
    if action == "wait":
        return "waiting"
    if outcome == "open":
        return "moving"
    # A re-placement that rolled back leaves the job without a placement.
    lost = action == "replace" or (action == "recovered" and reason.endswith("of a replace"))
    if lost and outcome == "rolled-back":
        return "interrupted"
    return "running"


def saved_usd(report: Reported) -> float:
    """USD a finished move is expected to save, as decide() compared it (0 for anything else:
    a stay, a rolled-back move, a re-placement or a deadline switch saves nothing it counted)."""
    if report.action not in ("move", "switch-market") or report.outcome != "done":
        return 0.0
    saving = ((report.decision or {}).get("numbers") or {}).get("saving_usd")
    if not isinstance(saving, int | float) or not math.isfinite(saving) or saving <= 0:
        return 0.0
    return float(saving)


def price_ages(candidates: Iterable[Any]) -> dict[str, float]:
    """Per price source, the age (s) of the oldest price among the placements compared."""
    oldest: dict[str, float] = {}
    for p in candidates:
        source, age = str(p.price_source), float(p.price_age_s)
        oldest[source] = max(age, oldest.get(source, 0.0))
    return oldest


def states_of(reports: Iterable[Reported]) -> dict[str, int]:
    """How many jobs of a pass are in each of JOB_STATES (every state present, 0 or more)."""
    seen = Counter(job_state(r.action, r.outcome, r.reason) for r in reports)
    return {state: seen.get(state, 0) for state in JOB_STATES}


# --- the JSON log ---------------------------------------------------------------------------


def job_event(report: Reported, at: datetime) -> dict[str, Any]:
    """One job's report of a pass as a log event (`decision`, or `error` when it failed)."""
    numbers = (report.decision or {}).get("numbers")
    failed = report.action == "error"
    return {
        "time": at.isoformat(),
        "level": "error" if failed else "info",
        "event": "error" if failed else "decision",
        "job": report.job,
        "action": report.action,
        "reason": report.reason,
        "reason_code": reason_code(report.action, report.reason, numbers),
        "state": job_state(report.action, report.outcome, report.reason),
        "decision": report.decision,
        "journal": report.journal,
        "outcome": report.outcome,
        "saved_usd": saved_usd(report),
        "price_ages_s": dict(report.price_ages_s),
        "router_s": round(report.router_s, 6),
        "decide_s": round(report.decide_s, 6),
        "engine_s": round(report.engine_s, 3),
    }


def step_event(job: str, journal: str, step: str, what: str, at: datetime) -> dict[str, Any]:
    """A migration journal step as a log event."""
    return {"time": at.isoformat(), "level": "info", "event": "step", "job": job,
            "journal": journal, "step": step, "what": what}  # fmt: skip


def pass_events(done: PassReport, at: datetime) -> list[dict[str, Any]]:
    """The `pass` event (and an `error` event first when the pass failed as a whole)."""
    events: list[dict[str, Any]] = []
    if done.error is not None:
        events.append({"time": at.isoformat(), "level": "error", "event": "error", "job": None,
                       "reason": done.error})  # fmt: skip
    events.append({
        "time": at.isoformat(),
        "level": "info" if done.ok else "error",
        "event": "pass",
        "ok": done.ok,
        "started_at": done.started_at.isoformat(),
        "duration_s": round(done.duration_s, 3),
        "jobs": len(done.reports),
        "states": states_of(done.reports),
        "errors": sum(1 for r in done.reports if r.action == "error"),
        "error": done.error,
    })  # fmt: skip
    return events


@dataclass
class JsonLog:
    """Writes events as JSON lines, one per event, flushed at once (journald and container log
    drivers read a pipe: a buffered line would arrive late or be lost in a crash)."""

    stream: IO[str] = field(default_factory=lambda: sys.stdout)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def emit(self, event: Mapping[str, Any]) -> None:
        from router.core.strict_json import dumps

        line = dumps(_finite(dict(event)), indent=None)
        with self._lock:  # job reports arrive from the watcher's thread pool
            self.stream.write(line + "\n")
            self.stream.flush()


def _finite(value: Any) -> Any:
    """The value with NaN and infinities as null: one odd number must not stop the service."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
