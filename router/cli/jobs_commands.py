"""A job's stack: `route deploy`, `preview`, `review`, `status`, `destroy`, `migrate`, `preempt`,
`watch` and `unlock`. Registered on the `route` group in commands.py; Pulumi is imported inside
router.flows.jobs, only on these paths.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

import click

from router.cli import options
from router.cli.completion import complete_job_names, complete_target
from router.cli.options import ctx_project, json_option
from router.contract.clouds import CLOUDS
from router.contract.stack_config import JOB_NAME_PATTERN
from router.core.errors import EXIT_FAILED, BadInput
from router.core.user_values import show_value

EXIT_WIDENED = 3  # route review: the change widens what a stack grants or exposes


def _target(value: str | None) -> str | None:
    """`--to CLOUD[/REGION]`; `local/` (no region) is refused, not read as `local`."""
    if value is None:
        return None
    cloud, slash, region = value.partition("/")
    if cloud not in CLOUDS or (slash and not _REGION.fullmatch(region)):
        raise BadInput(
            f"--to: {show_value(value)} is not CLOUD or CLOUD/REGION — use e.g. aws or "
            f"aws/us-east-1 (clouds: {', '.join(CLOUDS)})"
        )
    return value


def _to_option(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    return value if ctx.resilient_parsing else _target(value)


_REGION = re.compile(r"[a-z0-9][a-z0-9-]*")  # every cloud's region names: us-east-1, eastus


def _job_name(ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
    """A JOB argument (or each --job) is a job name; refused in one line before any lookup."""
    if ctx.resilient_parsing:  # shell completion: nothing is run
        return value
    for name in (value,) if isinstance(value, str) else value or ():
        if not re.fullmatch(JOB_NAME_PATTERN, name):
            raise BadInput(
                f"JOB: {show_value(name)} is not a job name — use the `name` from the job file "
                "(`route status` lists the jobs)"
            )
    return value


@click.command()
@click.argument("job", type=click.Path(path_type=Path))
@click.option("--yes", "-y", is_flag=True, help="Deploy without asking after the preview.")
@click.option(
    "--dry-run", is_flag=True, help="Plan and preview only; leave the stack config as it was."
)
@click.option(
    "--to",
    "to",
    shell_complete=complete_target,
    callback=_to_option,
    help="Place in this CLOUD or CLOUD/REGION only.",
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
    from router.cli import render, render_deploy
    from router.flows import proposals
    from router.flows.launch import LaunchFailed, dry_run_advice, launch
    from router.flows.plan import plan_job

    project = ctx_project(ctx, required=True)
    now = options.now()
    report = plan_job(job, project=project, now=now, require_fresh=require_fresh)
    for line in report.warnings:
        render.warning(line)
    candidates = proposals.candidates_within(
        report.job, report.result.placements, _target(to), job, report.result
    )
    with dry_run_advice(dry_run, job):
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
                render_deploy.proposal(
                    dataclasses.replace(proposal, refreshed=refreshed, allowed_stale=allowed_stale)
                )

        def confirm(review: object) -> bool:
            if not as_json:
                render_deploy.review_summary(review)
            if yes or dry_run:
                return not dry_run
            if not sys.stdin.isatty():
                raise click.UsageError("not a terminal to confirm on — pass --yes to deploy")
            return click.confirm("Deploy?", default=False)

        def on_try(attempt: object) -> None:
            if not as_json:
                render_deploy.launch_try(attempt)

        try:
            with render_deploy.EngineProgress(f"deploying {report.job.name}") as progress:
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
        render_deploy.deploy_outcome(outcome)


@click.command()
@click.argument("job", type=click.Path(path_type=Path))
@click.option(
    "--to",
    "to",
    shell_complete=complete_target,
    callback=_to_option,
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
    from router.cli import render, render_deploy
    from router.core.review import review_json, review_markdown
    from router.flows import jobs

    project = ctx_project(ctx, required=True)
    with render_deploy.EngineProgress("previewing") as progress:
        review = jobs.preview_job(
            job,
            project=project,
            now=options.now(),
            to=_target(to),
            on_event=progress,
        )
    if review_format == "json":
        render.print_json(review_json(review))
    elif review_format == "markdown":
        click.echo(review_markdown(review))
    else:
        render_deploy.review_summary(review)


@click.command()
@click.argument("job", shell_complete=complete_job_names, callback=_job_name)
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
        job, project=ctx_project(ctx, required=True), against=None if no_diff else (against or "")
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


@click.command()
@click.argument("job", required=False, shell_complete=complete_job_names, callback=_job_name)
@click.option("--history", is_flag=True, help="JOB's decisions and migrations, with their numbers.")
@json_option
@click.pass_context
def status(ctx: click.Context, job: str | None, history: bool, as_json: bool) -> None:
    """Jobs in the backend: placement, price then and now, up since, cost so far."""
    from router.cli import render, render_status
    from router.flows.job_status import job_status

    now = options.now()
    if history:
        from router.flows.watch import job_history

        if job is None:
            raise click.UsageError("--history needs a JOB")
        data = job_history(job, project=ctx_project(ctx, required=True))
        if not data["decisions"] and not data["journals"]:
            # Unknown job: the one-line "no deployed job" error. A job route watch tore down
            # when it finished has no stack left, but its history stays readable.
            job_status(project=ctx_project(ctx, required=True), now=now, job=job)
        if as_json:
            render.print_json(data)
        else:
            render_status.history(data)
        return
    statuses = job_status(
        project=ctx_project(ctx, required=True), now=now, job=job, notify=render.notice
    )
    if as_json:
        render.print_json([s.to_json() for s in statuses])
    else:
        render_status.status_table(statuses, now)


@click.command()
@click.argument("job", shell_complete=complete_job_names)
@click.option("--yes", "-y", is_flag=True, help="Destroy without asking.")
@click.pass_context
def destroy(ctx: click.Context, job: str, yes: bool) -> None:
    """Tear down JOB's stack (the job's process/instances, network, identity)."""
    from router.cli import render_deploy
    from router.flows import jobs
    from router.flows.live_placement import read_placement

    project = ctx_project(ctx, required=True)
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("not a terminal to confirm on — pass --yes to destroy")
        click.confirm(f"Destroy job {job}?", default=False, abort=True)
    record = read_placement(jobs.engine_for(project).records(), job) or {}
    kept = str((record.get("outputs") or {}).get("checkpointUrl") or "")
    with render_deploy.EngineProgress(f"destroying {job}") as progress:
        deleted = jobs.destroy_job(
            job, project=project, on_event=progress, notify=progress.notice, hold_lease=True
        )
    click.echo(f"destroyed {job}: {deleted} resources deleted")
    if kept:
        # Checkpoints are the user's work: the bucket outlives the stack (docs/components.md).
        click.echo(f"kept its checkpoints: {kept} — delete them when you no longer need them")


def _duration_s(value: str, param: str) -> float:
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", value)
    if not match:
        raise click.BadParameter(f"'{value}' — use seconds or e.g. 30s, 5m, 1h", param_hint=param)
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[match.group(2) or "s"]
    return float(match.group(1)) * scale


@click.command()
@click.argument("job", callback=_job_name)
@click.option(
    "--to",
    "to",
    shell_complete=complete_target,
    callback=_to_option,
    help="Move into this CLOUD or CLOUD/REGION (default: the best now).",
)
@click.option("--yes", "-y", is_flag=True, help="Migrate without asking.")
@json_option
@click.pass_context
def migrate(ctx: click.Context, job: str, to: str | None, yes: bool, as_json: bool) -> None:
    """Move JOB: checkpoint → new placement (its own stack) → resume there → old one down.

    Each step is journaled in the state backend before it is taken; a router killed midway is
    finished (or rolled back) by the next `route migrate` or `route watch --once`. Ctrl-C (or
    SIGTERM) once the move has begun stops at the next step (exit 130); twice stops now.
    """
    import secrets
    import signal

    from router.cli import render, render_deploy
    from router.engine.job_records import holder_id
    from router.flows.migrate import migrate_job

    project = ctx_project(ctx, required=True)

    def confirm(target: Any, record: dict[str, Any]) -> bool:
        if not as_json:
            render_deploy.migration_plan(job, target, record)
        if yes:
            return True
        if not sys.stdin.isatty():
            raise click.UsageError("not a terminal to confirm on — pass --yes to migrate")
        return click.confirm("Migrate?", default=False)

    moving: list[bool] = []  # a step has run: from now on a stop waits for the step boundary
    stopping: list[bool] = []

    def on_step(_journal: Any, step: str, what: str) -> None:
        moving.append(True)
        if not as_json:
            render_deploy.journal_step(step, what)

    def stop(signum: int, _frame: object) -> None:
        if not moving or (stopping and signum == signal.SIGINT):
            raise KeyboardInterrupt  # nothing begun yet, or a second Ctrl-C: stop now
        stopping.append(True)
        click.echo("note: stopping after the step in flight (Ctrl-C again to stop now)", err=True)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        outcome = migrate_job(
            job,
            project=project,
            to=_target(to),
            holder=holder_id(f"migrate-{secrets.token_hex(4)}"),
            confirm=confirm,
            on_step=on_step,
            stop_requested=lambda: bool(stopping),
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
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
        render_deploy.migration_outcome(journal, outcome.timings)
    if journal.outcome != "done":
        sys.exit(EXIT_FAILED)


@click.command()
@click.argument("job", callback=_job_name)
@click.option(
    "--grace",
    "grace",
    default=None,
    help="Notice before SIGKILL (e.g. 5s); default: the local market profile's (AWS 2 min, "
    "GCP and Azure 30 s), else 30s.",
)
@click.option(
    "--node", "node", type=int, default=None,
    help="Reclaim only this node of a multi-node group (0 … node_count−1); default: every node.",
)  # fmt: skip
@json_option
@click.pass_context
def preempt(
    ctx: click.Context, job: str, grace: str | None, node: int | None, as_json: bool
) -> None:
    """Preempt a local JOB as a cloud would: notice (SIGTERM), grace period, then SIGKILL."""
    from router.cli import render
    from router.flows.preempt import preempt_job

    project = ctx_project(ctx, required=True)
    grace_s = None if grace is None else _duration_s(grace, "--grace")
    outcome = preempt_job(job, project=project, grace_s=grace_s, node=node)
    if as_json:
        render.print_json(
            {
                "job": outcome.job,
                "pid": outcome.pid,
                "notice_at": outcome.notice_at.isoformat(),
                "gone_after_s": round(outcome.gone_after_s, 3),
                "killed": outcome.killed,
                "grace_s": outcome.grace_s,
                "nodes": outcome.nodes,
                "node": outcome.node,
            }
        )
    else:
        how = "killed after the grace period" if outcome.killed else "exited on the notice"
        which = "" if outcome.node is None else f" node {outcome.node}"
        click.echo(
            f"preempted {job}{which}: SIGTERM to pid {outcome.pid}, {how} "
            f"({outcome.gone_after_s:.1f} s of {outcome.grace_s:g} s grace)"
        )


@click.command()
@click.option("--once", is_flag=True, help="One pass over every job, then exit.")
@click.option("--interval", default="60s", show_default=True, help="Time between passes.")
@click.option(
    "--concurrency", type=click.IntRange(1, 64), default=4, show_default=True,
    help="Jobs observed and decided at once.",
)  # fmt: skip
@click.option(
    "--job", "jobs", multiple=True, callback=_job_name, help="Only these jobs (repeatable)."
)
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
    help="json: one JSON line per decision, journal step, pass and error on stdout.",
)  # fmt: skip
@click.option(
    "--metrics-port", type=click.IntRange(0, 65535),
    help="Serve Prometheus metrics at http://HOST:PORT/metrics (0: a free port, printed).",
)  # fmt: skip
@click.option(
    "--metrics-host", default="127.0.0.1", show_default=True,
    help="Address the metrics server binds: loopback unless widened (docs/security.md).",
)  # fmt: skip
@click.option(
    "--metrics-file", type=click.Path(path_type=Path, dir_okay=False),
    help="After every pass write the metrics to this *.prom file (node-exporter textfile).",
)  # fmt: skip
@json_option
@click.pass_context
def watch(
    ctx: click.Context,
    once: bool,
    interval: str,
    concurrency: int,
    jobs: tuple[str, ...],
    log_format: str,
    metrics_port: int | None,
    metrics_host: str,
    metrics_file: Path | None,
    as_json: bool,
) -> None:
    """Keep jobs on the cheapest capacity: re-place after interruptions, move for money or
    deadlines, back to spot — every decision recorded (see `route status JOB --history`).

    SIGTERM or Ctrl-C finishes the step in flight and exits 0; the journal stays consistent.
    A pass that fails as a whole is logged and tried again at the next interval.
    """
    import signal

    from router.cli import render
    from router.cli.watch_output import WatchOutput
    from router.flows.watch import Watcher

    if as_json and log_format == "json":
        raise click.UsageError("--json and --log-format json both write to stdout — use one")
    source = ctx.get_parameter_source("metrics_host")
    if metrics_port is None and source is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--metrics-host needs --metrics-port")
    project = ctx_project(ctx, required=True)
    watcher = Watcher(
        project, interval_s=_duration_s(interval, "--interval"), concurrency=concurrency
    )
    out = WatchOutput.open(
        log_format=log_format, as_json=as_json, once=once, holder=watcher.holder,
        interval_s=watcher.interval_s, jobs=jobs, metrics_host=metrics_host,
        metrics_port=metrics_port, metrics_file=metrics_file,
    )  # fmt: skip
    stopping: list[bool] = []

    def stop(_signum: int, _frame: object) -> None:
        stopping.append(True)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    watcher.stop_requested = lambda: bool(stopping)
    watcher.on_report, watcher.on_step, watcher.on_pass = out.report, out.step, out.passed
    try:
        if once:
            watcher.once(list(jobs) if jobs else None)
        else:
            watcher.loop(list(jobs) if jobs else None)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        out.close()
    if as_json:
        render.print_json([r.to_json() for r in out.reports])
    # A loop stopped on request ends 0 (its errors are in the log and the metrics).
    if once and out.failed:
        sys.exit(EXIT_FAILED)


@click.command()
@click.argument("job")
@click.pass_context
def unlock(ctx: click.Context, job: str) -> None:
    """Clear JOB's backend lock left by a route command that died (refused while it runs here).

    JOB is the job's name (a placement stack such as `train.2` is read as its job): the lock on
    the stack it lives in now, and any left on its stacks deleted since, are cleared."""
    from router.cli import render
    from router.flows import jobs

    held = jobs.unlock_job(job, project=ctx_project(ctx, required=True), notify=render.notice)
    job = jobs.job_of_stack(job)
    click.echo(
        f"unlocked {job}" + (f" (was held by {held[0]})" if held else " (it was not locked)")
    )
