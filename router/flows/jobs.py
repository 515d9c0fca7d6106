"""What the job verbs do: deploy, preview, status, destroy. One Pulumi stack per job.

The engine adapter is router/deploy.py; placements come from router/planning.py; stack config
from router/stackconfig.py. Confirmation and progress are callbacks the CLI passes in.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.config.datafiles import load_catalog
from router.config.home import spotroute_home
from router.config.org_file import org_config_for
from router.config.project import Project
from router.config.stack_files import read_stack_file
from router.core.catalog import gcp_accelerator_type
from router.core.errors import BadInput, Interrupted, OperationFailed
from router.core.job.model import Job
from router.core.job.problems import secret_values
from router.core.placement import Placement, placement_site
from router.core.review import Change, Review, change_from_event, review
from router.core.stackconfig import StackConfig, config_diff, stack_config
from router.core.strict_json import dumps
from router.engine.automation import (
    Engine,
    choose_backend,
    config_transaction,
    engine_error,
    engine_interrupts,
    job_lock,
)
from router.engine.processes import guarded_python, signal_hook, sweep_orphans
from router.engine.records import RecordStore
from router.flows.plan import plan_job
from router.flows.report import record_ended

EventHandler = Callable[[Any], None]
Notify = Callable[[str], None]  # one line for the user (the CLI prints it on stderr)


def recover(engine: Engine, job: str, notify: Notify | None) -> None:
    """Converge after a killed route command: orphaned engine processes, dead holders' locks."""
    say = notify or (lambda _line: None)
    orphans = sweep_orphans(engine.home)
    if orphans:
        say(f"stopped {len(orphans)} engine process(es) left by a killed route command")
    if engine.repair_backend():
        say("repaired a state file a killed engine left half-written")
    for lock in engine.clear_dead_locks(job):
        say(f"cleared the lock on job {job} held by {lock.holder()}: that process is gone")


def engine_for(project: Project) -> Engine:
    """The engine for this project's backend (org config backend_url, default local files)."""
    home = spotroute_home()
    org = org_config_for(project)
    return Engine(project, home, choose_backend(home, org.backend_url, org.secrets_provider))


# --- deploy -------------------------------------------------------------------------------------


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
) -> Proposal:
    """Plan the job and pick the best placement (within `to` = CLOUD or CLOUD/REGION if given).

    A cloud placement priced by a stale quote is never deployed silently: the clouds in play
    are refreshed first (`refresh`), and if the best price is still stale the deploy is refused
    unless `allow_stale` (or spotroute.yaml's `allow_stale_deploy`) says otherwise.
    """

    report = plan_job(job_path, project=project, now=now, require_fresh=require_fresh)
    candidates = candidates_within(report.job, report.result.placements, to, job_path)
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
    chosen = candidates[0]
    proposal = proposal_for(
        report.job, report.org, chosen, candidates, project=project, job_file=job_path
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
            candidates = candidates_within(report.job, report.result.placements, to, job_path)
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
            raise OperationFailed(
                f"job {report.job.name}: the best price, {chosen.cloud} {chosen.region} "
                f"${chosen.price_per_hour:,.2f}/h, is {_age_text(chosen.price_age_s)} old "
                f"({chosen.price_source}) — stale{tried}; run `route prices refresh` with "
                "credentials, or pass --allow-stale to deploy on it anyway"
            )
        allowed_stale = True
    return report, candidates, refreshed, allowed_stale


def candidates_within(
    job: Job, ranked: Sequence[Placement], to: str | None, job_path: Path | str
) -> list[Placement]:
    """The ranked placements inside `to` (CLOUD or CLOUD/REGION); OperationFailed if none."""
    candidates = [p for p in ranked if to is None or _matches(p, to)]
    if not candidates:
        where = f" in {to}" if to else ""
        raise OperationFailed(
            f"no placement{where} fits job '{job.name}' — see `route plan {job_path} --explain`"
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
) -> Proposal:
    """The stack config of placing `job` at `chosen` (in `stack`, default the job's own).

    The job's secrets are read here, from run.env or this process's environment (BadInput, exit
    2, naming the variable when one has no value), and go only into the secret config key.
    """
    home = spotroute_home()
    secrets = secret_values(job, os.environ, str(job_file) if job_file else f"job {job.name}")
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
    )
    stack_file = project.stack_config_path(stack or job.name)
    return Proposal(
        job,
        chosen,
        config,
        tuple(config_diff(read_stack_file(stack_file), config)),
        stack_file,
        stack,
        job_file.absolute() if job_file else None,
    )


