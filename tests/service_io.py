"""Reading a running `route watch` as its operators do: its `--log-format json` lines as events,
with a timeout (a reader thread, so a silent process fails the test instead of hanging it), its
Prometheus exposition as samples, and its stop on SIGTERM."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of a Prometheus text exposition by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


class LogLines:
    """The JSON lines a process writes on stdout, in order; `seen` keeps every one read."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.seen: list[dict[str, Any]] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        stream = proc.stdout

        def pump() -> None:
            for line in stream:
                self._lines.put(line)
            self._lines.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def next(self, event: str, timeout_s: float = 90, **match: Any) -> dict[str, Any]:
        """The next event of this kind (and these field values); every line must be JSON."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            parsed: dict[str, Any] = json.loads(line)
            self.seen.append(parsed)
            if parsed["event"] == event and all(parsed.get(k) == v for k, v in match.items()):
                return parsed
        raise AssertionError(f"no {event} {match} within {timeout_s:g} s; saw {self.seen[-5:]}")

    def rest(self) -> list[dict[str, Any]]:
        """Every event left once the process has exited."""
        self.proc.wait(timeout=120)
        while (line := self._lines.get(timeout=30)) is not None:
            self.seen.append(json.loads(line))
        return self.seen

    def stop(self) -> list[dict[str, Any]]:
        """SIGTERM, as systemd or a container runtime stops the service: every event, once it
        exited 0 without a traceback."""
        self.proc.send_signal(signal.SIGTERM)
        events = self.rest()
        err = self.proc.stderr.read() if self.proc.stderr else ""
        assert self.proc.returncode == 0, err
        assert "Traceback" not in err
        return events
