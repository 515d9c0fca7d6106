"""Standard object-storage list prices (router/data/storage.csv): what a staged copy costs to keep.

Pure: `parse_storage_csv(text)`; router/config/datafiles.py loads the bundled file.

A copy-mode data set is copied into a bucket or container in the placement's region and kept
there while the job runs; this table prices those GB-hours. Each row names its provider page.
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass

from router.core.csv_rows import csv_rows
from router.core.errors import BadInput

HOURS_PER_MONTH = 730.0  # the providers' calculator month; storage is billed pro rata
LOCAL = "local"

_COLUMNS = ("cloud", "region", "usd_per_gb_month", "source", "date", "note")


@dataclass(frozen=True, slots=True)
class StorageRate:
    """USD per GB-month for standard storage in the regions a glob matches, with its source."""

    region_glob: str
    usd_per_gb_month: float
    source: str
    date: str


@dataclass(frozen=True, slots=True)
class StorageCost:
    """USD to keep size_gb for some hours, with the rule that priced it in words."""

    usd: float
    rule: str


class StoragePrices:
    """Storage rates per cloud, first matching region glob wins."""

    def __init__(self, rates: dict[str, tuple[tuple[re.Pattern[str], StorageRate], ...]]) -> None:
        self._rates = rates

    @property
    def clouds(self) -> tuple[str, ...]:
        """Clouds with at least one storage price."""
        return tuple(sorted(self._rates))

    def rate(self, cloud: str, region: str) -> StorageRate | None:
        """The standard-storage rate of (cloud, region), or None when the cloud has no rows."""
        for pattern, rate in self._rates.get(cloud, ()):
            if pattern.match(region):
                return rate
        return None

    def cost(self, size_gb: float, cloud: str, region: str, hours: float) -> StorageCost:
        """USD to store size_gb in (cloud, region) for `hours` at the standard list price."""
        if size_gb <= 0 or hours <= 0:
            return StorageCost(0.0, "nothing stored")
        if cloud == LOCAL:
            return StorageCost(0.0, "local target: local disk, not priced")
        rate = self.rate(cloud, region)
        if rate is None:
            raise BadInput(
                f"storage.csv: no storage price for cloud {cloud!r} — add a row "
                f"{cloud},*,<usd_per_gb_month>,<source>,<date>, (known: {', '.join(self.clouds)})"
            )
        usd = size_gb * rate.usd_per_gb_month * hours / HOURS_PER_MONTH
        return StorageCost(
            usd,
            f"{cloud} {region} standard storage {_num(size_gb)} GB × ${rate.usd_per_gb_month:g}"
            f"/GB-month × {hours:.1f} h / {HOURS_PER_MONTH:g} h = ${usd:,.2f}",
        )


def parse_storage_csv(text: str, *, name: str = "storage.csv") -> StoragePrices:
    """Build StoragePrices from CSV text; a malformed row raises BadInput naming its line."""
    rates: dict[str, list[tuple[re.Pattern[str], StorageRate]]] = {}
    for line, row in csv_rows(text, name, _COLUMNS):
        where = f"{name} line {line}"
        if not row["cloud"] or not row["region"]:
            raise BadInput(f"{where}: cloud and region are required")
        if not row["source"] or not row["date"]:
            raise BadInput(f"{where}: every price needs its source page and date")
        try:
            usd = float(row["usd_per_gb_month"])
        except ValueError:
            raise BadInput(
                f"{where}: usd_per_gb_month {row['usd_per_gb_month']!r} is not a number"
            ) from None
        if usd < 0 or not math.isfinite(usd):
            raise BadInput(f"{where}: usd_per_gb_month must be a finite number ≥ 0")
        rate = StorageRate(row["region"], usd, row["source"], row["date"])
        rates.setdefault(row["cloud"], []).append(
            (re.compile(fnmatch.translate(row["region"])), rate)
        )
    return StoragePrices({cloud: tuple(rows) for cloud, rows in rates.items()})


def _num(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")
