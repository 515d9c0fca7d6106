"""Backtest workload files (YAML) → Workload and, when given, the synthetic market to replay on.

The format is documented in docs/backtest.md; examples/backtest-30d.yaml is the reference.
Errors are one line: `<file>: <field.path>: <problem> — <fix>`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from router.config.datafiles import load_catalog, load_gpus, load_startup_figures
from router.config.user_files import CONFIG_LIMIT_BYTES, read_user_text
from router.core.backtest_model import FIRST_PLACEMENTS, POLICY, Workload, WorkloadJob
from router.core.catalog import Catalog
from router.core.durations import parse_duration_s, parse_spot_wait_s
from router.core.errors import BadInput
from router.core.globs import glob_problem
from router.core.gpus import UnknownGpu
from router.core.job.migration import SPOT_WAIT_DEFAULT_S
from router.core.offers import INTERRUPTION_BUCKETS
from router.core.synthetic import CloudOffer, JobMix, MarketModel, Shape, synthetic_workload

# A window that begins more than this after the last observed price row is refused (the prices
# would say nothing of it); an explicit `price_gap` takes its place.
PRICES_REACH_S = 7 * 86400.0
# The sane range of each workload number, by field name (docs/backtest.md): (low, high, whether
# low itself is allowed). Beyond them a replay never ends or fills the memory (median_hours
# 1e-320 adds no GPU-hours per generated job; days 1e308 steps for ever).
RANGES: dict[str, tuple[float, float, bool]] = {
    "days": (0.0, 366.0, False),
    "on_demand": (0.001, 10_000.0, True),  # USD per hour, as job.yaml's prices
    "spot_fraction": (0.001, 10.0, True),
    "zone_spread": (0.0, 1.0, True),
    "diurnal_amplitude": (0.0, 1.0, True),
    "noise": (0.0, 1.0, True),
    "provider_spread": (0.0, 10.0, True),
    "region_spread": (0.0, 10.0, True),
    "weight": (0.0, 1e6, False),
    "median_hours": (0.25, 8_760.0, True),  # jobs are drawn in quarter hours
    "max_hours": (0.25, 8_760.0, True),
    "checkpoint_gb": (0.0, 1e9, True),
    "data_gb": (0.0, 1e9, True),
    "size_gb": (0.0, 1e9, True),
    "gpu_hours_per_day": (0.0, 100_000.0, False),
    "deadline_share": (0.0, 1.0, True),
    "deadline_slack": (0.0, 100.0, True),
    "min_savings_pct": (0.0, 100.0, True),
    "arrivals_until_day": (0.0, 366.0, True),
}
MAX_STEPS = 1_000_000  # days ÷ step
MAX_GENERATED_JOBS = 100_000
MAX_NODES = 64  # as job.yaml's node_count and GPUs per instance


@dataclass(frozen=True)
class WorkloadFile:
    """What a workload file says: the jobs, the replay window, and an optional synthetic market."""

    workload: Workload
    start: datetime
    days: float
    step_s: float
    market: MarketModel | None
    market_seed: int
    # `price_gap`: None (default) — a pool is gone when its file moves on without it (the
    # file's own cadence, router.core.trace_cadence); seconds — gone after this long without a
    # row of it; math.inf (`never`) — prices hold until the next row.
    price_gap_s: float | None = None
    # `traces:` — files named by the workload (relative to it), used when the command line
    # gives none: price files, and [SELECTOR=]FILE availability specs.
    prices: tuple[Path, ...] = ()
    availability: tuple[str, ...] = ()


class _Where:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, text: str) -> BadInput:
        return BadInput(f"{self.path}: {where}: {text}" if where else f"{self.path}: {text}")


def load_workload(path: Path, *, catalog: Catalog | None = None) -> WorkloadFile:
    """Read a backtest workload YAML file; raises BadInput naming the file and field."""
    w = _Where(path)
    text = read_user_text(path, limit_bytes=CONFIG_LIMIT_BYTES * 16, what="workload file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise BadInput(f"{path}: {line}not valid YAML") from None
    if not isinstance(data, dict):
        raise w.fail("", "expected a mapping with name, start, days and jobs")
    _known(w, "", data, {"name", "start", "days", "step", "home_cloud", "handover", "launch",
                         "first_placement", "zone_block", "price_gap", "market", "traces",
                         "jobs", "save_on_notice"})  # fmt: skip
    name = str(data.get("name") or path.stem)
    start = _time(w, "start", data.get("start"))
    days = _number(w, "days", data.get("days", 30), positive=True)
    step_s = _duration(w, "step", data.get("step", "1h"))
    if days * 86400 / step_s > MAX_STEPS:
        raise w.fail("step", f"{days:g} days in steps of {step_s:g} s is more than "
                     f"{MAX_STEPS:,} steps — use a longer step or fewer days")  # fmt: skip
    if days * 86400 < step_s:
        raise w.fail("days", f"{days:g} days is shorter than one step ({step_s:g} s) — replay at "
                     "least one step")  # fmt: skip
    home = str(data.get("home_cloud", "aws"))
    handover_s = _duration(w, "handover", data.get("handover", "5m"), allow_zero=True)
    block_s = _duration(w, "zone_block", data.get("zone_block", "1h"), allow_zero=True)
    launch_s = _duration(w, "launch", data.get("launch", "0s"), allow_zero=True)
    if launch_s > 86400:
        raise w.fail("launch", f"{launch_s:g} s is more than a day — a launch takes minutes "
                     "(e.g. 3m), or 0 for at once")  # fmt: skip
    first = data.get("first_placement", POLICY)
    if first not in FIRST_PLACEMENTS:
        raise w.fail("first_placement", f"{first!r} is not policy or deploy — give policy "
                     "(the policy places a job at its arrival) or deploy (route deploy "
                     "does)")  # fmt: skip
    gap_s = None
    if data.get("price_gap") is not None:
        gap_s = price_gap(data["price_gap"], lambda why: w.fail("price_gap", why))
    catalog = catalog if catalog is not None else load_catalog()
    market, seed = None, 0
    if data.get("market") is not None:
        market, seed = _market(w, data["market"], catalog)
    jobs_data = data.get("jobs")
    if not isinstance(jobs_data, dict):
        raise w.fail("jobs", "missing — give jobs.generate (synthetic) and/or jobs.list")
    _known(w, "jobs", jobs_data, {"generate", "list"})
    jobs: list[WorkloadJob] = []
    if jobs_data.get("generate") is not None:
        generated = _generate(w, jobs_data["generate"], name, start, days, home)
        jobs.extend(generated.jobs)
    for i, item in enumerate(jobs_data.get("list") or []):
        jobs.append(_job(w, f"jobs.list[{i}]", item, start))
    if not jobs:
        raise w.fail("jobs", "no jobs — add jobs.generate or jobs.list entries")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise w.fail("jobs", f"job name {dup!r} appears twice — names must be unique")
    save_on_notice = data.get("save_on_notice", True)
    if not isinstance(save_on_notice, bool):
        raise w.fail("save_on_notice", f"{save_on_notice!r} is not true or false — give true "
                     "(the checkpoint library saves on a spot notice) or false")  # fmt: skip
    notice: tuple[tuple[str, float], ...] = ()
    if save_on_notice:  # each cloud's notice lead, router/data/node_startup.csv
        notice = tuple((c, f.notice_s) for c, f in sorted(load_startup_figures().items()))
    workload = Workload(
        name=name,
        jobs=tuple(sorted(jobs, key=lambda j: (j.arrival, j.name))),
        home_cloud=home,
        handover_s=handover_s,
        zone_block_s=block_s,
        notice_s=notice,
        launch_s=launch_s,
        first_placement=str(first),
    )
    prices, availability = _traces(w, data.get("traces"))
    return WorkloadFile(workload, start, days, step_s, market, seed, gap_s, prices, availability)


def _traces(w: _Where, data: object) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """`traces: {prices: [FILE…], availability: [[SELECTOR=]FILE…]}`, files relative to the
    workload file."""
    if data is None:
        return (), ()
    if not isinstance(data, dict):
        raise w.fail("traces", "must be a mapping with prices and/or availability")
    _known(w, "traces", data, {"prices", "availability"})
    here = w.path.parent

    def files(key: str) -> list[str]:
        value = data.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise w.fail(f"traces.{key}", "must be a list of file names")
        return value

    prices = tuple(here / f for f in files("prices"))
    availability = []
    for i, spec in enumerate(files("availability")):
        selector, eq, file = spec.rpartition("=")
        if (why := glob_problem(selector)) is not None:  # a typo, not a selector of nothing
            raise w.fail(f"traces.availability[{i}]", f"the selector's {why}")
        availability.append(f"{selector}{eq}{here / file}")
    return prices, tuple(availability)


def price_gap(value: object, fail: Callable[[str], BadInput]) -> float | None:
    """`price_gap` (workload) or `--price-gap` (CLI): seconds, math.inf for `never`, None for
    `cadence` (the default: a pool is gone when its file moves on without it)."""
    if isinstance(value, str) and value.strip().lower() == "never":
        return math.inf
    if isinstance(value, str) and value.strip().lower() == "cadence":
        return None
    try:
        seconds = parse_duration_s(value)
    except ValueError as err:
        raise fail(
            f"{err} (or never: prices hold until the next row; or cadence, the default: a pool "
            "is gone when its file moves on without it)"
        ) from None
    if seconds <= 0:
        raise fail("must be a positive duration, e.g. 7d or 12h (or never, or cadence)")
    return seconds


def _known(w: _Where, where: str, data: dict[str, Any], keys: set[str]) -> None:
    for key in data:
        if key not in keys:
            at = f"{where}.{key}" if where else str(key)
            raise w.fail(at, f"unknown key — use one of {', '.join(sorted(keys))}")


def _time(w: _Where, where: str, value: object) -> datetime:
    if isinstance(value, datetime):
        at = value
    elif isinstance(value, str):
        try:
            at = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise w.fail(
                where, f"{value!r} is not an ISO 8601 time — e.g. 2026-11-01T00:00:00Z"
            ) from None
    else:
        raise w.fail(where, "missing — an ISO 8601 time with timezone, e.g. 2026-11-01T00:00:00Z")
    if at.tzinfo is None:
        raise w.fail(where, "has no timezone — add Z")
    return at.astimezone(UTC)


def _number(w: _Where, where: str, value: object, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise w.fail(where, f"{value!r} is not a number")
    if value < 0 or (positive and value == 0):
        raise w.fail(where, f"{value!r} must be {'above' if positive else 'at least'} 0")
    low, high, low_ok = RANGES.get(re.sub(r"\[\d+\]$", "", where).rsplit(".", 1)[-1],
                                   (0.0, 1e12, True))  # fmt: skip
    number = float(value) if abs(value) < 1e300 else math.inf
    if not math.isfinite(number) or number > high or number < low or (number == low and not low_ok):
        bound = f"from {low:g}" if low_ok else f"above {low:g}"
        raise w.fail(where, f"{value!r} is out of range — give a number {bound} to {high:g}")
    return number


def _whole(w: _Where, where: str, value: object, low: int, high: int) -> int:
    """A whole number in [low, high] (zones, nodes, a seed)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise w.fail(where, f"{value!r} is not a whole number from {low} to {high:,}")
    return value


