"""price-within-budget: a GPU group's declared max price stays within the budget."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.rules import resource_types as rt
from policies.rules.model import (
    Settings,
    as_list,
    as_number,
    money,
    present,
    prop_at,
    shown,
)
from policies.rules.spot import (
    spot_market,
)

# --- price-within-budget -------------------------------------------------------------------------


@dataclass(frozen=True)
class PriceCap:
    """The most one GPU group may pay: USD per instance-hour and for the whole group per hour."""

    per_instance: float | None
    total: float | None
    uncapped: bool = False  # spot that may pay up to the on-demand price (no max price set)
    unreadable: tuple[str, ...] = ()  # "field 'value'" of each price or count not a number


@dataclass
class _Numbers:
    """Reads a resource's prices and counts, noting each value given but not a number."""

    unreadable: list[str] = field(default_factory=list)

    def __call__(self, value: Any, name: str) -> float | None:
        number = as_number(value)
        if number is None and present(value):
            self.unreadable.append(f"{name} {shown(value)}")
        return number


def price_cap(resource_type: str, props: Mapping[str, Any]) -> PriceCap | None:
    """The declared price cap of a GPU group resource; None if the type carries no price."""
    read = _Numbers()
    cap = _price_cap(resource_type, props, read)
    if read.unreadable:
        return PriceCap(None, None, unreadable=tuple(read.unreadable))
    return cap


def _price_cap(resource_type: str, props: Mapping[str, Any], number: _Numbers) -> PriceCap | None:
    spot = spot_market(resource_type, props)
    if resource_type == rt.AWS_FLEET:
        caps = [
            number(prop_at(override, "maxPrice"), "maxPrice")
            for config in as_list(props.get("launchTemplateConfigs"))
            for override in as_list(prop_at(config, "overrides"))
        ]
        options = props.get("spotOptions" if spot else "onDemandOptions")
        total = number(prop_at(options, "maxTotalPrice"), "maxTotalPrice")
        count = number(
            prop_at(props, "targetCapacitySpecification", "totalTargetCapacity"),
            "totalTargetCapacity",
        )
        known = [c for c in caps if c is not None]
        per_instance = max(known) if known and None not in caps else None
        if per_instance is None and total is not None and count:
            per_instance = total / count
        if total is None and per_instance is not None and count:
            total = per_instance * count
        return PriceCap(per_instance, total, uncapped=spot and per_instance is None)
    if resource_type in (rt.AWS_LAUNCH_TEMPLATE, rt.AWS_INSTANCE):
        if not spot:
            return None
        cap = number(prop_at(props, "instanceMarketOptions", "spotOptions", "maxPrice"), "maxPrice")
        return PriceCap(cap, cap, uncapped=cap is None)
    if resource_type == rt.AWS_SPOT_INSTANCE_REQUEST:
        cap = number(props.get("spotPrice"), "spotPrice")
        return PriceCap(cap, cap, uncapped=cap is None)
    if resource_type == rt.AWS_SPOT_FLEET_REQUEST:
        cap = number(props.get("spotPrice"), "spotPrice")
        count = number(props.get("targetCapacity"), "targetCapacity")
        return PriceCap(
            cap, cap * count if cap is not None and count else None, uncapped=cap is None
        )
    if resource_type == rt.AWS_AUTOSCALING_GROUP:
        if not spot:
            return None
        cap = number(
            prop_at(props, "mixedInstancesPolicy", "instancesDistribution", "spotMaxPrice"),
            "spotMaxPrice",
        )
        count = number(props.get("maxSize"), "maxSize")
        return PriceCap(
            cap, cap * count if cap is not None and count else None, uncapped=cap is None
        )
    if resource_type in (rt.AZURE_VMSS, rt.AZURE_VM):
        if not spot:
            return None
        profile = props.get("virtualMachineProfile") if resource_type == rt.AZURE_VMSS else props
        cap = number(prop_at(profile, "billingProfile", "maxPrice"), "billingProfile.maxPrice")
        if cap is not None and cap < 0:  # -1: pay up to the pay-as-you-go price
            cap = None
        count = (
            number(prop_at(props, "sku", "capacity"), "sku.capacity")
            if resource_type == rt.AZURE_VMSS
            else 1.0
        )
        return PriceCap(
            cap, cap * count if cap is not None and count else None, uncapped=cap is None
        )
    if resource_type == rt.LOCAL_PROCESS:
        cap = number(props.get("max_price_per_hour"), "max_price_per_hour")
        return PriceCap(cap, cap) if cap is not None else None
    if resource_type in rt.GCP_INSTANCE_LIKE:
        # GCP Spot VMs have no bid; the group's cap is only visible if the component records it.
        cap = number(
            prop_at(props, "metadata", rt.MAX_PRICE_METADATA_KEY), rt.MAX_PRICE_METADATA_KEY
        )
        return PriceCap(cap, None) if cap is not None else None
    return None


def budget_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """A GPU group's declared price cap stays within the configured budget (USD per hour)."""
    read = _Numbers()
    budget = read(settings.get("max_price_per_hour"), "policy config max_price_per_hour")
    total_budget = read(
        settings.get("max_total_price_per_hour"), "policy config max_total_price_per_hour"
    )
    if budget is None and total_budget is None and not read.unreadable:
        return []
    cap = price_cap(resource_type, props)
    if cap is None:
        return []
    unreadable = read.unreadable + list(cap.unreadable)
    if unreadable:
        return [
            f"cannot read {what}, so it is refused — write the price in USD per instance-hour "
            "and counts as whole numbers"
            for what in unreadable
        ]
    if cap.uncapped:
        return [
            "spot request sets no max price, so it may pay up to the on-demand price — set "
            "spotroute:maxPrice within the budget"
        ]
    problems = []
    if budget is not None and cap.per_instance is not None and cap.per_instance > budget + 1e-9:
        problems.append(
            f"max price {money(cap.per_instance)}/instance-hour exceeds the budget "
            f"{money(budget)} (max_price_per_hour) — lower spotroute:maxPrice or pick a "
            "cheaper placement"
        )
    if total_budget is not None and cap.total is not None and cap.total > total_budget + 1e-9:
        problems.append(
            f"group may spend {money(cap.total)}/hour, over the budget {money(total_budget)} "
            "(max_total_price_per_hour) — use fewer nodes or a lower spotroute:maxPrice"
        )
    return problems
