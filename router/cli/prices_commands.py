"""`route prices …` and `route quotas …`: show, refresh, share, import and trace cached quotes
and quotas. Registered on the `route` group in commands.py; flows load inside each command.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from router.cli import options
from router.cli.completion import complete_clouds, complete_regions
from router.cli.options import ctx_project, json_option, split_csv
from router.contract.clouds import PUBLIC_CLOUDS
from router.core.errors import EXIT_FAILED


@click.group(invoke_without_command=True)
@click.option("--gpu", help="Canonical GPU name, e.g. A100-80GB.")
@click.option("--count", type=click.IntRange(1, 64), help="GPUs per instance.")
@click.option(
    "--market",
    type=click.Choice(["spot", "on-demand", "all"]),
    default="all",
    show_default=True,
)
@click.option(
    "--clouds",
    multiple=True,
    shell_complete=complete_clouds,
    help="Comma-separated: aws,gcp,azure.",
)
@click.option(
    "--regions",
    multiple=True,
    shell_complete=complete_regions,
    help="Comma-separated region globs, e.g. 'us-*,europe-*'.",
)
@click.option("--limit", type=click.IntRange(1), default=None, help="Show at most N rows.")
@json_option
@click.pass_context
def prices(
    ctx: click.Context,
    gpu: str | None,
    count: int | None,
    market: str,
    clouds: tuple[str, ...],
    regions: tuple[str, ...],
    limit: int | None,
    as_json: bool,
) -> None:
    """Price table across clouds, cheapest first (cache + bundled snapshot).

    Subcommands refresh live prices, import catalogs and show history.
    """
    if ctx.invoked_subcommand is not None:
        return
    from router.cli import render
    from router.flows import prices as pricing

    table = pricing.price_table(
        gpu=gpu,
        gpu_count=count,
        market=market,
        clouds=split_csv(clouds),
        regions=options.region_globs(regions),
        project=ctx_project(ctx),
        now=options.now(),
    )
    rows = table.offers[:limit] if limit else table.offers
    if as_json:
        render.print_json([render.offer_json(o, table.now, table.max_age_s) for o in rows])
    else:
        render.price_table(rows, table.now, table.max_age_s, total=len(table.offers))


@prices.command("refresh")
@click.option(
    "--clouds",
    multiple=True,
    shell_complete=complete_clouds,
    help="Comma-separated: aws,gcp,azure (default: all).",
)
@click.option(
    "--regions",
    multiple=True,
    shell_complete=complete_regions,
    help="Region globs (default: the regions spotroute knows).",
)
@click.option("--gpu", help="Only instance types with this GPU.")
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(0.1),
    default=10.0,
    show_default=True,
    help="Seconds per API call.",
)
@click.option(
    "--quotas/--no-quotas",
    "with_quotas",
    default=True,
    show_default=True,
    help="Also read the account's GPU quotas (as `route quotas refresh`).",
)
@json_option
@click.pass_context
def prices_refresh(
    ctx: click.Context,
    clouds: tuple[str, ...],
    regions: tuple[str, ...],
    gpu: str | None,
    timeout_s: float,
    with_quotas: bool,
    as_json: bool,
) -> None:
    """Fetch live prices (and quotas) from each cloud's own API into the local cache."""
    from router.cli import render, render_quotas
    from router.flows import prices as pricing

    now = options.now()
    globs = options.region_globs(regions)
    outcomes = pricing.refresh_prices(
        clouds=split_csv(clouds), regions=globs, gpu=gpu, timeout_s=timeout_s, now=now
    )
    quota_outcomes = {}
    if with_quotas:
        from router.flows.quotas import refresh_quotas

        asked = tuple(o.cloud for o in outcomes)
        quota_outcomes = {
            q.cloud: q
            for q in refresh_quotas(clouds=asked, regions=globs, timeout_s=timeout_s, now=now)
        }
    if as_json:
        rows = []
        for o in outcomes:
            row = render.refresh_json(o)
            quota = quota_outcomes.get(o.cloud)
            if quota is not None:
                row["quota_readings_stored"] = quota.readings_stored
                row["quota_error"] = quota.error
            rows.append(row)
        render.print_json(rows)
    else:
        render.refresh_summary(outcomes)
        render_quotas.refresh_summary(list(quota_outcomes.values()))
    if all(o.error for o in outcomes):
        sys.exit(EXIT_FAILED)


# ---------------------------------------------------------------------------------------------
# quotas


@click.group(invoke_without_command=True)
@click.option("--clouds", multiple=True, help="Comma-separated: aws,gcp,azure.")
@click.option("--regions", multiple=True, help="Comma-separated region globs.")
@json_option
@click.pass_context
def quotas(
    ctx: click.Context, clouds: tuple[str, ...], regions: tuple[str, ...], as_json: bool
) -> None:
    """The account's GPU quotas as last read: limit, usage, free (see docs/quotas.md).

    `route quotas refresh` reads them from each cloud; `route plan` rejects placements that
    need more than is free, and treats a quota never read as unknown (never rejected).
    """
    if ctx.invoked_subcommand is not None:
        return
    from router.cli import render, render_quotas
    from router.flows.quotas import quota_table

    globs = options.region_globs(regions)
    table = quota_table(clouds=split_csv(clouds), regions=globs, now=options.now())
    if as_json:
        render.print_json(render_quotas.quotas_json(table))
    else:
        render_quotas.quota_table(table)


