"""route watch over many local jobs (router time per job, engine excluded) and one local
migration end to end by phase.

Run: PATH="$(bash scripts/ensure-pulumi.sh --print-dir):$PATH" .venv/bin/python bench/watch_bench.py
     [--jobs 100] [--concurrency 4] [--skip-migration]

Part 1 needs no engine: N jobs on the local market, each with a placement record, a live job
process (`sleep`) and a complete checkpoint; `Watcher.once(jobs)` observes (record, process,
checkpoint files, prices through the planner), calls the shared decide() and records the
decision with its lease taken and released. Every job stays (equal prices), so the number is
the router's own cost per job per pass. Part 2 deploys the example trainer through the real
CLI and engine and migrates it once (`route migrate --json` reports seconds per phase).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PROJECT_FILE = "name: spotroute\nruntime: python\nstackConfigDir: stacks\n"
TRACE = "at,region,market,price_per_hour,capacity\n" + "".join(
    f"0s,local-{r},spot,1.00,1000\n" for r in "abc"
)


def _job_yaml(name: str) -> str:
    return (
        f"name: {name}\nresources: {{accelerators: 'A100-80GB:8', clouds: [local]}}\n"
        "market: spot\nduration_hours: 4\ncheckpoint: {interval: 2s, restore_overhead: 30s}\n"
        "run: {command: [/bin/sleep, '600']}\n"
    )


def _ticks(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def _checkpoint(directory: Path, step: int) -> None:
    d = directory / f"step-{step:012d}"
    d.mkdir(parents=True)
    blob = b'{"w": 1}'
    (d / "state.json").write_bytes(blob)
    manifest = {"format": "spotroute-checkpoint/1", "step": step,
                "time": datetime.now(UTC).isoformat(), "world_size": 1, "job_id": "", "mode":
                "files", "files": [{"path": "state.json", "size": len(blob),
                                    "crc32": f"{zlib.crc32(blob):08x}"}], "extra": {}}  # fmt: skip
    (d / "manifest.json").write_text(json.dumps(manifest))


def watch_many(jobs: int, concurrency: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="spotroute-watch-bench-"))
    project, home = root / "project", root / "home"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text(PROJECT_FILE)
    (project / "spotroute.yaml").write_text("clouds: [local]\nlocal_market: {trace: trace.csv}\n")
    (project / "trace.csv").write_text(TRACE)
    os.environ["SPOTROUTE_HOME"] = str(home)
    os.environ["PULUMI_CONFIG_PASSPHRASE"] = "bench"
    procs = []
    names = []
    now = datetime.now(UTC).isoformat()
    for i in range(jobs):
        name = f"job-{i:03d}"
        names.append(name)
        job_file = project / f"{name}.yaml"
        job_file.write_text(_job_yaml(name))
        proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
        procs.append(proc)
        ckpt = home / "checkpoints" / name / name
        _checkpoint(ckpt, 4)
        record = {"job": name, "cloud": "local", "region": "local-a", "zone": None,
                  "instance_type": "local-process", "market": "spot", "gpu": "A100-80GB",
                  "gpu_count": 8, "node_count": 1, "price_per_hour": 1.0, "stack": name,
                  "deployed_at": now, "submitted_at": now, "run_h_before": 0.0,
                  "job_file": str(job_file),
                  "outputs": {"groupId": f"local-process:{proc.pid}:{_ticks(proc.pid)}",
                              "checkpointUrl": f"file://{ckpt}/"}}  # fmt: skip
        (home / "placements").mkdir(parents=True, exist_ok=True)
        (home / "placements" / f"{name}.json").write_text(json.dumps(record))
    try:
        from router.config.project import Project
        from router.flows.watch import Watcher

        watcher = Watcher(Project(project), concurrency=concurrency)
        watcher.once(names[:2])  # warm: imports, data files
        started = time.perf_counter()
        reports = watcher.once(names)
        wall = time.perf_counter() - started
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    actions = {r.action for r in reports}
    assert actions == {"stay"}, [r.to_json() for r in reports if r.action != "stay"][:3]
    router = [r.router_s for r in reports]
    decide = [r.decide_s for r in reports]
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "wall_s": wall,
        "per_job_wall_ms": wall / jobs * 1000,
        "router_ms_median": statistics.median(router) * 1000,
        "router_ms_p95": sorted(router)[int(0.95 * (len(router) - 1))] * 1000,
        "decide_ms_median": statistics.median(decide) * 1000,
        "decide_ms_max": max(decide) * 1000,
    }


def one_migration() -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="spotroute-migrate-bench-"))
    project, home = root / "project", root / "home"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text(PROJECT_FILE)
    (project / "spotroute.yaml").write_text("clouds: [local]\nlocal_market: {trace: trace.csv}\n")
    (project / "trace.csv").write_text(TRACE)
    (project / "train.py").write_bytes((REPO / "examples/local-market/train.py").read_bytes())
    (project / "job.yaml").write_text(
        "name: bench\nresources: {accelerators: 'A100-80GB:8', clouds: [local]}\nmarket: spot\n"
        "duration_hours: 4\ncheckpoint: {interval: 2s, restore_overhead: 30s}\nrun:\n"
        f"  command: [/bin/sh, -c, 'exec {sys.executable} \"$SPOTROUTE_PROJECT_DIR/train.py\"']\n"
        "  env: {STEP_S: '0.05', CHECKPOINT_EVERY: '4'}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "SPOTROUTE_"))}
    env.update(SPOTROUTE_HOME=str(home), PULUMI_HOME=str(root / "pulumi-home"),
               PYTHONPATH=str(REPO), PULUMI_SKIP_UPDATE_CHECK="true")  # fmt: skip

    def route(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "router", *args], cwd=project, env=env,
                              capture_output=True, text=True, check=True)  # fmt: skip

    try:
        route("deploy", "job.yaml", "--yes")
        time.sleep(1.0)
        started = time.perf_counter()
        moved = route("migrate", "bench", "--to", "local/local-b", "--yes", "--json")
        out = json.loads(moved.stdout)
        total = time.perf_counter() - started
    finally:
        subprocess.run([sys.executable, "-m", "router", "destroy", "bench", "--yes"], cwd=project,
                       env=env, capture_output=True)  # fmt: skip
    assert out["migrated"], out
    return {"total_s (CLI, incl. start-up and planning)": total, **out["timings_s"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--skip-migration", action="store_true")
    args = parser.parse_args()
    print(json.dumps({"watch_once": watch_many(args.jobs, args.concurrency)}, indent=1))
    if not args.skip_migration:
        print(json.dumps({"one_migration_s": one_migration()}, indent=1))


if __name__ == "__main__":
    main()
