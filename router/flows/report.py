"""`route report`: realised spend and savings against on-demand, from the placements made.

Reads spotroute's record store (router/engine/records.py), the one that lives with the Pulumi
state — $SPOTROUTE_HOME on the default backend, <backend>/.spotroute on file://, objects in the
bucket on s3://, rows of spotroute_records on postgres:// — so everyone on a shared backend
sees the same spend:

- `placements/<job>`: the job's live placement (written by `route deploy`, router/flows/jobs.py
  record_placement, and by `route migrate`), counted from `deployed_at` until now — or until
  `lost_at` (route watch saw its nodes gone), or until its nodes powered off after the job
  finished (`finished_at`, which route watch records, plus router.contract.clouds'
  powered_off_after_s: the start-up script's 5-minute grace; 0 on the local target), whichever
  comes first: a finished job's nodes stop billing then, however long its teardown takes;
- `ended/<job>/<started_at>`: a placement that is over (`route destroy`, a re-placement onto
  new instances, or `route watch` tearing down a finished or crashed job's placement), written by
  `record_ended` before the live record is removed or replaced; a crashed one is counted until
  its teardown and named in the report's notes (when, and why from router/flows/teardown.py);
- `jobs/<job>/journals/<id>` (and an open `jobs/<job>/journal`): each move's steps; both
  placements are paid from the new stack's up until the old stack is down, so a move adds that
  overlap to the recorded spans (handover_segments), in the cost but not in the baseline.

A record's optional `history` list holds earlier placements of the same job (one entry per
recovery or migration, with the same fields plus `started_at`, `ended_at` and `reason`); a
`previous` entry (what `route migrate` keeps) counts when it carries a start time:

    {"job": "llm", "cloud": "aws", "region": "us-east-1", "zone": "us-east-1a",
     "instance_type": "p4de.24xlarge", "market": "spot", "node_count": 1,
     "price_per_hour": 12.3, "deployed_at": "2026-11-30T10:00:00+00:00",
     "on_demand_price_per_hour": 40.97,                    # optional: the baseline to use
     "history": [{"cloud": "gcp", …, "started_at": "…", "ended_at": "…", "reason": "preempted"}]}

The baseline of a placement is the on-demand price of the same instance type in the same
cloud (same region first, else the cheapest region), from the record, else the price cache,
the bundled snapshot or, for the local target, the project's local market in force now; a
placement with no known on-demand price counts at its own price (no saving claimed) and the
report says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from router.contract.clouds import powered_off_after_s
from router.core.errors import BadInput
from router.core.journal import Journal
from router.core.offers import Quote

if TYPE_CHECKING:
    from router.config.project import Project
    from router.engine.records import RecordStore

ENDED_PREFIX = "ended/"

OnDemandPrice = Callable[[str, str, str], float | None]  # (cloud, region, instance_type) → $/h
# What a hand-over adds to a placement's recorded span: "old" — the placement left, from the
# hand-over until its stack was down; "new" — the placement moved to, from its stack's up until
# its record starts (the hand-over); "unrecorded" — a new placement that never took over (rolled
# back, or its hand-over still under way), from its stack's up until it went (or now).
Overlap = Literal["", "old", "new", "unrecorded"]


@dataclass(frozen=True, slots=True)
class Segment:
    """One placement of one job over a time span (USD per instance-hour)."""

    job: str
    cloud: str
    region: str
    instance_type: str
    market: str
    node_count: int
    price_per_hour: float
    started_at: datetime
    ended_at: datetime | None
    reason: str = ""
    on_demand_price_per_hour: float | None = None
    stack: str = ""
    overlap: Overlap = ""  # "": its recorded span; else paid time a hand-over adds (below)


@dataclass(frozen=True, slots=True)
class HandoverSpend:
    """Paid time of one placement while another placement of its job also ran (USD)."""

    job: str
    stack: str
    role: Overlap
    started_at: datetime
    ended_at: datetime
    cost: float

    @property
    def seconds(self) -> float:
        return (self.ended_at - self.started_at).total_seconds()


@dataclass(frozen=True, slots=True)
class JobSpend:
    job: str
    placements: int
    hours: float  # paid placement-hours: both placements of a hand-over count
    cost: float
    baseline: float
    overlap_s: float = 0.0  # of which paid while another placement of the job also ran
    overlap_cost: float = 0.0

    @property
    def savings_pct(self) -> float:
        return 100.0 * (1 - self.cost / self.baseline) if self.baseline else 0.0


@dataclass(frozen=True, slots=True)
class CloudSpend:
    cloud: str
    hours: float
    cost: float
    baseline: float


@dataclass(frozen=True, slots=True)
class DaySpend:
    day: date
    cost: float
    baseline: float


@dataclass(frozen=True)
class SpendReport:
    """Realised spend and the on-demand baseline, by job, cloud and day (USD)."""

    since: datetime
    until: datetime
    total_cost: float
    total_baseline: float
    by_job: tuple[JobSpend, ...]
    by_cloud: tuple[CloudSpend, ...]
    by_day: tuple[DaySpend, ...]
    notes: tuple[str, ...]
    handovers: tuple[HandoverSpend, ...] = ()

    @property
    def savings_pct(self) -> float:
        return 100.0 * (1 - self.total_cost / self.total_baseline) if self.total_baseline else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "total_cost": self.total_cost,
            "total_on_demand_baseline": self.total_baseline,
            "savings_pct": self.savings_pct,
            "by_job": [
                {
                    "job": j.job,
                    "placements": j.placements,
                    "hours": j.hours,
                    "cost": j.cost,
                    "on_demand_baseline": j.baseline,
                    "savings_pct": j.savings_pct,
                    "overlap_s": j.overlap_s,
                    "overlap_cost": j.overlap_cost,
                }
                for j in self.by_job
            ],
            "by_cloud": [
                {
                    "cloud": c.cloud,
                    "hours": c.hours,
                    "cost": c.cost,
                    "on_demand_baseline": c.baseline,
                }
                for c in self.by_cloud
            ],
            "by_day": [
                {"day": d.day.isoformat(), "cost": d.cost, "on_demand_baseline": d.baseline}
                for d in self.by_day
            ],
            "handovers": [
                {
                    "job": h.job,
                    "stack": h.stack,
                    "role": h.role,
                    "from": h.started_at.isoformat(),
                    "until": h.ended_at.isoformat(),
                    "seconds": h.seconds,
                    "cost": h.cost,
                }
                for h in self.handovers
            ],
            "notes": list(self.notes),
        }


def summarise(
    segments: Iterable[Segment], *, now: datetime, days: float | None, on_demand: OnDemandPrice
) -> SpendReport:
    """Spend over the last `days` (all time when None), split by job, cloud and UTC day (pure)."""
    until = now
    all_segments = list(segments)
    earliest = min((s.started_at for s in all_segments), default=now)
    since = now - timedelta(days=days) if days is not None else earliest
    jobs: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    clouds: dict[str, list[float]] = {}
    per_day: dict[date, list[float]] = {}
    overlaps: dict[str, list[float]] = {}
    handovers: list[HandoverSpend] = []
    notes: list[str] = []
    unknown: set[tuple[str, str]] = set()
    for s in all_segments:
        start = max(s.started_at, since)
        end = min(s.ended_at or now, until)
        # A placement whose job ended before its record began (a job done while `pulumi up`
        # still ran: billing starts when the placement is recorded) is shown, at no hours.
        if end < start or (end == start and (s.overlap or s.started_at < since)):
            continue
        for table, key in ((jobs, s.job), (clouds, s.cloud)):
            table.setdefault(key, [0.0, 0.0, 0.0])
        base_price = 0.0  # the job on on-demand would have run once: no hand-over in it
        if not s.overlap:
            base_price = _baseline_price(s, on_demand, unknown)
        else:
            cost = s.price_per_hour * s.node_count * (end - start).total_seconds() / 3600
            handovers.append(HandoverSpend(s.job, s.stack, s.overlap, start, end, cost))
            row = overlaps.setdefault(s.job, [0.0, 0.0])
            row[0] += (end - start).total_seconds()
            row[1] += cost
        counts[s.job] = counts.get(s.job, 0) + (s.overlap in ("", "unrecorded"))
        cursor = start
        while cursor < end:
            day_end = datetime.combine(cursor.date() + timedelta(days=1), datetime.min.time(), UTC)
            piece_end = min(end, day_end)
            hours = (piece_end - cursor).total_seconds() / 3600
            cost = s.price_per_hour * s.node_count * hours
            base = base_price * s.node_count * hours
            for table, key in ((jobs, s.job), (clouds, s.cloud)):
                row = table.setdefault(key, [0.0, 0.0, 0.0])
                row[0] += hours
                row[1] += cost
                row[2] += base
            day = per_day.setdefault(cursor.date(), [0.0, 0.0])
            day[0] += cost
            day[1] += base
            cursor = piece_end
    for cloud, itype in sorted(unknown):
        notes.append(
            f"no on-demand price known for {cloud} {itype}: counted at its own price "
            "(run `route prices refresh`)"
        )
    by_job = tuple(
        JobSpend(job, counts[job], v[0], v[1], v[2], *overlaps.get(job, (0.0, 0.0)))
        for job, v in sorted(jobs.items())
    )
    return SpendReport(
        since=since,
        until=until,
        total_cost=sum(j.cost for j in by_job),
        total_baseline=sum(j.baseline for j in by_job),
        by_job=by_job,
        by_cloud=tuple(CloudSpend(c, v[0], v[1], v[2]) for c, v in sorted(clouds.items())),
        by_day=tuple(DaySpend(d, v[0], v[1]) for d, v in sorted(per_day.items())),
        notes=tuple(notes),
        handovers=tuple(sorted(handovers, key=lambda h: (h.job, h.started_at))),
    )


def _baseline_price(s: Segment, on_demand: OnDemandPrice, unknown: set[tuple[str, str]]) -> float:
    base = s.on_demand_price_per_hour
    if base is None:
        base = s.price_per_hour if s.market == "on-demand" else None
    if base is None:
        base = on_demand(s.cloud, s.region, s.instance_type)
    if base is None:
        unknown.add((s.cloud, s.instance_type))
        base = s.price_per_hour
    return base


def ended_key(job: str, started_at: datetime) -> str:
    """The key of a job's placement that ended; one per start, so writing it twice is harmless."""
    return f"{ENDED_PREFIX}{job}/{started_at.astimezone(UTC).strftime('%Y%m%dt%H%M%S%fz')}"


