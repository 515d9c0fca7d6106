"""`route rehearse` at scale: a real trace replayed through route deploy, route watch and the real
Pulumi engine on the accelerated local market — wall time, and realised against predicted.

Run (one at a time on a shared machine, it holds the engine for its whole span):
    PATH="$(bash scripts/ensure-pulumi.sh --print-dir):$PATH" \\
    flock /tmp/spotroute-bench.lock .venv/bin/python bench/rehearse_bench.py \\
        [--workload examples/backtest-real-v100.yaml] [--jobs 12] [--days 7] [--speed 400] \\
        [--chaos] [--interval 1s] [--out result.json]

The defaults are the issue's scale target: the 4-zone V100 trace of "Can't Be Late" (7 days,
examples/real-traces/), its first 12 jobs, at 400× (a week in 25 minutes). It prints the wall
time, the table `route rehearse` prints (job by job, realised | predicted) and the targets, and
with --out the JSON of `route rehearse --json`. docs/benchmarks.md records its numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> int:
    from router.cli.render_rehearsal import rehearsal_tables
    from router.core.durations import parse_duration_s
    from router.flows.rehearse import RehearsalOptions, rehearse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", type=Path, default=REPO / "examples/backtest-real-v100.yaml")
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--speed", type=float, default=400.0)
    parser.add_argument("--chaos", action="store_true")
    parser.add_argument("--unannounced-outages", action="store_true")
    parser.add_argument("--interval", default="1s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--watchers", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    options = RehearsalOptions(
        speed=args.speed, chaos=args.chaos, jobs=args.jobs, days=args.days,
        directory=args.dir, interval_s=parse_duration_s(args.interval), seed=args.seed,
        watchers=args.watchers,
        unannounced_outages=args.unannounced_outages,
    )  # fmt: skip
    started = time.monotonic()
    report = rehearse(args.workload, options)
    wall_s = time.monotonic() - started
    rehearsal_tables(report)
    v = report.verdict
    print(
        f"wall {wall_s / 60:.1f} min for {args.days:g} simulated days at {args.speed:g}× "
        f"({args.jobs} jobs{', chaos' if args.chaos else ''}): realised ${v.realised:,.2f}, "
        f"predicted ${v.predicted:,.2f} ({v.diff_pct:+.1f} %)"
    )
    if args.out is not None:
        data = report.to_json()
        data["bench_wall_s"] = wall_s
        args.out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"json: {args.out}")
    return 0 if v.guarantees.held else 1


if __name__ == "__main__":
    sys.exit(main())
