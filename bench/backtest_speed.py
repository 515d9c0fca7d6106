"""Issue 30's speed goals, before and after in one run (`backtest_bench.py --part replay-speed`).

Each case runs `run_backtest` with `--policies all` (every policy, the optimum, and — where the
checkout has them — the SkyPilot peers) in a fresh process, so peak RSS is the case's own; with
`--baseline DIR` (a checkout of the code before, e.g. `git worktree add /tmp/base <commit>`) the
same case runs there too, alternating with this checkout. Cases:

- `real-88`: bench/backtest_bench.py's real_88 — 9 spot zones replaying the shared real traces,
  on-demand in two regions, 45 days in 195 s steps, 88 jobs of 48 h;
- `hourly-1000`: the 30-day example's market and job mix, 1,000 jobs, 720 hourly steps.

Goals (docs/benchmarks.md): real-88 ≥ 4× faster than before, hourly-1000 ≥ 2×, peak memory flat
in the number of jobs (each case also at a quarter and a half of its jobs). Times are CPU
seconds of the process (the machine is shared; wall time moves with its load).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {"real-88": ("real_88", 88), "hourly-1000": ("hourly_1000", 1000)}

CHILD = """
import json, resource, sys, time
sys.path.insert(0, '.')
from bench.backtest_bench import EGRESS, MODEL, STORAGE, {maker}
from router.core.backtest import run_backtest
from router.core.backtest_policies import policy_set
workload, trace = {maker}({jobs})
c0, t0 = time.process_time(), time.perf_counter()
r = run_backtest(workload, trace, egress=EGRESS, interruption=MODEL, storage=STORAGE,
                 policy_set=policy_set(workload.home_cloud, 'all'))
print(json.dumps({{
    'cpu_s': time.process_time() - c0, 'wall_s': time.perf_counter() - t0,
    'rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    'jobs': len(workload.jobs), 'steps': trace.steps,
    'totals': {{p.name: round(float(p.total_cost), 6) for p in r.policies}},
}}))
"""


def run_case(tree: Path, case: str, jobs: int) -> dict[str, object]:
    """One case in a fresh process of the checkout at `tree`; its JSON line."""
    maker, _ = CASES[case]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(maker=maker, jobs=jobs)],
        cwd=tree, env=env, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    found: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return found


def replay_speed(baseline: Path | None) -> None:
    from bench.backtest_bench import growing, markdown_head

    print("## Replay speed (issue 30): before and after, `--policies all`, CPU seconds\n")
    markdown_head("case", "jobs", "before: CPU", "before: peak RSS", "after: CPU",
                  "after: peak RSS", "speed-up", "same totals")  # fmt: skip
    for case, (_, jobs) in CASES.items():
        for n in growing(jobs):
            before = run_case(baseline, case, n) if baseline is not None else None
            after = run_case(ROOT, case, n)
            cells = ["—", "—"]
            ratio, same = "—", "—"
            if before is not None:
                cells = [f"{before['cpu_s']:.2f} s", f"{before['rss_mb']:.0f} MB"]
                ratio = f"**{float(before['cpu_s']) / float(after['cpu_s']):.2f}×**"
                b, a = before["totals"], after["totals"]
                assert isinstance(b, dict) and isinstance(a, dict)
                same = "yes" if all(a.get(k) == v for k, v in b.items()) else "NO"
            print(
                f"| {case} | {n} | {cells[0]} | {cells[1]} | {after['cpu_s']:.2f} s | "
                f"{after['rss_mb']:.0f} MB | {ratio} | {same} |",
                flush=True,
            )
    print(f"\nload {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
