"""Quota checks, pure: does this account have the free quota to launch an offer's instances?

A quota is a regional limit a cloud enforces per account (AWS vCPUs per instance family group,
GCP GPUs per model and CPUs per series, Azure vCPUs per VM family and a regional spot total).
`QuotaBook` holds what is known — the latest reading of each quota (limit and usage) and the
launches that failed on one — and answers per offer: enough free quota (`ok`), not enough
(`short`, with the numbers and how to ask for more), or `unknown` (never read, no mapping).
Unknown never rejects. No I/O here: router/prices/quotas/ reads the clouds and the cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from router.core.csv_rows import csv_rows
from router.core.errors import BadInput

OK: Final = "ok"
SHORT: Final = "short"
UNKNOWN: Final = "unknown"
NOT_NEEDED: Final = "not needed"
QuotaStatus = Literal["ok", "short", "unknown", "not needed"]
UNITS = {"vcpus": "vCPUs", "gpus": "GPUs"}
QUOTAS_NAME = "router/data/quotas.csv"
INSTANCES_NAME = "router/data/instances.csv"
QUOTA_COLUMNS = ("cloud", "quota", "name", "unit", "request_cli", "request_url", "source")
TYPE_COLUMNS = ("cloud", "instance_type", "vcpus", "gpu_count", "quota_on_demand", "quota_spot")


@dataclass(frozen=True, slots=True)
class QuotaDefinition:
    """One quota a cloud enforces (a row of router/data/quotas.csv); `unit` is vcpus | gpus."""

    cloud: str
    quota: str  # AWS quota code, GCP metric, Azure usage name
    name: str
    unit: str
    request_cli: str  # templates with {region} {quota} {desired}
    request_url: str
    source: str

    def how_to_request(self, region: str, desired: float) -> str:
        """The fix in words: the CLI call and the console page that ask for `desired` in total."""
        values = {"region": region, "quota": self.quota, "desired": f"{desired:g}"}
        cli = self.request_cli.format(**values)
        url = self.request_url.format(**values)
        return f"`{cli}` or {url}" if cli else url


# One instance type's quota needs in one market: every group must fit; within a group the
# first alternative with a limit above 0 applies (GCP: spot GPUs use the PREEMPTIBLE_ quota
# where one is granted, else the regular one).
QuotaGroups = tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class TypeQuotas:
    """The quotas one instance type draws on, per market, and what one instance uses."""

    cloud: str
    instance_type: str
    on_demand: QuotaGroups
    spot: QuotaGroups
    vcpus: int
    gpus: int

    def groups(self, market: str) -> QuotaGroups:
        return self.spot if market == "spot" else self.on_demand

    def per_instance(self, unit: str) -> int:
        return self.gpus if unit == "gpus" else self.vcpus


def parse_groups(text: str) -> QuotaGroups:
    """`A;B|C` → (("A",), ("B", "C")): ';' joins quotas that must all fit, '|' alternatives."""
    groups = []
    for part in text.split(";"):
        alternatives = tuple(a.strip() for a in part.split("|") if a.strip())
        if alternatives:
            groups.append(alternatives)
    return tuple(groups)


@dataclass(frozen=True, slots=True)
class QuotaReading:
    """A quota's limit and usage in one region as a cloud API reported them at `observed_at`."""

    cloud: str
    region: str
    quota: str
    limit: float
    usage: float
    source: str  # e.g. "aws-service-quotas", "gcp-regions", "azure-usage"
    observed_at: datetime
    name: str = ""
    unit: str = ""

    @property
    def free(self) -> float:
        return max(0.0, self.limit - self.usage)


@dataclass(frozen=True, slots=True)
class LaunchFailure:
    """A launch that failed on a quota: `needed` (quota units) did not fit at `observed_at`."""

    cloud: str
    region: str
    quota: str
    instance_type: str
    market: str
    needed: float
    message: str
    observed_at: datetime


@dataclass(frozen=True, slots=True)
class QuotaVerdict:
    """What the quotas say about one offer: `status`, and `note` (the reason when short)."""

    status: QuotaStatus
    note: str = ""


