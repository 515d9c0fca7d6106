"""bench/restore_time_optimum.py: the hindsight optimum with restores that take time.

With a restore of 0 s it is the optimum (router.core.hindsight) wherever the steps are whole;
with a restore a restart costs time, so a tight deadline can rule a cheap schedule out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.restore_time_optimum import restore_time_cost
from router.config.datafiles import load_egress
from router.core.backtest_model import JobContext, Pool, Trace, Workload, WorkloadJob, job_rules
from router.core.hindsight import optimum_cost, price_matrix

START = datetime(2026, 11, 1, tzinfo=UTC)
EGRESS = load_egress()


def pool(market: str, zone: str | None = None) -> Pool:
    return Pool("aws", "us-east-1", zone, "p3.2xlarge", market, "V100", 1, 16, 8, 61.0, None)


def context(t: Trace, duration_h: float, deadline_h: float, restore_s: float) -> JobContext:
    job = WorkloadJob(
        name="j", arrival=START, duration_h=duration_h, gpu="V100", gpu_count=1,
        checkpoint_interval_s=1800.0, restore_overhead_s=restore_s,
        deadline=START + timedelta(hours=deadline_h),
    )  # fmt: skip
    rules = job_rules(job, Workload("w", (job,)), EGRESS, t.step_s)
    return JobContext(job, t, [(i, 0.0) for i in range(len(t.pools))], rules, 0)


def test_a_restart_spends_its_restore_on_the_clock() -> None:
    # Spot $1/h up at hours 0, 2, 3; on-demand $3/h; a 3 h job due at hour 4, restore 1 h. The
    # optimum runs spot at 0, 2 and 3: it idles through the outage on its pool and resumes
    # there without a restore ($3). A policy's job is preempted at hour 1 and restarts: with the
    # restore on the clock a restart on spot at 2 leaves one hour of work before the deadline,
    # so the cheapest is on-demand at 0 and 1, the restart's hour on spot at 2, spot at 3: $8.
    t = Trace(
        START, 3600.0, (pool("spot", "us-east-1a"), pool("on-demand")),
        ((1.0,) * 5, (3.0,) * 5), ((True, False, True, True, True), (True,) * 5),
    )  # fmt: skip
    ctx = context(t, 3.0, 4.0, 3600.0)
    assert optimum_cost(ctx).cost == pytest.approx(3.0)
    assert restore_time_cost(ctx, price_matrix(t)) == pytest.approx(8.0)
    # An hour later the deadline leaves room to wait for spot: the first start (no restore) at 2.
    assert restore_time_cost(context(t, 3.0, 5.0, 3600.0), price_matrix(t)) == pytest.approx(3.0)


def test_the_part_of_a_restore_shorter_than_a_step_is_money() -> None:
    # Spot $1/h down at hour 2 only, a 4 h job due at hour 6: spot at 0-1, the restart at 3,
    # spot at 4-5. A 1 h restore is that hour ($5); 1.5 h is the hour on the clock and half an
    # hour of spot's price as money ($5.50).
    t = Trace(
        START, 3600.0, (pool("spot", "us-east-1a"), pool("on-demand")),
        ((1.0,) * 6, (3.0,) * 6), ((True, True, False, True, True, True), (True,) * 6),
    )  # fmt: skip
    assert restore_time_cost(context(t, 4.0, 6.0, 3600.0), price_matrix(t)) == pytest.approx(5.0)
    assert restore_time_cost(context(t, 4.0, 6.0, 5400.0), price_matrix(t)) == pytest.approx(5.5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    spot=st.lists(st.lists(st.booleans(), min_size=8, max_size=8), min_size=1, max_size=3),
    prices=st.lists(st.sampled_from([0.5, 1.0, 1.5]), min_size=3, max_size=3),
    work=st.integers(1, 5),
    slack=st.integers(0, 3),
)
def test_with_no_restore_it_is_the_optimum(
    spot: list[list[bool]], prices: list[float], work: int, slack: int
) -> None:
    # Whole steps (the arrival and the deadline on step edges, whole hours of work), one region
    # (no egress), restore 0: both are the cheapest schedule knowing the future.
    pools = (*(pool("spot", f"us-east-1{'abc'[i]}") for i in range(len(spot))), pool("on-demand"))
    t = Trace(
        START, 3600.0, pools,
        (*((prices[i],) * 8 for i in range(len(spot))), (2.0,) * 8),
        (*(tuple(s) for s in spot), (True,) * 8),
    )  # fmt: skip
    ctx = context(t, float(work), float(work + slack), 0.0)
    assert restore_time_cost(ctx, price_matrix(t)) == pytest.approx(optimum_cost(ctx).cost)
