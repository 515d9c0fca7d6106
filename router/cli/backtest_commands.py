"""`route backtest` and `route report`: parse, call one flow, render (rich table or --json).

Register on the `route` group with `cli.add_command(backtest)` and `cli.add_command(report)`.
Flows and rich are imported inside the commands so `route --help` stays fast. Errors are
RouteError subclasses (router/errors.py): the group's main prints them as one line with exit
code 2 (bad input) or 1 (failed).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from router.flows.backtest import BacktestReport
    from router.flows.report import SpendReport

PROGRESS_FROM_JOBS = 20  # show a progress bar on stderr for workloads at least this big


@click.command()
@click.argument("workload", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--prices",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Price trace: spotroute CSV, describe-spot-price-history JSON, SkyPilot vms.csv "
    "(dated path) or a directory of them. Repeatable. Default: the workload's synthetic market.",
)
@click.option(
    "--availability",
    multiple=True,
    metavar="[SELECTOR=]FILE",
    help="Can't-Be-Late availability JSON taking spot pools down (all, or those whose "
    "cloud/region/zone/type/market starts with SELECTOR, e.g. aws/us-east-1). Repeatable.",
)
@click.option(
    "--chart",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write a chart: .png, or .html (self-contained page with the table).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema in docs/backtest.md).")
def backtest(
    workload: Path,
    prices: tuple[Path, ...],
    availability: tuple[str, ...],
    chart: Path | None,
    as_json: bool,
) -> None:
    """Replay a workload under each routing policy against the hindsight optimum."""
    from router.flows.backtest import backtest as run

    if chart is not None and chart.suffix.lower() not in (".png", ".html"):
        from router.errors import BadInput

        raise BadInput(f"--chart: {chart} must end in .png or .html")
    progress = None if as_json or not sys.stderr.isatty() else _Progress()
    try:
        report = run(
            workload,
            prices=prices,
            availability=availability,
            on_progress=progress.update if progress else None,
        )
    finally:
        if progress is not None:
            progress.close()
    written = None
    if chart is not None:
        from router.flows.charts import backtest_chart

        written = backtest_chart(report, chart)
    if as_json:
        data = report.result.to_json()
        data["sources"] = list(report.sources)
        data["chart"] = str(written) if written else None
        click.echo(json.dumps(data, indent=2))
        return
    _backtest_table(report)
    if written is not None:
        click.echo(f"chart: {written}")


class _Progress:
    """A rich progress bar on stderr, started once the job count is known to be large."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._task: Any = None

    def update(self, done: int, total: int) -> None:
        if total < PROGRESS_FROM_JOBS:
            return
        if self._bar is None:
            from rich.console import Console
            from rich.progress import Progress

            self._bar = Progress(console=Console(stderr=True), transient=True)
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


def _backtest_table(report: BacktestReport) -> None:
    from rich.table import Table

    r = report.result
    hours = r.policy(r.baseline).gpu_hours
    table = Table(
        title=f"{r.workload}: {r.jobs} jobs, {hours:,.0f} GPU-hours, "
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
            f"{r.savings_pct(p.name):.1f} %",
            f"{r.gap_to_optimum_pct(p.name):.1f} %",
            str(p.interruptions),
            str(p.migrations),
            f"{p.recomputed_h:.1f}",
            late,
        )
    console = _console()
    console.print(table)
    for source in report.sources:
        console.print(f"prices: {source}")
    if r.unplaceable:
        console.print(f"not placeable on these traces: {', '.join(r.unplaceable)}")


@click.command()
@click.option("--days", type=click.FloatRange(min=0, min_open=True), help="Last N days only.")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write a chart: report.png, or report.html (self-contained page with the tables).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema in docs/backtest.md).")
def report(days: float | None, out: Path | None, as_json: bool) -> None:
    """Realised spend and savings against on-demand, from the placements actually made."""
    from router.flows.report import report as spend

    if out is not None and out.suffix.lower() not in (".png", ".html"):
        from router.errors import BadInput

        raise BadInput(f"--out: {out} must end in .png or .html")
    result = spend(now=datetime.now(UTC), days=days)
    written = None
    if out is not None:
        from router.flows.charts import report_chart

        written = report_chart(result, out)
    if as_json:
        data = result.to_json()
        data["chart"] = str(written) if written else None
        click.echo(json.dumps(data, indent=2))
        return
    _report_tables(result)
    if written is not None:
        click.echo(f"chart: {written}")


def _report_tables(r: SpendReport) -> None:
    from rich.table import Table

    console = _console()
    head = Table(
        title=f"Spend {r.since:%Y-%m-%d %H:%M} → {r.until:%Y-%m-%d %H:%M} UTC: "
        f"${r.total_cost:,.2f} realised vs ${r.total_baseline:,.2f} on-demand "
        f"(saved {r.savings_pct:.1f} %)"
    )
    for name in ("job", "placements", "hours", "realised $", "on-demand $", "saved"):
        head.add_column(name, justify="left" if name == "job" else "right")
    for j in r.by_job:
        head.add_row(j.job, str(j.placements), f"{j.hours:.2f}", f"{j.cost:,.2f}",
                     f"{j.baseline:,.2f}", f"{j.savings_pct:.1f} %")  # fmt: skip
    console.print(head)
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
