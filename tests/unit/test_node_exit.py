"""A node's exit record read as a crash or a preemption (router/core/node_exit.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from router.contract.stack_config import EXIT_GROUP_NOT_FORMED
from router.core.node_exit import all_exited, crash_of, exits_of, parse_exit, unformed_of

DEPLOYED = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def rec(status: int, marker: bool = False, *, node: str = "ip-10-42-0-5",
        placement: str = "llm", at: datetime = DEPLOYED + timedelta(hours=1)) -> dict[str, object]:
    """An exit record as the start-up script writes it (components/node_exit.py)."""
    return {"format": "spotroute-exit/1", "node": node, "status": status,
            "interruption_marker": marker, "job": "llm", "placement": placement,
            "time": at.strftime("%Y-%m-%dT%H:%M:%SZ")}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "marker", "outcome"),
    [
        (0, False, "exited"),
        (75, False, "preempted"),  # EX_TEMPFAIL: saved on a notice, resume me
        (1, True, "preempted"),  # torchrun's 1 for a worker's 75: the marker tells
        (137, False, "killed"),  # SIGKILL: the machine went away, or the OOM killer
        (143, False, "killed"),  # SIGTERM from a shutdown the job did not see as a notice
        (1, False, "crashed"),
        (139, False, "crashed"),  # SIGSEGV
        (69, False, "unformed"),  # the start-up script: the group did not form
    ],
)
def test_an_exit_reads_as_its_outcome(status: int, marker: bool, outcome: str) -> None:
    found = parse_exit(rec(status, marker))
    assert found is not None and found.outcome == outcome


def test_only_this_placements_exits_since_its_deploy_count() -> None:
    records = [
        rec(1, at=DEPLOYED - timedelta(minutes=1)),  # the previous deployment of the stack
        rec(1, placement="llm.2"),  # another placement of the job
        {"format": "something-else", "status": 1},
        {"format": "spotroute-exit/1", "status": "x", "time": "later"},  # damaged
        rec(1, node="ip-10-42-0-6"),
    ]
    assert [e.node for e in exits_of(records, "llm", DEPLOYED)] == ["ip-10-42-0-6"]


def test_a_crash_unless_the_cloud_says_it_took_the_node_back() -> None:
    exits = exits_of([rec(1, node="a"), rec(75, node="b")], "llm", DEPLOYED)
    assert crash_of(exits, reclaimed_by_cloud=False) == (
        "node a exited with status 1 (no interruption marker)")
    assert crash_of(exits, reclaimed_by_cloud=True) is None
    saved = exits_of([rec(1, True), rec(143, node="b")], "llm", DEPLOYED)
    assert crash_of(saved, reclaimed_by_cloud=False) is None


def test_every_node_exiting_zero_is_the_job_ending_by_itself() -> None:
    assert all_exited(exits_of([rec(0), rec(0, node="b")], "llm", DEPLOYED))
    assert not all_exited(exits_of([rec(0), rec(75, node="b")], "llm", DEPLOYED))
    assert not all_exited([])


def test_a_group_that_did_not_form_is_no_crash_but_says_so() -> None:
    exits = exits_of([rec(EXIT_GROUP_NOT_FORMED, node="a"), rec(EXIT_GROUP_NOT_FORMED, node="b")],
                     "llm", DEPLOYED)
    assert crash_of(exits, reclaimed_by_cloud=False) is None
    assert unformed_of(exits) == "node a: its group did not form (status 69) (+1 more node(s))"
    assert unformed_of(exits_of([rec(75)], "llm", DEPLOYED)) is None
    # A node that crashed by itself is a crash, whatever its peers said.
    mixed = exits_of([rec(1, node="a"), rec(EXIT_GROUP_NOT_FORMED, node="b")], "llm", DEPLOYED)
    assert crash_of(mixed, reclaimed_by_cloud=False) is not None


def boot(node: str = "ip-10-42-0-5", *, at: datetime, placement: str = "llm") -> dict[str, object]:
    """A boot record as the start-up script writes it at every boot (components/node_exit.py)."""
    return {"format": "spotroute-boot/1", "node": node, "job": "llm", "placement": placement,
            "time": at.strftime("%Y-%m-%dT%H:%M:%SZ")}  # fmt: skip


def test_a_node_that_booted_again_after_its_exit_runs_the_job_again() -> None:
    # GCE host maintenance of an on-demand GPU VM: the job saved on TERMINATE_ON_HOST_MAINTENANCE
    # and exited (marker), the VM stopped; with automaticRestart it boots again and its start-up
    # script — run at every boot — resumes the job (cloud.google.com/compute/docs/instances/
    # setting-vm-host-options; cloud.google.com/compute/docs/instances/startup-scripts/linux).
    went = DEPLOYED + timedelta(hours=1)
    exits = [rec(1, True, at=went)]
    assert exits_of(exits, "llm", DEPLOYED) != []
    back = [boot(at=DEPLOYED), boot(at=went + timedelta(minutes=4))]
    assert exits_of(exits, "llm", DEPLOYED, boots=back) == []
    # A boot of another node, of another placement, or before the exit supersedes nothing.
    for other in (boot("ip-10-42-0-6", at=went + timedelta(minutes=4)),
                  boot(at=went + timedelta(minutes=4), placement="llm.2"),
                  boot(at=went)):  # fmt: skip
        assert len(exits_of(exits, "llm", DEPLOYED, boots=[other])) == 1, other


def test_a_local_nodes_exit_counts_for_its_own_group_whenever_it_was_written() -> None:
    # A job failing at once on the local target exits before `pulumi up` returns and the
    # placement's deployed_at is recorded: its group, not the clock, says whose exit it is.
    early = {**rec(1, node="node-0", at=DEPLOYED - timedelta(seconds=2)), "group": "local-group:g1"}
    older = {**rec(1, node="node-0", at=DEPLOYED + timedelta(minutes=1)), "group": "local-group:g0"}
    found = exits_of([early, older], "llm", DEPLOYED, group="local-group:g1")
    assert [(e.node, e.group) for e in found] == [("node-0", "local-group:g1")]