@dataclass
class PreviewResult:
    changes: list[Change] = field(default_factory=list)
    policy_violations: list[str] = field(default_factory=list)

    def on_event(self, event: Any) -> None:
        if event.resource_pre_event is not None:
            self.changes.append(change_from_event(event.resource_pre_event.metadata))
        if event.policy_event is not None:
            pe = event.policy_event
            # The message starts with the policy's description; the violation is the last line.
            lines = [ln.strip() for ln in pe.message.splitlines() if ln.strip()]
            where = f" ({pe.resource_urn.rsplit('::', 1)[-1]})" if pe.resource_urn else ""
            self.policy_violations.append(
                f"[{pe.enforcement_level}] {pe.policy_name}: {lines[-1] if lines else ''}{where}"
            )


@dataclass(frozen=True)
class DeployOutcome:
    job: str
    applied: bool
    review: Review
    outputs: dict[str, Any]
    placement: Placement
    record_path: str | None = None  # where the placement record was written
    changes: dict[str, int] = field(default_factory=dict)  # what `up` did, by operation


class _Rollback(Exception):
    """Undo the config write (dry run, or the user said no)."""


def fan_out(*handlers: EventHandler | None) -> EventHandler:
    live = [h for h in handlers if h is not None]

    def handle(event: Any) -> None:
        for h in live:
            h(event)

    return handle


def deploy(
    proposal: Proposal,
    *,
    project: Project,
    confirm: Callable[[Review], bool],
    dry_run: bool = False,
    on_event: EventHandler | None = None,
    record: bool = True,
    notify: Notify | None = None,
) -> DeployOutcome:
    """Write config → preview (with the policy pack) → confirm → up → record; undo on failure.

    When the preview finds nothing to change and the config is unchanged, `up` is skipped: the
    stack already is what was asked for.
    """
    from pulumi import automation as auto

    engine = engine_for(project)
    job = proposal.stack_name
    on_event = fan_out(on_event, signal_hook("deploy"))
    preview = PreviewResult()
    changes: dict[str, int] = {}
    with job_lock(engine, job), engine_interrupts() as interrupted:
        recover(engine, job, notify)
        created = False
        try:
            with config_transaction(proposal.stack_file):
                stack, created = engine.select_or_create(job)
                # Changed secrets appear in the review as `[secret]`, never with their values.
                secret_diff = engine.write_config(job, proposal.config)
                packs, configs = policy_args(engine, job, proposal)
                try:
                    stack.preview(
                        on_event=fan_out(preview.on_event, on_event),
                        diff=True,
                        policy_packs=packs,
                        policy_pack_configs=configs,
                    )
                except auto.CommandError as exc:
                    raise (
                        _interrupted(job)
                        if interrupted()
                        else _preview_error(job, exc, preview, engine)
                    ) from None
                summary = review(
                    job,
                    preview.changes,
                    (*proposal.config_diff, *secret_diff),
                    preview.policy_violations,
                )
                if interrupted():  # Ctrl-C between engine calls: stop before changing anything
                    raise _interrupted(job)
                if dry_run or not confirm(summary):
                    raise _Rollback
                try:
                    if summary.counts or proposal.config_diff or created:
                        result = stack.up(
                            on_event=on_event, policy_packs=packs, policy_pack_configs=configs
                        )
                        changes = {
                            op: n
                            for op, n in op_counts(result.summary.resource_changes).items()
                            if op != "same"
                        }
                        outputs = {k: v.value for k, v in result.outputs.items()}
                    else:
                        outputs = {k: v.value for k, v in stack.outputs().items()}
                except auto.CommandError as exc:
                    raise (
                        _interrupted(job) if interrupted() else engine_error(job, exc, engine)
                    ) from None
        except _Rollback:
            if created:
                _remove_if_empty(engine, job)
            return DeployOutcome(proposal.job.name, False, summary, {}, proposal.chosen)
        except BaseException as exc:
            if created:
                _remove_half_created(engine, job, exc)
            if interrupted() and not isinstance(exc, Interrupted):
                raise _interrupted(job) from None  # whichever engine call the Ctrl-C cut short
            raise
    stored = (
        record_placement(engine.records(), proposal, outputs, datetime.now(UTC)) if record else None
    )
    return DeployOutcome(
        proposal.job.name, True, summary, outputs, proposal.chosen, stored, changes
    )


def _interrupted(job: str) -> Interrupted:
    return Interrupted(
        f"job {job}: interrupted — the engine cancelled cleanly and the stack is unlocked; "
        "run the command again to finish"
    )


