"""The JSON Schema of job.yaml as users write it (`route schema`)."""

from __future__ import annotations

from typing import Any

from router.core.job.model import Job

# ---------------------------------------------------------------------------------------------
# JSON Schema


def job_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of job.yaml as users write it (interval, cooldown, ...)."""
    schema = Job.model_json_schema(by_alias=True, mode="validation")
    _tidy(schema)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "spotroute job",
        "description": "A GPU training job for `route plan` and `route deploy`; docs/job-spec.md",
        **{k: v for k, v in schema.items() if k not in ("title", "description")},
        # The one cross-field rule parse_job enforces.
        "if": {"properties": {"market": {"const": "spot"}}, "required": ["market"]},
        "then": {"required": ["checkpoint"], "properties": {"checkpoint": {"type": "object"}}},
    }


def _tidy(node: object) -> None:
    """Drop property titles (they repeat the key) and section defaults (pydantic writes them
    with Python field names, e.g. cooldown_s; each field's own default is in its section)."""
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict):
            for prop in props.values():
                if isinstance(prop, dict):
                    prop.pop("title", None)
                    if isinstance(prop.get("default"), dict):
                        del prop["default"]
        for value in node.values():
            _tidy(value)
    elif isinstance(node, list):
        for value in node:
            _tidy(value)
