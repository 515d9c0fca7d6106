"""A local job's whole life through the real CLI: deploy, status, redeploy, change, destroy.

One test on purpose: every engine call costs seconds, and each step starts from the previous one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from tests.engine.engine_cli import Route, alive, group_pid, no_traceback, wait_for

JOB = "lifecycle"


def _chosen_config(
    route: Route, job_file: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, object]:
    """The stack config the router itself chooses for the job (its own planner, in-process)."""
    from router.config.project import Project
    from router.flows.proposals import propose

    monkeypatch.setenv("SPOTROUTE_HOME", str(route.home))
    proposal = propose(job_file, project=Project(route.project), now=datetime.now(UTC))
    return dict(proposal.config)


def _latest_changes(route: Route, job: str) -> dict[str, int]:
    latest = route.update_history(job)[0]
    assert latest["result"] == "succeeded", latest
    return dict(latest["resourceChanges"])


@pytest.mark.engine
def test_local_job_runs_survives_unchanged_redeploy_is_replaced_on_change_and_stops_on_destroy(
    route: Route, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_file = route.write_job(JOB, env={"EPOCHS": "1"})

    # --- deploy: the process runs, checkpoints, and the reviewed stack file holds the choice
    first = route.ok("deploy", job_file.name, "--yes", "--json")
    deployed = first.json()
    assert deployed["job"] == JOB and deployed["applied"] is True, first
    pid = group_pid(deployed["outputs"])
    assert alive(pid), f"job process {pid} is not running after deploy"
    assert route.job_leaders() == [pid]

    checkpoint_dir = Path(urlparse(deployed["outputs"]["checkpointUrl"]).path)
    assert checkpoint_dir.is_relative_to(route.checkpoint_dir(JOB))
    step_file = checkpoint_dir / "step"
    wait_for(step_file.exists, 30, f"the job to write its checkpoint {step_file}")

    config = route.stack_config(JOB)
    assert config == _chosen_config(route, job_file, monkeypatch)
    doc = yaml.safe_load(route.stack_file(JOB).read_text())
    assert all(key.startswith("spotroute:") for key in doc["config"]), doc["config"]
    placement = deployed["placement"]
    assert (
        (config["cloud"], config["region"], config["market"])
        == (
            placement["cloud"],
            placement["region"],
            placement["market"],
        )
        == ("local", "local", "on-demand")
    )
    assert config["instanceTypes"][0] == placement["instance_type"]
    assert config["pricePerHour"] == placement["price_per_hour"]
    assert config["job"]["env"] == {"EPOCHS": "1"}
    assert deployed["config_diff"]
    assert all(line.startswith("+ ") for line in deployed["config_diff"])
    # pulumi issue #10305: nothing may land next to Pulumi.yaml instead of in stacks/
    assert not (route.project / f"Pulumi.{JOB}.yaml").exists()
    assert _latest_changes(route, JOB).get("create", 0) > 0

    # --- status: running on the local target
    status = route.ok("status", "--json").json()
    assert [(s["job"], s["state"], s["cloud"]) for s in status] == [(JOB, "running", "local")]
    assert status[0]["resources"] > 0

    # --- redeploy unchanged: the preview finds nothing to change, so no update runs at all,
    # and the same process keeps running
    updates_before = len(route.update_history(JOB))
    again = route.ok("deploy", job_file.name, "--yes", "--json").json()
    assert again["applied"] is True and again["config_diff"] == []
    assert again["preview"] == {} and again["changes"] == {}
    assert group_pid(again["outputs"]) == pid
    assert len(route.update_history(JOB)) == updates_before
    assert alive(pid) and route.job_leaders() == [pid]

    # --- change the job's env: the process is replaced, never patched in place
    route.write_job(JOB, env={"EPOCHS": "2"})
    changed = route.ok("deploy", job_file.name, "--yes", "--json").json()
    assert changed["applied"] is True
    assert any(line.startswith("~ spotroute:job") for line in changed["config_diff"]), changed
    new_pid = group_pid(changed["outputs"])
    assert new_pid != pid
    assert not alive(pid), f"old job process {pid} still runs after the replacement"
    assert alive(new_pid) and route.job_leaders() == [new_pid]
    changes = _latest_changes(route, JOB)
    assert changes.get("replace") == 1 and not changes.get("delete"), changes
    assert changed["changes"].get("replace") == 1, changed["changes"]
    assert route.stack_config(JOB)["job"]["env"] == {"EPOCHS": "2"}

    # --- destroy: process gone, job forgotten, stack file removed, checkpoints kept. The
    # checkpoint directory refuses deletion while it holds files (as S3's DeleteBucket answers
    # BucketNotEmpty), so the bucket is retained on destroy and the destroy converges (issue 21)
    destroyed = route.ok("destroy", JOB, "--yes")
    no_traceback(destroyed)
    assert f"destroyed {JOB}" in destroyed.stdout
    assert "kept its checkpoints: file://" in destroyed.stdout, destroyed
    assert not alive(new_pid) and route.job_leaders() == []
    assert route.ok("status", "--json").json() == []
    assert not route.stack_file(JOB).exists()
    assert step_file.is_file() and step_file.read_text().strip().isdigit()

    # --- report: the destroyed job's spend is kept — the first placement (ended by the
    # replacement) and the second (ended by destroy)
    spend = route.ok("report", "--json").json()
    [row] = spend["by_job"]
    assert row["job"] == JOB and row["placements"] == 2 and row["hours"] > 0, spend
