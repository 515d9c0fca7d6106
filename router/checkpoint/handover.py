"""The job's side of a hand-over (route migrate): answer a save request, confirm a resume.

The router talks to the job through files beside the checkpoints, on whatever storage they use
(file://, s3://, gs://, az://), never through an API the job must serve:

  save-request.json  the router's {"id", "placement", "requested_at"}. The job running as that
                     placement (SPOTROUTE_PLACEMENT_ID; a job that does not know its placement
                     answers any request in its storage) saves at the next step boundary — the
                     next `maybe_save` — with the id in the manifest's extra.request, then holds
                     (makes no more progress) while the request stands. The router removes it to
                     let the job go on (a rolled-back move); a stop (SIGTERM, a notice) while
                     holding means the new placement took over: the job exits 0, no marker.
  resumed.json       written after every restore: {"step", "placement", "time", "job_id"} —
                     how the router confirms the new placement restored the handed-over step.
  finished.json      written by `mark_finished(step)` when training ran to the end.

A new placement whose checkpoints live elsewhere (another bucket, another cloud) starts before the
router has copied the handed-over checkpoint there; the router tells it which step to wait for
(SPOTROUTE_RESTORE_STEP, in the new stack's job env), and `restore` waits for a complete
checkpoint of at least that step (SPOTROUTE_RESTORE_WAIT, default 30 minutes) before it reads.

On a local disk the request is read at most every 0.2 s, on an object store every 5 s (one small
GET; `request_poll_s` overrides), by rank 0, and the decision is shared with every rank.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from router.checkpoint import rng
from router.checkpoint.results import CheckpointError, Resume, now_iso
from router.checkpoint.state import CheckpointerState

log = logging.getLogger("spotroute.checkpoint")

REQUEST_NAME = "save-request.json"
RESUMED_NAME = "resumed.json"
FINISHED_NAME = "finished.json"
LOCAL_POLL_S = 0.2
REMOTE_POLL_S = 5.0
RESTORE_WAIT_S = 1800.0  # a copy between clouds of a large checkpoint takes a while
EXIT_HANDED_OVER = 0  # the new placement goes on: this process has nothing left to do


class HandOverMixin(CheckpointerState):
    """Save requests and resume records (docs/checkpoints.md, "Hand-over")."""

    placement: str
    request_poll_s: float | None
    restore_step: int | None
    restore_wait_s: float
    _request: dict[str, Any] | None = None
    _request_read_at: float = float("-inf")
    _answered: str | None = None
    _request_warned: bool = False

    def _poll_s(self) -> float:
        if self.request_poll_s is not None:
            return self.request_poll_s
        return LOCAL_POLL_S if self.location.is_local else REMOTE_POLL_S

    def _read_request(self) -> dict[str, Any] | None:
        """The request standing for this placement, read now (rank 0; None on other ranks)."""
        if self._ranks.rank != 0:
            return None
        self._request_read_at = time.monotonic()
        try:
            data = self.location.read_json(REQUEST_NAME)
        except Exception as error:  # a storage hiccup must not stop training; the router waits
            if not self._request_warned:
                log.warning("spotroute: cannot read %s: %s", REQUEST_NAME, error)
                self._request_warned = True
            return None
        if not data or not data.get("id"):
            return None
        if self.placement and data.get("placement") != self.placement:
            return None  # meant for another placement sharing this storage
        return data

    def _save_request(self) -> dict[str, Any] | None:
        """The standing request, re-read when the poll interval has passed (cheap otherwise)."""
        if self._ranks.rank == 0 and time.monotonic() - self._request_read_at >= self._poll_s():
            self._request = self._read_request()
        return self._request

    def _answer_request(self, step: int, request: dict[str, Any] | None,
                        save: Callable[[], object]) -> bool:
        """Save `step` for the request (every rank), mark the manifest with its id, hold;
        False when no request stands (on rank 0)."""
        request = self._ranks.broadcast(request)
        if request is None:
            return False
        request_id = str(request["id"])
        if self._answered != request_id:
            save()  # saves nothing when `step` is saved already: then that one is marked
            if self._ranks.rank == 0:
                manifest = self.location.read_manifest(step)
                extra = {**manifest.extra, "request": request_id, "placement": self.placement}
                if manifest.extra != extra:
                    self.location.write_manifest(dataclasses.replace(manifest, extra=extra))
            self._answered = request_id
            log.info("spotroute: saved step %d for hand-over %s; holding until the router lets "
                     "go", step, request_id)
        self._hold(request_id)
        return True

    def _hold(self, request_id: str) -> None:
        """Wait while the request stands; a stop meanwhile means the new placement took over."""
        while True:
            verdict = None
            if self._ranks.rank == 0:
                if self._terminal_notice() is not None:
                    verdict = "stop"
                elif (self._read_request() or {}).get("id") != request_id:
                    verdict = "go on"
            verdict = self._ranks.broadcast(verdict)
            if verdict == "go on":
                self._request = None
                log.info("spotroute: hand-over %s withdrawn; training goes on", request_id)
                return
            if verdict == "stop":
                notice = self._terminal_notice()
                if notice is not None:
                    self.watcher.acknowledge(notice)
                log.info("spotroute: stopped after hand-over %s; the new placement goes on",
                         request_id)
                if self.exit_on_notice:
                    self.close()
                    raise SystemExit(EXIT_HANDED_OVER)
                return
            time.sleep(self._poll_s() if self.location.is_local else 1.0)

    def _await_handover(self) -> None:
        """Before a restore: wait for the handed-over step to be complete here (rank 0)."""
        want = self.restore_step
        if want is None or self._ranks.rank != 0:
            return
        deadline, said = time.monotonic() + self.restore_wait_s, False
        while not any(s >= want and self.location.has_manifest(s) for s in self.location.steps()):
            if time.monotonic() > deadline:
                raise CheckpointError(
                    f"the handed-over checkpoint of step {want} did not arrive under {self.url} "
                    f"within {self.restore_wait_s:.0f} s (SPOTROUTE_RESTORE_WAIT) — the router "
                    "copies it there during `route migrate`; see its journal"
                )
            if not said:
                log.info("spotroute: waiting for the handed-over checkpoint of step %d", want)
                said = True
            time.sleep(self._poll_s() if self.location.is_local else 2.0)

    def _resumed(self, resume: Resume) -> Resume:
        """Write the resume record (rank 0) after a restore, whatever it found."""
        if self._ranks.rank == 0:
            record = {"step": resume.step, "placement": self.placement, "time": now_iso(),
                      "job_id": self.job_id, "checkpoint_url": resume.checkpoint_url}
            try:
                self.location.write_json(RESUMED_NAME, record)
            except Exception as error:  # training can go on; a router waiting for it times out
                log.warning("spotroute: cannot write %s: %s", RESUMED_NAME, error)
        return resume

    @rng.leaves_rng_alone
    def mark_finished(self, step: int) -> None:
        """Record that training ran to the end (finished.json): the router stops watching it."""
        if self._ranks.rank == 0:
            self.location.write_json(FINISHED_NAME, {"step": step, "time": now_iso(),
                                                     "placement": self.placement,
                                                     "job_id": self.job_id})
