"""`route schema`: the JSON Schema describes job.yaml as users write it, in sync with the loader.

jsonschema is not a dependency, so a small validator below covers the keywords the schema uses
(and fails loudly on any other keyword, so a new one cannot be silently ignored).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.errors import BadInput
from router.core.job.model import Job
from router.core.job.problems import parse_job
from router.core.job.schema import job_schema

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCHEMA = job_schema()

_ANNOTATIONS = {"title", "description", "default", "examples", "format", "$schema", "$id", "$defs"}


def schema_errors(value: Any, schema: dict[str, Any], at: str = "$") -> list[str]:
    """Where `value` breaks `schema` (draft 2020-12 subset); empty when it conforms."""
    errors: list[str] = []
    unknown = set(schema) - _ANNOTATIONS - set(_CHECKS)
    assert not unknown, f"the test validator does not know {unknown}"
    for keyword, check in _CHECKS.items():
        if keyword in schema:
            errors += check(value, schema, at)
    return errors


def _type_ok(value: Any, name: str) -> bool:
    return {
        "string": isinstance(value, str),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "null": value is None,
    }[name]


def _ref(value: Any, schema: dict[str, Any], at: str) -> list[str]:
    name = schema["$ref"].removeprefix("#/$defs/")
    return schema_errors(value, SCHEMA["$defs"][name], at)


def _properties(value: Any, schema: dict[str, Any], at: str) -> list[str]:
    if not isinstance(value, dict):
        return []
    errors = []
    for key, item in value.items():
        if key in schema["properties"]:
            errors += schema_errors(item, schema["properties"][key], f"{at}.{key}")
        elif schema.get("additionalProperties") is False:
            errors.append(f"{at}: unknown {key}")
        elif isinstance(schema.get("additionalProperties"), dict):
            errors += schema_errors(item, schema["additionalProperties"], f"{at}.{key}")
    return errors


def _additional(value: Any, schema: dict[str, Any], at: str) -> list[str]:
    if "properties" in schema or not isinstance(value, dict):
        return []  # handled with the properties
    extra = schema["additionalProperties"]
    return [e for k, v in value.items() for e in schema_errors(v, extra, f"{at}.{k}")]


def _if_then(value: Any, schema: dict[str, Any], at: str) -> list[str]:
    if schema_errors(value, schema["if"], at):
        return []
    return schema_errors(value, schema.get("then", {}), at)


_CHECKS: dict[str, Any] = {
    "$ref": _ref,
    "type": lambda v, s, at: [] if _type_ok(v, s["type"]) else [f"{at}: not {s['type']}"],
    "enum": lambda v, s, at: [] if v in s["enum"] else [f"{at}: {v!r} not in enum"],
    "const": lambda v, s, at: [] if v == s["const"] else [f"{at}: not {s['const']!r}"],
    "pattern": lambda v, s, at: (
        []
        if not isinstance(v, str) or re.search(s["pattern"], v)
        else [f"{at}: {v!r} does not match"]
    ),
    "minimum": lambda v, s, at: [] if not _type_ok(v, "number") or v >= s["minimum"] else [at],
    "maximum": lambda v, s, at: [] if not _type_ok(v, "number") or v <= s["maximum"] else [at],
    "exclusiveMinimum": lambda v, s, at: (
        [] if not _type_ok(v, "number") or v > s["exclusiveMinimum"] else [at]
    ),
    "required": lambda v, s, at: [
        f"{at}: missing {k}" for k in s["required"] if isinstance(v, dict) and k not in v
    ],
    "properties": _properties,
    "additionalProperties": _additional,
    "items": lambda v, s, at: (
        [e for i, x in enumerate(v) for e in schema_errors(x, s["items"], f"{at}[{i}]")]
        if isinstance(v, list)
        else []
    ),
    "anyOf": lambda v, s, at: (
        []
        if any(not schema_errors(v, option, at) for option in s["anyOf"])
        else [f"{at}: matches no alternative"]
    ),
    "if": _if_then,
    "then": lambda v, s, at: [],  # checked with "if"
}


def example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    return data


def test_schema_is_draft_2020_12_json() -> None:
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert json.loads(json.dumps(SCHEMA)) == SCHEMA


@pytest.mark.parametrize("name", ["llm-finetune.yaml", "quickstart.yaml"])
def test_examples_conform_to_the_schema(name: str) -> None:
    assert schema_errors(example(name), SCHEMA) == []


def test_bad_job_example_breaks_the_schema_too() -> None:
    assert schema_errors(example("bad-job.yaml"), SCHEMA) != []


def test_schema_uses_the_names_users_write() -> None:
    checkpoint = SCHEMA["$defs"]["Checkpoint"]["properties"]
    migration = SCHEMA["$defs"]["Migration"]["properties"]
    assert {"interval", "restore_overhead"} <= set(checkpoint)
    assert "cooldown" in migration
    assert not any(key.endswith("_s") for key in [*checkpoint, *migration])
    assert "cooldown_s" not in json.dumps(SCHEMA)


def test_every_section_of_the_model_is_in_the_schema_with_the_same_keys() -> None:
    sections = {
        "Job": (Job, SCHEMA["properties"]),
        **{
            name: (model, SCHEMA["$defs"][name]["properties"])
            for name, model in _section_models(Job).items()
        },
    }
    for name, (model, properties) in sections.items():
        user_keys = {f.validation_alias or key for key, f in model.model_fields.items()}
        assert user_keys == set(properties), name


def _section_models(model: Any) -> dict[str, Any]:
    from pydantic import BaseModel

    found: dict[str, Any] = {}

    def visit(annotation: Any) -> None:
        is_model = isinstance(annotation, type) and issubclass(annotation, BaseModel)
        if is_model and annotation.__name__ not in found:
            found[annotation.__name__] = annotation
            for f in annotation.model_fields.values():
                visit(f.annotation)
        for arg in getattr(annotation, "__args__", ()):
            visit(arg)

    for f in model.model_fields.values():
        visit(f.annotation)
    return found


@pytest.mark.parametrize(
    "change",
    [
        {"extra_field": 1},
        {"market": "spott"},
        {"name": "Bad_Name"},
        {"duration_hours": True},
        {"checkpoint": {"interval": "2 hours"}},
        {"checkpoint": {"interval": 0}},
        {"resources": {"accelerators": 8}},
        {"resources": {"accelerators": "T4", "clouds": ["azrue"]}},
        {"market": "spot", "checkpoint": None},
        {"data": {"url": "s3://b/x", "region": "r1", "size_gb": 1, "access": "strem"}},
        {"data": [{"url": "s3://b/x", "region": "r1", "size_gb": 1, "passes": 0}]},
        {"data": [{"url": "s3://b/x", "region": "r1", "size_gb": 1, "replicas": [{"url": "x"}]}]},
        {"data": [{"url": "s3://b/x", "region": "r1", "size_gb": 1, "copy_gbps": 0}]},
    ],
)
def test_schema_rejects_what_the_loader_rejects(change: dict[str, Any]) -> None:
    data = {**example("quickstart.yaml"), **change}
    with pytest.raises(BadInput):
        parse_job(data, "job.yaml")
    assert schema_errors(data, SCHEMA) != []


durations = st.sampled_from(["30m", "2h", "1h30m", "1d", "90s", "90", 1800, 2.5])
accelerator = st.sampled_from(["A100-80GB:8", "H100-80GB", "T4:1"]) | st.fixed_dictionaries(
    {"gpu": st.sampled_from(["L4", "A10G"])}, optional={"count": st.integers(1, 64)}
)
valid_variations = st.fixed_dictionaries(
    {},
    optional={
        "accelerators": accelerator | st.lists(accelerator, min_size=1, max_size=3),
        "regions": st.lists(st.sampled_from(["us-*", "eu*"]), max_size=2)
        | st.fixed_dictionaries({}, optional={"allow": st.just(["us-*"]), "deny": st.just("x")}),
        "clouds": st.sampled_from(["aws", ["aws", "gcp"], ["local"]]),
        "interval": durations,
        "restore_overhead": durations,
        "cooldown": durations,
        "command": st.sampled_from(["python train.py --lr 3e-4", ["python", "train.py", 3]]),
        "labels": st.sampled_from([{"team": "ml"}, {"cost-center": 4711}]),
        "data_url": st.sampled_from(["s3://b/x", "gs://b/x", "file:///d", "az://c/x"]),
        "data_list": st.booleans(),
        "data_how": st.fixed_dictionaries(
            {},
            optional={
                "access": st.sampled_from(["stream", "copy", "auto"]),
                "passes": st.sampled_from([1, 3, 0.5]),
                "copy_gbps": st.sampled_from([1, 2.5]),
                "start_while_copying": st.booleans(),
                "replicas": st.sampled_from(
                    [
                        [],
                        [{"url": "gs://m/x", "region": "us-central1"}],
                        {"url": "s3://m", "region": "r"},
                    ]
                ),
            },
        ),
    },
)


@settings(max_examples=150, deadline=None)
@given(valid_variations)
def test_every_shape_the_loader_accepts_is_valid_in_the_schema(v: dict[str, Any]) -> None:
    data: dict[str, Any] = {
        "name": "variant",
        "resources": {"accelerators": v.get("accelerators", "T4")},
        "duration_hours": 1,
        "checkpoint": {"interval": v.get("interval", "30m")},
        "migration": {},
        "run": {"command": v.get("command", ["python"])},
    }
    for key in ("regions", "clouds"):
        if key in v:
            data["resources"][key] = v[key]
    if "restore_overhead" in v:
        data["checkpoint"]["restore_overhead"] = v["restore_overhead"]
    if "cooldown" in v:
        data["migration"]["cooldown"] = v["cooldown"]
    if "labels" in v:
        data["labels"] = v["labels"]
    if "data_url" in v:
        one = {"url": v["data_url"], "region": "r1", "size_gb": 1, **v.get("data_how", {})}
        data["data"] = [one, {**one, "url": "gs://second/x"}] if v.get("data_list") else one
    parse_job(data, "job.yaml")
    assert schema_errors(data, SCHEMA) == []
