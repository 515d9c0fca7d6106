"""The `route` command: parse, call one library function, render. No logic lives here.

Heavy modules (Pulumi, cloud SDKs, even the planner) are imported inside the commands that use
them, so `route --help` and `route plan` start fast.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from router.cli.completion import (
    complete_clouds,
    complete_job_names,
    complete_regions,
    complete_target,
)
from router.contract.clouds import CLOUDS, PUBLIC_CLOUDS
from router.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, RouteError

EXIT_WIDENED = 3  # route review: the change widens what a stack grants or exposes

F = TypeVar("F", bound=Callable[..., Any])


def _now() -> datetime:
    return datetime.now(UTC)


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    """`--clouds aws,gcp --clouds azure` → ("aws", "gcp", "azure")."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def _project(ctx: click.Context, required: bool = False) -> Any:
    from router.config.project import find_project, require_project

    override = ctx.obj.get("project_dir")
    return require_project(override=override) if required else find_project(override=override)


def json_option(f: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print JSON (schema in docs/cli-json.md)."
    )(f)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.option(
    "--project-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="The spotroute project (a directory with Pulumi.yaml); default: nearest one above cwd.",
)
@click.version_option(package_name="spotroute", prog_name="route")
@click.pass_context
def cli(ctx: click.Context, debug: bool, project_dir: Path | None) -> None:
    """Route GPU training jobs to the cheapest capacity across AWS, GCP and Azure."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    ctx.obj["project_dir"] = project_dir


# ---------------------------------------------------------------------------------------------
# job files


@cli.command()
@click.argument("jobs", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=True))
@click.option(
    "--explain", is_flag=True, help="For a SkyPilot task: how each field maps onto the job."
)
def validate(jobs: tuple[Path, ...], explain: bool) -> None:
    """Check job files (or SkyPilot task files); print OK or every problem, one line each."""
    from router.config.job_file import explain_job_file, validate_job_file
    from router.core.user_values import MAX_MESSAGE_CHARS, printable

    bad = False
    for job in jobs:
        if explain:
            for line in explain_job_file(job):
                click.echo(line)
        problems = validate_job_file(job)
        if problems:
            bad = True
            for line in problems:
                click.echo(f"error: {printable(line, limit=MAX_MESSAGE_CHARS)}", err=True)
        else:
            click.echo(f"OK {printable(str(job))}")
    if bad:
        sys.exit(EXIT_BAD_INPUT)


@cli.command()
def schema() -> None:
    """Print the job.yaml JSON Schema (for editors and CI linters)."""
    from router.config.job_file import job_file_schema
    from router.core.strict_json import dumps

    click.echo(dumps(job_file_schema()))


# ---------------------------------------------------------------------------------------------
# prices


@cli.group(invoke_without_command=True)
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
        clouds=_split(clouds),
        regions=_split(regions),
        project=_project(ctx),
        now=_now(),
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

    now = _now()
    outcomes = pricing.refresh_prices(
        clouds=_split(clouds), regions=_split(regions), gpu=gpu, timeout_s=timeout_s, now=now
    )
    quota_outcomes = {}
    if with_quotas:
        from router.flows.quotas import refresh_quotas

        asked = tuple(o.cloud for o in outcomes)
        quota_outcomes = {
            q.cloud: q
            for q in refresh_quotas(
                clouds=asked, regions=_split(regions), timeout_s=timeout_s, now=now
            )
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


@cli.group(invoke_without_command=True)
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

    table = quota_table(clouds=_split(clouds), regions=_split(regions), now=_now())
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

    outcomes = refresh_quotas(
        clouds=_split(clouds), regions=_split(regions), timeout_s=timeout_s, now=_now()
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

    shared = push_quotes(project=_project(ctx, required=True), now=_now())
    for cloud, n in shared.quotes_by_cloud.items():
        click.echo(f"pushed {n} {cloud} quotes to {shared.where}")


@prices.command("pull")
@click.pass_context
def prices_pull(ctx: click.Context) -> None:
    """Add the team's shared quotes (from the state backend) to this machine's cache."""
    from router.flows.shared_quotes import pull_quotes

    shared = pull_quotes(project=_project(ctx, required=True))
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

    summary = pricing.import_prices(file, fmt=fmt, cloud=cloud, now=_now())
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

    now = _now()
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


# ---------------------------------------------------------------------------------------------
# planning


@cli.command()
@click.argument("job", type=click.Path(path_type=Path))
@click.option(
    "--top",
    type=click.IntRange(1),
    default=10,
    show_default=True,
    help="Show the N best placements.",
)
@click.option("--explain", is_flag=True, help="Also list rejected offers with the reason.")
@click.option(
    "--require-fresh", is_flag=True, help="Refuse quotes older than the org's max quote age."
)
@json_option
@click.pass_context
def plan(
    ctx: click.Context, job: Path, top: int, explain: bool, require_fresh: bool, as_json: bool
) -> None:
    """Rank the placements that fit JOB, with compute, egress and interruption costs."""
    from router.cli import render
    from router.flows.plan import plan_job

    now = _now()
    report = plan_job(job, project=_project(ctx), now=now, require_fresh=require_fresh)
    if as_json:
        render.print_json(render.plan_json(report, explain=explain, top=top))
    else:
        render.plan_table(report, explain=explain, top=top)
    if not report.result.placements:
        sys.exit(EXIT_FAILED)


# ---------------------------------------------------------------------------------------------
# deploying (Pulumi is imported inside router.flows.jobs, only on these paths)


def _target(value: str | None) -> str | None:
    if value is None:
        return None
    cloud = value.partition("/")[0]
    if cloud not in CLOUDS:
        raise click.BadParameter(
            f"'{value}' — use CLOUD or CLOUD/REGION, e.g. aws/us-east-1", param_hint="--to"
        )
    return value


@cli.command()
@click.argument("job", type=click.Path(path_type=Path))
@click.option("--yes", "-y", is_flag=True, help="Deploy without asking after the preview.")
@click.option(
    "--dry-run", is_flag=True, help="Plan and preview only; leave the stack config as it was."
)
@click.option(
    "--to", "to", shell_complete=complete_target, help="Place in this CLOUD or CLOUD/REGION only."
)
@click.option("--require-fresh", is_flag=True, help="Refuse stale quotes.")
@click.option(
    "--max-tries",
    type=click.IntRange(1, 20),
    default=3,
    show_default=True,
    help="Placements to try when the cloud refuses capacity, quota or price.",
)
@click.option(
    "--allow-stale",
    is_flag=True,
    help="Deploy to a cloud even when the best price is stale and a refresh did not help.",
)
@json_option
@click.pass_context
def deploy(
    ctx: click.Context,
    job: Path,
    yes: bool,
    dry_run: bool,
    to: str | None,
    require_fresh: bool,
    max_tries: int,
    allow_stale: bool,
    as_json: bool,
) -> None:
    """Plan → choose → write stack config → preview → confirm → up → record.

    A placement the cloud refuses for capacity, quota or price is cleaned up and blocked for a
    while, and the next one of the ranked list is tried (at most --max-tries).
    """
    from router.cli import render
    from router.flows import proposals
    from router.flows.launch import LaunchFailed, launch
    from router.flows.plan import plan_job

    project = _project(ctx, required=True)
    now = _now()
    report = plan_job(job, project=project, now=now, require_fresh=require_fresh)
    candidates = proposals.candidates_within(
        report.job, report.result.placements, _target(to), job
    )
    report, candidates, refreshed, allowed_stale = proposals.fresh_candidates(
        report,
        candidates,
        job,
        project=project,
        now=now,
        to=_target(to),
        require_fresh=require_fresh,
        allow_stale=allow_stale,
        refresh=proposals.refresh_for_deploy,
    )

    def show(proposal: Any) -> None:
        if not as_json:
            render.proposal(
                dataclasses.replace(proposal, refreshed=refreshed, allowed_stale=allowed_stale)
            )

    def confirm(review: object) -> bool:
        if not as_json:
            render.review_summary(review)
        if yes or dry_run:
            return not dry_run
        if not sys.stdin.isatty():
            raise click.UsageError("not a terminal to confirm on — pass --yes to deploy")
        return click.confirm("Deploy?", default=False)

    def on_try(attempt: object) -> None:
        if not as_json:
            render.launch_try(attempt)

    try:
        with render.EngineProgress(f"deploying {report.job.name}") as progress:
            outcome, proposal, tries = launch(
                report.job,
                report.org,
                candidates,
                project=project,
                confirm=confirm,
                dry_run=dry_run,
                on_event=progress,
                on_try=on_try,
                max_tries=max_tries,
                proposal_hook=show,
                job_file=job,
            )
    except LaunchFailed as exc:
        if as_json:
            render.print_json(
                {"job": report.job.name, "applied": False, "error": exc.message,
                 "tries": [t.to_json() for t in exc.tries]}
            )  # fmt: skip
        raise
    if as_json:
        render.print_json(
            {
                "job": outcome.job,
                "applied": outcome.applied,
                "placement": render.placement_json(outcome.placement),
                "outputs": outcome.outputs,
                "config_diff": list(proposal.config_diff),
                "preview": dict(outcome.review.counts),
                "changes": outcome.changes,
                "policy_violations": list(outcome.review.policy_violations),
                "tries": [t.to_json() for t in tries],
            }
        )
    else:
        render.deploy_outcome(outcome)


@cli.command()
@click.argument("job", type=click.Path(path_type=Path))
@click.option(
    "--to",
    "to",
    shell_complete=complete_target,
    help="Preview placing in this CLOUD or CLOUD/REGION only.",
)
@click.option(
    "--review",
    "review_format",
    type=click.Choice(["markdown", "json"]),
    help="Print a pull-request review summary: identities, access, firewall, storage first.",
)
@click.pass_context
def preview(ctx: click.Context, job: Path, to: str | None, review_format: str | None) -> None:
    """The engine's preview of deploying JOB now; changes nothing."""
    from router.cli import render
    from router.core.review import review_json, review_markdown
    from router.flows import jobs

    project = _project(ctx, required=True)
    with render.EngineProgress("previewing") as progress:
        review = jobs.preview_job(
            job,
            project=project,
            now=_now(),
            to=_target(to),
            on_event=progress,
        )
    if review_format == "json":
        render.print_json(review_json(review))
    elif review_format == "markdown":
        click.echo(review_markdown(review))
    else:
        render.review_summary(review)


