"""The tables of `route backtest` and `route report` (JSON shapes: docs/backtest.md), and the
progress bar a long backtest shows on stderr. rich is imported inside the functions."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router.core.backtest_model import BacktestResult
    from router.flows.backtest import BacktestReport
    from router.flows.report import SpendReport

PROGRESS_FROM_JOBS = 20  # show a progress bar on stderr for workloads at least this big


class Progress:
    """A rich progress bar on stderr, started once the job count is known to be large."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._task: Any = None

    def update(self, done: int, total: int) -> None:
        if total < PROGRESS_FROM_JOBS:
            return
        if self._bar is None:
            from rich.console import Console
            from rich.progress import Progress as Bar

            self._bar = Bar(console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("replaying jobs", total=total)
        self._bar.update(self._task, completed=done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _console() -> Any:
    from rich.console import Console

    # Piped output keeps whole rows (rich would otherwise squeeze tables into 80 columns).
    width = None if sys.stdout.isatty() else 200
    return Console(highlight=False, soft_wrap=True, width=width, emoji=False)


def backtest_table(report: BacktestReport) -> None:
    from rich.table import Table

    r = report.result
    hours = r.policy(r.baseline).gpu_hours
    console = _console()
    missing = r.could_not_run()
    if missing is not None:  # first, before any total: they are over the jobs that ran
        console.print(missing)
    jobs = f"{r.jobs} jobs" if missing is None else f"{r.jobs_ran} of {r.jobs} jobs ran"
    table = Table(
        title=f"{r.workload}: {jobs}, {hours:,.0f} GPU-hours, "
        f"{r.start:%Y-%m-%d} → {r.end:%Y-%m-%d} (step {r.step_s / 60:g} min)"
    )
    for name in ("policy", "total $", "$/GPU-h", "savings", "gap to opt.", "interrupts",
                 "migrations", "recomputed h", "deadline misses"):  # fmt: skip
        table.add_column(name, justify="left" if name == "policy" else "right")
    for p in r.policies:
        late = f"{p.deadline_misses}" + (f" (+{p.unfinished} unfinished)" if p.unfinished else "")
        table.add_row(
            p.label,
            f"{p.total_cost:,.0f}",
            f"{p.cost_per_gpu_hour:.2f}",
            percent(r.savings_pct(p.name)),
            f"{r.gap_to_optimum_pct(p.name):.1f} %",
            str(p.interruptions),
            str(p.migrations),
            f"{p.recomputed_h:.1f}",
            late,
        )
    console.print(table)
    if not r.baseline_ran:
        console.print(baseline_note(r))
    for source in report.sources:
        console.print(f"prices: {source}")


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f} %"


def baseline_note(r: BacktestResult) -> str:
    """Why the savings column is empty: the baseline could not run some jobs."""
    missing = r.baseline_unfinished
    names = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    label = r.policy(r.baseline).label
    return (
        f"baseline ({label}) could not run {len(missing)} of {len(r.policy(r.baseline).runs)} "
        f"jobs ({names}: no on-demand placement on these traces) — no savings against it"
    )


HANDOVER_ROLES = {
    "old": "left: hand-over → its stack down",
    "new": "moved to: its stack up → hand-over",
    "unrecorded": "moved to, never took over: up → gone",
    "": "",
}


def span_text(seconds: float) -> str:
    """A duration as the report shows it: seconds under 2 minutes, else minutes or hours."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.2f} h"


def report_tables(r: SpendReport) -> None:
    from rich.table import Table

    console = _console()
    head = Table(
        title=f"Spend {r.since:%Y-%m-%d %H:%M} → {r.until:%Y-%m-%d %H:%M} UTC: "
        f"${r.total_cost:,.2f} realised vs ${r.total_baseline:,.2f} on-demand "
        f"(saved {r.savings_pct:.1f} %)"
    )
    for name in ("job", "placements", "hours", "realised $", "on-demand $", "saved",
                 "hand-over overlap", "overlap $"):  # fmt: skip
        head.add_column(name, justify="left" if name == "job" else "right")
    for j in r.by_job:
        head.add_row(j.job, str(j.placements), f"{j.hours:.2f}", f"{j.cost:,.2f}",
                     f"{j.baseline:,.2f}", f"{j.savings_pct:.1f} %", span_text(j.overlap_s),
                     f"{j.overlap_cost:,.2f}")  # fmt: skip
    console.print(head)
    if r.handovers:
        both = Table(title="Hand-overs: paid while another placement of the job also ran")
        for name in ("job", "stack", "placement", "from", "until", "for", "$"):
            both.add_column(name, justify="right" if name in ("for", "$") else "left")
        for h in r.handovers:
            both.add_row(h.job, h.stack, HANDOVER_ROLES[h.role],
                         f"{h.started_at:%Y-%m-%d %H:%M:%S}", f"{h.ended_at:%Y-%m-%d %H:%M:%S}",
                         span_text(h.seconds), f"{h.cost:,.2f}")  # fmt: skip
        console.print(both)
    if r.by_cloud:
        clouds = Table(title="By cloud")
        for name in ("cloud", "hours", "realised $", "on-demand $"):
            clouds.add_column(name, justify="left" if name == "cloud" else "right")
        for c in r.by_cloud:
            clouds.add_row(c.cloud, f"{c.hours:.2f}", f"{c.cost:,.2f}", f"{c.baseline:,.2f}")
        console.print(clouds)
    if r.by_day:
        daily = Table(title="By day (UTC)")
        for name in ("day", "realised $", "on-demand $"):
            daily.add_column(name, justify="left" if name == "day" else "right")
        for d in r.by_day:
            daily.add_row(d.day.isoformat(), f"{d.cost:,.2f}", f"{d.baseline:,.2f}")
        console.print(daily)
    for note in r.notes:
        console.print(f"note: {note}")
