"""The one interruption model of spotroute: planner, decide() and backtest all price spot with it.

Pure (no files, no clock). Three steps, each a documented formula:

1. **Prior: the advisor bucket.** A bucket such as "5-10%" is the share p of spot instances of a
   type interrupted over a month (AWS Spot Instance Advisor; Azure eviction rates mapped onto the
   same buckets). As a Poisson process with a constant rate λ per instance-hour, an instance
   survives a 30-day month (720 h) with probability exp(-720 λ), so p = 1 - exp(-720 λ) and

       λ0 = -ln(1 - p) / 720        (interruptions per instance-hour)

   p is the bucket midpoint; the open-ended ">20%" bucket uses a documented representative share
   (data/interruption.csv). Quotes without a bucket take the per-cloud default from the CSV (GCP
   publishes no rate at all), the worst bucket, so unmeasured capacity never looks safer than
   measured capacity. On-demand and reserved capacity is not interrupted: λ = 0.

2. **Evidence: what was seen of the pool.** `Evidence(up_h, preemptions)` per pool (cloud,
   region, zone, instance type) over the last LOOKBACK_H hours — instance-hours the pool ran or
   could run and the preemptions seen meanwhile — from the records `route watch` keeps
   (router/flows/zone_evidence.py) or, in a backtest, from the trace's past (`SeriesEvidence`).
   The rate is the Gamma-Poisson posterior mean, the prior counting as PRIOR_WEIGHT_H (one)
   hour of running at λ0:

       λ = (λ0 × w + preemptions) / (w + up_h)        w = PRIOR_WEIGHT_H

   With no evidence λ = λ0; a zone seen preempted every hour tends to λ ≈ 1/h, whatever its bucket
   says (the advisor's ">20 %/month" is λ0 ≈ 0.0005/h; GPU zones in the "Can't Be Late" traces
   are taken away every 0.8-3 h).

3. **Group and cost.** A group of N nodes is interrupted when any of its nodes is: Λ = N λ. A
   stint on spot lasts U ~ Exp(Λ) hours (paid: 1/Λ on average); its first R hours restore, and
   of the rest only completed checkpoint intervals (every I hours of work) are kept, so a stint
   keeps on average (`stint_work_h`)

       s(Λ) = I e^(-Λ R) / (e^(Λ I) - 1)           hours of work (1/Λ at small Λ; ∞ at Λ = 0)

   and the expected paid hours per hour of work are (`work_multiplier`)

       m(Λ) = (1/Λ) / s(Λ) = e^(Λ R) (e^(Λ I) - 1) / (Λ I)     (= 1 + Λ (R + I/2) + O(Λ²))

   Finishing W hours of work costs price × N × W × m; the interruption term is
   price × N × W × (m - 1) (`interruption_usd`): the planner's interruption cost, decide()'s
   remaining cost (router/core/decide.py) and the backtest's candidates use these functions, and
   decide() weighs a move by the saving over the work the target keeps before it is lost,
   min(work left, s(Λ)) — a zone lost every 50 minutes keeps about half an hour of work.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from router.core.errors import BadInput
from router.core.offers import INTERRUPTION_BUCKETS

HOURS_PER_MONTH = 720.0  # a 30-day month, the window the buckets describe
SPOT = "spot"
# The bucket counts as one hour of running in the pool: it is a month's average over a whole
# instance family and region, not this zone today, so the pool's own first hours decide
# (chosen, not fitted). With a day's weight a pool lost every hour would look safe for days.
PRIOR_WEIGHT_H = 1.0
# Evidence older than a week is dropped: capacity shifts from week to week (chosen, not fitted).
LOOKBACK_H = 168.0
# e^x beyond this is "never finishes" for any price; keeps m finite.
_MAX_EXPONENT = 50.0
# Rates below one interruption in a million years are none (and keep 1/Λ finite).
_NEGLIGIBLE = 1e-10

EvidenceKey = tuple[str, str, str, str]  # cloud, region, zone (the region if none), instance type

_COLUMNS = ("kind", "bucket", "cloud", "market", "share_per_month", "source", "date", "note")


class PricedCapacity(Protocol):
    """What the model needs from a Quote or an Offer."""

    @property
    def cloud(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def zone(self) -> str | None: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def market(self) -> str: ...
    @property
    def interruption_bucket(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Evidence:
    """What was seen of one spot pool: instance-hours it was up, preemptions meanwhile."""

    up_h: float
    preemptions: int

    def __add__(self, other: Evidence) -> Evidence:
        return Evidence(self.up_h + other.up_h, self.preemptions + other.preemptions)


def evidence_key(cloud: str, region: str, zone: str | None, instance_type: str) -> EvidenceKey:
    """The pool evidence is kept for: a zone (its region when zoneless) and an instance type."""
    return (cloud, region, zone or region, instance_type)


def posterior_rate(
    prior_rate: float, evidence: Evidence | None, weight_h: float = PRIOR_WEIGHT_H
) -> float:
    """(λ0 × w + preemptions) / (w + up_h), per instance-hour; λ0 when nothing was seen."""
    if evidence is None or (evidence.up_h <= 0 and evidence.preemptions <= 0):
        return prior_rate
    return (prior_rate * weight_h + evidence.preemptions) / (weight_h + max(0.0, evidence.up_h))


def group_rate(rate_per_instance_hour: float, node_count: int) -> float:
    """Interruptions per hour of a group of node_count nodes: any node's loss stops the group."""
    return rate_per_instance_hour * max(1, node_count)