def ended_record(placement: Mapping[str, Any], ended_at: datetime, reason: str) -> dict[str, Any]:
    """The placement as it ended: start, end, hours, price paid (USD) and GPU-hours (pure)."""
    started = _parse_time(placement.get("deployed_at") or placement.get("started_at"))
    hours = max(0.0, (ended_at - started).total_seconds() / 3600) if started else 0.0
    nodes = int(placement.get("node_count") or 1)
    price = placement.get("price_per_hour")
    gpus = placement.get("gpu_count")
    keep = {k: v for k, v in placement.items() if k not in ("outputs", "deployed_at")}
    return {
        **keep,
        "started_at": started.isoformat() if started else placement.get("deployed_at"),
        "ended_at": ended_at.isoformat(),
        "reason": reason,
        "hours": hours,
        "cost": float(price) * nodes * hours if isinstance(price, int | float) else None,
        "gpu_hours": float(gpus) * nodes * hours if isinstance(gpus, int | float) else None,
    }


def record_ended(
    records: RecordStore, placement: Mapping[str, Any] | None, ended_at: datetime, reason: str
) -> str | None:
    """Keep a placement that is over in the record store (before its live record goes)."""
    started = _parse_time((placement or {}).get("deployed_at"))
    if not placement or not placement.get("job") or started is None:
        return None
    doc = ended_record(placement, ended_at, reason)
    key = ended_key(str(placement["job"]), started)
    records.put(key, doc)
    return key


