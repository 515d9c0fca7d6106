"""The job's side of a hand-over (route migrate): answer a save request, confirm a resume.

The router talks to the job through files beside the checkpoints, on whatever storage they use
(file://, s3://, gs://, az://), never through an API the job must serve:

  save-request.json  the router's {"id", "placement", "requested_at"}. The job running as that
                     placement (SPOTROUTE_PLACEMENT_ID; a job that does not know its placement
                     answers any request in its storage) saves at the next step boundary — the
                     next `maybe_save` — with the id in the manifest's extra.request, then holds
                     (makes no more progress) while the request stands. The router removes it to
                     let the job go on (a rolled-back move); a stop (SIGTERM, a notice) while
                     holding, or the router's handover-complete.json naming the request, means
                     the new placement took over: the job exits 0, no marker.
  resumed.json       written after every restore: {"step", "placement", "time", "job_id"} —
                     how the router confirms the new placement restored the handed-over step.
  finished.json      written by `mark_finished(step)` when training ran to the end.

A new placement whose checkpoints live elsewhere (another bucket, another cloud) starts before the
router has copied the handed-over checkpoint there; the router tells it which step to wait for
(SPOTROUTE_RESTORE_STEP, in the new stack's job env), and `restore` waits for a complete
checkpoint of at least that step (SPOTROUTE_RESTORE_WAIT, default 30 minutes) before it reads.

Bounded from the job's side, so a router that dies mid-move leaves no paid job in limbo:

  - a hold ends after SPOTROUTE_HOLD_TIMEOUT (default 60 minutes: the copy wait above plus a
    new stack's start-up). The job records handover-expired.json {"id", "placement", "step",
    "held_s", "time", "job_id"}, ignores that request from then on, and trains on.
  - a new placement started for a move (SPOTROUTE_HANDOVER_ID, in the new stack's job env)
    trains from the restored step and waits for the router's handover-complete.json with that
    id, written in both placements' storage once the router confirmed the resume. Without it
    within SPOTROUTE_HANDOVER_TIMEOUT (default 30 minutes, counted from the restore) it records
    handover-abandoned.json {"id", "placement", "step", "waited_s", "time", "job_id"} and stops
    (exit 0): the old placement, which still holds or trains, is the job.
  The next `route watch` finds these records beside the checkpoints and rolls the move back
  (router/flows/migrate.py). The default hand-over timeout is the shorter of the two, so a new
  placement in doubt usually stops before the old one resumes training.

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
EXPIRED_NAME = "handover-expired.json"  # the old placement ended its hold and trains on
ABANDONED_NAME = "handover-abandoned.json"  # a new placement gave up waiting and stopped
COMPLETE_NAME = "handover-complete.json"  # the router: the old placement is down
LOCAL_POLL_S = 0.2
REMOTE_POLL_S = 5.0
RESTORE_WAIT_S = 1800.0  # a copy between clouds of a large checkpoint takes a while
HOLD_TIMEOUT_S = 3600.0  # RESTORE_WAIT_S + a new stack's boot and image pull, with room
HANDOVER_TIMEOUT_S = 1800.0  # resume confirmed + the old stack destroyed (cloud: minutes)
EXIT_HANDED_OVER = 0  # the new placement goes on: this process has nothing left to do
EXIT_HANDOVER_ABANDONED = 0  # the old placement goes on: this one has nothing left to do


class HandOverMixin(CheckpointerState):
    """Save requests and resume records (docs/checkpoints.md, "Hand-over")."""

    placement: str
    request_poll_s: float | None
    restore_step: int | None
    restore_wait_s: float
    hold_timeout_s: float = HOLD_TIMEOUT_S
    handover_id: str = ""  # the move this new placement was started for (SPOTROUTE_HANDOVER_ID)
    handover_timeout_s: float = HANDOVER_TIMEOUT_S
    stop_reason: str | None = None  # "handover-abandoned" once stopped (see exit_on_notice)
    _request: dict[str, Any] | None = None
    _request_read_at: float = float("-inf")
    _answered: str | None = None
    _request_warned: bool = False
    _expired: set[str] | None = None  # request ids whose hold ended: never answered again
    _restored_at: float | None = None  # monotonic time of the restore (a new placement's clock)
    _handed_over: bool = False
    _complete_read_at: float = float("-inf")

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
        if str(data["id"]) in self._expired_requests():
            return None  # its hold ran out: a stale request, left for the router to see
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
        self._hold(request_id, step)
        return True

    def _hold(self, request_id: str, step: int) -> None:
        """Wait while the request stands; a stop meanwhile means the new placement took over.
        At most hold_timeout_s (seconds): then the job records it and trains on."""
        held_since = time.monotonic()
        while True:
            verdict = None
            if self._ranks.rank == 0:
                if self._terminal_notice() is not None or self._move_completed(request_id):
                    verdict = "stop"
                elif (self._read_request() or {}).get("id") != request_id:
                    verdict = "go on"
                elif time.monotonic() - held_since > self.hold_timeout_s:
                    verdict = "expired"
            verdict = self._ranks.broadcast(verdict)
            if verdict == "expired":
                self._end_hold(request_id, step, time.monotonic() - held_since)
                return
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

    # --- the bounds on a hand-over whose router is gone ---------------------------------------

    def _bound_handover(self, hold_timeout_s: float | None, handover_id: str,
                        handover_timeout_s: float | None) -> None:
        """The hand-over bounds (seconds; None = the default), set by the constructor."""
        for name, value in (("hold_timeout_s", hold_timeout_s),
                            ("handover_timeout_s", handover_timeout_s)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be above 0 seconds, got {value!r}")
        self.hold_timeout_s = HOLD_TIMEOUT_S if hold_timeout_s is None else hold_timeout_s
        self.handover_timeout_s = (HANDOVER_TIMEOUT_S if handover_timeout_s is None
                                   else handover_timeout_s)
        self.handover_id = handover_id

    def _expired_requests(self) -> set[str]:
        """Ids of requests whose hold ran out, here or in an earlier process (rank 0)."""
        if self._expired is None:
            try:
                record = self.location.read_json(EXPIRED_NAME) or {}
            except Exception:  # unreadable: nothing known to be stale
                record = {}
            self._expired = {str(record["id"])} if record.get("id") else set()
        return self._expired

    def _end_hold(self, request_id: str, step: int, held_s: float) -> None:
        """The hold ran out (the router is gone or stuck): record it, ignore the request."""
        self._request = None
        if self._ranks.rank != 0:
            return
        self._expired_requests().add(request_id)
        record = {"id": request_id, "placement": self.placement, "step": step,
                  "held_s": round(held_s, 3), "time": now_iso(), "job_id": self.job_id}
        try:
            self.location.write_json(EXPIRED_NAME, record)
        except Exception as error:  # training goes on either way; the router sees the job run
            log.warning("spotroute: cannot write %s: %s", EXPIRED_NAME, error)
        log.warning("spotroute: held step %d for hand-over %s for %.0f s without the router "
                    "letting go (SPOTROUTE_HOLD_TIMEOUT); training goes on — the next `route "
                    "watch` rolls the move back", step, request_id, held_s)

    def _move_completed(self, request_id: str) -> bool:
        """The router's handover-complete.json names this request: the new placement is the job."""
        try:
            record = self.location.read_json(COMPLETE_NAME) or {}
        except Exception:  # a storage hiccup: the router's destroy stops this process anyway
            return False
        return record.get("id") == request_id

    def _handover_given_up(self) -> bool:
        """A new placement whose move the router never completed, past handover_timeout_s
        since its restore (rank 0 decides; other ranks answer False)."""
        if self.stop_reason is not None:
            return self._ranks.rank == 0  # stopped already (exit_on_notice=False): say so again
        if (not self.handover_id or self._handed_over or self._restored_at is None
                or self._ranks.rank != 0):
            return False
        now = time.monotonic()
        if now - self._complete_read_at >= self._poll_s():
            self._complete_read_at = now
            try:
                record = self.location.read_json(COMPLETE_NAME) or {}
            except Exception:  # a storage hiccup: ask again at the next poll
                record = {}
            if record.get("id") == self.handover_id:
                self._handed_over = True
                log.info("spotroute: hand-over %s complete; this placement is the job",
                         self.handover_id)
                return False
        return now - self._restored_at > self.handover_timeout_s

    def _abandon_handover(self, step: int) -> bool:
        """Stop this new placement (every rank): the old one is still the job. Raises
        SystemExit(0), or with exit_on_notice=False sets stop_reason and returns False."""
        waited_s = time.monotonic() - (self._restored_at or time.monotonic())
        if self._ranks.rank == 0 and self.stop_reason is None:
            record = {"id": self.handover_id, "placement": self.placement, "step": step,
                      "waited_s": round(waited_s, 3), "time": now_iso(), "job_id": self.job_id}
            try:
                self.location.write_json(ABANDONED_NAME, record)
            except Exception as error:
                log.warning("spotroute: cannot write %s: %s", ABANDONED_NAME, error)
            log.warning("spotroute: hand-over %s not completed by the router within %.0f s "
                        "(SPOTROUTE_HANDOVER_TIMEOUT); this new placement stops at step %d — "
                        "the old one goes on", self.handover_id, waited_s, step)
        self.stop_reason = "handover-abandoned"
        if self.exit_on_notice:
            self.close()
            raise SystemExit(EXIT_HANDOVER_ABANDONED)
        return False

    def _resumed(self, resume: Resume) -> Resume:
        """Write the resume record (rank 0) after a restore, whatever it found."""
        self._restored_at = time.monotonic()  # a new placement's hand-over clock starts
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
