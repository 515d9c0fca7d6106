"""What the Checkpointer does on a preemption notice: save, interruption marker, exit 75.

The watcher (watcher.py) and the sources (notices.py) only report notices; this mixin decides
whether a save still fits the grace period, writes the marker and stops the process.
"""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime
from typing import Any

from router.checkpoint.notices import Notice
from router.checkpoint.results import EXIT_PREEMPTED, now_iso
from router.checkpoint.state import CheckpointerState

log = logging.getLogger("spotroute.checkpoint")
# What the node's start-up script looks for in SPOTROUTE_NODE_DIR (components/node_exit.py).
NODE_MARKER_NAME = "interruption.json"


def node_id() -> str:
    """This node's name in a group: the rendezvous' SPOTROUTE_NODE_ID, else the host name."""
    return os.environ.get("SPOTROUTE_NODE_ID") or os.uname().nodename


class NoticeHandlingMixin(CheckpointerState):
    """The Checkpointer's notice handling: should_stop, notice, save on notice, the marker."""

    def _terminal_notice(self) -> Notice | None:
        """The terminal notice, also a SIGTERM whose handler ran but the watcher has not seen."""
        notice = self.watcher.peek_terminal()
        if notice is None and self._sigterm is not None:
            notice = self._sigterm.poll_now()
            if notice is not None:
                self.watcher.record(notice)
        return notice

    def should_stop(self) -> bool:
        """True once a preemption notice reached this process; cheap, local, no collective.

        For steps that are long against the grace period: check it between micro-batches (or in
        the data loop), finish the step early, and call `maybe_save`, which saves, writes the
        marker and exits 75. Every rank must still reach `maybe_save` with the same step.
        """
        return self.watcher.arrived.is_set() or (
            self._sigterm is not None and self._sigterm.received)

    def _save_estimate_s(self) -> float | None:
        """How long a save takes here: the longest of the last three finished ones (seconds)."""
        done = [r.save_s for r in self.reports[-3:] if r.save_s is not None and r.error is None]
        return max(done) if done else None

    def _save_on_notice(self, step: int, notice: Notice | None, *, epoch: int | None,
                        data_position: Any, user: dict[str, Any] | None) -> None:
        t0 = time.perf_counter()
        in_flight = self._pending_report
        self.wait()  # a background save cannot be cancelled; it finishes first, either way
        # Which nodes saw a notice: in a group, the others stopped only for the group's sake and
        # their start-up scripts wait for the lost node's replacement (docs/components.md).
        pairs = [(n, node) for n, node in self._ranks.all_gather((notice, node_id()))
                 if n is not None]
        gathered = [n for n, _ in pairs]
        noticed_on = sorted({node for _, node in pairs})
        first = gathered[0].to_json() if gathered else {
            "cloud": "unknown", "kind": "unknown", "notice_time": now_iso()}
        # A save the grace period cannot hold would leave nothing newer than the one that just
        # finished: keep that one and exit while there is time. Rank 0 decides for all.
        skipped: str | None = None
        if self._ranks.rank == 0 and gathered and in_flight is not None \
                and in_flight.error is None and in_flight.step != step:
            left = gathered[0].seconds_left(datetime.now(UTC))
            estimate = self._save_estimate_s()
            if left is not None and estimate is not None and estimate > left:
                skipped = (f"{left:.0f} s left, a save takes {estimate:.0f} s: kept step "
                           f"{in_flight.step}, saved while the notice arrived")
        skipped = self._ranks.broadcast(skipped)
        if self._objects and skipped is None:
            self.save(step, blocking=True, epoch=epoch, data_position=data_position, user=user)
        elif skipped is not None:
            log.warning("spotroute: not saving step %d: %s", step, skipped)
        # The checkpoint this exit keeps is complete from here; what follows (markers, the
        # interpreter's shutdown, ~1 s of it torch's) only delays the exit status.
        saved_at = datetime.now(UTC)
        if self._ranks.rank == 0:
            self._write_marker_json(first, step, exiting=True, save_s=time.perf_counter() - t0,
                                    skipped_save=skipped, noticed_on=noticed_on,
                                    saved_at=saved_at)
        self._note_on_node(first, step, saved_at)
        if notice is not None:
            self.watcher.acknowledge(notice)  # Azure: go ahead now, the state is saved
        self._ranks.barrier()
        if self.exit_on_notice:
            self.close()
            raise SystemExit(EXIT_PREEMPTED)

    def _write_marker(self, notice: Notice, step: int, *, exiting: bool) -> None:
        saved_at = datetime.now(UTC)  # after the save that answered the notice (save_files)
        if self._ranks.rank == 0:
            self._write_marker_json(notice.to_json(), step, exiting=exiting,
                                    saved_at=saved_at if exiting else None)
        if exiting:
            self._note_on_node(notice.to_json(), step, saved_at)

    def _note_on_node(self, notice: dict[str, Any], step: int, saved_at: datetime) -> None:
        """Tell this node's start-up script the job saved on a notice and is exiting: local rank
        0 writes SPOTROUTE_NODE_DIR/interruption.json, with the time the checkpoint was complete
        (`saved_at`: the process's exit comes later, after the interpreter's shutdown). The
        script cannot go by the exit status alone: torchrun reports a worker's 75 as its own 1
        (docs/checkpoints.md)."""
        directory = os.environ.get("SPOTROUTE_NODE_DIR")
        if not directory or self._ranks.local_rank != 0:
            return
        record = {**notice, "last_step": self.last_saved_step if self.last_saved_step is not None
                  else step, "exit_code": EXIT_PREEMPTED, "job_id": self.job_id,
                  "saved_at": saved_at.isoformat(timespec="milliseconds")}
        path = os.path.join(directory, NODE_MARKER_NAME)
        try:
            os.makedirs(directory, exist_ok=True)
            with open(f"{path}.tmp", "w", encoding="utf-8") as handle:
                json.dump(record, handle)
            os.replace(f"{path}.tmp", path)
        except OSError as error:  # the checkpoint is saved; the node just cannot tell
            log.warning("spotroute: could not write %s: %s", path, error)

    def _write_marker_json(self, notice: dict[str, Any], step: int, *, exiting: bool,
                           save_s: float | None = None, skipped_save: str | None = None,
                           noticed_on: list[str] | None = None,
                           saved_at: datetime | None = None) -> None:
        now = datetime.now(UTC)
        try:
            latency_s: float | None = round(((saved_at or now) - datetime.fromisoformat(
                str(notice["notice_time"]))).total_seconds(), 3)
        except (KeyError, ValueError, TypeError):
            latency_s = None
        marker = {
            **notice,
            "job_id": self.job_id,
            "last_step": self.last_saved_step if self.last_saved_step is not None else step,
            "written_at": now.isoformat(timespec="milliseconds"),
            # When the checkpoint this exit keeps was complete (None: not exiting).
            "saved_at": saved_at.isoformat(timespec="milliseconds") if saved_at else None,
            "exiting": exiting,
            "exit_code": EXIT_PREEMPTED if exiting else None,
            "save_s": None if save_s is None else round(save_s, 3),
            # From the moment this process saw the notice to the checkpoint being complete.
            "notice_to_saved_s": latency_s,
            "skipped_save": skipped_save,
            "host": os.uname().nodename,
            # The nodes (SPOTROUTE_NODE_ID, else host names) whose own notice stopped the group.
            "noticed_on": noticed_on if noticed_on is not None else [node_id()],
        }
        self.location.write_marker(marker)

    def notice(self) -> Notice | None:
        """The terminal notice received so far, if any (for loops that want to stop early)."""
        return self._terminal_notice()
