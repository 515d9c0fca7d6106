"""decide(): the migration rules of route watch and route backtest, in dollars and hours."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.config.datafiles import load_egress, load_interruption_model
from router.core.decide import decide, remaining_cost
from router.core.decision_model import (
    MOVE,
    REPLACE,
    STAY,
    SWITCH_MARKET,
    WAIT,
    Current,
    History,
    Progress,
    Rules,
    TransferCosts,
    same_capacity,
    zone_key,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)


@dataclass(frozen=True)
class Cap:
    cloud: str = "aws"
    region: str = "us-east-1"
    zone: str | None = "us-east-1a"
    instance_type: str = "p4de.24xlarge"
    market: str = "spot"
    price_per_hour: float = 10.0
    interruptions_per_hour: float = 0.0


def spot(price: float, zone: str = "us-east-1a", **kw: object) -> Cap:
    return Cap(zone=zone, price_per_hour=price, **kw)  # type: ignore[arg-type]


def od(price: float, zone: str | None = None, **kw: object) -> Cap:
    return Cap(zone=zone, market="on-demand", price_per_hour=price, **kw)  # type: ignore[arg-type]


RULES = Rules(
    min_savings_pct=20, cooldown_s=3600, checkpoint_interval_s=1800, restore_overhead_s=600,
    handover_s=0,
)  # fmt: skip


def prog(
    done: float = 2.0, ckpt: float | None = None, total: float = 10.0, **kw: object
) -> Progress:
    started = kw.pop("started_at", NOW - 2 * H)
    return Progress(done, done if ckpt is None else ckpt, total, started)  # type: ignore[arg-type]


def running(p: Cap, since: datetime = NOW - 2 * H) -> Current:
    return Current(p, since)


# --- placing and re-placing ----------------------------------------------------------------


def test_finished_job_stays():
    d = decide(RULES, prog(done=10.0), running(spot(10)), [spot(1, "us-east-1b")], History(), NOW)
    assert d.action == STAY and d.reason == "finished"


def test_unplaced_job_goes_to_the_cheapest_candidate():
    d = decide(
        RULES, prog(done=0.0), None, [spot(12), spot(9, "us-east-1b"), od(20)], History(), NOW
    )
    assert d.action == REPLACE and d.target == spot(9, "us-east-1b")
    assert "not placed yet" in d.reason


def test_interrupted_job_is_replaced_elsewhere_never_in_the_lost_zone():
    lost = spot(5)
    cands = [spot(5), spot(8, "us-east-1b")]
    d = decide(RULES, prog(done=3.0, ckpt=2.5), Current(lost, NOW - H, True), cands, History(), NOW)
    assert d.action == REPLACE and d.target == spot(8, "us-east-1b")
    # The lost work (0.5 h since the checkpoint) is counted in the work left.
    assert d.numbers.work_left_h == pytest.approx(7.5)
    assert "lost aws us-east-1/us-east-1a" in d.reason


def test_an_interrupted_job_with_nowhere_to_go_waits_and_says_so_in_plain_words() -> None:
    # Issue 32: route watch said "no any capacity available now".
    lost = spot(5)
    d = decide(RULES, prog(done=3.0, ckpt=2.5), Current(lost, NOW - H, True), [spot(5)],
               History(), NOW)  # fmt: skip
    assert d.action == WAIT
    assert "no capacity available now: waiting" in d.reason and "any" not in d.reason


def test_lost_zone_stays_blocked_for_the_block_time_then_returns():
    hist = History(lost_zones=((zone_key(spot(5)), NOW - 0.5 * H),))
    cands = [spot(5), spot(8, "us-east-1b")]
    d = decide(RULES, prog(0.0), None, cands, hist, NOW)
    assert d.target == spot(8, "us-east-1b")
    d = decide(RULES, prog(0.0), None, cands, hist, NOW + H)
    assert d.target == spot(5)


def test_zone_lost_while_interrupted_returns_after_its_block_time() -> None:
    # The history records when the zone was lost (the backtest at the interruption, route
    # watch on re-placing): from then on zone_block_s decides, not whether the job is placed.
    lost = spot(5)
    cur = Current(lost, NOW - 3 * H, True)
    cands = [spot(5), spot(8, "us-east-1b")]
    recent = History(lost_zones=((zone_key(lost), NOW - 0.5 * H),))
    assert decide(RULES, prog(), cur, cands, recent, NOW).target == spot(8, "us-east-1b")
    earlier = History(lost_zones=((zone_key(lost), NOW - 2 * H),))
    back = decide(RULES, prog(), cur, cands, earlier, NOW)
    assert back.action == REPLACE and back.target == spot(5)
    # A record from before the job was placed there is an older loss: this one is not in it.
    again = Current(lost, NOW - H, True)
    assert decide(RULES, prog(), again, cands, earlier, NOW).target == spot(8, "us-east-1b")


def test_a_crashed_job_is_not_re_placed_even_with_capacity_and_a_deadline():
    from router.core.decision_model import CRASHED

    crashed = Current(spot(5), NOW - H, True, "node ip-10-42-0-5 exited with status 1 (no "
                      "interruption marker)")  # fmt: skip
    for rules in (RULES, replace(RULES, deadline=NOW + 9 * H)):
        d = decide(rules, prog(done=3.0), crashed, [spot(4, "us-east-1b"), od(9)], History(), NOW)
        assert d.action == CRASHED and d.target is None
        assert "status 1" in d.reason and "route deploy" in d.reason
    # Interrupted without a crash (preempted): re-placed as before.
    d = decide(RULES, prog(done=3.0), Current(spot(5), NOW - H, True), [spot(4, "us-east-1b")],
               History(), NOW)  # fmt: skip
    assert d.action == REPLACE


def test_interrupted_with_nothing_available_waits():
    lost = spot(5)
    d = decide(RULES, prog(), Current(lost, NOW - H, True), [spot(5)], History(), NOW)
    assert d.action == WAIT and d.target is None


# --- moving for money ----------------------------------------------------------------------


def test_price_drop_above_threshold_moves_with_the_numbers():
    here = spot(10)
    there = spot(6, "us-east-1b")
    d = decide(RULES, prog(done=2.0), running(here), [here, there], History(), NOW)
    assert d.action == MOVE and d.target == there
    n = d.numbers
    assert n.current_remaining_usd == pytest.approx(80.0)  # 8 h × $10
    assert n.target_remaining_usd == pytest.approx(48.0)
    assert n.migration_usd == pytest.approx(1.0)  # 10 min restore × $6
    assert n.saving_usd == pytest.approx(80 - 48 - 1)
    assert n.threshold_usd == pytest.approx(16.0)
    assert "$31.00" in d.reason


def test_price_drop_below_threshold_stays():
    here = spot(10)
    there = spot(8.5, "us-east-1b")  # saves $12 - $1.42 < 20 % of $80
    d = decide(RULES, prog(done=2.0), running(here), [here, there], History(), NOW)
    assert d.action == STAY and d.target == there
    assert d.numbers.saving_usd is not None and d.numbers.saving_usd < d.numbers.threshold_usd  # type: ignore[operator]
    assert "under 20 %" in d.reason


def test_within_cooldown_stays_and_says_how_long_ago():
    here, there = spot(10), spot(5, "us-east-1b")
    hist = History(last_move_at=NOW - 0.5 * H)
    d = decide(RULES, prog(), running(here), [here, there], hist, NOW)
    assert d.action == STAY and "cooldown" in d.reason
    assert d.numbers.cooldown_left_s == pytest.approx(1800)
    d = decide(RULES, prog(), running(here), [here, there], hist, NOW + H)
    assert d.action == MOVE


def test_a_move_saves_a_checkpoint_first_so_progress_since_the_last_one_is_kept():
    # route migrate asks the job to save before the new placement starts (flows/migrate.py).
    here, there = spot(10), spot(7, "us-east-1b")
    fresh = decide(RULES, prog(done=2.0, ckpt=2.0), running(here), [here, there], History(), NOW)
    stale = decide(RULES, prog(done=2.0, ckpt=0.5), running(here), [here, there], History(), NOW)
    assert fresh.numbers.migration_usd == stale.numbers.migration_usd


def test_handover_overlap_is_paid_at_the_current_price():
    rules = replace(RULES, handover_s=1800)
    here, there = spot(10), spot(6, "us-east-1b")
    d = decide(rules, prog(), running(here), [here, there], History(), NOW)
    assert d.numbers.migration_usd == pytest.approx(1.0 + 5.0)


def test_egress_of_data_and_checkpoint_can_make_a_cheaper_cloud_not_worth_it():
    table = load_egress()
    here = spot(10)
    gcp = Cap("gcp", "us-central1", "us-central1-a", "a2-ultragpu-8g", "spot", 7.0)
    no_data = replace(RULES, transfers=TransferCosts(table))
    assert decide(no_data, prog(), running(here), [here, gcp], History(), NOW).action == MOVE
    heavy = replace(
        RULES,
        transfers=TransferCosts(
            table, data_cloud="aws", data_region="us-east-1", data_gb=2000, checkpoint_gb=500
        ),
    )
    d = decide(heavy, prog(), running(here), [here, gcp], History(), NOW)
    assert d.action == STAY
    # 2000 GB + 500 GB out of AWS to the internet at $0.09/GB, plus the restore.
    assert d.numbers.migration_usd == pytest.approx(2500 * 0.09 + 7.0 * 10 / 60)


def test_on_demand_job_switches_back_to_spot_when_spot_returns():
    here = od(20)
    d = decide(RULES, prog(), running(here), [here, spot(8)], History(), NOW)
    assert d.action == SWITCH_MARKET and d.target == spot(8)


def test_spot_interruption_rate_is_priced_over_the_work_left():
    # router.core.interruption: m = e^(ΛR)(e^(ΛI) − 1)/(ΛI) paid hours per hour of work.
    risky = spot(9.0, "us-east-1b", interruptions_per_hour=0.5)
    m = math.exp(0.5 / 6) * math.expm1(0.5 * 0.5) / (0.5 * 0.5)
    assert remaining_cost(RULES, risky, 8) == pytest.approx(9 * 8 * m)
    # Above the first-order term 1 + Λ (R + I/2): short up-times waste more than linearly.
    assert m > 1 + 0.5 * (10 + 15) / 60


def test_a_group_is_interrupted_when_any_of_its_nodes_is():
    risky = spot(9.0, "us-east-1b", interruptions_per_hour=0.5)
    four = replace(RULES, node_count=4)
    m4 = math.exp(2.0 / 6) * math.expm1(2.0 * 0.5) / (2.0 * 0.5)  # Λ = 4 × 0.5 per hour
    assert remaining_cost(four, risky, 8) == pytest.approx(9 * 4 * 8 * m4)


def test_node_count_scales_every_term():
    rules = replace(RULES, node_count=4)
    here, there = spot(10), spot(6, "us-east-1b")
    d = decide(rules, prog(), running(here), [here, there], History(), NOW)
    assert d.numbers.current_remaining_usd == pytest.approx(320)
    assert d.numbers.migration_usd == pytest.approx(4.0)


def test_naive_now_is_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        decide(RULES, prog(), None, [], History(), datetime(2026, 12, 1))


def test_decision_to_json_carries_target_and_numbers():
    here, there = spot(10), spot(6, "us-east-1b")
    data = decide(RULES, prog(), running(here), [here, there], History(), NOW).to_json()
    assert data["action"] == "move" and data["target"]["zone"] == "us-east-1b"
    assert data["numbers"]["saving_usd"] == pytest.approx(31.0)


def test_planner_placements_are_accepted_as_candidates():
    from router.core.org import OrgConfig
    from router.core.planner import plan
    from tests.unit.planner_factories import job, offer

    result = plan(
        job(market="spot"),
        [offer(price=10.0, zone="us-east-1a"), offer(price=6.0, zone="us-east-1b")],
        org=OrgConfig(),
        egress=load_egress(),
        now=NOW,
        interruption=load_interruption_model(),
    )
    placements = result.placements
    here = next(p for p in placements if p.zone == "us-east-1a")
    d = decide(RULES, prog(), running(here), placements, History(), NOW)
    assert d.action == MOVE and d.target is not None and d.target.zone == "us-east-1b"


# --- deadlines: Uniform Progress -----------------------------------------------------------

# A 10 h job submitted 2 h ago with a deadline 18 h from submission: the line wants
# 10 × 2/18 = 1.11 h done now.
DL = replace(RULES, deadline=NOW + 16 * H, decision_period_s=3600)


def test_deadline_behind_the_line_on_running_spot_stays_on_spot():
    here = spot(5)
    d = decide(DL, prog(done=0.5), running(here), [here, od(20)], History(), NOW)
    assert d.action == STAY
    assert d.numbers.ahead_h == pytest.approx(0.5 - 10 * 2 / 18)


def test_deadline_ahead_on_spot_follows_the_money_rules():
    here = spot(10)
    cands = [here, spot(5, "us-east-1b"), od(12)]
    d = decide(DL, prog(done=2.0), running(here), cands, History(), NOW)
    assert d.action == MOVE and d.target == spot(5, "us-east-1b")


def test_deadline_on_demand_goes_back_to_spot_when_slack_allows_even_behind_the_line():
    here = od(20)
    behind = decide(DL, prog(done=0.5), running(here), [here, spot(5)], History(), NOW)
    assert behind.numbers.ahead_h is not None and behind.numbers.ahead_h < 0
    assert behind.action == SWITCH_MARKET and behind.target == spot(5)
    assert "slack" in behind.reason and "back to spot" in behind.reason


def test_deadline_on_demand_goes_back_to_spot_only_with_the_reserve():
    # Reserve: a restore there, one back, and the most the slack test can risk (restore +
    # 30 min interval + the 1 h period): 2/6 + 1/6 + 0.5 + 1 = 2.0 h.
    from router.core.decide import return_reserve_h

    assert return_reserve_h(DL) == pytest.approx(2.0)
    here = od(20)
    short = replace(DL, deadline=NOW + 11.4 * H)  # 9.5 h of work left: slack 1.9 h
    barely = decide(short, prog(done=0.5), running(here), [here, spot(5)], History(), NOW)
    assert barely.action == STAY
    enough = replace(DL, deadline=NOW + 11.6 * H)  # slack 2.1 h
    back = decide(enough, prog(done=0.5), running(here), [here, spot(5)], History(), NOW)
    assert back.action == SWITCH_MARKET and back.target == spot(5)


def test_deadline_interrupted_and_ahead_waits_when_no_spot_is_left():
    lost = spot(5)
    cur = Current(lost, NOW - H, True)
    d = decide(DL, prog(done=3.0), cur, [lost, od(20)], History(), NOW)
    assert d.action == WAIT


def test_deadline_interrupted_and_behind_goes_on_demand_only_without_spot() -> None:
    # 12.5 h left for 9.5 h of work and a 10 min restore: slack 2.83 h; one period (1 h) on it
    # is under the 2.0 h reserve.
    rules = replace(DL, deadline=NOW + 12.5 * H)
    lost = spot(5)
    cur = Current(lost, NOW - H, True)
    behind = prog(done=1.0, ckpt=0.5)
    d = decide(rules, behind, cur, [lost, spot(4, "us-east-1b"), od(20)], History(), NOW)
    assert d.action == REPLACE and d.target == spot(4, "us-east-1b")
    d = decide(rules, behind, cur, [lost, od(20)], History(), NOW)
    assert d.action == REPLACE and d.target == od(20) and "behind" in d.reason
    assert "slack 2.83 h − one period < reserve 2.00 h" in d.reason


def test_deadline_behind_the_line_waits_while_the_slack_absorbs_the_outage() -> None:
    # 16 h left: slack 6.33 h, still 5.33 h a period from now, above the 3.67 h reserve.
    lost = spot(5)
    cur = Current(lost, NOW - H, True)
    behind = prog(done=1.0, ckpt=0.5)
    d = decide(DL, behind, cur, [lost, od(20)], History(), NOW)
    assert d.numbers.ahead_h is not None and d.numbers.ahead_h < 0
    assert d.action == WAIT and "behind the line but slack 6.33 h absorbs" in d.reason
    # Not placed yet and no spot: the same test (10 h of work, 16 h left: slack 5.83 h).
    assert decide(DL, prog(done=0.0), None, [od(20)], History(), NOW).action == WAIT
    later = replace(DL, deadline=NOW + 13 * H)  # slack 2.83 h: a period on, 1.83 h
    assert decide(later, prog(done=0.0), None, [od(20)], History(), NOW).target == od(20)


def test_deadline_behind_the_line_by_more_than_the_band_hedges_on_demand() -> None:
    """The hedge band (decide_deadline.HEDGE_SLACK_SHARE, issue 20 round 4): a job with its own
    deadline may fall behind the line by a quarter of its slack, then it hedges on on-demand
    even while the slack is far above the reserve (before: it waited down to the reserve)."""
    from router.core.decide import hedge_tolerance_h

    # A 20 h job submitted 20 h ago, due 20 h from now: span 40 h, slack 20 h, band 5 h; the
    # line wants 10 h done now. 20 h left: 16 h of work left + a restore → slack 3.83 h, one
    # period on 2.83 h — above the 2.0 h reserve, so the reserve rule alone would wait.
    rules = replace(DL, deadline=NOW + 20 * H)
    lost = Current(spot(5), NOW - H, True)
    far = prog(done=4.0, total=20.0, started_at=NOW - 20 * H)
    assert hedge_tolerance_h(rules, far) == pytest.approx(5.0)
    d = decide(rules, far, lost, [lost.placement, od(20)], History(), NOW)
    assert d.numbers.ahead_h == pytest.approx(-6.0)
    assert d.action == REPLACE and d.target == od(20) and not d.commit_on_demand
    assert "6.00 h behind the line, the band (5.00 h, 25% of the slack) spent" in d.reason
    # 4 h behind, inside the band (slack 5.83 h): it waits for spot.
    near = prog(done=6.0, total=20.0, started_at=NOW - 20 * H)
    d = decide(rules, near, lost, [lost.placement, od(20)], History(), NOW)
    assert d.action == WAIT and "band 5.00 h" in d.reason


def test_a_waiting_deadline_job_is_asked_again_at_the_band_edge() -> None:
    from router.core.decide import wake_after_h

    rules = replace(DL, deadline=NOW + 20 * H, decision_period_s=60)
    lost = Current(spot(5), NOW - H, True)
    p = prog(done=6.0, total=20.0, started_at=NOW - 20 * H)  # 4 h behind, band 5 h, 0.5 h/h
    wake = wake_after_h(rules, p, lost, NOW)
    assert wake == pytest.approx(2.0)  # (−4 + 5) / 0.5
    assert decide(rules, p, lost, [od(20)], History(), NOW + (wake - 0.01) * H).action == WAIT
    d = decide(rules, p, lost, [od(20)], History(), NOW + wake * H)
    assert d.action == REPLACE and d.target == od(20)


def test_a_job_without_a_deadline_has_no_band_it_waits_to_the_reserve() -> None:
    # Waiting for spot without a deadline (migration.spot_wait): its wait is there to be spent
    # on outages, so it hedges only at the reserve, however far behind its soft line it is.
    waits = replace(RULES, spot_wait_s=12 * 3600.0, decision_period_s=3600)
    lost = Current(spot(5), NOW - H, True)
    p = prog(done=0.5, total=10.0, started_at=NOW - 8 * H)  # soft line 3.6 h: 3.1 h behind
    d = decide(waits, p, lost, [lost.placement, od(20)], History(), NOW)
    assert d.numbers.ahead_h is not None and d.numbers.ahead_h < -3.0
    assert d.action == WAIT and "band" not in d.reason


def test_deadline_hedge_at_the_reserve_can_still_return_to_spot() -> None:
    # Sent to on-demand at the last call above the reserve, the job keeps that slack on
    # on-demand (it progresses as fast as the clock), so spot's return takes it back.
    rules = replace(DL, deadline=NOW + (12.4 + 1 / 6) * H)  # slack 2.9 h interrupted
    lost = spot(5)
    hedge = decide(rules, prog(done=0.5), Current(lost, NOW - H, True), [od(20)], History(), NOW)
    assert hedge.action == REPLACE and hedge.target == od(20)
    after = NOW + H / 6  # the restore on on-demand is done, no work yet: slack still 2.9 h
    on_od = Current(od(20), NOW)
    back = decide(rules, prog(done=0.5), on_od, [od(20), spot(5)], History(), after)
    assert back.action == SWITCH_MARKET and back.target == spot(5)


def test_deadline_without_slack_commits_to_on_demand_for_good():
    rules = replace(DL, deadline=NOW + 8.5 * H)  # 8 h of work left, 0.5 h to spare
    here = spot(5)
    d = decide(rules, prog(done=2.0), running(here), [here, od(20)], History(), NOW)
    assert d.action == SWITCH_MARKET and d.target == od(20) and d.commit_on_demand
    # Once committed it stays on on-demand even when far ahead and spot is cheap.
    hist = History(committed_on_demand=True)
    d = decide(DL, prog(done=9.0), running(od(20)), [od(20), spot(1)], hist, NOW)
    assert d.action == STAY and d.commit_on_demand


# --- what a move keeps, waiting and the margin ----------------------------------------------


def test_a_move_to_spot_must_pay_for_itself_over_the_work_the_target_keeps() -> None:
    # Leaving $3.06 on-demand (30 min since the checkpoint, 5-min hand-over) for $1.02 spot:
    # a zone lost every ~50 min keeps ~0.49 h of work before it goes — not worth the move; one
    # lost every ~3 h keeps ~2.5 h and is.
    rules = replace(RULES, handover_s=300)
    here = od(3.06)
    churny = spot(1.02, interruptions_per_hour=1.22)
    d = decide(rules, prog(done=3.25, ckpt=2.75), running(here), [here, churny], History(), NOW)
    assert d.action == STAY and d.target == churny
    assert "the 0.49 h of work it keeps before it is lost" in d.reason
    calm = spot(1.02, interruptions_per_hour=0.345)
    d = decide(rules, prog(done=3.25, ckpt=2.75), running(here), [here, calm], History(), NOW)
    assert d.action == SWITCH_MARKET and d.target == calm


def test_a_running_spot_placement_is_not_left_for_a_lower_rate_alone() -> None:
    # Two zones at one price: the other was lost less often, but this one is running (GPU spot
    # up-times are heavy-tailed: a stint that lasted tends to last). Spot against spot, price.
    here = spot(1.0, interruptions_per_hour=1.0)
    calmer = spot(1.0, "us-east-1b", interruptions_per_hour=0.05)
    on = running(here, NOW - 3 * H)
    for rules in (RULES, DL):
        d = decide(rules, prog(done=3.0), on, [here, calmer], History(), NOW)
        assert d.action == STAY, rules.deadline
    cheaper = spot(0.5, "us-east-1b", interruptions_per_hour=0.05)
    d = decide(RULES, prog(done=3.0), running(here, NOW - 3 * H), [here, cheaper], History(), NOW)
    assert d.action == MOVE and d.target == cheaper
    # After an interruption the learned rates choose the zone.
    lost = Current(spot(1.0, "us-east-1c", interruptions_per_hour=1.0), NOW - H, True)
    churny = spot(1.0, "us-east-1a", interruptions_per_hour=1.0)
    d = decide(RULES, prog(done=3.0), lost, [churny, calmer], History(), NOW)
    assert d.action == REPLACE and d.target == calmer


def test_without_waiting_for_spot_a_deadline_job_never_idles_but_keeps_its_deadline() -> None:
    lost = Current(spot(5), NOW - H, True)
    waits = decide(DL, prog(done=3.0), lost, [lost.placement, od(20)], History(), NOW)
    assert waits.action == WAIT
    guard = replace(DL, wait_for_spot=False)
    d = decide(guard, prog(done=3.0), lost, [lost.placement, od(20)], History(), NOW)
    assert d.action == REPLACE and d.target == od(20)
    # The slack test still commits it to on-demand for good.
    tight = replace(guard, deadline=NOW + 7.5 * H)
    d = decide(tight, prog(done=3.0), running(spot(5)), [spot(5), od(20)], History(), NOW)
    assert d.action == SWITCH_MARKET and d.target == od(20) and d.commit_on_demand


def test_a_waiting_job_is_asked_again_when_its_slack_reaches_the_margin() -> None:
    from router.core.decide import deadline_slack, wake_after_h

    lost = Current(spot(5), NOW - H, True)
    guard = replace(DL, wait_for_spot=False)
    _, slack, risk = deadline_slack(guard, prog(done=3.0), lost, NOW)
    assert wake_after_h(guard, prog(done=3.0), lost, NOW) == pytest.approx(slack - risk)
    # Waiting for spot it may also hedge at the reserve, or reach the line, sooner.
    assert wake_after_h(DL, prog(done=3.0), lost, NOW) <= slack - risk  # type: ignore[operator]
    assert wake_after_h(RULES, prog(done=3.0), lost, NOW) is None
    # The margin is the job's: waiting, a restore and the decision period; on spot also what
    # the running checkpoint interval can still lose.
    assert risk == pytest.approx((600 + 3600) / 3600)
    on_spot = running(spot(5))
    _, _, risk = deadline_slack(guard, prog(done=3.25, ckpt=3.0), on_spot, NOW)
    assert risk == pytest.approx((600 + 3600) / 3600 + 0.25)


# --- spot dearer than on-demand ----------------------------------------------------------


@pytest.mark.parametrize("rules", [RULES, DL], ids=["no deadline", "deadline"])
def test_spot_dearer_than_on_demand_is_never_chosen(rules: Rules) -> None:
    """$5.00 spot next to $3.06 on-demand (issue 20): placing and re-placing refuse it (a job
    with a deadline and slack to spare may wait for spot worth running instead)."""
    dear = spot(5.0)
    d = decide(rules, prog(done=0.0), None, [dear, od(3.06)], History(), NOW)
    assert d.target != dear and (d.action, d.target) in ((REPLACE, od(3.06)), (WAIT, None))
    assert rules.deadline is not None or d.target == od(3.06)
    lost = Current(spot(1.0, "us-east-1b"), NOW - H, True)
    d = decide(rules, prog(done=3.0), lost, [dear, od(3.06)], History(), NOW)
    assert d.target != dear and (d.action, d.target) in ((REPLACE, od(3.06)), (WAIT, None))
    assert rules.deadline is not None or d.target == od(3.06)
    # On on-demand, the dear spot is no reason to switch back.
    d = decide(rules, prog(done=3.0), running(od(3.06)), [od(3.06), dear], History(), NOW)
    assert d.action == STAY


@pytest.mark.parametrize("rules", [RULES, DL], ids=["no deadline", "deadline"])
def test_running_spot_that_turns_dearer_than_on_demand_moves_by_the_money_rules(
    rules: Rules,
) -> None:
    here = spot(5.0)
    d = decide(rules, prog(done=3.0), running(here, NOW - 3 * H), [here, od(3.06)], History(), NOW)
    assert d.action == SWITCH_MARKET and d.target == od(3.06)


# --- properties ----------------------------------------------------------------------------

zones = st.sampled_from(["us-east-1a", "us-east-1b", "us-east-1c", None])
caps = st.builds(
    Cap,
    cloud=st.sampled_from(["aws", "gcp"]),
    region=st.sampled_from(["us-east-1", "us-central1"]),
    zone=zones,
    market=st.sampled_from(["spot", "on-demand"]),
    price_per_hour=st.floats(0.5, 50),
    interruptions_per_hour=st.floats(0, 0.2),
)
rules_st = st.builds(
    Rules,
    node_count=st.integers(1, 4),
    min_savings_pct=st.floats(0, 60),
    cooldown_s=st.floats(0, 7200),
    checkpoint_interval_s=st.floats(60, 7200),
    restore_overhead_s=st.floats(0, 3600),
    handover_s=st.floats(0, 1800),
)


@st.composite
def situations(draw: st.DrawFn) -> tuple[Rules, Progress, Current | None, list[Cap], History]:
    rules = draw(rules_st)
    total = draw(st.floats(0.5, 48))
    done = draw(st.floats(0, total))
    ckpt = draw(st.floats(0, done))
    progress = Progress(done, ckpt, total, NOW - draw(st.floats(0, 24)) * H)
    cands = draw(st.lists(caps, max_size=8))
    current = None
    if draw(st.booleans()):
        current = Current(draw(caps), NOW - H, draw(st.booleans()))
    last = draw(st.none() | st.floats(0, 4).map(lambda h: NOW - h * H))
    lost = draw(st.lists(st.tuples(st.sampled_from(cands or [Cap()]), st.floats(0, 3)), max_size=3))
    hist = History(last_move_at=last, lost_zones=tuple((zone_key(c), NOW - h * H) for c, h in lost))
    if draw(st.booleans()):
        rules = replace(rules, deadline=NOW + draw(st.floats(0, 60)) * H)
    return rules, progress, current, cands, hist


@settings(max_examples=300, deadline=None)
@given(situations())
def test_targets_are_usable_candidates_and_moves_clear_threshold_and_cooldown(s):
    rules, progress, current, cands, hist = s
    d = decide(rules, progress, current, cands, hist, NOW)
    if d.action in (MOVE, SWITCH_MARKET, REPLACE):
        assert d.target is not None and any(d.target is c for c in cands)
        blocked = hist.blocked(NOW, rules.zone_block_s)
        out = set()
        if current is not None and current.interrupted:
            lost = zone_key(current.placement)
            recorded = any(z == lost and at >= current.since for z, at in hist.lost_zones)
            if not recorded:  # this loss is not in the history yet
                assert zone_key(d.target) != lost
                out = {lost}
        if zone_key(d.target) in blocked:
            # A blocked zone is the last spot choice: only spot, only with no other spot open
            # (and, with a deadline, only behind the line: decide._pressed).
            assert d.target.market == "spot"
            assert not any(
                c.market == "spot" and zone_key(c) not in blocked | out for c in cands
            )
    if d.action in (STAY, WAIT) and d.target is None:
        pass
    if current is None or current.interrupted:
        assert d.action in (REPLACE, WAIT) or progress.finished
    if rules.deadline is None and d.action in (MOVE, SWITCH_MARKET):
        n = d.numbers
        assert current is not None and not current.interrupted
        assert not same_capacity(d.target, current.placement)  # type: ignore[arg-type]
        assert n.saving_usd is not None and n.threshold_usd is not None
        assert n.saving_usd >= n.threshold_usd and n.saving_usd > 0
        assert (
            hist.last_move_at is None
            or (NOW - hist.last_move_at).total_seconds() >= rules.cooldown_s
        )


@settings(max_examples=200, deadline=None)
@given(situations(), st.randoms(use_true_random=False))
def test_decision_does_not_depend_on_candidate_order(s, rnd):
    rules, progress, current, cands, hist = s
    shuffled = list(cands)
    rnd.shuffle(shuffled)
    a = decide(rules, progress, current, cands, hist, NOW)
    b = decide(rules, progress, current, shuffled, hist, NOW)
    assert (a.action, a.target) == (b.action, b.target)


@settings(max_examples=200, deadline=None)
@given(situations())
def test_deadline_slack_gone_never_leaves_on_demand(s):
    rules, progress, current, cands, hist = s
    hist = replace(hist, committed_on_demand=True)
    rules = replace(rules, deadline=NOW + 10 * H)
    d = decide(rules, progress, current, cands, hist, NOW)
    if d.target is not None and d.action != STAY:
        assert d.target.market != "spot"


def test_rules_for_job_read_migration_checkpoint_deadline_and_data():
    from router.core.decision_model import rules_for_job
    from tests.unit.planner_factories import job

    spec = job(
        market="spot",
        node_count=2,
        deadline=NOW + 10 * H,
        migration={"min_savings_pct": 15, "cooldown": "2h"},
        data={"url": "s3://bucket/data", "region": "us-east-1", "size_gb": 1000},
    )
    rules = rules_for_job(spec, egress=load_egress(), checkpoint_gb=200, decision_period_s=60)
    assert (rules.node_count, rules.min_savings_pct, rules.cooldown_s) == (2, 15, 7200)
    assert rules.deadline == NOW + 10 * H
    assert spec.checkpoint is not None
    assert rules.checkpoint_interval_s == spec.checkpoint.interval_s
    assert rules.transfers.data_to("gcp", "us-central1") == pytest.approx(1000 * 0.09)
    assert rules.transfers.checkpoint("aws", "us-east-1", "gcp", "us-central1") == pytest.approx(
        200 * 0.09
    )


def test_work_at_risk_is_the_notice_only_when_every_cloud_of_the_job_saves_on_one():
    from router.core.decision_model import work_at_risk_s

    notice = {"aws": 120.0, "gcp": 30.0}
    assert work_at_risk_s(1800.0, notice, ["aws", "gcp"]) == 120.0  # the longest lead
    assert work_at_risk_s(1800.0, notice, ["gcp", "gcp"]) == 30.0
    assert work_at_risk_s(60.0, notice, ["aws"]) == 60.0  # checkpoints more often than that
    assert work_at_risk_s(1800.0, notice, ["aws", "azure"]) == 1800.0  # azure: no save known
    assert work_at_risk_s(1800.0, notice, []) == 1800.0