def _parse_time(raw: Any) -> datetime | None:
    if raw is None:
        return None
    try:
        value = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def read_segments(records: RecordStore) -> list[Segment]:
    """Every placement in the record store: live ones, their history, and those that ended."""
    out: list[Segment] = []
    found = [("deployed_at", k, v) for k, v in records.list("placements/").items()]
    found += [("started_at", k, v) for k, v in records.list(ENDED_PREFIX).items()]
    for start_key, key, record in found:
        where = f"{records.where}: {key}"
        if not isinstance(record, dict):
            raise BadInput(f"{where}: not a placement record (expected an object)")
        job = str(record.get("job") or key.split("/")[1])
        for i, item in enumerate(record.get("history") or []):
            out.append(_segment(where, f"history[{i}]", job, item, "started_at"))
        previous = record.get("previous")
        if isinstance(previous, dict) and previous.get("started_at") and previous.get("until"):
            item = {**previous, "ended_at": previous["until"]}
            out.append(_segment(where, "previous", job, item, "started_at"))
        out.append(_segment(where, "", job, record, start_key))
    return out


def read_journals(records: RecordStore) -> list[Journal]:
    """Every migration journal in the record store, closed and open (one per id)."""
    from router.engine.job_records import JobRecords

    jobs = JobRecords(records)
    found: dict[str, Journal] = {}
    for job in jobs.jobs():
        if (open_journal := jobs.open_journal(job)) is not None:
            found[open_journal.id] = open_journal
        # A kill between archiving a closed journal and dropping its open copy leaves both.
        found.update((j.id, j) for j in jobs.closed_journals(job))
    return list(found.values())