@functools.lru_cache(maxsize=65536)  # pure; decide() asks it for every candidate at every call
def stint_work_h(group_rate_per_hour: float, restore_h: float, interval_h: float) -> float:
    """Expected hours of work a stint on spot keeps: I e^(-ΛR) / (e^(ΛI) - 1); inf at Λ = 0.

    A stint lasts U ~ Exp(Λ) hours, the first R of them restoring; the work of every completed
    checkpoint interval I is kept, the rest is lost with the instance.
    """
    lam = group_rate_per_hour
    if lam <= _NEGLIGIBLE:
        return math.inf
    if interval_h <= 0:  # checkpoints all the time: everything after the restore is kept
        return math.exp(-min(lam * restore_h, _MAX_EXPONENT)) / lam
    x = min(lam * interval_h, _MAX_EXPONENT)
    return interval_h * math.exp(-min(lam * restore_h, _MAX_EXPONENT)) / math.expm1(x)


@functools.lru_cache(maxsize=65536)
def work_multiplier(group_rate_per_hour: float, restore_h: float, interval_h: float) -> float:
    """Expected paid hours per hour of work: (1/Λ) / stint work = e^(ΛR)(e^(ΛI) - 1)/(ΛI)."""
    lam = group_rate_per_hour
    if lam <= _NEGLIGIBLE:
        return 1.0
    return (1.0 / lam) / stint_work_h(lam, restore_h, interval_h)


def interruption_usd(
    price_per_hour: float,
    node_count: int,
    hours: float,
    rate_per_instance_hour: float,
    restore_h: float,
    interval_h: float,
) -> float:
    """Expected USD lost to interruptions doing `hours` of work: price × N × W × (m - 1)."""
    m = work_multiplier(group_rate(rate_per_instance_hour, node_count), restore_h, interval_h)
    return price_per_hour * max(1, node_count) * hours * (m - 1.0)


def evidence_from_history(
    stints: Iterable[tuple[EvidenceKey, datetime, datetime, int]],
    preemptions: Iterable[tuple[EvidenceKey, datetime]],
    *,
    now: datetime,
    lookback_h: float = LOOKBACK_H,
) -> dict[EvidenceKey, Evidence]:
    """Evidence per pool from what ran there (key, start, end, nodes: instance-hours up) and
    the preemptions seen there, both over the lookback before `now` (route watch's records)."""
    since = now - timedelta(hours=lookback_h)
    up: dict[EvidenceKey, float] = {}
    lost: dict[EvidenceKey, int] = {}
    for key, start, end, nodes in stints:
        begin, stop = max(start, since), min(end, now)
        if stop > begin:
            up[key] = up.get(key, 0.0) + (stop - begin).total_seconds() / 3600.0 * max(1, nodes)
    for key, at in preemptions:
        if since <= at <= now:
            lost[key] = lost.get(key, 0) + 1
    return {k: Evidence(up.get(k, 0.0), lost.get(k, 0)) for k in up.keys() | lost.keys()}


class SeriesEvidence:
    """A pool's evidence at any step of an availability series (True = up), from the past only.

    Up-time counts the steps before `step` inside the lookback; a preemption is a step that is
    down right after one that was up. Prefix sums: O(1) per question.
    """

    __slots__ = ("_pre", "_up", "step_h")

    def __init__(self, available: Sequence[bool], step_h: float) -> None:
        self.step_h = step_h
        up = [0]
        pre = [0, 0]
        for s, a in enumerate(available):
            up.append(up[-1] + (1 if a else 0))
            if s >= 1:
                pre.append(pre[-1] + (1 if available[s - 1] and not a else 0))
        self._up, self._pre = up, pre

    def at(self, step: int, lookback_h: float = LOOKBACK_H) -> Evidence:
        """Evidence from the steps before `step` (at most lookback_h hours back)."""
        step = max(0, min(step, len(self._up) - 1))
        lo = max(0, step - max(1, round(lookback_h / self.step_h)))
        ups = self._up[step] - self._up[lo]
        # Preemptions at steps s in (lo, step): the step before s is inside the window too.
        first = min(lo + 1, step)
        return Evidence(ups * self.step_h, self._pre[step] - self._pre[first])


@dataclass(frozen=True, slots=True)
class EffectiveBucket:
    """The bucket a rate was computed from, and why when it is not the quote's own."""

    bucket: str | None  # None: not interruptible (on-demand, reserved)
    assumed: bool  # True when the quote had no bucket and a default was used
    note: str


