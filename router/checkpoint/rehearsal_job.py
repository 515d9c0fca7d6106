"""The light job of a rehearsal (`route rehearse`): steps of pretend work at a set pace, its state
saved and restored with this library's plain-directory mode — no torch, no GPU.

The local target runs it on each node as the job's command (router/flows/rehearse.py writes
it into the job's job.yaml). Standard library and router.checkpoint only.

Its state is a digest of the steps done, in order (`digest`): a run that was moved, preempted
and restored ends with the digest of one that never was, so "every job finished with all its
work, done once" can be checked from its last checkpoint.

Environment (besides what the local target sets for the library: SPOTROUTE_CHECKPOINT_URL, …):
  REHEARSAL_STEPS      steps of work in all
  REHEARSAL_STEP_S     real seconds per step
  REHEARSAL_RESTORE_S  real seconds a restart (the job started somewhere before) takes until it
                       has restored (the workload's restore_overhead, on the rehearsal's clock),
                       counted from the process start
  REHEARSAL_LOG        a file the job appends its events to, one JSON line each (O_APPEND):
                       start, restored {step}, saved {step}, stopped {step, code}, finished
                       {step, digest}; each with placement, pid and time
It also keeps `rehearsal.json` in its working directory (the node's): {placement, step, state:
restoring | training | saving | stopped | done, time}, rewritten at most every 0.2 s and at each
change of state — the rehearsal's sampler reads it to see which placements train at one moment.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MODULUS = 1_000_003
HEARTBEAT_FILE = "rehearsal.json"
_HEARTBEAT_EVERY_S = 0.2


def digest(steps: int, start: int = 0, value: int = 1) -> int:
    """The state after steps `start` … `steps - 1` done in order, from `value`."""
    for i in range(start, steps):
        value = (value * 31 + i) % MODULUS
    return value


class _Job:
    """One run of the job on one placement: its events, heartbeat and state directory."""

    def __init__(self, env: dict[str, str]) -> None:
        self.steps = int(env["REHEARSAL_STEPS"])
        self.step_s = float(env["REHEARSAL_STEP_S"])
        self.restore_s = float(env.get("REHEARSAL_RESTORE_S") or 0.0)
        self.log = env.get("REHEARSAL_LOG", "")
        self.placement = env.get("SPOTROUTE_PLACEMENT_ID", "")
        self.state_dir = Path.cwd() / "rehearsal-state"
        self.heartbeat_at = 0.0
        self.state = ""

    def event(self, kind: str, **fields: Any) -> None:
        if not self.log:
            return
        line = json.dumps(
            {
                "event": kind,
                "placement": self.placement,
                "pid": os.getpid(),
                "time": datetime.now(UTC).isoformat(),
                **fields,
            }
        )
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def ran_before(self) -> bool:
        """Whether this job started somewhere before (its event log says so)."""
        try:
            with open(self.log, encoding="utf-8") as events:
                return any('"event": "start"' in line for line in events)
        except OSError:
            return False

    def beat(self, state: str, step: int) -> None:
        """Rewrite the heartbeat when the state changes, else at most every 0.2 s."""
        now = time.monotonic()
        if state == self.state and now - self.heartbeat_at < _HEARTBEAT_EVERY_S:
            return
        self.state, self.heartbeat_at = state, now
        text = json.dumps(
            {
                "placement": self.placement,
                "step": step,
                "state": state,
                "pid": os.getpid(),
                "time": datetime.now(UTC).isoformat(),
            }
        )
        staged = Path(f".{HEARTBEAT_FILE}.tmp")
        staged.write_text(text)
        staged.replace(HEARTBEAT_FILE)


def main() -> int:
    """Restore, work step by step at the set pace, save when the library says so, finish."""
    began = time.monotonic()
    job = _Job(dict(os.environ))
    job.beat("restoring", 0)
    restart = job.ran_before()
    job.event("start")
    from router.checkpoint import Checkpointer

    ckpt = Checkpointer.from_env()
    if restart:  # a restart takes the workload's restore overhead before it has restored
        time.sleep(max(0.0, job.restore_s - (time.monotonic() - began)))
    resume = ckpt.restore_files(job.state_dir)  # writes the resume record the router waits for
    step = resume.step
    value = int(resume.user.get("value", 1)) if step else 1
    if value != digest(step):
        job.event("damaged", step=step, value=value)
        print(f"rehearsal job: state at step {step} is {value}, expected {digest(step)}")
        return 3
    job.event("restored", step=step)
    anchor, anchored_step = time.monotonic(), step
    try:
        while step < job.steps:
            job.beat("training", step)
            # Paced by the clock, not by sleeps added up: a late wake-up is made good.
            wait = anchor + (step + 1 - anchored_step) * job.step_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            value = (value * 31 + step) % MODULUS
            step += 1
            if step == job.steps or ckpt.due(step):
                job.beat("saving", step)
                job.state_dir.mkdir(exist_ok=True)
                (job.state_dir / "state.json").write_text(json.dumps({"step": step}))
                ckpt.save_files(step, job.state_dir, user={"value": value})
                job.event("saved", step=step)
                anchor, anchored_step = time.monotonic(), step  # a hold is no work
    except SystemExit as stop:  # saved on a notice (75) or handed over to a new placement (0)
        job.beat("stopped", step)
        job.event("stopped", step=step, code=stop.code)
        raise
    ckpt.mark_finished(step)
    ckpt.close()
    job.beat("done", step)
    job.event("finished", step=step, digest=value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
