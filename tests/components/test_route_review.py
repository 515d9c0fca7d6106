"""`route review`: everything a stack grants and exposes, under Pulumi's mocks, and what widens.

A throwaway git repository holds a copy of components/ and router/ (the code `route review`
renders with) and the reviewed stack files; `main` is committed, the working tree changes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from router.config.project import Project
from router.core.exposure import exposure
from router.flows.proposals import propose
from router.flows.review import render, review_stack

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2025, 6, 1, tzinfo=UTC)
CLOUDS = ("aws", "gcp", "azure")
MARKETS = ("spot", "on-demand")
BOOTSTRAP = {
    "spotroute-bootstrap:clouds": ["aws", "gcp", "azure"],
    "spotroute-bootstrap:home": "oidc:github-main",
    "spotroute-bootstrap:oidcIssuers": [
        {"name": "github-main", "url": "https://token.actions.githubusercontent.com",
         "subject": "repo:acme/infra:ref:refs/heads/main", "audience": ""}
    ],
    "spotroute-bootstrap:awsAccountId": "123456789012",
    "spotroute-bootstrap:gcpProjectId": "acme-ml",
    "spotroute-bootstrap:gcpProjectNumber": "123456789012",
    "spotroute-bootstrap:azureSubscriptionId": "11111111-1111-4111-8111-111111111111",
    "spotroute-bootstrap:azureTenantId": "22222222-2222-4222-8222-222222222222",
    "spotroute-bootstrap:azureLocation": "westeurope",
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def _stack_file(config: dict[str, Any]) -> str:
    return yaml.safe_dump({"config": config}, sort_keys=False)


def _placement_config(tmp: Path, cloud: str, market: str) -> dict[str, Any]:
    job = yaml.safe_load((REPO / "examples" / "llm-finetune.yaml").read_text())
    job["name"] = f"{cloud}-{market}"
    job["market"] = market
    job.pop("max_price_per_hour", None)  # on-demand 8×A100 costs more than the example's cap
    path = tmp / f"{job['name']}.yaml"
    path.write_text(yaml.safe_dump(job))
    infra = tmp / "plan-project"
    infra.mkdir(exist_ok=True)
    (infra / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    # A snapshot quote is stale by design here; the review is about the stack, not the price.
    proposal = propose(path, project=Project(infra), now=NOW, to=cloud, allow_stale=True)
    return {f"spotroute:{k}": v for k, v in proposal.config.items()}


@pytest.fixture(scope="module")
def team_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project repository with a copy of the code and one reviewed stack file per case."""
    tmp = tmp_path_factory.mktemp("review")
    mp = pytest.MonkeyPatch()
    mp.setenv("SPOTROUTE_HOME", str(tmp / "home"))
    repo = tmp / "infra"
    for part in ("components", "router"):
        shutil.copytree(REPO / part, repo / part,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (repo / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    (repo / "stacks").mkdir()
    for cloud in CLOUDS:
        for market in MARKETS:
            config = _placement_config(tmp, cloud, market)
            (repo / "stacks" / f"Pulumi.{cloud}-{market}.yaml").write_text(_stack_file(config))
    (repo / "stacks" / "Pulumi.bootstrap.yaml").write_text(_stack_file(BOOTSTRAP))
    mp.undo()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "add", ".")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "main")
    _git(repo, "checkout", "-q", "-b", "change")
    return repo


@pytest.fixture(scope="module")
def rendered(team_repo: Path) -> dict[str, Any]:
    """Every case rendered in one process (one Python start-up for all of them)."""
    stacks = [f"{c}-{m}" for c in CLOUDS for m in MARKETS] + ["bootstrap"]
    requests = []
    for stack in stacks:
        doc = yaml.safe_load((team_repo / "stacks" / f"Pulumi.{stack}.yaml").read_text())
        requests.append({
            "program": "bootstrap" if stack == "bootstrap" else "placement", "stack": stack,
            "config": {k: v if isinstance(v, str) else json.dumps(v)
                       for k, v in doc["config"].items()},
        })
    answers = render(requests, team_repo)
    for stack, answer in zip(stacks, answers, strict=True):
        assert "error" not in answer, (stack, answer)
    return {stack: exposure(a["resources"]) for stack, a in zip(stacks, answers, strict=True)}


@pytest.mark.parametrize("market", MARKETS)
@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_cloud_and_market_renders_identity_access_network_and_storage(
    rendered: dict[str, Any], cloud: str, market: str
) -> None:
    sections = rendered[f"{cloud}-{market}"].by_section()
    assert sections["network ingress and egress"], "firewall rules are listed"
    assert sections["bucket policies and public access"], "checkpoint storage is listed"
    grants = sections["IAM roles and policies"] | sections["service accounts and role assignments"]
    assert grants, "the job's identity and its grants are listed"
    text = "\n".join(ln.text for res in sections.values() for lines in res.values()
                     for ln in lines)
    expected = {
        "aws": ("Allow s3:PutObject on arn:aws:s3:::", "sts:AssumeRole"),
        "gcp": ("roles/storage", "sourceRanges"),
        "azure": ("roleDefinitionId", "securityRules"),
    }[cloud]
    for fragment in expected:
        assert fragment in text, (fragment, text[:3000])


def test_bootstrap_renders_deployer_roles_and_federated_credentials(
    rendered: dict[str, Any],
) -> None:
    sections = rendered["bootstrap"].by_section()
    federated = "\n".join(ln.text for lines in sections["federated credentials"].values()
                          for ln in lines)
    assert "token.actions.githubusercontent.com" in federated
    assert "repo:acme/infra:ref:refs/heads/main" in json.dumps(
        [ln.text for res in sections.values() for lines in res.values() for ln in lines]
    )
    assert sections["IAM roles and policies"], "the deployer roles with their policies in full"


def test_a_widened_permission_in_a_component_shows_in_the_diff_and_sets_exit_3(
    team_repo: Path,
) -> None:
    aws = team_repo / "components" / "aws_names.py"
    original = aws.read_text()
    needle = '"Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],'
    assert needle in original
    aws.write_text(original.replace(
        needle, '"Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:*"],'))
    try:
        result = review_stack("aws-spot", project=Project(team_repo), against="main")
        widened = [ln.text for ln in result.diff.widened] if result.diff else []
        bucket = "arn:aws:s3:::aws-spot-bucket-mock"
        assert widened == [f"policy: Allow s3:* on {bucket}/aws-spot/*"], widened
        assert not result.diff or not result.diff.narrowed

        proc = subprocess.run(
            [sys.executable, "-m", "router", "review", "aws-spot", "--against", "main"],
            cwd=team_repo, capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": str(team_repo)},
        )
        assert proc.returncode == 3, proc.stderr
        assert "**1 widened, 0 narrowed**" in proc.stdout or " widened, 0 narrowed" in proc.stdout
        assert "+ [IAM roles and policies] RolePolicy" in proc.stdout
    finally:
        aws.write_text(original)


def test_an_unchanged_branch_reviews_clean_with_exit_0(team_repo: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "router", "review", "gcp-spot", "--format", "json"],
        cwd=team_repo, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(team_repo)},
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["widened"] == [] and report["narrowed"] == []
    assert report["against"].startswith("merge base with main")
    assert report["sections"]["network ingress and egress"]
