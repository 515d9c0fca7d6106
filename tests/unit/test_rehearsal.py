"""A rehearsal's plan (router.core.rehearsal): the trace as a local market on an accelerated
clock, the jobs as job.yaml on that clock, the prediction's inputs; and its verdict
(router.core.rehearsal_compare)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from router.checkpoint.rehearsal_job import digest
from router.contract.local_market import LocalBehaviour, LocalMarket
from router.core.backtest_model import JobRun, Pool, Trace, Workload, WorkloadJob
from router.core.job.problems import parse_job
from router.core.rehearsal import (
    Clock,
    Measured,
    chosen_jobs,
    cut_trace,
    expected_state,
    job_document,
    job_names,
    job_plan,
    local_trace,
    market_rows,
    predicted_workload,
    region_names,
    regions_for,
)
from router.core.rehearsal_compare import (
    Guarantees,
    RanJob,
    Stint,
    causes_of,
    compare_job,
    verdict,
)

T0 = datetime(2023, 4, 22, tzinfo=UTC)
REAL = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)


def _pool(zone: str | None, market: str, region: str = "us-east-1", itype: str = "p3.2xlarge",
          gpus: int = 1) -> Pool:  # fmt: skip
    return Pool("aws", region, zone, itype, market, "V100", gpus)


def _trace(available: dict[int, list[bool]] | None = None, steps: int = 6) -> Trace:
    pools = (_pool(None, "on-demand"), _pool("us-east-1c", "spot"), _pool("us-east-1f", "spot"))
    prices = ((3.06,) * steps, (1.02,) * steps, (1.02,) * (steps - 2) + (math.nan,) * 2)
    avail = [[True] * steps for _ in pools]
    for i, series in (available or {}).items():
        avail[i] = series
    return Trace(T0, 60.0, pools, prices, tuple(tuple(a) for a in avail))


def test_each_pool_is_a_local_region_named_after_its_zone_or_region() -> None:
    pools = [_pool(None, "on-demand"), _pool("us-east-1c", "spot"),
             _pool("us-west-2a", "spot", "us-west-2", "p3.2xlarge"),
             _pool("us-west-2a", "spot", "us-west-2", "p3.16xlarge", 8)]  # fmt: skip
    assert region_names(pools) == (
        "local-us-east-1", "local-us-east-1c", "local-us-west-2a-p3-2xlarge",
        "local-us-west-2a-p3-16xlarge",
    )  # fmt: skip


def test_the_market_changes_where_the_trace_does_prices_per_real_hour() -> None:
    trace = _trace({1: [True, True, False, False, True, True]})
    regions = region_names(trace.pools)
    rows = market_rows(trace, regions, speed=400, capacity=3)
    spot_c = [(r.offset_s, r.capacity, r.price_per_hour, r.offered) for r in rows
              if r.region == "local-us-east-1c"]  # fmt: skip
    # out: withdrawn, as the backtest's policies see it (no candidate there)
    assert spot_c == [(0.0, 3, 408.0, True), (120.0, 0, 0.0, False), (240.0, 3, 408.0, True)]
    # a pool that stops being offered (no price) is withdrawn from then on
    spot_f = [(r.offset_s, r.offered) for r in rows if r.region == "local-us-east-1f"]
    assert spot_f == [(0.0, True), (240.0, False)]
    assert [r.price_per_hour for r in rows if r.market == "on-demand"] == [1224.0]
    # unannounced: still offered, but with no capacity — launches there are refused
    refused = market_rows(trace, regions, speed=400, capacity=3, announced=False)
    assert [(r.offset_s, r.capacity, r.offered) for r in refused
            if r.region == "local-us-east-1c"] == [(0.0, 3, True), (120.0, 0, True),
                                                   (240.0, 3, True)]  # fmt: skip


def test_the_market_file_reads_back_as_the_rows_it_was_written_from() -> None:
    from router.contract.local_market import parse_trace
    from router.flows.rehearse_project import trace_csv

    trace = _trace({1: [True, False, True, True, True, True]})
    for announced in (True, False):
        rows = market_rows(trace, region_names(trace.pools), speed=400, capacity=3,
                           announced=announced)  # fmt: skip
        assert parse_trace(trace_csv(rows)) == rows


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), min_size=4, max_size=30), st.floats(1, 3600))
def test_a_node_sees_a_zone_out_exactly_when_the_trace_has_it_out(
    flags: list[bool], speed: float
) -> None:
    steps = len(flags)
    trace = _trace({1: flags}, steps=steps)
    regions = region_names(trace.pools)
    clock = Clock(T0, REAL, speed)
    market = LocalMarket(
        market_rows(trace, regions, speed=speed, capacity=2), REAL, LocalBehaviour(time_scale=speed)
    )
    for step in range(steps):
        real = clock.real_at(trace.at(step) + timedelta(seconds=30))  # inside the step
        row = market.at(real).get(("local-us-east-1c", "spot"))
        assert (row is not None and row.capacity > 0) == flags[step]


def test_the_prediction_replays_the_same_series_under_local_names() -> None:
    trace = _trace({2: [True, False, True, True, True, True]})
    local = local_trace(trace, region_names(trace.pools), "local-process")
    by_name = {p.region: i for i, p in enumerate(local.pools)}
    assert {p.cloud for p in local.pools} == {"local"}
    assert local.available[by_name["local-us-east-1f"]] == trace.available[2]
    assert local.prices[by_name["local-us-east-1"]] == trace.prices[0]


def _job(name: str = "job-017", **changes: object) -> WorkloadJob:
    job = WorkloadJob(name, T0 + timedelta(hours=2), 7.0, "V100", 1,
                      deadline=T0 + timedelta(hours=20), spot_wait_s=43200.0)  # fmt: skip
    return replace(job, **changes)  # type: ignore[arg-type]


def test_a_job_runs_on_the_real_clock_a_valid_job_yaml() -> None:
    clock = Clock(T0, REAL, 400.0)
    plan = job_plan(_job(), "job-017", clock)
    assert plan.steps == 7 * 60 and math.isclose(plan.work_s, 7 * 3600 / 400)
    assert plan.submit_at == REAL + timedelta(hours=2) / 400
    doc = job_document(plan, clock, command=["python", "job.py"], env={"A": "1"})
    job = parse_job(doc, "rehearsal")
    assert math.isclose(job.duration_hours, 7 / 400)
    assert job.checkpoint is not None and math.isclose(job.checkpoint.interval_s, 4.5)
    assert math.isclose(job.checkpoint.restore_overhead_s, 1.5)
    assert math.isclose(job.migration.cooldown_s, 9.0)
    assert math.isclose(job.migration.spot_wait_s, 108.0)
    assert job.deadline == REAL + timedelta(hours=20) / 400
    assert job.resources.clouds == ("local",) and job.market == "auto"


def test_jobs_are_chosen_by_arrival_inside_the_cut_and_named_for_the_local_target() -> None:
    jobs = (_job("b", arrival=T0 + timedelta(hours=1)), _job("A_1"), _job("late",
            arrival=T0 + timedelta(days=2)))  # fmt: skip
    workload = Workload("w", jobs)
    trace = cut_trace(_trace(steps=3000), days=1)
    assert trace.steps == 1440
    assert [j.name for j in chosen_jobs(workload, trace, count=None)] == ["b", "A_1"]
    assert [j.name for j in chosen_jobs(workload, trace, count=1)] == ["b"]
    assert job_names([_job("A_1"), _job("a-1"), _job("9x")]) == {
        "A_1": "a-1", "a-1": "a-1-2", "9x": "j-9x",
    }  # fmt: skip


def test_a_job_is_kept_to_the_regions_of_its_gpus() -> None:
    trace = replace(_trace(), pools=(_pool(None, "on-demand"), _pool("us-east-1c", "spot"),
                                     _pool("us-east-1f", "spot", gpus=8)))  # fmt: skip
    regions = region_names(trace.pools)
    assert regions_for(_job(), trace, regions) == ("local-us-east-1", "local-us-east-1c")
    assert regions_for(_job(gpu_count=8), trace, regions) == ("local-us-east-1f",)


def test_the_prediction_is_fed_what_the_run_measured() -> None:
    clock = Clock(T0, REAL, 400.0)
    plans = [job_plan(_job(data_cloud="aws", data_gb=40.0, checkpoint_gb=5.0), "job-017", clock)]
    started = T0 + timedelta(hours=3)
    measured = Measured(900.0, {"job-017": 2400.0}, {"job-017": started}, launch_s=1200.0,
                        decision_period_s=3000.0)  # fmt: skip
    workload = predicted_workload(Workload("w", (plans[0].job,)), plans, measured, notice_s=120)
    job = workload.jobs[0]
    assert (job.restore_overhead_s, job.arrival, job.clouds) == (2400.0, started, ("local",))
    assert job.data_gb == 0 and job.checkpoint_gb == 0 and job.data_cloud is None
    assert workload.handover_s == 900.0 and workload.notice_s == (("local", 120),)
    assert workload.launch_s == 1200.0  # the engine's steps: a move's decision to its stack up
    # How fast the watchers acted, which their slack test counted; and route deploy's placing.
    assert workload.decision_period_s == 3000.0 and workload.first_placement == "deploy"


def test_the_decision_period_is_what_each_watchers_slack_test_counted(tmp_path: Path) -> None:
    from router.flows.rehearse_project import RehearsalDirs
    from router.flows.rehearse_result import decision_period_s

    dirs = RehearsalDirs(tmp_path)
    dirs.logs.mkdir(parents=True)
    assert decision_period_s(dirs, 1.0) is None  # no pass: nothing measured

    def log(name: str, durations: list[float]) -> None:
        lines = [{"event": "start"}] + [
            {"event": "pass", "ok": True, "duration_s": d, "time": f"2026-12-08T00:00:{i:02d}"}
            for i, d in enumerate(durations)
        ]
        (dirs.logs / name).write_text("".join(json.dumps(e) + "\n" for e in lines))

    log("watch-1.log", [0.5, 12.0, 0.5])  # it counted 1 (interval), 1, then 12 (a slow pass)
    log("watch-2.log", [3.0])  # 1: nothing before its first pass
    assert decision_period_s(dirs, 1.0) == (1 + 1 + 12 + 1) / 4


def test_the_job_program_and_the_router_agree_on_the_state_of_work_done_once() -> None:
    for steps in (0, 1, 7, 420):
        assert digest(steps) == expected_state(steps)
    assert digest(10) != expected_state(11)


def _ran(**changes: object) -> RanJob:
    ran = RanJob("j", 10.0, (Stint("local-a", "spot", T0, T0 + timedelta(hours=5)),), 0, 0, 1,
                 0, 1, 0.1, T0 + timedelta(hours=5), None, 300, 300, True)  # fmt: skip
    return replace(ran, **changes)  # type: ignore[arg-type]


def _run(cost: float = 10.0, interruptions: int = 1) -> JobRun:
    run = JobRun("j", cost=cost, interruptions=interruptions, finished_at=T0 + timedelta(hours=5))
    run.segments = [(0, 300, 0, cost)]
    return run


def _local() -> Trace:
    pools = (Pool("local", "local-a", None, "local-process", "spot", "V100", 1),)
    return Trace(T0, 60.0, pools, ((1.0,) * 400,), ((True,) * 400,))


def test_a_job_within_five_percent_with_the_same_preemptions_needs_no_cause() -> None:
    seen = compare_job(_ran(cost=10.4), _run(), _local())
    assert not seen.differs and seen.causes == ()
    assert math.isclose(seen.cost_diff_pct, 4.0)


def test_each_difference_is_named_from_what_the_run_measured() -> None:
    ran = _ran(cost=14.0, chaos_preemptions=1, notice_lags_s=(30.0, 900.0),
               engine_steps_s=(("replace", 5000.0),), lease_skips=3,
               rolled_back=("job j: no placement launched (LocalCapacityExhausted)",),
               failed_over=("local-a spot → local-od on-demand",), waited_s=4000.0,
               stints=(Stint("local-b", "spot", T0, None),))  # fmt: skip
    causes = causes_of(ran, _run(), (Stint("local-a", "spot", T0, None),))
    assert [c.split(":")[0] for c in causes] == [
        "chaos", "late notice", "slow engine step", "launch refused", "launch refused",
        "engine busy", "lease held", "decision at a different moment",
    ]  # fmt: skip
    assert "15 min" in causes[1] and "LocalCapacityExhausted" in causes[3]
    assert "local-a spot → local-od on-demand" in causes[4]
    same = (Stint("local-a", "spot", T0, None),)
    assert causes_of(_ran(cost=14.0), _run(), same) == ("unexplained",)
    # an engine step no longer than a cloud's launch is no cause
    assert causes_of(_ran(engine_steps_s=(("replace", 500.0),)), _run(), same) == ("unexplained",)


def test_billing_long_after_the_finish_is_named_a_slow_teardown() -> None:
    """Found by a rehearsal with three watchers: a job on one on-demand placement, 8.5 % dearer
    than predicted, said "unexplained" — its stack was destroyed 23 simulated minutes after it
    finished, and the prediction stops billing at the finish."""
    same = (Stint("local-a", "spot", T0, None),)
    finished = T0 + timedelta(hours=5)
    late = _ran(cost=11.0, stints=(Stint("local-a", "spot", T0, finished + timedelta(minutes=23)),))
    [cause] = causes_of(late, _run(), same)
    assert cause.startswith("slow teardown: billed 0.38 h after it finished")
    quick = _ran(cost=11.0, stints=(Stint("local-a", "spot", T0, finished + timedelta(minutes=5)),))
    assert causes_of(quick, _run(), same) == ("unexplained",)  # no longer than a cloud's launch


def test_the_verdict_holds_the_totals_deadlines_and_preemptions_to_the_prediction() -> None:
    late = T0 + timedelta(hours=4)
    ran = {"j": _ran(cost=10.2, deadline=late), "k": replace(_ran(cost=9.0, preemptions=2),
                                                             job="k")}  # fmt: skip
    runs = [replace(_run(), deadline=late), replace(_run(cost=9.3), job="k")]
    v = verdict(ran, runs, _local(), Guarantees(samples=10))
    assert math.isclose(v.realised, 19.2) and math.isclose(v.predicted, 19.3) and v.cost_met
    assert v.deadlines_met  # both missed the deadline
    assert not v.preemptions_met  # k: 2 against 1
    assert v.guarantees.held and v.all_finished
    chaos = verdict(ran, runs, _local(), Guarantees(samples=1, leftovers=("pid 1",)), chaos=True)
    assert chaos.tolerance_pct == 7.0 and not chaos.guarantees.held


def test_a_job_deployed_where_the_prediction_waited_for_spot_is_named_so() -> None:
    ran = _ran(cost=30.0, stints=(Stint("local-od", "on-demand", T0, None),))
    later = (Stint("local-a", "spot", T0 + timedelta(hours=3), None),)
    [cause] = causes_of(ran, _run(), later)
    assert cause.startswith("decision at a different moment: placed at submission on local-od")
    assert "route deploy takes what is offered" in cause


def _skip(holder: str) -> dict[str, str]:
    return {"event": "decision", "action": "skipped",
            "reason": f"lease held by {holder} since 2026-12-07 17:08:11 UTC"}  # fmt: skip


def test_a_lease_is_a_delay_only_when_held_by_a_router_not_at_work_on_the_job() -> None:
    """The job's own deploy (before it is placed) and another of --watchers acting on the job
    are no delay; a watcher --chaos killed, or any other router, is (rehearse_result)."""
    from router.flows.rehearse_result import lease_delays

    decided = [
        _skip("`route deploy` (root@vm, pid 4309)"),
        _skip("`route watch` (root@vm, pid 4240)"),  # a watcher at work
        _skip("`route watch` (root@vm, pid 4241)"),  # killed by --chaos
        _skip("`route migrate` (alice@vm, pid 900)"),
        {"event": "decision", "action": "stay", "reason": "lease held by nobody"},
    ]
    assert lease_delays(decided, working={"4240"}) == 2
    assert lease_delays(decided, working={"4240", "4241", "900"}) == 0


def test_every_watchers_log_is_read_in_time_order(tmp_path: Path) -> None:
    from router.flows.rehearse_project import RehearsalDirs
    from router.flows.rehearse_result import _watch_events

    dirs = RehearsalDirs(tmp_path)
    dirs.logs.mkdir(parents=True, exist_ok=True)
    lines = {0: ["2026-12-07T17:00:03+00:00", "2026-12-07T17:00:01.500000+00:00"],
             1: ["2026-12-07T17:00:02+00:00", "not json"], 2: ["2026-12-07T17:00:01+00:00"]}
    for i, times in lines.items():
        dirs.watch_log(i).write_text("\n".join(
            t if t == "not json" else json.dumps({"time": t, "watcher": i}) for t in times) + "\n")
    assert [dirs.watch_log(i).name for i in range(3)] == ["watch.log", "watch-1.log",
                                                          "watch-2.log"]
    assert [e["watcher"] for e in _watch_events(dirs)] == [2, 0, 1, 0]