def _duration(w: _Where, where: str, value: object, *, allow_zero: bool = False) -> float:
    try:
        seconds = parse_duration_s(value)
    except ValueError as err:
        raise w.fail(where, str(err)) from None
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise w.fail(where, "must be a positive duration, e.g. 30m or 2h")
    if 0 < seconds < 1:  # a denormal step or outage period would make a replay endless
        raise w.fail(where, "is less than a second — give e.g. 30m or 2h (or 0 where allowed)")
    return seconds


def _spot_wait(w: _Where, where: str, value: object) -> float:
    """migration.spot_wait: 0 up to a year, or `forever` (math.inf: spot only, never
    on-demand); router.core.durations.parse_spot_wait_s."""
    if value is None:
        return SPOT_WAIT_DEFAULT_S
    try:
        return parse_spot_wait_s(value)
    except ValueError as err:
        raise w.fail(where, str(err)) from None


def _gpus(w: _Where, where: str, value: object) -> tuple[str, int]:
    if not isinstance(value, str):
        raise w.fail(where, "missing — write GPU:count, e.g. A100-80GB:8")
    gpu, _, count = value.partition(":")
    try:
        name = load_gpus().canonical(gpu.strip())
    except UnknownGpu as err:
        raise w.fail(where, str(err)) from None
    if count and not count.strip().isdigit():
        raise w.fail(where, f"count {count!r} is not a whole number")
    return name, _whole(w, where, int(count) if count else 1, 1, MAX_NODES)