_NOT_NEEDED = QuotaVerdict(NOT_NEEDED)


class QuotaBook:
    """What is known about an account's quotas: readings, failed launches, definitions, mapping.

    Per (cloud, region, quota) the newest reading counts; a launch failure newer than it
    overrides it (the cloud said no more recently than it told the numbers).
    """

    def __init__(
        self,
        definitions: Iterable[QuotaDefinition],
        types: Iterable[TypeQuotas],
        readings: Iterable[QuotaReading] = (),
        failures: Iterable[LaunchFailure] = (),
        *,
        now: datetime,
    ) -> None:
        self.now = now
        self.definitions: dict[tuple[str, str], QuotaDefinition] = {
            (d.cloud, d.quota): d for d in definitions
        }
        self.types: dict[tuple[str, str], TypeQuotas] = {
            (t.cloud, t.instance_type): t for t in types
        }
        self.readings: dict[tuple[str, str, str], QuotaReading] = {}
        for r in readings:
            key = (r.cloud, r.region, r.quota)
            held = self.readings.get(key)
            if held is None or r.observed_at >= held.observed_at:
                self.readings[key] = r
        self.failures: dict[tuple[str, str, str], list[LaunchFailure]] = {}
        for f in failures:
            self.failures.setdefault((f.cloud, f.region, f.quota), []).append(f)
        self.read_clouds = frozenset(r.cloud for r in self.readings.values())

    def check(
        self, cloud: str, region: str, instance_type: str, market: str, node_count: int
    ) -> QuotaVerdict:
        """Whether `node_count` instances of the type fit the free quota of its region."""
        if market not in ("spot", "on-demand") or cloud == "local":
            return _NOT_NEEDED
        it = self.types.get((cloud, instance_type))
        groups = it.groups(market) if it is not None else ()
        if it is None or not groups:
            return QuotaVerdict(
                UNKNOWN, f"quota unknown: no quota is mapped for {cloud} {instance_type}"
            )
        unknown: list[str] = []
        for group in groups:
            quota = self._applicable(cloud, region, group)
            definition = self.definitions.get((cloud, quota))
            unit = definition.unit if definition is not None else "vcpus"
            needed = float(it.per_instance(unit) * node_count)
            failed = self._failure(cloud, region, quota, needed)
            if failed is not None:
                return QuotaVerdict(SHORT, self._failure_reason(failed, needed, definition))
            reading = self.readings.get((cloud, region, quota))
            if reading is None:
                unknown.append(quota)
                continue
            if reading.free < needed:
                return QuotaVerdict(SHORT, self._short_reason(reading, needed, definition))
        if unknown:
            return QuotaVerdict(UNKNOWN, self._unknown_note(cloud, region, unknown))
        return QuotaVerdict(OK)

    # --- helpers -------------------------------------------------------------------------
    def _applicable(self, cloud: str, region: str, group: Sequence[str]) -> str:
        for quota in group:
            reading = self.readings.get((cloud, region, quota))
            if reading is not None and reading.limit > 0:
                return quota
        # None granted: the first alternative is the one to read or to ask for.
        return group[0]

    def _failure(self, cloud: str, region: str, quota: str, needed: float) -> LaunchFailure | None:
        failures = self.failures.get((cloud, region, quota))
        if not failures:
            return None
        reading = self.readings.get((cloud, region, quota))
        for f in sorted(failures, key=lambda f: f.observed_at, reverse=True):
            if reading is not None and reading.observed_at >= f.observed_at:
                return None  # read again since: the numbers decide
            if needed >= f.needed:
                return f
        return None

    def _age(self, moment: datetime) -> str:
        hours = max(0.0, (self.now - moment).total_seconds()) / 3600
        return f"{hours:.1f} h ago"

    def _short_reason(
        self, r: QuotaReading, needed: float, definition: QuotaDefinition | None
    ) -> str:
        unit = UNITS.get(definition.unit if definition else r.unit, "units")
        name = f' "{definition.name}"' if definition is not None else ""
        fix = (
            f" — request more: {definition.how_to_request(r.region, r.usage + needed)}"
            if definition is not None
            else ""
        )
        return (
            f"quota {r.quota}{name} in {r.region}: {needed:g} {unit} needed, {r.free:g} free "
            f"(limit {r.limit:g}, {r.usage:g} in use, read {self._age(r.observed_at)}){fix}"
        )

    def _failure_reason(
        self, f: LaunchFailure, needed: float, definition: QuotaDefinition | None
    ) -> str:
        unit = UNITS.get(definition.unit if definition else "", "units")
        name = f' "{definition.name}"' if definition is not None else ""
        said = f": {f.message}" if f.message else ""
        fix = (
            f" — request more: {definition.how_to_request(f.region, needed)}, then "
            "`route quotas refresh`"
            if definition is not None
            else " — `route quotas refresh` once the quota is raised"
        )
        return (
            f"quota {f.quota}{name} in {f.region}: a launch of {f.instance_type} ({f.market}, "
            f"{f.needed:g} {unit}) failed on it {self._age(f.observed_at)}{said}{fix}"
        )

    def _unknown_note(self, cloud: str, region: str, quotas: Sequence[str]) -> str:
        why = (
            "not in the last `route quotas refresh`"
            if cloud in self.read_clouds
            else "not read yet — run `route quotas refresh`"
        )
        return f"quota unknown: {', '.join(quotas)} in {region} {why}"


