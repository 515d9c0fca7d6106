"""Where a move may stop: the one line of a move stopped at a step (Ctrl-C, SIGTERM), the rule
that a step failing once a stop was asked *is* that stop, and the test hooks that stop a router
at each point of a move (SPOTROUTE_KILL_AT, tests/engine/test_migration_kill_matrix.py and
tests/engine/test_migrate_ctrl_c.py).

A terminal's Ctrl-C goes to the whole foreground process group: `route migrate` only notes it
and stops at the next step boundary, but the engine command in flight gets it too (`pulumi stack
ls` dies, an `up` cancels), and what that command then reports is no failure of the step or of
the backend: the journal stays open at the step, and `route migrate JOB` finishes it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Callable, Iterator

from router.core.errors import Interrupted, RouteError
from router.core.journal import Journal
from router.engine.processes import ENGINE_SIGINT_ENV

KILL_ENV = "SPOTROUTE_KILL_AT"


def journaled_stop(journal: Journal) -> str:
    """The one line of a move stopped at a step, whatever the step was doing."""
    return (
        f"job {journal.job}: interrupted before {journal.next_step() or 'its end'} — the move "
        f"stays journaled; `route migrate {journal.job}` finishes it"
    )


def stopped_at_a_step(journal: Journal) -> Journal:
    """The journal a run ended with; Interrupted when a stop left it open at a step."""
    if journal.outcome == "open":
        raise Interrupted(journaled_stop(journal))
    return journal


@contextlib.contextmanager
def stopping_at(
    journal: Journal,
    stop_requested: Callable[[], bool],
    open_journal: Callable[[str], Journal | None],
    *,
    passes: tuple[type[RouteError], ...] = (),
) -> Iterator[None]:
    """Run a step (or a rollback): whatever it raises once a stop was asked (an engine command
    the Ctrl-C reached fails as a RouteError, or as the Automation API's or subprocess's own
    error) becomes the stop's Interrupted, naming the step the journal is open at; `passes`
    go through as raised."""
    try:
        yield
    except Exception as exc:
        if not stop_requested() or isinstance(exc, passes):
            raise
        raise Interrupted(journaled_stop(open_journal(journal.job) or journal)) from None


def kill_point(name: str) -> None:
    """SIGKILL here when SPOTROUTE_KILL_AT names this point; `<point>:INT`: a Ctrl-C (tests)."""
    if (wanted := os.environ.get(KILL_ENV)) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    elif wanted == f"{name}:INT":  # as a terminal sends it: to the whole process group
        os.killpg(os.getpgrp(), signal.SIGINT)


@contextlib.contextmanager
def interrupt_point(step: str) -> Iterator[None]:
    """Tests only: SPOTROUTE_KILL_AT=during:<step>:INT sends a Ctrl-C as the step's first engine
    command starts (router.engine.processes.ENGINE_SIGINT_ENV), or, in a step that runs none, as
    its work returns (before the journal records it done)."""
    if os.environ.get(KILL_ENV) != f"during:{step}:INT":
        yield
        return
    fd, flag = tempfile.mkstemp(prefix="spotroute-sigint-")
    os.close(fd)
    os.environ[ENGINE_SIGINT_ENV] = flag
    try:
        yield
    finally:
        del os.environ[ENGINE_SIGINT_ENV]
        with contextlib.suppress(FileNotFoundError):
            os.unlink(flag)  # no engine command took it: the Ctrl-C comes now
            os.killpg(os.getpgrp(), signal.SIGINT)
