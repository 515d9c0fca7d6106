"""What the job verbs do: deploy, preview, destroy, unlock. One Pulumi stack per job.

The engine adapter is router/engine/automation.py; the proposal (placement and stack config,
the stale-price gate) comes from router/flows/proposals.py; `route status` is
router/flows/job_status.py. Confirmation and progress are callbacks the CLI passes in.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.config.home import spotroute_home
from router.config.org_file import org_config_for
from router.config.project import Project
from router.core.errors import BadInput, Interrupted, OperationFailed
from router.core.placement import Placement, placement_site
from router.core.review import Change, Review, change_from_event, review
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
from router.flows import teardown
from router.flows.live_placement import (
    exclusive_of_moves,
    live_placement,
    placement_key,
    read_placement,
)
from router.flows.proposals import Proposal, propose
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


def clear_stale_locks(engine: Engine, job: str, notify: Notify | None) -> list[str]:
    """Clear the locks a killed route left on any stack of the job (one deleted since, or held
    by a process that is gone), one line each; returns who held them."""
    say = notify or (lambda _line: None)
    cleared = engine.clear_stale_locks(job)
    for lock, why in cleared:
        say(f"cleared the lock on stack {lock.stack} of job {job} held by {lock.holder()}: {why}")
    return [lock.holder() for lock, _why in cleared]


def engine_for(project: Project) -> Engine:
    """The engine for this project's backend (org config backend_url, default local files)."""
    home = spotroute_home()
    org = org_config_for(project)
    return Engine(project, home, choose_backend(home, org.backend_url, org.secrets_provider))


# --- deploy -------------------------------------------------------------------------------------


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
    if not dry_run:  # a preview only shows the replacements
        before = read_placement(engine.records(), proposal.job.name)
        _refuse_update_of_unprefixed_gcp_stack(before, job)
    on_event = fan_out(on_event, signal_hook("deploy"))
    preview = PreviewResult()
    changes: dict[str, int] = {}
    # A user's deploy holds the job's lease too: a move starting meanwhile is refused, and one
    # under way refuses this deploy (a move's own deploy, record=False, runs under its lease).
    user_deploy = record and not dry_run
    leased = (
        exclusive_of_moves(engine.records(), proposal.job.name) if user_deploy else nullcontext()
    )
    with job_lock(engine, job), engine_interrupts() as interrupted, leased:
        if record:  # a user's deploy: only ever into the job's live stack (not a move's new one)
            live = live_placement(engine.records(), proposal.job.name)
            if live is not None and live.stack != job:
                raise OperationFailed(
                    f"job {proposal.job.name} now lives in stack {live.stack}, not {job} (moved "
                    "while this deploy was prepared) — run the deploy again"
                )
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
                        else _preview_error(job, exc, preview, engine, proposal.job_file)
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
                        result = up_through_propagation(
                            stack, interrupted,
                            on_event=on_event, policy_packs=packs, policy_pack_configs=configs,
                        )  # fmt: skip
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


# Seconds to wait before each retry of a launch refused for an instance profile IAM has not
# propagated yet: IAM is eventually consistent, a new profile usually reaches EC2 within seconds
# (IAM User Guide, "Changes that I make are not always immediately visible",
# https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_general.html).
PROPAGATION_WAITS_S = (10.0, 20.0, 30.0)


