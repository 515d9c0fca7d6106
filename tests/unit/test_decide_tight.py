"""decide() under tight deadlines and without any (issue 30): the slack kept for the preemptions
of the work left, a blocked zone as the last spot choice, and migration.spot_wait `forever`."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from router.core.decide import decide, wake_after_h
from router.core.decide_deadline import hedge_reserve_h, return_reserve_h, spot_overhead_h
from router.core.decision_model import (
    MOVE,
    REPLACE,
    STAY,
    SWITCH_MARKET,
    WAIT,
    Current,
    History,
    zone_key,
)
from router.core.interruption import work_multiplier
from tests.unit.test_decide import NOW, RULES, H, od, prog, running, spot

# Deadline 20 h from now for a 10 h job submitted 2 h ago with 0.5 h checkpointed: the line
# wants 0.91 h (10 × 2 / 22), so the job is 0.41 h behind it; its band is a quarter of its 12 h
# slack at submission, 3 h. 9.5 h of work left and a 10-min restore: slack 10.33 h.
TIGHT = replace(RULES, deadline=NOW + 20 * H, decision_period_s=60)
BEHIND = prog(done=0.5, total=10.0, started_at=NOW - 2 * H)


def lost_from(rate: float) -> Current:
    """Interrupted an hour ago on a spot zone preempted `rate` times an hour."""
    return Current(spot(5, interruptions_per_hour=rate), NOW - H, True)


def test_the_slack_kept_for_preemptions_is_the_work_left_times_the_paid_overhead() -> None:
    m = work_multiplier(1.0, 600 / 3600, 1800 / 3600)  # 1/h, 10-min restore, 30-min interval
    assert spot_overhead_h(TIGHT, lost_from(1.0), 9.5) == pytest.approx(9.5 * (m - 1))
    assert spot_overhead_h(TIGHT, lost_from(0.0), 9.5) == 0.0  # never preempted: nothing
    assert spot_overhead_h(TIGHT, Current(od(20), NOW - H, True), 9.5) == 0.0
    assert spot_overhead_h(TIGHT, None, 9.5) == 0.0  # not placed yet: nothing seen
    # Only a job with its own deadline keeps it; a wait under spot_wait is for outages.
    own = hedge_reserve_h(TIGHT, lost_from(1.0), 9.5, own_deadline=True)
    assert own == pytest.approx(return_reserve_h(TIGHT) + 9.5 * (m - 1))
    soft = hedge_reserve_h(TIGHT, lost_from(1.0), 9.5, own_deadline=False)
    assert soft == pytest.approx(return_reserve_h(TIGHT))


def test_with_no_spot_a_deadline_job_hedges_before_waiting_spends_its_preemption_slack() -> None:
    """Issue 30: waiting out an outage spent the slack a job later needed to stay on spot
    through its preemptions; it then ran to its deadline on on-demand with spot up."""
    cands = [od(20)]
    # Lost from a zone preempted once an hour: 9.5 h of work there spend ~5.1 h of slack on
    # restores and lost work; with the reserve (1.02 h) that is 6.08 h. 4.3 h from now the
    # slack (10.33 h) one period on is down to it — the band (3 h behind) is 5.7 h away.
    slack = 20 - 9.5 - 600 / 3600
    edge = slack - 1 / 60 - hedge_reserve_h(TIGHT, lost_from(1.0), 9.5, own_deadline=True)
    assert 4.2 < edge < 4.3
    wake = wake_after_h(TIGHT, BEHIND, lost_from(1.0), NOW)
    assert wake is not None and wake == pytest.approx(edge, abs=1e-6)
    before = decide(TIGHT, BEHIND, lost_from(1.0), cands, History(), NOW + (wake - 0.01) * H)
    assert before.action == WAIT
    at = decide(TIGHT, BEHIND, lost_from(1.0), cands, History(), NOW + wake * H)
    assert at.action == REPLACE and at.target == od(20) and not at.commit_on_demand
    assert "preemptions of the work left" in at.reason
    # Lost from a zone preempted once in ten hours, the same job at the same moment waits on:
    # its work needs 0.4 h of slack for preemptions, not 5.1 h.
    calm = decide(TIGHT, BEHIND, lost_from(0.1), cands, History(), NOW + wake * H)
    assert calm.action == WAIT


def test_a_blocked_zone_is_the_last_spot_choice_not_out() -> None:
    """Issue 30: a zone lost within zone_block_s and back up was out, so a job whose only spot
    was that zone waited or bought on-demand for up to an hour."""
    zone = spot(5)
    lost = Current(zone, NOW - 2 * H, True)
    recorded = History(lost_zones=((zone_key(zone), NOW - 0.5 * H),))  # blocked for 0.5 h more
    # The money rules (no deadline, no wait) would buy on-demand: the zone instead.
    d = decide(RULES, prog(done=3.0), lost, [zone, od(20)], recorded, NOW)
    assert d.action == REPLACE and d.target == zone
    # With a deadline, behind the line (0.5 h done, the line wants 1.1 h): the zone, not a wait.
    with_deadline = replace(RULES, deadline=NOW + 16 * H)
    d = decide(with_deadline, prog(done=0.5), lost, [zone, od(20)], recorded, NOW)
    assert d.action == REPLACE and d.target == zone
    # Ahead of the line the job can afford to wait the block out (a zone that just failed it
    # tends to fail again soon): Uniform Progress waits, as before.
    d = decide(with_deadline, prog(done=3.0), lost, [zone, od(20)], recorded, NOW)
    assert d.action == WAIT
    # Any other spot zone open goes first.
    other = spot(6, "us-east-1b")
    d = decide(RULES, prog(done=3.0), lost, [zone, other, od(20)], recorded, NOW)
    assert d.target == other
    # The zone just lost (the history does not have this loss yet) stays out.
    fresh = Current(zone, NOW - 0.1 * H, True)
    d = decide(with_deadline, prog(done=0.5), fresh, [zone, od(20)], History(), NOW)
    assert d.target != zone


# --- migration.spot_wait: forever -----------------------------------------------------------

FOREVER = replace(RULES, spot_wait_s=math.inf)


def test_spot_wait_forever_waits_for_spot_however_long_and_never_buys_on_demand() -> None:
    lost = Current(spot(5), NOW - H, True)
    # Submitted 300 h ago for 10 h of work: a 12-hour wait would be long spent.
    late = prog(done=3.0, started_at=NOW - 300 * H)
    d = decide(FOREVER, late, lost, [od(20)], History(), NOW)
    assert d.action == WAIT and d.target is None and "spot_wait: forever" in d.reason
    assert wake_after_h(FOREVER, late, lost, NOW) is None  # nothing changes with time alone
    twelve = replace(RULES, spot_wait_s=12 * 3600.0)
    assert decide(twelve, late, lost, [od(20)], History(), NOW).target == od(20)
    # Spot back: it takes it; running there it moves only to cheaper spot, never on-demand.
    back = decide(FOREVER, late, lost, [od(20), spot(6, "us-east-1b")], History(), NOW)
    assert back.action == REPLACE and back.target == spot(6, "us-east-1b")
    on = running(spot(6, "us-east-1b"), NOW - 3 * H)
    assert decide(FOREVER, late, on, [od(7), spot(6, "us-east-1b")], History(), NOW).action == STAY
    cheaper = decide(FOREVER, late, on, [od(7), spot(6, "us-east-1b"), spot(2)], History(), NOW)
    assert cheaper.action == MOVE and cheaper.target == spot(2)


def test_spot_wait_forever_does_not_wait_for_spot_dearer_than_on_demand() -> None:
    # Spot up but priced above on-demand is no outage: waiting would not bring cheaper spot.
    lost = Current(spot(5), NOW - H, True)
    d = decide(FOREVER, prog(done=3.0), lost, [od(20), spot(30, "us-east-1b")], History(), NOW)
    assert d.action == REPLACE and d.target == od(20)
    # Placed on on-demand, it goes back to spot by the money rules.
    on_od = running(od(20), NOW - 3 * H)
    d = decide(FOREVER, prog(done=3.0), on_od, [od(20), spot(5, "us-east-1b")], History(), NOW)
    assert d.action == SWITCH_MARKET and d.target == spot(5, "us-east-1b")


def test_spot_wait_forever_in_job_yaml_and_workloads() -> None:
    from router.config.workload import _spot_wait, _Where
    from router.core.errors import BadInput
    from router.core.job.migration import Migration

    assert Migration.model_validate({"spot_wait": "forever"}).spot_wait_s == math.inf
    w = _Where(Path("workload.yaml"))
    assert _spot_wait(w, "jobs.generate.spot_wait", "forever") == math.inf
    assert _spot_wait(w, "jobs.generate.spot_wait", "12h") == 12 * 3600.0
    for bad in ("never", "-1h", "400d", True):
        with pytest.raises(BadInput) as err:
            _spot_wait(w, "jobs.generate.spot_wait", bad)
        line = str(err.value)
        assert "workload.yaml: jobs.generate.spot_wait" in line and "forever" in line
        assert "\n" not in line


def test_spot_wait_forever_bad_values_in_job_yaml_are_one_line_naming_the_field(
    tmp_path: Path,
) -> None:
    from tests.unit.test_jobspec import only_problem

    line = only_problem(tmp_path, "migration: {spot_wait: always}\n")
    assert "migration.spot_wait" in line and "forever" in line and "\n" not in line


def test_the_soft_deadline_of_a_forever_wait_never_overflows() -> None:
    # A century after submission the job still waits (no datetime arithmetic on infinity).
    lost = Current(spot(5), NOW - H, True)
    ancient = prog(done=3.0, started_at=NOW - timedelta(days=36500))
    assert decide(FOREVER, ancient, lost, [od(20)], History(), NOW).action == WAIT