@cli.command()
@click.argument("job", shell_complete=complete_job_names)
@click.option(
    "--against",
    metavar="GIT-REF",
    help="Compare with the stack file and components at this git ref (default: merge base "
    "with main).",
)
@click.option("--no-diff", is_flag=True, help="Only render what the stack grants now.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
)
@click.pass_context
def review(ctx: click.Context, job: str, against: str | None, no_diff: bool, fmt: str) -> None:
    """Everything JOB's stack grants and exposes, and what widened (exit 3); no credentials."""
    from router.cli import render
    from router.core.exposure import review_json, review_markdown
    from router.flows.review import review_stack

    result = review_stack(
        job, project=_project(ctx, required=True), against=None if no_diff else (against or "")
    )
    if fmt == "json":
        render.print_json(
            {
                **review_json(result.stack, result.against, result.after, result.diff),
                "notes": list(result.notes),
            }
        )
    else:
        click.echo(
            review_markdown(result.stack, result.against, result.after, result.diff, result.notes)
        )
    if result.diff is not None and result.diff.widened:
        sys.exit(EXIT_WIDENED)


@cli.command()
@click.argument("job", required=False, shell_complete=complete_job_names)
@click.option("--history", is_flag=True, help="JOB's decisions and migrations, with their numbers.")
@json_option
@click.pass_context
def status(ctx: click.Context, job: str | None, history: bool, as_json: bool) -> None:
    """Jobs in the backend: placement, price then and now, up since, cost so far."""
    from router.cli import render
    from router.flows.job_status import job_status

    now = _now()
    if history:
        from router.flows.watch import job_history

        if job is None:
            raise click.UsageError("--history needs a JOB")
        job_status(project=_project(ctx, required=True), now=now, job=job)  # exists?
        data = job_history(job, project=_project(ctx, required=True))
        if as_json:
            render.print_json(data)
        else:
            render.history(data)
        return
    statuses = job_status(
        project=_project(ctx, required=True), now=now, job=job, notify=render.notice
    )
    if as_json:
        render.print_json([s.to_json() for s in statuses])
    else:
        render.status_table(statuses, now)


