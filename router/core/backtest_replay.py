"""One job replayed under one policy: by steps (the reference) or by events (what runs); pure.

router.core.backtest documents the simulation. Both replays share `Replay.evaluate`, which plays
one step exactly as described there: interruption, the policy's choice (and its wake-ups inside
the step) — or, while a move or re-placement is launched, none until it is up — a move or
placement, the step run. The step replay evaluates every step. The event
replay evaluates a step only when something the policy reads may have changed:

- the job's candidates — a feasible pool's price, availability or listing (`TraceChanges`);
- a lost zone's block running out (History.blocked);
- the policy's own time: `quiet_until(ctx, state, now)` — the earliest moment its answer could
  differ with all of the above unchanged (router.core.backtest_quiet; a policy without it is
  evaluated every step);
- the steps where the job starts, pays a restore, is interrupted or finishes;
- the step a launch under way completes (Workload.launch_s), and the step after a refused one.

Between them the job runs (`Replay.coast`): each step paid and progressed with the same
arithmetic, in the same order, as an evaluated step whose policy stayed — so both replays give
the same runs to the last bit (tests/unit/test_backtest_events.py compares them).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np

from router.core.backtest_model import JobContext, JobRun, Slot, Trace
from router.core.backtest_policies import Policy, RunState, deploy_placement
from router.core.decision_model import SPOT, STAY, History, zone_key

Changes = Sequence[int]  # sorted steps at which something a policy reads changes
LAUNCHED = "launched"  # a decided placement whose launch (Workload.launch_s) completed


class TraceChanges:
    """Per pool, the steps at which its price, availability or listing differs from the step
    before; per job, their union over its feasible pools (cached)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._per_pool: list[np.ndarray] = []
        for prices, up in zip(trace.prices, trace.available, strict=True):
            p = np.asarray(prices, dtype=np.float64)
            a = np.asarray(up, dtype=bool) & ~np.isnan(p)
            p = np.where(a, p, -1.0)  # what a policy sees: a price where usable, else nothing
            self._per_pool.append(np.flatnonzero(p[1:] != p[:-1]) + 1)
        self._jobs: dict[tuple[int, ...], list[int]] = {}

    def of(self, pools: Sequence[int]) -> list[int]:
        key = tuple(sorted(pools))
        found = self._jobs.get(key)
        if found is None:
            merged: list[int] = []
            if key:
                merged = np.unique(np.concatenate([self._per_pool[i] for i in key])).tolist()
            found = self._jobs[key] = merged
        return found