def up_through_propagation(
    stack: Any,
    interrupted: Callable[[], bool],
    *,
    sleep: Callable[[float], None] | None = None,
    **up_args: Any,
) -> Any:
    """`stack.up(**up_args)`; a launch the cloud refused only because a new identity has not
    propagated (router.core.failover, kind "propagation") is retried after a wait, with the
    resources that launched (REPLACED_ON_PROPAGATION) replaced: the refused fleet stays in the
    stack as created, and only a new one launches again."""
    import time

    from pulumi import automation as auto

    from router.core.failover import REPLACED_ON_PROPAGATION, classify_launch_error

    for wait_s in (*PROPAGATION_WAITS_S, None):
        try:
            return stack.up(**up_args)
        except auto.CommandError as exc:
            failure = classify_launch_error(str(exc))
            if wait_s is None or failure is None or failure.kind != "propagation":
                raise
            if interrupted():
                raise
        (sleep or time.sleep)(wait_s)
        resources = stack.export_stack().deployment.get("resources") or []
        up_args["replace"] = [
            str(r["urn"]) for r in resources if r.get("type") in REPLACED_ON_PROPAGATION
        ]
    raise AssertionError("unreachable: the last try returns or raises")


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
        from router.engine.retention import settle_checkpoints

        try:
            created = engine.stack(stack, create=False)
            # The bucket this try created holds nothing of the job's (it never ran): delete it.
            settle_checkpoints(created, job_of_stack(stack), keep=False)
            created.destroy()
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
    job: str,
    exc: Exception,
    preview: PreviewResult,
    engine: Engine,
    job_file: Path | None = None,
) -> OperationFailed:
    mandatory = [v for v in preview.policy_violations if v.startswith("[mandatory]")]
    if mandatory:
        preview_command = f"route preview {job_file or 'JOB_FILE'} --review markdown"
        return OperationFailed(
            f"job {job}: refused by policy — {mandatory[0]}"
            + (
                f" (+{len(mandatory) - 1} more; see `{preview_command}`)"
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


# Every project-scoped GCP name the components give starts so since issue 21 item 13
# (components/bootstrap/gcp_permissions.GCP_NAME_PREFIX); the deployer's conditions admit no other.
GCP_NAME_PREFIX = "spotroute-"


def _refuse_update_of_unprefixed_gcp_stack(record: dict[str, Any] | None, stack: str) -> None:
    """Refuse to update in place a GCP stack whose group was named before the `spotroute-` prefix.

    Its network, firewalls, router, template, group and secret would all be replaced (their names
    change, and GCP renames nothing), a second group of the job would start beside the first, and
    the narrowed deployer may not delete the old firewalls, VMs or secret: the update would stop
    half-way. docs/security.md, "GCP stacks from before the spotroute- names", gives the one-time
    step.
    """
    if not record or record.get("cloud") != "gcp" or record.get("stack", stack) != stack:
        return
    group = str((record.get("outputs") or {}).get("groupId") or "").rsplit("/", 1)[-1]
    if group and not group.startswith(GCP_NAME_PREFIX):
        raise OperationFailed(
            f"job {stack}: its GCP resources were named before the {GCP_NAME_PREFIX} prefix "
            f"(group {group}), so an update would replace them all and the deployer may not "
            f"delete the old ones — destroy it once with `route destroy {stack}` as the deployer "
            "from before the bootstrap update or a project owner, then deploy again "
            '(docs/security.md, "GCP stacks from before the spotroute- names")'
        )


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
    records = engine_for(project).records()
    proposal = propose(job_path, project=project, now=now, to=to, records=records)
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
    reason: str = "destroyed",
    engine: Engine | None = None,
    hold_lease: bool = False,
    forget: bool = True,
) -> int:
    """Tear down every stack of the job (its placements) and forget it; resources deleted, the
    checkpoint buckets kept. `reason` is what `route report` says ended the placement.

    forget: also drop the record of a teardown `route watch` made (a crashed job `route status`
    still lists); route watch's own teardown keeps it (router/flows/teardown.py).

    hold_lease: a user's `route destroy` holds the job's lease, as a deploy does, so it is
    refused (nothing destroyed) while a move or a watch pass acts on the job, and a move
    starting meanwhile is refused; `route watch` tearing down a finished job holds it already.
    """
    _check_job_name(job)
    engine = engine or engine_for(project)
    leased = exclusive_of_moves(engine.records(), job, doing="destroy") if hold_lease else None
    with leased or nullcontext():
        recover(engine, job, notify)
        clear_stale_locks(engine, job, notify)
        stacks = [s.name for s in engine.list_stacks() if job_of_stack(s.name) == job]
        records = engine.records()
        placed = read_placement(records, job)
        if not stacks and placed is None:
            torn = teardown.read(records, job) if forget else None
            if torn is not None and torn.reason == teardown.CRASHED:
                teardown.forget(records, job)  # a crashed job route watch tore down: forgotten
                return 0
            engine.stack(job, create=False)  # the one-line "no deployed job" error
        # No stack but a live record: a destroy killed between the two converges here.
        deleted = 0
        for name in sorted(stacks, key=lambda n: (n != job, n)):
            deleted += destroy_stack(
                engine, name, project=project, on_event=on_event, notify=notify
            )
        say = notify or (lambda _line: None)
        stopped = end_untracked_nodes(job)
        if stopped:
            say(
                f"stopped {stopped} local node process(es) of {job} the engine did not know of "
                "(a deploy killed while it started them)"
            )
        record_ended(records, placed, datetime.now(UTC), reason)  # the spend, for route report
        records.delete(placement_key(job))
        if forget:
            teardown.forget(records, job)
        return deleted


def end_untracked_nodes(job: str) -> int:
    """Stop the job's local nodes that still run after its stacks are gone: nodes a killed
    deploy started before the engine recorded them (the sandbox's live index finds them)."""
    from components.local_nodes import nodes_of_job, running_dir, stop_nodes

    running = running_dir(str(spotroute_home() / "sandbox" / job))
    lost = nodes_of_job(running, job)
    if lost:
        stop_nodes([(r.pid, r.start_ticks) for r in lost])
    return len(lost)


def destroy_stack(
    engine: Engine,
    stack_name: str,
    *,
    project: Project,
    on_event: EventHandler | None = None,
    notify: Notify | None = None,
    keep_checkpoints: bool = True,
) -> int:
    """Destroy and remove one placement stack and its stack file; 0 if it is already gone.

    The checkpoint bucket the stack created is kept (retained, with its objects) unless
    `keep_checkpoints` is false: then it is deleted with its contents. Either way the state is
    made to say so first (router.engine.retention), so a stack from before retention existed,
    or one whose program no longer runs, converges too.
    """
    from pulumi import automation as auto

    from router.engine.retention import settle_checkpoints

    if not any(s.name == stack_name for s in engine.list_stacks()):
        project.stack_config_path(stack_name).unlink(missing_ok=True)
        return 0
    on_event = fan_out(on_event, signal_hook("destroy"))
    with job_lock(engine, stack_name), engine_interrupts() as interrupted:
        recover(engine, stack_name, notify)
        stack = engine.stack(stack_name, create=False)
        try:
            settle_checkpoints(stack, job_of_stack(stack_name), keep_checkpoints)
            result = stack.destroy(on_event=on_event)
            stack.workspace.remove_stack(stack_name)
        except auto.CommandError as exc:
            raise (
                _interrupted(stack_name) if interrupted() else engine_error(stack_name, exc, engine)
            ) from None
        project.stack_config_path(stack_name).unlink(missing_ok=True)
    return op_counts(result.summary.resource_changes).get("delete", 0)


def unlock_job(job: str, *, project: Project, notify: Notify | None = None) -> list[str]:
    """`route unlock JOB` (or one of its stacks, `JOB.2`): clear the lock on the job's live stack
    and every stale one on its other stacks; returns who held them."""
    job = _job_of_argument(job)
    engine = engine_for(project)
    record = read_placement(engine.records(), job) or {}
    stack = str(record.get("stack") or job)
    with job_lock(engine, stack):
        sweep_orphans(engine.home)
        held = clear_stale_locks(engine, job, notify)
        if any(s.name == stack for s in engine.list_stacks()) or not held:
            held += [lock.holder() for lock in engine.unlock(stack)]
        return held


def _job_of_argument(name: str) -> str:
    """A job name, or one of its placement stacks (`train.2`) read as its job."""
    import re

    if re.fullmatch(r"[a-z][a-z0-9-]{0,39}\.[0-9]{1,6}", name):
        return job_of_stack(name)
    _check_job_name(name)
    return name


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
