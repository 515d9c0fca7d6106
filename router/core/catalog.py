"""The GPU instance catalog: which instance types exist on each cloud and what hardware they carry.

The rows live in router/data/instances.csv (specs with their source page); this module reads them,
answers "which types carry N of GPU X", and joins price quotes with hardware to make offers.
Columns and how to add a type: docs/catalog.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from router.contract.clouds import PUBLIC_CLOUDS
from router.core.csv_rows import csv_rows
from router.core.errors import BadInput
from router.core.gpus import canonical_gpus
from router.core.offers import Offer, Quote

PACKAGED_NAME = "router/data/instances.csv"
COLUMNS: tuple[str, ...] = (
    "cloud",
    "instance_type",
    "family",
    "gpu",
    "gpu_count",
    "gpu_memory_gb",
    "vcpus",
    "memory_gb",
    "interconnect",
    "accelerator_type",
    "source",
)
# GCP N1 machines with attached GPUs are named `<machine-type>+<GPU>:<count>`; docs/catalog.md.
_ATTACHED = re.compile(r"^(?P<machine>n1-[a-z]+-\d+)\+(?P<gpu>[A-Za-z0-9-]+):(?P<count>\d+)$")


@dataclass(frozen=True, slots=True)
class InstanceType:
    """One instance type: `gpu_memory_gb` is per GPU, `memory_gb` is host memory (GiB).

    `accelerator_type` is GCP's accelerator name for GPUs attached to an N1 machine
    (e.g. "nvidia-tesla-t4"); None for types whose GPUs come with the machine type.
    """

    cloud: str
    instance_type: str
    family: str
    gpu: str
    gpu_count: int
    gpu_memory_gb: int
    vcpus: int
    memory_gb: float
    interconnect: str
    accelerator_type: str | None
    source: str

    @property
    def key(self) -> tuple[str, str]:
        """(cloud, instance_type): unique within a catalog."""
        return (self.cloud, self.instance_type)


class Catalog:
    """The instance types spotroute knows, in file order; iterate it for every row.

    `refused` maps (cloud, instance_type) to why the cloud's machine image cannot run that type
    (router/data/images.csv): such a type stays listed, but no offer is made for it.
    """

    def __init__(
        self,
        types: Iterable[InstanceType],
        refused: Mapping[tuple[str, str], str] | None = None,
    ) -> None:
        self.refused: Mapping[tuple[str, str], str] = dict(refused or {})
        self._types = tuple(types)
        self._by_key: dict[tuple[str, str], InstanceType] = {}
        for it in self._types:
            if it.key in self._by_key:
                raise ValueError(f"catalog: {it.cloud} {it.instance_type} appears twice")
            self._by_key[it.key] = it

    def __iter__(self) -> Iterator[InstanceType]:
        return iter(self._types)

    def __len__(self) -> int:
        return len(self._types)

    def get(self, cloud: str, instance_type: str) -> InstanceType | None:
        """The row for `instance_type` on `cloud`, or None if the catalog does not know it."""
        return self._by_key.get((cloud, instance_type))

    def for_cloud(self, cloud: str) -> tuple[InstanceType, ...]:
        """Every type of one cloud, in file order (empty for an unknown cloud)."""
        return tuple(it for it in self._types if it.cloud == cloud)

    def matching(
        self, gpu: str, gpu_count: int, clouds: Iterable[str] | None = None
    ) -> tuple[InstanceType, ...]:
        """Types carrying exactly `gpu_count` of the canonical `gpu` on `clouds` (None: all)."""
        wanted = None if clouds is None else set(clouds)
        return tuple(
            it
            for it in self._types
            if it.gpu == gpu
            and it.gpu_count == gpu_count
            and (wanted is None or it.cloud in wanted)
        )

    def equivalents(self, it: InstanceType) -> tuple[InstanceType, ...]:
        """`it` first, then the other types of its cloud with the same GPU model and count.

        The others are ordered smallest host first (vCPUs, then memory, then name), so a fleet
        that may use any of them (e.g. an AWS Auto Scaling group) prefers the cheap shapes.
        """
        others = sorted(
            (
                other
                for other in self._types
                if other.cloud == it.cloud
                and other.gpu == it.gpu
                and other.gpu_count == it.gpu_count
                and other.instance_type != it.instance_type
            ),
            key=lambda other: (other.vcpus, other.memory_gb, other.instance_type),
        )
        return (it, *others)


@dataclass(frozen=True, slots=True)
class OffersResult:
    """Offers made from quotes, and the quotes left out because their type is not catalogued.

    `dropped` counts those quotes; `unknown_types` names their (cloud, instance_type), sorted,
    so a caller can say which catalog rows are missing.
    """

    offers: list[Offer]
    dropped: int
    unknown_types: tuple[tuple[str, str], ...]
    # (cloud, instance_type, reason) of quotes dropped because the cloud's image cannot run them.
    refused: tuple[tuple[str, str, str], ...] = field(default=())
    # The offers those quotes would have made, with the reason: `route plan --explain` lists them.
    refused_offers: tuple[tuple[Offer, str], ...] = field(default=())


def offers_from_quotes(quotes: Iterable[Quote], catalog: Catalog) -> OffersResult:
    """Join each quote with its instance type's hardware; quotes for unknown types are dropped."""
    offers: list[Offer] = []
    unknown: set[tuple[str, str]] = set()
    refused: set[tuple[str, str, str]] = set()
    refused_offers: list[tuple[Offer, str]] = []
    dropped = 0
    for quote in quotes:
        it = catalog.get(quote.cloud, quote.instance_type)
        if it is None:
            dropped += 1
            unknown.add((quote.cloud, quote.instance_type))
            continue
        reason = catalog.refused.get(it.key)
        if reason is not None:  # catalogued, but the cloud's image cannot run it
            refused.add((quote.cloud, quote.instance_type, reason))
            refused_offers.append((_offer(quote, it), reason))
            continue
        offers.append(_offer(quote, it))
    return OffersResult(
        offers=offers,
        dropped=dropped,
        unknown_types=tuple(sorted(unknown)),
        refused=tuple(sorted(refused)),
        refused_offers=tuple(refused_offers),
    )