def quota_keys(types: Iterable[TypeQuotas], cloud: str) -> tuple[str, ...]:
    """Every quota the instance types of `cloud` draw on, sorted."""
    keys = {
        quota
        for t in types
        if t.cloud == cloud
        for groups in (t.on_demand, t.spot)
        for group in groups
        for quota in group
    }
    return tuple(sorted(keys))


def parse_quota_definitions(text: str, name: str = QUOTAS_NAME) -> tuple[QuotaDefinition, ...]:
    """Parse quotas.csv text; a bad row raises BadInput naming its line."""
    out: list[QuotaDefinition] = []
    seen: set[tuple[str, str]] = set()
    for number, row in csv_rows(text, name, QUOTA_COLUMNS):
        where = f"{name} line {number}"
        if row["unit"] not in ("vcpus", "gpus"):
            raise BadInput(f"{where}: unit '{row['unit']}' — use vcpus or gpus")
        if not row["quota"] or not row["source"]:
            raise BadInput(f"{where}: quota and source must not be empty")
        key = (row["cloud"], row["quota"])
        if key in seen:
            raise BadInput(f"{where}: {key[0]} {key[1]} is listed twice")
        seen.add(key)
        out.append(QuotaDefinition(**{column: row[column] for column in QUOTA_COLUMNS}))
    return tuple(out)


def parse_type_quotas(
    text: str, definitions: tuple[QuotaDefinition, ...], name: str = INSTANCES_NAME
) -> tuple[TypeQuotas, ...]:
    """The quota columns of instances.csv; every quota named must be defined in quotas.csv."""
    known = {(d.cloud, d.quota) for d in definitions}
    out: list[TypeQuotas] = []
    for number, row in csv_rows(text, name, TYPE_COLUMNS):
        cloud = row["cloud"]
        groups = {m: parse_groups(row[f"quota_{m}"]) for m in ("on_demand", "spot")}
        for market, market_groups in groups.items():
            for group in market_groups:
                for quota in group:
                    if (cloud, quota) not in known:
                        raise BadInput(
                            f"{name} line {number}: quota_{market} names {cloud} quota "
                            f"'{quota}', which {QUOTAS_NAME} does not define — add it there"
                        )
        out.append(
            TypeQuotas(
                cloud=cloud,
                instance_type=row["instance_type"],
                on_demand=groups["on_demand"],
                spot=groups["spot"],
                vcpus=int(row["vcpus"]),
                gpus=int(row["gpu_count"]),
            )
        )
    return tuple(out)
