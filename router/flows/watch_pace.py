"""How fast `route watch` acts, as it measured itself: the timing inputs of the slack test.

decide()'s deadline slack test (router/core/decide_deadline.py) counts the time until the job is
decided on again (Rules.decision_period_s) and the time a re-placement takes to launch
(Rules.launch_s). The watch interval and a cloud's boot figure are only the least of them: a
pass waits for the engine steps of every job it acts on (run one at a time), and a launch is the
engine's step as well as the cloud's. A watcher that counted only its interval moved jobs onto
spot with too little slack left, and missed their deadlines when the spot went (the rehearsal
found it: docs/rehearsal.md). `WatchPace` keeps this watcher's last passes and launches (real
seconds) and gives decide() the slower of what it measured and what it was told.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from router.core.journal import Journal, launch_seconds
from router.core.startup_budget import StartupFigures

PASSES_KEPT = 10  # the last passes: a pass that moved a job is as slow as the next may be
LAUNCHES_KEPT = 20  # the last launches this watcher saw through


@dataclass
class WatchPace:
    passes: deque[float] = field(default_factory=lambda: deque(maxlen=PASSES_KEPT))
    launches: deque[float] = field(default_factory=lambda: deque(maxlen=LAUNCHES_KEPT))

    def passed(self, seconds: float) -> None:
        self.passes.append(max(0.0, seconds))

    def launched(self, journal: Journal) -> None:
        """A journal this watcher opened and ran: its launch, if its new stack came up."""
        seconds = launch_seconds(journal)
        if seconds is not None and seconds >= 0.0:
            self.launches.append(seconds)

    def decision_period_s(self, interval_s: float) -> float:
        """Until a job is decided on again: the interval, or the slowest of the last passes."""
        return max(interval_s, *self.passes) if self.passes else interval_s

    def launch_s(self, prior_s: float | None = None) -> float | None:
        """A re-placement's launch: the mean of the last ones, else `prior_s` (None: the
        caller's, the clouds' boot — boot_prior_s)."""
        return sum(self.launches) / len(self.launches) if self.launches else prior_s


def boot_prior_s(figures: Mapping[str, StartupFigures], clouds: Iterable[str]) -> float:
    """The slowest boot of the clouds a job may launch on (router/data/node_startup.csv): a
    launch takes at least that before anything is measured. The local target's nodes start
    within a pass (0)."""
    return max((figures[c].boot_s for c in clouds if c != "local" and c in figures), default=0.0)
