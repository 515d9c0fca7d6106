"""The hindsight optimum: a lower bound by construction (waiting is free), the partial first step,
and a cross-check against an independent search over every schedule on small random cases."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import router.core.hindsight as hindsight
from router.config.datafiles import load_egress, load_interruption_model, load_storage_prices
from router.core.backtest import run_backtest
from router.core.backtest_model import (
    JobContext,
    Pool,
    Trace,
    Workload,
    WorkloadJob,
    first_step,
    job_rules,
)
from router.core.hindsight import optimum_cost, price_matrix

START = datetime(2026, 11, 1, tzinfo=UTC)
EGRESS = load_egress()
INTERRUPTION = load_interruption_model()
STORAGE = load_storage_prices()


def pool(cloud: str, region: str, market: str, zone: str | None = None) -> Pool:
    itype = {"aws": "p4de.24xlarge", "gcp": "a2-ultragpu-8g"}[cloud]
    return Pool(cloud, region, zone, itype, market, "A100-80GB", 8, 80, 96, 1152.0, None)


AWS_OD = pool("aws", "us-east-1", "on-demand")
AWS_SPOT = pool("aws", "us-east-1", "spot", "us-east-1a")
AWS_SPOT_B = pool("aws", "us-east-1", "spot", "us-east-1b")
WEST_SPOT = pool("aws", "us-west-2", "spot", "us-west-2a")
GCP_SPOT = pool("gcp", "us-central1", "spot", "us-central1-a")
GCP_OD = pool("gcp", "us-central1", "on-demand")


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


def backtest(t: Trace, j: WorkloadJob, **kw: object):  # type: ignore[no-untyped-def]
    workload = Workload("w", (j,), **kw)  # type: ignore[arg-type]
    return run_backtest(workload, t, egress=EGRESS, interruption=INTERRUPTION, storage=STORAGE)


# --- the reproductions: the optimum was above every policy ---------------------------


def test_optimum_waits_out_a_price_spike_while_the_zone_is_blocked() -> None:
    # One spot zone at $1/h, down at hour 1, $500/h at hours 2-3, zone_block 3 h, a 4 h job, no
    # on-demand: the policies that wait out the block pay $4 (deadline-aware waits: it is
    # ahead of its spot_wait line); the optimum had to run at $500 (it could idle only when no
    # pool was available) and paid $1,002. migrate, never idle, takes the zone back as soon as
    # it is up (a blocked zone is the last spot choice, not out: issue 30) and pays the spike;
    # the optimum is below them all.
    t = Trace(
        START, 3600.0, (AWS_SPOT,), ((1.0, 1.0, 500.0, 500.0) + (1.0,) * 6,),
        ((True, False) + (True,) * 8,),
    )  # fmt: skip
    r = backtest(t, job(), zone_block_s=3 * 3600)
    assert r.policy("optimum").total_cost == pytest.approx(4.0)
    for p in r.policies[1:]:
        expected = 1002.0 if p.name == "migrate" else 4.0
        assert p.total_cost == pytest.approx(expected), p.name
        assert r.policy("optimum").total_cost <= p.total_cost + 1e-9


def test_optimum_is_below_the_policies_after_an_outage_and_a_spike() -> None:
    # 30 min steps, one outage, a spike from $0.90 to $3.00 in the step after it, the default
    # zone block (1 h), no on-demand for the type: the policies that wait the block out $5.55
    # (6 h + a 10 min restore at $0.90), migrate $6.60 (never idle: back in the zone as soon
    # as it is up, through the spike — a blocked zone is the last spot choice, issue 30); the
    # optimum was $6.45 (it ran through the spike); now $5.40 (it waits).
    prices = (0.9,) * 3 + (3.0,) + (0.9,) * 16
    t = Trace(START, 1800.0, (AWS_SPOT,), (prices,), ((True, True, False) + (True,) * 17,))
    r = backtest(t, job(duration_h=6.0, checkpoint_interval_s=1800.0, restore_overhead_s=600.0))
    for name in ("spot-fallback", "spot-once", "deadline-aware"):
        assert r.policy(name).total_cost == pytest.approx(5.55), name
    assert r.policy("migrate").total_cost == pytest.approx(6.60)
    assert r.policy("optimum").total_cost == pytest.approx(5.40)


def test_the_baseline_that_could_not_run_is_said_not_shown_as_zero_saving() -> None:
    t = Trace(START, 3600.0, (AWS_SPOT,), ((1.0,) * 10,), ((True,) * 10,))
    r = backtest(t, job())
    assert r.policy("on-demand").unfinished == 1 and not r.baseline_ran
    data = r.to_json()
    assert data["baseline_unfinished"] == ["train"]
    assert all(p["savings_vs_baseline_pct"] is None for p in data["policies"])
    assert r.savings_pct("spot-once") is None


# --- the partial first step ------------------------------------------------------------------


def test_a_job_arriving_within_a_step_starts_then_and_can_keep_a_tight_deadline() -> None:
    # Arrives 21:18 in an hourly trace; 2 h of work, deadline exactly 2 h later, on-demand only.
    arrival = START + timedelta(hours=21, minutes=18)
    t = Trace(START, 3600.0, (AWS_OD,), ((40.0,) * 30,), ((True,) * 30,))
    j = job(arrival=arrival, duration_h=2.0, deadline=arrival + timedelta(hours=2))
    r = backtest(t, j)
    for p in r.policies:
        run = p.runs[0]
        assert run.finished_at == arrival + timedelta(hours=2), p.name
        assert not run.deadline_missed and run.cost == pytest.approx(80.0), p.name


def test_the_optimum_uses_the_rest_of_the_first_step_only_when_it_pays() -> None:
    arrival = START + timedelta(minutes=30)
    # Dear at the arrival's step, cheap after: the optimum waits for step 1.
    t = Trace(START, 3600.0, (AWS_SPOT,), ((9.0,) + (1.0,) * 9,), ((True,) * 10,))
    ctx = context(t, job(arrival=arrival, duration_h=2.0))
    best = optimum_cost(ctx)
    assert best.cost == pytest.approx(2.0) and best.finished_at == START + timedelta(hours=3)
    # Cheap at the arrival's step: it runs the half hour left of it, and ends half an hour early.
    t = Trace(START, 3600.0, (AWS_SPOT,), ((1.0,) * 10,), ((True,) * 10,))
    best = optimum_cost(context(t, job(arrival=arrival, duration_h=2.0)))
    assert best.cost == pytest.approx(2.0)
    assert best.finished_at == arrival + timedelta(hours=2)


def context(t: Trace, j: WorkloadJob, zone_block_s: float = 3600.0) -> JobContext:
    rules = job_rules(j, Workload("w", (j,), zone_block_s=zone_block_s), EGRESS, t.step_s)
    return JobContext(j, t, [(i, 0.0) for i in range(len(t.pools))], rules, first_step(j, t))


# --- the optimum against an independent search ---------------------------------------------


def search(ctx: JobContext, horizon: int | None) -> tuple[float, datetime | None]:
    """Every schedule, forward in time: (cost, finish) of the cheapest; a plain restatement of
    the optimum's rules (hours of work as floats, states in a dict), no numpy. Each step runs
    all it can (the rest of the arrival step; up to the deadline), nothing, or — once — a
    fraction of it, whose length is what the work left needs at the end: a policy may start
    and stop inside a step, and for given pools such a linear cost is least with every step at
    0 or its cap but one."""
    job = ctx.job
    if job.deadline is not None:
        found = _search(ctx, _window(ctx, job.deadline, None), job.deadline)
        if found[1] is not None:
            return found
    return _search(ctx, _window(ctx, None, horizon), None)


def _window(ctx: JobContext, deadline: datetime | None, horizon: int | None) -> int:
    trace = ctx.trace
    end = trace.steps if horizon is None else min(trace.steps, horizon)
    steps = [s for s in range(ctx.first_step, end)]
    if deadline is not None:
        steps = [s for s in steps if ctx.begins(s) < deadline]
    return len(steps)


def _search(
    ctx: JobContext, steps: int, deadline: datetime | None
) -> tuple[float, datetime | None]:
    job, trace, transfers = ctx.job, ctx.trace, ctx.rules.transfers
    pools = [i for i, _ in ctx.pools]
    window = range(ctx.first_step, ctx.first_step + steps)
    second = 1 / 3600

    def price(s: int, i: int) -> float:
        p = trace.prices[i][s]
        return p if trace.available[i][s] and p == p else math.inf

    def cap(s: int) -> float:
        hours = ctx.hours(s)
        if deadline is not None:
            hours = min(hours, (deadline - ctx.begins(s)).total_seconds() / 3600)
        return hours

    usable = [price(s, i) for s in window for i in pools if math.isfinite(price(s, i))]
    if not usable:
        return math.inf, None
    restore = job.restore_overhead_s / 3600 * min(usable) * job.node_count

    def move(src: int | None, dst: int) -> float:
        b = trace.pools[dst]
        if src is None:
            return transfers.data_to(b.cloud, b.region)
        if src == dst:
            return 0.0
        a = trace.pools[src]
        if (a.cloud, a.region) == (b.cloud, b.region):
            return restore
        return (
            restore
            + transfers.data_to(b.cloud, b.region)
            + transfers.checkpoint(a.cloud, a.region, b.cloud, b.region)
        )

    # (hours of full steps, last pool, end of the last full step, the fraction's step: its
    # USD per hour, its cap and when it begins) -> least USD
    Key = tuple[float, int | None, datetime | None, tuple[float, float, datetime] | None]
    states: dict[Key, float] = {(0.0, None, None, None): 0.0}
    best: tuple[float, datetime | None] = (math.inf, None)

    def finish(key: Key, usd: float) -> None:
        nonlocal best
        done, _, last_end, frac = key
        left = job.duration_h - done
        if frac is None:
            if abs(left) > 1e-9 or last_end is None:
                return
            cost, ends = usd, last_end
        else:
            rate, limit, begins = frac
            if not 1e-9 < left <= limit:
                return
            cost = usd + rate * left
            ends = begins + timedelta(hours=left)
            if last_end is not None and last_end > ends:
                ends = last_end
        if cost < best[0] - 1e-9 or (
            abs(cost - best[0]) <= 1e-9 and best[1] is not None and ends < best[1]
        ):
            best = (cost, ends)

    for s in window:
        hours = cap(s)
        nxt = dict(states)  # waiting is free
        for (done, last, last_end, frac), usd in states.items():
            for i in pools:
                p = price(s, i)
                if not math.isfinite(p):
                    continue
                base = usd + move(last, i)
                full = done + hours
                if full <= job.duration_h + 1e-9:
                    key = (full, i, ctx.begins(s) + timedelta(hours=hours), frac)
                    cost = base + p * hours * job.node_count
                    if cost < nxt.get(key, math.inf):
                        nxt[key] = cost
                if frac is None:
                    # rounding: the fraction in the deadline's step may end a second late
                    late = second if hours < ctx.hours(s) else 1e-9  # cut by the deadline
                    key = (done, i, last_end, (p * job.node_count, hours + late, ctx.begins(s)))
                    if base < nxt.get(key, math.inf):
                        nxt[key] = base
        states = nxt
    for key, usd in states.items():
        finish(key, usd)
    return best


PLACES = [AWS_OD, AWS_SPOT, AWS_SPOT_B, WEST_SPOT, GCP_SPOT, GCP_OD]


def drawn_job(
    draw: st.DrawFn, arrive_s: int, hours: list[float], deadline_factors: list[float]
) -> WorkloadJob:
    """A job arriving within `arrive_s` of the trace's start, maybe with a deadline."""
    arrival = START + timedelta(seconds=draw(st.integers(0, arrive_s)))
    duration = draw(st.sampled_from(hours))
    deadline = None
    if draw(st.booleans()):
        deadline = arrival + timedelta(hours=duration * draw(st.sampled_from(deadline_factors)))
    return job(
        arrival=arrival,
        duration_h=duration,
        node_count=draw(st.integers(1, 2)),
        restore_overhead_s=draw(st.sampled_from([0.0, 600.0])),
        checkpoint_gb=draw(st.sampled_from([0.0, 100.0])),
        data_cloud="aws",
        data_region="us-east-1",
        data_gb=draw(st.sampled_from([0.0, 500.0])),
        deadline=deadline,
    )