def rate_from_share(share_per_month: float) -> float:
    """Interruptions per instance-hour for a monthly interrupted share p: -ln(1-p)/720."""
    if not 0 <= share_per_month < 1:
        raise ValueError(f"share_per_month must be in [0, 1), got {share_per_month}")
    return -math.log1p(-share_per_month) / HOURS_PER_MONTH


class InterruptionModel:
    """Bucket shares and per-cloud defaults; answers interruptions per hour for a quote."""

    def __init__(
        self,
        share_per_month: dict[str, float],
        defaults: dict[tuple[str, str], tuple[str, str]],
        evidence: Mapping[EvidenceKey, Evidence] | None = None,
    ) -> None:
        self.share_per_month = dict(share_per_month)
        self.defaults = dict(defaults)  # (cloud, market) → (bucket, note)
        self.evidence: dict[EvidenceKey, Evidence] = dict(evidence or {})
        self._rate = {bucket: rate_from_share(p) for bucket, p in share_per_month.items()}
        self._worst = max(share_per_month, key=share_per_month.__getitem__)

    def with_evidence(self, evidence: Mapping[EvidenceKey, Evidence]) -> InterruptionModel:
        """The same prior, updated by what was seen of each pool (step 2 of the module doc)."""
        return InterruptionModel(self.share_per_month, self.defaults, evidence)

    def rate_for(
        self,
        cloud: str,
        region: str,
        zone: str | None,
        instance_type: str,
        market: str,
        bucket: str | None,
    ) -> float:
        """Interruptions per instance-hour of one pool: the bucket's rate updated by evidence."""
        prior = self.rate_per_hour(cloud, market, bucket)
        if prior <= 0 and market != SPOT:
            return 0.0
        seen = self.evidence.get(evidence_key(cloud, region, zone, instance_type))
        return posterior_rate(prior, seen)

    def bucket_for(self, cloud: str, market: str, bucket: str | None) -> EffectiveBucket:
        """The bucket to price with: the quote's own, else the cloud's documented default."""
        if market != SPOT:
            return EffectiveBucket(None, False, f"{market} capacity is not interrupted")
        if bucket in self._rate:
            return EffectiveBucket(bucket, False, "")
        default = self.defaults.get((cloud, market))
        if default is not None:
            return EffectiveBucket(default[0], True, default[1])
        return EffectiveBucket(
            self._worst, True, f"no interruption data for {cloud} {market}: worst bucket assumed"
        )

    def rate_per_hour(self, cloud: str, market: str, bucket: str | None) -> float:
        """Expected interruptions per instance-hour (0 for on-demand and reserved)."""
        if market != SPOT:
            return 0.0
        rate = self._rate.get(bucket) if bucket is not None else None
        if rate is not None:
            return rate
        effective = self.bucket_for(cloud, market, bucket)
        return self._rate[effective.bucket] if effective.bucket is not None else 0.0


def parse_interruption_csv(text: str, *, name: str = "interruption.csv") -> InterruptionModel:
    """Build the model from CSV text; every bucket in INTERRUPTION_BUCKETS must have a share."""
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != _COLUMNS:
        raise BadInput(f"{name}: header must be {','.join(_COLUMNS)}")
    shares: dict[str, float] = {}
    defaults: dict[tuple[str, str], tuple[str, str]] = {}
    for row in reader:
        where = f"{name} line {reader.line_num}"
        bucket = row["bucket"]
        if bucket not in INTERRUPTION_BUCKETS:
            raise BadInput(f"{where}: bucket {bucket!r} is not one of {INTERRUPTION_BUCKETS}")
        if row["kind"] == "bucket":
            try:
                share = float(row["share_per_month"])
            except ValueError:
                raise BadInput(f"{where}: share_per_month is not a number") from None
            if not 0 <= share < 1:
                raise BadInput(f"{where}: share_per_month must be in [0, 1)")
            shares[bucket] = share
        elif row["kind"] == "default":
            defaults[(row["cloud"], row["market"])] = (bucket, row["note"])
        else:
            raise BadInput(f"{where}: kind must be bucket or default")
    missing = [b for b in INTERRUPTION_BUCKETS if b not in shares]
    if missing:
        raise BadInput(f"{name}: no share_per_month for bucket(s) {', '.join(missing)}")
    return InterruptionModel(shares, defaults)


def interruptions_per_hour(offer: PricedCapacity, model: InterruptionModel) -> float:
    """Expected interruptions per instance-hour of a quote or offer (0 unless spot), evidence
    included."""
    return model.rate_for(
        offer.cloud, offer.region, offer.zone, offer.instance_type, offer.market,
        offer.interruption_bucket,
    )  # fmt: skip


def effective_bucket(offer: PricedCapacity, model: InterruptionModel) -> EffectiveBucket:
    """The bucket interruptions_per_hour used for this offer, with the reason for defaults."""
    return model.bucket_for(offer.cloud, offer.market, offer.interruption_bucket)