class Replay:
    """The state of one job under one policy, stepped by `evaluate` and `coast`."""

    def __init__(
        self, ctx: JobContext, policy: Policy, *, keep_decisions: bool = False, merge: bool = True
    ) -> None:
        job, trace = ctx.job, ctx.trace
        self.ctx, self.policy, self.trace, self.keep = ctx, policy, trace, keep_decisions
        self.merge = merge  # one segment per stretch on a pool (else one per step)
        self.run = JobRun(job.name, deadline=job.deadline, gpu_hours=job.gpu_hours)
        self.state = RunState()
        self.interval_h = job.checkpoint_interval_s / 3600.0
        self.restore_h = job.restore_overhead_s / 3600.0
        self.nodes = job.node_count
        self.wake = getattr(policy, "wake_h", None)
        self.wakes = getattr(policy, "wakes_per_step", 8)
        self.done = False  # finished
        self.ask_next = False  # a launch was refused: the policy is asked at the next step
        # Workload.first_placement "deploy": `route deploy` places the job, not the policy.
        self.deploys = ctx.deployed and getattr(policy, "deployed", False)

    def evaluate(self, step: int) -> None:
        """One step, the policy asked (router.core.backtest's steps 1-4)."""
        ctx, trace, state, run, policy = self.ctx, self.trace, self.state, self.run, self.policy
        job, rules, nodes = ctx.job, ctx.rules, self.nodes
        now = ctx.begins(step)  # the arrival, in the step the job arrives in
        cur = state.current
        if cur is not None and not state.interrupted and not _usable(trace, cur.pool, step):
            # Spot capacity out — or any pool that is not offered any more (it vanished from the
            # price series) or marked unavailable: what runs there stops.
            state.interrupted = True
            run.interruptions += 1
            run.recomputed_h += state.done_h - state.checkpointed_h
            state.done_h = state.checkpointed_h
            if cur.market == SPOT:  # a preemption: the zone is blocked for zone_block
                h = state.history
                state.history = History(
                    h.last_move_at, (*h.lost_zones, (zone_key(cur), now)), h.committed_on_demand
                )
        cands = ctx.candidates(step)
        end = trace.at(step + 1)
        if state.launching is not None:
            action, target = self._launched(step, cands)
        elif self.deploys and not state.started:  # route deploy's placement, not the policy's
            action, target, reason = deploy_placement(ctx, state, cands)
            if self.keep:
                run.decisions.append((step, action, reason))
        else:
            action, target, reason = policy.choose(ctx, state, cands, now)
            # route watch decides every minute: a job kept waiting is asked again inside the
            # step at the moment its answer could change (its slack reaching the margin, say).
            wake = self.wake
            for _ in range(self.wakes):
                if (
                    target is not None
                    or wake is None
                    or not (state.current is None or state.interrupted)
                ):
                    break
                after = wake(ctx, state, now)
                if after is None or now + timedelta(hours=after) >= end:
                    break
                now += timedelta(hours=after)
                action, target, reason = policy.choose(ctx, state, cands, now)
            if self.keep and action != STAY:
                run.decisions.append((step, action, reason))
            if (
                target is not None
                and ctx.launch_h > 0
                and state.started
                and (cur is None or target.pool != cur.pool or state.interrupted)
            ):
                # Its nodes run launch_s later, from the first step that begins then: until
                # then what ran goes on running (a move) or nothing does (a re-placement).
                ready = _step_holding(trace, now + timedelta(hours=ctx.launch_h), step) + 1
                state.launching, target = (target, ready), None
        if target is not None and (cur is None or target.pool != cur.pool or state.interrupted):
            if cur is not None and not state.interrupted:
                run.migrations += 1
                handover = rules.handover_s / 3600.0 * cur.price_per_hour * nodes
                run.cost += handover
                run.extras.append((step, handover))
                # route migrate asks the job to save before the new placement starts: a
                # voluntary move keeps its work (an interruption loses what the last
                # checkpoint does not hold).
                state.checkpointed_h = state.done_h
                state.history = History(
                    now, state.history.lost_zones, state.history.committed_on_demand
                )
            transfer = rules.transfers
            if cur is None:
                moved = transfer.data_to(target.cloud, target.region)
            elif (cur.cloud, cur.region) != (target.cloud, target.region):
                moved = transfer.data_to(target.cloud, target.region) + transfer.checkpoint(
                    cur.cloud, cur.region, target.cloud, target.region
                )
            else:
                moved = 0.0
            run.cost += moved
            run.egress_cost += moved
            if moved:
                run.extras.append((step, moved))
            state.overhead_h = self.restore_h if state.started else 0.0
            state.current, state.since, state.interrupted = target, now, False
            state.started = True
        if state.current is None or state.interrupted:
            return  # waiting: nothing runs, nothing is paid
        # Run this step at this step's price (the slot may carry an older step's price).
        cur = state.current
        price = trace.prices[cur.pool][step]
        span_h = (end - now).total_seconds() / 3600.0  # the rest of the step from `now`
        overhead = min(state.overhead_h, span_h)
        state.overhead_h -= overhead
        work = span_h - overhead
        left = job.duration_h - state.done_h
        used = overhead + min(work, left)
        paid = price * nodes * used
        run.cost += paid
        _segment(run, step, cur.pool, paid, self.merge)
        if work >= left - 1e-12:
            state.done_h = job.duration_h
            run.finished_at = now + timedelta(hours=used)
            self.done = True
            return
        state.done_h += work
        self._checkpoint(cur)
        if cur.price_per_hour != price:
            state.current = Slot(
                cur.cloud,
                cur.region,
                cur.zone,
                cur.instance_type,
                cur.market,
                price,
                cur.interruptions_per_hour,
                cur.pool,
            )

    def _launched(self, step: int, cands: Sequence[Slot]) -> tuple[str, Slot | None]:
        """A launch under way (Workload.launch_s): nothing decided before its step; then the
        placement decided, at this step's price — or nothing when its pool is gone meanwhile
        (route watch rolls such a launch back; the policy decides again at the next step)."""
        launching = self.state.launching
        assert launching is not None
        decided, ready = launching
        if step < ready:
            return STAY, None
        self.state.launching = None
        found = next((c for c in cands if c.pool == decided.pool), None)  # usable ones only
        if found is None:
            self.run.launches_refused += 1
            self.ask_next = True
            return STAY, None
        return LAUNCHED, found

    def _checkpoint(self, cur: Slot) -> None:
        # What a preemption at the end of this step keeps: the last periodic checkpoint, the
        # save of a move, or on spot the save the checkpoint library makes on the cloud's
        # notice (all the work but that of the notice window).
        state = self.state
        kept = math.floor(state.done_h / self.interval_h + 1e-9) * self.interval_h
        notice_h = self.ctx.notice_h.get(cur.cloud) if cur.market == SPOT else None
        if notice_h is not None:
            kept = max(kept, state.done_h - notice_h)
        state.checkpointed_h = max(state.checkpointed_h, kept)

    def coast(self, step: int, stop: int, *, repriced: bool = False) -> int:
        """Run steps step … stop − 1 unasked (the policy would stay); returns the first step
        that must be evaluated: `stop`, or one that would interrupt, restore or finish — or
        change the placement's price, unless `repriced` (the policy stays whatever it costs)."""
        state = self.state
        cur = state.current
        if cur is None or state.interrupted or state.overhead_h > 0.0:
            return step
        trace, run, nodes, pool = self.trace, self.run, self.nodes, cur.pool
        span_h = _whole_step_h(trace)
        if span_h is None:
            return self._coast_measured(step, stop, repriced=repriced)
        prices, up = trace.prices[pool], trace.available[pool]
        duration = self.ctx.job.duration_h
        price = cur.price_per_hour
        # The evaluated step's arithmetic, in the same order, in locals: the cost, the
        # segment's dollars and the work are sums of the same terms, added one step at a time.
        done, cost, first = state.done_h, run.cost, step
        seg = run.segments
        usd = seg[-1][3] if seg and seg[-1][2] == pool and seg[-1][1] == step else None
        while step < stop:
            p = prices[step]
            if not up[step] or p != p or span_h >= duration - done - 1e-12:
                break  # interrupted or finishing: evaluated
            if p != price:
                if not repriced:
                    break  # re-priced: evaluated
                price = p
            paid = p * nodes * span_h
            cost += paid
            usd = paid if usd is None else usd + paid
            done += span_h
            step += 1
        if step == first:
            return step
        run.cost, state.done_h = cost, done
        assert usd is not None
        if seg and seg[-1][2] == pool and seg[-1][1] == first:
            seg[-1] = (seg[-1][0], step, pool, usd)
        else:
            seg.append((first, step, pool, usd))
        # What a checkpoint keeps only grows with the work done: the last step's is the most.
        self._checkpoint(cur)
        if price != cur.price_per_hour:  # as an evaluated step leaves it: at the last price
            state.current = Slot(
                cur.cloud, cur.region, cur.zone, cur.instance_type, cur.market, price,
                cur.interruptions_per_hour, cur.pool,
            )  # fmt: skip
        return step

    def _coast_measured(self, step: int, stop: int, *, repriced: bool) -> int:
        """coast() where steps are not all step_s long: each measured, as the step replay does."""
        state = self.state
        cur = state.current
        assert cur is not None
        trace, run, nodes, pool = self.trace, self.run, self.nodes, cur.pool
        prices, up = trace.prices[pool], trace.available[pool]
        duration = self.ctx.job.duration_h
        price = cur.price_per_hour
        while step < stop:
            span_h_here = (trace.at(step + 1) - trace.at(step)).total_seconds() / 3600.0
            p = prices[step]
            left = duration - state.done_h
            if not up[step] or p != p or span_h_here >= left - 1e-12:
                return step  # interrupted or finishing: evaluated
            if p != price:
                if not repriced:
                    return step  # re-priced: evaluated
                # as an evaluated step leaves it: the slot at this step's price
                cur = state.current = Slot(
                    cur.cloud, cur.region, cur.zone, cur.instance_type, cur.market, p,
                    cur.interruptions_per_hour, cur.pool,
                )  # fmt: skip
                price = p
            paid = p * nodes * (0.0 + min(span_h_here, left))
            run.cost += paid
            _segment(run, step, pool, paid, True)
            state.done_h += span_h_here - 0.0
            self._checkpoint(cur)
            step += 1
        return step


