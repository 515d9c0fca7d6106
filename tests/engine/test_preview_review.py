"""`route preview --review`: what a platform engineer reviews, straight from the real engine."""

from __future__ import annotations

import pytest

from tests.engine.engine_cli import Route, no_traceback

JOB = "reviewed"


@pytest.mark.engine
def test_preview_review_lists_the_stack_by_category_and_creates_nothing(route: Route) -> None:
    job_file = route.write_job(JOB)

    result = route.ok("preview", job_file.name, "--review", "json")
    no_traceback(result)
    review = result.json()
    assert review["stack"] == JOB
    categories = review["categories"]
    assert {"identities", "access", "network exposure", "storage"} <= set(categories)
    storage = categories["storage"]
    assert [c["op"] for c in storage] == ["create"], storage
    assert "LocalDirectory" in storage[0]["type"] + storage[0]["name"], storage
    compute = categories["compute and other"]
    processes = [c for c in compute if c["type"].endswith(":LocalProcess")]
    assert [c["op"] for c in processes] == ["create"], compute
    assert processes[0]["inputs"]["command"][0] == "/bin/sh"
    # Nothing on the local target grants access or opens a port.
    assert categories["identities"] == categories["access"] == categories["network exposure"] == []
    creates = review["counts"].get("create", 0)
    assert creates == sum(len(changes) for changes in categories.values()) > 0
    assert review["config_diff"], "a new job's review shows the stack config it would write"
    assert review["policy_violations"] == []

    # A preview changes nothing: no process, no stack file, no job in the backend.
    assert route.job_leaders() == []
    assert not route.stack_file(JOB).exists()
    assert route.ok("status", "--json").json() == []

    markdown = route.ok("preview", job_file.name, "--review", "markdown").stdout
    assert markdown.startswith(f"## spotroute preview: `{JOB}`\n"), markdown[:200]
    assert "### Storage (1)" in markdown
    assert route.job_leaders() == [] and not route.stack_file(JOB).exists()
