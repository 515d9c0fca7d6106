"""spot-requires-checkpointing: spot capacity only for resources marked as checkpointing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.rules import resource_types as rt
from policies.rules.labels import (
    label_maps,
)
from policies.rules.model import (
    UNKNOWN,
    Settings,
    as_number,
    cannot_read,
    is_true,
    present,
    prop_at,
)

# --- spot-requires-checkpointing -----------------------------------------------------------------


def unreadable_market(resource_type: str, props: Mapping[str, Any]) -> tuple[str, Any] | None:
    """(field, value) of a market setting given but not a number: `spot_market` reads it as
    spot (fails closed), and the spot rule names it."""
    where: tuple[str, ...]
    if resource_type == rt.AWS_FLEET:
        where, name = ("targetCapacitySpecification", "spotTargetCapacity"), "spotTargetCapacity"
    elif resource_type == rt.AWS_AUTOSCALING_GROUP:
        name = "onDemandPercentageAboveBaseCapacity"
        where = ("mixedInstancesPolicy", "instancesDistribution", name)
    else:
        return None
    value = prop_at(props, *where)
    if present(value) and as_number(value) is None:
        return name, value
    return None


def spot_market(resource_type: str, props: Mapping[str, Any]) -> bool:
    """True when this resource requests spot (or preemptible) capacity; a market setting it
    cannot read counts as spot (the stricter rules apply)."""
    if resource_type in (rt.AWS_SPOT_INSTANCE_REQUEST, rt.AWS_SPOT_FLEET_REQUEST):
        return True
    if unreadable_market(resource_type, props) is not None:
        return True
    if resource_type == rt.AWS_FLEET:
        spec = props.get("targetCapacitySpecification")
        default = str(prop_at(spec, "defaultTargetCapacityType") or "").lower()
        return default == "spot" or ((as_number(prop_at(spec, "spotTargetCapacity")) or 0) > 0)
    if resource_type in (rt.AWS_LAUNCH_TEMPLATE, rt.AWS_INSTANCE):
        return bool(prop_at(props, "instanceMarketOptions", "marketType") == "spot")
    if resource_type == rt.AWS_AUTOSCALING_GROUP:
        distribution = prop_at(props, "mixedInstancesPolicy", "instancesDistribution")
        if not isinstance(distribution, Mapping):
            return False
        on_demand_pct = as_number(distribution.get("onDemandPercentageAboveBaseCapacity"))
        return on_demand_pct is not None and on_demand_pct < 100
    if resource_type == rt.LOCAL_PROCESS:
        return props.get("market") == "spot"
    if resource_type in rt.GCP_INSTANCE_LIKE:
        scheduling = props.get("scheduling")
        return str(prop_at(scheduling, "provisioningModel") or "").upper() == "SPOT" or is_true(
            prop_at(scheduling, "preemptible")
        )
    if resource_type == rt.AZURE_VMSS:
        return str(prop_at(props, "virtualMachineProfile", "priority") or "").lower() in (
            "spot",
            "low",
        )
    if resource_type == rt.AZURE_VM:
        return str(props.get("priority") or "").lower() in ("spot", "low")
    return False


def spot_checkpointing_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Spot capacity only for jobs that declare checkpointing (the marker label on the group)."""
    if not spot_market(resource_type, props):
        return []
    marker = str(settings.get("marker_label", "spotroute-checkpointing"))
    maps = label_maps(resource_type, props) or [("tags", props.get("tags"))]
    for _, labels in maps:
        if labels is UNKNOWN:
            return []
        if isinstance(labels, Mapping) and is_true(labels.get(marker)):
            return []
    unread = unreadable_market(resource_type, props)
    if unread is not None:
        return [
            cannot_read(
                unread[0],
                unread[1],
                f"write a number, or declare checkpointing (label {marker}=true) as spot needs",
            )
        ]
    return [
        f"requests spot capacity but does not declare checkpointing (label {marker}=true) — set "
        "spotroute:checkpointing: true (job.yaml checkpoint:) or use market on-demand"
    ]
