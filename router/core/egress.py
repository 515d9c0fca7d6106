"""Data-transfer list prices (router/data/egress.csv) and the cost of moving a job's data once.

Model (docs/planner.md has the sources and a worked example):
- either end is the local target          → 0 (nothing crosses a cloud's metered boundary)
- same cloud, same region                 → 0
- same cloud, different region            → that cloud's inter-region rate (per continent pair,
                                             or an exact region-pair row where the provider has one)
- different clouds                        → the SOURCE cloud's internet egress, tiered by volume
Data transfer IN is free on AWS, GCP and Azure, so the destination never adds a charge.
Tiers start at zero for every move: the planner cannot know what else the account sent this
month, and ignoring the small free allowances (100 GB/month) keeps the estimate on the safe side.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import itertools
import math
import re
from dataclasses import dataclass
from typing import TypeVar

from router.core.errors import BadInput

UNKNOWN_CONTINENT = "??"
ANY = "*"
LOCAL = "local"

T = TypeVar("T")

_COLUMNS = (
    "kind", "cloud", "src", "dst", "tier_start_gb", "tier_end_gb", "usd_per_gb",
    "source", "date", "note",
)  # fmt: skip
_KINDS = ("continent", "region_pair", "inter_region", "internet")


@dataclass(frozen=True, slots=True)
class EgressCost:
    """USD to move a data set once, with the rule that priced it in words."""

    usd: float
    rule: str


@dataclass(frozen=True, slots=True)
class Tier:
    """One volume band of a tiered price: [start_gb, end_gb) at usd_per_gb."""

    start_gb: float
    end_gb: float  # math.inf for the open-ended last band
    usd_per_gb: float


@dataclass(frozen=True, slots=True)
class Rate:
    """A flat per-GB price and the provider page it was taken from."""

    usd_per_gb: float
    source: str
    date: str


@dataclass(frozen=True, slots=True)
class TieredRate:
    """A tiered per-GB price (bands contiguous from 0) and its provider page."""

    tiers: tuple[Tier, ...]
    source: str
    date: str


class EgressTable:
    """Transfer prices loaded from egress.csv; `cost` prices one move of a data set."""

    def __init__(
        self,
        continent_rules: dict[str, tuple[tuple[re.Pattern[str], str], ...]],
        region_pairs: dict[tuple[str, str, str], Rate],
        inter_region: dict[tuple[str, str, str], Rate],
        internet: dict[tuple[str, str, str], TieredRate],
    ) -> None:
        self._continent_rules = continent_rules
        self._region_pairs = region_pairs
        self._inter_region = inter_region
        self._internet = internet
        self._continent_cache: dict[tuple[str, str], str] = {}

    @property
    def clouds(self) -> tuple[str, ...]:
        """Clouds the table has internet egress prices for."""
        return tuple(sorted({cloud for cloud, _, _ in self._internet}))

    def continent(self, cloud: str, region: str) -> str:
        """Continent code (NA, SA, EU, ASIA, OC, ME, AF) of a region, or '??' when unknown."""
        key = (cloud, region)
        found = self._continent_cache.get(key)
        if found is None:
            found = UNKNOWN_CONTINENT
            for pattern, continent in self._continent_rules.get(cloud, ()):
                if pattern.match(region):
                    found = continent
                    break
            self._continent_cache[key] = found
        return found

    def inter_region_rate(self, cloud: str, src_region: str, dst_region: str) -> Rate | None:
        """USD/GB between two regions of one cloud (exact pair row first, then continents)."""
        pair = self._region_pairs.get((cloud, src_region, dst_region))
        if pair is not None:
            return pair
        src = self.continent(cloud, src_region)
        dst = self.continent(cloud, dst_region)
        return _most_specific(self._inter_region, cloud, src, dst)

    def internet_tiers(self, cloud: str, src_region: str, dst_continent: str) -> TieredRate | None:
        """Tiered internet egress price from a region of `cloud` towards a continent."""
        src = self.continent(cloud, src_region)
        return _most_specific(self._internet, cloud, src, dst_continent)

    def cost(
        self, size_gb: float, src_cloud: str, src_region: str, dst_cloud: str, dst_region: str
    ) -> EgressCost:
        """USD to move size_gb once from (src_cloud, src_region) to (dst_cloud, dst_region)."""
        if size_gb <= 0:
            return EgressCost(0.0, "no data to move")
        if src_cloud == LOCAL or dst_cloud == LOCAL:
            return EgressCost(0.0, "local target: no cloud transfer charge is modelled")
        if src_cloud == dst_cloud and src_region == dst_region:
            return EgressCost(0.0, f"same region ({src_cloud} {src_region}): no transfer charge")
        if src_cloud == dst_cloud:
            rate = self.inter_region_rate(src_cloud, src_region, dst_region)
            if rate is None:
                raise BadInput(
                    f"egress.csv: no inter-region price for {src_cloud} "
                    f"{src_region} → {dst_region} — add an inter_region row for {src_cloud}"
                )
            usd = size_gb * rate.usd_per_gb
            return EgressCost(
                usd,
                f"inter-region {src_cloud} {src_region} → {dst_region}: "
                f"{_gb(size_gb)} GB × ${rate.usd_per_gb:g} = ${usd:,.2f}",
            )
        dst_continent = self.continent(dst_cloud, dst_region)
        tiered = self.internet_tiers(src_cloud, src_region, dst_continent)
        if tiered is None:
            raise BadInput(
                f"egress.csv: no internet egress price for cloud {src_cloud!r} — "
                f"add internet rows for {src_cloud} (known: {', '.join(self.clouds)})"
            )
        usd, parts = _tiered_cost(size_gb, tiered.tiers)
        return EgressCost(
            usd,
            f"internet egress from {src_cloud} {src_region} to {dst_cloud} {dst_region}, "
            f"tiered: {' + '.join(parts)} = ${usd:,.2f}",
        )


def parse_egress_csv(text: str, *, name: str = "egress.csv") -> EgressTable:
    """Build an EgressTable from the CSV text; malformed rows raise BadInput naming the line."""
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != _COLUMNS:
        raise BadInput(f"{name}: header must be {','.join(_COLUMNS)}")
    continent_rules: dict[str, list[tuple[re.Pattern[str], str]]] = {}
    region_pairs: dict[tuple[str, str, str], Rate] = {}
    inter_region: dict[tuple[str, str, str], Rate] = {}
    bands: dict[tuple[str, str, str], list[tuple[int, Tier]]] = {}
    band_sources: dict[tuple[str, str, str], tuple[str, str]] = {}
    for row in reader:
        line = reader.line_num
        where = f"{name} line {line}"
        kind, cloud, src, dst = row["kind"], row["cloud"], row["src"], row["dst"]
        if kind not in _KINDS:
            raise BadInput(f"{where}: kind {kind!r} is not one of {', '.join(_KINDS)}")
        if not cloud or not src or not dst:
            raise BadInput(f"{where}: cloud, src and dst are required")
        if not row["source"] or not row["date"]:
            raise BadInput(f"{where}: every price needs its source page and date")
        if kind == "continent":
            rule = (re.compile(fnmatch.translate(src)), dst)
            continent_rules.setdefault(cloud, []).append(rule)
            continue
        rate = _number(row["usd_per_gb"], where, "usd_per_gb")
        key = (cloud, src, dst)
        if kind in ("region_pair", "inter_region"):
            table = region_pairs if kind == "region_pair" else inter_region
            if key in table:
                raise BadInput(f"{where}: duplicate {kind} row for {cloud} {src} → {dst}")
            table[key] = Rate(rate, row["source"], row["date"])
            continue
        start = _number(row["tier_start_gb"], where, "tier_start_gb")
        end = (
            math.inf
            if row["tier_end_gb"] == ""
            else _number(row["tier_end_gb"], where, "tier_end_gb")
        )
        if end <= start:
            raise BadInput(f"{where}: tier_end_gb must be above tier_start_gb")
        bands.setdefault(key, []).append((line, Tier(start, end, rate)))
        band_sources.setdefault(key, (row["source"], row["date"]))
    internet: dict[tuple[str, str, str], TieredRate] = {}
    for key, rows in bands.items():
        tiers = tuple(tier for _, tier in sorted(rows, key=lambda r: r[1].start_gb))
        _check_contiguous(tiers, f"{name} line {rows[0][0]}", key)
        internet[key] = TieredRate(tiers, *band_sources[key])
    return EgressTable(
        {cloud: tuple(rules) for cloud, rules in continent_rules.items()},
        region_pairs,
        inter_region,
        internet,
    )


def _most_specific(
    table: dict[tuple[str, str, str], T], cloud: str, src: str, dst: str
) -> T | None:
    # Exact continent pair, then "from src to anywhere", then "anywhere to dst", then default.
    for key in ((cloud, src, dst), (cloud, src, ANY), (cloud, ANY, dst), (cloud, ANY, ANY)):
        found = table.get(key)
        if found is not None:
            return found
    return None


def _tiered_cost(size_gb: float, tiers: tuple[Tier, ...]) -> tuple[float, list[str]]:
    usd = 0.0
    parts: list[str] = []
    for tier in tiers:
        if size_gb <= tier.start_gb:
            break
        in_band = min(size_gb, tier.end_gb) - tier.start_gb
        usd += in_band * tier.usd_per_gb
        parts.append(f"{_gb(in_band)} GB × ${tier.usd_per_gb:g}")
    return usd, parts


def _check_contiguous(tiers: tuple[Tier, ...], where: str, key: tuple[str, str, str]) -> None:
    label = f"internet tiers for {key[0]} {key[1]} → {key[2]}"
    if tiers[0].start_gb != 0:
        raise BadInput(f"{where}: {label} must start at 0 GB")
    for before, after in itertools.pairwise(tiers):
        if before.end_gb != after.start_gb:
            raise BadInput(f"{where}: {label} have a gap or overlap at {_gb(before.end_gb)} GB")
    if tiers[-1].end_gb != math.inf:
        raise BadInput(f"{where}: {label} must end with an open band (empty tier_end_gb)")


def _number(text: str, where: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadInput(f"{where}: {column} {text!r} is not a number") from None
    if value < 0 or not math.isfinite(value):
        raise BadInput(f"{where}: {column} must be a finite number ≥ 0")
    return value


def _gb(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")
