"""The `route` command group: parse, call one library function, render. No logic lives here.

This module holds the group, the job-file, plan, bootstrap, init and completion commands and the
console entry point; the command groups live beside it (prices_commands.py, jobs_commands.py,
backtest_commands.py) and are registered on the group below. Heavy modules (Pulumi, cloud SDKs,
even the planner) are imported inside the commands that use them, so `route --help` and
`route plan` start fast.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

import click

from router.cli import backtest_commands, jobs_commands, options, prices_commands, rehearse_commands
from router.cli.completion import complete_clouds
from router.cli.options import ctx_project, json_option, split_csv
from router.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, RouteError


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
    "--explain",
    is_flag=True,
    help="How a SkyPilot task's fields map onto the job; the job's GPU types no offer is made "
    "for, and why.",
)
@click.pass_context
def validate(ctx: click.Context, jobs: tuple[Path, ...], explain: bool) -> None:
    """Check job files (or SkyPilot task files); print OK or every problem, one line each."""
    from router.config.job_file import explain_job_file, job_file_warnings, validate_job_file
    from router.core.user_values import MAX_MESSAGE_CHARS, printable

    project = ctx_project(ctx)

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
            for line in job_file_warnings(job, project):
                click.echo(f"warning: {printable(line, limit=MAX_MESSAGE_CHARS)}", err=True)
    if bad:
        sys.exit(EXIT_BAD_INPUT)


@cli.command()
def schema() -> None:
    """Print the job.yaml JSON Schema (for editors and CI linters)."""
    from router.config.job_file import job_file_schema
    from router.core.strict_json import dumps

    click.echo(dumps(job_file_schema()))


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
@click.option(
    "--sources",
    metavar="KINDS",
    help="Price sources to plan on, comma-separated: import,live,snapshot (default: all).",
)
@click.option(
    "--write",
    is_flag=True,
    help="Also write the best placement's stacks/Pulumi.<job>.yaml for review (no engine, "
    "no credentials).",
)
@json_option
@click.pass_context
def plan(
    ctx: click.Context,
    job: Path,
    top: int,
    explain: bool,
    require_fresh: bool,
    sources: str | None,
    write: bool,
    as_json: bool,
) -> None:
    """Rank the placements that fit JOB, with compute, egress and interruption costs."""
    from router.cli import render, render_deploy
    from router.flows.plan import plan_job
    from router.prices.book import parse_source_kinds

    now = options.now()
    project = ctx_project(ctx, required=write)
    report = plan_job(
        job, project=project, now=now, require_fresh=require_fresh,
        sources=parse_source_kinds(sources),
    )  # fmt: skip
    for line in report.warnings:
        render.warning(line)
    reviewed = None
    if write and report.result.placements and project is not None:
        from router.flows.live_placement import local_records
        from router.flows.proposals import write_for_review

        records = local_records(project)  # a placed job's file is its live stack's
        reviewed = write_for_review(report, project=project, job_file=job, records=records)
    if as_json:
        out = render.plan_json(report, explain=explain, top=top)
        if write:
            out["stack_file"] = render_deploy.stack_file_json(reviewed, project)
        render.print_json(out)
    else:
        render.plan_table(report, explain=explain, top=top)
        if reviewed is not None and project is not None:
            render_deploy.stack_file_lines(reviewed, project)
    if not report.result.placements:
        sys.exit(EXIT_FAILED)


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
    from router.cli import render, render_deploy
    from router.flows.bootstrap import bootstrap_scope, run_bootstrap

    project = ctx_project(ctx, required=True)
    scope = bootstrap_scope(project, split_csv(clouds))
    if not preview_only and not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("not a terminal to confirm on — pass --yes or --preview")
        for note in scope:  # where the rights reach, before the question
            (render.warning if note.warning else render.notice)(note.text)
        click.confirm("Create or update the bootstrap identities?", default=False, abort=True)
    with render_deploy.EngineProgress("bootstrap") as progress:
        outcome = run_bootstrap(
            project=project, clouds=split_csv(clouds), preview_only=preview_only, on_event=progress
        )
    if as_json:
        from router.core.review import review_json

        render.print_json(
            {
                "applied": outcome.applied,
                "review": review_json(outcome.review),
                "outputs": outcome.outputs,
                "scope": [{"text": n.text, "warning": n.warning} for n in scope],
            }
        )
        return
    render_deploy.review_summary(outcome.review)
    for note in scope:
        (render.warning if note.warning else render.notice)(note.text)
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
# the command groups that live in their own modules

for _command in (
    prices_commands.prices,
    prices_commands.quotas,
    jobs_commands.deploy,
    jobs_commands.preview,
    jobs_commands.review,
    jobs_commands.status,
    jobs_commands.destroy,
    jobs_commands.migrate,
    jobs_commands.preempt,
    jobs_commands.watch,
    jobs_commands.unlock,
    backtest_commands.backtest,
    backtest_commands.report,
    rehearse_commands.rehearse,
):
    cli.add_command(_command)


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
    except click.exceptions.NoArgsIsHelpError as exc:  # `route` alone: the help, as click does
        click.echo(exc.format_message(), err=True)
        sys.exit(EXIT_BAD_INPUT)
    except click.ClickException as exc:
        click.echo(f"error: {_line(_click_message(exc))}", err=True)
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


def _click_message(exc: click.ClickException) -> str:
    """What click refused, as one line with where to look (not click's usage block)."""
    message = exc.format_message().strip().rstrip(".")
    message = message[:1].lower() + message[1:] if message[1:2].islower() else message
    ctx = exc.ctx if isinstance(exc, click.UsageError) else None
    if ctx is None:
        return message
    if " — " in message:  # ours, with its fix already
        return f"{ctx.command_path}: {message}"
    return f"{ctx.command_path}: {message} — see '{ctx.command_path} --help'"


def _line(message: str) -> str:
    """An error message as one printable line of readable length (the value may be 100 KB)."""
    from router.core.user_values import MAX_MESSAGE_CHARS, printable

    return printable(message, limit=MAX_MESSAGE_CHARS)
