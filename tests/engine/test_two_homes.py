"""Two engineers, one backend (issue 12 item 4): two SPOTROUTE_HOMEs and two project checkouts
deploy the same job onto one shared file:// backend at the same moment. Exactly one changes the
stack; the other either finds it already deployed or says who is deploying — never "stack already
exists" / "no stack named", and never a second job process.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.engine.engine_cli import Result, Route, no_traceback

JOB = "shared"


@pytest.mark.engine
@pytest.mark.parametrize("trial", [1, 2, 3])
def test_two_homes_on_one_backend_one_wins_the_other_says_who(
    route: Route, tmp_path: Path, trial: int
) -> None:
    backend = tmp_path / "team-backend"
    backend.mkdir()
    passphrase = tmp_path / "team-passphrase"
    passphrase.write_text("shared-by-the-team")
    other_project = tmp_path / "checkout-2"
    shutil.copytree(route.project, other_project)
    other = Route(other_project, tmp_path / "home-2", tmp_path / "pulumi-home-2")
    for r in (route, other):
        (r.project / "spotroute.yaml").write_text(f"backend_url: file://{backend}\n")
        r.env["PULUMI_CONFIG_PASSPHRASE_FILE"] = str(passphrase)
        r.write_job(JOB)
    try:
        started = [r.start("deploy", f"{JOB}.yaml", "--yes", "--json") for r in (route, other)]
        results = []
        for proc in started:
            out, err = proc.communicate(timeout=240)
            results.append(Result(("deploy",), proc.returncode, out, err))
        text = "\n\n".join(map(str, results))
        for r in results:
            no_traceback(r)
            assert "already exists" not in r.stderr and "no stack named" not in r.stderr, text
        winners = [r for r in results if r.returncode == 0]
        assert winners, text
        changed = [r for r in winners if r.json()["changes"]]
        assert len(changed) == 1, text  # exactly one deploy changed the stack
        for loser in (r for r in results if r.returncode != 0):
            assert loser.returncode == 1, text
            assert "is being changed by " in loser.stderr and "(pid " in loser.stderr, text
            assert "route unlock shared" in loser.stderr, text
        assert len(route.job_leaders()) + len(other.job_leaders()) == 1, text
    finally:
        route.ok("destroy", JOB, "--yes")
