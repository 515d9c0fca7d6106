"""A background thread per notice source; the training thread asks it for what arrived.

The watcher never saves by itself: a save from a background thread would race the training
step (and, with several ranks, the collectives). It records the notice and sets `arrived`, a
flag the training thread reads without a lock or a collective; the next
`Checkpointer.maybe_save` (called once per step) acts on it, and `Checkpointer.should_stop()`
lets a long step end early to get there. Metadata endpoints are polled every `poll_interval_s`
(2 s); sources whose poll waits by itself (GCP's long poll, SIGTERM) are polled back to back.
"""

from __future__ import annotations

import logging
import threading
import time

from router.checkpoint.notices import MetadataUnavailable, Notice, NoticeSource

log = logging.getLogger("spotroute.checkpoint")


class NoticeWatcher:
    """Polls each source on its own daemon thread; `take()` hands over what arrived, once."""

    def __init__(self, sources: list[NoticeSource], *, poll_interval_s: float = 2.0) -> None:
        self.sources = sources
        self.poll_interval_s = poll_interval_s
        self._lock = threading.Lock()
        self._terminal: Notice | None = None
        self._rebalance: Notice | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.arrived = threading.Event()  # set once a terminal notice is recorded

    def start(self) -> NoticeWatcher:
        for source in self.sources:
            thread = threading.Thread(
                target=self._run, args=(source,), name=f"spotroute-notices-{source.cloud}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)
        return self

    def _run(self, source: NoticeSource) -> None:
        warned = False
        waits = bool(getattr(source, "poll_waits", False))
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                notice = source.poll()
            except MetadataUnavailable as error:
                if not warned:  # once: a job that is not on that cloud would log forever
                    log.warning("spotroute: %s preemption notices unavailable: %s", source.cloud,
                                error)
                    warned = True
                self._stop.wait(self.poll_interval_s * 5)
                continue
            except Exception:  # a malformed answer must not kill the watcher
                log.exception("spotroute: reading %s preemption notices failed", source.cloud)
                self._stop.wait(self.poll_interval_s * 5)
                continue
            if notice is not None:
                self.record(notice)
                if notice.terminal:
                    return
            if not waits:
                self._stop.wait(self.poll_interval_s)
            elif time.monotonic() - started < 0.5:  # it answered at once: don't spin on it
                self._stop.wait(min(self.poll_interval_s, 0.2))

    def record(self, notice: Notice) -> None:
        """Note a notice (the sources do; tests and callers may too)."""
        with self._lock:
            if notice.terminal:
                if self._terminal is None:
                    self._terminal = notice
                    self.arrived.set()
                    log.warning("spotroute: %s notice from %s: %s", notice.kind, notice.cloud,
                                "saving a checkpoint and exiting")
            elif self._rebalance is None:
                self._rebalance = notice

    def peek_terminal(self) -> Notice | None:
        with self._lock:
            return self._terminal

    def take_rebalance(self) -> Notice | None:
        with self._lock:
            notice, self._rebalance = self._rebalance, None
            return notice

    def acknowledge(self, notice: Notice) -> None:
        for source in self.sources:
            if source.cloud == notice.cloud:
                try:
                    source.acknowledge(notice)
                except MetadataUnavailable as error:
                    log.warning("spotroute: acknowledging the %s notice failed: %s",
                                notice.cloud, error)

    def stop(self) -> None:
        self._stop.set()
        for source in self.sources:
            source.close()
        for thread in self._threads:
            thread.join(timeout=0.1)
