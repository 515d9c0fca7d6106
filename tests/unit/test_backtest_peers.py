"""The peer users would run instead — SkyPilot's managed-job recovery — replayed in the backtest.

Each behaviour asserted is SkyPilot's, from its source (docs/backtest.md, "The peer", names the
files and commits): the job status poll every 15 s (sky/jobs/utils.py
JOB_STATUS_CHECK_GAP_SECONDS), the launch backoff (sky/utils/common_utils.py Backoff: 60 s
initial — StrategyExecutor.RETRY_INIT_GAP_SECONDS — ×1.6, at most 5× the initial), the
recovery strategies (sky/jobs/recovery_strategy.py: FAILOVER retries the launched region first,
EAGER_NEXT_REGION blocks it first, each for `_launch(max_retry=3)`, then anywhere), the launch
order (sky/catalog/common.py get_region_zones: by price, region, zone).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from router.config.datafiles import load_egress, load_interruption_model, load_storage_prices
from router.core.backtest import run_backtest
from router.core.backtest_model import BacktestResult, Pool, Trace, Workload, WorkloadJob
from router.core.backtest_peers import backoff_s, skypilot_policies
from router.core.backtest_policies import policies

START = datetime(2026, 11, 1, tzinfo=UTC)


def spot(region: str, zone: str) -> Pool:
    return Pool("aws", region, zone, "p4de.24xlarge", "spot", "A100-80GB", 8, 80, 96, 1152.0)


EAST_A, EAST_B = spot("us-east-1", "us-east-1a"), spot("us-east-1", "us-east-1b")
WEST_A = spot("us-west-2", "us-west-2a")
EAST_OD = Pool("aws", "us-east-1", None, "p4de.24xlarge", "on-demand", "A100-80GB", 8, 80, 96,
               1152.0)  # fmt: skip


def replay(
    series: dict[Pool, tuple[float, list[bool]]],
    *,
    step_s: float = 3600.0,
    arrival_s: float = 0.0,
    hours: float = 6.0,
    deadline_h: float | None = None,
) -> BacktestResult:
    """One job of `hours` (checkpoints every second: no work lost) on constant prices."""
    pools = tuple(series)
    steps = len(next(iter(series.values()))[1])
    trace = Trace(
        START, step_s, pools, tuple((series[p][0],) * steps for p in pools),
        tuple(tuple(series[p][1]) for p in pools),
    )  # fmt: skip
    arrival = START + timedelta(seconds=arrival_s)
    job = WorkloadJob(
        "train", arrival, hours, "A100-80GB", 8, checkpoint_interval_s=1.0,
        restore_overhead_s=0.0, clouds=("aws",),
        deadline=None if deadline_h is None else arrival + timedelta(hours=deadline_h),
    )  # fmt: skip
    return run_backtest(
        Workload("peers", (job,), handover_s=0.0, zone_block_s=3600.0), trace,
        egress=load_egress(), interruption=load_interruption_model(),
        storage=load_storage_prices(), policy_set=(*policies("aws"), *skypilot_policies()),
    )  # fmt: skip


def run_of(r: BacktestResult, name: str):  # type: ignore[no-untyped-def]
    (run,) = r.policy(name).runs
    return run


def pools_used(r: BacktestResult, name: str) -> list[str]:
    return [r.pools[pool].zone or "-" for _, _, pool, _ in run_of(r, name).segments]


def test_the_backoff_is_skypilots():
    # Backoff(initial 60 s, multiplier 1.6, max factor 5), its jitter at its mean.
    assert [round(backoff_s(n), 2) for n in range(1, 7)] == [60, 96, 153.6, 245.76, 300, 300]


def test_eager_next_region_leaves_the_preempted_region_failover_stays_in_it():
    # us-east-1a ($10) is lost at 2 h; us-east-1b ($12) and us-west-2a ($11) have capacity.
    # EAGER_NEXT_REGION blocks us-east-1 on its first try; FAILOVER tries only us-east-1 first.
    up, lost = [True] * 8, [True, True] + [False] * 6
    r = replay({EAST_A: (10.0, lost), EAST_B: (12.0, up), WEST_A: (11.0, up)})
    assert pools_used(r, "skypilot-eager") == ["us-east-1a", "us-west-2a"]
    assert pools_used(r, "skypilot-failover") == ["us-east-1a", "us-east-1b"]
    assert r.policy("skypilot-eager").total_cost == pytest.approx(2 * 10 + 4 * 11)
    assert r.policy("skypilot-failover").total_cost == pytest.approx(2 * 10 + 4 * 12)
    assert run_of(r, "skypilot-eager").interruptions == 1


def test_eager_goes_back_to_the_region_after_three_tries_elsewhere():
    # One region only: EAGER_NEXT_REGION's region-blocked launch fails at 0, 60 and 156 s
    # (backoff 60, 96), then it launches anywhere at once — us-east-1b, 156 s after the loss.
    # FAILOVER takes us-east-1b at the loss.
    steps = 6 * 60 + 10
    up, lost = [True] * steps, [True] * 120 + [False] * (steps - 120)
    r = replay({EAST_A: (10.0, lost), EAST_B: (12.0, up)}, step_s=60.0)
    eager, failover = run_of(r, "skypilot-eager"), run_of(r, "skypilot-failover")
    assert pools_used(r, "skypilot-failover") == ["us-east-1a", "us-east-1b"]
    assert failover.finished_at == START + timedelta(hours=6)
    assert eager.finished_at == START + timedelta(hours=6, seconds=156)


def test_with_no_capacity_anywhere_the_controller_retries_with_backoff_until_it_returns():
    # The only zone is down from 1 h for 10 min (60-s steps). Both strategies: the first step's
    # 3 tries (1 h, +60, +156 s), then anywhere with a fresh backoff (+0, 60, 96, 153.6 s) fail;
    # the try at +245.76 s (1 h 11 min 51.36 s) finds the zone back.
    steps = 3 * 60
    zone = [True] * 60 + [False] * 10 + [True] * (steps - 70)
    r = replay({EAST_A: (10.0, zone)}, step_s=60.0, hours=2.0)
    back = 3600 + 156 + 60 + 96 + 153.6 + 245.76
    for name in ("skypilot-eager", "skypilot-failover"):
        run = run_of(r, name)
        assert run.finished_at == START + timedelta(seconds=back + 3600), name
        assert run.cost == pytest.approx(2 * 10.0), name  # nothing paid while it waits


def test_the_preemption_is_seen_at_the_next_job_status_poll():
    # The job starts 7 s into the trace: its controller polls at 7 s + 15 s × k. The zone is
    # lost at 2 h; the poll at 2 h 0 min 7 s sees it and relaunches in the other region then.
    up, lost = [True] * 8, [True, True] + [False] * 6
    r = replay({EAST_A: (10.0, lost), WEST_A: (11.0, up)}, arrival_s=7.0)
    run = run_of(r, "skypilot-eager")
    ran_s = 7200 - 7  # the work done before the loss, kept (a checkpoint every second)
    assert run.finished_at == START + timedelta(seconds=7200 + 7 + 6 * 3600 - ran_s)
    assert run.cost == pytest.approx(ran_s / 3600 * 10 + (6 * 3600 - ran_s) / 3600 * 11)


def test_on_demand_as_a_fallback_is_taken_when_spot_is_out_and_kept_to_the_end():
    # us-east-1a is out at 2 h for an hour; on-demand in us-east-1 at $30. The spot-only peer
    # waits (backoff up to 300 s: back at 3 h 1 min 51.36 s) and misses a 6.5 h deadline;
    # with on-demand listed it launches there at the loss and stays, spot back or not.
    zone = [True, True, False] + [True] * 7
    r = replay({EAST_A: (10.0, zone), EAST_OD: (30.0, [True] * 10)}, deadline_h=6.5)
    waited = 7200 + 156 + 60 + 96 + 153.6 + 245.76 + 300 * 10
    assert waited == pytest.approx(3 * 3600 + 111.36)
    eager = run_of(r, "skypilot-eager")
    assert eager.finished_at == START + timedelta(seconds=waited + 4 * 3600)
    assert eager.deadline_missed
    assert pools_used(r, "skypilot-eager+od") == ["us-east-1a", "-"]
    assert r.policy("skypilot-eager+od").total_cost == pytest.approx(2 * 10 + 4 * 30)
    assert not run_of(r, "skypilot-eager+od").deadline_missed
    assert not run_of(r, "deadline-aware").deadline_missed  # spotroute's keeps it too


def test_the_peers_run_in_policies_all_with_json_and_table():
    from router.core.backtest_policies import policy_set

    names = [p.name for p in policy_set("aws", "all")]
    assert names[-3:] == ["skypilot-eager", "skypilot-failover", "skypilot-eager+od"]
    assert "skypilot-eager" not in [p.name for p in policy_set("aws", "default")]


def test_the_peers_later_finishes_do_not_move_the_optimum():
    # Spot is out at 2 h for an hour and costs half from 7 h. spotroute's policies finish by 7 h;
    # the spot-only peer, waiting out its backoff, at 7 h 1 min 51 s — within the cheap hours.
    # The optimum's window stays spotroute's: the same with or without the peers replayed.
    zone = [True, True, False] + [True] * 9
    trace = Trace(START, 3600.0, (EAST_A, EAST_OD), ((10.0,) * 7 + (5.0,) * 5, (30.0,) * 12),
                  (tuple(zone), (True,) * 12))  # fmt: skip
    job = WorkloadJob("train", START, 6.0, "A100-80GB", 8, checkpoint_interval_s=1.0,
                      restore_overhead_s=0.0, clouds=("aws",))  # fmt: skip

    def run(chosen):  # type: ignore[no-untyped-def]
        return run_backtest(
            Workload("peers", (job,), handover_s=0.0, zone_block_s=3600.0), trace,
            egress=load_egress(), interruption=load_interruption_model(),
            storage=load_storage_prices(), policy_set=chosen,
        )  # fmt: skip

    with_peers, alone = run((*policies("aws"), *skypilot_policies())), run(policies("aws"))
    late = run_of(with_peers, "skypilot-eager").finished_at
    ours = max(run_of(with_peers, p.name).finished_at for p in policies("aws"))
    assert late == START + timedelta(hours=7, seconds=111.36) and ours <= START + timedelta(hours=7)
    assert with_peers.policy("optimum").total_cost == alone.policy("optimum").total_cost == 60.0
    # The peer pays less than that optimum: it bought the cheap hour with a later finish.
    assert with_peers.policy("skypilot-eager").total_cost < 60.0
