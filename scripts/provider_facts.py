"""Generate tests/components/provider_facts.json: what the installed Pulumi provider SDKs accept.

For every resource type the placement components create (found by running the component test
matrix under mocks), it records from the provider's Python SDK (pulumi-aws, pulumi-gcp,
pulumi-azure-native, which are generated from the providers' schemas): each input property's wire
name, whether it is required, the nested input type it takes, and its enum values (azure-native:
the SDK's Enum classes; aws/gcp: the schema docs' "Valid values: ..." / "Possible values are: ...").
tests/components/test_provider_facts.py checks every stack against this file.

Rerun after upgrading a provider package:
    PYTHONPATH=$PWD .venv/bin/python scripts/provider_facts.py
"""

from __future__ import annotations

import datetime
import enum
import importlib
import importlib.metadata
import inspect
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "components" / "provider_facts.json"
PACKAGES = {"aws": "pulumi_aws", "gcp": "pulumi_gcp", "azure-native": "pulumi_azure_native"}
DISTRIBUTIONS = ("pulumi-aws", "pulumi-gcp", "pulumi-azure-native")
# "Valid values: `a`, `b`." / "Possible values are: `A`, `B`." — a closed list ending the sentence.
_ENUM_DOC = re.compile(
    r"(?:Valid values(?: are)?|Possible values are)\s*:?\s*"
    r"((?:`[^`]+`\s*(?:,|and|or|\s)*)+)\s*(?:\.|$)",
    re.MULTILINE,
)


def resource_class(token: str) -> type:
    """The SDK class of a type token like aws:ec2/fleet:Fleet or azure-native:compute:Vmss."""
    package, module, name = token.split(":")
    module_name = module.split("/")[0]
    root = PACKAGES[package]
    path = root if module_name == "index" else f"{root}.{module_name}"
    cls: type = getattr(importlib.import_module(path), name)
    return cls


def _forward_names(annotation: Any) -> list[str]:
    """Names of ForwardRefs anywhere inside a typing annotation."""
    names: list[str] = []
    if isinstance(annotation, typing.ForwardRef):
        names.append(annotation.__forward_arg__)
    for arg in getattr(annotation, "__args__", ()) or ():
        names += _forward_names(arg)
    return names


def _doc_enum(doc: str) -> list[str]:
    match = _ENUM_DOC.search(" ".join(doc.split()))
    values = re.findall(r"`([^`]+)`", match.group(1)) if match else []
    return [value.strip('"') for value in values]  # some docs quote them: `"NONE"`


def describe_args(cls: type, module: Any, types: dict[str, Any]) -> dict[str, Any]:
    """{wire name: {python, required, type?, enum?}} of an input (Args) class; fills `types`."""
    required = {
        name
        for name, p in inspect.signature(cls.__init__).parameters.items()  # type: ignore[misc]
        if name not in ("self", "__self__")
        and p.default is inspect.Parameter.empty
        and p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    properties: dict[str, Any] = {}
    for python_name, member in vars(cls).items():
        if not isinstance(member, property) or member.fget is None:
            continue
        wire = getattr(member.fget, "_pulumi_name", python_name)
        fact: dict[str, Any] = {"python": python_name, "required": python_name in required}
        annotation = member.fget.__annotations__.get("return")
        enum_values: list[str] = []
        for ref in _forward_names(annotation):
            target = getattr(module, ref, None)
            if isinstance(target, type) and issubclass(target, enum.Enum):
                enum_values += [str(v.value) for v in target]
            elif isinstance(target, type) and ref.endswith("Args") and ref != cls.__name__:
                key = f"{module.__name__.removeprefix('pulumi_')}.{ref}"
                fact["type"] = key
                if key not in types:
                    types[key] = {}  # placeholder against cycles
                    types[key] = describe_args(target, module, types)
        enum_values = enum_values or _doc_enum(member.__doc__ or "")
        if enum_values:
            fact["enum"] = sorted(set(enum_values))
        properties[wire] = fact
    return properties


def facts_for(tokens: list[str]) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    types: dict[str, Any] = {}  # nested input types by "<sdk module>.<Args class>"
    for token in sorted(tokens):
        cls = resource_class(token)
        module = sys.modules[cls.__module__]
        # When a nested input type has the resource's name, the SDK calls the resource's own
        # inputs `<Name>InitArgs` (pulumi codegen).
        args_cls = getattr(module, f"{cls.__name__}InitArgs", None) or getattr(
            module, f"{cls.__name__}Args"
        )
        package = importlib.import_module(cls.__module__.rsplit(".", 1)[0])
        resources[token] = describe_args(args_cls, package, types)
    return {"resources": resources, "types": types}


def component_resource_types() -> list[str]:
    """Every custom resource type the placement program creates across the test matrix."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "components")]
    from stack_matrix import all_stacks  # tests/components/stack_matrix.py

    return sorted({r.type for stack in all_stacks() for r in stack.custom_resources()})


def main() -> None:
    facts = facts_for(component_resource_types())
    document = {
        "generated": datetime.date.today().isoformat(),
        "source": "the installed provider SDKs (generated from each provider's schema)",
        "packages": {d: importlib.metadata.version(d) for d in DISTRIBUTIONS},
        **facts,
    }
    OUT.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(facts['resources'])} resource types")


if __name__ == "__main__":
    main()
