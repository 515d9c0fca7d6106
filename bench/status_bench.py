"""`route status` with many jobs: seconds for `route status --json` over 50 job stacks.

Run: PATH="$(bash scripts/ensure-pulumi.sh --print-dir):$PATH" \
     .venv/bin/python bench/status_bench.py [--jobs 50] [--runs 5]

Creates `--jobs` stacks cheaply in a temp project and SPOTROUTE_HOME — half local jobs, half the
8×A100 cloud job from examples/ (renamed), so `status` also prices "best $/h now" from the
snapshot — each with its stack config written the way `route deploy` writes it (Automation API,
`pulumi config set-all`) and a placement record, but no resources. Then times `route status
--json` as a subprocess (`--runs` times after one warm-up; median, min, max) and once in-process
with every Pulumi CLI call timed, to show how much is the engine's `stack ls`. Cleans up after.
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
from datetime import UTC, datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from deploy_bench import EngineClock, machine, make_project  # noqa: E402

TEMPLATES = (REPO / "examples" / "quickstart.yaml", REPO / "examples" / "llm-finetune.yaml")


def create_stacks(project: object, jobs_dir: Path, count: int) -> float:
    """Create `count` job stacks with config and placement records; returns seconds taken."""
    from router.flows import jobs, proposals

    engine = jobs.engine_for(project)  # type: ignore[arg-type]
    started = time.perf_counter()
    for i in range(count):
        doc = yaml.safe_load(TEMPLATES[i % 2].read_text())
        doc["name"] = f"bench-{'local' if i % 2 == 0 else 'cloud'}-{i:03d}"
        path = jobs_dir / f"{doc['name']}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        proposal = proposals.propose(path, project=project, now=datetime.now(UTC))  # type: ignore[arg-type]
        engine.stack(proposal.job.name)
        engine.write_config(proposal.job.name, proposal.config)
        jobs.record_placement(engine.home, proposal, {}, datetime.now(UTC))
        if (i + 1) % 10 == 0:
            print(
                f"  created {i + 1}/{count} stacks ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50, help="job stacks to create")
    parser.add_argument("--runs", type=int, default=5, help="timed `route status --json` runs")
    args = parser.parse_args()
    if shutil.which("pulumi") is None:
        print(
            "error: pulumi is not on PATH — run `bash scripts/ensure-pulumi.sh` and put the "
            "directory `bash scripts/ensure-pulumi.sh --print-dir` prints first on PATH",
            file=sys.stderr,
        )
        return 1

    from router.config.project import Project

    root = Path(tempfile.mkdtemp(prefix="spotroute-status-bench-"))
    os.environ["SPOTROUTE_HOME"] = str(root / "home")
    os.environ["PULUMI_HOME"] = str(root / "pulumi-home")
    for var in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"):
        os.environ.pop(var, None)
    project = Project(make_project(root))
    jobs_dir = root / "jobs"
    jobs_dir.mkdir()
    print(f"machine: {machine()}")
    try:
        print(f"\ncreating {args.jobs} job stacks (stack init + config set-all + placement record)")
        created_s = create_stacks(project, jobs_dir, args.jobs)
        print(f"  {created_s:.1f} s, {created_s / args.jobs:.2f} s per stack")

        env = {**os.environ, "PYTHONPATH": str(REPO)}
        command = [sys.executable, "-m", "router", "status", "--json"]

        def status() -> float:
            started = time.perf_counter()
            proc = subprocess.run(
                command, cwd=project.root, env=env, capture_output=True, text=True, timeout=600
            )
            elapsed = time.perf_counter() - started
            if proc.returncode != 0:
                raise SystemExit(f"route status failed ({proc.returncode}): {proc.stderr.strip()}")
            listed = len(__import__("json").loads(proc.stdout))
            if listed != args.jobs:
                raise SystemExit(f"route status listed {listed} jobs, expected {args.jobs}")
            return elapsed

        status()  # warm-up: OS file cache, price cache file
        walls = [status() for _ in range(args.runs)]
        print(f"\nroute status --json, {args.jobs} jobs, subprocess ({args.runs} runs + 1 warm-up)")
        print(
            f"  median {statistics.median(walls):.2f} s   min {min(walls):.2f} s   "
            f"max {max(walls):.2f} s   ({statistics.median(walls) / args.jobs * 1000:.1f} ms "
            "per job)"
        )

        from router.flows.job_status import job_status

        clock = EngineClock()
        with clock.installed():
            started = time.perf_counter()
            statuses = job_status(project=project, now=datetime.now(UTC))
            wall = time.perf_counter() - started
        engine = sum(s for _, s in clock.calls)
        print("\nin-process jobs.job_status, once")
        print(
            f"  wall {wall:.2f} s = engine {engine:.2f} s "
            f"({', '.join(f'pulumi {label} {s:.2f} s' for label, s in clock.calls)}) "
            f"+ router {wall - engine:.2f} s for {len(statuses)} jobs"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
