"""Trace files → price points and availability series for router.core.backtest.

Readers, each returning (time, Pool, USD per instance-hour) points or availability series;
every malformed input raises BadInput with one line naming the file, the line (or JSON item)
and the field:

- `read_price_csv`      spotroute's price-trace CSV (docs/backtest.md): time, cloud, region,
                        zone, instance_type, market, price_per_hour [, available,
                        interruption_bucket]
- `read_price_parquet`  the same columns as Parquet (pyarrow, the `parquet` extra, imported
                        only here)
- `read_aws_spot_history`  the JSON `aws ec2 describe-spot-price-history` prints
- `points_from_quotes`  the price cache's history (router.prices.cache.QuoteCache.history) or
                        an import (dated SkyPilot series: router.flows.backtest)
- `read_availability`   the "Can't Be Late" (NSDI'24) availability JSON:
                        {"metadata": {"gap_seconds": N, …}, "data": [0|1, …], "prices": […]}
                        where 1 means spot was unavailable or preempted at that step.
Hardware (GPU model and count, vCPUs, memory) comes from the instance catalog.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.config.datafiles import load_catalog
from router.config.user_files import DATA_LIMIT_BYTES, read_user_bytes, read_user_text
from router.core.backtest_model import Pool
from router.core.catalog import Catalog
from router.core.errors import BadInput, OperationFailed
from router.core.offers import INTERRUPTION_BUCKETS, Quote

Point = tuple[datetime, Pool, float]
CSV_COLUMNS = ("time", "cloud", "region", "zone", "instance_type", "market", "price_per_hour")
OPTIONAL_COLUMNS = ("available", "interruption_bucket")
MARKETS = ("spot", "on-demand")


MAX_GAP_S = 86400.0  # an availability trace samples at least daily (published ones: 32-600 s)


@dataclass(frozen=True)
class PriceTrace:
    """Points read from price files, availability series where a file gave them, what was left."""

    points: tuple[Point, ...]
    available: dict[Pool, tuple[tuple[datetime, bool], ...]]
    skipped_types: tuple[tuple[str, str], ...]  # (cloud, instance_type) not in the catalog
    skipped_rows: int = 0  # rows dropped for those types
    held: bool = False  # rows are changes (a price holds until the next), not observations
    # (why, rows) for rows another reader dropped for other reasons (SkyPilot catalogs)
    dropped: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Availability:
    """A Can't-Be-Late availability trace: step length and, per step, True = spot usable."""

    gap_s: float
    usable: tuple[bool, ...]
    prices: tuple[float, ...] | None
    metadata: dict[str, Any]


class PoolMaker:
    """Pools with the catalog's hardware; remembers the instance types it does not know."""

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog = catalog if catalog is not None else load_catalog()
        self.unknown: set[tuple[str, str]] = set()
        self._made: dict[tuple[str, str, str | None, str, str, str | None], Pool] = {}

    def pool(
        self,
        cloud: str,
        region: str,
        zone: str | None,
        instance_type: str,
        market: str,
        bucket: str | None = None,
    ) -> Pool | None:
        key = (cloud, region, zone, instance_type, market, bucket)
        found = self._made.get(key)
        if found is not None:
            return found
        it = self.catalog.get(cloud, instance_type)
        if it is None:
            self.unknown.add((cloud, instance_type))
            return None
        made = self._made[key] = Pool(
            cloud,
            region,
            zone,
            instance_type,
            market,
            it.gpu,
            it.gpu_count,
            it.gpu_memory_gb,
            it.vcpus,
            it.memory_gb,
            bucket,
        )
        return made


def _time(text: str, where: str, field: str) -> datetime:
    try:
        at = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(
            f"{where}: {field} {text!r} is not an ISO 8601 time — write e.g. 2026-11-01T00:00:00Z"
        ) from None
    if at.tzinfo is None:
        raise BadInput(f"{where}: {field} {text!r} has no timezone — add Z or +00:00")
    return at.astimezone(UTC)


