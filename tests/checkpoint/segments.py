"""A training segment in a child process that reports each step it completes, SIGKILLed at a
chosen step: a preemption without a notice, for the kill-and-resume tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def run_segment(
    context: Any,
    target: Callable[..., None],
    args: tuple[Any, ...],
    kill_at: Callable[[int, int], bool],
    delay_s: float = 0.0,
) -> tuple[int | None, int | None, bool]:
    """Run `target(*args, pipe)` in a process of `context` (it sends the number of each step
    it completes); SIGKILL it `delay_s` after the first step where kill_at(first, step).
    Returns (first step reported, exit code, whether it was killed)."""
    reader, writer = context.Pipe(duplex=False)
    child = context.Process(target=target, args=(*args, writer))
    child.start()
    writer.close()
    first: int | None = None
    killed = False
    while True:
        try:
            message = reader.recv()
        except EOFError:
            break
        if isinstance(message, int):
            first = message if first is None else first
            if kill_at(first, message):
                time.sleep(delay_s)
                child.kill()
                killed = True
                break
    child.join(timeout=120)
    reader.close()
    return first, child.exitcode, killed
