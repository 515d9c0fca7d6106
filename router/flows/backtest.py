"""`route backtest`: load a workload and traces, replay every policy, return the result.

Traces: `--prices` files (spotroute CSV or Parquet, `aws ec2 describe-spot-price-history` JSON,
SkyPilot vms.csv files dated by their path, or a directory of them) or, without them, the workload's
synthetic market; `--availability [SELECTOR=]FILE` Can't-Be-Late files that take spot pools
down (all spot pools, or those whose cloud/region/zone/type/market label matches SELECTOR).
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from router.config.traces import (
    Availability,
    PoolMaker,
    PriceTrace,
    check_covers_a_step,
    points_from_quotes,
    price_trace,
    read_availability,
    read_aws_spot_history,
    read_price_csv,
    read_price_parquet,
)
from router.config.user_files import DATA_LIMIT_BYTES, check_user_file
from router.config.workload import PRICES_REACH_S, WorkloadFile, load_workload
from router.config.workload import price_gap as workload_price_gap
from router.core.backtest import Progressed, run_backtest
from router.core.backtest_model import BacktestResult, Pool, Trace, trace_from_points
from router.core.backtest_policies import policy_set
from router.core.catalog import Catalog
from router.core.errors import BadInput
from router.core.globs import glob_problem
from router.core.synthetic import synthetic_trace
from router.core.trace_cadence import Span, listed_spans, merge_spans


@dataclass(frozen=True)
class BacktestReport:
    """The result and what it was computed from (for rendering and charts)."""

    result: BacktestResult
    workload: WorkloadFile
    trace: Trace
    sources: tuple[str, ...]  # what the prices came from, in words
    warnings: tuple[str, ...] = ()  # what was left out of the traces, one line each


@dataclass(frozen=True)
class BacktestInputs:
    """A workload and the trace it replays on (read alike by `route backtest` and rehearsals)."""

    workload: WorkloadFile
    trace: Trace
    sources: tuple[str, ...]  # what the prices came from, in words
    warnings: tuple[str, ...] = ()  # what was left out of the traces, one line each


def load_backtest_inputs(
    workload_path: Path,
    *,
    prices: Sequence[Path] = (),
    availability: Sequence[str] = (),
    price_gap: str | None = None,
) -> BacktestInputs:
    """The workload file and its trace: `--prices`/`--availability` files or its own `traces:`.

    `price_gap`: `--price-gap` (a duration or `never`), overriding the workload's `price_gap`.
    """
    wf = load_workload(workload_path)
    if price_gap is not None:
        gap = workload_price_gap(price_gap, lambda why: BadInput(f"--price-gap: {why}"))
        wf = replace(wf, price_gap_s=gap)
    warnings: tuple[str, ...] = ()
    # The command line's files replace the workload's own (its `traces:` section).
    prices = tuple(prices) or wf.prices
    availability = tuple(availability) or wf.availability
    if prices:
        trace, sources, warnings = _price_trace(workload_path, wf, prices)
    elif wf.market is not None:
        trace = synthetic_trace(
            wf.market, start=wf.start, days=wf.days, step_s=wf.step_s, seed=wf.market_seed
        )
        sources = (f"synthetic market of {workload_path.name} (seed {wf.market_seed})",)
    else:
        raise BadInput(
            f"{workload_path}: market: missing — give --prices FILE or a synthetic market section"
        )
    for spec in availability:
        trace = _apply_availability(trace, spec)
        sources = (*sources, f"availability {spec}")
    return BacktestInputs(wf, trace, sources, warnings)


def backtest(
    workload_path: Path,
    *,
    prices: Sequence[Path] = (),
    availability: Sequence[str] = (),
    price_gap: str | None = None,
    policies: str = "default",
    on_progress: Progressed | None = None,
) -> BacktestReport:
    """Replay the workload's jobs under every policy on the given (or synthetic) traces.

    `price_gap`: `--price-gap` (a duration or `never`), overriding the workload's `price_gap`;
    `policies`: `--policies` — default, or all (adds the benchmark policies: greedy-deadline and
    the SkyPilot peers).
    """
    from router.config.datafiles import load_egress, load_interruption_model, load_storage_prices

    inputs = load_backtest_inputs(
        workload_path, prices=prices, availability=availability, price_gap=price_gap
    )
    wf, trace = inputs.workload, inputs.trace
    result = run_backtest(
        wf.workload,
        trace,
        policy_set=policy_set(wf.workload.home_cloud, policies),
        egress=load_egress(),
        interruption=load_interruption_model(),
        storage=load_storage_prices(),
        on_progress=on_progress,
    )
    return BacktestReport(result, wf, trace, inputs.sources, inputs.warnings)


def _price_trace(
    workload_path: Path, wf: WorkloadFile, paths: Sequence[Path]
) -> tuple[Trace, tuple[str, ...], tuple[str, ...]]:
    """The trace of the price files over the workload's window, the sources and the warnings."""
    maker = PoolMaker()
    points: list[tuple[datetime, Pool, float]] = []
    flags: dict[Pool, list[tuple[datetime, bool]]] = {}
    held: set[Pool] = set()
    listed: list[dict[Pool, tuple[Span, ...]]] = []  # per file: where its cadence lists pools
    observed: list[datetime] = []  # times of rows that are observations (not price changes)
    sources: list[str] = []
    warnings: list[str] = []
    priced: dict[tuple[datetime, str], tuple[float, Path]] = {}
    for path in paths:
        got = read_prices(path, maker)
        if len(paths) > 1:
            _same_prices(priced, got, path)
        points.extend(got.points)
        if got.held:
            held.update(p for _, p, _ in got.points)
        else:
            observed.extend((min(t for t, _, _ in got.points), max(t for t, _, _ in got.points)))
            listed.append(listed_spans(got.points))
        for pool, seen in got.available.items():
            flags.setdefault(pool, []).extend(seen)
        sources.append(f"{path} ({len(got.points)} prices)")
        if got.skipped_rows:
            types = ", ".join(f"{c} {t}" for c, t in got.skipped_types[:3])
            more = f" and {len(got.skipped_types) - 3} more" if len(got.skipped_types) > 3 else ""
            warnings.append(
                f"{path}: {got.skipped_rows} rows dropped — instance types not in the catalog: "
                f"{types}{more} (router/data/instances.csv lists the known ones)"
            )
        if got.dropped:
            why = "; ".join(f"{n} {reason}" for reason, n in got.dropped)
            warnings.append(f"{path}: {sum(n for _, n in got.dropped)} rows dropped — {why}")
    steps = max(1, math.ceil(wf.days * 86400 / wf.step_s))
    end = wf.start + timedelta(seconds=steps * wf.step_s)
    _check_window(workload_path, wf, end, paths, points, observed)
    extra = _on_demand_from_snapshot(points, wf.start, maker)
    held.update(p for _, p, _ in extra)  # list prices: they hold
    points.extend(extra)
    available = {
        pool: _step_flags(sorted(seen), wf.start, wf.step_s, steps) for pool, seen in flags.items()
    }
    gap = wf.price_gap_s  # None: the files' own cadence; inf: never gone; else a fixed clock
    trace = trace_from_points(
        points,
        step_s=wf.step_s,
        start=wf.start,
        end=end,
        available=available,
        stale_after_s=gap if gap is not None and math.isfinite(gap) else None,
        held=held,
        listed=merge_spans(*listed) if gap is None else None,
    )
    return trace, tuple(sources), tuple(warnings)