def _pair(
    w: _Where, where: str, value: object, default: tuple[float, float]
) -> tuple[float, float]:
    if value is None:
        return default
    if not isinstance(value, list) or len(value) != 2:
        raise w.fail(where, "must be [low, high]")
    low, high = (_number(w, f"{where}[{i}]", v) for i, v in enumerate(value))
    if high < low:
        raise w.fail(where, "high is below low")
    return low, high


def _market(w: _Where, data: object, catalog: Catalog) -> tuple[MarketModel, int]:
    if not isinstance(data, dict):
        raise w.fail("market", "must be a mapping with seed and shapes")
    _known(w, "market", data, {"seed", "provider_spread", "region_spread", "zone_spread",
                               "diurnal_amplitude", "noise", "mean_down", "region_outage_every",
                               "region_outage", "shapes"})  # fmt: skip
    shapes = []
    for i, item in enumerate(data.get("shapes") or []):
        at = f"market.shapes[{i}]"
        if not isinstance(item, dict):
            raise w.fail(at, "must be a mapping with gpus and offers")
        _known(w, at, item, {"gpus", "offers"})
        gpu, count = _gpus(w, f"{at}.gpus", item.get("gpus"))
        offers = []
        memory = 0
        for j, o in enumerate(item.get("offers") or []):
            oat = f"{at}.offers[{j}]"
            if not isinstance(o, dict):
                raise w.fail(oat, "must be a mapping")
            _known(w, oat, o, {"cloud", "instance_type", "on_demand", "spot_fraction", "regions",
                               "zones", "buckets"})  # fmt: skip
            cloud, itype = str(o.get("cloud", "")), str(o.get("instance_type", ""))
            hw = catalog.get(cloud, itype)
            if hw is None:
                raise w.fail(
                    f"{oat}.instance_type", f"{cloud} {itype} is not in the instance catalog"
                )
            if (hw.gpu, hw.gpu_count) != (gpu, count):
                raise w.fail(
                    f"{oat}.instance_type",
                    f"{itype} has {hw.gpu}×{hw.gpu_count}, not {gpu}×{count}",
                )
            memory = hw.gpu_memory_gb
            regions = o.get("regions")
            if not isinstance(regions, list) or not regions:
                raise w.fail(f"{oat}.regions", "must be a list of region names")
            buckets = tuple(o.get("buckets") or (">20%",))
            for b in buckets:
                if b not in INTERRUPTION_BUCKETS:
                    raise w.fail(f"{oat}.buckets", f"{b!r} is not one of {INTERRUPTION_BUCKETS}")
            fraction = _number(w, f"{oat}.spot_fraction", o.get("spot_fraction"), positive=True)
            offers.append(
                CloudOffer(
                    cloud,
                    itype,
                    _number(w, f"{oat}.on_demand", o.get("on_demand"), positive=True),
                    fraction,
                    tuple(str(r) for r in regions),
                    _whole(w, f"{oat}.zones", o.get("zones", 3), 1, 26),
                    buckets,
                    hw.vcpus,
                    hw.memory_gb,
                )
            )
        if not offers:
            raise w.fail(f"{at}.offers", "empty — list each cloud's instance type and prices")
        shapes.append(Shape(gpu, count, memory, tuple(offers)))
    if not shapes:
        raise w.fail("market.shapes", "empty — list the GPU shapes the market sells")
    model = MarketModel(
        shapes=tuple(shapes),
        provider_spread=_pair(w, "market.provider_spread", data.get("provider_spread"), (0.2, 0.4)),
        region_spread=_pair(w, "market.region_spread", data.get("region_spread"), (0.15, 0.25)),
        zone_spread=_number(w, "market.zone_spread", data.get("zone_spread", 0.03)),
        diurnal_amplitude=_number(
            w, "market.diurnal_amplitude", data.get("diurnal_amplitude", 0.08)
        ),
        noise=_number(w, "market.noise", data.get("noise", 0.02)),
        mean_down_h=_duration(w, "market.mean_down", data.get("mean_down", "3h")) / 3600,
        region_outage_every_h=_duration(
            w, "market.region_outage_every", data.get("region_outage_every", "240h")
        )
        / 3600,
        region_outage_h=_duration(w, "market.region_outage", data.get("region_outage", "4h"))
        / 3600,
    )
    return model, _whole(w, "market.seed", data.get("seed", 0), 0, 2**63 - 1)


