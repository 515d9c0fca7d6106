"""Already-parsed job.yaml data → a Job, or every problem as one line naming field and fix."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)

from router.core.errors import BadInput
from router.core.job.credentials import credential_reason
from router.core.job.model import (
    Job,
)
from router.core.user_values import kind_of, show_value

_MAX_NODES = 20_000
_MAX_DEPTH = 64


# ---------------------------------------------------------------------------------------------
# loading job.yaml: every problem becomes one line "<file>: <field.path>: <problem> — <fix>"


@dataclass(frozen=True, slots=True)
class _Problem:
    path: tuple[str | int, ...]  # as the user wrote it: mapping keys and list indices
    text: str  # "problem — fix"
    missing: bool = False  # a required field is absent
    meant: str | None = None  # an unknown key's likely intended sibling field


def parse_job(data: object, source: str) -> Job:
    """Validate already-parsed job.yaml data; raises BadInput naming `source` and the field."""
    job, problems = check_data(data, source)
    if job is None:
        raise BadInput(problems[0])
    return job


def secret_values(job: Job, environ: Mapping[str, str], source: str) -> dict[str, str]:
    """The job's secret env values: run.env's where given, else from `environ` (deploy's).

    Raises BadInput naming the first secret that has no value anywhere, and the fix.
    """
    values: dict[str, str] = {}
    for name in job.run.secrets:
        value = job.run.env.get(name) or environ.get(name, "")
        if not value:
            state = "is empty" if name in environ else "is not set"
            raise BadInput(
                one_line(
                    source,
                    "run.secrets",
                    f"{name} has no value in the job file and {state} in the environment"
                    f" — export {name}=... before `route deploy` (it is stored as a secret),"
                    " or give it a value in run.env",
                )
            )
        values[name] = value
    return values


def clear_credential_warnings(job: Job, source: str) -> list[str]:
    """One line per plain run.env entry that looks like a credential, by its name or its value
    (router.core.job.credentials): it is stored in clear. The value is never shown."""
    lines = []
    for name, value in job.run.plain_env.items():
        why = credential_reason(name, value)
        if why is not None:
            lines.append(
                one_line(
                    source,
                    f"run.env.{name}",
                    f"looks like a credential ({why}) but is stored in clear in the stack file"
                    f" and the state — list it under run.secrets (e.g. secrets: [{name}]) to"
                    " store it as a secret",
                )
            )
    return lines


def one_line(source: str, where: str, text: str) -> str:
    """One line, whatever the file name or input contains (messages are never multi-line)."""
    line = f"{source}: {where}: {text}" if where else f"{source}: {text}"
    return " ".join(line.splitlines())


def _nul_problem(value: object, path: tuple[str, ...]) -> str | None:
    """The field path of the first string (key or value) holding a NUL character."""
    if isinstance(value, str):
        return ".".join(path) or "(top level)" if "\x00" in value else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = (*path, str(key).replace("\x00", "\\x00"))
            if isinstance(key, str) and "\x00" in key:
                return ".".join(here)
            found = _nul_problem(item, here)
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _nul_problem(item, (*path[:-1], f"{path[-1]}[{i}]") if path else (f"[{i}]",))
            if found:
                return found
    return None


def check_data(data: object, source: str) -> tuple[Job | None, list[str]]:
    if data is None:
        return None, [
            one_line(
                source,
                "",
                "the job is empty — it needs at least name, resources, duration_hours and run;"
                " see examples/quickstart.yaml",
            )
        ]
    if not isinstance(data, Mapping):
        return None, [
            one_line(
                source,
                "",
                f"top level is {kind_of(data)}, expected a mapping of fields"
                " — start with `name: my-job` (see examples/quickstart.yaml)",
            )
        ]
    shape = _shape_problem(data)
    if shape:
        return None, [one_line(source, "", shape)]
    nul = _nul_problem(data, ())
    if nul:
        # The engine and the node's shell cannot carry a NUL: refuse it here, not at deploy.
        return None, [one_line(source, nul, "contains a NUL character (\\x00) — remove it")]
    try:
        job = Job.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as e:
        problems = [_from_pydantic(err, data) for err in e.errors()]
        job = None
    else:
        problems = []
    problems += _cross_field_problems(data)
    if not problems and job is not None:
        return job, []
    # `intervall: 30m` makes `interval` both unknown and missing: the first line says it all.
    meant = {(*p.path[:-1], p.meant) for p in problems if p.meant}
    problems = [p for p in problems if not (p.missing and p.path in meant)]
    # Report in the order the user wrote the fields; missing ones after, in model order.
    written = {str(key): i for i, key in enumerate(data)}
    later = {key: len(written) + i for i, key in enumerate(_user_keys(Job))}

    def position(p: _Problem) -> int:
        if not p.path:
            return -1
        first = str(p.path[0])
        return written.get(first, later.get(first, len(written) + len(later)))

    problems.sort(key=position)
    lines = list(dict.fromkeys(one_line(source, _render_path(p.path), p.text) for p in problems))
    return None, lines


def _cross_field_problems(data: Mapping[Any, Any]) -> list[_Problem]:
    market = data.get("market")
    if (
        isinstance(market, str)
        and market.strip().lower() == "spot"
        and data.get("checkpoint") is None
    ):
        return [
            _Problem(
                ("market",),
                "spot needs checkpoint.interval so the job can resume after interruption"
                " — add checkpoint: {interval: 30m} or use market: on-demand",
            )
        ]
    return []


def _shape_problem(data: object) -> str | None:
    """Refuse inputs too big or deep to be a job (YAML aliases can make a few lines huge)."""
    stack: list[tuple[object, int]] = [(data, 0)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > _MAX_NODES or depth > _MAX_DEPTH:
            return (
                "the job is too large or too deeply nested (or refers to itself through YAML"
                " aliases) — a job file is a few dozen plain fields; see examples/"
            )
        if isinstance(node, Mapping):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list | tuple):
            stack.extend((v, depth + 1) for v in node)
    return None


# --- pydantic errors -> the paths and words the user typed


def _from_pydantic(err: Any, data: Mapping[Any, Any]) -> _Problem:
    loc: tuple[str | int, ...] = tuple(err["loc"])
    ctx: dict[str, Any] = err.get("ctx") or {}
    if err["type"] == "spotroute":
        if "field" in ctx:
            loc = (*loc[:-1], ctx["field"])
        if "key" in ctx:
            loc = (*loc, ctx["key"])
    if loc and loc[-1] == "[key]":  # a map key (labels/env) that is not text
        key = show_value(err.get("input"))
        return _Problem(_user_path(loc[:-2], data)[0], f"key {key} is not text — quote it")
    path, typed, inside = _user_path(loc, data)
    text = _describe(err, loc, None if inside else typed)
    if inside and err["type"] != "spotroute":
        # The error is about a part of a shorthand ("A100-80GB:x"): say which part.
        text = f"{next(s for s in reversed(loc) if isinstance(s, str))}: {text}"
    meant = None
    if err["type"] == "extra_forbidden" and loc:
        model = _model_at(loc[:-1])
        meant = _closest(str(loc[-1]), _user_keys(model) if model else [])
    return _Problem(path, text, missing=err["type"] == "missing", meant=meant)


_ABSENT = object()


def _user_path(
    loc: tuple[str | int, ...], data: object
) -> tuple[tuple[str | int, ...], object, bool]:
    """Follow pydantic's location through what the user wrote, stopping at shorthands.

    "A100-80GB:8" stands for {gpu, count}, a plain list of regions for {allow: [...]}, and a
    single item for a list: an error inside the expansion is reported at the shorthand.
    Returns the path (map keys as text, list indices as ints), the value the user typed
    there, and whether the error is about a part inside a scalar shorthand.
    """
    path: list[str | int] = []
    node: object = data
    for seg in loc:
        if isinstance(node, Mapping):
            if isinstance(seg, int) and seg not in node:
                continue  # one item written where a list may be
            path.append(str(seg))
            node = node.get(seg, _ABSENT)
        elif isinstance(node, list | tuple):
            if not isinstance(seg, int):
                continue  # a list written where a mapping may be (regions: [...] = allow)
            path.append(seg)
            node = node[seg] if 0 <= seg < len(node) else _ABSENT
        elif node is _ABSENT:
            path.append(str(seg))
        else:
            # A scalar shorthand: report the value the user typed, not its expansion.
            return tuple(path), node, isinstance(seg, str)
    return tuple(path), node, False


def _render_path(path: tuple[str | int, ...]) -> str:
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        else:
            out += f".{seg}" if out else seg
    return out


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The section model at a pydantic location (by job.yaml names), if it is one."""
    model: type[BaseModel] = Job
    for seg in loc:
        if isinstance(seg, int):
            continue
        field = next(
            (f for name, f in model.model_fields.items() if (f.validation_alias or name) == seg),
            None,
        )
        if field is None:
            return None
        inner = _section_type(field.annotation)
        if inner is None:
            return None
        model = inner
    return model


def _section_type(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _section_type(arg)
        if found is not None:
            return found
    return None


def _user_keys(model: type[BaseModel]) -> list[str]:
    return [str(f.validation_alias or name) for name, f in model.model_fields.items()]


# The durations of job.yaml, whose bounds are in seconds once read ("1h" → 3600).
_SECONDS_FIELDS = frozenset(
    {"interval", "restore_overhead", "save_time", "cooldown", "spot_wait", "nodes_timeout",
     "restore_timeout"}
)  # fmt: skip
_REQUIRED_EXAMPLES = {
    "name": "name: my-job",
    "resources": "resources: {accelerators: A100-80GB:8}",
    "accelerators": "accelerators: A100-80GB:8",
    "duration_hours": "duration_hours: 24",
    "run": "run: {command: [python, train.py]}",
    "command": "command: [python, train.py]",
    "interval": "interval: 30m",
    "url": "url: s3://bucket/path/",
    "region": "region: us-east-1",
    "size_gb": "size_gb: 100",
    "gpu": "gpu: A100-80GB",
}


def _describe(err: Any, loc: tuple[str | int, ...], typed: object) -> str:
    """'problem — fix' for one pydantic error; `typed` is what the user wrote there."""
    kind: str = err["type"]
    ctx: dict[str, Any] = err.get("ctx") or {}
    value = err.get("input")
    field = next((s for s in reversed(loc) if isinstance(s, str)), "")
    # Show "0s" rather than the 0.0 it became, when a shorthand was converted.
    shown = show_value(typed if isinstance(typed, str) and typed != value else value)
    if kind == "spotroute":
        return str(ctx["text"])
    if kind == "missing":
        example = _REQUIRED_EXAMPLES.get(field, f"{field}: ...")
        return f"required field missing — add {example}"
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        known = _user_keys(model) if model else []
        return f"unknown field {str(loc[-1])!r} — {_did_you_mean(str(loc[-1]), known)}"
    if kind == "invalid_key":
        key = show_value(loc[-1] if loc else value)
        return f"key {key} is not text — field names are words such as name or resources"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return f"{shown} is not one of {', '.join(allowed)} — {_did_you_mean(str(value), allowed)}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        op, bound, fix = {
            "greater_than": ("more than", ctx.get("gt"), "a number above {}"),
            "greater_than_equal": ("at least", ctx.get("ge"), "{} or more"),
            "less_than": ("less than", ctx.get("lt"), "a number below {}"),
            "less_than_equal": ("at most", ctx.get("le"), "{} or less"),
        }[kind]
        bound = _number(bound) + (" s" if field in _SECONDS_FIELDS else "")
        return f"must be {op} {bound}, got {shown} — use {fix.format(bound)}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"expected a whole number, got {shown} — write e.g. 8"
    if kind in ("float_parsing", "float_type") and type(value) is int:  # beyond a float's range
        return f"{shown} is too large for a number — write e.g. 24"
    if kind in ("float_parsing", "float_type"):
        return f"expected a number, got {shown} — write e.g. 24 (no quotes or units)"
    if kind == "finite_number":
        return f"expected a finite number, got {shown} — write e.g. 24"
    if kind in ("string_type", "string_unicode"):
        return f"expected text, got {shown} — write a single value (quote it if needed)"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a mapping of fields, got {shown} — write it as `key: value` lines"
    if kind in ("tuple_type", "list_type", "iterable_type"):
        return f"expected a list, got {shown} — write e.g. [a, b]"
    if kind.startswith(("datetime", "timezone")):
        return f"{shown} is not an ISO 8601 date-time — write e.g. 2026-06-30T18:00:00Z"
    return f"{err['msg']} (got {shown}) — see docs/job-spec.md"


def _closest(word: str, choices: list[str]) -> str | None:
    lowered = {c.lower(): c for c in choices}
    return lowered.get(word.lower()) or next(
        iter(difflib.get_close_matches(word, choices, n=1, cutoff=0.6)), None
    )


def _did_you_mean(word: str, choices: list[str]) -> str:
    match = _closest(word, choices)
    if match:
        return f"did you mean {match!r}?"
    return f"use one of {', '.join(choices)}" if choices else "remove it"


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
