"""`route rehearse WORKLOAD`: the backtest's market replayed through the running system, held to
the backtest's prediction (docs/rehearsal.md).

A rehearsal is the running system, not a second simulator. It reads the workload and its traces
as `route backtest` does (router.flows.backtest.load_backtest_inputs), turns each pool of the
trace into a region of the local market on an accelerated clock (router.core.rehearsal), and
then only drives the real commands in a project of its own (router/flows/rehearse_project.py):

- `route deploy` of each job at its arrival (a light job: router/checkpoint/rehearsal_job.py,
  which checkpoints with the library's plain-directory mode at the workload's interval);
- `route watch` — the real loop, decide(), `route migrate`'s journals, leases, the real Pulumi
  engine on the local target — from the start until every job finished or the trace ended;
- with `--chaos`, SIGKILL of the watcher at random moments (restarted at once) and now and then
  `route preempt JOB --grace 0`: a node taken without notice.

Meanwhile a sampler (rehearse_sampler.py) checks what must never happen; at the end the records
`route report` reads give the realised cost, and `route backtest`'s own simulation
(router.core.backtest.run_backtest) — fed the phase times this run measured — the prediction
(rehearse_result.py). The policy is the one `route watch` runs: deadline-aware.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from router.core.errors import EXIT_BAD_INPUT, BadInput, OperationFailed
from router.core.rehearsal import (
    Clock,
    JobPlan,
    chosen_jobs,
    cut_trace,
    job_names,
    job_plan,
    market_rows,
    region_names,
    regions_for,
)
from router.flows.rehearse_project import (
    RehearsalDirs,
    route_command,
    route_env,
    write_job,
    write_project,
)

DEFAULT_SPEED = 400.0  # simulated seconds per real second: a week in 25 minutes
DEFAULT_INTERVAL_S = 1.0  # the watcher's --interval, real seconds
SETUP_LEAD_S = 3.0  # real seconds between writing the project and the market's start
CHAOS_KILL_EVERY_S = 60.0  # --chaos: the watcher is SIGKILLed every this many real s (mean)
CHAOS_JOBS_PER_PREEMPT = 4  # --chaos: one node preempted without notice per this many jobs
DEPLOY_RETRY_S = 5.0
QUICK_EXIT_S = 5.0  # a watcher that exits this soon after its start did not get going
STOP_TIMEOUT_S = 300.0
MAX_WATCHERS = 8
_TICK_S = 0.2
Progress = Callable[[datetime, int, int], None]  # (simulated now, jobs finished, jobs)


@dataclass(frozen=True)
class RehearsalOptions:
    """What `route rehearse` was asked (real seconds unless named otherwise)."""

    speed: float = DEFAULT_SPEED
    chaos: bool = False
    jobs: int | None = None  # the first N jobs to arrive; None = all
    job_names: tuple[str, ...] = ()  # or these jobs
    days: float | None = None  # the trace's first D days; None = all of it
    directory: Path | None = None  # where to keep it all; None = a new temporary directory
    interval_s: float = DEFAULT_INTERVAL_S
    seed: int = 0
    # `route watch` processes side by side (leases keep each job to one of them): a watcher
    # runs engine steps one at a time, so more of them take more jobs' steps at once.
    watchers: int = 1
    # A zone that is out keeps its offer and refuses launches, as a cloud does — the system the
    # backtest's policies (which see which zones are usable) do not model; default: withdrawn.
    unannounced_outages: bool = False


@dataclass
class RunLog:
    """What the rehearsal itself did while the system ran (real times)."""

    started_at: datetime
    ended_at: datetime | None = None
    ended_by: str = ""  # "every job finished" | "the trace ended"
    deploys: dict[str, list[tuple[datetime, datetime, int]]] = field(default_factory=dict)
    watcher_runs: int = 0
    watcher_kills: list[datetime] = field(default_factory=list)
    watcher_pids: list[int] = field(default_factory=list)  # every watcher process started
    killed_pids: list[int] = field(default_factory=list)  # of them, SIGKILLed by --chaos
    chaos_preemptions: list[tuple[str, datetime]] = field(default_factory=list)
    destroyed_at_end: list[str] = field(default_factory=list)

    @property
    def working_pids(self) -> set[str]:
        """Watchers that ran until stopped: a lease one of them held was no delay (another of
        --watchers at work on the job), one a killed watcher held was."""
        return {str(pid) for pid in self.watcher_pids} - {str(pid) for pid in self.killed_pids}

    @property
    def wall_s(self) -> float:
        end = self.ended_at or datetime.now(UTC)
        return (end - self.started_at).total_seconds()


def rehearse(
    workload_path: Path,
    options: RehearsalOptions,
    *,
    prices: Sequence[Path] = (),
    availability: Sequence[str] = (),
    on_progress: Progress | None = None,
) -> Any:
    """Run the rehearsal and hold it to the prediction (a rehearse_result.RehearsalReport)."""
    from router.flows.backtest import load_backtest_inputs
    from router.flows.rehearse_result import collect

    if not 1 <= options.speed <= 3600:
        raise BadInput(f"--speed: {options.speed:g} — use 1 … 3600 simulated seconds per second")
    if options.interval_s <= 0:
        raise BadInput(f"--interval: {options.interval_s:g} s — use a duration above 0")
    if not 1 <= options.watchers <= MAX_WATCHERS:
        raise BadInput(f"--watchers: {options.watchers} — use 1 … {MAX_WATCHERS} watch processes")
    inputs = load_backtest_inputs(workload_path, prices=prices, availability=availability)
    trace = cut_trace(inputs.trace, options.days)
    workload = inputs.workload.workload
    picked = chosen_jobs(workload, trace, count=options.jobs, names=options.job_names)
    existed = options.directory is not None and options.directory.exists()
    dirs = RehearsalDirs(_directory(options.directory))
    clock = Clock(trace.start, datetime.now(UTC) + timedelta(seconds=SETUP_LEAD_S), options.speed)
    regions = region_names(trace.pools)
    capacity = sum(j.node_count for j in picked)
    try:
        write_project(
            dirs,
            workload=workload.name,
            clock=clock,
            profile=_profile(trace, workload),
            rows=market_rows(
                trace,
                regions,
                speed=options.speed,
                capacity=capacity,
                announced=not options.unannounced_outages,
            ),
        )
        names = job_names(picked)
        plans = [job_plan(j, names[j.name], clock) for j in picked]
        for plan in plans:
            written = write_job(dirs, plan, clock, regions_for(plan.job, trace, regions))
            _check_job_file(written, plan, options.speed)
    except BadInput:
        _empty(dirs.root, made=not existed)  # as it was: absent, or empty
        raise
    run = _Run(dirs, plans, clock, options, end=clock.real_at(trace.end), on_progress=on_progress)
    log = run.go()
    if run.failed:
        raise OperationFailed(f"rehearsal stopped: {run.failed} (kept in {dirs.root})")
    return collect(
        dirs,
        inputs,
        trace,
        plans,
        clock,
        options,
        log,
        regions,
        sampler=run.sampler,
        sources=inputs.sources,
        leftover_wait_s=30.0,
    )


def _check_job_file(path: Path, plan: JobPlan, speed: float) -> None:
    """What `route deploy` would refuse is refused before the market starts, not at the job's
    arrival minutes in: on the accelerated clock a short job or interval may fall below what a
    job file may say (BadInput naming --speed)."""
    from router.config.job_file import validate_job_file

    problems = validate_job_file(path)  # the reader `route deploy` and `route validate` use
    if problems:
        raise BadInput(
            f"--speed: at {speed:g}× workload job {plan.job.name} is not a valid job file "
            f"({problems[0].split(': ', 1)[-1]}) — use a lower --speed"
        )


def _empty(root: Path, *, made: bool) -> None:
    """Take back what the rehearsal wrote: the directory it made, or the contents of the empty
    one it was given (that is all it holds)."""
    import shutil

    if made:
        shutil.rmtree(root, ignore_errors=True)
        return
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


def _directory(given: Path | None) -> Path:
    if given is None:
        return Path(tempfile.mkdtemp(prefix="spotroute-rehearsal-"))
    if given.exists() and any(given.iterdir()):
        raise BadInput(f"--dir: {given} is not empty — give a new or empty directory")
    given.mkdir(parents=True, exist_ok=True)
    return given.resolve()


def _profile(trace: Any, workload: Any) -> str:
    """The cloud the local nodes imitate: the trace's, or the workload's home cloud."""
    clouds = {p.cloud for p in trace.pools}
    if len(clouds) == 1 and next(iter(clouds)) in ("aws", "gcp", "azure"):
        return str(next(iter(clouds)))
    return workload.home_cloud if workload.home_cloud in ("aws", "gcp", "azure") else "aws"


@dataclass
class _Watcher:
    """One `route watch` of the rehearsal: its log, its process (restarted), its quick exits."""

    log: Path
    proc: subprocess.Popen[bytes] | None = None
    out: IO[bytes] | None = None
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    quick_exits: int = 0


class _Run:
    """Drives the real commands over the rehearsal's span (one at a time but the watcher)."""

    def __init__(
        self,
        dirs: RehearsalDirs,
        plans: Sequence[JobPlan],
        clock: Clock,
        options: RehearsalOptions,
        *,
        end: datetime,
        on_progress: Progress | None,
    ) -> None:
        self.dirs, self.plans, self.clock, self.options = dirs, list(plans), clock, options
        self.end = end
        self.on_progress = on_progress
        self.env = route_env(dirs)
        self.log = RunLog(started_at=datetime.now(UTC))
        self.rng = random.Random(options.seed)
        self.watchers = [_Watcher(dirs.watch_log(i)) for i in range(options.watchers)]
        self.pending: dict[str, datetime] = {p.name: p.submit_at for p in plans}
        self.deploying: dict[str, tuple[subprocess.Popen[bytes], datetime]] = {}
        self.finished: set[str] = set()
        self.failed = ""  # why the rehearsal cannot go on (a job file the CLI refuses)
        self.sampler: Any = None
        self.next_kill = self._after(CHAOS_KILL_EVERY_S) if options.chaos else None
        self.preempt_at = self._preempt_times() if options.chaos else []

    # --- the loop ------------------------------------------------------------------------------

    def go(self) -> RunLog:
        from router.flows.rehearse_sampler import Sampler

        sampler = self.sampler = Sampler(self.dirs, [p.name for p in self.plans]).start()
        try:
            self._wait_until(self.clock.real_start)
            for watcher in self.watchers:
                self._start_watcher(watcher)
            while True:
                now = datetime.now(UTC)
                self._submit(now)
                self._chaos(now)
                self._keep_watcher()
                self._check_finished()
                if self.on_progress is not None:
                    self.on_progress(self.clock.sim_at(now), len(self.finished), len(self.plans))
                if self.failed:
                    self.log.ended_by = "a deploy failed"
                    break
                if len(self.finished) == len(self.plans):
                    self.log.ended_by = "every job finished"
                    break
                if now >= self.end:
                    self.log.ended_by = "the trace ended"
                    break
                time.sleep(_TICK_S)
        finally:
            self._stop_watchers()
            self._end_deploys()
            self._finish_journals()
            self._destroy_unfinished()
            self.log.ended_at = datetime.now(UTC)
            sampler.stop()
        return self.log

    @staticmethod
    def _wait_until(moment: datetime) -> None:
        left = (moment - datetime.now(UTC)).total_seconds()
        if left > 0:
            time.sleep(left)

    def _after(self, mean_s: float) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.rng.expovariate(1.0 / mean_s))

    def _preempt_times(self) -> list[datetime]:
        """--chaos: a few moments, spread over the span the jobs should run in."""
        count = max(1, math.ceil(len(self.plans) / CHAOS_JOBS_PER_PREEMPT))
        first = min(p.submit_at for p in self.plans)
        last = min(self.end, max(p.submit_at + timedelta(seconds=2 * p.work_s) for p in self.plans))
        span = max(1.0, (last - first).total_seconds())
        return sorted(
            first + timedelta(seconds=span * self.rng.uniform(0.15, 0.8)) for _ in range(count)
        )

    # --- jobs ----------------------------------------------------------------------------------

    def _submit(self, now: datetime) -> None:
        """`route deploy` each job due (its arrival); a refused one is tried again shortly."""
        for name, due in sorted(self.pending.items(), key=lambda kv: kv[1]):
            if due > now or name in self.deploying:
                continue
            out = open(self.dirs.logs / f"deploy-{name}.log", "ab")  # noqa: SIM115 (closed below)
            proc = subprocess.Popen(
                route_command("deploy", str(self.dirs.job_file(name)), "--yes", "--json"),
                cwd=self.dirs.project,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            out.close()
            self.deploying[name] = (proc, now)
        for name, (proc, began) in list(self.deploying.items()):
            code = proc.poll()
            if code is None:
                continue
            del self.deploying[name]
            self.log.deploys.setdefault(name, []).append((began, datetime.now(UTC), code))
            if code == 0:
                self.pending.pop(name, None)
            elif code == EXIT_BAD_INPUT:  # the job file is wrong: trying again will not help
                self.failed = (
                    f"route deploy {name}: {_last_line(self.dirs.logs / f'deploy-{name}.log')}"
                )
            else:
                self.pending[name] = datetime.now(UTC) + timedelta(seconds=DEPLOY_RETRY_S)

    def _check_finished(self) -> None:
        """A job is finished when it said so and the watcher tore its placement down."""
        from router.engine.records import FileRecords
        from router.flows.live_placement import read_placement

        records = FileRecords(self.dirs.home)
        for plan in self.plans:
            if plan.name in self.finished or plan.name in self.pending:
                continue
            if _said_finished(self.dirs.events_of(plan.name)) and (
                read_placement(records, plan.name) is None
            ):
                self.finished.add(plan.name)

    # --- the watcher ---------------------------------------------------------------------------

    def _start_watcher(self, watcher: _Watcher) -> None:
        """`route watch`, its JSON lines appended to the watcher's log."""
        if watcher.out is None:
            watcher.out = open(watcher.log, "ab")  # noqa: SIM115 (closed by _stop_watchers)
        interval = f"{self.options.interval_s:g}s"
        watcher.proc = subprocess.Popen(
            route_command("watch", "--interval", interval, "--log-format", "json"),
            cwd=self.dirs.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=watcher.out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: the engine's too
        )
        watcher.started = datetime.now(UTC)
        self.log.watcher_runs += 1
        self.log.watcher_pids.append(watcher.proc.pid)

    def _keep_watcher(self) -> None:
        """A watcher that exited by itself is started again; one that keeps exiting at once
        (a project it cannot watch) stops the rehearsal."""
        for watcher in self.watchers:
            if watcher.proc is None or watcher.proc.poll() is None:
                continue
            quick = (datetime.now(UTC) - watcher.started).total_seconds() < QUICK_EXIT_S
            watcher.quick_exits = watcher.quick_exits + 1 if quick else 0
            if watcher.quick_exits >= 3:
                self.failed = f"route watch exited at once 3 times: {_last_line(watcher.log)}"
                return
            self._start_watcher(watcher)

    def _kill_watcher(self, watcher: _Watcher) -> None:
        """SIGKILL the watcher and what it started in its session (the engine's processes)."""
        proc = watcher.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        self.log.watcher_kills.append(datetime.now(UTC))
        self.log.killed_pids.append(proc.pid)

    def _stop_watchers(self) -> None:
        """SIGTERM: each watcher finishes the step in flight and exits; SIGKILL after a while."""
        running = [w.proc for w in self.watchers if w.proc is not None and w.proc.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        for proc in running:
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for watcher in self.watchers:
            if watcher.out is not None:
                watcher.out.close()
                watcher.out = None

    # --- chaos ---------------------------------------------------------------------------------

    def _chaos(self, now: datetime) -> None:
        if self.next_kill is not None and now >= self.next_kill:
            # One watcher draws nothing: --seed gives the same chaos as before --watchers.
            watcher = self.rng.choice(self.watchers) if len(self.watchers) > 1 else self.watchers[0]
            self._kill_watcher(watcher)
            time.sleep(self.rng.uniform(0.2, 1.5))
            self._start_watcher(watcher)
            self.next_kill = self._after(CHAOS_KILL_EVERY_S)
        if self.preempt_at and now >= self.preempt_at[0] and self._preempt_one(now):
            self.preempt_at.pop(0)

    def _preempt_one(self, now: datetime) -> bool:
        """`route preempt JOB --grace 0` on a job that runs now; False when none does, or the
        preemption failed (a job that ended meanwhile): tried again at the next tick."""
        from components.local_nodes import live_records

        running = sorted(
            {
                r.job
                for r in live_records(self.dirs.home / "sandbox" / ".running")
                if r.phase == "running"
            }
        )
        if not running:
            return False
        job = self.rng.choice(running)
        if self._route("preempt", job, "--grace", "0", "--json", log="chaos.log") != 0:
            return False
        self.log.chaos_preemptions.append((job, now))
        return True

    # --- the end -------------------------------------------------------------------------------

    def _end_deploys(self) -> None:
        for name, (proc, began) in list(self.deploying.items()):
            code = proc.wait(timeout=STOP_TIMEOUT_S)
            self.log.deploys.setdefault(name, []).append((began, datetime.now(UTC), code))
            if code == 0:
                self.pending.pop(name, None)
        self.deploying.clear()

    def _finish_journals(self) -> None:
        """Moves the stopped watcher left open: `route migrate JOB` runs each to its end."""
        from router.engine.job_records import JobRecords
        from router.engine.records import FileRecords

        records = JobRecords(FileRecords(self.dirs.home))
        for plan in self.plans:
            if records.open_journal(plan.name) is None:
                continue
            self._route("migrate", plan.name, "--yes", log=f"finish-{plan.name}.log")

    def _route(self, *args: str, log: str) -> int:
        """`route ARGS` in the rehearsal's project, its output appended to logs/LOG."""
        with open(self.dirs.logs / log, "ab") as out:
            done = subprocess.run(
                route_command(*args),
                cwd=self.dirs.project,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=STOP_TIMEOUT_S,
            )
        return done.returncode

    def _destroy_unfinished(self) -> None:
        """Jobs still placed when the trace ended: `route destroy` (their checkpoints stay)."""
        from router.engine.records import FileRecords
        from router.flows.live_placement import read_placement

        records = FileRecords(self.dirs.home)
        for plan in self.plans:
            if read_placement(records, plan.name) is None:
                continue
            self._route("destroy", plan.name, "--yes", log=f"destroy-{plan.name}.log")
            self.log.destroyed_at_end.append(plan.name)


def _said_finished(events: Path) -> bool:
    try:
        return '"event": "finished"' in events.read_text()
    except OSError:
        return False


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return "(no output)"
    return lines[-1] if lines else "(no output)"