def _segment(source: str, where: str, job: str, item: Any, start_key: str) -> Segment:
    at = f"{source}: {where}." if where else f"{source}: "
    if not isinstance(item, dict):
        raise BadInput(f"{at[:-1]}: expected an object")

    def time(key: str, required: bool) -> datetime | None:
        raw = item.get(key)
        if raw is None and not required:
            return None
        try:
            value = datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
        except ValueError:
            raise BadInput(f"{at}{key}: {raw!r} is not an ISO 8601 time") from None
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    price = item.get("price_per_hour")
    if isinstance(price, bool) or not isinstance(price, int | float):
        raise BadInput(f"{at}price_per_hour: {price!r} is not a number")
    base = item.get("on_demand_price_per_hour")
    started = time(start_key, True)
    assert started is not None
    ended = time("ended_at", False)
    lost = time("lost_at", False)  # route watch saw its nodes gone: nothing ran or billed after
    if lost is not None and (ended is None or lost < ended):
        ended = max(lost, started)
    finished = time("finished_at", False)  # the job ended there: its nodes power off after it
    if finished is not None:
        off = finished + timedelta(seconds=powered_off_after_s(str(item.get("cloud") or "")))
        if ended is None or off < ended:
            ended = max(off, started)
    return Segment(
        job=job,
        cloud=str(item.get("cloud", "")),
        region=str(item.get("region", "")),
        instance_type=str(item.get("instance_type", "")),
        market=str(item.get("market", "")),
        node_count=int(item.get("node_count") or 1),
        price_per_hour=float(price),
        started_at=started,
        ended_at=ended,
        reason=str(item.get("reason", "")),
        on_demand_price_per_hour=float(base) if isinstance(base, int | float) else None,
        stack=str(item.get("stack") or ""),
    )


def handover_segments(
    segments: Sequence[Segment], journals: Iterable[Journal], now: datetime
) -> list[Segment]:
    """The paid time moves add to the recorded spans (pure): both placements are paid from the
    new stack's up until the old stack is down (until `now` while it is not)."""
    out: list[Segment] = []
    for j in journals:
        up = j.steps.get("new-stack-up")
        up_at = _parse_time(up.done_at) if up else None
        if up is None or up_at is None:
            continue  # its stack never came up: nothing of the new placement was paid for
        if up.first_begun_at:  # run again after a crash: the killed run may have brought it up
            up_at = _parse_time(up.first_begun_at) or up_at
        confirmed = j.steps.get("resume-confirmed")
        switched = _parse_time(confirmed.done_at) if confirmed else None
        new = _closest(segments, j.job, j.to_stack, lambda s: s.started_at, switched or up_at)
        if new is not None and new.started_at >= up_at:
            out.append(_overlap(new, "new", up_at, new.started_at))
            switched = new.started_at  # the record moved on then; the old one ended then
        elif new is None and switched is None:  # rolled back, or the hand-over is under way
            p = j.data("new-stack-up").get("placement") or j.target
            until = _parse_time(j.closed_at) if j.outcome != "open" else now
            price = p.get("price_per_hour")
            if isinstance(price, int | float) and until is not None and until > up_at:
                out.append(Segment(
                    j.job, str(p.get("cloud", "")), str(p.get("region", "")),
                    str(p.get("instance_type", "")), str(p.get("market", "")),
                    int(p.get("node_count") or 1), float(price), up_at, until,
                    "hand-over never completed", stack=j.to_stack, overlap="unrecorded",
                ))  # fmt: skip
        if j.kind != "migrate" or switched is None:
            continue  # a re-placement's old nodes were lost: nothing paid past the loss
        old = _closest(segments, j.job, j.from_stack, lambda s: s.ended_at, switched)
        if old is None or old.ended_at is None:
            continue
        down = j.steps.get("old-stack-down")
        down_at = _parse_time(down.done_at) if down else None
        out.append(_overlap(old, "old", old.ended_at, down_at or now))
    return [s for s in out if s.ended_at is not None and s.ended_at > s.started_at]


def _closest(
    segments: Sequence[Segment],
    job: str,
    stack: str,
    when: Callable[[Segment], datetime | None],
    at: datetime,
) -> Segment | None:
    """The recorded placement of `job` in `stack` whose start or end is nearest `at` (a job's
    first stack name comes back after a destroy and a redeploy)."""
    found = [s for s in segments if (s.job, s.stack, s.overlap) == (job, stack, "")]
    timed = [(abs((t - at).total_seconds()), i) for i, s in enumerate(found) if (t := when(s))]
    return found[min(timed)[1]] if timed else None