def _generate(
    w: _Where, data: object, name: str, start: datetime, days: float, home: str
) -> Workload:
    if not isinstance(data, dict):
        raise w.fail("jobs.generate", "must be a mapping")
    _known(w, "jobs.generate", data, {"seed", "gpu_hours_per_day", "deadline_share",
                                      "deadline_slack", "data_region", "checkpoint_interval",
                                      "restore_overhead", "min_savings_pct", "cooldown",
                                      "spot_wait", "arrivals_until_day", "mix"})  # fmt: skip
    mix = []
    for i, m in enumerate(data.get("mix") or []):
        at = f"jobs.generate.mix[{i}]"
        if not isinstance(m, dict):
            raise w.fail(at, "must be a mapping")
        _known(w, at, m, {"gpus", "weight", "nodes", "median_hours", "max_hours",
                          "checkpoint_gb", "data_gb"})  # fmt: skip
        gpu, count = _gpus(w, f"{at}.gpus", m.get("gpus"))
        nodes = m.get("nodes", [1])
        mix.append(
            JobMix(
                gpu,
                count,
                weight=_number(w, f"{at}.weight", m.get("weight", 1.0), positive=True),
                node_counts=tuple(
                    _whole(w, f"{at}.nodes", n, 1, MAX_NODES)
                    for n in (nodes if isinstance(nodes, list) else [nodes])
                ),
                median_hours=_number(
                    w, f"{at}.median_hours", m.get("median_hours", 6), positive=True
                ),
                max_hours=_number(w, f"{at}.max_hours", m.get("max_hours", 36), positive=True),
                checkpoint_gb=_number(w, f"{at}.checkpoint_gb", m.get("checkpoint_gb", 100)),
                data_gb=_pair(w, f"{at}.data_gb", m.get("data_gb"), (100.0, 1000.0)),
            )
        )
    if not mix:
        raise w.fail("jobs.generate.mix", "empty — list the kinds of jobs (gpus, weight, …)")
    g = "jobs.generate"
    per_day = _number(w, f"{g}.gpu_hours_per_day", data.get("gpu_hours_per_day"), positive=True)
    # Jobs are drawn until their GPU-hours reach per_day × days, each at least its shape's
    # smallest draw: more than MAX_GENERATED_JOBS of them would take the replay's memory.
    smallest = min(m.gpu_count * min(m.node_counts) * min(m.max_hours, max(1.0, m.median_hours))
                   for m in mix)  # fmt: skip
    if (jobs := per_day * days / smallest) > MAX_GENERATED_JOBS:
        raise w.fail(f"{g}.gpu_hours_per_day", f"{per_day:g} GPU-hours a day for {days:g} days "
                     f"makes about {jobs:,.0f} jobs — at most {MAX_GENERATED_JOBS:,}: fewer "
                     "GPU-hours, fewer days or longer jobs")  # fmt: skip
    until = data.get("arrivals_until_day")
    return synthetic_workload(
        name=name,
        start=start,
        days=days,
        gpu_hours_per_day=per_day,
        mix=tuple(mix),
        seed=_whole(w, f"{g}.seed", data.get("seed", 0), 0, 2**63 - 1),
        home_cloud=home,
        data_region=str(data.get("data_region", "us-east-1")),
        deadline_share=_number(w, f"{g}.deadline_share", data.get("deadline_share", 0.3)),
        deadline_slack=_pair(w, f"{g}.deadline_slack", data.get("deadline_slack"), (1.3, 2.5)),
        checkpoint_interval_s=_duration(
            w, f"{g}.checkpoint_interval", data.get("checkpoint_interval", "30m")
        ),
        restore_overhead_s=_duration(
            w, f"{g}.restore_overhead", data.get("restore_overhead", "10m"), allow_zero=True
        ),
        min_savings_pct=_number(w, f"{g}.min_savings_pct", data.get("min_savings_pct", 20)),
        cooldown_s=_duration(w, f"{g}.cooldown", data.get("cooldown", "1h"), allow_zero=True),
        spot_wait_s=_spot_wait(w, f"{g}.spot_wait", data.get("spot_wait")),
        arrivals_until_day=None if until is None else _number(w, f"{g}.arrivals_until_day", until),
    )


