"""What the Checkpointer returns and raises, and the names its files and exit status use."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Exit status after saving on a preemption notice: EX_TEMPFAIL from sysexits.h ("try again
# later"), so a supervisor can tell "preempted, resume me" from a crash (1) or success (0).
EXIT_PREEMPTED = 75


class CheckpointError(Exception):
    """A checkpoint could not be saved or restored; the message says what to do."""


class CheckpointDamaged(OSError):
    """A stored file does not match its manifest entry."""


class PartlyLoaded(Exception):
    """A load failed after some of a checkpoint's data was read into the objects (`objects`:
    the names of those changed, where known; else all that were being loaded)."""

    def __init__(self, cause: BaseException, objects: set[str] | None = None) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.objects = objects


def damage_reason(error: BaseException) -> str:
    """The reason a load failed, from our own error or the one DCP wrapped per rank."""
    if isinstance(error, CheckpointDamaged | CheckpointError):
        return str(error)
    failures = getattr(error, "failures", None)
    if isinstance(failures, dict):
        reasons = []
        for failure in failures.values():
            inner = failure[0] if isinstance(failure, tuple) else failure
            reasons.append(str(inner) if isinstance(inner, CheckpointDamaged)
                           else f"{type(inner).__name__}: {inner}")
        if reasons:
            return "; ".join(dict.fromkeys(reasons))
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


def is_damage(error: BaseException) -> bool:
    """True when a load failed because stored bytes disagree with the manifest (checksum,
    size, a missing file), not because storage could not be reached."""
    if isinstance(error, PartlyLoaded):
        error = error.cause
    if isinstance(error, CheckpointDamaged):
        return True
    failures = getattr(error, "failures", None)
    if isinstance(failures, dict) and failures:
        return all(isinstance(f[0] if isinstance(f, tuple) else f, CheckpointDamaged)
                   for f in failures.values())
    return False


@dataclass
class Resume:
    """Where training starts: step 0 and nothing restored when there was no usable checkpoint."""

    step: int = 0
    epoch: int | None = None
    data_position: Any = None
    user: dict[str, Any] = field(default_factory=dict)
    checkpoint_url: str | None = None
    messages: list[str] = field(default_factory=list)
    path: Path | None = None  # restore_files: the local directory the files are in

    @property
    def restored(self) -> bool:
        return self.checkpoint_url is not None


@dataclass
class SaveReport:
    """What one save cost: how long training waited, and the save's whole wall time (seconds)."""

    step: int
    blocked_s: float
    save_s: float | None = None  # None until the background part has finished
    bytes: int | None = None
    error: str | None = None


def rank_file(rank: int) -> str:
    return f"rank-{rank:05d}.json"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