@cli.command()
@click.argument("job", shell_complete=complete_job_names)
@click.option("--yes", "-y", is_flag=True, help="Destroy without asking.")
@click.pass_context
def destroy(ctx: click.Context, job: str, yes: bool) -> None:
    """Tear down JOB's stack (the job's process/instances, network, identity)."""
    from router.cli import render
    from router.flows import jobs

    project = _project(ctx, required=True)
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("not a terminal to confirm on — pass --yes to destroy")
        click.confirm(f"Destroy job {job}?", default=False, abort=True)
    with render.EngineProgress(f"destroying {job}") as progress:
        deleted = jobs.destroy_job(job, project=project, on_event=progress, notify=progress.notice)
    click.echo(f"destroyed {job}: {deleted} resources deleted")


def _duration_s(value: str, param: str) -> float:
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", value)
    if not match:
        raise click.BadParameter(f"'{value}' — use seconds or e.g. 30s, 5m, 1h", param_hint=param)
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[match.group(2) or "s"]
    return float(match.group(1)) * scale


@cli.command()
@click.argument("job")
@click.option("--to", "to", help="Move into this CLOUD or CLOUD/REGION (default: the best now).")
@click.option("--yes", "-y", is_flag=True, help="Migrate without asking.")
@json_option
@click.pass_context
def migrate(ctx: click.Context, job: str, to: str | None, yes: bool, as_json: bool) -> None:
    """Move JOB: checkpoint → new placement (its own stack) → resume there → old one down.

    Each step is journaled in the state backend before it is taken; a router killed midway is
    finished (or rolled back) by the next `route migrate` or `route watch --once`.
    """
    import secrets

    from router.cli import render
    from router.engine.job_records import holder_id
    from router.flows.migrate import migrate_job

    project = _project(ctx, required=True)

    def confirm(target: Any, record: dict[str, Any]) -> bool:
        if not as_json:
            render.migration_plan(job, target, record)
        if yes:
            return True
        if not sys.stdin.isatty():
            raise click.UsageError("not a terminal to confirm on — pass --yes to migrate")
        return click.confirm("Migrate?", default=False)

    def on_step(_journal: Any, step: str, what: str) -> None:
        if not as_json:
            render.journal_step(step, what)

    outcome = migrate_job(
        job,
        project=project,
        to=_target(to),
        holder=holder_id(secrets.token_hex(4)),
        confirm=confirm,
        on_step=on_step,
    )
    if outcome is None:
        if as_json:
            render.print_json({"job": job, "migrated": False, "outcome": "declined"})
        else:
            click.echo("not migrated")
        return
    journal = outcome.journal
    if as_json:
        render.print_json(
            {
                "job": job,
                "migrated": journal.outcome == "done",
                "journal": journal.to_json(),
                "timings_s": {k: round(v, 3) for k, v in outcome.timings.items()},
            }
        )
    else:
        render.migration_outcome(journal, outcome.timings)
    if journal.outcome != "done":
        sys.exit(EXIT_FAILED)


