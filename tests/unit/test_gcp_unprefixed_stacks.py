"""A GCP stack deployed before every GCP name got the `spotroute-` prefix (issue 21 item 13) is
not updated in place: each renamed resource would be replaced (GCP renames nothing: a changed
`name` is a new resource), a second group would start beside the first, and the narrowed deployer
may not delete the old firewalls, VMs or secret. `route deploy` refuses it with the one-time step;
docs/security.md, "GCP stacks from before the spotroute- names"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.bootstrap.gcp_permissions import GCP_NAME_PREFIX as COMPONENTS_PREFIX
from router.config.project import Project
from router.core.errors import OperationFailed
from router.flows.jobs import (
    GCP_NAME_PREFIX,
    _refuse_update_of_unprefixed_gcp_stack,
    engine_for,
)
from router.flows.live_placement import placement_key
from tests.unit.cli_harness import EXAMPLES, isolate, route

GROUPS = "projects/acme-ml/zones/us-central1-a/instanceGroupManagers/"
OLD_GROUP, NEW_GROUP = GROUPS + "llm-finetune-group", GROUPS + "spotroute-llm-finetune-group"


def record(group: str, cloud: str = "gcp", stack: str = "llm-finetune") -> dict[str, Any]:
    return {"job": "llm-finetune", "cloud": cloud, "stack": stack, "outputs": {"groupId": group}}


def test_the_prefix_is_the_one_the_components_and_the_deployer_conditions_use() -> None:
    assert GCP_NAME_PREFIX == COMPONENTS_PREFIX


def test_an_update_of_a_stack_named_before_the_prefix_is_refused() -> None:
    with pytest.raises(OperationFailed) as refused:
        _refuse_update_of_unprefixed_gcp_stack(record(OLD_GROUP), "llm-finetune")

    assert refused.value.message.startswith(
        "job llm-finetune: its GCP resources were named before the spotroute- prefix "
        "(group llm-finetune-group), so an update would replace them all"
    )
    assert "`route destroy llm-finetune`" in refused.value.message


@pytest.mark.parametrize(
    ("before", "stack"),
    [
        (None, "llm-finetune"),  # a first deploy
        (record(NEW_GROUP), "llm-finetune"),  # named with the prefix
        (record(OLD_GROUP, cloud="aws"), "llm-finetune"),  # not GCP
        (record(OLD_GROUP), "llm-finetune.2"),  # a new placement stack (migrate): new names
        ({"cloud": "gcp", "stack": "llm-finetune", "outputs": {}}, "llm-finetune"),  # no group
    ],
)
def test_everything_else_deploys(before: dict[str, Any] | None, stack: str) -> None:
    _refuse_update_of_unprefixed_gcp_stack(before, stack)


def test_route_deploy_refuses_before_it_writes_or_runs_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path)
    Path("Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    # Where its group runs (the zone of OLD_GROUP): a deploy only ever updates a job there.
    site = {"region": "us-central1", "zone": "us-central1-a", "market": "spot",
            "instance_type": "a2-ultragpu-8g"}  # fmt: skip
    engine_for(Project(Path.cwd())).records().put(
        placement_key("llm-finetune"), record(OLD_GROUP) | site
    )

    run = route(monkeypatch, capsys, "deploy", EXAMPLES / "llm-finetune.yaml", "--to", "gcp",
                "--yes", "--allow-stale")  # fmt: skip

    assert run.code == 1, run
    assert run.err_lines[-1].startswith(
        "error: job llm-finetune: its GCP resources were named before the spotroute- prefix"
    ), run.err
    assert not (Path.cwd() / "stacks" / "Pulumi.llm-finetune.yaml").exists()