def _same_prices(
    seen: dict[tuple[datetime, str], tuple[float, Path]], got: PriceTrace, path: Path
) -> None:
    """BadInput when two price files give the same pool at the same time different prices."""
    for at, pool, price in got.points:
        label = f"{pool.cloud}/{pool.region}/{pool.zone or '-'}/{pool.instance_type}/{pool.market}"
        before = seen.setdefault((at, label), (price, path))
        if before[0] != price and before[1] != path:
            raise BadInput(
                f"{path}: price_per_hour {price:g} for {label} at {at.isoformat()}, but "
                f"{before[1]} says {before[0]:g} — give each time and pool one price"
            )


def _check_window(
    workload_path: Path,
    wf: WorkloadFile,
    end: datetime,
    paths: Sequence[Path],
    points: Sequence[tuple[datetime, Pool, float]],
    observed: Sequence[datetime],
) -> None:
    """BadInput when the workload's window has no prices: it ends before the first row, or
    begins more than price_gap (a week without one) after the last observed one."""
    first = min(t for t, _, _ in points)
    last = max(t for t, _, _ in points)
    files = ", ".join(str(p) for p in paths)
    span = f"the prices ({files}) run {first:%Y-%m-%d %H:%M} → {last:%Y-%m-%d %H:%M} UTC"
    window = f"the window {wf.start:%Y-%m-%d %H:%M} → {end:%Y-%m-%d %H:%M}"
    fix = "set start (and days) to a window the prices cover"
    if end <= first:
        raise BadInput(f"{workload_path}: start: {window} ends before {span} — {fix}")
    gap = PRICES_REACH_S if wf.price_gap_s is None else wf.price_gap_s
    if observed and math.isfinite(gap) and wf.start > max(observed) + timedelta(seconds=gap):
        what = "a week" if wf.price_gap_s is None else f"price_gap {gap / 86400:g} days"
        raise BadInput(f"{workload_path}: start: {window} begins after {span} (and {what}) — {fix}")