@cli.command()
@click.argument("job")
@click.option(
    "--grace", "grace", default="30s", show_default=True, help="Notice before SIGKILL (e.g. 5s)."
)
@json_option
@click.pass_context
def preempt(ctx: click.Context, job: str, grace: str, as_json: bool) -> None:
    """Preempt a local JOB as a cloud would: notice (SIGTERM), grace period, then SIGKILL."""
    from router.cli import render
    from router.flows.preempt import preempt_job

    project = _project(ctx, required=True)
    outcome = preempt_job(job, project=project, grace_s=_duration_s(grace, "--grace"))
    if as_json:
        render.print_json(
            {
                "job": outcome.job,
                "pid": outcome.pid,
                "notice_at": outcome.notice_at.isoformat(),
                "gone_after_s": round(outcome.gone_after_s, 3),
                "killed": outcome.killed,
                "grace_s": outcome.grace_s,
            }
        )
    else:
        how = "killed after the grace period" if outcome.killed else "exited on the notice"
        click.echo(
            f"preempted {job}: SIGTERM to pid {outcome.pid}, {how} "
            f"({outcome.gone_after_s:.1f} s of {outcome.grace_s:g} s grace)"
        )


@cli.command()
@click.option("--once", is_flag=True, help="One pass over every job, then exit.")
@click.option("--interval", default="60s", show_default=True, help="Time between passes.")
@click.option(
    "--concurrency", type=click.IntRange(1, 64), default=4, show_default=True,
    help="Jobs observed and decided at once.",
)  # fmt: skip
@click.option("--job", "jobs", multiple=True, help="Only these jobs (repeatable).")
@json_option
@click.pass_context
def watch(
    ctx: click.Context,
    once: bool,
    interval: str,
    concurrency: int,
    jobs: tuple[str, ...],
    as_json: bool,
) -> None:
    """Keep jobs on the cheapest capacity: re-place after interruptions, move for money or
    deadlines, back to spot — every decision recorded (see `route status JOB --history`).

    SIGTERM or Ctrl-C finishes the step in flight and exits; the journal stays consistent.
    """
    import signal

    from router.cli import render
    from router.flows.watch import Watcher

    project = _project(ctx, required=True)
    stopping: list[bool] = []

    def stop(_signum: int, _frame: object) -> None:
        stopping.append(True)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    reports: list[Any] = []

    def on_report(report: Any) -> None:
        reports.append(report)
        if not as_json:
            render.watch_report(report)

    def on_step(journal: Any, step: str, what: str) -> None:
        if not as_json:
            render.journal_step(f"{journal.job} {step}", what)

    watcher = Watcher(
        project,
        interval_s=_duration_s(interval, "--interval"),
        concurrency=concurrency,
        stop_requested=lambda: bool(stopping),
        on_report=on_report,
        on_step=on_step,
    )
    try:
        if once:
            watcher.once(list(jobs) if jobs else None)
        else:
            watcher.loop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if as_json:
        render.print_json([r.to_json() for r in reports])
    if any(r.action == "error" for r in reports):
        sys.exit(EXIT_FAILED)


