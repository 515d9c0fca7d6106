"""No process spotroute starts outlives the `route` command that started it.

The chain is route → pulumi CLI → Python plugins (`python -m pulumi.policy`, `python -m
pulumi.dynamic`). A `kill -9` of route used to leave plugins re-parented to PID 1. Three guards:

- the pulumi CLI is started through a wrapper that asks the kernel to send it SIGINT when its
  parent dies (PR_SET_PDEATHSIG via `setpriv`): SIGINT is Pulumi's clean cancel, so it releases
  the stack lock on its way out;
- the Python plugins run through a guarded interpreter (`SPOTROUTE_PYTHON`): a daemon thread
  exits the plugin as soon as its parent (the CLI) is gone;
- every engine command first sweeps up what an older crash left: pulumi processes whose
  environment names this SPOTROUTE_HOME and a route process (OWNER_ENV) that is gone.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from router.config.home import HOME_ENV
from router.contract.local_node import OWNER_ENV as OWNER_ENV
from router.contract.local_node import SIGNAL_HOOK_ENV as SIGNAL_HOOK_ENV

# Runs `-m MODULE ARGS...` like `python -u -m MODULE ARGS...`, exiting when the parent dies.
_GUARD = """\
import os, runpy, sys, threading, time
args = [a for a in sys.argv[1:] if a != "-u"]
if len(args) < 2 or args[0] != "-m":
    sys.exit("spotroute guarded python: expected -m MODULE ARGS")
parent = os.getppid()
def _watch():
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(70)
threading.Thread(target=_watch, daemon=True, name="spotroute-parent-watch").start()
sys.argv = [args[1], *args[2:]]
runpy.run_module(args[1], run_name="__main__", alter_sys=True)
"""


def _write_executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.exists() and path.read_text() == text:
        return path
    staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    staged.write_text(text)
    staged.chmod(0o755)
    staged.replace(path)  # a concurrent engine may be executing the previous one
    return path


def guarded_python(home: Path, python: str) -> Path:
    """An interpreter wrapper for the engine's Python plugins that dies with its parent."""
    script = (
        "#!/bin/sh\n"
        "# Written by spotroute (router.engine.processes): python -m MODULE for the Pulumi\n"
        "# engine's plugins, exiting as soon as the engine that started it is gone.\n"
        "PYTHONUNBUFFERED=1; export PYTHONUNBUFFERED\n"
        f'exec {shlex.quote(python)} -c {shlex.quote(_GUARD)} "$@"\n'
    )
    return _write_executable(home / "engine-bin" / "python", script)


# Tests only: a file whose path this names makes the next engine command start with a Ctrl-C
# (SIGINT to the process group, as a terminal sends it), once: the wrapper removes the file.
ENGINE_SIGINT_ENV = "SPOTROUTE_TEST_SIGINT_ENGINE"


def pulumi_wrapper(home: Path, pulumi: Path) -> Path:
    """`<home>/engine/bin/pulumi`: the CLI, sent SIGINT (clean cancel) when route dies.

    Returns the wrapper's root (the Automation API runs `<root>/bin/pulumi`); without `setpriv`
    (not Linux) the wrapper simply runs the CLI and the sweep is the only guard.
    """
    setpriv = shutil.which("setpriv")
    runner = f"{shlex.quote(setpriv)} --pdeathsig INT -- " if setpriv else ""
    script = (
        "#!/bin/sh\n"
        "# Written by spotroute (router.engine.processes): the Pulumi CLI, told to cancel\n"
        "# cleanly (SIGINT) if the route command that started it dies.\n"
        f'if [ -n "${{{ENGINE_SIGINT_ENV}:-}}" ] && rm -- "${ENGINE_SIGINT_ENV}" 2>/dev/null\n'
        "then\n"
        "  kill -INT 0  # tests only (ENGINE_SIGINT_ENV): Ctrl-C as this command starts\n"
        "fi\n"
        f'exec {runner}{shlex.quote(str(pulumi))} "$@"\n'
    )
    return _write_executable(home / "engine" / "bin" / "pulumi", script).parent.parent


