"""Retention: keep the newest `keep` complete checkpoints, after each commit, off the save path.

A save is complete once its manifest is written (the commit). Deleting the checkpoints beyond
`keep` used to follow inside the save, on the training thread for a synchronous save: on a local
disk, unlinking a 200 MB checkpoint took a third of the time the save's own bytes took to write
and fsync. It now runs on a thread of its own, started by the commit and waited for by `restore`
and `close`; a save claims its step directory, so retention never deletes one being written.

Crash-safe as before, because the order of the deletions did not change: a checkpoint loses its
manifest before its files, so a process killed between the commit and retention leaves one
checkpoint too many (the next commit's retention removes it), and one killed inside it leaves a
directory without a manifest, which restore skips and the next retention removes
(tests/checkpoint/test_save_path.py kills a process at each of those points).
"""

from __future__ import annotations

import logging
import threading

from router.checkpoint.storage import Location

log = logging.getLogger("spotroute.checkpoint")

SAVE, RETENTION = "save", "retention"  # who holds a step directory (StepClaims)


class Retention:
    """Deletes checkpoints beyond the newest `keep` complete ones on its own thread, never a
    step directory a save of this process is writing (claims)."""

    def __init__(self, location: Location, keep: int) -> None:
        self.location = location
        self.keep = keep
        self._lock = threading.Condition()
        self._claims: dict[int, str] = {}  # step → SAVE or RETENTION
        self._wanted = False
        self._thread: threading.Thread | None = None

    # --- the save's side ----------------------------------------------------------------------

    def claim_for_save(self, step: int) -> None:
        """Keep retention away from `step` until `release(step)`; waits only while retention
        is deleting that very directory (an older step saved again)."""
        with self._lock:
            while self._claims.get(step) == RETENTION:
                self._lock.wait()
            self._claims[step] = SAVE

    def release(self, step: int) -> None:
        with self._lock:
            if self._claims.get(step) == SAVE:
                del self._claims[step]
            self._lock.notify_all()

    def request(self) -> None:
        """A checkpoint was committed: apply retention soon, on the retention thread."""
        with self._lock:
            self._wanted = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="spotroute-retention", daemon=True
                )
                self._thread.start()

    def wait(self) -> None:
        """Wait until no retention is running or wanted."""
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    # --- the retention thread -----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._wanted:
                    self._thread = None
                    return
                self._wanted = False
            try:
                self.apply()
            except Exception as error:  # the checkpoints stay; the next commit's retention retries
                log.warning("spotroute: retention failed (older checkpoints kept): %s", error)

    def apply(self) -> None:
        """Keep the newest `keep` complete checkpoints; drop older ones and dead partial ones."""
        steps = self.location.steps()
        complete = [s for s in steps if self.location.has_manifest(s)]
        if not complete:
            return
        keep = set(complete[: self.keep])
        newest = complete[0]
        for step in steps:
            # A partial directory newer than the newest complete one may be a save in flight.
            if step in keep or step >= newest:
                continue
            with self._lock:
                if step in self._claims:  # this process is saving that step (again)
                    continue
                self._claims[step] = RETENTION
            try:
                self.location.remove_step(step)
            finally:
                with self._lock:
                    del self._claims[step]
                    self._lock.notify_all()
