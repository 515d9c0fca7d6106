"""Pure: the journal of one migration (or re-placement) — its steps, in order, recorded first.

Steps (docs/migration.md has what recovery does at each):

  intent                the decision: from stack, to stack, target placement, why
  checkpoint-requested  the job was asked to save now and hold (migrations only)
  checkpoint-complete   a complete checkpoint exists to resume from (its step)
  new-stack-up          the new placement's own stack is deployed
  checkpoint-copied     the checkpoint is in the new placement's storage (copied and verified
                        when that storage is elsewhere: another bucket, another cloud)
  resume-confirmed      the new placement's job restored that step and runs
  old-stack-down        the old placement's stack is destroyed
  done                  closed

Each step is marked `begun` BEFORE it is acted on and `done` after, so a router killed anywhere
finds the first unfinished step and runs it again (every step is idempotent) or rolls back.
Rollback is possible until resume-confirmed is done (the old placement still exists); after
that recovery only rolls forward. Rollback steps: `rollback` (new stack down, request
withdrawn) then the journal closes as rolled-back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit

STEPS = (
    "intent",
    "checkpoint-requested",
    "checkpoint-complete",
    "new-stack-up",
    "checkpoint-copied",
    "resume-confirmed",
    "old-stack-down",
    "done",
)
Kind = Literal["migrate", "replace"]
Outcome = Literal["open", "done", "rolled-back"]
POINT_OF_NO_RETURN = "resume-confirmed"  # once done, the old placement may be gone


@dataclass(frozen=True, slots=True)
class StepRecord:
    state: Literal["begun", "done"]
    begun_at: str
    done_at: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    # When a step is run again after a crash, when it was first begun: what the killed run did
    # (a stack it brought up) may have been paid for since then (route report).
    first_begun_at: str | None = None


@dataclass(frozen=True, slots=True)
class Journal:
    """One move of one job, step by step; stored as JSON beside the job's stacks."""

    id: str
    job: str
    kind: Kind
    from_stack: str
    to_stack: str
    target: dict[str, Any]  # the placement moved to (Placement.to_json())
    reason: str
    created_at: str
    steps: dict[str, StepRecord] = field(default_factory=dict)
    outcome: Outcome = "open"
    rolling_back: bool = False
    rollback_reason: str = ""
    closed_at: str | None = None

    def done(self, step: str) -> bool:
        record = self.steps.get(step)
        return record is not None and record.state == "done"

    def data(self, step: str) -> dict[str, Any]:
        record = self.steps.get(step)
        return dict(record.data) if record else {}

    def next_step(self) -> str | None:
        """The first step not done (None when closed)."""
        if self.outcome != "open":
            return None
        for step in STEPS:
            if not self.done(step):
                return step
        return None

    def can_roll_back(self) -> bool:
        return not self.done(POINT_OF_NO_RETURN)

    def begin(self, step: str, at: datetime) -> Journal:
        if step not in STEPS:
            raise ValueError(f"unknown journal step {step!r}")
        before = self.steps.get(step)
        data = before.data if before else {}
        first = (before.first_begun_at or before.begun_at) if before else None
        record = StepRecord("begun", at.isoformat(), None, data, first)
        return replace(self, steps={**self.steps, step: record})

    def finish(self, step: str, at: datetime, data: dict[str, Any] | None = None) -> Journal:
        before = self.steps.get(step)
        begun = before.begun_at if before else at.isoformat()
        merged = {**(before.data if before else {}), **(data or {})}
        first = before.first_begun_at if before else None
        record = StepRecord("done", begun, at.isoformat(), merged, first)
        journal = replace(self, steps={**self.steps, step: record})
        if step == "done":
            journal = replace(journal, outcome="done", closed_at=at.isoformat())
        return journal

    def start_rollback(self, why: str) -> Journal:
        return replace(self, rolling_back=True, rollback_reason=why)

    def rolled_back(self, at: datetime) -> Journal:
        return replace(self, outcome="rolled-back", closed_at=at.isoformat())

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "job": self.job,
            "kind": self.kind,
            "from_stack": self.from_stack,
            "to_stack": self.to_stack,
            "target": self.target,
            "reason": self.reason,
            "created_at": self.created_at,
            "steps": {
                name: {
                    "state": r.state,
                    "begun_at": r.begun_at,
                    "done_at": r.done_at,
                    "data": r.data,
                    **({"first_begun_at": r.first_begun_at} if r.first_begun_at else {}),
                }
                for name, r in self.steps.items()
            },
            "outcome": self.outcome,
            "rolling_back": self.rolling_back,
            "rollback_reason": self.rollback_reason,
            "closed_at": self.closed_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Journal:
        return cls(
            id=str(data["id"]),
            job=str(data["job"]),
            kind=data.get("kind", "migrate"),
            from_stack=str(data["from_stack"]),
            to_stack=str(data["to_stack"]),
            target=dict(data.get("target") or {}),
            reason=str(data.get("reason", "")),
            created_at=str(data["created_at"]),
            steps={
                name: StepRecord(
                    r["state"],
                    str(r["begun_at"]),
                    r.get("done_at"),
                    dict(r.get("data") or {}),
                    r.get("first_begun_at"),
                )
                for name, r in (data.get("steps") or {}).items()
            },
            outcome=data.get("outcome", "open"),
            rolling_back=bool(data.get("rolling_back", False)),
            rollback_reason=str(data.get("rollback_reason", "")),
            closed_at=data.get("closed_at"),
        )


