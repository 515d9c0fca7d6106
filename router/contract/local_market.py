"""The local target as a small market: regions with spot and on-demand prices and capacity.

Shared by the router (local offers, prices now) and the local target (components/local.py
refuses a launch when a region's capacity is used up or the spot price is above the cap, the
way the clouds do). The market is what the environment offers, not stack config, so it travels
to the engine's provider process in one environment variable, SPOTROUTE_LOCAL_MARKET (JSON).

A trace is CSV, one row per change (docs/migration.md):

    at,region,market,price_per_hour,capacity
    0s,local-a,spot,0.90,2
    0s,local-b,spot,1.20,2
    2h,local-b,spot,0.40,2          # local-b gets cheaper two hours into the trace

`at` is an ISO 8601 time with timezone, or a duration (`0s`, `90m`, `2h`, `1d`) after the
trace's start. At any moment each (region, market) has the values of its latest row at or
before that moment; before its first row it is not offered. capacity is how many job processes
may run there at once (0 = the region refuses every launch); `-` (price `-` too, or any) takes
the offer away from then on — not offered, as before its first row — until a later row: a spot
zone whose outage the market announces (`route rehearse` replays a backtest's trace so).

Pure: standard library only, no files (the caller reads the trace text).
"""

from __future__ import annotations

import bisect
import csv
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

ENV_VAR = "SPOTROUTE_LOCAL_MARKET"
MARKETS = ("spot", "on-demand")
COLUMNS = ("at", "region", "market", "price_per_hour", "capacity")
# The most a row may charge, USD per hour: the top of job.yaml's max_price_per_hour range
# (router.core.job.model).
MAX_PRICE_PER_HOUR = 10_000.0
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_REGION = re.compile(r"local(-[a-z0-9]+)*")


class MarketError(ValueError):
    """A trace or market spec is malformed; the message names the file, line and column."""


@dataclass(frozen=True, slots=True)
class MarketRow:
    """From `at` on (absolute time, or offset_s after the start), region/market has these."""

    region: str
    market: str
    price_per_hour: float  # USD per instance-hour
    capacity: int  # job processes that may run at once
    offset_s: float | None = None
    at: datetime | None = None
    offered: bool = True  # False: the offer is taken away from `at` on (capacity `-`)

    def starts(self, start: datetime) -> datetime:
        if self.at is not None:
            return self.at
        return start + timedelta(seconds=self.offset_s or 0.0)

    def to_json(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "market": self.market,
            "price_per_hour": self.price_per_hour,
            "capacity": self.capacity,
            "offset_s": self.offset_s,
            "at": None if self.at is None else self.at.isoformat(),
            "offered": self.offered,
        }


@dataclass(frozen=True, slots=True)
class LocalBehaviour:
    """How the local target behaves like a cloud; times are simulated seconds (see time_scale)."""

    profile: str = ""  # the cloud imitated: aws | gcp | azure; "" = a plain process, instant
    time_scale: float = 1.0  # simulated seconds per real second
    boot_s: float = 0.0  # a node from launch to running its start-up script
    pull_s_per_gb: float = 0.0  # `docker pull`, per GB of image
    image_gb: float = 0.0  # the image size a node pulls when the job names an image
    notice_s: float = 0.0  # preemption notice lead time; 0 = route preempt's default
    quota_gpus: tuple[tuple[str, int], ...] = ()  # (region, GPUs that may run there at once)
    boot_by_region: tuple[tuple[str, float], ...] = ()  # (region, boot_s): slow regions

    def real_s(self, simulated_s: float) -> float:
        """Real seconds that `simulated_s` take on the accelerated clock."""
        return simulated_s / self.time_scale

    def boot_in(self, region: str) -> float:
        """Simulated seconds a node of `region` boots."""
        return dict(self.boot_by_region).get(region, self.boot_s)

    def quota_in(self, region: str) -> int | None:
        """GPUs `region` may run at once; None = no quota."""
        return dict(self.quota_gpus).get(region)

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "time_scale": self.time_scale,
            "boot_s": self.boot_s,
            "pull_s_per_gb": self.pull_s_per_gb,
            "image_gb": self.image_gb,
            "notice_s": self.notice_s,
            "quota_gpus": dict(self.quota_gpus),
            "boot_by_region": dict(self.boot_by_region),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LocalBehaviour:
        return cls(
            profile=str(data.get("profile", "")),
            time_scale=float(data.get("time_scale", 1.0)),
            boot_s=float(data.get("boot_s", 0.0)),
            pull_s_per_gb=float(data.get("pull_s_per_gb", 0.0)),
            image_gb=float(data.get("image_gb", 0.0)),
            notice_s=float(data.get("notice_s", 0.0)),
            quota_gpus=tuple(
                sorted((str(k), int(v)) for k, v in data.get("quota_gpus", {}).items())
            ),
            boot_by_region=tuple(
                sorted((str(k), float(v)) for k, v in data.get("boot_by_region", {}).items())
            ),
        )


