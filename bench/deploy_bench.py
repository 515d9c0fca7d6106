"""`route deploy` cost: the router's own phases vs. the Pulumi engine's, on the local target.

Run: PATH="$(bash scripts/ensure-pulumi.sh --print-dir):$PATH" \
     .venv/bin/python bench/deploy_bench.py [--runs 50] [--engine-runs 3] [--cli-runs 1]

1. Router phases, in-process, no engine (`--runs` times each, for the local quickstart and the
   8×A100 cloud job in examples/): load job → org config → offers (catalog, snapshot, cache) →
   plan → stack config → diff against the existing stacks/ file, and `proposals.propose` (all of
   them, as `route deploy` calls it). The first run (cold: CSV parsing, lru caches) is shown apart.
2. Real deploys, in-process through `router.flows.jobs` exactly as the CLI calls it (`--engine-runs`
   times): new deploy, unchanged redeploy, destroy. Every Pulumi CLI call the Automation API makes
   is timed by wrapping `PulumiCommand.run` (and its `pulumi version` probe), so
   router overhead = wall − engine calls.
3. The same deploy + destroy through the `route` CLI as a subprocess (`--cli-runs` times): what a
   user waits for, interpreter start and imports included.

Everything runs in a temp project and SPOTROUTE_HOME; job processes are destroyed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

LOCAL_JOB = REPO / "examples" / "quickstart.yaml"
CLOUD_JOB = REPO / "examples" / "llm-finetune.yaml"


# --- numbers --------------------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank) of values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def row(name: str, values: Sequence[float], unit: float = 1000.0, suffix: str = "ms") -> str:
    if not values:
        return f"  {name:<42} -"
    return (
        f"  {name:<42} median {statistics.median(values) * unit:9.2f} {suffix}   "
        f"p95 {pct(values, 95) * unit:9.2f} {suffix}   max {max(values) * unit:9.2f} {suffix}"
        f"   (n={len(values)})"
    )


# --- 1. router phases -----------------------------------------------------------------------------


def router_phases(
    job_path: Path, project: Any, runs: int
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """(first run, later runs) seconds per phase of what `route deploy` does before the engine."""
    from router.config.datafiles import load_egress, load_interruption_model, load_storage_prices
    from router.config.job_file import load_job
    from router.config.org_file import org_config_for
    from router.config.stack_files import read_stack_file
    from router.core.planner import plan
    from router.core.stackconfig import config_diff, stack_config
    from router.flows.plan import current_offers
    from router.flows.proposals import propose

    samples: dict[str, list[float]] = defaultdict(list)
    for _ in range(runs + 1):
        now = datetime.now(UTC)
        t = [time.perf_counter()]
        job = load_job(job_path)
        t.append(time.perf_counter())
        org = org_config_for(project)
        t.append(time.perf_counter())
        offers = current_offers(job, now)
        t.append(time.perf_counter())
        result = plan(
            job,
            offers,
            org=org,
            egress=load_egress(),
            now=now,
            interruption=load_interruption_model(),
            storage=load_storage_prices(),
        )
        t.append(time.perf_counter())
        config = stack_config(job, result.placements[0], result.placements)
        t.append(time.perf_counter())
        config_diff(read_stack_file(project.stack_config_path(job.name)), config)
        t.append(time.perf_counter())
        propose(job_path, project=project, now=now)
        t.append(time.perf_counter())
        names = (
            "load job",
            "org config",
            "offers",
            "plan",
            "stack config",
            "diff vs stacks/ file",
            "jobs.propose (all of it)",
        )
        for name, start, end in zip(names, t, t[1:], strict=False):
            samples[name].append(end - start)
        samples["offers considered"].append(float(len(offers)))
    first = {name: values.pop(0) for name, values in samples.items()}
    return first, samples


# --- 2. engine calls ------------------------------------------------------------------------------


@dataclass
class EngineClock:
    """Seconds spent in Pulumi CLI processes, per command, while installed."""

    calls: list[tuple[str, float]] = field(default_factory=list)

    @contextmanager
    def installed(self) -> Iterator[None]:
        from pulumi.automation import _cmd

        run, init = _cmd.PulumiCommand.run, _cmd.PulumiCommand.__init__
        clock = self

        def timed_run(cmd: Any, args: list[str], *rest: Any, **kw: Any) -> Any:
            name = " ".join(a for a in args if not a.startswith("-"))
            words = name.split()
            label = (
                " ".join(words[:2])
                if words and words[0] in ("stack", "config")
                else (words[0] if words else "?")
            )
            started = time.perf_counter()
            try:
                return run(cmd, args, *rest, **kw)
            finally:
                clock.calls.append((label, time.perf_counter() - started))

        def timed_init(cmd: Any, *args: Any, **kw: Any) -> None:
            started = time.perf_counter()
            try:
                init(cmd, *args, **kw)
            finally:
                clock.calls.append(("version (PulumiCommand)", time.perf_counter() - started))

        _cmd.PulumiCommand.run = timed_run  # type: ignore[method-assign,assignment]
        _cmd.PulumiCommand.__init__ = timed_init  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            _cmd.PulumiCommand.run = run  # type: ignore[method-assign]
            _cmd.PulumiCommand.__init__ = init  # type: ignore[method-assign]

    def take(self) -> list[tuple[str, float]]:
        calls, self.calls = self.calls, []
        return calls


def engine_runs(project: Any, job_path: Path, runs: int) -> dict[str, list[dict[str, Any]]]:
    """Per scenario, one dict per run: wall, engine, per-command seconds."""
    from router.flows import jobs, proposals

    clock = EngineClock()
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def measure(scenario: str, action: Callable[[], Any]) -> Any:
        clock.take()
        started = time.perf_counter()
        value = action()
        wall = time.perf_counter() - started
        calls = clock.take()
        out[scenario].append({"wall": wall, "engine": sum(s for _, s in calls), "calls": calls})
        return value

    with clock.installed():
        for _ in range(runs):
            for scenario in ("deploy (new stack)", "redeploy (unchanged)"):

                def deploy() -> Any:
                    proposal = proposals.propose(job_path, project=project, now=datetime.now(UTC))
                    outcome = jobs.deploy(proposal, project=project, confirm=lambda _r: True)
                    assert outcome.applied, outcome
                    return outcome

                measure(scenario, deploy)
            measure("destroy", lambda: jobs.destroy_job(_job_name(job_path), project=project))
    return out


def _job_name(job_path: Path) -> str:
    from router.config.job_file import load_job

    return load_job(job_path).name


def print_engine(results: dict[str, list[dict[str, Any]]]) -> None:
    for scenario, runs in results.items():
        walls = [r["wall"] for r in runs]
        engine = [r["engine"] for r in runs]
        router = [r["wall"] - r["engine"] for r in runs]
        print(f"\n{scenario}")
        print(row("wall", walls, 1, "s "))
        print(row("engine (pulumi CLI calls)", engine, 1, "s "))
        print(row("router (wall − engine)", router, 1, "s "))
        per: dict[str, list[float]] = defaultdict(list)
        counts: dict[str, list[int]] = defaultdict(list)
        for r in runs:
            run_per: dict[str, float] = defaultdict(float)
            run_count: dict[str, int] = defaultdict(int)
            for label, seconds in r["calls"]:
                run_per[label] += seconds
                run_count[label] += 1
            for label in run_per:
                per[label].append(run_per[label])
                counts[label].append(run_count[label])
        for label in sorted(per, key=lambda k: -statistics.median(per[k])):
            print(row(f"  pulumi {label} ×{max(counts[label])}", per[label], 1, "s "))


# --- 3. the CLI -----------------------------------------------------------------------------------


def cli_runs(
    project_dir: Path, job_path: Path, env: dict[str, str], runs: int
) -> dict[str, list[float]]:
    """Wall seconds of `route deploy` (new, unchanged) and `route destroy`, each a subprocess."""
    walls: dict[str, list[float]] = defaultdict(list)
    name = _job_name(job_path)
    deploy = ["deploy", str(job_path), "--yes", "--json"]
    steps = (
        ("route deploy --yes --json (new)", deploy),
        ("route deploy --yes --json (unchanged)", deploy),
        ("route destroy --yes", ["destroy", name, "--yes"]),
    )
    for _ in range(runs):
        for label, args in steps:
            started = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "router", *args],
                cwd=project_dir,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            walls[label].append(time.perf_counter() - started)
            if proc.returncode != 0:
                raise SystemExit(
                    f"route {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}"
                )
    return walls


# --- main -----------------------------------------------------------------------------------------


def make_project(root: Path) -> Path:
    import yaml

    project = root / "project"
    (project / "stacks").mkdir(parents=True)
    doc = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    doc.pop("main", None)  # the program runs inline; the engine refuses a missing main dir
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return project


def machine() -> str:
    import platform

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from router.engine.automation import find_pulumi

    binary = find_pulumi()  # the CLI the router runs (spotroute's own build first, else PATH)
    version = subprocess.run([binary, "version"], capture_output=True, text=True).stdout.strip()
    pulumi = f"{version} ({binary})"
    load = os.getloadavg()[0]
    return (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs ({cpu}), "
        f"Python {platform.python_version()}, pulumi {pulumi}, load avg (1 min) {load:.2f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="router-phase runs per job")
    parser.add_argument("--engine-runs", type=int, default=3, help="in-process deploy cycles")
    parser.add_argument("--cli-runs", type=int, default=1, help="route CLI deploy cycles")
    args = parser.parse_args()
    if shutil.which("pulumi") is None:
        print(
            "error: pulumi is not on PATH — run `bash scripts/ensure-pulumi.sh` and put the "
            "directory `bash scripts/ensure-pulumi.sh --print-dir` prints first on PATH",
            file=sys.stderr,
        )
        return 1

    from router.config.project import Project

    root = Path(tempfile.mkdtemp(prefix="spotroute-deploy-bench-"))
    home = root / "home"
    os.environ["SPOTROUTE_HOME"] = str(home)
    os.environ["PULUMI_HOME"] = str(root / "pulumi-home")
    for var in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"):
        os.environ.pop(var, None)
    project = Project(make_project(root))
    print(f"machine: {machine()}")
    try:
        print(f"\n1. router phases before the engine, in-process ({args.runs} runs + 1 cold)")
        for job_path in (LOCAL_JOB, CLOUD_JOB):
            first, later = router_phases(job_path, project, args.runs)
            considered = int(first.pop("offers considered"))
            later.pop("offers considered")
            print(f"\n{job_path.relative_to(REPO)} ({considered} offers considered)")
            for name, values in later.items():
                print(row(name, values) + f"   first {first[name] * 1000:8.2f} ms")

        print(f"\n2. real deploys on the local target, in-process ({args.engine_runs} cycles)")
        print_engine(engine_runs(project, LOCAL_JOB, args.engine_runs))

        if args.cli_runs:
            print(f"\n3. the route CLI as a subprocess ({args.cli_runs} cycles)")
            env = {**os.environ, "PYTHONPATH": str(REPO)}
            for label, values in cli_runs(project.root, LOCAL_JOB, env, args.cli_runs).items():
                print(row(label, values, 1, "s "))
    finally:
        _teardown(project, LOCAL_JOB)
        shutil.rmtree(root, ignore_errors=True)
    return 0


def _teardown(project: Any, job_path: Path) -> None:
    """Destroy the bench job if a run stopped half-way (its process must not outlive the bench)."""
    from router.flows import jobs

    name = _job_name(job_path)
    try:
        if any(s.name == name for s in jobs.engine_for(project).list_stacks()):
            jobs.destroy_job(name, project=project)
    except Exception as exc:  # a bench must still clean up what it can
        print(f"warning: could not destroy {name}: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
