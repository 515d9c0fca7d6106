"""Two engineers, one shared backend: S3 (moto's server) and PostgreSQL, both on 127.0.0.1.

Each engineer has their own SPOTROUTE_HOME and their own clone of the project; only the backend
URL and the team passphrase are shared. Real `route` CLI, real Pulumi engine, local target.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.backend_servers import SharedBackend
from tests.engine.conftest import _project_file
from tests.engine.engine_cli import Result, Route, group_pid, no_traceback, wait_for

JOB = "shared"
PASSPHRASE = "correct horse battery staple"  # the team's passphrase in this test


class TeamRoute(Route):
    """`route` for one engineer on a shared backend."""

    def __init__(self, root: Path, backend: SharedBackend) -> None:
        project = root / "project"
        (project / "stacks").mkdir(parents=True)
        (project / "Pulumi.yaml").write_text(_project_file())
        super().__init__(project, root / "home", root / "pulumi-home")
        self.backend = backend
        self.env.update(
            {
                **backend.env,
                "PULUMI_BACKEND_URL": backend.url,
                "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            }
        )

    def pulumi(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["pulumi", *args, "--non-interactive"],
            cwd=self.project,
            env={**self.env, "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true"},
            capture_output=True,
            text=True,
            timeout=240,
            check=True,
        )

    def stacks_in_backend(self) -> list[str]:
        result = self("status", "--json")
        return [s["job"] for s in result.json()] if result.returncode == 0 else []


@pytest.fixture
def team(
    tmp_path: Path, pulumi_cli: str, shared_backend: SharedBackend
) -> tuple[TeamRoute, TeamRoute]:
    alice = TeamRoute(tmp_path / "alice", shared_backend)
    bob = TeamRoute(tmp_path / "bob", shared_backend)
    yield alice, bob
    alice.cleanup()
    bob.cleanup()


@pytest.mark.engine
def test_two_homes_on_one_shared_backend_see_one_job_deploy_once_and_destroy_it(
    team: tuple[TeamRoute, TeamRoute],
) -> None:
    alice, bob = team
    for r in team:
        r.write_job(JOB)

    # Both deploy the same job at the same moment: exactly one placement results.
    started = [r.start("deploy", f"{JOB}.yaml", "--yes", "--json") for r in team]
    results = []
    for proc in started:
        out, err = proc.communicate(timeout=240)
        results.append(Result(("deploy",), proc.returncode, out, err))
    assert sorted(r.returncode for r in results) == [0, 1], "\n\n".join(map(str, results))
    winner = next(r for r in results if r.returncode == 0)
    loser = next(r for r in results if r.returncode == 1)
    no_traceback(loser)
    assert any("is being changed by " in ln and "(pid " in ln for ln in loser.error_lines()), loser
    pid = group_pid(winner.json()["outputs"])
    deployer = team[results.index(winner)]
    assert deployer.job_leaders() == [pid]

    # The other engineer lists it with the same numbers (placement records are shared).
    seen = [r.ok("status", "--json").json() for r in team]
    assert seen[0] == seen[1], seen
    [status] = seen[0]
    assert (status["job"], status["state"], status["cloud"]) == (JOB, "running", "local")
    assert status["up_since"] and status["resources"] > 0

    # A second deploy now is an unchanged redeploy from either side (same stack, no new process).
    again = bob.ok("deploy", f"{JOB}.yaml", "--yes", "--json").json()
    assert group_pid(again["outputs"]) == pid, again

    # Destroyed by one, gone for both.
    destroyed = alice.ok("destroy", JOB, "--yes")
    assert "destroyed shared" in destroyed.stdout
    wait_for(lambda: not deployer.job_leaders(), 15, "the job process to stop")
    for r in team:
        assert r.ok("status", "--json").json() == []
    # ... and its spend stays on the backend for both (route report reads the shared records).
    spends = [r.ok("report", "--json").json() for r in team]
    assert [j["job"] for j in spends[0]["by_job"]] == [JOB], spends[0]
    assert spends[0]["by_job"] == spends[1]["by_job"], spends
