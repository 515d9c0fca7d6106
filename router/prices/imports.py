"""Quotes from price files other tools publish; today SkyPilot's catalog CSVs (vms.csv).

SkyPilot catalog facts this relies on (read from skypilot-org/skypilot-catalog, catalogs/v6):
- Columns are found by header name, their order differs per cloud. AWS and GCP files carry
  AvailabilityZone (AWS gives zone IDs such as "use1-az4", not account-specific zone names);
  Azure files have no zone column and carry a "Generation" column instead.
- Price is on-demand USD per hour, SpotPrice the spot price; either may be empty or "nan",
  and some placeholder rows carry 0.0.
- GCP files price a2/a3/g2 and n1 hosts WITHOUT their GPUs, and list each GPU offering as a
  row with an empty InstanceType: AcceleratorName, AcceleratorCount, Region, zone and the
  price of that many GPUs. An instance's price is host + GPU row for the same zone.
- SkyPilot's "A100" is the 40 GB part; "H100-MEGA" is the H100 of a3-megagpu machines.
- Some rows are placeholders: a SpotPrice equal to Price (no spot market priced), or an
  AcceleratorName/AcceleratorCount that disagrees with the type's hardware (spotroute's catalog,
  each row with its provider source). Neither is imported as a price; `ImportResult.notes` says
  which types, so a plan never runs on them unsaid.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from router.config.datafiles import load_gpus
from router.config.user_files import DATA_LIMIT_BYTES, read_user_text
from router.contract.clouds import PUBLIC_CLOUDS
from router.core.errors import BadInput
from router.core.gpus import UnknownGpu
from router.core.offers import Quote, quote_problem

SOURCE = "import:skypilot"
REQUIRED_COLUMNS: tuple[str, ...] = (
    "InstanceType",
    "AcceleratorName",
    "AcceleratorCount",
    "Region",
    "Price",
    "SpotPrice",
)
ZONE_COLUMN = "AvailabilityZone"
PRICE_COLUMNS: tuple[tuple[str, str], ...] = (("on-demand", "Price"), ("spot", "SpotPrice"))

# Why a row produced no quote (the keys of ImportResult.skipped_reasons).
NOT_KNOWN = "not a GPU type spotroute knows"
NO_PRICE = "no price (empty, nan or N/A)"
PRICE_NOT_NUMBER = "price is not a number"
PRICE_NOT_POSITIVE = "price is zero or negative"
NO_GPU_ROW = "no GPU-only row for the host's GPUs in its zone"
GPU_ROW_UNUSED = "GPU-only row no spotroute type uses"
NO_HOST_ROW = "GPU-only row whose host machines have no row in its zone"
HARDWARE_MISMATCH = "GPUs disagree with spotroute's catalog"
# A note, not a skip reason: the row still gives its on-demand quote.
PLACEHOLDER_SPOT = "SpotPrice equals Price, a placeholder — its spot price is not imported"
DUPLICATE = "duplicate of an earlier row"
MALFORMED = "row without a region or accelerator count"
UNTRUSTED = "region, zone or price not valid for the cloud"

_PLACEHOLDERS = frozenset({"", "nan", "n/a", "na", "none", "null", "-"})
# SkyPilot's plain "A100" is the 40 GB part; spotroute calls bare "A100" ambiguous.
_SKYPILOT_GPU_NAMES = {"A100": "A100-40GB"}
# a3-megagpu hosts are priced with SkyPilot's "H100-MEGA" GPU rows, not the "H100" ones.
_FAMILY_GPU_ROW_NAMES = {"a3-megagpu": "H100-MEGA"}
_SAMPLE_ROWS = 500


class CatalogEntry(Protocol):
    """What the import needs of one catalog instance type (router.core.catalog.InstanceType)."""

    @property
    def cloud(self) -> str: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def gpu(self) -> str: ...
    @property
    def gpu_count(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ImportResult:
    """Quotes read from one file, and how many rows gave none and why."""

    quotes: list[Quote]
    rows_read: int
    rows_skipped: int
    skipped_reasons: dict[str, int]
    cloud: str
    # One line per type or GPU whose rows were flagged: hardware that disagrees with the catalog,
    # placeholder spot prices (spot = on-demand), GPU rows whose host rows are missing.
    notes: tuple[str, ...] = ()


@dataclass(slots=True)
class _Row:
    instance_type: str
    accelerator: str
    accelerator_count: int | None
    region: str
    zone: str | None
    prices: dict[str, float]  # market -> USD per hour, only the usable ones
    problem: str | None  # why no price was usable, when none was
    used: bool = False
    placeholder_spot: bool = False  # SpotPrice == Price: the spot price was dropped


@dataclass(slots=True)
class _Tally:
    quotes: list[Quote] = field(default_factory=list)
    seen: set[tuple[str, str | None, str, str]] = field(default_factory=set)
    skipped: Counter[str] = field(default_factory=Counter)
    # note key (a type or GPU) -> (what is wrong, how many rows)
    flagged: dict[str, tuple[str, int]] = field(default_factory=dict)

    def flag(self, key: str, text: str) -> None:
        _text, count = self.flagged.get(key, (text, 0))
        self.flagged[key] = (text, count + 1)

    def notes(self) -> tuple[str, ...]:
        return tuple(
            f"{key}: {text} ({count} row{'s' if count > 1 else ''})"
            for key, (text, count) in sorted(self.flagged.items())
        )

    def emit(self, quote: Quote) -> bool:
        if quote_problem(quote) is not None:
            # e.g. a region that is not the cloud's naming (it could match `us-*` and win a
            # plan), terminal escapes in a name, a price that is not positive and finite
            self.skipped[UNTRUSTED] += 1
            return True
        key = (quote.region, quote.zone, quote.instance_type, quote.market)
        if key in self.seen:
            return False
        self.seen.add(key)
        self.quotes.append(quote)
        return True


def import_skypilot(
    path: Path,
    *,
    cloud: str | None = None,
    now: datetime | None = None,
    catalog: Iterable[CatalogEntry] | None = None,
) -> ImportResult:
    """Quotes (USD per instance-hour) for spotroute's instance types from a SkyPilot vms.csv.

    `cloud` defaults to the one named in the path (…/aws/vms.csv) or by the instance type
    names. Every quote is stamped `now` (default: the current time), the moment of import,
    because the file does not say when its prices were seen. `catalog` defaults to
    `router.core.catalog.load_catalog()`.
    """
    path = Path(path)
    observed_at = now or datetime.now(UTC)
    if observed_at.tzinfo is None or observed_at.utcoffset() is None:
        raise ValueError(f"now must be a timezone-aware datetime, got naive {observed_at!r}")
    observed_at = observed_at.astimezone(UTC)
    if cloud is not None and cloud not in PUBLIC_CLOUDS:
        raise BadInput(f"--cloud: '{cloud}' is not supported — use {', '.join(PUBLIC_CLOUDS)}")

    header, records = _read_csv(path)
    rows = [_parse_row(header, fields) for fields in records]
    chosen = cloud or _detect_cloud(path, rows)
    if chosen is None:
        raise BadInput(
            f"{path}: cannot tell which cloud this SkyPilot catalog is for — "
            f"pass --cloud {'|'.join(PUBLIC_CLOUDS)}"
        )
    entries = catalog if catalog is not None else _default_catalog()
    known = [entry for entry in entries if entry.cloud == chosen]

    tally = _Tally()
    if chosen == "gcp":
        _gcp_quotes(rows, known, observed_at, tally)
    else:
        _whole_instance_quotes(chosen, rows, known, observed_at, tally)
    return ImportResult(
        quotes=tally.quotes,
        rows_read=len(rows),
        rows_skipped=sum(tally.skipped.values()),
        skipped_reasons=dict(sorted(tally.skipped.items())),
        cloud=chosen,
        notes=tally.notes(),
    )


# -- reading ---------------------------------------------------------------------------


def _read_csv(path: Path) -> tuple[dict[str, int], list[list[str]]]:
    """Header (column -> index) and the fields of each non-blank data row."""
    text = read_user_text(path, limit_bytes=DATA_LIMIT_BYTES, what="SkyPilot catalog vms.csv")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        first = next(reader, None)
        records = [fields for fields in reader if any(fields)]
    except csv.Error as err:
        raise BadInput(
            f"{path}: line {reader.line_num}: not valid CSV ({err}) — pass a SkyPilot "
            "catalog vms.csv"
        ) from None
    if first is None:
        raise BadInput(f"{path}: empty file — expected a SkyPilot catalog CSV with a header row")
    header = {name.strip(): index for index, name in enumerate(first)}
    missing = [column for column in REQUIRED_COLUMNS if column not in header]
    if missing:
        raise BadInput(
            f"{path}: not a SkyPilot catalog CSV: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} — expected a header with {','.join(REQUIRED_COLUMNS)}"
        )
    return header, records


def _parse_row(header: dict[str, int], fields: list[str]) -> _Row:
    def cell(column: str) -> str:
        index = header.get(column)
        return fields[index].strip() if index is not None and index < len(fields) else ""

    prices: dict[str, float] = {}
    problems: list[str] = []
    for market, column in PRICE_COLUMNS:
        price, problem = _parse_price(cell(column))
        if price is not None:
            prices[market] = price
        elif problem is not None:
            problems.append(problem)
    # A spot price equal to the on-demand one is the catalog's placeholder, not a spot market.
    placeholder = "spot" in prices and prices.get("on-demand") == prices["spot"]
    if placeholder:
        del prices["spot"]
    return _Row(
        instance_type=cell("InstanceType"),
        accelerator=cell("AcceleratorName"),
        accelerator_count=_parse_count(cell("AcceleratorCount")),
        region=cell("Region"),
        zone=cell(ZONE_COLUMN) or None,
        prices=prices,
        problem=None if prices else problems[0],
        placeholder_spot=placeholder,
    )


def _parse_price(text: str) -> tuple[float | None, str | None]:
    if text.lower() in _PLACEHOLDERS:
        return None, NO_PRICE
    try:
        price = float(text)
    except ValueError:
        return None, PRICE_NOT_NUMBER
    if math.isnan(price):
        return None, NO_PRICE
    if math.isinf(price):
        return None, PRICE_NOT_NUMBER
    if price <= 0:
        return None, PRICE_NOT_POSITIVE
    return price, None


def _parse_count(text: str) -> int | None:
    try:
        count = float(text)
    except ValueError:
        return None
    return int(count) if count.is_integer() and count > 0 else None


def _detect_cloud(path: Path, rows: list[_Row]) -> str | None:
    """The cloud a directory in the path names, else the one the instance names point to."""
    for part in reversed(path.absolute().parts[:-1]):
        if part.lower() in PUBLIC_CLOUDS:
            return part.lower()
    named = {
        token for token in re.split(r"[^a-z0-9]+", path.stem.lower()) if token in PUBLIC_CLOUDS
    }
    if len(named) == 1:
        return named.pop()
    votes = Counter(
        guess for row in rows[:_SAMPLE_ROWS] if (guess := _cloud_of_instance(row)) is not None
    )
    if not votes:
        return None
    leader, count = votes.most_common(1)[0]
    # A file mixing naming styles is not something to guess about.
    return leader if count >= 0.9 * sum(votes.values()) else None


def _cloud_of_instance(row: _Row) -> str | None:
    name = row.instance_type
    if not name:
        # Only GCP files have GPU-only rows without an instance type.
        return "gcp" if row.accelerator else None
    if re.match(r"(Standard|Basic)_", name):
        return "azure"
    if re.fullmatch(r"[a-z][a-z0-9-]*\.[a-z0-9-]+", name):
        return "aws"
    if re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)+", name):
        return "gcp"
    return None


def _default_catalog() -> list[CatalogEntry]:
    from router.config.datafiles import load_catalog

    return list(load_catalog())


# -- turning rows into quotes ----------------------------------------------------------


def _quote(
    cloud: str, row: _Row, instance_type: str, market: str, price: float, observed_at: datetime
) -> Quote:
    return Quote(
        cloud=cloud,
        region=row.region,
        zone=row.zone,
        instance_type=instance_type,
        market=market,
        price_per_hour=price,
        source=SOURCE,
        observed_at=observed_at,
    )


def _whole_instance_quotes(
    cloud: str,
    rows: list[_Row],
    known: list[CatalogEntry],
    observed_at: datetime,
    tally: _Tally,
) -> None:
    """AWS and Azure rows price the whole instance, GPUs included: one quote per market."""
    by_name = {entry.instance_type: entry for entry in known}
    for row in rows:
        entry = by_name.get(row.instance_type)
        if entry is None:
            tally.skipped[NOT_KNOWN] += 1
        elif (mismatch := _hardware_mismatch(row, entry)) is not None:
            tally.skipped[HARDWARE_MISMATCH] += 1
            tally.flag(f"{cloud} {row.instance_type}", mismatch)
        elif not row.region:
            tally.skipped[MALFORMED] += 1
        elif row.problem is not None:
            tally.skipped[row.problem] += 1
        else:
            new = [
                tally.emit(_quote(cloud, row, row.instance_type, market, price, observed_at))
                for market, price in row.prices.items()
            ]
            if not any(new):
                tally.skipped[DUPLICATE] += 1
            if row.placeholder_spot:
                tally.flag(f"{cloud} {row.instance_type}", PLACEHOLDER_SPOT)


def _gcp_quotes(
    rows: list[_Row], known: list[CatalogEntry], observed_at: datetime, tally: _Tally
) -> None:
    """Host rows plus the GPU-only row of the same zone; n1 + GPU under spotroute's name."""
    gpu_rows: dict[tuple[str, int, str, str | None], _Row] = {}
    gpu_only: list[_Row] = []
    hosts: list[_Row] = []
    for row in rows:
        if row.instance_type:
            hosts.append(row)
        elif row.accelerator and row.accelerator_count is not None and row.region:
            gpu_only.append(row)
            gpu_rows.setdefault((row.accelerator, row.accelerator_count, row.region, row.zone), row)
        else:
            tally.skipped[MALFORMED] += 1
    gpu_row_names: dict[str, list[str]] = {}
    for name in sorted({key[0] for key in gpu_rows}):
        canonical = _canonical(name)
        if canonical is not None:
            gpu_row_names.setdefault(canonical, []).append(name)

    # n1 GPU types are named `<machine>+<GPU>:<count>` in spotroute's catalog: one host row
    # can price several of them.
    by_host: dict[str, list[CatalogEntry]] = {}
    for entry in known:
        by_host.setdefault(entry.instance_type.partition("+")[0], []).append(entry)

    for row in hosts:
        entries = by_host.get(row.instance_type)
        if not entries:
            tally.skipped[NOT_KNOWN] += 1
            continue
        mismatch = _hardware_mismatch(row, entries[0]) if len(entries) == 1 else None
        if mismatch is not None:  # a host row that names its own accelerators, wrongly
            tally.skipped[HARDWARE_MISMATCH] += 1
            tally.flag(f"gcp {row.instance_type}", mismatch)
            continue
        if not row.region:
            tally.skipped[MALFORMED] += 1
            continue
        if row.problem is not None:
            tally.skipped[row.problem] += 1
            continue
        if row.placeholder_spot:
            tally.flag(f"gcp {row.instance_type}", PLACEHOLDER_SPOT)
        produced = False
        reason = NO_GPU_ROW
        for entry in entries:
            prices = _instance_prices(row, entry, gpu_rows, gpu_row_names)
            if prices is None:
                continue
            reason = DUPLICATE if prices else NO_PRICE
            for market, price in prices.items():
                produced |= tally.emit(
                    _quote("gcp", row, entry.instance_type, market, price, observed_at)
                )
        if not produced:
            tally.skipped[reason] += 1

    indexed = {id(row) for row in gpu_rows.values()}
    host_zones = {(row.instance_type, row.region, row.zone) for row in hosts}
    for row in gpu_only:
        if row.used:
            if row.placeholder_spot:
                tally.flag(f"gcp {row.accelerator}:{row.accelerator_count} GPU rows",
                           PLACEHOLDER_SPOT)  # fmt: skip
            continue
        if id(row) not in indexed:
            tally.skipped[DUPLICATE] += 1
        elif row.problem is not None:
            tally.skipped[row.problem] += 1
        elif missing := _missing_hosts(row, known, host_zones):
            # A spotroute type uses these GPUs: only the host rows are missing.
            tally.skipped[NO_HOST_ROW] += 1
            tally.flag(
                f"gcp {row.accelerator}:{row.accelerator_count} GPU rows",
                f"no host row in their zone for spotroute's {', '.join(missing)} — GPU rows "
                "price nothing without one (a catalog gap, not a GPU spotroute lacks)",
            )
        else:
            tally.skipped[GPU_ROW_UNUSED] += 1


