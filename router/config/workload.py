"""Backtest workload files (YAML) → Workload and, when given, the synthetic market to replay on.

The format is documented in docs/backtest.md; examples/backtest-30d.yaml is the reference.
Errors are one line: `<file>: <field.path>: <problem> — <fix>`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from router.config.datafiles import load_catalog, load_gpus, load_startup_figures
from router.config.user_files import CONFIG_LIMIT_BYTES, read_user_text
from router.core.backtest_model import Workload, WorkloadJob
from router.core.catalog import Catalog
from router.core.durations import parse_duration_s, parse_spot_wait_s
from router.core.errors import BadInput
from router.core.gpus import UnknownGpu
from router.core.job.model import SPOT_WAIT_DEFAULT_S
from router.core.offers import INTERRUPTION_BUCKETS
from router.core.synthetic import CloudOffer, JobMix, MarketModel, Shape, synthetic_workload

PRICE_GAP_S = 7 * 86400.0  # default `price_gap`: a week without a row and a pool is gone


@dataclass(frozen=True)
class WorkloadFile:
    """What a workload file says: the jobs, the replay window, and an optional synthetic market."""

    workload: Workload
    start: datetime
    days: float
    step_s: float
    market: MarketModel | None
    market_seed: int
    price_gap_s: float | None = PRICE_GAP_S  # a pool with no price row for this long is gone
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
    _known(w, "", data, {"name", "start", "days", "step", "home_cloud", "handover", "zone_block",
                         "price_gap", "market", "traces", "jobs", "save_on_notice"})  # fmt: skip
    name = str(data.get("name") or path.stem)
    start = _time(w, "start", data.get("start"))
    days = _number(w, "days", data.get("days", 30), positive=True)
    step_s = _duration(w, "step", data.get("step", "1h"))
    home = str(data.get("home_cloud", "aws"))
    handover_s = _duration(w, "handover", data.get("handover", "5m"), allow_zero=True)
    block_s = _duration(w, "zone_block", data.get("zone_block", "1h"), allow_zero=True)
    gap_s = price_gap(data.get("price_gap", PRICE_GAP_S), lambda why: w.fail("price_gap", why))
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
    for spec in files("availability"):
        selector, eq, file = spec.rpartition("=")
        availability.append(f"{selector}{eq}{here / file}")
    return prices, tuple(availability)


def price_gap(value: object, fail: Callable[[str], BadInput]) -> float | None:
    """`price_gap` (workload) or `--price-gap` (CLI): seconds, or None for `never`."""
    if isinstance(value, str) and value.strip().lower() == "never":
        return None
    try:
        seconds = parse_duration_s(value)
    except ValueError as err:
        raise fail(f"{err} (or never: prices hold until the next row)") from None
    if seconds <= 0:
        raise fail("must be a positive duration, e.g. 7d or 12h (or never)")
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
    return float(value)


def _duration(w: _Where, where: str, value: object, *, allow_zero: bool = False) -> float:
    try:
        seconds = parse_duration_s(value)
    except ValueError as err:
        raise w.fail(where, str(err)) from None
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise w.fail(where, "must be a positive duration, e.g. 30m or 2h")
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
    return name, int(count) if count else 1


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
                    int(o.get("zones", 3)),
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
    return model, int(data.get("seed", 0))


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
                node_counts=tuple(int(n) for n in (nodes if isinstance(nodes, list) else [nodes])),
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
    return synthetic_workload(
        name=name,
        start=start,
        days=days,
        gpu_hours_per_day=_number(
            w, f"{g}.gpu_hours_per_day", data.get("gpu_hours_per_day"), positive=True
        ),
        mix=tuple(mix),
        seed=int(data.get("seed", 0)),
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
        arrivals_until_day=data.get("arrivals_until_day"),
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
        node_count=int(data.get("nodes", 1)),
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
