"""A placement that must stop billing, torn down by `route watch`, its checkpoints kept.

Two kinds: a **finished** job (nothing left to run), and a **crashed** one — its job failed by
itself there (router/core/node_exit.py), would fail the same way on any placement, and is not
re-placed; yet its stacks bill until they are gone (AWS and Azure: the NAT gateway and public
address; GCP: the stopped VMs' disks; every cloud: the nodes the group keeps or recreates).

The teardown costs money if it half-happens, so it is recorded before it acts (as a journal step
is): `teardowns/<job>` in the record store = {job, reason, why, stack, the placement (cloud,
region, zone, instance_type, market, node_count, price_per_hour, deployed_at), checkpoints,
begun_at, done_at: null}. A watcher killed during it leaves the record open; the next pass lists
the job (`open_teardowns`) and finishes it — `destroy_job` converges on whatever is left of the
stacks and the placement record. Done, a finished job's record is dropped (its last decision
says it all, and every pass reads the records left here); a crash's says when and how much
(`done_at`, `deleted`) and stays: `route status` shows the job as `crashed` (when, why, where its
checkpoints are) until it is deployed again or `route destroy`ed; `route report` counts its
placement until the teardown (the ended record `destroy_job` writes, reason `crashed`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router.engine.records import RecordStore

TEARDOWN_PREFIX = "teardowns/"
CRASHED, FINISHED = "crashed", "finished"
# The placement record's fields a teardown keeps (route status shows them once it is gone).
PLACEMENT_FIELDS = ("cloud", "region", "zone", "instance_type", "market", "node_count",
                    "price_per_hour", "deployed_at")  # fmt: skip


def teardown_key(job: str) -> str:
    return f"{TEARDOWN_PREFIX}{job}"


@dataclass(frozen=True)
class Teardown:
    """One job's teardown: why, what it tore down, and whether it is done."""

    job: str
    reason: str  # crashed | finished
    why: str  # one line: the crash as the nodes said it, or "finished at step N"
    stack: str
    placement: dict[str, Any]  # PLACEMENT_FIELDS of the placement record
    checkpoints: str  # the checkpoint URL, kept
    begun_at: str
    done_at: str | None = None
    deleted: int = 0  # resources the engine deleted

    @property
    def done(self) -> bool:
        return self.done_at is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job, "reason": self.reason, "why": self.why, "stack": self.stack,
            "placement": self.placement, "checkpoints": self.checkpoints,
            "begun_at": self.begun_at, "done_at": self.done_at, "deleted": self.deleted,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Teardown:
        return cls(
            job=str(data["job"]),
            reason=str(data["reason"]),
            why=str(data.get("why") or ""),
            stack=str(data.get("stack") or data["job"]),
            placement=dict(data.get("placement") or {}),
            checkpoints=str(data.get("checkpoints") or ""),
            begun_at=str(data["begun_at"]),
            done_at=str(data["done_at"]) if data.get("done_at") else None,
            deleted=int(data.get("deleted") or 0),
        )


def begin(
    store: RecordStore, record: dict[str, Any], reason: str, why: str, now: datetime
) -> Teardown:
    """Record the teardown of the placement `record` before anything is destroyed."""
    job = str(record["job"])
    teardown = Teardown(
        job=job,
        reason=reason,
        why=why,
        stack=str(record.get("stack") or job),
        placement={k: record.get(k) for k in PLACEMENT_FIELDS},
        checkpoints=str((record.get("outputs") or {}).get("checkpointUrl") or ""),
        begun_at=now.isoformat(),
    )
    store.put(teardown_key(job), teardown.to_json())
    return teardown


def finish(store: RecordStore, teardown: Teardown, deleted: int, now: datetime) -> Teardown:
    """Record that the placement is gone (its checkpoints kept)."""
    done = replace(teardown, done_at=now.isoformat(), deleted=deleted)
    store.put(teardown_key(teardown.job), done.to_json())
    return done


def read(store: RecordStore, job: str) -> Teardown | None:
    doc = store.get(teardown_key(job))
    return _parsed(doc)


def open_teardowns(store: RecordStore) -> list[str]:
    """Jobs whose teardown was begun and not finished (a watcher killed during it)."""
    found = (_parsed(doc) for doc in store.list(TEARDOWN_PREFIX).values())
    return sorted(t.job for t in found if t is not None and not t.done)


def crashed_teardowns(store: RecordStore) -> list[Teardown]:
    """Every crashed job whose placement was torn down (route status lists them)."""
    found = (_parsed(doc) for doc in store.list(TEARDOWN_PREFIX).values())
    return sorted((t for t in found if t is not None and t.reason == CRASHED), key=lambda t: t.job)


def forget(store: RecordStore, job: str) -> None:
    """The job is gone for good (`route destroy`): no teardown left to show."""
    store.delete(teardown_key(job))


def _parsed(doc: dict[str, Any] | None) -> Teardown | None:
    if not isinstance(doc, dict):
        return None
    try:
        return Teardown.from_json(doc)
    except (KeyError, TypeError, ValueError):
        return None