def _offer(quote: Quote, it: InstanceType) -> Offer:
    return Offer(
        cloud=quote.cloud,
        region=quote.region,
        zone=quote.zone,
        instance_type=quote.instance_type,
        gpu=it.gpu,
        gpu_count=it.gpu_count,
        gpu_memory_gb=it.gpu_memory_gb,
        vcpus=it.vcpus,
        memory_gb=it.memory_gb,
        market=quote.market,
        price_per_hour=quote.price_per_hour,
        source=quote.source,
        observed_at=quote.observed_at,
        interruption_bucket=quote.interruption_bucket,
        interconnect=it.interconnect,
        clock_skewed=quote.clock_skewed,
    )


def refused_types(
    catalog: Catalog, gpu: str, gpu_count: int, clouds: Iterable[str] | None = None
) -> tuple[tuple[InstanceType, str], ...]:
    """The catalog's types carrying `gpu_count` × `gpu` that a cloud's image cannot drive, with
    why (for `route validate --explain`)."""
    return tuple(
        (it, catalog.refused[it.key])
        for it in catalog.matching(gpu, gpu_count, clouds)
        if it.key in catalog.refused
    )


def gcp_accelerator_type(catalog: Catalog, gpu: str) -> str:
    """GCP's accelerator type of a canonical GPU attached to N1 machines; "" when none is."""
    return next(
        (
            it.accelerator_type
            for it in catalog.for_cloud("gcp")
            if it.gpu == gpu and it.accelerator_type
        ),
        "",
    )


IMAGES_NAME = "router/data/images.csv"
IMAGE_COLUMNS: tuple[str, ...] = ("cloud", "image", "driver", "gpu", "family", "reason", "source")


@dataclass(frozen=True, slots=True)
class ImageLimit:
    """Instance types of `cloud` (by GPU model or by family) its machine image cannot drive."""

    cloud: str
    image: str
    driver: str
    gpu: str
    family: str
    reason: str
    source: str

    def refuses(self, it: InstanceType) -> bool:
        """True if `it` runs on this image's cloud and has the refused GPU or family."""
        return it.cloud == self.cloud and (
            (bool(self.gpu) and it.gpu == self.gpu)
            or (bool(self.family) and it.family == self.family)
        )


def parse_image_limits(text: str, name: str = IMAGES_NAME) -> tuple[ImageLimit, ...]:
    """Parse images.csv; a row must set exactly one of gpu/family, a reason and a source."""
    limits = []
    for number, row in csv_rows(text, name, IMAGE_COLUMNS):
        where = f"{name} line {number}"
        limit = ImageLimit(**{column: row[column] for column in IMAGE_COLUMNS})
        if limit.cloud not in PUBLIC_CLOUDS:
            raise BadInput(
                f"{where}: cloud '{limit.cloud}' is not one of {', '.join(PUBLIC_CLOUDS)}"
            )
        if bool(limit.gpu) == bool(limit.family):
            raise BadInput(f"{where}: set exactly one of gpu and family")
        if limit.gpu and limit.gpu not in canonical_gpus():
            raise BadInput(f"{where}: gpu '{limit.gpu}' is not a canonical GPU name")
        if not limit.reason or not limit.source:
            raise BadInput(f"{where}: reason and source are required")
        limits.append(limit)
    return tuple(limits)


