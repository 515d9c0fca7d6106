"""migration.spot_wait: a job without a deadline waits out spot outages for a bounded time
(decide_deadline.soft_deadline), in decide(), in the backtest and in job.yaml / workloads."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from router.core.backtest_model import WorkloadJob
from router.core.decide import decide, wake_after_h
from router.core.decision_model import REPLACE, SWITCH_MARKET, WAIT, Current, History
from tests.unit.test_backtest import AWS_OD, AWS_SPOT, job, run, trace
from tests.unit.test_decide import NOW, RULES, H, od, prog, running, spot

WAITS = replace(RULES, spot_wait_s=12 * 3600.0)


def test_a_job_without_a_deadline_waits_for_spot_within_its_bound() -> None:
    lost = Current(spot(5), NOW - H, True)
    # Submitted 2 h ago, 3 h of 10 done: 12 h of wait leave 15 h of slack — it waits.
    d = decide(WAITS, prog(done=3.0), lost, [lost.placement, od(20)], History(), NOW)
    assert d.action == WAIT and d.target is None
    # Without a wait (0) it buys on-demand at once, as before.
    d = decide(RULES, prog(done=3.0), lost, [lost.placement, od(20)], History(), NOW)
    assert d.action == REPLACE and d.target == od(20)
    # The never-idle rules (the backtest's migrate) do not wait either.
    never = replace(WAITS, wait_for_spot=False)
    d = decide(never, prog(done=3.0), lost, [lost.placement, od(20)], History(), NOW)
    assert d.action == REPLACE and d.target == od(20)


def test_after_the_wait_the_job_runs_on_demand_and_goes_back_to_spot_when_it_pays() -> None:
    lost = Current(spot(5), NOW - H, True)
    late = prog(done=3.0, started_at=NOW - 20 * H)  # 20 h since submission: the wait is spent
    d = decide(WAITS, late, lost, [lost.placement, od(20)], History(), NOW)
    assert d.action == REPLACE and d.target == od(20) and not d.commit_on_demand
    # Never on-demand for good: spot back and cheaper → the money rules switch to it.
    d = decide(WAITS, late, running(od(20), NOW - 3 * H), [od(20), spot(5)], History(), NOW)
    assert d.action == SWITCH_MARKET and d.target == spot(5)


def test_a_waiting_job_is_asked_again_when_its_wait_runs_out() -> None:
    lost = Current(spot(5), NOW - H, True)
    p = prog(done=3.0)
    wake = wake_after_h(WAITS, p, lost, NOW)
    assert wake is not None and 0 < wake < 15
    assert wake_after_h(RULES, p, lost, NOW) is None
    at = NOW + timedelta(hours=wake)
    # The line may ask earlier; waiting on, the job is on on-demand once the wait is spent.
    while decide(WAITS, p, lost, [od(20)], History(), at).action == WAIT:
        nxt = wake_after_h(WAITS, p, lost, at)
        assert nxt is not None, "a waiting job must be asked again"
        at += timedelta(hours=nxt + 1e-6)
        assert at < NOW + 16 * H
    d = decide(WAITS, p, lost, [od(20)], History(), at)
    assert d.action == REPLACE and d.target == od(20)


def _spot_down_then_up(down_h: int, steps: int = 30) -> dict:  # type: ignore[type-arg]
    spot_up = [True] * 1 + [False] * down_h + [True] * (steps - 1 - down_h)
    return {AWS_OD: ([40.0] * steps, [True] * steps), AWS_SPOT: ([10.0] * steps, spot_up)}


def test_backtest_deadline_aware_waits_out_a_short_outage_and_pays_less() -> None:
    """Spot lost after 1 h for 3 h: deadline-aware (route watch's rules) waits, migrate (never
    idle) buys 3 h of on-demand; both finish; without the wait both pay the same."""
    t = trace(_spot_down_then_up(3))
    r = run(t, job(duration_h=4.0, spot_wait_s=6 * 3600.0))
    aware, migrate = r.policy("deadline-aware"), r.policy("migrate")
    assert aware.unfinished == 0 and migrate.unfinished == 0
    assert aware.total_cost == pytest.approx(4 * 10.0)
    assert migrate.total_cost > aware.total_cost + 3 * 25.0
    r0 = run(t, job(duration_h=4.0, spot_wait_s=0.0))
    assert r0.policy("deadline-aware").total_cost == pytest.approx(migrate.total_cost)


def test_backtest_a_job_whose_spot_never_returns_finishes_on_demand_after_the_wait() -> None:
    steps = 30
    t = trace(
        {AWS_OD: ([40.0] * steps, [True] * steps),
         AWS_SPOT: ([10.0] * steps, [True] + [False] * (steps - 1))}
    )  # fmt: skip
    r = run(t, job(duration_h=4.0, spot_wait_s=6 * 3600.0))
    aware = r.policy("deadline-aware")
    assert aware.unfinished == 0
    # 1 h on spot, then up to 6 h waiting, then 3 h on on-demand: done within 1 + 6 + 3 h + a step.
    assert aware.total_cost == pytest.approx(10.0 + 3 * 40.0)


def test_workload_job_default_wait_is_the_job_files() -> None:
    from router.core.job.migration import SPOT_WAIT_DEFAULT_S, Migration

    assert WorkloadJob("j", NOW, 1.0, "A100-80GB", 8).spot_wait_s == SPOT_WAIT_DEFAULT_S
    assert Migration().spot_wait_s == SPOT_WAIT_DEFAULT_S
    assert Migration.model_validate({"spot_wait": "6h"}).spot_wait_s == 6 * 3600.0


@pytest.mark.parametrize(
    ("value", "says"),
    [("-1h", "migration.spot_wait"), ("nan", "migration.spot_wait"), ("9000d", "spot_wait")],
)
def test_bad_spot_wait_in_job_yaml_is_one_line_naming_the_field(
    tmp_path: Path, value: str, says: str
) -> None:
    from tests.unit.test_jobspec import only_problem

    line = only_problem(tmp_path, f"migration: {{spot_wait: {value}}}\n")
    assert says in line and "\n" not in line


def test_bad_spot_wait_in_a_workload_is_one_line_naming_the_field() -> None:
    from router.config.workload import _spot_wait, _Where
    from router.core.errors import BadInput

    w = _Where(Path("w.yaml"))
    assert _spot_wait(w, "jobs.generate.spot_wait", "6h") == 6 * 3600.0
    assert _spot_wait(w, "jobs.generate.spot_wait", "0") == 0.0
    for bad in ("-2h", "400d", "soon"):
        with pytest.raises(BadInput) as err:
            _spot_wait(w, "jobs.generate.spot_wait", bad)
        assert "jobs.generate.spot_wait" in str(err.value) and "\n" not in str(err.value)


def test_the_reason_of_a_wait_names_spot_wait_not_a_deadline() -> None:
    lost = Current(spot(5), NOW - H, True)
    d = decide(WAITS, prog(done=3.0), lost, [od(20)], History(), NOW)
    assert d.action == WAIT
    assert d.reason.startswith("no deadline, waiting for spot until 2026-12-02 ")
    assert "migration.spot_wait" in d.reason and "deadline: " not in d.reason
