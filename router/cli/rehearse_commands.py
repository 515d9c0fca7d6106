"""`route rehearse`: a backtest workload's market replayed through the running system and held
to the backtest's prediction (docs/rehearsal.md). Registered on the `route` group in commands.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from router.cli.options import json_option


@click.command()
@click.argument("workload", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--speed",
    type=click.FloatRange(1, 3600),
    default=400.0,
    show_default=True,
    help="Simulated seconds per real second: the market's clock, and every duration of the jobs.",
)
@click.option(
    "--chaos", is_flag=True, help="SIGKILL the watcher now and then; preempt nodes without notice."
)
@click.option("--jobs", "job_count", type=click.IntRange(1), help="The first N jobs to arrive.")
@click.option("--job", "job_names", multiple=True, help="Only this workload job (repeatable).")
@click.option(
    "--days", type=click.FloatRange(0, min_open=True), help="The trace's first D days only."
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path, file_okay=False),
    help="Keep the rehearsal here (a new or empty directory); default: a new temporary one.",
)
@click.option("--interval", default="1s", show_default=True, help="The watcher's --interval.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --chaos.")
@click.option(
    "--watchers",
    type=click.IntRange(1, 8),
    default=1,
    show_default=True,
    help="route watch processes side by side (a lease keeps each job to one): each runs engine "
    "steps one at a time.",
)
@click.option(
    "--unannounced-outages",
    is_flag=True,
    help="A zone that is out keeps its offer and refuses launches, as a cloud does (default: "
    "it is withdrawn while out — what the backtest's policies see).",
)
@click.option(
    "--prices",
    "price_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Price trace, as route backtest takes it (default: the workload's).",
)
@click.option(
    "--availability",
    multiple=True,
    metavar="[SELECTOR=]FILE",
    help="Availability trace, as route backtest takes it.",
)
@click.option(
    "--chart",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write route report's chart of the rehearsal's spend: .png or .html.",
)
@json_option
def rehearse(
    workload: Path,
    speed: float,
    chaos: bool,
    job_count: int | None,
    job_names: tuple[str, ...],
    days: float | None,
    directory: Path | None,
    interval: str,
    seed: int,
    watchers: int,
    unannounced_outages: bool,
    price_files: tuple[Path, ...],
    availability: tuple[str, ...],
    chart: Path | None,
    as_json: bool,
) -> None:
    """Replay WORKLOAD's market through route deploy, route watch and the real engine on the
    local target, on an accelerated clock, and hold it to route backtest's prediction.

    Exit 0 when every guarantee held (nothing lost, nothing left over), 1 when one did not;
    the cost, deadline and preemption targets are reported either way.
    """
    from router.cli import render_rehearsal
    from router.core.durations import parse_duration_s
    from router.core.errors import BadInput
    from router.flows.rehearse import RehearsalOptions
    from router.flows.rehearse import rehearse as run

    if chart is not None and chart.suffix.lower() not in (".png", ".html"):
        raise BadInput(f"--chart: {chart} must end in .png or .html")
    try:
        interval_s = parse_duration_s(interval)
    except ValueError as exc:
        raise BadInput(f"--interval: {exc}") from None
    options = RehearsalOptions(
        speed=speed,
        chaos=chaos,
        jobs=job_count,
        job_names=job_names,
        days=days,
        directory=directory,
        interval_s=interval_s,
        seed=seed,
        watchers=watchers,
        unannounced_outages=unannounced_outages,
    )
    progress = None if as_json or not sys.stderr.isatty() else render_rehearsal.Progress()
    try:
        report = run(
            workload,
            options,
            prices=price_files,
            availability=availability,
            on_progress=progress.update if progress else None,
        )
    finally:
        if progress is not None:
            progress.close()
    written = None
    if chart is not None:
        from router.flows.charts import report_chart

        written = report_chart(report.spend, chart)
    if as_json:
        from router.cli import render

        data = report.to_json()
        data["chart"] = str(written) if written else None
        render.print_json(data)
    else:
        render_rehearsal.rehearsal_tables(report)
        if written is not None:
            click.echo(f"chart: {written}")
    if not report.verdict.guarantees.held:
        sys.exit(1)