_DATE = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})")


def read_skypilot_series(paths: Sequence[Path], *, catalog: Catalog | None = None) -> PriceTrace:
    """Points from SkyPilot vms.csv files, each dated by a YYYY-MM-DD (or YYYYMMDD) in its path."""
    from router.prices.imports import import_skypilot

    maker = PoolMaker(catalog)
    points: list[tuple[datetime, Pool, float]] = []
    dropped: Counter[str] = Counter()
    for path in paths:
        found = _DATE.search(str(path))
        if found is None:
            raise BadInput(
                f"{path}: no date in the path — name each catalog by the day it was taken, "
                "e.g. 2026-11-01/aws/vms.csv"
            )
        try:
            year, month, day = (int(g) for g in found.groups())
            at = datetime(year, month, day, tzinfo=UTC)
        except ValueError:
            raise BadInput(f"{path}: {found.group(0)} is not a date") from None
        result = import_skypilot(path, now=at, catalog=maker.catalog)
        dropped.update(result.skipped_reasons)
        points.extend(points_from_quotes(result.quotes, pools=maker))
    first = paths[0] if paths else Path(".")
    if not points and dropped:
        why = "; ".join(f"{n} {reason}" for reason, n in dropped.most_common())
        raise BadInput(
            f"{first}: no usable prices: all {sum(dropped.values())} rows dropped ({why}) — "
            "pass a SkyPilot catalog with GPU types router/data/instances.csv lists"
        )
    trace = price_trace(first, points, {}, maker)
    return replace(trace, dropped=tuple(sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0]))))


