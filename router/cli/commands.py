"""The `route` command: parse, call one library function, render. No logic lives here.

Heavy modules (Pulumi, cloud SDKs, even the planner) are imported inside the commands that use
them, so `route --help` and `route plan` start fast.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from router.contract.clouds import CLOUDS, PUBLIC_CLOUDS
from router.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, RouteError

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
def validate(jobs: tuple[Path, ...]) -> None:
    """Check job files; print OK or every problem, one line each (exit 2 if any)."""
    from router.config.job_file import validate_job_file
    from router.core.user_values import MAX_MESSAGE_CHARS, printable

    bad = False
    for job in jobs:
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
    from router.core.job.schema import job_schema
    from router.core.strict_json import dumps

    click.echo(dumps(job_schema()))


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
@click.option("--clouds", multiple=True, help="Comma-separated: aws,gcp,azure.")
@click.option(
    "--regions", multiple=True, help="Comma-separated region globs, e.g. 'us-*,europe-*'."
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
@click.option("--clouds", multiple=True, help="Comma-separated: aws,gcp,azure (default: all).")
@click.option(
    "--regions", multiple=True, help="Region globs (default: the regions spotroute knows)."
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
@json_option
@click.pass_context
def prices_refresh(
    ctx: click.Context,
    clouds: tuple[str, ...],
    regions: tuple[str, ...],
    gpu: str | None,
    timeout_s: float,
    as_json: bool,
) -> None:
    """Fetch live prices from each cloud's own API into the local cache."""
    from router.cli import render
    from router.flows import prices as pricing

    outcomes = pricing.refresh_prices(
        clouds=_split(clouds), regions=_split(regions), gpu=gpu, timeout_s=timeout_s, now=_now()
    )
    if as_json:
        render.print_json([render.refresh_json(o) for o in outcomes])
    else:
        render.refresh_summary(outcomes)
    if all(o.error for o in outcomes):
        sys.exit(EXIT_FAILED)


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
@click.option("--cloud", type=click.Choice(PUBLIC_CLOUDS), required=True)
@click.option("--instance-type", required=True)
@click.option("--region")
@click.option("--market", type=click.Choice(["spot", "on-demand"]))
@click.option(
    "--since-hours", type=click.FloatRange(0), default=None, help="Only the last N hours."
)
@json_option
def prices_history(
    cloud: str,
    instance_type: str,
    region: str | None,
    market: str | None,
    since_hours: float | None,
    as_json: bool,
) -> None:
    """Every cached quote of one instance type over time."""
    from router.cli import render
    from router.flows import prices as pricing

    now = _now()
    quotes = pricing.price_history(
        cloud=cloud,
        instance_type=instance_type,
        region=region,
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
@click.option("--to", "to", help="Place in this CLOUD or CLOUD/REGION only.")
@click.option("--require-fresh", is_flag=True, help="Refuse stale quotes.")
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
    allow_stale: bool,
    as_json: bool,
) -> None:
    """Plan → choose → write stack config → preview → confirm → up → record."""
    from router.cli import render
    from router.flows import jobs

    project = _project(ctx, required=True)
    proposal = jobs.propose(
        job,
        project=project,
        now=_now(),
        to=_target(to),
        require_fresh=require_fresh,
        allow_stale=allow_stale,
        refresh=jobs.refresh_for_deploy,
    )
    if not as_json:
        render.proposal(proposal)

    def confirm(review: object) -> bool:
        if not as_json:
            render.review_summary(review)
        if yes or dry_run:
            return not dry_run
        if not sys.stdin.isatty():
            raise click.UsageError("not a terminal to confirm on — pass --yes to deploy")
        return click.confirm("Deploy?", default=False)

    with render.EngineProgress(f"deploying {proposal.job.name}") as progress:
        outcome = jobs.deploy(
            proposal,
            project=project,
            confirm=confirm,
            dry_run=dry_run,
            on_event=progress,
            notify=progress.notice,
        )
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
            }
        )
    else:
        render.deploy_outcome(outcome)


@cli.command()
@click.argument("job", type=click.Path(path_type=Path))
@click.option("--to", "to", help="Preview placing in this CLOUD or CLOUD/REGION only.")
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
@click.argument("job", required=False)
@json_option
@click.pass_context
def status(ctx: click.Context, job: str | None, as_json: bool) -> None:
    """Jobs in the backend: placement, price then and now, up since, cost so far."""
    from router.cli import render
    from router.flows import jobs

    now = _now()
    statuses = jobs.job_status(
        project=_project(ctx, required=True), now=now, job=job, notify=render.notice
    )
    if as_json:
        render.print_json([s.to_json() for s in statuses])
    else:
        render.status_table(statuses, now)


@cli.command()
@click.argument("job")
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
    "--clouds", multiple=True, help="Comma-separated: aws,gcp,azure (default: as configured)."
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
