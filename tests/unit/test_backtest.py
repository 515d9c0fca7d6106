"""The backtest simulation, the hindsight optimum and the synthetic market, on small traces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import router.core.decide as decide_module
from router.config.datafiles import load_egress, load_interruption_model, load_storage_prices
from router.core.backtest import run_backtest
from router.core.backtest_model import Pool, Trace, Workload, WorkloadJob, trace_from_points
from router.core.backtest_policies import GreedyDeadline, policies
from router.core.synthetic import (
    CloudOffer,
    JobMix,
    MarketModel,
    Shape,
    synthetic_trace,
    synthetic_workload,
)

START = datetime(2026, 11, 1, tzinfo=UTC)
EGRESS = load_egress()
INTERRUPTION = load_interruption_model()
STORAGE = load_storage_prices()


def pool(cloud: str, region: str, market: str, zone: str | None = None) -> Pool:
    itype = {"aws": "p4de.24xlarge", "gcp": "a2-ultragpu-8g"}[cloud]
    return Pool(cloud, region, zone, itype, market, "A100-80GB", 8, 80, 96, 1152.0, None)


AWS_OD = pool("aws", "us-east-1", "on-demand")
AWS_SPOT = pool("aws", "us-east-1", "spot", "us-east-1a")
GCP_SPOT = pool("gcp", "us-central1", "spot", "us-central1-a")


def trace(series: dict[Pool, tuple[list[float], list[bool]]]) -> Trace:
    pools = tuple(series)
    return Trace(
        START,
        3600.0,
        pools,
        tuple(tuple(series[p][0]) for p in pools),
        tuple(tuple(series[p][1]) for p in pools),
    )


def job(**kw: object) -> WorkloadJob:
    fields: dict[str, object] = {
        "name": "train",
        "arrival": START,
        "duration_h": 4.0,
        "gpu": "A100-80GB",
        "gpu_count": 8,
        "checkpoint_interval_s": 3600.0,
        "restore_overhead_s": 0.0,
    }
    fields.update(kw)
    return WorkloadJob(**fields)  # type: ignore[arg-type]


def run(t: Trace, *jobs: WorkloadJob, home: str = "aws", handover_s: float = 0.0):  # type: ignore[no-untyped-def]
    return run_backtest(
        Workload("w", tuple(jobs) or (job(),), home_cloud=home, handover_s=handover_s),
        t,
        egress=EGRESS,
        interruption=INTERRUPTION,
        storage=STORAGE,
    )


UP = [True] * 10


def test_baseline_pays_on_demand_list_price_for_the_work_only():
    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([12.0] * 10, UP)})
    r = run(t, job(duration_h=3.5))
    base = r.policy("on-demand")
    assert base.total_cost == pytest.approx(40.0 * 3.5)
    assert base.cost_per_gpu_hour == pytest.approx(5.0)
    assert r.policy("spot-once").total_cost == pytest.approx(12.0 * 3.5)
    assert r.savings_pct("spot-once") == pytest.approx(70.0)


def test_interruption_rolls_back_to_the_checkpoint_and_is_counted():
    # Spot is lost at step 2 for the rest of the trace; checkpoints every hour of work.
    spot_up = [True, True, False, False, False, False, False, False, False, False]
    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([10.0] * 10, spot_up)})
    r = run(t, job(duration_h=4.0, checkpoint_interval_s=5400.0, restore_overhead_s=600.0))
    fallback = r.policy("spot-fallback")
    assert fallback.interruptions == 1
    # 2 h done, last checkpoint at 1.5 h: 0.5 h recomputed.
    assert fallback.recomputed_h == pytest.approx(0.5)
    # 2 h spot + (2.5 h work + 10 min restore) on-demand.
    assert fallback.total_cost == pytest.approx(2 * 10 + (2.5 + 1 / 6) * 40)


def test_a_group_pays_every_node_through_the_whole_restore_after_an_interruption():
    spot_up = [True, True, False, False, False, False, False, False, False, False]
    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([10.0] * 10, spot_up)})
    group = job(duration_h=4.0, checkpoint_interval_s=5400.0, restore_overhead_s=600.0,
                node_count=2)
    fallback = run(t, group).policy("spot-fallback")
    # The same timeline as one node (the restore does not shrink with more nodes), every
    # hour of it paid on both nodes.
    assert (fallback.interruptions, fallback.recomputed_h) == (1, pytest.approx(0.5))
    assert fallback.total_cost == pytest.approx(2 * (2 * 10 + (2.5 + 1 / 6) * 40))


def test_a_group_avoids_a_zone_one_node_would_take_any_nodes_loss_stops_it():
    # Zone a lost its capacity once a day ago (the trace's past: about 0.04 losses per hour);
    # zone b, 11 % dearer, never. Eight nodes are lost eight times as often as one.
    steps = 40
    zone_a = pool("aws", "us-east-1", "spot", "us-east-1a")
    zone_b = pool("aws", "us-east-1", "spot", "us-east-1b")
    a_up = [True, False] + [True] * (steps - 2)
    t = trace({AWS_OD: ([40.0] * steps, [True] * steps), zone_a: ([9.0] * steps, a_up),
               zone_b: ([10.0] * steps, [True] * steps)})  # fmt: skip

    def zones(nodes: int) -> dict[str, set[str | None]]:
        r = run(t, job(arrival=START + timedelta(hours=24), checkpoint_interval_s=1800.0,
                       restore_overhead_s=600.0, node_count=nodes))
        return {name: {t.pools[seg[2]].zone for one in r.policy(name).runs for seg in one.segments}
                for name in ("spot-once", "migrate", "deadline-aware")}  # fmt: skip

    assert set(map(frozenset, zones(1).values())) == {frozenset({"us-east-1a"})}
    assert set(map(frozenset, zones(8).values())) == {frozenset({"us-east-1b"})}


def test_multi_cloud_migrates_when_another_cloud_becomes_much_cheaper():
    t = trace(
        {
            AWS_OD: ([40.0] * 10, UP),
            AWS_SPOT: ([12.0] * 10, UP),
            GCP_SPOT: ([20.0, 20.0] + [5.0] * 8, UP),
        }
    )
    r = run(t, job(duration_h=6.0, min_savings_pct=20, cooldown_s=0))
    migrate = r.policy("migrate")
    assert migrate.migrations == 1
    assert migrate.total_cost < r.policy("spot-once").total_cost
    assert r.policy("optimum").total_cost <= migrate.total_cost


def test_migration_policy_runs_the_watch_loops_decide(monkeypatch):
    calls = []
    real = decide_module.decide

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(decide_module, "decide", spy)
    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([12.0] * 10, UP)})
    r = run(t, job(duration_h=3.0, deadline=START + timedelta(hours=8)))
    # Asked where something may change (router.core.backtest_replay): for each of migrate and
    # deadline-aware at arrival and in the step the job finishes — nothing changes between on
    # these flat prices (the step replay asks at each of the 3 steps).
    assert len(calls) == 4
    assert r.policy("migrate").total_cost == pytest.approx(36.0)


def test_diverging_decide_changes_the_backtest(monkeypatch):
    """If the backtest had its own copy of the rules, patching decide() would change nothing."""
    from router.core.decision_model import WAIT, Decision, Numbers

    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([12.0] * 10, UP)})
    before = run(t).policy("migrate").total_cost
    monkeypatch.setattr(
        decide_module, "decide", lambda *a, **k: Decision(WAIT, None, "never", Numbers(0.0))
    )
    after = run(t).policy("migrate")
    assert before > 0 and after.total_cost == 0 and after.unfinished == 1


def test_deadline_aware_goes_back_to_the_spot_zone_it_lost_once_spot_returns() -> None:
    # One spot zone (the Can't Be Late setting, no zone block): out for one hour at step 2.
    spot_up = [True, True, False] + [True] * 7
    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([10.0] * 10, spot_up)})
    w = Workload("w", (job(deadline=START + timedelta(hours=9)),), zone_block_s=0)
    r = run_backtest(w, t, egress=EGRESS, interruption=INTERRUPTION, storage=STORAGE)
    aware = r.policy("deadline-aware")
    # Ahead of the line it waits the hour out, then runs the last 2 h on spot again.
    assert aware.deadline_misses == 0 and aware.interruptions == 1
    assert aware.total_cost == pytest.approx(4 * 10.0)
    assert all(pool == t.pools.index(AWS_SPOT) for _, _, pool, _ in aware.runs[0].segments)


def test_deadline_aware_arriving_in_an_outage_waits_while_the_slack_absorbs_it() -> None:
    # Spot has no capacity for the first 2 h; 12 h for 4 h of work. Behind the line from the
    # second hour, but the slack (11 h) is far above the reserve: it waits, as greedy does.
    spot_up = [False, False] + [True] * 8
    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([10.0] * 10, spot_up)})
    w = Workload("w", (job(deadline=START + timedelta(hours=12)),), zone_block_s=0)
    r = run_backtest(w, t, egress=EGRESS, interruption=INTERRUPTION, storage=STORAGE)
    aware = r.policy("deadline-aware")
    assert aware.deadline_misses == 0 and aware.total_cost == pytest.approx(4 * 10.0)


def test_no_policy_takes_spot_dearer_than_on_demand() -> None:
    # Issue 20: spot at $5.00 next to on-demand at $3.06 — every policy stayed on spot, 63 %
    # above the baseline. Same pools as above: on-demand in us-east-1, spot in us-east-1a.
    t = trace({AWS_OD: ([3.06] * 10, UP), AWS_SPOT: ([5.0] * 10, UP)})
    jobs = (job(), job(name="due", deadline=START + timedelta(hours=6)))
    r = run_backtest(
        Workload("w", jobs), t, egress=EGRESS, interruption=INTERRUPTION, storage=STORAGE,
        policy_set=(*policies("aws"), GreedyDeadline()),
    )  # fmt: skip
    for p in r.policies:
        assert p.total_cost == pytest.approx(2 * 4 * 3.06), p.name
        assert all(t.pools[pool] == AWS_OD for run in p.runs for _, _, pool, _ in run.segments)


def test_migrate_keeps_a_deadline_the_money_rules_alone_would_miss() -> None:
    # Issue 20 defect 3: spot every other hour; 4 h of work, 45-min checkpoints, due in 5 h.
    # Chasing spot loses work at every interruption; migrate now keeps the deadline too.
    spot_up = [True, False] * 5
    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([10.0] * 10, spot_up)})
    due = job(checkpoint_interval_s=2700.0, restore_overhead_s=600.0,
              deadline=START + timedelta(hours=5))  # fmt: skip
    w = Workload("w", (due,), zone_block_s=0, handover_s=300)
    r = run_backtest(w, t, egress=EGRESS, interruption=INTERRUPTION, storage=STORAGE)
    for name in ("migrate", "deadline-aware"):
        assert r.policy(name).deadline_misses == 0, name


def test_deadline_margin_is_the_jobs_not_the_steps() -> None:
    # Issue 20 defect 2: hourly prices, no outage. 4 h of work due 5.2 h after arrival: 1.2 h
    # of slack, more than the job's own margin (10 min restore + 30 min checkpoint interval +
    # route watch's minute) though less than one that counted the hour-long step — spot only.
    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([10.0] * 10, UP)})
    due = job(checkpoint_interval_s=1800.0, restore_overhead_s=600.0,
              deadline=START + timedelta(hours=5.2))  # fmt: skip
    r = run_backtest(
        Workload("w", (due,)), t, egress=EGRESS, interruption=INTERRUPTION, storage=STORAGE,
        policy_set=(*policies("aws"), GreedyDeadline()),
    )  # fmt: skip
    for name in ("migrate", "deadline-aware", "greedy-deadline"):
        assert r.policy(name).total_cost == pytest.approx(4 * 10.0), name
        assert r.policy(name).deadline_misses == 0


def test_a_waiting_job_goes_on_demand_inside_the_step_when_its_slack_runs_out() -> None:
    # No spot at all, hourly steps: 4 h of work due 4.9 h after arrival. Waiting until the
    # next hour would leave 3.9 h for it; route watch (every minute) goes on-demand once the
    # slack reaches the margin, and so does the backtest, inside the first step.
    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([10.0] * 10, [False] * 10)})
    due = job(checkpoint_interval_s=1800.0, restore_overhead_s=600.0,
              deadline=START + timedelta(hours=4.9))  # fmt: skip
    r = run_backtest(
        Workload("w", (due,)), t, egress=EGRESS, interruption=INTERRUPTION, storage=STORAGE,
        policy_set=(*policies("aws"), GreedyDeadline()),
    )  # fmt: skip
    for name in ("deadline-aware", "greedy-deadline"):
        run_ = r.policy(name).runs[0]
        assert not run_.deadline_missed, (name, run_.finished_at)
        assert START + timedelta(hours=4) < run_.finished_at <= due.deadline  # type: ignore[operator]
        assert run_.cost == pytest.approx(4 * 40.0)


def test_the_optimum_bounds_a_policy_that_starts_inside_a_step() -> None:
    # 1 h of work due in 1.5 h; spot only from the second hour. deadline-aware waits part of
    # the first hour, hedges on on-demand for the rest of it, then finishes on spot at $5:
    # $17.17. The optimum used to plan whole steps (on-demand for the first hour, $20); a step
    # may run any part of itself now: half an hour of each, $12.50.
    t = trace({AWS_OD: ([20.0] * 10, UP), AWS_SPOT: ([5.0] * 10, [False] + [True] * 9)})
    due = job(duration_h=1.0, checkpoint_interval_s=600.0, deadline=START + timedelta(hours=1.5))
    r = run_backtest(Workload("w", (due,), zone_block_s=0), t, egress=EGRESS,
                     interruption=INTERRUPTION, storage=STORAGE)  # fmt: skip
    aware = r.policy("deadline-aware")
    assert aware.deadline_misses == 0 and aware.total_cost < 20.0
    assert r.policy("optimum").total_cost <= aware.total_cost
    assert r.policy("optimum").total_cost == pytest.approx(0.5 * 20.0 + 0.5 * 5.0)


def test_optimum_dodges_outages_and_picks_cheap_hours():
    spot_up = [True, False, True, True, True, True, True, True, True, True]
    t = trace(
        {
            AWS_OD: ([40.0] * 10, UP),
            AWS_SPOT: ([10.0, 10.0, 6.0, 6.0] + [10.0] * 6, spot_up),
        }
    )
    # No policy waits for spot (spot_wait 0): the optimum must end when the slowest one does.
    r = run(t, job(duration_h=3.0, spot_wait_s=0.0))
    best = r.policy("optimum")
    # Step 0 on spot $10, step 1 spot is down: on-demand $40, then spot at $6.
    assert best.total_cost == pytest.approx(10 + 40 + 6)
    assert best.runs[0].migrations == 2
    # With a wait for spot deadline-aware ends later, so the optimum may wait out the outage.
    assert run(t, job(duration_h=3.0)).policy("optimum").total_cost == pytest.approx(10 + 6 + 6)


def test_deadline_job_optimum_may_wait_for_a_cheaper_window():
    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([20.0, 20.0, 20.0] + [5.0] * 7, UP)})
    r = run(t, job(duration_h=2.0, deadline=START + timedelta(hours=8)))
    assert r.policy("optimum").total_cost == pytest.approx(10.0)
    no_deadline = run(t, job(duration_h=2.0))
    assert no_deadline.policy("optimum").total_cost == pytest.approx(40.0)


def test_unplaceable_job_is_reported_not_counted():
    t = trace({AWS_OD: ([40.0] * 10, UP)})
    r = run(t, job(), job(name="big", gpu="H100-80GB"))
    assert r.unplaceable == ("big",)
    assert r.unplaceable_reasons == (("big", "no H100-80GB×8 pool is priced at its arrival"),)
    assert r.jobs == 2 and r.jobs_ran == 1
    assert r.could_not_run() == (
        "1 of 2 jobs could not run (big: 1 no H100-80GB×8 pool is priced at its arrival) — "
        "totals and savings over the 1 that ran"
    )
    assert r.policy("on-demand").total_cost == pytest.approx(160.0)


def test_a_job_the_planner_places_nowhere_says_which_filter_removed_its_pools():
    t = trace({AWS_OD: ([40.0] * 10, UP)})
    r = run(t, job(), job(name="gcp-only", clouds=("gcp",)))
    assert r.unplaceable == ("gcp-only",)
    (_, why), = r.unplaceable_reasons
    assert why.startswith("none of the 1 A100-80GB×8 pools priced at its arrival fits it: ")
    assert "failed the cloud filter" in why


def test_result_json_has_every_policy_with_savings_and_gap():
    t = trace({AWS_OD: ([40.0] * 10, UP), AWS_SPOT: ([12.0] * 10, UP)})
    data = run(t).to_json()
    names = [p["name"] for p in data["policies"]]
    assert names == [
        "on-demand", "spot-fallback", "spot-once", "migrate", "deadline-aware", "optimum",
    ]  # fmt: skip
    assert data["policies"][0]["savings_vs_baseline_pct"] == 0
    assert data["policies"][-1]["gap_to_optimum_pct"] == 0


def test_trace_from_points_holds_the_last_price_per_step():
    points = [
        (START, AWS_SPOT, 10.0),
        (START + timedelta(minutes=90), AWS_SPOT, 12.0),
        (START + timedelta(hours=3, minutes=5), AWS_SPOT, 8.0),
    ]
    t = trace_from_points(points, step_s=3600.0, end=START + timedelta(hours=5))
    assert t.prices[0] == (10.0, 12.0, 12.0, 8.0, 8.0)
    assert t.available[0] == (True,) * 5


# --- synthetic market ----------------------------------------------------------------------

A100 = Shape(
    "A100-80GB",
    8,
    80,
    (
        CloudOffer("aws", "p4de.24xlarge", 40.97, 0.4, ("us-east-1", "us-west-2", "eu-west-1")),
        CloudOffer("gcp", "a2-ultragpu-8g", 40.44, 0.4, ("us-central1", "europe-west4")),
        CloudOffer("azure", "Standard_ND96amsr_A100_v4", 32.77, 0.45, ("eastus", "westeurope")),
    ),
)


def test_synthetic_trace_is_pure_given_its_seed():
    a = synthetic_trace(MarketModel((A100,)), start=START, days=2, step_s=3600, seed=3)
    b = synthetic_trace(MarketModel((A100,)), start=START, days=2, step_s=3600, seed=3)
    c = synthetic_trace(MarketModel((A100,)), start=START, days=2, step_s=3600, seed=4)
    assert a == b and a.prices != c.prices


def test_synthetic_spreads_match_the_calibration():
    t = synthetic_trace(
        MarketModel((A100,), diurnal_amplitude=0, noise=0), start=START, days=1, step_s=3600, seed=5
    )
    spot = {
        p: t.prices[i][0] / next(
            t.prices[j][0] for j, q in enumerate(t.pools)
            if q.market == "on-demand" and q.cloud == p.cloud and q.region == p.region
        ) for i, p in enumerate(t.pools) if p.market == "spot"
    }  # fmt: skip
    by_region: dict[tuple[str, str], list[float]] = {}
    for p, ratio in spot.items():
        by_region.setdefault((p.cloud, p.region), []).append(ratio)
    zone_spread = [max(v) / min(v) - 1 for v in by_region.values()]
    assert max(zone_spread) <= 2 * 0.03 / 0.97 + 1e-9
    assert all(0 < r <= 1 for r in spot.values())


def test_synthetic_workload_meets_its_gpu_hours_per_day():
    w = synthetic_workload(
        name="team", start=START, days=30, gpu_hours_per_day=200,
        mix=(JobMix("A100-80GB", 8),), seed=1,
    )  # fmt: skip
    total = sum(j.gpu_hours for j in w.jobs)
    assert 6000 <= total <= 6000 + 36 * 8
    assert all(j.deadline is None or j.deadline > j.arrival for j in w.jobs)
    assert w == synthetic_workload(
        name="team", start=START, days=30, gpu_hours_per_day=200,
        mix=(JobMix("A100-80GB", 8),), seed=1,
    )  # fmt: skip


# --- the save on a spot notice ----------------------------------------------------------------


def test_a_preemption_loses_only_the_notice_window_when_the_job_saves_on_the_notice() -> None:
    # Spot up for 1.5 h, then gone for good; 2 h checkpoints, so the last periodic checkpoint
    # is at 0 h. Without a save on the notice spot-fallback recomputes the 1.5 h it did; with
    # AWS's two-minute notice (docs.aws.amazon.com/AWSEC2/latest/UserGuide/
    # spot-instance-termination-notices.html) the library saves on it and only those 2 minutes
    # are lost.
    t = Trace(START, 1800.0, (AWS_OD, AWS_SPOT), ((40.0,) * 12, (10.0,) * 12),
              ((True,) * 12, (True,) * 3 + (False,) * 9))  # fmt: skip
    due = job(duration_h=3.0, checkpoint_interval_s=7200.0)
    kept = {}
    for notice in ((), (("aws", 120.0),)):
        w = Workload("w", (due,), zone_block_s=86400.0, handover_s=0.0, notice_s=notice)
        r = run_backtest(w, t, egress=EGRESS, interruption=INTERRUPTION, storage=STORAGE)
        fallback = r.policy("spot-fallback")
        assert fallback.interruptions == 1
        kept[notice] = fallback.recomputed_h
    assert kept[()] == pytest.approx(1.5)
    assert kept[(("aws", 120.0),)] == pytest.approx(120.0 / 3600.0)


def test_the_policies_weigh_the_notice_window_not_the_interval_as_work_at_risk() -> None:
    from router.core.backtest_model import job_rules

    due = job(checkpoint_interval_s=1800.0, clouds=("aws", "gcp"))
    bare = Workload("w", (due,))
    saved = Workload("w", (due,), notice_s=(("aws", 120.0), ("gcp", 30.0)))
    assert job_rules(due, bare, EGRESS, 3600.0).checkpoint_interval_s == 1800.0
    # The longest notice of the job's clouds: never less than the simulation loses.
    assert job_rules(due, saved, EGRESS, 3600.0).checkpoint_interval_s == 120.0


def test_a_moves_save_is_kept_when_the_next_periodic_checkpoint_is_older() -> None:
    # 45-min checkpoints, 50-min restore, no save on the notice. At 1 h migrate moves to the
    # cheaper GCP zone and saves (1.0 h of work); the restore leaves 10 minutes of work in that
    # hour (1.17 h, whose last periodic checkpoint is 0.75 h); the zone is lost at 2 h. The
    # move's save holds 1.0 h, so 0.17 h is recomputed, not 0.42 h.
    t = trace({AWS_SPOT: ([20.0] * 10, UP),
               GCP_SPOT: ([30.0] + [5.0] * 9, [True, True] + [False] * 8)})  # fmt: skip
    due = job(checkpoint_interval_s=2700.0, restore_overhead_s=3000.0, min_savings_pct=0.0,
              cooldown_s=0.0, clouds=("aws", "gcp"))  # fmt: skip
    w = Workload("w", (due,), zone_block_s=86400.0, handover_s=0.0)
    r = run_backtest(w, t, egress=EGRESS, interruption=INTERRUPTION, storage=STORAGE)
    moved = r.policy("migrate")
    assert moved.migrations >= 1 and moved.interruptions == 1
    assert moved.recomputed_h == pytest.approx(1 / 6)
