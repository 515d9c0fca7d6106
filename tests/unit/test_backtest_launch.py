"""A launch that takes time (Workload.launch_s, what `route rehearse` measures of the engine):
a re-placement's nodes run launch_s after the decision, nothing is decided meanwhile, and a zone
gone by then refuses the launch — as route watch's launch rolls back (docs/backtest.md). The
event replay gives the step replay's runs with launches too (tests/unit/test_backtest_events.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from router.config.datafiles import (
    load_egress,
    load_gpus,
    load_interruption_model,
    load_storage_prices,
)
from router.core.backtest import feasible_pools, planner_ranking, simulate_job, trace_evidence
from router.core.backtest_model import (
    JobContext,
    JobRun,
    Pool,
    Trace,
    Workload,
    WorkloadJob,
    job_rules,
)
from router.core.backtest_policies import policy_set
from router.core.org import OrgConfig

START = datetime(2026, 11, 1, tzinfo=UTC)
EGRESS = load_egress()


def pool(market: str, zone: str | None = None) -> Pool:
    return Pool("aws", "us-east-1", zone, "p4de.24xlarge", market, "A100-80GB", 8, 80, 96,
                1152.0, ">20%" if market == "spot" else None)  # fmt: skip

STEP_S = 600.0
STEPS = 60


def _up(*spans: tuple[int, int]) -> tuple[bool, ...]:
    return tuple(any(a <= s < b for a, b in spans) for s in range(STEPS))


# On-demand always; zone a up for the first 10 steps; zone b up for two steps (12, 13) — shorter
# than a 30-minute launch — and again from step 30.
TRACE = Trace(
    START, STEP_S, (pool("on-demand"), pool("spot", "us-east-1a"), pool("spot", "us-east-1b")),
    ((40.97,) * STEPS, (12.0,) * STEPS, (12.0,) * STEPS),
    ((True,) * STEPS, _up((0, 10)), _up((12, 14), (30, STEPS))),
)  # fmt: skip
JOB = WorkloadJob(
    "j", START, 4.0, "A100-80GB", 8, checkpoint_interval_s=600.0, restore_overhead_s=0.0,
    spot_wait_s=24 * 3600.0,  # no deadline: it may wait a day for spot
)  # fmt: skip


def _run(launch_s: float) -> JobRun:
    load_gpus()
    workload = Workload("launch", (JOB,), launch_s=launch_s, zone_block_s=0.0)
    rank = planner_ranking(OrgConfig(), EGRESS, load_interruption_model(), load_storage_prices())
    pools = feasible_pools(JOB, TRACE, 0, rank)
    rules = job_rules(JOB, workload, EGRESS, STEP_S)
    [policy] = [p for p in policy_set("aws", "all") if p.name == "deadline-aware"]
    ctx = JobContext(JOB, TRACE, pools, rules, 0, trace_evidence(TRACE), {}, None, launch_s / 3600)
    return simulate_job(ctx, policy)


def stretch_starts(run: JobRun) -> list[tuple[int, int]]:
    """(first step, pool) of each stretch it ran."""
    out: list[tuple[int, int]] = []
    end = -1
    for first, to, where, _usd in run.segments:
        if not out or out[-1][1] != where or first != end:
            out.append((first, where))
        end = to
    return out


def test_at_once_the_re_placement_takes_the_two_steps_zone_b_is_up() -> None:
    run = _run(0.0)
    assert stretch_starts(run)[:2] == [(0, 1), (12, 2)]
    assert run.launches_refused == 0


def test_a_launch_slower_than_zone_bs_two_steps_is_refused_and_the_job_waits() -> None:
    run = _run(1800.0)  # three steps
    starts = stretch_starts(run)
    assert starts[0] == (0, 1)
    assert run.launches_refused == 1, "b went at step 14, before the launch decided at 12 ended"
    # the next re-placement onto b, decided when b is back (step 30), runs three steps later
    assert starts[1] == (33, 2)
    assert run.finished_at is not None
    assert run.finished_at > _run(0.0).finished_at + timedelta(hours=0.5)  # type: ignore[operator]


@pytest.mark.parametrize("launch_s", [0.0, 1800.0])
def test_nothing_is_paid_for_the_launch_of_a_re_placement(launch_s: float) -> None:
    run = _run(launch_s)
    spot_hours = sum((b - a) for a, b, where, _ in run.segments if where) * STEP_S / 3600
    assert run.cost == pytest.approx(sum(usd for *_x, usd in run.segments) + sum(
        usd for _s, usd in run.extras))  # fmt: skip
    assert spot_hours >= JOB.duration_h - 1e-9  # every hour paid was worked (no restore)
