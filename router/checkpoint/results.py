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
