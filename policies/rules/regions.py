"""regions-allowed: providers and resources only in the allowed regions."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from policies.rules.model import (
    Settings,
    as_strings,
    cloud_of,
)
from policies.rules.resource_types import (
    AWS_PROVIDER,
    AZURE_PROVIDER,
    GCP_PROVIDER,
)

# --- regions-allowed -----------------------------------------------------------------------------


def _zone_region(zone: str) -> str:
    """us-central1-a → us-central1 (GCP zones are the region plus one dash-separated suffix)."""
    return zone.rsplit("-", 1)[0] if zone.count("-") >= 2 else zone


def resource_regions(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Regions a resource (or a provider) places things in, lowercase; [] if it names none."""
    cloud = cloud_of(resource_type)
    found: list[Any] = []
    if resource_type in (AWS_PROVIDER, GCP_PROVIDER) or cloud in ("aws", "gcp"):
        found.append(props.get("region"))
    if resource_type == GCP_PROVIDER or cloud == "gcp":
        zone = props.get("zone")
        found.append(_zone_region(zone) if isinstance(zone, str) else None)
    if resource_type == AZURE_PROVIDER or cloud in ("gcp", "azure-native"):
        found.append(props.get("location"))
    regions = []
    for value in found:
        if isinstance(value, str) and value.strip() and value.lower() != "global":
            region = value.strip().lower()
            if region not in regions:
                regions.append(region)
    return regions


def region_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Resources only in regions the org allows (policy config allowed_regions, globs)."""
    allowed = [g.lower() for g in as_strings(settings.get("allowed_regions"))]
    if not allowed:
        return []
    return [
        f"region {region} is not allowed (allowed_regions: {', '.join(allowed)}) — plan the job "
        "into an allowed region or add this one to the policy config"
        for region in resource_regions(resource_type, props)
        if not any(fnmatch.fnmatchcase(region, glob) for glob in allowed)
    ]