def with_image_limits(catalog: Catalog, limits: Iterable[ImageLimit]) -> Catalog:
    """`catalog` with the types a cloud's image cannot drive marked `refused`, with the reason.

    The rows stay (prices are still fetched and shown), but offers_from_quotes makes no offer for
    them, so the planner never places a job where its node could not load the GPU driver.
    """
    limits = tuple(limits)
    refused = dict(catalog.refused)
    for it in catalog:
        limit = next((limit for limit in limits if limit.refuses(it)), None)
        if limit is not None:
            refused[it.key] = f"{it.cloud} {it.instance_type}: {limit.reason} ({limit.source})"
    return Catalog(catalog, refused)


def parse_catalog(text: str, name: str = PACKAGED_NAME) -> Catalog:
    """Parse instances.csv text; a bad row raises BadInput naming `name` and the line number."""
    types: list[InstanceType] = []
    seen: dict[tuple[str, str], int] = {}
    for number, row in csv_rows(text, name, COLUMNS):
        it = _row(row, f"{name} line {number}")
        first = seen.setdefault(it.key, number)
        if first != number:
            raise BadInput(
                f"{name} line {number}: {it.cloud} {it.instance_type} is already on line {first} "
                "— keep one row per (cloud, instance_type)"
            )
        types.append(it)
    return Catalog(types)


def _row(row: dict[str, str], where: str) -> InstanceType:
    cloud = row["cloud"]
    if cloud not in PUBLIC_CLOUDS:
        raise BadInput(f"{where}: cloud '{cloud}' is not one of {', '.join(PUBLIC_CLOUDS)}")
    instance_type = row["instance_type"]
    if not instance_type:
        raise BadInput(f"{where}: instance_type is empty — name the provider's instance type")
    gpu = row["gpu"]
    if gpu not in canonical_gpus():
        raise BadInput(
            f"{where}: gpu '{gpu}' is not a canonical GPU name — use one of "
            f"{', '.join(canonical_gpus())} (router/data/gpus.csv)"
        )
    it = InstanceType(
        cloud=cloud,
        instance_type=instance_type,
        family=row["family"],
        gpu=gpu,
        gpu_count=_positive_int(row, "gpu_count", where),
        gpu_memory_gb=_positive_int(row, "gpu_memory_gb", where),
        vcpus=_positive_int(row, "vcpus", where),
        memory_gb=_positive_float(row, "memory_gb", where),
        interconnect=row["interconnect"],
        accelerator_type=row["accelerator_type"] or None,
        source=row["source"],
    )
    if not it.source:
        raise BadInput(f"{where}: source is empty — name the provider page the specs come from")
    _check_attached(it, where)
    return it


def _check_attached(it: InstanceType, where: str) -> None:
    """GCP N1 + GPU rows: the name, GPU, count and accelerator type must agree."""
    if "+" not in it.instance_type:
        return
    match = _ATTACHED.match(it.instance_type)
    if it.cloud != "gcp" or match is None:
        raise BadInput(
            f"{where}: '{it.instance_type}' — only GCP N1 rows use '+', named "
            "<machine-type>+<GPU>:<count> (e.g. n1-standard-8+T4:1)"
        )
    if match["gpu"] != it.gpu or int(match["count"]) != it.gpu_count:
        raise BadInput(
            f"{where}: '{it.instance_type}' names {match['gpu']}:{match['count']} but the row says "
            f"gpu {it.gpu} x {it.gpu_count} — make them agree"
        )
    if not it.accelerator_type:
        raise BadInput(
            f"{where}: '{it.instance_type}' attaches GPUs but accelerator_type is empty — "
            "give GCP's accelerator type (e.g. nvidia-tesla-t4)"
        )


def _positive_int(row: dict[str, str], column: str, where: str) -> int:
    text = row[column]
    try:
        value = int(text)
    except ValueError:
        raise BadInput(f"{where}: {column} '{text}' is not a whole number") from None
    if value <= 0:
        raise BadInput(f"{where}: {column} must be positive, got {value}")
    return value


def _positive_float(row: dict[str, str], column: str, where: str) -> float:
    text = row[column]
    try:
        value = float(text)
    except ValueError:
        raise BadInput(f"{where}: {column} '{text}' is not a number") from None
    if not value > 0:
        raise BadInput(f"{where}: {column} must be positive, got {text}")
    return value