@cli.command()
@click.argument("job")
@click.pass_context
def unlock(ctx: click.Context, job: str) -> None:
    """Clear JOB's backend lock left by a route command that died (refused while it runs here)."""
    from router.flows import jobs

    held = jobs.unlock_job(job, project=_project(ctx, required=True))
    click.echo(
        f"unlocked {job}" + (f" (was held by {held[0]})" if held else " (it was not locked)")
    )


@cli.command()
@click.option(
    "--clouds",
    multiple=True,
    shell_complete=complete_clouds,
    help="Comma-separated: aws,gcp,azure (default: as configured).",
)
@click.option(
    "--preview", "preview_only", is_flag=True, help="Show what would be created; change nothing."
)
@click.option("--yes", "-y", is_flag=True, help="Apply without asking after the preview.")
@json_option
@click.pass_context
def bootstrap(
    ctx: click.Context, clouds: tuple[str, ...], preview_only: bool, yes: bool, as_json: bool
) -> None:
    """One-time keyless credentials: deployer identities and cross-cloud federation."""
    from router.cli import render
    from router.flows.bootstrap import run_bootstrap

    project = _project(ctx, required=True)
    if not preview_only and not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("not a terminal to confirm on — pass --yes or --preview")
        click.confirm("Create or update the bootstrap identities?", default=False, abort=True)
    with render.EngineProgress("bootstrap") as progress:
        outcome = run_bootstrap(
            project=project, clouds=_split(clouds), preview_only=preview_only, on_event=progress
        )
    if as_json:
        from router.core.review import review_json

        render.print_json(
            {
                "applied": outcome.applied,
                "review": review_json(outcome.review),
                "outputs": outcome.outputs,
            }
        )
        return
    render.review_summary(outcome.review)
    snippet = outcome.outputs.get("org_config_snippet")
    if snippet:
        click.echo("\nAdd to spotroute.yaml:\n" + str(snippet))


