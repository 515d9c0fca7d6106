"""The pull-request loop, end to end in a temporary git repository with the real `route` CLI as a
subprocess (no Pulumi CLI on PATH, no cloud credentials): write the reviewed stack file →
commit → `route review --against main` → exit 3 when a change widens a grant → merge.

The job is an AWS spot job; its stack is rendered under Pulumi's mocks by `route review`
(router/flows/review.py). Deploying it after the merge needs the AWS provider plugin, which this
machine cannot download: tests/engine/test_review_loop_engine.py runs the same loop to a real
deploy on the local target.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.unit.cli_harness import clean_env

JOB = {
    "name": "train",
    "resources": {"accelerators": "A100-80GB:8", "clouds": ["aws"]},
    "market": "spot",
    "duration_hours": 12,
    "checkpoint": {"interval": "30m", "url": "auto"},
    "run": {"image": "ghcr.io/acme/trainer:1.0", "command": ["python", "train.py"]},
}


class Repo:
    """A team's infra repository: Pulumi.yaml, jobs/, stacks/; `route` and git run inside it."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root = root
        scratch = root.parent / "user-home"
        scratch.mkdir()
        self.env = clean_env(home, scratch)
        self.env["PATH"] = "/usr/bin:/bin"  # git, but no pulumi and no provider plugin

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev", *args],
            cwd=self.root, env=self.env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        return done.stdout

    def route(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "router", *args], cwd=self.root, env=self.env,
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip

    def write_job(self, doc: dict[str, object]) -> str:
        (self.root / "jobs").mkdir(exist_ok=True)
        (self.root / "jobs" / "train.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        return "jobs/train.yaml"

    def commit(self, message: str) -> None:
        self.git("add", "-A")
        self.git("commit", "-qm", message)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    r = Repo(tmp_path / "infra", tmp_path / "home")
    r.root.mkdir()
    (r.root / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    r.write_job(JOB)
    r.git("init", "-q", "-b", "main")
    r.commit("train: the job file")
    return r


def test_write_commit_review_exit_3_on_a_widened_grant_then_merge(repo: Repo) -> None:
    repo.git("checkout", "-q", "-b", "add-train-stack")

    # The reviewer's tool first: without a stack file it says how to write one; follow it.
    first = repo.route("review", "train", "--against", "main")
    assert first.returncode == 2, first.stderr
    advice = re.search(r"`(route plan JOB_FILE --write)`", first.stderr)
    assert advice is not None, first.stderr
    command = advice.group(1).replace("JOB_FILE", "jobs/train.yaml").split()[1:]
    wrote = repo.route(*command)
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    assert "wrote stacks/Pulumi.train.yaml for review" in wrote.stdout
    assert repo.git("status", "--porcelain").strip() == "?? stacks/"
    repo.commit("train: reviewed stack file")

    # A new stack: everything it grants is new, so the review fails the check (exit 3).
    new = repo.route("review", "train", "--against", "main")
    assert new.returncode == 3, new.stdout + new.stderr
    assert "does not exist at main: everything is new" in new.stdout
    assert "Allow s3:PutObject on arn:aws:s3:::" in new.stdout
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--ff-only", "add-train-stack")

    # A change that widens nothing (a longer run): written, committed, reviewed clean.
    repo.git("checkout", "-q", "-b", "longer-run")
    repo.write_job({**JOB, "duration_hours": 48})
    assert repo.route("plan", "jobs/train.yaml", "--write").returncode == 0
    if repo.git("status", "--porcelain").strip():
        repo.commit("train: 48 h")
    same = repo.route("review", "train", "--against", "main")
    assert same.returncode == 0, same.stdout + same.stderr

    # A data bucket in the job widens what its identity may read: exit 3, naming the bucket.
    repo.write_job({**JOB, "data": {"url": "s3://acme-corpus/tokens/", "region": "us-east-1",
                                    "size_gb": 500}})
    rewrote = repo.route("plan", "jobs/train.yaml", "--write")
    assert rewrote.returncode == 0, rewrote.stdout + rewrote.stderr
    assert "+ spotroute:dataUrls" in rewrote.stdout or "~ spotroute:dataUrls" in rewrote.stdout
    repo.commit("train: read the corpus bucket")
    widened = repo.route("review", "train", "--against", "main", "--format", "json")
    assert widened.returncode == 3, widened.stdout + widened.stderr
    report = yaml.safe_load(widened.stdout)  # JSON is YAML
    assert any("acme-corpus" in line for line in map(str, report["widened"])), report["widened"]

    # Approved: merged into main, where the branch reviews clean against itself.
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--ff-only", "longer-run")
    after = repo.route("review", "train", "--against", "main")
    assert after.returncode == 0, after.stdout + after.stderr