@st.composite
def small_cases(draw: st.DrawFn) -> tuple[JobContext, int | None]:
    steps = draw(st.integers(2, 9))
    step_s = draw(st.sampled_from([1800.0, 3600.0]))
    chosen = draw(st.lists(st.sampled_from(PLACES), min_size=1, max_size=4, unique=True))
    prices, available = [], []
    flat = draw(st.booleans())  # one price per pool wherever offered (the programme's gather)
    for _ in chosen:
        row = draw(st.lists(st.sampled_from([0.5, 1.0, 1.5, 3.0, 40.0, math.nan]),
                            min_size=steps, max_size=steps))  # fmt: skip
        if flat:
            row = [row[0] if v == v else v for v in row]
        prices.append(tuple(row))
        available.append(tuple(draw(st.lists(st.booleans(), min_size=steps, max_size=steps))))
    t = Trace(START, step_s, tuple(chosen), tuple(prices), tuple(available))
    j = drawn_job(draw, int(step_s * 2), [0.2, 0.5, 1.0, 1.3, 2.0, 2.75], [0.9, 1.0, 1.5, 3.0])
    horizon = draw(st.one_of(st.none(), st.integers(1, steps)))
    return context(t, j), horizon


@pytest.mark.parametrize("solver", ["units", "stretches"])
def test_of_equal_costs_the_optimum_finishes_sooner_to_rounding(
    solver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One price, 1.3 h of work arriving at 01:52:23: the rest of the arrival step, a whole
    step and 0.17 h, or the 0.17 h first and two whole steps, cost the same — but the hours add
    up to it in other orders, and the unit programme took the ulp-cheaper later finish (found by
    the property test below; its seed lived in a local hypothesis database)."""
    monkeypatch.setattr(hindsight, "SOLVER", solver)
    up = (False, True, True, True, False, False)
    t = Trace(START, 3600.0, (AWS_OD,), ((0.5,) * 6,), (up,))
    j = job(arrival=START + timedelta(hours=1, minutes=52, seconds=23), duration_h=1.3,
            node_count=1, restore_overhead_s=0.0, checkpoint_gb=0.0, data_gb=0.0)  # fmt: skip
    run = optimum_cost(context(t, j), price_matrix(t))
    assert run.cost == pytest.approx(0.65)
    assert run.finished_at == j.arrival + timedelta(hours=1.3)  # straight through: the soonest


@pytest.mark.parametrize("solver", ["units", "stretches"])
@pytest.mark.parametrize("rebuilt", [False, True])
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=small_cases())
def test_the_optimum_matches_an_independent_search(  # type: ignore[no-untyped-def]
    solver: str, rebuilt: bool, case, monkeypatch
) -> None:
    ctx, horizon = case
    # Both programmes (the unit one, and the one by stretches wherever moves obey the triangle
    # inequality — router.core.hindsight_stretches), each forced here where "auto" would pick.
    monkeypatch.setattr(hindsight, "SOLVER", solver)
    if rebuilt:  # keep (almost) nothing: the path is rebuilt from every √n-th unit's array
        monkeypatch.setattr(hindsight, "MEMORY_CELLS", 1)
    if ctx.first_step >= ctx.trace.steps:
        return
    run = optimum_cost(ctx, price_matrix(ctx.trace), horizon=horizon)
    cost, ends = search(ctx, horizon)
    if ends is None:
        assert not run.finished
        return
    assert run.finished and run.cost == pytest.approx(cost, rel=1e-9, abs=1e-9)
    assert run.finished_at is not None
    assert abs((run.finished_at - ends).total_seconds()) < 1e-3  # the sooner of equal costs
    # What it reports adds up: segments (prices paid) plus moves (egress and restore).
    assert sum(s[3] for s in run.segments) + sum(e[1] for e in run.extras) == pytest.approx(
        run.cost, rel=1e-9, abs=1e-9
    )
    assert run.finished_at is not None and run.finished_at >= ctx.arrived_at
    if ctx.job.deadline is not None and not run.deadline_missed:
        assert run.finished_at <= ctx.job.deadline + timedelta(seconds=1)


@st.composite
def still_cases(draw: st.DrawFn) -> JobContext:
    """Longer traces that hold still for stretches (as real ones do): each pool's price and
    availability change at a few drawn steps only."""
    steps = draw(st.integers(10, 60))
    chosen = draw(st.lists(st.sampled_from(PLACES), min_size=1, max_size=4, unique=True))
    prices, available = [], []
    for _ in chosen:
        cuts = sorted(draw(st.sets(st.integers(1, steps - 1), max_size=4)))
        row: list[float] = []
        up: list[bool] = []
        for a, b in zip([0, *cuts], [*cuts, steps], strict=True):
            row += [draw(st.sampled_from([0.5, 1.0, 1.5, 3.0]))] * (b - a)
            up += [draw(st.booleans())] * (b - a)
        prices.append(tuple(row))
        available.append(tuple(up))
    t = Trace(START, 3600.0, tuple(chosen), tuple(prices), tuple(available))
    j = drawn_job(draw, 7200, [1.0, 2.5, 6.0, 9.75], [1.0, 1.5, 4.0])
    return context(t, j)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ctx=still_cases())
def test_the_two_programmes_agree_on_cost_finish_and_what_they_report(ctx: JobContext) -> None:
    if ctx.first_step >= ctx.trace.steps:
        return
    runs = {}
    for solver in ("units", "stretches"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(hindsight, "SOLVER", solver)
            runs[solver] = optimum_cost(ctx, price_matrix(ctx.trace))
    units, stretches = runs["units"], runs["stretches"]
    assert stretches.finished == units.finished
    if not units.finished:
        return
    assert stretches.cost == pytest.approx(units.cost, rel=1e-9, abs=1e-9)
    # Of equal costs, the sooner finish: the stretches' read-back takes the fewest steps; the
    # unit programme's may end later on a tie (2.5 h at one flat price, arriving a second into
    # the hour: 02:30:01 against 03:00) — never sooner.
    assert stretches.finished_at is not None and units.finished_at is not None
    assert stretches.finished_at <= units.finished_at
    paid = sum(s[3] for s in stretches.segments) + sum(e[1] for e in stretches.extras)
    assert paid == pytest.approx(stretches.cost, rel=1e-9, abs=1e-9)


def test_a_job_with_no_pool_has_no_optimum() -> None:
    t = Trace(START, 3600.0, (AWS_SPOT,), ((1.0,) * 5,), ((True,) * 5,))
    j = job()
    rules = job_rules(j, Workload("w", (j,)), EGRESS, t.step_s)
    run = optimum_cost(JobContext(j, t, [], rules, 0))
    assert not run.finished and run.cost == 0 and run.segments == []