@cli.command()
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
def init(directory: Path) -> None:
    """Scaffold a spotroute project in DIRECTORY (Pulumi.yaml, stacks/, spotroute.yaml, a job)."""
    from router.flows.init import init_project

    for path in init_project(directory):
        click.echo(f"created {path}")


# ---------------------------------------------------------------------------------------------
# backtest and spend report (docs/backtest.md)


@cli.command()
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
    "--chart",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write a chart: .png, or .html (self-contained page with the table).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema in docs/backtest.md).")
def backtest(
    workload: Path,
    price_files: tuple[Path, ...],
    availability: tuple[str, ...],
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
        render.print_json(data)
        return
    render_backtest.backtest_table(report)
    if written is not None:
        click.echo(f"chart: {written}")


@cli.command()
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
    result = spend(now=_now(), days=days, project=_project(ctx))
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


# ---------------------------------------------------------------------------------------------


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script: eval "$(route completion bash)" (zsh, fish)."""
    from router.cli.completion import completion_script

    click.echo(completion_script(cli, shell))


# ---------------------------------------------------------------------------------------------


def main() -> None:
    """Console entry point: one-line errors with the right exit code; --debug for tracebacks."""
    debug = "--debug" in sys.argv[1:]
    # pydantic looks for plugins through importlib.metadata on first use (~50-300 ms of start-up);
    # the CLI uses none. An explicit setting by the user still wins.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        cli.main(standalone_mode=False, prog_name="route")
    except RouteError as exc:
        if debug:
            traceback.print_exc()
        click.echo(f"error: {_line(exc.message)}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
            click.echo("error: interrupted", err=True)
            sys.exit(130)
        click.echo("error: aborted", err=True)
        sys.exit(EXIT_FAILED)
    except click.ClickException as exc:
        # click quotes the user's argument back; print it through the same escape
        hint = ""
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            hint = f"{exc.ctx.get_usage()}\nTry '{exc.ctx.command_path} --help' for help.\n\n"
        click.echo(f"{hint}Error: {_line(exc.format_message())}", err=True)
        sys.exit(EXIT_BAD_INPUT if isinstance(exc, click.UsageError) else exc.exit_code)
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug: still one line, unless --debug
        if debug:
            traceback.print_exc()
        click.echo(
            f"error: unexpected {type(exc).__name__}: {_line(str(exc))} "
            "(rerun with --debug for the traceback)",
            err=True,
        )
        sys.exit(EXIT_FAILED)


def _line(message: str) -> str:
    """An error message as one printable line of readable length (the value may be 100 KB)."""
    from router.core.user_values import MAX_MESSAGE_CHARS, printable

    return printable(message, limit=MAX_MESSAGE_CHARS)