def _price(text: object, where: str, field: str) -> float:
    try:
        value = float(str(text))
    except ValueError:
        raise BadInput(f"{where}: {field} {text!r} is not a number (USD per hour)") from None
    if not math.isfinite(value) or value < 0:
        raise BadInput(f"{where}: {field} {text!r} must be a finite price ≥ 0")
    return value


def read_price_csv(path: Path, *, pools: PoolMaker | None = None) -> PriceTrace:
    """Points from spotroute's price-trace CSV (lines starting with # are comments)."""
    text = _read_text(path)
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    offset = {i: n for i, n in enumerate(_line_numbers(text), start=1)}
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    header = tuple(h.strip() for h in (reader.fieldnames or ()))
    _check_columns(header, f"{path}: line {offset.get(1, 1)}: header")

    def rows() -> Iterator[tuple[str, dict[str, str]]]:
        for row in reader:
            where = f"{path}: line {offset.get(reader.line_num, reader.line_num)}"
            extra = row.get(None)
            if extra:
                raise BadInput(
                    f"{where}: {len(header) + len(extra)} cells, the header names {len(header)} "
                    "— remove the extra cells (quote a value that holds a comma)"
                )
            short = [k.strip() for k, v in row.items() if k is not None and v is None]
            if any(k in CSV_COLUMNS for k in short):
                # csv leaves the missing cells None: say the row is short, not that '' is no
                # number (a row may end before optional columns: they are empty)
                raise BadInput(
                    f"{where}: the row is short — {len(header) - len(short)} cells, the header "
                    f"names {len(header)} (no {', '.join(short)}); give every column a cell "
                    "(an empty one for an optional value)"
                )
            yield where, {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}

    return _price_rows(path, rows(), pools or PoolMaker())


def read_price_parquet(path: Path, *, pools: PoolMaker | None = None) -> PriceTrace:
    """Points from a Parquet price trace: the CSV's columns (time as a UTC timestamp or text)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise OperationFailed(
            f"{path}: reading Parquet needs pyarrow — pip install 'spotroute[parquet]' "
            "(or convert the trace to CSV)"
        ) from None
    raw = read_user_bytes(path, limit_bytes=DATA_LIMIT_BYTES, what="trace file")
    try:
        parquet = pq.ParquetFile(pa.BufferReader(raw))
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise BadInput(f"{path}: not a Parquet file ({str(err).splitlines()[0]})") from None
    header = tuple(parquet.schema_arrow.names)
    _check_columns(header, f"{path}: columns")
    wanted = [c for c in (*CSV_COLUMNS, *OPTIONAL_COLUMNS) if c in header]

    def rows() -> Iterator[tuple[str, dict[str, str]]]:
        n = 0
        for batch in parquet.iter_batches(columns=wanted, batch_size=65536):
            for row in batch.to_pylist():
                n += 1
                where = f"{path}: row {n}"
                yield where, {k: _cell(v, where, k) for k, v in row.items()}

    return _price_rows(path, rows(), pools or PoolMaker())


def _cell(value: object, where: str, field: str) -> str:
    """A Parquet value as the CSV reader's text (timestamps as ISO 8601, flags as 0/1)."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise BadInput(
                f"{where}: {field} {value.isoformat()} has no timezone — store it as a UTC "
                "timestamp (timestamp[us, tz=UTC]) or ISO 8601 text with Z"
            )
        return value.isoformat()
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value).strip()


def _check_columns(header: Sequence[str], where: str) -> None:
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise BadInput(
            f"{where} is missing {', '.join(missing)} — "
            f"the columns are {','.join(CSV_COLUMNS)}[,{','.join(OPTIONAL_COLUMNS)}]"
        )


