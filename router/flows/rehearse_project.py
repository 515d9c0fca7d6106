"""A rehearsal's project on disk: a Pulumi project of its own with its own SPOTROUTE_HOME, the
local market made of the trace, one job.yaml per rehearsed job, and the `route` commands run in it.

    <dir>/project/Pulumi.yaml, spotroute.yaml, trace.csv, jobs/<job>.yaml
    <dir>/home/        SPOTROUTE_HOME: state backend, records, sandbox, checkpoints, locks
    <dir>/events/      <job>.jsonl: the job's own events (router/checkpoint/rehearsal_job.py)
    <dir>/logs/        watch.log (JSON lines, every run of the first watcher; watch-<i>.log of
                       the others with --watchers), deploys and destroys
"""

from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

import router
from router.contract.local_market import MarketRow
from router.core.rehearsal import Clock, JobPlan, job_document
from router.flows.init import PULUMI_YAML

# The job's command on each node: this checkout's (or installation's) router first on the path.
_JOB_CODE = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from router.checkpoint.rehearsal_job import main; sys.exit(main())"
)
# What the rehearsal's commands must not inherit: they use the rehearsal's own backend.
_LEAKY_ENV = (
    "PULUMI_BACKEND_URL",
    "PULUMI_CONFIG_PASSPHRASE",
    "PULUMI_CONFIG_PASSPHRASE_FILE",
    "PULUMI_ACCESS_TOKEN",
    "SPOTROUTE_KILL_AT",
)


@dataclass(frozen=True)
class RehearsalDirs:
    """Where a rehearsal keeps everything."""

    root: Path

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def events(self) -> Path:
        return self.root / "events"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def job_file(self, job: str) -> Path:
        return self.project / "jobs" / f"{job}.yaml"

    def events_of(self, job: str) -> Path:
        return self.events / f"{job}.jsonl"

    def watch_log(self, i: int) -> Path:
        """Watcher i's JSON lines (0: watch.log, as with one watcher): one writer per file."""
        return self.logs / ("watch.log" if i == 0 else f"watch-{i}.log")

    def watch_logs(self) -> list[Path]:
        """Every watcher's log there is."""
        return sorted(self.logs.glob("watch*.log"))


def package_root() -> str:
    """The directory holding the `router` package in use (a checkout or site-packages)."""
    return str(Path(router.__file__).resolve().parent.parent)


def route_env(dirs: RehearsalDirs) -> dict[str, str]:
    """The environment of the rehearsal's `route` commands: its home, this router's code."""
    env = {k: v for k, v in os.environ.items() if k not in _LEAKY_ENV}
    path = os.pathsep.join(p for p in (package_root(), env.get("PYTHONPATH", "")) if p)
    env.update(
        {
            "SPOTROUTE_HOME": str(dirs.home),
            "PYTHONPATH": path,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "NO_COLOR": "1",
            "COLUMNS": "200",
        }
    )
    return env


def route_command(*args: str) -> list[str]:
    """`route ARGS` with the interpreter running this rehearsal."""
    return [sys.executable, "-m", "router", *args]


def trace_csv(rows: Sequence[MarketRow]) -> str:
    """The local market's trace file (router/contract/local_market.py's columns)."""
    out = io.StringIO()
    out.write("# The backtest's trace as a local market (route rehearse): offsets are\n")
    out.write("# simulated seconds, prices USD per real hour (the trace's × the rehearsal's\n")
    out.write("# speed); `-`: the zone is out (not offered) until its next row.\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["at", "region", "market", "price_per_hour", "capacity"])
    for r in rows:
        price, capacity = (f"{r.price_per_hour:g}", str(r.capacity)) if r.offered else ("-", "-")
        writer.writerow([f"{r.offset_s or 0.0:g}s", r.region, r.market, price, capacity])
    return out.getvalue()


def org_config(workload: str, clock: Clock, profile: str) -> str:
    """spotroute.yaml: the local target only, priced by the trace, on the rehearsal's clock."""
    doc = {
        "clouds": ["local"],
        "local_market": {
            "trace": "trace.csv",
            "start": clock.real_start.isoformat(),
            "profile": profile,
            "time_scale": clock.speed,
        },
    }
    head = f"# A rehearsal of workload {workload} (route rehearse, docs/rehearsal.md).\n"
    return head + yaml.safe_dump(doc, sort_keys=False)


def write_project(
    dirs: RehearsalDirs,
    *,
    workload: str,
    clock: Clock,
    profile: str,
    rows: Sequence[MarketRow],
) -> None:
    """The project's files and the rehearsal's directories (none may exist yet)."""
    for directory in (
        dirs.project / "jobs",
        dirs.project / "stacks",
        dirs.home,
        dirs.events,
        dirs.logs,
    ):
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    (dirs.project / "Pulumi.yaml").write_text(PULUMI_YAML)
    (dirs.project / "trace.csv").write_text(trace_csv(rows))
    (dirs.project / "spotroute.yaml").write_text(org_config(workload, clock, profile))


def write_job(
    dirs: RehearsalDirs, plan: JobPlan, clock: Clock, regions: Sequence[str] = ()
) -> Path:
    """jobs/<job>.yaml: the workload job on the rehearsal's clock, running the light job."""
    env = {
        "REHEARSAL_STEPS": str(plan.steps),
        "REHEARSAL_STEP_S": repr(plan.step_s),
        "REHEARSAL_RESTORE_S": repr(clock.real_s(plan.job.restore_overhead_s)),
        "REHEARSAL_LOG": str(dirs.events_of(plan.name)),
    }
    command = [sys.executable, "-c", _JOB_CODE, package_root()]
    doc = job_document(plan, clock, command=command, env=env, regions=regions)
    head = (
        f"# Workload job {plan.job.name}, rehearsed at {clock.speed:g}× (route rehearse): "
        "durations in real time.\n"
    )
    path = dirs.job_file(plan.name)
    path.write_text(head + yaml.safe_dump(doc, sort_keys=False))
    return path