def _usable(trace: Trace, pool: int, step: int) -> bool:
    price = trace.prices[pool][step]
    return trace.available[pool][step] and price == price  # nan: not offered


def _segment(run: JobRun, step: int, pool: int, usd: float, merge: bool) -> None:
    """Add a step's payment, merged into the last segment when it continues it."""
    seg = run.segments
    if merge and seg and seg[-1][2] == pool and seg[-1][1] == step:
        a, _, _, paid = seg[-1]
        seg[-1] = (a, step + 1, pool, paid + usd)
    else:
        seg.append((step, step + 1, pool, usd))


_WHOLE: dict[float, float | None] = {}


def _whole_step_h(trace: Trace) -> float | None:
    """A whole step in hours when every step spans exactly step_s (whole microseconds), as the
    step replay measures it; None otherwise (measured step by step)."""
    found = _WHOLE.get(trace.step_s, -1.0)
    if found != -1.0:
        return found
    micro = trace.step_s * 1e6
    exact = micro == int(micro) and trace.step_s == int(trace.step_s)
    found = _WHOLE[trace.step_s] = (
        (timedelta(seconds=trace.step_s)).total_seconds() / 3600.0 if exact else None
    )
    return found


def replay_steps(
    ctx: JobContext, policy: Policy, *, keep_decisions: bool = False, merge: bool = False
) -> JobRun:
    """The reference: every step evaluated (one segment per step unless `merge`)."""
    replay = Replay(ctx, policy, keep_decisions=keep_decisions, merge=merge)
    for step in range(ctx.first_step, ctx.trace.steps):
        replay.evaluate(step)
        if replay.done:
            break
    return replay.run


