"""required-labels: every taggable resource carries the required labels/tags."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.rules.model import (
    UNKNOWN,
    Settings,
    as_list,
    as_strings,
    cloud_of,
    prop_at,
)
from policies.rules.resource_types import (
    AWS_LAUNCH_TEMPLATE,
    TAGGABLE_TYPES,
)

# --- required-labels -----------------------------------------------------------------------------


def label_maps(resource_type: str, props: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(where, labels) pairs a taggable resource must label; AWS tags merge `tags` and `tagsAll`."""
    prop = TAGGABLE_TYPES.get(resource_type)
    if prop is None:
        return []
    labels = props.get(prop)
    if prop == "tags" and cloud_of(resource_type) == "aws":
        every = props.get("tagsAll")
        if isinstance(every, Mapping):
            labels = {**every, **(labels if isinstance(labels, Mapping) else {})}
    maps = [(prop, labels)]
    if resource_type == AWS_LAUNCH_TEMPLATE:
        for spec in as_list(props.get("tagSpecifications")):
            maps.append(
                (f"tagSpecifications[{prop_at(spec, 'resourceType')}]", prop_at(spec, "tags"))
            )
    return maps


def required_label_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Every taggable resource carries the required labels (spotroute-job, team, managed-by)."""
    required = as_strings(settings.get("labels"))
    problems = []
    for where, labels in label_maps(resource_type, props):
        if labels is UNKNOWN:
            continue
        present = labels if isinstance(labels, Mapping) else {}
        missing = [k for k in required if not isinstance(present.get(k), str) or not present.get(k)]
        if missing:
            problems.append(
                f"{where} lacks {', '.join(missing)} — label it with standard_labels() and set "
                "team in spotroute:labels"
            )
    if resource_type == AWS_LAUNCH_TEMPLATE:
        kinds = {prop_at(spec, "resourceType") for spec in as_list(props.get("tagSpecifications"))}
        if UNKNOWN not in kinds and "instance" not in kinds:
            problems.append(
                "tagSpecifications has no 'instance' entry, so instances start untagged — add one"
            )
    return problems