def _job(w: _Where, at: str, data: object, start: datetime) -> WorkloadJob:
    if not isinstance(data, dict):
        raise w.fail(at, "must be a mapping with name, arrival, duration and gpus")
    _known(w, at, data, {"name", "arrival", "duration", "gpus", "nodes", "checkpoint", "data",
                         "deadline", "migration", "clouds"})  # fmt: skip
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise w.fail(f"{at}.name", "missing")
    arrival_raw = data.get("arrival", 0)
    if isinstance(arrival_raw, datetime | str) and not _looks_like_duration(arrival_raw):
        arrival = _time(w, f"{at}.arrival", arrival_raw)
    else:
        arrival = start + timedelta(
            seconds=_duration(w, f"{at}.arrival", arrival_raw, allow_zero=True)
        )
    gpu, count = _gpus(w, f"{at}.gpus", data.get("gpus"))
    ckpt = data.get("checkpoint") or {}
    if not isinstance(ckpt, dict):
        raise w.fail(f"{at}.checkpoint", "must be a mapping (interval, restore_overhead, size_gb)")
    _known(w, f"{at}.checkpoint", ckpt, {"interval", "restore_overhead", "size_gb"})
    info = data.get("data") or {}
    if not isinstance(info, dict):
        raise w.fail(f"{at}.data", "must be a mapping (cloud, region, size_gb)")
    _known(w, f"{at}.data", info, {"cloud", "region", "size_gb"})
    mig = data.get("migration") or {}
    if not isinstance(mig, dict):
        raise w.fail(f"{at}.migration", "must be a mapping (min_savings_pct, cooldown, spot_wait)")
    _known(w, f"{at}.migration", mig, {"min_savings_pct", "cooldown", "spot_wait"})
    deadline = None
    if data.get("deadline") is not None:
        raw = data["deadline"]
        if isinstance(raw, str) and _looks_like_duration(raw):
            deadline = arrival + timedelta(seconds=_duration(w, f"{at}.deadline", raw))
        else:
            deadline = _time(w, f"{at}.deadline", raw)
    clouds = data.get("clouds", ["aws", "gcp", "azure"])
    return WorkloadJob(
        name=name,
        arrival=arrival,
        duration_h=_duration(w, f"{at}.duration", data.get("duration")) / 3600,
        gpu=gpu,
        gpu_count=count,
        node_count=_whole(w, f"{at}.nodes", data.get("nodes", 1), 1, MAX_NODES),
        checkpoint_interval_s=_duration(
            w, f"{at}.checkpoint.interval", ckpt.get("interval", "30m")
        ),
        restore_overhead_s=_duration(
            w,
            f"{at}.checkpoint.restore_overhead",
            ckpt.get("restore_overhead", "10m"),
            allow_zero=True,
        ),
        checkpoint_gb=_number(w, f"{at}.checkpoint.size_gb", ckpt.get("size_gb", 0)),
        data_cloud=str(info["cloud"]) if info.get("cloud") else None,
        data_region=str(info.get("region", "")),
        data_gb=_number(w, f"{at}.data.size_gb", info.get("size_gb", 0)),
        deadline=deadline,
        min_savings_pct=_number(
            w, f"{at}.migration.min_savings_pct", mig.get("min_savings_pct", 20)
        ),
        cooldown_s=_duration(
            w, f"{at}.migration.cooldown", mig.get("cooldown", "1h"), allow_zero=True
        ),
        clouds=tuple(str(c) for c in clouds),
        spot_wait_s=_spot_wait(w, f"{at}.migration.spot_wait", mig.get("spot_wait")),
    )


def _looks_like_duration(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        parse_duration_s(value)
    except ValueError:
        return False
    return True