def replay_events(
    ctx: JobContext, policy: Policy, changes: Changes, *, keep_decisions: bool = False
) -> JobRun:
    """Steps evaluated only where something the policy reads may change (module docstring)."""
    replay = Replay(ctx, policy, keep_decisions=keep_decisions)
    trace, state = ctx.trace, replay.state
    quiet = getattr(policy, "quiet_until", None)
    # A policy that keeps a running placement whatever its candidates do (placed once, the
    # peer) is asked again only when the placement stops: interrupted or finished.
    stays = bool(getattr(policy, "stays_while_running", False))
    steps = trace.steps
    step = ctx.first_step
    while step < steps:
        replay.evaluate(step)
        if replay.done:
            break
        step += 1
        if quiet is None or step >= steps:
            continue
        if replay.ask_next:
            replay.ask_next = False
            continue
        launching = state.launching
        if stays and state.current is not None and not state.interrupted and not launching:
            step = replay.coast(step, steps, repriced=True)
            continue
        # The next step that must be asked: a change of the candidates, a block running out,
        # the policy's own time (the step that holds it).
        stop = steps
        i = bisect.bisect_left(changes, step)
        if i < len(changes):
            stop = changes[i]
        begins = trace.at(step)
        until = quiet(ctx, state, begins)
        if until is not None:
            stop = min(stop, _step_holding(trace, until, step))
        if launching is not None:
            stop = min(stop, launching[1])  # the step its nodes are up
        block = timedelta(seconds=ctx.rules.zone_block_s)
        for _, lost_at in state.history.lost_zones:
            # a zone unblocked: the first step that starts with it open must be asked
            first = _step_holding(trace, lost_at + block, -1) + 1
            if first >= step:
                stop = min(stop, first)
        if stop <= step:
            continue
        waiting = state.current is None or state.interrupted
        step = stop if waiting else replay.coast(step, stop)  # waiting: nothing runs, or paid
    return replay.run


def _step_holding(trace: Trace, at: datetime, after: int) -> int:
    """The step holding `at` (a microsecond early, so a rounding never skips it); ≥ after."""
    offset = (at - trace.start - timedelta(microseconds=1)) / timedelta(seconds=trace.step_s)
    return max(after, math.floor(offset))