@quotas.command("refresh")
@click.option("--clouds", multiple=True, help="Comma-separated: aws,gcp,azure (default: all).")
@click.option(
    "--regions", multiple=True, help="Region globs (default: the regions spotroute knows)."
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(0.1),
    default=10.0,
    show_default=True,
    help="Seconds per API call.",
)
@json_option
def quotas_refresh(
    clouds: tuple[str, ...], regions: tuple[str, ...], timeout_s: float, as_json: bool
) -> None:
    """Read GPU quota limits and usage from each cloud's own API into the local cache."""
    from router.cli import render, render_quotas
    from router.flows.quotas import refresh_quotas

    globs = options.region_globs(regions)
    outcomes = refresh_quotas(
        clouds=split_csv(clouds), regions=globs, timeout_s=timeout_s, now=options.now()
    )
    if as_json:
        render.print_json([render_quotas.refresh_json(o) for o in outcomes])
    else:
        render_quotas.refresh_summary(outcomes)
    if all(o.error for o in outcomes):
        sys.exit(EXIT_FAILED)


@prices.command("push")
@click.pass_context
def prices_push(ctx: click.Context) -> None:
    """Share this cache's newest live quotes through the team's state backend."""
    from router.flows.shared_quotes import push_quotes

    shared = push_quotes(project=ctx_project(ctx, required=True), now=options.now())
    for cloud, n in shared.quotes_by_cloud.items():
        click.echo(f"pushed {n} {cloud} quotes to {shared.where}")


@prices.command("pull")
@click.pass_context
def prices_pull(ctx: click.Context) -> None:
    """Add the team's shared quotes (from the state backend) to this machine's cache."""
    from router.flows.shared_quotes import pull_quotes

    shared = pull_quotes(project=ctx_project(ctx, required=True))
    if not shared.quotes_by_cloud:
        click.echo(f"no shared quotes on {shared.where} — someone runs `route prices push` first")
    for cloud, n in shared.quotes_by_cloud.items():
        click.echo(f"pulled {cloud}: {n} new quotes from {shared.where}")


@prices.command("import")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["skypilot"]), required=True)
@click.option(
    "--cloud",
    type=click.Choice(PUBLIC_CLOUDS),
    help="The file's cloud (default: from its path or instance names).",
)
@json_option
def prices_import(file: Path, fmt: str, cloud: str | None, as_json: bool) -> None:
    """Import a price catalog file (SkyPilot vms.csv) into the cache."""
    from router.cli import render
    from router.flows import prices as pricing

    summary = pricing.import_prices(file, fmt=fmt, cloud=cloud, now=options.now())
    if as_json:
        render.print_json(render.import_json(summary))
    else:
        render.import_summary(summary)


@prices.command("history")
@click.option("--cloud", type=click.Choice(PUBLIC_CLOUDS), help="Default with --days: aws.")
@click.option("--instance-type", help="The cached history of this instance type.")
@click.option("--region", multiple=True, help="Region(s); repeatable. Live default: all priced.")
@click.option("--market", type=click.Choice(["spot", "on-demand"]))
@click.option(
    "--since-hours", type=click.FloatRange(0), default=None, help="Only the last N hours."
)
@click.option("--gpu", help="Live: pull spot history of types with this GPU (e.g. A100-80GB).")
@click.option("--count", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Live: GPUs per instance.")  # fmt: skip
@click.option("--days", type=float, help="Live: pull the last N days from the cloud (AWS: ≤ 90).")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Live: where to write the trace (describe-spot-price-history JSON; route backtest "
    "--prices reads it). Default: spot-history-GPU-xCOUNT-DAYSd.json",
)
@json_option
def prices_history(
    cloud: str | None,
    instance_type: str | None,
    region: tuple[str, ...],
    market: str | None,
    since_hours: float | None,
    gpu: str | None,
    count: int,
    days: float | None,
    out: Path | None,
    as_json: bool,
) -> None:
    """Cached quotes of one instance type over time; with --gpu and --days, spot history live."""
    from router.cli import render
    from router.core.errors import BadInput
    from router.flows import prices as pricing

    now = options.now()
    if days is not None or gpu is not None:
        if gpu is None or days is None:
            raise BadInput("--gpu and --days go together: route prices history --gpu G --days D")
        pulled = pricing.pull_spot_history(
            cloud=cloud or "aws",
            gpu=gpu,
            count=count,
            days=days,
            regions=region,
            out=out or Path(f"spot-history-{gpu}-x{count}-{days:g}d.json"),
            now=now,
        )
        summary = {
            "cloud": pulled.cloud,
            "instance_types": list(pulled.instance_types),
            "regions": list(pulled.regions),
            "prices": pulled.rows,
            "zones": pulled.zones,
            "since": pulled.since.isoformat(),
            "until": pulled.until.isoformat(),
            "path": str(pulled.path),
        }
        if as_json:
            render.print_json(summary)
        else:
            click.echo(
                f"{pulled.rows} spot prices of {', '.join(pulled.instance_types)} in "
                f"{pulled.zones} zones of {len(pulled.regions)} regions, last {days:g} days → "
                f"{pulled.path}\nreplay it: route backtest WORKLOAD.yaml --prices {pulled.path}"
            )
        return
    if cloud is None or instance_type is None:
        raise BadInput(
            "--cloud and --instance-type: both needed for the cached history "
            "(or --gpu G --days D to pull spot history live)"
        )
    if len(region) > 1:
        raise BadInput("--region: the cached history takes one region")
    quotes = pricing.price_history(
        cloud=cloud,
        instance_type=instance_type,
        region=region[0] if region else None,
        market=market,
        since_hours=since_hours,
        now=now,
    )
    if as_json:
        render.print_json([render.quote_json(q, now) for q in quotes])
    else:
        render.history_table(quotes, now)
