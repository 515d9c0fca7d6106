"""`route bootstrap`: the one-time keyless credential stack (components/bootstrap.py).

Its config lives in stacks/Pulumi.bootstrap.yaml under `spotroute-bootstrap:` (docs/security.md);
`--clouds` sets the cloud selection there, every other key is the platform engineer's to write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from router.config.home import spotroute_home
from router.config.org_file import org_config_for
from router.config.project import Project
from router.config.stack_files import read_stack_file
from router.contract.clouds import PUBLIC_CLOUDS
from router.core.errors import BadInput, Interrupted
from router.core.review import Review, review
from router.core.stackconfig import config_diff
from router.engine.automation import (
    Engine,
    config_transaction,
    engine_error,
    engine_interrupts,
    job_lock,
)

STACK = "bootstrap"
NAMESPACE = "spotroute-bootstrap"


@dataclass(frozen=True)
class BootstrapOutcome:
    applied: bool
    review: Review
    outputs: dict[str, Any]


def _clouds(clouds: tuple[str, ...]) -> list[str]:
    for cloud in clouds:
        if cloud not in PUBLIC_CLOUDS:
            raise BadInput(
                f"--clouds: unknown cloud '{cloud}' — use one or more of {', '.join(PUBLIC_CLOUDS)}"
            )
    return sorted(set(clouds))


@dataclass(frozen=True)
class ScopeNote:
    """One line on where a deployer's rights reach; `warning` when beyond spotroute's own."""

    text: str
    warning: bool = False


def bootstrap_scope(project: Project, clouds: tuple[str, ...] = ()) -> list[ScopeNote]:
    """What `route bootstrap` says before it asks and after it ran: the GCP project the deployer
    gets is meant to be spotroute's alone (the default), since its actAs and network rights cannot
    be narrowed to spotroute's resources (docs/security.md, "A project of its own")."""
    config = read_stack_file(project.stack_config_path(STACK), NAMESPACE)
    selected = _clouds(clouds) if clouds else list(config.get("clouds") or [])
    if "gcp" not in selected:
        return []
    name = config.get("gcpProjectId") or "<gcpProjectId>"
    if config.get("gcpProjectShared") is True:
        return [ScopeNote(
            f"GCP project {name} is shared (spotroute-bootstrap:gcpProjectShared: true): the "
            "deployer may run VMs as any of its service accounts and add spotroute-… firewall "
            "rules to any of its networks — docs/security.md, 'Residual risks'", warning=True,
        )]  # fmt: skip
    return [ScopeNote(
        f"GCP project {name} is to be spotroute's alone (the default): the bootstrap refuses it "
        "while other enabled service accounts live there; once Compute Engine is on, disable its "
        "default account (gcloud iam service-accounts disable PROJECT_NUMBER-compute@"
        "developer.gserviceaccount.com) — docs/security.md, 'A project of its own'"
    )]  # fmt: skip


def run_bootstrap(
    *,
    project: Project,
    clouds: tuple[str, ...],
    preview_only: bool,
    on_event: Callable[[Any], None] | None = None,
) -> BootstrapOutcome:
    """Preview or apply the bootstrap stack; `clouds` (if given) replaces the cloud selection."""
    from pulumi import automation as auto

    from components.bootstrap import bootstrap_inline_program
    from router.engine.automation import choose_backend
    from router.flows.jobs import PreviewResult, fan_out, policy_args

    home = spotroute_home()
    org = org_config_for(project)
    engine = Engine(
        project,
        home,
        choose_backend(home, org.backend_url, org.secrets_provider),
        program=bootstrap_inline_program,
    )
    stack_file = project.stack_config_path(STACK)
    wanted = {"clouds": _clouds(clouds)} if clouds else {}
    preview = PreviewResult()
    with job_lock(engine, STACK), engine_interrupts() as interrupted:
        try:
            with config_transaction(stack_file):
                before = read_stack_file(stack_file, NAMESPACE)
                stack = engine.stack(STACK)
                if wanted:
                    engine.write_config(STACK, wanted, namespace=NAMESPACE)
                packs, configs = policy_args(engine, STACK, None)
                stack.preview(
                    on_event=fan_out(preview.on_event, on_event),
                    diff=True,
                    policy_packs=packs,
                    policy_pack_configs=configs,
                )
                summary = review(
                    STACK,
                    preview.changes,
                    config_diff(before, {**before, **wanted}),
                    preview.policy_violations,
                )
                if preview_only:
                    return BootstrapOutcome(False, summary, {})
                result = stack.up(
                    on_event=on_event, policy_packs=packs, policy_pack_configs=configs
                )
                outputs = {k: v.value for k, v in result.outputs.items()}
        except auto.CommandError as exc:
            if interrupted():
                raise Interrupted("bootstrap: interrupted — the engine cancelled cleanly") from None
            raise engine_error(STACK, exc) from None
    return BootstrapOutcome(True, summary, outputs)