def _remove_half_created(engine: Engine, stack: str, exc: BaseException) -> None:
    """A first deploy failed: destroy what a refused launch left, then drop the empty stack."""
    from router.core.failover import classify_launch_error
    from router.engine.automation import EngineFailed

    if isinstance(exc, EngineFailed) and classify_launch_error(exc.detail) is not None:
        try:
            engine.stack(stack, create=False).destroy()
        except Exception:
            return
    _remove_if_empty(engine, stack)


def _remove_if_empty(engine: Engine, job: str) -> None:
    """Remove a stack this deploy created if nothing was deployed into it (a failed first try).

    Never one that another home on the same backend has started using meanwhile (it holds the
    stack's lock): removing it under them made both deploys fail.
    """
    from pulumi import automation as auto

    try:
        if engine.held_locks(job):
            return
        for s in engine.list_stacks():
            if s.name == job and not s.resource_count and not s.update_in_progress:
                engine.workspace().remove_stack(job)
    except (auto.CommandError, OperationFailed):
        pass  # the original error matters more; an empty stack left behind is harmless


def _preview_error(
    job: str, exc: Exception, preview: PreviewResult, engine: Engine
) -> OperationFailed:
    mandatory = [v for v in preview.policy_violations if v.startswith("[mandatory]")]
    if mandatory:
        return OperationFailed(
            f"job {job}: refused by policy — {mandatory[0]}"
            + (
                f" (+{len(mandatory) - 1} more; see `route preview --review markdown`)"
                if len(mandatory) > 1
                else ""
            )
        )
    return engine_error(job, exc, engine)


def policy_args(engine: Engine, job: str, proposal: Proposal | None) -> tuple[list[str], list[str]]:
    """The policy pack's launcher and this job's pack config (budget, allowed regions)."""
    from policies import write_launcher

    launcher = write_launcher(
        engine.home / "policy-pack", str(guarded_python(engine.home, sys.executable))
    )
    org = org_config_for(engine.project)
    caps = [
        c
        for c in (
            org.budgets.max_price_per_hour,
            proposal.job.max_price_per_hour if proposal else None,
        )
        if c is not None
    ]
    config: dict[str, Any] = {}
    if caps:
        config["price-within-budget"] = {"max_price_per_hour": min(caps)}
    if org.regions.allow:
        config["regions-allowed"] = {"allowed_regions": list(org.regions.allow)}
    if not config:
        return [str(launcher)], []
    path = engine.home / "policy-config" / f"{job}.json"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(dumps(config))
    return [str(launcher)], [str(path)]


def record_placement(
    records: RecordStore, proposal: Proposal, outputs: dict[str, Any], at: datetime
) -> str:
    """Remember where and at what price the job was placed (for status and migration)."""
    p = proposal.chosen
    record = {
        "job": proposal.job.name,
        **placement_site(p),
        "node_count": p.node_count,
        "price_per_hour": p.price_per_hour,
        "price_source": p.price_source,
        "stack": proposal.stack_name,
        "deployed_at": at.isoformat(),
        "deployed_by": os.environ.get("USER", ""),
        "outputs": outputs,
    }
    before = read_placement(records, proposal.job.name)
    if before and (before.get("outputs") or {}).get("groupId") == outputs.get("groupId"):
        record["deployed_at"] = before["deployed_at"]  # same instances: still up since then
    elif before:  # new instances: the old placement is over; keep it for `route report`
        record_ended(records, before, at, "re-placed")
    # What route watch needs across placements: the job file, when the job started, hours run.
    record["job_file"] = str(proposal.job_file) if proposal.job_file else None
    record["submitted_at"] = at.isoformat()
    record["run_h_before"] = 0.0
    if before:
        record["job_file"] = record["job_file"] or before.get("job_file")
        record["submitted_at"] = before.get("submitted_at") or record["submitted_at"]
        record["run_h_before"] = float(before.get("run_h_before") or 0.0)
    records.put(placement_key(proposal.job.name), record)
    return f"{records.where} {placement_key(proposal.job.name)}"


def placement_key(job: str) -> str:
    return f"placements/{job}"


def read_placement(records: RecordStore, job: str) -> dict[str, Any] | None:
    return records.get(placement_key(job))


# --- preview ------------------------------------------------------------------------------------


def preview_job(
    job_path: Path,
    *,
    project: Project,
    now: datetime,
    to: str | None = None,
    on_event: EventHandler | None = None,
) -> Review:
    """The engine's preview of deploying the job now, as a review; nothing is changed."""
    proposal = propose(job_path, project=project, now=now, to=to)
    outcome = deploy(
        proposal, project=project, confirm=lambda _r: False, dry_run=True, on_event=on_event
    )
    return outcome.review


