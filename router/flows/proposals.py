"""What `route deploy` proposes: the best placement for a job (within CLOUD or CLOUD/REGION) and
the stack config change it means, never on a stale price silently.

A cloud placement priced by a stale quote makes the clouds in play refresh first; if the best
price is still stale the deploy is refused unless the user allows it (--allow-stale or
spotroute.yaml's `allow_stale_deploy`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from secrets import token_hex
from typing import Any

from router.config.datafiles import load_catalog
from router.config.home import spotroute_home
from router.config.project import Project
from router.config.stack_files import StackFileWrite, read_stack_file, write_stack_file
from router.contract.stack_config import MASKED
from router.core.catalog import gcp_accelerator_type
from router.core.errors import OperationFailed
from router.core.job.model import Job
from router.core.job.problems import secret_values
from router.core.placement import Placement, PlanResult
from router.core.plan_explain import no_fit_reason
from router.core.stackconfig import StackConfig, config_diff, stack_config
from router.engine.records import RecordStore
from router.flows.live_placement import at_live_site, live_placement, live_stack, with_move_env
from router.flows.plan import PlanReport, plan_job
from router.flows.startup_size import check_startup_script


@dataclass(frozen=True)
class Proposal:
    """The placement chosen for a job and the stack config change it means."""

    job: Job
    chosen: Placement
    config: StackConfig
    config_diff: tuple[str, ...]
    stack_file: Path
    stack: str = ""  # the placement's stack; "" = the job's first stack, named as the job
    job_file: Path | None = None  # where the job was read from (route watch re-plans it)

    refreshed: tuple[Any, ...] = ()  # RefreshOutcome per cloud tried because prices were stale
    allowed_stale: bool = False  # deploying on a stale price because the user said so

    @property
    def stack_name(self) -> str:
        return self.stack or self.job.name


# Refreshes the clouds named (for one GPU) into the price cache; returns RefreshOutcomes.
Refresher = Callable[[tuple[str, ...], str], list[Any]]


def refresh_for_deploy(clouds: tuple[str, ...], gpu: str) -> list[Any]:
    """Live prices for the clouds in play; a cloud without credentials fails fast, per cloud."""
    from router.flows.prices import refresh_prices

    return refresh_prices(clouds=clouds, regions=(), gpu=gpu, timeout_s=5.0, now=datetime.now(UTC))


def _stale_cloud(p: Placement) -> bool:
    return p.cloud != "local" and p.stale  # the local target has no market


def _age_text(age_s: float) -> str:
    days = age_s / 86400
    return f"{days:.0f} days" if days >= 2 else f"{age_s / 3600:.1f} h"


def _matches(p: Placement, target: str) -> bool:
    cloud, _, region = target.partition("/")
    return p.cloud == cloud and (not region or p.region == region)


def propose(
    job_path: Path,
    *,
    project: Project,
    now: datetime,
    to: str | None = None,
    require_fresh: bool = False,
    allow_stale: bool = False,
    refresh: Refresher | None = None,
    records: RecordStore | None = None,
) -> Proposal:
    """Plan the job and pick the best placement (within `to` = CLOUD or CLOUD/REGION if given).

    A cloud placement priced by a stale quote is never deployed silently: the clouds in play
    are refreshed first (`refresh`), and if the best price is still stale the deploy is refused
    unless `allow_stale` (or spotroute.yaml's `allow_stale_deploy`) says otherwise. Given the
    backend's `records`, a job placed already is proposed in its live stack, where it runs
    (router/flows/live_placement.py).
    """

    report = plan_job(job_path, project=project, now=now, require_fresh=require_fresh)
    candidates = candidates_within(
        report.job, report.result.placements, to, job_path, report.result
    )
    report, candidates, refreshed, allowed_stale = fresh_candidates(
        report,
        candidates,
        job_path,
        project=project,
        now=now,
        to=to,
        require_fresh=require_fresh,
        allow_stale=allow_stale,
        refresh=refresh,
    )
    stack, job = "", report.job
    live = live_placement(records, job.name) if records is not None else None
    if live is not None:
        stack, candidates = live.stack, at_live_site(live, candidates)
        job = with_move_env(job, project, stack)
    chosen = candidates[0]
    proposal = proposal_for(
        job, report.org, chosen, candidates, project=project, stack=stack, job_file=job_path
    )
    return replace(proposal, refreshed=refreshed, allowed_stale=allowed_stale)


def fresh_candidates(
    report: Any,
    candidates: list[Placement],
    job_path: Path,
    *,
    project: Project,
    now: datetime,
    to: str | None,
    require_fresh: bool,
    allow_stale: bool,
    refresh: Refresher | None,
) -> tuple[Any, list[Placement], tuple[Any, ...], bool]:
    """Never deploy a cloud placement on a stale price silently: refresh the clouds in play,
    re-plan, and refuse if the best price is still stale (unless the user allows it).

    Returns (report, candidates, refresh outcomes, whether a stale price was allowed).
    """
    refreshed: tuple[Any, ...] = ()
    if _stale_cloud(candidates[0]) and refresh is not None:
        clouds = tuple(sorted({p.cloud for p in candidates if p.cloud != "local"}))
        refreshed = tuple(refresh(clouds, candidates[0].gpu))
        if any(o.quotes_stored for o in refreshed):
            report = plan_job(job_path, project=project, now=now, require_fresh=require_fresh)
            candidates = candidates_within(
                report.job, report.result.placements, to, job_path, report.result
            )
    chosen = candidates[0]
    allowed_stale = False
    if _stale_cloud(chosen):
        if not (allow_stale or report.org.allow_stale_deploy):
            tried = (
                " (refresh failed: "
                + "; ".join(f"{o.cloud}: {o.error}" for o in refreshed if o.error)[:300]
                + ")"
                if any(o.error for o in refreshed)
                else ""
            )
            # The advice before the refresh's errors: a long message is cut at its limit.
            raise OperationFailed(
                f"job {report.job.name}: the best price, {chosen.cloud} {chosen.region} "
                f"${chosen.price_per_hour:,.2f}/h, is {_age_text(chosen.price_age_s)} old "
                f"({chosen.price_source}) — stale; run `route prices refresh` with "
                f"credentials, or pass --allow-stale to deploy on it anyway{tried}"
            )
        allowed_stale = True
    return report, candidates, refreshed, allowed_stale


def candidates_within(
    job: Job,
    ranked: Sequence[Placement],
    to: str | None,
    job_path: Path | str,
    planned: PlanResult | None = None,
) -> list[Placement]:
    """The ranked placements inside `to` (CLOUD or CLOUD/REGION); OperationFailed if none,
    saying (from `planned`'s rejections) which filter removed the cheapest offer when nothing
    fits at all."""
    candidates = [p for p in ranked if to is None or _matches(p, to)]
    if not candidates:
        where = f" in {to}" if to else ""
        why = ""
        if planned is not None and not ranked:  # read only here: building the reasons costs
            why = f": {no_fit_reason(job, planned.rejected)}"
        # The advice first: a long reason is cut at the message limit, the advice never is.
        raise OperationFailed(
            f"no placement{where} fits job '{job.name}' (see `route plan {job_path} --explain`)"
            + why
        )
    return candidates


def proposal_for(
    job: Job,
    org: Any,
    chosen: Placement,
    ranked: Sequence[Placement],
    *,
    project: Project,
    stack: str = "",
    job_file: Path | None = None,
    read_secrets: bool = True,
) -> Proposal:
    """The stack config of placing `job` at `chosen` (in `stack`, default the job's own).

    The job's secrets are read here, from run.env or this process's environment (BadInput, exit
    2, naming the variable when one has no value), and go only into the secret config key.
    `read_secrets=False` (`route plan --write`, which never writes that key) reads none of them.
    """
    check_startup_script(job, chosen, job_file or f"job {job.name}")
    home = spotroute_home()
    secrets = (
        secret_values(job, os.environ, str(job_file) if job_file else f"job {job.name}")
        if read_secrets
        else dict.fromkeys(job.run.secrets, MASKED)
    )
    stack_file = project.stack_config_path(stack or job.name)
    before = read_stack_file(stack_file)
    config = stack_config(
        job,
        chosen,
        ranked,
        gcp_project=org.credentials.get("gcp_project", ""),
        azure_storage_accounts=org.azure_storage_accounts,
        gcp_accelerator_type=gcp_accelerator_type(load_catalog(), chosen.gpu),
        local_dirs=(
            str(home / "sandbox" / job.name),
            str(home / "checkpoints" / job.name),
        ),
        secret_env=secrets,
        # Kept while the stack file lives (a redeploy changes no bucket name), new otherwise.
        deployment_id=str(before.get("deploymentId") or token_hex(4)),
        # Per-stack names for a new stack file; an existing one keeps what it was deployed with
        # (a file from before the key: the job's names), so a redeploy renames nothing.
        name_scope=str(before.get("nameScope") or ("job" if before else "stack")),
    )
    return Proposal(
        job,
        chosen,
        config,
        tuple(config_diff(before, config)),
        stack_file,
        stack,
        job_file.absolute() if job_file else None,
    )


@dataclass(frozen=True)
class ReviewedStack:
    """`route plan --write`: the placement written and what the stack file write did."""

    proposal: Proposal
    write: StackFileWrite


def write_for_review(
    report: PlanReport, *, project: Project, job_file: Path, records: RecordStore | None = None
) -> ReviewedStack:
    """Write the best placement's stack config into the job's stack file for review — the
    config `route deploy` would write (the same `proposal_for`), without engine, provider plugins
    or credentials. Secret values are left out (only the engine encrypts them); deploy adds them.

    The file is the live stack's (`stacks/Pulumi.<job>.2.yaml` after a move): from the placement
    record in `records` (local ones: `live_placement.local_records`), at the site the job runs,
    as deploy would; without records, the newest of the job's stack files.
    """
    if not report.result.placements:
        raise OperationFailed(
            f"no placement fits job '{report.job.name}': no stack file written — see "
            f"`route plan {job_file} --explain`"
        )
    job, placements = report.job, list(report.result.placements)
    live = live_placement(records, job.name) if records is not None else None
    if live is not None:
        stack, placements = live.stack, at_live_site(live, placements)
        job = with_move_env(job, project, stack)
    else:
        stack = live_stack(project, job.name, None)
    proposal = proposal_for(
        job, report.org, placements[0], placements, project=project, stack=stack,
        job_file=job_file, read_secrets=False,
    )  # fmt: skip
    return ReviewedStack(proposal, write_stack_file(proposal.stack_file, proposal.config))
