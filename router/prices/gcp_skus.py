"""GCP Compute Engine SKUs → hourly rates → machine prices (pure: no API calls).

GCP bills an a2/a3/g2 machine (or an n1 machine with GPUs attached) per vCPU, per GiB of RAM,
per GPU and per GiB of bundled local SSD. This module reduces Cloud Billing Catalog SKUs to
rates (`sku_rate`, `rate_table`) and composes each catalog instance type's hourly price from
them (`machine_from_hardware`, `compose_price`, `compose_quotes`). router.prices.gcp fetches
the SKUs and zones; see docs/prices-gcp.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from router.core.offers import Quote

SOURCE = "gcp-api"

# Machine series (or, where a family is billed apart, the family) → the words its vCPU and RAM
# SKUs use ("A2 Instance Core running in Americas", "N1 Predefined Instance Ram running in
# EMEA"). a3-megagpu is billed by the "A3Plus Instance" SKUs, not "A3 Instance"
# (https://cloud.google.com/compute/vm-instance-pricing#accelerator-optimized). A family entry
# wins over its series. Series not listed get no quote.
SERIES_SKU_NAMES: Mapping[str, str] = {
    "a2": "A2 Instance",
    "a3": "A3 Instance",
    "a3-megagpu": "A3Plus Instance",
    "g2": "G2 Instance",
    "n1": "N1 Predefined Instance",
}
# Machine types whose price includes local SSD they always come with (GiB), billed by the
# "SSD backed Local Storage" SKU per GiB-month: a2-ultragpu-* and a3-*gpu-8g
# (https://cloud.google.com/compute/docs/accelerator-optimized-machines, "Bundled local SSD").
BUNDLED_LOCAL_SSD_GIB: Mapping[str, int] = {
    "a2-ultragpu-1g": 375,
    "a2-ultragpu-2g": 750,
    "a2-ultragpu-4g": 1500,
    "a2-ultragpu-8g": 3000,
    "a3-highgpu-1g": 750,
    "a3-highgpu-2g": 1500,
    "a3-highgpu-4g": 3000,
    "a3-highgpu-8g": 6000,
    "a3-megagpu-8g": 6000,
}
LOCAL_SSD = "SSD backed Local Storage"
# GCP prices storage per month of 730 hours (https://cloud.google.com/compute/disks-image-pricing).
HOURS_PER_MONTH = Decimal(730)
# Sold only as spot or through DWS flex-start/calendar mode: no on-demand price exists
# (https://cloud.google.com/compute/docs/accelerator-optimized-machines#a3-high-vms).
NO_ON_DEMAND: frozenset[str] = frozenset({"a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g"})
# Compute accelerator type → the model words of its GPU SKU ("Nvidia Tesla A100 80GB GPU ...").
ACCELERATOR_SKU_MODELS: Mapping[str, str] = {
    "nvidia-tesla-t4": "T4",
    "nvidia-tesla-v100": "V100",
    "nvidia-tesla-a100": "A100",
    "nvidia-a100-80gb": "A100 80GB",
    "nvidia-h100-80gb": "H100 80GB",
    "nvidia-h100-mega-80gb": "H100 80GB Mega",
    "nvidia-l4": "L4",
}
# Canonical GPU → accelerator type, for catalog rows that do not name one.
GPU_ACCELERATOR_TYPES: Mapping[str, str] = {
    "T4": "nvidia-tesla-t4",
    "V100": "nvidia-tesla-v100",
    "A100-40GB": "nvidia-tesla-a100",
    "A100-80GB": "nvidia-a100-80gb",
    "H100-80GB": "nvidia-h100-80gb",
    "L4": "nvidia-l4",
}
# Machine families whose bundled GPU is billed by its own GPU SKU, not the canonical GPU's: the
# a3-megagpu H100 is the "H100 80GB Mega" SKU (the catalog row says only H100-80GB, and its
# accelerator_type column is for N1 attachments).
FAMILY_ACCELERATOR_TYPES: Mapping[str, str] = {"a3-megagpu": "nvidia-h100-mega-80gb"}
# The same GPU is spelled differently in some regions' SKUs.
_GPU_MODEL_SPELLINGS: Mapping[str, str] = {
    "H100 Mega 80GB": "H100 80GB Mega",
    "H100 80GB Plus": "H100 80GB Mega",
}
# Descriptions with these words price something other than a plain on-demand or spot VM:
# committed use, sole-tenant nodes, custom shapes, DWS flex-start / calendar-mode blocks,
# reservations (some are $0 placeholders), extended memory, premium images.
EXCLUDED_SKU_WORDS: tuple[str, ...] = (
    "commitment",
    "sole tenancy",
    "sole-tenancy",
    "custom",
    "dws",
    "calendar mode",
    "flex start",
    "defined duration",
    "reserved",
    "reservation",
    "extended",
    "premium",
    "virtual workstation",
    "capacity optimized",
)
USAGE_TYPE_MARKETS: Mapping[str, str] = {"OnDemand": "on-demand", "Preemptible": "spot"}
_USAGE_UNITS: Mapping[str, str] = {"core": "h", "ram": "GiBy.h", "gpu": "h", "ssd": "GiBy.mo"}

_SPOT_PREFIX = re.compile(r"^(?:spot )?preemptible ", re.IGNORECASE)
_SPOT_ATTACHED = re.compile(r" attached to (?:spot )?preemptible vms", re.IGNORECASE)
_RUNNING_IN = re.compile(r"^(?P<thing>.+?) running in (?P<place>.+)$")
_CORE_OR_RAM = re.compile(r"^(?P<series>.+) (?P<part>Core|Ram)$")
_GPU = re.compile(r"^Nvidia (?:Tesla )?(?P<model>.+) GPU$")

# (market, region, part, name): part is "core" | "ram" | "gpu" | "ssd"; name is the series
# words ("A2 Instance"), the GPU model ("A100 80GB") or LOCAL_SSD. SSD rates are per GiB-hour.
RateKey = tuple[str, str, str, str]


class GcpHardware(Protocol):
    """What pricing needs of one catalog instance type (router.core.catalog.InstanceType has it)."""

    @property
    def cloud(self) -> str: ...
    @property
    def instance_type(self) -> str: ...
    @property
    def vcpus(self) -> int: ...
    @property
    def memory_gb(self) -> float: ...
    @property
    def gpu(self) -> str: ...
    @property
    def gpu_count(self) -> int: ...
    @property
    def accelerator_type(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Machine:
    """A GCP instance type as billed: machine type, its shape, and its GPUs.

    `instance_type` is the catalog name: the machine type, or `<machine>+<GPU>:<count>` when
    the GPUs are attached to an N1 machine (`attached`). `memory_gib` is GiB: GCP's "GB" of
    machine memory are GiB (memoryMb / 1024), the unit RAM SKUs are billed in.
    """

    instance_type: str
    machine_type: str
    series: str
    vcpus: int
    memory_gib: float
    gpu_count: int
    accelerator_type: str
    attached: bool
    local_ssd_gib: int = 0

    @property
    def sku_series(self) -> str:
        """The series words of its vCPU and RAM SKUs (a family entry wins over its series)."""
        family = self.machine_type.rsplit("-", 1)[0]
        return SERIES_SKU_NAMES.get(family, SERIES_SKU_NAMES[self.series])


@dataclass(frozen=True, slots=True)
class SkuRate:
    """One Compute Engine SKU reduced to what composition needs: USD per hour or GiB-hour."""

    market: str
    part: str
    name: str
    regions: tuple[str, ...]
    price: Decimal


def machine_from_hardware(hardware: GcpHardware) -> Machine | None:
    """The billed shape of one catalog row, or None when its series/GPU is not priced here."""
    machine_type = hardware.instance_type.partition("+")[0]
    series = machine_type.split("-", 1)[0]
    if series not in SERIES_SKU_NAMES:
        return None
    accelerator = (
        hardware.accelerator_type
        or FAMILY_ACCELERATOR_TYPES.get(machine_type.rsplit("-", 1)[0])
        or GPU_ACCELERATOR_TYPES.get(hardware.gpu, "")
    )
    if hardware.gpu_count > 0 and accelerator not in ACCELERATOR_SKU_MODELS:
        return None
    return Machine(
        instance_type=hardware.instance_type,
        machine_type=machine_type,
        series=series,
        vcpus=int(hardware.vcpus),
        memory_gib=float(hardware.memory_gb),
        gpu_count=int(hardware.gpu_count),
        accelerator_type=accelerator,
        attached="+" in hardware.instance_type,
        local_ssd_gib=BUNDLED_LOCAL_SSD_GIB.get(machine_type, 0),
    )


def sku_rate(
    *,
    description: str,
    resource_family: str,
    usage_type: str,
    service_regions: Sequence[str],
    usage_unit: str,
    unit_prices: Sequence[tuple[str, int, int]],
) -> SkuRate | None:
    """The rate of a vCPU, RAM or GPU SKU for on-demand or spot VMs, or None for any other SKU.

    `unit_prices` are the tiers' (currency, units, nanos), in tier order; the first non-zero
    tier is the price (a leading $0 tier is a free allowance, an all-$0 SKU is a placeholder).
    """
    market = USAGE_TYPE_MARKETS.get(usage_type)
    lowered = description.lower()
    is_local_ssd = lowered.startswith(LOCAL_SSD.lower())
    if market is None or resource_family != ("Storage" if is_local_ssd else "Compute"):
        return None
    if any(word in lowered for word in EXCLUDED_SKU_WORDS):
        return None
    plain = _SPOT_ATTACHED.sub("", _SPOT_PREFIX.sub("", description))
    if plain != description and market != "spot":
        return None  # a preemptible description filed as OnDemand: not a VM price we know
    running = _RUNNING_IN.match(plain)
    part: str | None
    if is_local_ssd:
        # "SSD backed Local Storage[ attached to Spot Preemptible VMs][ in <place>]"
        part, name = "ssd", LOCAL_SSD
    elif running is None:
        return None
    else:
        part, name = _part_and_name(running.group("thing"))
    if part is None or usage_unit != _USAGE_UNITS[part]:
        return None
    price = next(
        (
            Decimal(units) + Decimal(nanos) / Decimal(10**9)
            for currency, units, nanos in unit_prices
            if currency in ("", "USD") and (units or nanos)
        ),
        None,
    )
    if price is None or price <= 0:
        return None
    if part == "ssd":
        price = price / HOURS_PER_MONTH
    return SkuRate(market, part, name, tuple(service_regions), price)


def rate_table(rates: Iterable[SkuRate]) -> dict[RateKey, Decimal]:
    """Rates by (market, region, part, name); where two SKUs overlap, the higher one is kept."""
    table: dict[RateKey, Decimal] = {}
    for rate in rates:
        for region in rate.regions:
            key = (rate.market, region, rate.part, rate.name)
            # Overlaps should not happen; if they do, overstating beats routing to a phantom deal.
            table[key] = max(table.get(key, rate.price), rate.price)
    return table


def compose_price(
    machine: Machine, rates: Mapping[RateKey, Decimal], market: str, region: str
) -> Decimal | None:
    """USD per hour: vCPUs × core + GiB × RAM + GPUs × GPU rate + bundled local SSD GiB × SSD
    rate; None if a rate is missing (an understated price would route to a phantom deal) or the
    machine is not sold in that market."""
    if market == "on-demand" and machine.machine_type in NO_ON_DEMAND:
        return None
    series_name = machine.sku_series
    core = rates.get((market, region, "core", series_name))
    ram = rates.get((market, region, "ram", series_name))
    if core is None or ram is None:
        return None
    total = core * machine.vcpus + ram * Decimal(str(machine.memory_gib))
    if machine.gpu_count:
        gpu = rates.get((market, region, "gpu", ACCELERATOR_SKU_MODELS[machine.accelerator_type]))
        if gpu is None:
            return None
        total += gpu * machine.gpu_count
    if machine.local_ssd_gib:
        ssd = rates.get((market, region, "ssd", LOCAL_SSD))
        if ssd is None:
            return None
        total += ssd * machine.local_ssd_gib
    return total


def compose_quotes(
    machines: Iterable[Machine],
    rates: Mapping[RateKey, Decimal],
    zones: Mapping[str, Iterable[str]],
    *,
    regions: Iterable[str],
    markets: Sequence[str],
    observed_at: datetime,
) -> list[Quote]:
    """One quote per offered zone in `regions`, per market and priced instance type."""
    wanted_regions = set(regions)
    quotes: list[Quote] = []
    for machine in machines:
        for zone in sorted(set(zones.get(machine.instance_type, ()))):
            region = zone_region(zone)
            if region not in wanted_regions:
                continue
            for market in markets:
                price = compose_price(machine, rates, market, region)
                if price is None:
                    continue
                quotes.append(
                    Quote(
                        cloud="gcp",
                        region=region,
                        zone=zone,
                        instance_type=machine.instance_type,
                        market=market,
                        price_per_hour=float(price),
                        source=SOURCE,
                        observed_at=observed_at,
                    )
                )
    return sorted(quotes, key=lambda q: (q.region, q.zone or "", q.instance_type, q.market))


def zone_region(zone: str) -> str:
    """The region of a zone: "us-central1-a" → "us-central1"."""
    return zone.rpartition("-")[0]


def rate_of_sku(sku: Any) -> SkuRate | None:
    """The rate of one google-cloud-billing `Sku` message (first pricing info), or None."""
    pricing = list(sku.pricing_info)
    if not pricing:
        return None
    expression = pricing[0].pricing_expression
    return sku_rate(
        description=str(sku.description),
        resource_family=str(sku.category.resource_family),
        usage_type=str(sku.category.usage_type),
        service_regions=[str(r) for r in sku.service_regions],
        usage_unit=str(expression.usage_unit),
        unit_prices=[
            (
                str(tier.unit_price.currency_code),
                int(tier.unit_price.units),
                int(tier.unit_price.nanos),
            )
            for tier in expression.tiered_rates
        ],
    )


def _part_and_name(thing: str) -> tuple[str | None, str]:
    gpu = _GPU.match(thing)
    if gpu is not None:
        model = gpu.group("model")
        return "gpu", _GPU_MODEL_SPELLINGS.get(model, model)
    core_or_ram = _CORE_OR_RAM.match(thing)
    if core_or_ram is not None and core_or_ram.group("series") in SERIES_SKU_NAMES.values():
        part = "core" if core_or_ram.group("part") == "Core" else "ram"
        return part, core_or_ram.group("series")
    return None, thing