def _overlap(s: Segment, role: Overlap, start: datetime, end: datetime) -> Segment:
    return replace(s, started_at=start, ended_at=end, reason=f"hand-over ({role})", overlap=role)


def on_demand_lookup(quotes: Sequence[Any]) -> OnDemandPrice:
    """Same-region on-demand price of an instance type, else its cheapest region's."""
    exact: dict[tuple[str, str, str], float] = {}
    cheapest: dict[tuple[str, str], float] = {}
    for q in quotes:
        if q.market != "on-demand":
            continue
        key = (q.cloud, q.region, q.instance_type)
        exact[key] = min(exact.get(key, q.price_per_hour), q.price_per_hour)
        k2 = (q.cloud, q.instance_type)
        cheapest[k2] = min(cheapest.get(k2, q.price_per_hour), q.price_per_hour)

    def lookup(cloud: str, region: str, instance_type: str) -> float | None:
        return exact.get((cloud, region, instance_type), cheapest.get((cloud, instance_type)))

    return lookup


def report(
    *,
    now: datetime,
    days: float | None = None,
    project: Project | None = None,
    records: RecordStore | None = None,
) -> SpendReport:
    """The spend report of the project's backend (its record store) over the last `days`."""
    from router.config.home import cache_path
    from router.prices.cache import QuoteCache
    from router.prices.snapshot import load_snapshot

    if days is not None and days <= 0:
        raise BadInput(f"--days must be above 0, got {days:g}")
    store = records if records is not None else records_of(project)
    segments = read_segments(store)
    segments += handover_segments(segments, read_journals(store), now)
    quotes: list[Any] = list(load_snapshot())
    cache = cache_path()
    if cache.exists():
        with QuoteCache(cache) as qc:
            quotes.extend(qc.latest())
    if project is not None:
        quotes.extend(local_market_on_demand(project, now))
    result = summarise(segments, now=now, days=days, on_demand=on_demand_lookup(quotes))
    result = replace(result, notes=result.notes + crash_notes(segments, store, result.since))
    if not segments:
        return SpendReport(
            result.since,
            result.until,
            0.0,
            0.0,
            (),
            (),
            (),
            (f"no placements recorded in {store.where} — deploy a job first",),
        )
    return result


def crash_notes(
    segments: Sequence[Segment], store: RecordStore, since: datetime
) -> tuple[str, ...]:
    """One line per crashed placement route watch tore down in the window: when, and why."""
    from router.flows.teardown import crashed_teardowns

    ended = [s for s in segments if s.reason == "crashed" and s.ended_at and s.ended_at > since]
    whys = {(t.job, t.stack): t.why for t in crashed_teardowns(store)} if ended else {}
    return tuple(
        f"{s.job} crashed on {s.cloud} {s.region}"
        + (f" ({whys[s.job, s.stack]})" if (s.job, s.stack) in whys else "")
        + f": route watch tore its placement down at {s.ended_at:%Y-%m-%d %H:%M} UTC — "
        "counted until then"
        for s in sorted(ended, key=lambda s: (s.job, s.started_at))
        if s.ended_at is not None
    )


def local_market_on_demand(project: Project, now: datetime) -> list[Quote]:
    """The on-demand rows of the project's local market (spotroute.yaml `local_market:`) in
    force at `now`, as quotes: the baseline of the local target's placements."""
    from router.config.local_market import load_local_market
    from router.config.org_file import org_config_for
    from router.prices.local import LOCAL_INSTANCE_TYPE

    market = load_local_market(org_config_for(project), project.root)
    if market is None:
        return []
    return [
        Quote("local", region, None, LOCAL_INSTANCE_TYPE, kind, row.price_per_hour, "local", now)
        for (region, kind), row in market.at(now).items()
        if kind == "on-demand"
    ]


def records_of(project: Project | None) -> RecordStore:
    """The record store next to the project's Pulumi state (org config backend_url, else local)."""
    from router.config.home import spotroute_home
    from router.config.org_file import org_config_for
    from router.engine.automation import choose_backend
    from router.engine.records import records_for

    home = spotroute_home()
    org = org_config_for(project)
    backend = choose_backend(home, org.backend_url, org.secrets_provider)
    return records_for(backend.url, home, is_default=backend.is_default)