def _missing_hosts(
    row: _Row, known: list[CatalogEntry], host_zones: set[tuple[str, str, str | None]]
) -> list[str]:
    """The catalog types this GPU-only row would price, had their host row been in its zone."""
    canonical = _canonical(row.accelerator)
    users = [
        entry.instance_type
        for entry in known
        if canonical is not None
        and entry.gpu == canonical
        and row.accelerator_count in (entry.gpu_count, 1)
        and not _FAMILY_GPU_ROW_NAMES.get("-".join(entry.instance_type.split("-")[:2]))
        and (entry.instance_type.partition("+")[0], row.region, row.zone) not in host_zones
    ]
    return sorted(users)


def _hardware_mismatch(row: _Row, entry: CatalogEntry) -> str | None:
    """How a row's AcceleratorName/AcceleratorCount disagree with the type's catalog hardware;
    None when they agree or the row does not say."""
    if not row.accelerator:
        return None
    canonical = _canonical(row.accelerator)
    count = row.accelerator_count
    same_gpu = canonical is None or canonical == entry.gpu
    if same_gpu and (count is None or count == entry.gpu_count):
        return None
    return (
        f"the file says {count if count is not None else '?'}× {row.accelerator}, spotroute's "
        f"catalog (router/data/instances.csv, from the provider's page) {entry.gpu_count}× "
        f"{entry.gpu} — not imported"
    )


