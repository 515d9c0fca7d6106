"""The policy pack gates every deploy: a violating stack is refused in preview, before anything
exists. The violation reachable on the local target: the job declares it will pay more per hour
(`max_price_per_hour`, written as spotroute:maxPrice) than the org's budget allows. The planner
accepts it — the local price is $0/h — but the price-within-budget policy checks the declared cap.
"""

from __future__ import annotations

import pytest

from tests.engine.engine_cli import Route, no_traceback, only_line

JOB = "overbudget"


@pytest.mark.engine
def test_job_capped_above_the_org_budget_is_refused_by_policy_before_anything_is_created(
    route: Route,
) -> None:
    (route.project / "spotroute.yaml").write_text("budgets:\n  max_price_per_hour: 1.0\n")
    job_file = route.write_job(JOB, max_price_per_hour=5.0)

    refused = route("deploy", job_file.name, "--yes", "--json")

    assert refused.returncode == 1, refused
    no_traceback(refused)
    error = only_line(refused.stderr)
    assert error.startswith("error: job overbudget: "), error
    assert "policy" in error and "price-within-budget" in error, error
    assert "$5" in error and "$1" in error, error
    assert refused.stdout == "", "a refused --json deploy must print no JSON"
    # Nothing was created or left behind.
    assert route.job_leaders() == []
    assert not route.stack_file(JOB).exists()
    assert route.stacks_in_backend() == []
    assert not route.checkpoint_dir(JOB).exists()
    assert route.ok("status", "--json").json() == []