def _price_rows(
    path: Path, rows: Iterable[tuple[str, dict[str, str]]], maker: PoolMaker
) -> PriceTrace:
    """Points (and availability flags) from price-trace rows, each with where it came from."""
    points: list[Point] = []
    available: dict[Pool, list[tuple[datetime, bool]]] = {}
    once = _Once()
    skipped: list[tuple[str, str]] = []
    for where, cells in rows:
        at = _time(cells["time"], where, "time")
        market = cells["market"]
        if market not in MARKETS:
            raise BadInput(f"{where}: market {market!r} is not spot or on-demand")
        for field in ("cloud", "region", "instance_type"):
            if not cells[field]:
                raise BadInput(f"{where}: {field} is empty")
        bucket = cells.get("interruption_bucket") or None
        if bucket is not None and bucket not in INTERRUPTION_BUCKETS:
            raise BadInput(
                f"{where}: interruption_bucket {bucket!r} is not one of "
                f"{', '.join(INTERRUPTION_BUCKETS)}"
            )
        price = _price(cells["price_per_hour"], where, "price_per_hour")
        pool = maker.pool(
            cells["cloud"],
            cells["region"],
            cells["zone"] or None,
            cells["instance_type"],
            market,
            bucket,
        )
        if pool is None:
            skipped.append((cells["cloud"], cells["instance_type"]))
            continue
        once.check(at, pool, price, where, "price_per_hour")
        points.append((at, pool, price))
        flag = cells.get("available", "")
        if flag:
            if flag not in ("0", "1"):
                raise BadInput(f"{where}: available {flag!r} must be 1 (usable) or 0")
            available.setdefault(pool, []).append((at, flag == "1"))
    return price_trace(path, points, available, maker, skipped)