def next_stack_name(job: str, existing: set[str]) -> str:
    """A fresh stack for the job's next placement: <job>.2, <job>.3, ... (dots: not in job names).

    `existing` holds every stack name the job has used (live stacks and closed journals), so a
    name is never reused: a journal's to_stack always means one placement.
    """
    used = [1]
    for name in existing:
        head, _, n = name.partition(".")
        if head == job and n.isdigit():
            used.append(int(n))
    return f"{job}.{max(used) + 1}"


def newest_stack(job: str, stacks: Iterable[str]) -> str | None:
    """The job's latest placement stack among `stacks` (`train`, `train.2`, … → the highest)."""
    numbered = [
        (int(n) if n else 1, name)
        for name in stacks
        for head, dot, n in [name.partition(".")]
        if head == job and (not dot or n.isdigit())
    ]
    return max(numbered)[1] if numbered else None


def launch_seconds(journal: Journal) -> float | None:
    """Seconds from the decision to move or re-place (the journal opened) until its new stack
    was up: the engine's step and the cloud's launch (None before the stack is up)."""
    up = journal.steps.get("new-stack-up")
    if up is None or not up.done_at:
        return None
    return (_aware(up.done_at) - _aware(journal.created_at)).total_seconds()


def _aware(text: str) -> datetime:
    at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def job_of_stack(stack: str) -> str:
    """The job a placement stack belongs to: `train.3` → `train`."""
    return stack.split(".", 1)[0]


def copied_elsewhere(journal: Journal) -> bool:
    """Whether the hand-over checkpoint was copied, verified, into storage outside the old
    placement's bucket: then the old stack's own bucket holds nothing the job still needs."""
    copied = journal.data("checkpoint-copied")
    if copied.get("skipped") or copied.get("step") is None:
        return False  # same storage, or nothing complete to copy: the old bucket is the job's
    source = str(journal.data("intent").get("checkpoint_url") or "")
    target = str((journal.data("new-stack-up").get("outputs") or {}).get("checkpointUrl") or "")
    # Another bucket (S3, GCS) or storage account (Azure), never a prefix of the same one.
    return bool(source and target) and urlsplit(source).netloc != urlsplit(target).netloc


def place_text(p: dict[str, Any]) -> str:
    """A placement record as `cloud/region[/zone] market`."""
    zone = f"/{p['zone']}" if p.get("zone") else ""
    return f"{p.get('cloud')}/{p.get('region')}{zone} {p.get('market')}"


def describe_step(step: str, data: dict[str, Any]) -> str:
    """What a finished step did, in one line for the user (its journal data in words)."""
    if step == "intent":
        return "recorded"
    if step == "checkpoint-requested":
        return data.get("skipped") or "asked the job to save now and hold"
    if step == "done":
        return "journal closed"
    if step == "checkpoint-complete":
        return f"checkpoint at step {data.get('step')} ({data.get('bytes', 0)} bytes)"
    if step == "new-stack-up":
        p = data.get("placement") or {}
        return f"new placement up: {place_text(p)} ${p.get('price_per_hour', 0):,.2f}/h"
    if step == "checkpoint-copied":
        if data.get("skipped"):
            return str(data["skipped"])
        verb = "already there" if data.get("already_there") else "copied and verified"
        return (f"checkpoint step {data.get('step')} {verb} in {data.get('target')} "
                f"({data.get('files')} files, {data.get('bytes', 0)} bytes, "
                f"{data.get('seconds', 0):.1f} s)")  # fmt: skip
    if step == "resume-confirmed":
        return f"resumed at step {data.get('step')} on {data.get('placement')}"
    if step == "old-stack-down":
        kept = f"; its checkpoints {data['checkpoints']}" if data.get("checkpoints") else ""
        return f"old placement destroyed ({data.get('deleted', 0)} resources){kept}"
    return step
