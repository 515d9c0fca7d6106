"""Every stack the components build, checked against the providers' own schemas, not mocks.

Mocks accept any property; these tests hold each captured resource (every cloud × market × bucket
× remote access) against tests/components/provider_facts.json, which scripts/provider_facts.py
generates from the installed provider SDKs: unknown properties, missing required ones and enum
values outside the schema fail. Then each cloud's stack is built twice, before and after the
changes a later `route deploy` makes (job, node count, instance types, price), and every property
that changes must be one the provider and the cloud apply in place, or one the component
replaces (provider_update_facts.csv says which, with the source it was checked against).
"""

from __future__ import annotations

import csv
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from harness import CapturedResource, CapturedStack, run_program
from stack_matrix import all_stacks
from test_policy_pack_over_stacks import CLOUDS, placement, stack_config

HERE = Path(__file__).parent
FACTS = json.loads((HERE / "provider_facts.json").read_text())
UPDATE_FACTS = HERE / "provider_update_facts.csv"
# What a placement's inputs may carry that is no provider property: Pulumi's own.
ENGINE_KEYS = {"__defaults"}
# Behaviours a changed property may have (provider_update_facts.csv, column `behaviour`).
IN_PLACE_OK = {"update", "replace"}
NEEDS_REPLACE = {"update-refused", "update-not-applied"}


@cache
def stacks() -> tuple[CapturedStack, ...]:
    return tuple(all_stacks())


def resources() -> list[CapturedResource]:
    return [r for stack in stacks() for r in stack.custom_resources()]


def problems(value: Any, schema: dict[str, Any], where: str) -> list[str]:
    """Schema problems of one input object (recursing into nested input types)."""
    if not isinstance(value, dict):
        return []
    found = []
    for name, fact in schema.items():
        if fact["required"] and name not in value:
            found.append(f"{where}: required {name} is missing")
    for name, item in value.items():
        if name in ENGINE_KEYS:
            continue
        fact = schema.get(name)
        if fact is None:
            found.append(f"{where}: {name} is not a property the provider knows")
            continue
        for element in item if isinstance(item, list) else [item]:
            if "enum" in fact and isinstance(element, str) and element not in fact["enum"]:
                found.append(f"{where}.{name}: {element!r} is not one of {fact['enum']}")
            if "type" in fact and isinstance(element, dict):
                nested = FACTS["types"][fact["type"]]
                found += problems(element, nested, f"{where}.{name}")
    return found


def test_every_resource_type_the_components_create_has_schema_facts() -> None:
    missing = sorted({r.type for r in resources()} - set(FACTS["resources"]))

    assert missing == [], "run scripts/provider_facts.py to describe the new types"


def test_every_property_is_known_required_ones_are_set_and_enums_are_valid() -> None:
    found = sorted(
        {
            problem
            for r in resources()
            for problem in problems(r.inputs, FACTS["resources"][r.type], f"{r.type} {r.name}")
        }
    )

    assert found == []


def test_the_schema_check_catches_what_mocks_let_through() -> None:
    fleet = FACTS["resources"]["aws:ec2/fleet:Fleet"]
    bad = {"type": "one-shot", "launchTemplateConfig": [], "targetCapacitySpecification": {}}

    found = problems(bad, fleet, "fleet")

    assert any("'one-shot' is not one of" in p for p in found)
    assert any("launchTemplateConfig is not a property" in p for p in found)
    assert any("required launchTemplateConfigs is missing" in p for p in found)


# --- what a later deploy changes --------------------------------------------------------------

# The changes `route deploy` makes to a running placement, per cloud (stack config keys).
CHANGES: dict[str, dict[str, Any]] = {
    "job": {"job": {"image": "ghcr.io/acme/trainer:1.5", "command": ["python", "train.py"]}},
    "nodes": {"nodeCount": 4},
    "price": {"maxPrice": 18.0},
}
TYPES_CHANGE = {
    "aws": {"instanceTypes": ["p4d.24xlarge"]},
    "gcp": {"instanceTypes": ["a2-ultragpu-4g"], "gpuCount": 4},
    "azure": {"instanceTypes": ["Standard_ND96asr_v4"]},
}


@cache
def update_facts() -> dict[tuple[str, str], tuple[str, str]]:
    """(type, property) → (behaviour, source) from provider_update_facts.csv."""
    with UPDATE_FACTS.open() as rows:
        return {
            (row["type"], row["property"]): (row["behaviour"], row["source"])
            for row in csv.DictReader(line for line in rows if not line.startswith("#"))
        }


def changed_properties(before: CapturedStack, after: CapturedStack) -> list[tuple[str, str, str]]:
    """(type, name, property) of every top-level input that differs between two runs."""
    old = {r.name: r for r in before.custom_resources()}
    changed = []
    for r in after.custom_resources():
        if r.name not in old:
            continue
        for key in sorted(set(r.inputs) | set(old[r.name].inputs)):
            if key not in ENGINE_KEYS and r.inputs.get(key) != old[r.name].inputs.get(key):
                changed.append((r.type, r.name, key))
    return changed


def redeploy_cases() -> list[Any]:
    cases = []
    for cloud in ("aws", "gcp", "azure"):
        for change, values in {**CHANGES, "types": TYPES_CHANGE[cloud]}.items():
            cases.append(pytest.param(cloud, values, id=f"{cloud}-{change}"))
    return cases


def run(cloud: str, **changes: Any) -> CapturedStack:
    """The spot cell of `cloud` with `changes` (a redeploy never changes the market)."""
    config = {**stack_config(cloud, "spot", "new-bucket", "no-ssh"), **changes}
    return run_program(config, **CLOUDS[cloud].get("mocks", {}))


@pytest.mark.parametrize(("cloud", "changes"), redeploy_cases())
def test_every_property_a_redeploy_changes_is_applied_in_place_or_replaced(
    cloud: str, changes: dict[str, Any]
) -> None:
    before = placement(cloud, "spot", "new-bucket", "no-ssh")
    after = run(cloud, **changes)
    replaced = {r.name: set(r.replace_on_changes) for r in after.custom_resources()}
    facts = update_facts()

    unknown = [c for c in changed_properties(before, after) if (c[0], c[2]) not in facts]
    assert unknown == [], "add the provider's update behaviour to provider_update_facts.csv"
    unsafe = [
        f"{name}.{prop}: {facts[(type_, prop)][0]} ({facts[(type_, prop)][1]})"
        for type_, name, prop in changed_properties(before, after)
        if facts[(type_, prop)][0] in NEEDS_REPLACE
        and prop not in replaced[name]
        and "*" not in replaced[name]
    ]
    assert unsafe == []


def test_update_facts_name_a_known_behaviour_and_a_source() -> None:
    for (type_, prop), (behaviour, source) in update_facts().items():
        assert behaviour in IN_PLACE_OK | NEEDS_REPLACE, (type_, prop)
        assert source.startswith("http"), (type_, prop)
        assert prop in FACTS["resources"][type_], (type_, prop)
