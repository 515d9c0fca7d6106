"""Who places a job at its arrival (Workload.first_placement, docs/backtest.md): the policy —
which may wait for spot — or `route deploy`, which takes the cheapest placement offered then
and leaves the rest to route watch's policy. `route rehearse` predicts with "deploy", since its
jobs are submitted by `route deploy`. Only spotroute's own policies are deployed that way: the
baselines and the peers place as they always do.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from router.config.datafiles import (
    load_gpus,
    load_interruption_model,
    load_storage_prices,
)
from router.config.workload import load_workload
from router.core.backtest import (
    feasible_pools,
    planner_ranking,
    run_backtest,
    simulate_job,
    trace_evidence,
)
from router.core.backtest_model import (
    DEPLOY,
    POLICY,
    JobContext,
    JobRun,
    Trace,
    Workload,
    WorkloadJob,
    job_rules,
)
from router.core.backtest_policies import policy_set
from router.core.errors import BadInput
from router.core.org import OrgConfig
from tests.unit.test_backtest_launch import EGRESS, START, pool, stretch_starts

STEP_S = 3600.0
STEPS = 48


def _up(*spans: tuple[int, int]) -> tuple[bool, ...]:
    return tuple(any(a <= s < b for a, b in spans) for s in range(STEPS))


# On-demand from step 2 (nothing at all is offered before); spot only from step 6.
TRACE = Trace(
    START, STEP_S, (pool("on-demand"), pool("spot", "us-east-1a")),
    ((40.97,) * STEPS, (12.0,) * STEPS),
    (_up((2, STEPS)), _up((6, STEPS))),
)  # fmt: skip
JOB = WorkloadJob(
    "j", START, 10.0, "A100-80GB", 8, checkpoint_interval_s=1800.0, restore_overhead_s=0.0,
    cooldown_s=0.0, spot_wait_s=24 * 3600.0,  # no deadline: it may wait a day for spot
)  # fmt: skip


def _run(first_placement: str, policy_name: str = "deadline-aware") -> JobRun:
    load_gpus()
    workload = Workload("first", (JOB,), first_placement=first_placement)
    rank = planner_ranking(OrgConfig(), EGRESS, load_interruption_model(), load_storage_prices())
    pools = feasible_pools(JOB, TRACE, 0, rank)
    rules = job_rules(JOB, workload, EGRESS, STEP_S)
    [policy] = [p for p in policy_set("aws", "all") if p.name == policy_name]
    ctx = JobContext(JOB, TRACE, pools, rules, 0, trace_evidence(TRACE), {}, None, 0.0,
                     first_placement == DEPLOY)  # fmt: skip
    return simulate_job(ctx, policy)


def test_the_policy_waits_for_spot_at_the_arrival() -> None:
    run = _run(POLICY)
    assert stretch_starts(run) == [(6, 1)]  # nothing paid before spot is up
    assert run.migrations == 0


def test_route_deploy_places_on_what_is_offered_then_watch_moves_it_to_spot() -> None:
    run = _run(DEPLOY)
    # Refused while nothing is offered (steps 0, 1: submitted again each step), then on-demand
    # at step 2, then the policy moves it to spot once spot is up.
    assert stretch_starts(run) == [(2, 0), (6, 1)]
    assert run.migrations == 1
    assert run.cost > _run(POLICY).cost


@pytest.mark.parametrize("name", ["on-demand", "spot-fallback", "spot-once", "skypilot-eager"])
def test_baselines_and_peers_place_as_they_always_do(name: str) -> None:
    assert stretch_starts(_run(DEPLOY, name)) == stretch_starts(_run(POLICY, name))


def test_run_backtest_deploys_spotroutes_policies_only() -> None:
    load_gpus()
    model = load_interruption_model()
    by = {}
    for first in (POLICY, DEPLOY):
        workload = Workload("first", (JOB,), first_placement=first)
        by[first] = run_backtest(workload, TRACE, egress=EGRESS, interruption=model)
    costs = {first: {p.name: p.total_cost for p in r.policies} for first, r in by.items()}
    assert costs[DEPLOY]["deadline-aware"] > costs[POLICY]["deadline-aware"]  # it would wait
    # Never idle, `migrate` takes on-demand at step 2 as route deploy does: the same run.
    assert costs[DEPLOY]["migrate"] == costs[POLICY]["migrate"]
    assert costs[DEPLOY]["on-demand"] == costs[POLICY]["on-demand"]


def _workload_file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(
        "name: w\nstart: 2026-11-01T00:00:00Z\ndays: 1\n" + extra
        + "jobs:\n  list:\n    - {name: a, arrival: 1h, duration: 2h, gpus: A100-80GB:8}\n"
    )  # fmt: skip
    return path


def test_the_workload_file_names_who_places_first(tmp_path: Path) -> None:
    assert load_workload(_workload_file(tmp_path, "")).workload.first_placement == POLICY
    loaded = load_workload(_workload_file(tmp_path, "first_placement: deploy\n"))
    assert loaded.workload.first_placement == DEPLOY
    with pytest.raises(BadInput, match=r"first_placement: 'watch' is not policy or deploy"):
        load_workload(_workload_file(tmp_path, "first_placement: watch\n"))
