"""route watch on a shared backend (S3 on moto's server, PostgreSQL): two watchers at once move a
job exactly once — the lease is a compare-and-set in the backend — and another engineer's home
reads the decision and the journal from the backend. Real `route` CLI and Pulumi engine, local
target."""

from __future__ import annotations

import pytest

from tests.engine.engine_cli import wait_for
from tests.engine.market import two_watchers_at_once, write_market, write_trainer_job
from tests.engine.test_shared_backends import TeamRoute, team  # noqa: F401  (fixture)

JOB = "teamwatch"


@pytest.mark.engine
def test_two_watchers_on_a_shared_backend_move_a_job_once_and_the_team_sees_why(
    team: tuple[TeamRoute, TeamRoute],  # noqa: F811  (the fixture imported above)
) -> None:
    alice, bob = team
    market = [("local-a", "spot", 1.0, 2), ("local-b", "spot", 1.5, 2)]
    write_market(alice, market)
    job = write_trainer_job(alice, JOB, cooldown="0s")
    alice.ok("deploy", job.name, "--yes")
    wait_for(lambda: any(alice.home.glob(f"checkpoints/{JOB}/**/resumed.json")), 30,
             "the trainer to start")  # fmt: skip

    market[1] = ("local-b", "spot", 0.3, 2)
    write_market(alice, market)
    two_watchers_at_once(alice)

    # Bob's home has nothing of this job: what he sees comes from the backend.
    history = bob.ok("status", JOB, "--history", "--json").json()
    acted = [d for d in history["decisions"] if d.get("acted")]
    assert len(acted) == 1 and acted[0]["action"] == "move", history["decisions"]
    assert "$" in acted[0]["reason"]
    assert [j["outcome"] for j in history["journals"]] == ["done"]
    assert "checkpoint-copied" in history["journals"][0]["steps"]
    [status] = bob.ok("status", "--json").json()
    assert (status["job"], status["region"]) == (JOB, "local-b"), status
