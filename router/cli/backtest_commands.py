"""`route backtest` (replay a workload under each routing policy) and `route report` (realised
spend), docs/backtest.md. Registered on the `route` group in commands.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from router.cli import options
from router.cli.options import ctx_project


@click.command()
@click.argument("workload", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--prices",
    "price_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Price trace: spotroute CSV or Parquet, describe-spot-price-history JSON, SkyPilot "
    "vms.csv (dated path) or a directory of them. Repeatable. Default: the workload's synthetic "
    "market.",
)
@click.option(
    "--availability",
    multiple=True,
    metavar="[SELECTOR=]FILE",
    help="Can't-Be-Late availability JSON taking spot pools down (all, or those whose "
    "cloud/region/zone/type/market starts with SELECTOR, e.g. aws/us-east-1). Repeatable.",
)
@click.option(
    "--price-gap",
    metavar="DURATION|never|cadence",
    help="A pool with no price row for this long is gone (not offered) until its next row; "
    "overrides the workload's price_gap. Default (cadence): a pool is gone when its file moves "
    "on without it (later rows of the same file, cloud and market). never: prices hold.",
)
@click.option(
    "--policies",
    "policy_names",
    type=click.Choice(["default", "all"]),
    default="default",
    show_default=True,
    help="all: also the benchmark policies (greedy-deadline: Can't Be Late's greedy) and the "
    "peer (SkyPilot managed jobs: skypilot-eager, skypilot-failover, skypilot-eager+od).",
)
@click.option(
    "--chart",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write a chart: .png, or .html (self-contained page with the table).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema in docs/backtest.md).")
def backtest(
    workload: Path,
    price_files: tuple[Path, ...],
    availability: tuple[str, ...],
    price_gap: str | None,
    policy_names: str,
    chart: Path | None,
    as_json: bool,
) -> None:
    """Replay a workload under each routing policy against the hindsight optimum."""
    from router.cli import render, render_backtest
    from router.flows.backtest import backtest as run

    if chart is not None and chart.suffix.lower() not in (".png", ".html"):
        from router.core.errors import BadInput

        raise BadInput(f"--chart: {chart} must end in .png or .html")
    progress = None if as_json or not sys.stderr.isatty() else render_backtest.Progress()
    try:
        report = run(
            workload,
            prices=price_files,
            availability=availability,
            price_gap=price_gap,
            policies=policy_names,
            on_progress=progress.update if progress else None,
        )
    finally:
        if progress is not None:
            progress.close()
    for warning in report.warnings:
        click.echo(f"warning: {warning}", err=True)
    written = None
    if chart is not None:
        from router.flows.charts import backtest_chart

        written = backtest_chart(report, chart)
    if as_json:
        data = report.result.to_json()
        data["sources"] = list(report.sources)
        data["chart"] = str(written) if written else None
        render.print_json(data)
    else:
        render_backtest.backtest_table(report)
        if written is not None:
            click.echo(f"chart: {written}")
    missing = report.result.could_not_run()
    if missing is not None:  # the totals are over a subset: the run did not do what was asked
        from router.core.errors import EXIT_FAILED

        click.echo(f"error: {missing}", err=True)
        sys.exit(EXIT_FAILED)


@click.command()
@click.option("--days", type=click.FloatRange(min=0, min_open=True), help="Last N days only.")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write a chart: report.png, or report.html (self-contained page with the tables).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema in docs/backtest.md).")
@click.pass_context
def report(ctx: click.Context, days: float | None, out: Path | None, as_json: bool) -> None:
    """Realised spend and savings against on-demand, from the placements made (the backend's)."""
    from router.cli import render, render_backtest
    from router.flows.report import report as spend

    if out is not None and out.suffix.lower() not in (".png", ".html"):
        from router.core.errors import BadInput

        raise BadInput(f"--out: {out} must end in .png or .html")
    result = spend(now=options.now(), days=days, project=ctx_project(ctx))
    written = None
    if out is not None:
        from router.flows.charts import report_chart

        written = report_chart(result, out)
    if as_json:
        data = result.to_json()
        data["chart"] = str(written) if written else None
        render.print_json(data)
        return
    render_backtest.report_tables(result)
    if written is not None:
        click.echo(f"chart: {written}")