@dataclass(frozen=True, slots=True)
class LocalMarket:
    """A trace with its start time: what each local region offers at any moment."""

    rows: tuple[MarketRow, ...]
    start: datetime
    behaviour: LocalBehaviour = LocalBehaviour()
    # (region, market) → its rows' start times and rows, in order: a long trace (a rehearsal's)
    # is looked up by bisection, many times a second.
    _by_place: dict[tuple[str, str], tuple[list[datetime], list[MarketRow]]] = field(
        init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        found: dict[tuple[str, str], list[tuple[datetime, int, MarketRow]]] = {}
        for i, row in enumerate(self.rows):
            found.setdefault((row.region, row.market), []).append((row.starts(self.start), i, row))
        index = {
            key: ([b for b, _i, _r in rows], [r for _b, _i, r in rows])
            for key, rows in sorted((k, sorted(v, key=lambda t: t[:2])) for k, v in found.items())
        }
        object.__setattr__(self, "_by_place", index)

    def simulated(self, now: datetime) -> datetime:
        """The local market's clock at real time `now` (runs time_scale × faster from start)."""
        scale = self.behaviour.time_scale
        if scale == 1:
            return now
        try:
            return self.start + (now - self.start) * scale
        except OverflowError:  # offers without a start (1970) on a fast clock: all in force
            return datetime.max.replace(tzinfo=UTC)

    def at(self, now: datetime) -> dict[tuple[str, str], MarketRow]:
        """(region, market) → the row in force at real time `now` (on the market's clock;
        regions not offered now — not yet, or taken away — are absent)."""
        now = self.simulated(now)
        found = {}
        for key, (begins, rows) in self._by_place.items():
            # The last row beginning at or before now; of rows beginning together, the last.
            i = bisect.bisect_right(begins, now)
            if i and rows[i - 1].offered:
                found[key] = rows[i - 1]
        return found

    def regions(self) -> tuple[str, ...]:
        return tuple(sorted({r.region for r in self.rows}))

    def to_env(self) -> str:
        """The JSON the local target reads from SPOTROUTE_LOCAL_MARKET."""
        return json.dumps(
            {
                "start": self.start.isoformat(),
                "rows": [r.to_json() for r in self.rows],
                "behaviour": self.behaviour.to_json(),
            }
        )

    @classmethod
    def from_env(cls, text: str) -> LocalMarket:
        data = json.loads(text)
        rows = tuple(
            MarketRow(
                region=str(r["region"]),
                market=str(r["market"]),
                price_per_hour=float(r["price_per_hour"]),
                capacity=int(r["capacity"]),
                offset_s=None if r.get("offset_s") is None else float(r["offset_s"]),
                at=None if r.get("at") is None else datetime.fromisoformat(str(r["at"])),
                offered=bool(r.get("offered", True)),
            )
            for r in data["rows"]
        )
        behaviour = LocalBehaviour.from_json(data.get("behaviour") or {})
        return cls(rows, datetime.fromisoformat(str(data["start"])), behaviour)


def parse_trace(text: str, name: str = "trace") -> tuple[MarketRow, ...]:
    """Rows of a trace CSV (comments with #, blank lines ignored); MarketError names the line."""
    lines = [
        (n, line)
        for n, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise MarketError(f"{name}: empty — add a header `{','.join(COLUMNS)}` and rows")
    header_n, header = lines[0]
    columns = [c.strip() for c in next(csv.reader([header]))]
    missing = [c for c in COLUMNS if c not in columns]
    if missing:
        raise MarketError(
            f"{name}:{header_n}: header lacks {', '.join(missing)} — use {','.join(COLUMNS)}"
        )
    rows = []
    for n, line in lines[1:]:
        values = [v.split("#", 1)[0].strip() for v in next(csv.reader([line]))]
        if len(values) < len(columns):
            raise MarketError(f"{name}:{n}: {len(values)} values, the header has {len(columns)}")
        cell = dict(zip(columns, values, strict=False))
        rows.append(_row(cell, f"{name}:{n}"))
    return tuple(rows)


def rows_from_mappings(items: Iterable[dict[str, Any]], name: str) -> tuple[MarketRow, ...]:
    """Rows given inline (the org config's local_market.offers), same fields as the CSV."""
    rows = []
    for i, item in enumerate(items):
        cell = {k: "" if item.get(k) is None else str(item.get(k)) for k in COLUMNS}
        cell["at"] = cell["at"] or "0s"
        rows.append(_row(cell, f"{name}[{i}]"))
    return tuple(rows)


def _row(cell: dict[str, str], where: str) -> MarketRow:
    region = cell["region"]
    if not _REGION.fullmatch(region):
        raise MarketError(
            f"{where}: region: {region!r} — local regions are named local or local-<name>"
        )
    market = cell["market"]
    if market not in MARKETS:
        raise MarketError(f"{where}: market: {market!r} — use spot or on-demand")
    if cell["capacity"] == "-":  # the offer is taken away
        offset_s, at = _when(cell["at"], where)
        return MarketRow(region, market, 0.0, 0, offset_s=offset_s, at=at, offered=False)
    try:
        price = float(cell["price_per_hour"])
    except ValueError:
        price = math.nan
    if not math.isfinite(price) or not 0 <= price <= MAX_PRICE_PER_HOUR:
        raise MarketError(
            f"{where}: price_per_hour: {cell['price_per_hour']!r} — use USD per hour, from 0 to "
            f"{MAX_PRICE_PER_HOUR:,.0f}"
        )
    text = cell["capacity"]
    if not text.isdigit():
        raise MarketError(
            f"{where}: capacity: {text!r} — use a whole number ≥ 0, or - (not offered)"
        )
    offset_s, at = _when(cell["at"], where)
    return MarketRow(region, market, price, int(text), offset_s=offset_s, at=at)


def _when(text: str, where: str) -> tuple[float | None, datetime | None]:
    match = _DURATION.match(text)
    if match:
        return float(match.group(1)) * _UNIT_S[match.group(2)], None
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        at = None
    if at is None or at.utcoffset() is None:
        raise MarketError(
            f"{where}: at: {text!r} — use a duration after the start (0s, 90m, 2h) or an "
            "ISO time with timezone"
        )
    return None, at
