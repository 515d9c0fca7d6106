"""The review loop to a real deploy, on the local target: `route plan --write` → commit →
`route review --against main` → merge → `route deploy` from main. The file the author committed
is the config the engine deploys: deploy proposes no config change, and afterwards the committed
file differs only by what only the engine can add (the encryption salt, the secret's ciphertext).

One test on purpose: every engine call costs seconds.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.engine.engine_cli import FOREVER, Route

JOB = "reviewed"


def git(route: Route, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev", *args],
        cwd=route.project, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def test_the_committed_stack_file_is_what_deploy_applies_after_the_merge(route: Route) -> None:
    job = route.project / "jobs" / f"{JOB}.yaml"
    job.parent.mkdir()
    job.write_text(yaml.safe_dump({
        "name": JOB, "resources": {"accelerators": "T4:1", "clouds": ["local"]},
        "market": "on-demand", "duration_hours": 0.1,
        "checkpoint": {"interval": "1m", "url": "auto"},
        # API_TOKEN has no value: a secret read from the environment of `route deploy`.
        "run": {"command": ["/bin/sh", "-c", FOREVER], "env": {"EPOCHS": "2", "API_TOKEN": None}},
    }, sort_keys=False))
    git(route, "init", "-q", "-b", "main")
    git(route, "add", "-A")
    git(route, "commit", "-qm", "the job")

    git(route, "checkout", "-q", "-b", "review-me")
    route.env.pop("API_TOKEN", None)  # the author needs no secret to write the file
    wrote = route.ok("plan", "jobs/reviewed.yaml", "--write")
    assert "secrets not written: API_TOKEN" in wrote.stdout
    stack_file = route.stack_file(JOB)
    committed = stack_file.read_text()
    git(route, "add", "-A")
    git(route, "commit", "-qm", "reviewed stack file")
    review = route("review", JOB, "--against", "main")
    assert review.returncode in (0, 3), str(review)  # 3 only if the local stack grants anything
    assert "does not exist at main: everything is new" in review.stdout
    git(route, "checkout", "-q", "main")
    git(route, "merge", "-q", "--ff-only", "review-me")

    route.env["API_TOKEN"] = "tok-123"
    deployed = route.ok("deploy", "jobs/reviewed.yaml", "--yes")
    assert not [ln for ln in deployed.stdout.splitlines()
                if ln.strip().startswith(("+ spotroute:", "~ spotroute:", "- spotroute:"))
                and "secretEnv:" not in ln], deployed.stdout
    after = stack_file.read_text()
    added = [ln for ln in after.splitlines() if ln not in committed.splitlines()]
    removed = [ln for ln in committed.splitlines() if ln not in after.splitlines()]
    assert removed == [], after
    assert [ln.split(":")[0].strip() for ln in added] == [
        "encryptionsalt", "spotroute", "secure"], added  # salt, `spotroute:secretEnv:`, ciphertext
    assert "tok-123" not in after


TASKS = Path(__file__).resolve().parents[1] / "data" / "skypilot_tasks"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_plan_write_lays_out_each_clouds_config_as_pulumi_config_set_all_does(
    tmp_path: Path, pulumi_cli: str, monkeypatch: Any
) -> None:
    """The file `route plan --write` writes, byte for byte the one `route deploy`'s
    `pulumi config set-all` writes for the same config (jobs on aws, gcp, azure; a multi-line
    SkyPilot script), less the encryption salt."""
    from datetime import UTC, datetime

    from router.config.project import Project
    from router.config.stack_files import write_stack_file
    from router.core.strict_json import dumps
    from router.engine.automation import config_value, secret_keys
    from router.flows.proposals import propose

    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    root = tmp_path / "project"
    (root / "stacks").mkdir(parents=True)
    (root / "state").mkdir()
    (root / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\nstackConfigDir: stacks\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PULUMI_HOME": str(tmp_path / "ph"),
           "PULUMI_BACKEND_URL": f"file://{root / 'state'}", "PULUMI_CONFIG_PASSPHRASE": "test",
           "PULUMI_SKIP_UPDATE_CHECK": "true", "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true"}
    jobs = (EXAMPLES / "llm-finetune.yaml", TASKS / "managed_job_checkpoint.yaml",
            TASKS / "azure_blob_storage.yaml", TASKS / "distributed_docker.yaml")
    for job_file in jobs:
        proposal = propose(job_file, project=Project(root), now=datetime(2025, 6, 1, tzinfo=UTC),
                           allow_stale=True)
        name, config = proposal.job.name, proposal.config
        pulumi = [pulumi_cli, "--non-interactive", "--stack", name]
        subprocess.run([pulumi_cli, "stack", "init", name, "--non-interactive"], cwd=root,
                       env=env, check=True, capture_output=True)
        payload = {f"spotroute:{k}": config_value(v, secret=k in secret_keys("spotroute") and
                                                  bool(v)) for k, v in config.items()}
        subprocess.run([*pulumi, "config", "set-all", "--json", dumps(payload, indent=None)],
                       cwd=root, env=env, check=True, capture_output=True)
        by_cli = (root / "stacks" / f"Pulumi.{name}.yaml").read_text().splitlines()
        ours = tmp_path / f"Pulumi.{name}.yaml"
        write_stack_file(ours, config)
        assert [ln for ln in by_cli if not ln.startswith("encryptionsalt:")] == \
            ours.read_text().splitlines(), name