def _instance_prices(
    host: _Row,
    entry: CatalogEntry,
    gpu_rows: dict[tuple[str, int, str, str | None], _Row],
    gpu_row_names: dict[str, list[str]],
) -> dict[str, float] | None:
    """Market -> host + GPU price for `entry` in the host row's zone; None if no GPU row."""
    if entry.gpu_count <= 0 or not entry.gpu or host.accelerator:
        # No GPUs, or a host row that names its own accelerator: the row is the whole price.
        return dict(host.prices)
    family = "-".join(host.instance_type.split("-")[:2])
    special = _FAMILY_GPU_ROW_NAMES.get(family)
    names = [special] if special else gpu_row_names.get(entry.gpu, [])
    for name in names:
        gpu_row = gpu_rows.get((name, entry.gpu_count, host.region, host.zone))
        multiple = 1
        if gpu_row is None:
            # Some catalogs list only single-GPU rows: n GPUs cost n times one.
            gpu_row = gpu_rows.get((name, 1, host.region, host.zone))
            multiple = entry.gpu_count
        if gpu_row is None:
            continue
        prices = {
            market: host.prices[market] + gpu_row.prices[market] * multiple
            for market, _ in PRICE_COLUMNS
            if market in host.prices and market in gpu_row.prices
        }
        gpu_row.used = gpu_row.used or bool(prices)
        return prices
    return None


def _canonical(skypilot_gpu: str) -> str | None:
    """spotroute's canonical GPU name for a SkyPilot accelerator name, None if not a known GPU."""
    if skypilot_gpu in _SKYPILOT_GPU_NAMES:
        return _SKYPILOT_GPU_NAMES[skypilot_gpu]
    try:
        return load_gpus().canonical(skypilot_gpu)
    except UnknownGpu:
        return None