# --- destroy ------------------------------------------------------------------------------------


def destroy_job(
    job: str,
    *,
    project: Project,
    on_event: EventHandler | None = None,
    notify: Notify | None = None,
) -> int:
    """Tear down every stack of the job (its placements) and forget it; resources deleted."""
    _check_job_name(job)
    engine = engine_for(project)
    recover(engine, job, notify)
    stacks = [s.name for s in engine.list_stacks() if job_of_stack(s.name) == job]
    if not stacks:
        engine.stack(job, create=False)  # the one-line "no deployed job" error
    deleted = 0
    for name in sorted(stacks, key=lambda n: (n != job, n)):
        deleted += destroy_stack(engine, name, project=project, on_event=on_event, notify=notify)
    records = engine.records()  # the spend is kept (route report) before the live record goes
    record_ended(records, read_placement(records, job), datetime.now(UTC), "destroyed")
    records.delete(placement_key(job))
    return deleted


def destroy_stack(
    engine: Engine,
    stack_name: str,
    *,
    project: Project,
    on_event: EventHandler | None = None,
    notify: Notify | None = None,
) -> int:
    """Destroy and remove one placement stack and its stack file; 0 if it is already gone."""
    from pulumi import automation as auto

    if not any(s.name == stack_name for s in engine.list_stacks()):
        project.stack_config_path(stack_name).unlink(missing_ok=True)
        return 0
    on_event = fan_out(on_event, signal_hook("destroy"))
    with job_lock(engine, stack_name), engine_interrupts() as interrupted:
        recover(engine, stack_name, notify)
        stack = engine.stack(stack_name, create=False)
        try:
            result = stack.destroy(on_event=on_event)
            stack.workspace.remove_stack(stack_name)
        except auto.CommandError as exc:
            raise (
                _interrupted(stack_name) if interrupted() else engine_error(stack_name, exc, engine)
            ) from None
        project.stack_config_path(stack_name).unlink(missing_ok=True)
    return op_counts(result.summary.resource_changes).get("delete", 0)


def unlock_job(job: str, *, project: Project) -> list[str]:
    """`route unlock JOB`: clear the stack's backend lock; returns who held it."""
    _check_job_name(job)
    engine = engine_for(project)
    with job_lock(engine, job):
        sweep_orphans(engine.home)
        return [lock.holder() for lock in engine.unlock(job)]


def job_of_stack(stack: str) -> str:
    """`train.3` (the job's third placement) → `train`."""
    from router.core.journal import job_of_stack as of

    return of(stack)


def op_counts(changes: Any) -> dict[str, int]:
    """{"create": 3, ...} from an engine summary (keys are OpType enums or plain strings)."""
    return {getattr(op, "value", str(op)): int(n) for op, n in (changes or {}).items()}


def _check_job_name(job: str) -> None:
    import re

    if not re.fullmatch(r"[a-z][a-z0-9-]{0,39}", job):
        raise BadInput(f"JOB: '{job}' is not a job name — use the `name` from the job file")


# --- status -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobStatus:
    job: str
    state: str  # running | deployed | stopped | updating | empty
    cloud: str | None
    region: str | None
    zone: str | None
    instance_type: str | None
    market: str | None
    node_count: int
    price_per_hour: float | None  # USD per instance-hour at placement time
    best_price_now: float | None  # cheapest known offer of the same shape and market now
    up_since: datetime | None
    cost_so_far: float | None  # USD
    resources: int
    last_decision: dict[str, Any] | None = None  # route watch/migrate/preempt's latest, if any
    locked_by: str | None = None  # who holds the backend's lock on the stack, and since when
    problem: str | None = None  # why part of the job's record could not be read

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "state": self.state,
            "cloud": self.cloud,
            "region": self.region,
            "zone": self.zone,
            "instance_type": self.instance_type,
            "market": self.market,
            "node_count": self.node_count,
            "price_per_hour": self.price_per_hour,
            "best_price_now": self.best_price_now,
            "up_since": self.up_since.isoformat() if self.up_since else None,
            "cost_so_far": self.cost_so_far,
            "resources": self.resources,
            "last_decision": self.last_decision,
            "locked_by": self.locked_by,
            "problem": self.problem,
        }