def owner_token(pid: int | None = None, *, proc: Path = Path("/proc")) -> str:
    """Identifies a running process across pid reuse: its pid and its start time in ticks."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_ticks(proc / str(pid)) or 0}"


def _start_ticks(entry: Path) -> int | None:
    try:
        return int((entry / "stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Orphan:
    pid: int
    command: str


def find_orphans(home: Path, *, proc: Path = Path("/proc")) -> list[Orphan]:
    """Engine processes of this SPOTROUTE_HOME whose route command is gone (Linux /proc).

    The engine environment names both the home and the route process that started it
    (OWNER_ENV), and children inherit it, so a plugin is found however it was re-parented.
    """
    wanted = f"{HOME_ENV}={home}".encode()
    prefix = f"{OWNER_ENV}=".encode()
    found = []
    try:
        entries = [p for p in proc.iterdir() if p.name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            if wanted not in environ:
                continue
            owner = next((e[len(prefix) :] for e in environ if e.startswith(prefix)), None)
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if owner is None or "pulumi" not in cmdline:
            continue  # not started by the engine adapter (e.g. the local target's job)
        owner_pid, _, ticks = owner.decode(errors="replace").partition(":")
        if (
            not owner_pid.isdigit()
            or owner_token(int(owner_pid), proc=proc) != f"{owner_pid}:{ticks}"
        ):
            found.append(Orphan(int(entry.name), cmdline.strip()[:200]))
    return found


def sweep_orphans(home: Path, *, grace_s: float = 10.0) -> list[Orphan]:
    """Stop engine processes an earlier, killed route command left behind; returns them.

    An orphaned pulumi CLI got SIGINT (a clean cancel) when route died; it gets `grace_s` to
    finish. One still running then — a cancel that waits on a program that is gone — gets a
    second SIGINT, Pulumi's hard stop, and 5 s more; only what survives both is killed. Plugins
    exit by themselves when the CLI goes; leftovers are killed with it.
    """
    orphans = find_orphans(home)
    if not orphans:
        return []
    _wait(orphans, grace_s)
    for o in orphans:
        if _running(o.pid) and _is_cli(o.command):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(o.pid, signal.SIGINT)
    _wait(orphans, 5.0)
    for o in orphans:
        if _running(o.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(o.pid, signal.SIGKILL)
    _wait(orphans, 2.0)
    return orphans


def _wait(orphans: list[Orphan], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_running(o.pid) for o in orphans):
        time.sleep(0.1)


def _is_cli(command: str) -> bool:
    """The pulumi CLI itself (as opposed to a plugin it started)."""
    first = command.split(" ", 1)[0]
    return Path(first).name == "pulumi"


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def signal_hook(command: str) -> Callable[[object], None] | None:
    """For the kill-matrix tests: signal this route command at its Nth engine event.

    SIGNAL_HOOK_ENV = "<command>:<event number>:<KILL|INT>" (tests only); `end` for the number is
    the engine's summary event (its work done; only the state write and unlock are left); another
    named moment (`deploy:node-started:KILL`) is the local target's to act on (components/local.py).

    SIGKILL goes to this process only (a crash); SIGINT to the whole process group, as a
    terminal's Ctrl-C does. Unset (always, outside tests) it returns None and costs nothing.
    """
    spec = os.environ.get(SIGNAL_HOOK_ENV, "")
    wanted, _, rest = spec.partition(":")
    number, _, name = rest.partition(":")
    at_end = number == "end"
    if wanted != command or not (number.isdigit() or at_end) or name not in ("KILL", "INT"):
        return None
    at, seen = (0 if at_end else int(number)), [0]
    lock = threading.Lock()

    def on_event(event: object) -> None:
        with lock:
            seen[0] += 1
            due = getattr(event, "summary_event", None) is not None if at_end else seen[0] == at
            if not due:
                return
        if name == "KILL":
            os.kill(os.getpid(), signal.SIGKILL)
        else:
            os.killpg(os.getpgrp(), signal.SIGINT)

    return on_event