def read_prices(path: Path, maker: PoolMaker | None = None) -> PriceTrace:
    """Any supported price file (or a directory of dated SkyPilot vms.csv files)."""
    maker = maker or PoolMaker()
    if _is_dir(path):
        files = sorted(path.rglob("*.csv"))
        if not files:
            raise BadInput(f"{path}: no .csv files — expected dated SkyPilot vms.csv files")
        return read_skypilot_series(files, catalog=maker.catalog)
    check_user_file(path, limit_bytes=DATA_LIMIT_BYTES, what="trace file")  # before sniffing it
    if path.suffix.lower() == ".json":
        try:
            head = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            head = None  # the reader below words the error with the line
        if isinstance(head, dict) and "data" in head and "metadata" in head:
            raise BadInput(
                f"{path}: this is an availability trace (Can't Be Late format) — "
                "pass it with --availability"
            )
        return read_aws_spot_history(path, pools=maker)
    if path.suffix.lower() in (".parquet", ".pq"):
        return read_price_parquet(path, pools=maker)
    first = ""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            for line in handle:
                if line.strip() and not line.lstrip().startswith("#"):
                    first = line
                    break
    except (OSError, UnicodeDecodeError):
        pass  # read_price_csv reports it, with the line
    if "InstanceType" in first:
        return read_skypilot_series([path], catalog=maker.catalog)
    return read_price_csv(path, pools=maker)


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # e.g. a folder above it not searchable: the file check words it
        return False


def _on_demand_from_snapshot(
    points: Sequence[tuple[datetime, Pool, float]], start: datetime, maker: PoolMaker
) -> list[tuple[datetime, Pool, float]]:
    """On-demand list prices from the bundled snapshot where the trace has only spot prices."""
    from router.prices.snapshot import load_snapshot

    have = {(p.cloud, p.region, p.instance_type) for _, p, _ in points if p.market == "on-demand"}
    want = {(p.cloud, p.region, p.instance_type) for _, p, _ in points if p.market == "spot"}
    missing = want - have
    out = []
    for q in load_snapshot():
        key = (q.cloud, q.region, q.instance_type)
        if q.market == "on-demand" and key in missing:
            pool = maker.pool(q.cloud, q.region, None, q.instance_type, "on-demand")
            if pool is not None:
                out.append((start, pool, q.price_per_hour))
                missing.discard(key)
    return out


def _step_flags(
    seen: Sequence[tuple[datetime, bool]], start: datetime, step_s: float, steps: int
) -> tuple[bool, ...]:
    out: list[bool] = []
    i, flag = 0, seen[0][1] if seen else True
    for s in range(steps):
        edge = start + timedelta(seconds=(s + 1) * step_s)
        while i < len(seen) and seen[i][0] < edge:
            flag = seen[i][1]
            i += 1
        out.append(flag)
    return tuple(out)


def _apply_availability(trace: Trace, spec: str) -> Trace:
    selector, _, file = spec.rpartition("=")
    if (why := glob_problem(selector)) is not None:
        raise BadInput(f"--availability {spec}: the selector's {why}")
    path = Path(file)
    cbl: Availability = read_availability(path)
    check_covers_a_step(cbl, path, trace.step_s)
    chosen = [
        i
        for i, p in enumerate(trace.pools)
        if p.market == "spot" and (not selector or fnmatch.fnmatch(p.label, selector + "*"))
    ]
    if not chosen:
        raise BadInput(
            f"--availability {spec}: no spot pool matches {selector!r} — pools are named "
            "cloud/region/zone/instance_type/market, e.g. aws/us-east-1/us-east-1a"
        )
    if cbl.gap_s >= trace.steps * trace.step_s and len(set(cbl.usable)) > 1:
        raise BadInput(
            f"{path}: metadata.gap_seconds: {cbl.gap_s:g} s covers the whole window "
            f"({trace.steps * trace.step_s:g} s): the trace would be one value — check the "
            "units (seconds between samples)"
        )
    prices = list(trace.prices)
    available = list(trace.available)
    n = len(cbl.usable)
    for i in chosen:
        index = [int(s * trace.step_s // cbl.gap_s) % n for s in range(trace.steps)]
        available[i] = tuple(a and cbl.usable[j] for a, j in zip(available[i], index, strict=True))
        if cbl.prices is not None:
            prices[i] = tuple(cbl.prices[j] for j in index)
    return replace(trace, prices=tuple(prices), available=tuple(available))