def job_status(
    *, project: Project, now: datetime, job: str | None = None, notify: Notify | None = None
) -> list[JobStatus]:
    """Every job found in the backend (or one), with its placement, price then and now, and cost.

    A job whose record cannot be read is listed with the problem; the others are unaffected.
    """
    engine = engine_for(project)
    if sweep_orphans(engine.home):
        (notify or (lambda _line: None))("stopped engine processes left by a killed route command")
    if engine.repair_backend():
        (notify or (lambda _line: None))("repaired a state file a killed engine left half-written")
    stacks = [s for s in engine.list_stacks() if job is None or job_of_stack(s.name) == job]
    if job is not None and not stacks:
        raise OperationFailed(
            f"no deployed job '{job}' on backend {engine.backend.url} — see `route status`"
        )
    offers: list[Any] = []
    statuses = []
    placements = engine.records().list("placements/") if stacks else {}
    by_job: dict[str, list[Any]] = {}
    for s in stacks:
        by_job.setdefault(job_of_stack(s.name), []).append(s)
    chosen = []
    for name, group in by_job.items():
        record = placements.get(placement_key(name)) or {}
        current = record.get("stack") or name
        # The job's current placement; during a hand-over the other stack is its new one.
        chosen.append((name, next((s for s in group if s.name == current), group[0]), record))
    for name, s, record in sorted(chosen, key=lambda c: c[0]):
        recover(engine, s.name, notify)
        held = engine.held_locks(s.name)
        locked_by = held[0].holder() if held else None
        try:
            status = _one_status(project, name, s, record, now, offers)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            status = JobStatus(
                name,
                "unknown",
                None,
                None,
                None,
                None,
                None,
                1,
                None,
                None,
                None,
                None,
                s.resource_count or 0,
                problem=f"the placement record of {name} is unreadable ({type(exc).__name__}) — "
                f"`route deploy` the job again to rewrite it",
            )
        status = replace(status, last_decision=_last_decision(engine, name))
        if locked_by:
            status = replace(status, state="locked", locked_by=locked_by)
        statuses.append(status)
    return statuses


def _one_status(
    project: Project, name: str, s: Any, record: Any, now: datetime, offers: list[Any]
) -> JobStatus:
    from router.prices.book import OfferFilter, offers_now, select_offers

    if not isinstance(record, dict):
        raise TypeError("not a JSON object")
    config = read_stack_file(project.stack_config_path(s.name))
    cloud = record.get("cloud") or config.get("cloud")
    market = record.get("market") or config.get("market")
    gpu, gpu_count = (
        record.get("gpu") or config.get("gpu"),
        record.get("gpu_count") or config.get("gpuCount"),
    )
    best = None
    if cloud and cloud != "local" and gpu and gpu_count:
        if not offers:
            offers.extend(offers_now())
        same = select_offers(
            offers,
            OfferFilter(gpu=gpu, gpu_count=int(gpu_count), markets=(market,) if market else ()),
        )
        best = same[0].price_per_hour if same else None
    elif cloud == "local":
        best = float(record.get("price_per_hour", 0.0))
    up_since = datetime.fromisoformat(record["deployed_at"]) if record.get("deployed_at") else None
    price = record.get("price_per_hour", config.get("pricePerHour"))
    if price is not None:
        price = float(price)
    nodes = int(record.get("node_count") or config.get("nodeCount") or 1)
    cost = (
        price * nodes * (now - up_since).total_seconds() / 3600
        if price is not None and up_since
        else None
    )
    return JobStatus(
        job=name,
        state=_state(s, record),
        cloud=_text(cloud),
        region=_text(record.get("region") or config.get("region")),
        zone=_text(record.get("zone") or config.get("zone") or None),
        instance_type=_text(
            record.get("instance_type") or (config.get("instanceTypes") or [None])[0]
        ),
        market=_text(market),
        node_count=nodes,
        price_per_hour=price,
        best_price_now=best,
        up_since=up_since,
        cost_so_far=cost,
        resources=s.resource_count or 0,
    )


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"expected text, got {type(value).__name__}")


def _last_decision(engine: Engine, job: str) -> dict[str, Any] | None:
    """The job's latest recorded decision: when, by whom, what and why."""
    from router.engine.job_records import JobRecords

    d = JobRecords(engine.records()).last_decision(job)
    return None if d is None else {k: d.get(k) for k in ("at", "by", "action", "reason")}


def _state(summary: Any, record: dict[str, Any]) -> str:
    if summary.update_in_progress:
        return "updating"
    if not summary.resource_count:
        return "empty"
    group_id = str((record.get("outputs") or {}).get("groupId", ""))
    if group_id.startswith("local-process:"):
        from components.local import parse_group_id, process_alive

        ids = parse_group_id(group_id)
        return "running" if ids and process_alive(*ids) else "stopped"
    return "deployed"