class _Once:
    """Refuses two rows for the same time and pool with different prices (naming both)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[datetime, str, str, str | None, str, str], tuple[float, str]] = {}

    def check(self, at: datetime, pool: Pool, price: float, where: str, field: str) -> None:
        key = (at, pool.cloud, pool.region, pool.zone, pool.instance_type, pool.market)
        before = self._seen.setdefault(key, (price, where))
        if before[0] != price:
            first = before[1].rpartition(": ")[2]
            raise BadInput(
                f"{where}: {field} {price:g} for {pool.label} at {at.isoformat()}, but {first} "
                f"says {before[0]:g} — keep one row per time and pool"
            )


def read_aws_spot_history(path: Path, *, pools: PoolMaker | None = None) -> PriceTrace:
    """Points from `aws ec2 describe-spot-price-history` JSON (Linux/UNIX rows; zone → region)."""
    maker = pools or PoolMaker()
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("SpotPriceHistory"), list):
        raise BadInput(
            f"{path}: SpotPriceHistory: missing — expected the JSON that "
            "`aws ec2 describe-spot-price-history` prints"
        )
    points: list[Point] = []
    once = _Once()
    skipped: list[tuple[str, str]] = []
    for i, item in enumerate(data["SpotPriceHistory"]):
        where = f"{path}: SpotPriceHistory[{i}]"
        if not isinstance(item, dict):
            raise BadInput(f"{where}: is not an object")
        for field in ("AvailabilityZone", "InstanceType", "SpotPrice", "Timestamp"):
            if not isinstance(item.get(field), str) or not item[field]:
                raise BadInput(f"{where}.{field}: missing or not a string")
        product = str(item.get("ProductDescription", "Linux/UNIX"))
        if not product.startswith("Linux/UNIX"):
            continue  # Windows, SUSE, RHEL prices carry licence costs
        zone = item["AvailabilityZone"]
        region = re.sub(r"[a-z]$", "", zone)
        at = _time(item["Timestamp"], where, "Timestamp")
        price = _price(item["SpotPrice"], where, "SpotPrice")
        pool = maker.pool("aws", region, zone, item["InstanceType"], "spot")
        if pool is None:
            skipped.append(("aws", item["InstanceType"]))
            continue
        once.check(at, pool, price, where, "SpotPrice")
        points.append((at, pool, price))
    # AWS lists a price when it changes: silence means the price held.
    return price_trace(path, points, {}, maker, skipped, held=True)


def points_from_quotes(quotes: Iterable[Quote], *, pools: PoolMaker | None = None) -> list[Point]:
    """Points from price quotes (the price cache's history, or an import)."""
    maker = pools or PoolMaker()
    out: list[Point] = []
    for q in quotes:
        if q.market not in MARKETS:
            continue
        pool = maker.pool(
            q.cloud, q.region, q.zone, q.instance_type, q.market, q.interruption_bucket
        )
        if pool is not None:
            out.append((q.observed_at, pool, q.price_per_hour))
    return out


def read_availability(path: Path) -> Availability:
    """A Can't-Be-Late availability JSON: gap_seconds, data (1 = unavailable), optional prices."""
    data = _read_json(path)
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected an object with metadata and data")
    meta = data.get("metadata")
    if not isinstance(meta, dict):
        raise BadInput(f'{path}: metadata: missing — expected {{"gap_seconds": N, …}}')
    gap = meta.get("gap_seconds")
    if isinstance(gap, bool) or not isinstance(gap, int | float) or not 0 < gap <= MAX_GAP_S:
        raise BadInput(
            f"{path}: metadata.gap_seconds: {gap!r} must be the seconds between samples, above 0 "
            f"and at most {MAX_GAP_S:.0f} (a day) — the published traces use 32-600"
        )
    series = data.get("data")
    if not isinstance(series, list) or not series:
        raise BadInput(f"{path}: data: missing or empty — expected a list of 0 and 1 per step")
    usable = []
    for i, v in enumerate(series):
        if v not in (0, 1) or isinstance(v, bool):
            raise BadInput(f"{path}: data[{i}]: {v!r} must be 0 (available) or 1 (unavailable)")
        usable.append(v == 0)
    prices = data.get("prices")
    price_series = None
    if prices is not None:
        if not isinstance(prices, list) or len(prices) != len(series):
            raise BadInput(f"{path}: prices: must be a list as long as data ({len(series)})")
        price_series = tuple(
            _price(p, f"{path}: prices[{i}]", "price") for i, p in enumerate(prices)
        )
    return Availability(float(gap), tuple(usable), price_series, dict(meta))


def check_covers_a_step(cbl: Availability, path: Path, step_s: float) -> None:
    """BadInput when an availability trace spans less than one step of the replay: every step
    would read one aliased sample (`gap_seconds: 1e-6` in place of seconds)."""
    span_s = cbl.gap_s * len(cbl.usable)
    if span_s < step_s:
        raise BadInput(
            f"{path}: metadata.gap_seconds: {cbl.gap_s:g} s × {len(cbl.usable)} samples spans "
            f"{span_s:g} s, less than one step of the replay ({step_s:g} s) — give the seconds "
            "between samples (the published traces use 32-600)"
        )


def price_trace(
    path: Path,
    points: list[Point],
    available: dict[Pool, list[tuple[datetime, bool]]],
    maker: PoolMaker,
    skipped: Sequence[tuple[str, str]] | None = None,
    *,
    held: bool = False,
) -> PriceTrace:
    """The points read from `path` (`skipped`: (cloud, instance type) of each row dropped for a
    type not in the catalog; None: only maker.unknown is known); BadInput when none was usable."""
    types = sorted(set(skipped) if skipped is not None else maker.unknown)
    if not points:
        unknown = ", ".join(f"{c} {t}" for c, t in types[:3])
        if skipped:
            raise BadInput(
                f"{path}: no usable prices: all {len(skipped)} rows name instance types not in "
                f"the catalog ({unknown}) — router/data/instances.csv lists the known ones"
            )
        hint = f" (instance types not in the catalog: {unknown})" if unknown else ""
        raise BadInput(f"{path}: no usable prices{hint}")
    return PriceTrace(
        tuple(points),
        {p: tuple(sorted(v)) for p, v in available.items()},
        tuple(types),
        len(skipped or ()),
        held,
    )


def _read_text(path: Path) -> str:
    return read_user_text(path, limit_bytes=DATA_LIMIT_BYTES, what="trace file")


def _read_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise BadInput(f"{path}: line {err.lineno}: not valid JSON ({err.msg})") from None


def _line_numbers(text: str) -> list[int]:
    """File line number of each non-comment line (so CSV errors point at the real line)."""
    return [n for n, ln in enumerate(text.splitlines(), start=1) if not ln.lstrip().startswith("#")]
