"""The job.yaml model: what a user asks for. Loading never raises anything but BadInput.

The model's field names are the contract inside spotroute (`interval_s`, `cooldown_s`, ...);
job.yaml uses the names people write (`interval: 30m`, `cooldown: 2h`), declared as validation
aliases. `parse_job` / `load_job` / `validate_job_file` read job.yaml; Python code builds
models by field name.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from router.contract.clouds import PUBLIC_CLOUDS, Cloud
from router.core.errors import BadInput
from router.core.gpus import CANONICAL_GPUS, UnknownGpu, canonical_gpu

NAME_PATTERN = r"^[a-z](?:[a-z0-9-]{0,38}[a-z0-9])?$"
RESERVED_NAMES = frozenset({"bootstrap"})  # stack names spotroute uses itself (route bootstrap)
# A plain number, or amounts with units in the order d, h, m, s ("1h30m"); at least one digit.
DURATION_PATTERN = (
    r"^\s*(?:\d+(?:\.\d+)?|(?=\d)(?:\d+(?:\.\d+)?\s*[dD]\s*)?(?:\d+(?:\.\d+)?\s*[hH]\s*)?"
    r"(?:\d+(?:\.\d+)?\s*[mM]\s*)?(?:\d+(?:\.\d+)?\s*[sS])?)\s*$"
)
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([dhms])", re.IGNORECASE)
_SECONDS_PER_UNIT = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_DURATION_EXAMPLES = "write e.g. 30m, 2h, 1h30m, 1d or a number of seconds"
_MAX_FILE_BYTES = 1 << 20
_MAX_NODES = 20_000
_MAX_DEPTH = 64

# What the JSON Schema says a duration may be (validation turns either into seconds).
DurationInput = Annotated[float, Field(ge=0)] | Annotated[str, Field(pattern=DURATION_PATTERN)]
PositiveDurationInput = (
    Annotated[float, Field(gt=0)] | Annotated[str, Field(pattern=DURATION_PATTERN)]
)
GpuSpec = Annotated[str, Field(description="GPU[:count], e.g. A100-80GB:8 (count defaults to 1)")]


# ---------------------------------------------------------------------------------------------
# value parsers (pure; raise ValueError with a "problem — fix" message)


def parse_duration_s(value: object) -> float:
    """Seconds in a job.yaml duration: 90, "90", "90s", "15m", "2h", "1h30m", "1.5h", "1d"."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {_show(value)} — {_DURATION_EXAMPLES}")
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a duration, got {_kind(value)} — {_DURATION_EXAMPLES}")
    text = value.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    if re.fullmatch(DURATION_PATTERN, text):
        return sum(
            float(n) * _SECONDS_PER_UNIT[unit.lower()] for n, unit in _DURATION_PART.findall(text)
        )
    raise ValueError(f"bad duration {_show(value)} — {_DURATION_EXAMPLES}")


def cloud_of_url(url: str) -> str | None:
    """The cloud a storage URL lives in, from its scheme or host; None when it cannot tell."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    by_scheme = {
        "s3": "aws",
        "gs": "gcp",
        "gcs": "gcp",
        "az": "azure",
        "abfs": "azure",
        "abfss": "azure",
        "file": "local",
    }
    if scheme in by_scheme:
        return by_scheme[scheme]
    if scheme in ("https", "http"):
        if host.endswith((".blob.core.windows.net", ".dfs.core.windows.net")):
            return "azure"
        if host == "storage.googleapis.com":
            return "gcp"
        if host.endswith(".amazonaws.com") and "s3" in host.split("."):
            return "aws"
    return None


def suggested_name(name: str) -> str:
    """A valid job name close to `name` ("My_Job 2" -> "my-job-2"), for error messages."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug or not slug[0].isalpha():
        slug = f"job-{slug}".strip("-")
    return slug[:40].rstrip("-")


# ---------------------------------------------------------------------------------------------
# the model


def _problem(text: str, **where: str) -> PydanticCustomError:
    """A validation error whose message is final ("problem — fix").

    `where` may hold `field` (report under this sibling field instead) or `key` (report
    under this map key of the field), so the path names what the user should change.
    """
    return PydanticCustomError("spotroute", "{text}", {"text": text, **where})


def _not_bool(value: object) -> object:
    """YAML reads yes/no/true as booleans, and Python counts them as 1/0: refuse them."""
    if isinstance(value, bool):
        raise _problem(f"expected a number, got {_show(value)} — write a number such as 8")
    return value


def _duration_s(value: object) -> float:
    try:
        return parse_duration_s(value)
    except ValueError as e:
        raise _problem(str(e)) from None


def _text_values(value: object, what: str) -> object:
    """Coerce number values of a map to strings (YAML reads `cost-center: 4711` as a number)."""
    if not isinstance(value, Mapping):
        return value
    out: dict[object, object] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            raise _problem(
                f"{what} {str(key)!r} is {_show(item)}, which YAML reads as a boolean"
                f" — quote it: '{str(item).lower()}'",
                key=str(key),
            )
        out[key] = str(item) if isinstance(item, int | float) else item
    return out


class Strict(BaseModel):
    """Base for every job.yaml section: unknown keys are errors (typos must not pass silently)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        # job.yaml uses the aliases (parse_job passes by_name=False); Python code the names.
        validate_by_alias=True,
        validate_by_name=True,
        allow_inf_nan=False,
    )


class AcceleratorRequest(Strict):
    """One acceptable accelerator shape, e.g. A100-80GB × 8 (parsed from "A100-80GB:8")."""

    gpu: str = Field(
        description="GPU model: " + ", ".join(CANONICAL_GPUS) + " (aliases like h100 work)",
        examples=list(CANONICAL_GPUS),
    )
    count: int = Field(default=1, ge=1, le=64, description="GPUs per instance")

    @field_validator("gpu")
    @classmethod
    def _canonical_gpu(cls, value: str) -> str:
        try:
            return canonical_gpu(value)
        except UnknownGpu as e:
            raise _problem(str(e)) from None

    @field_validator("count", mode="before")
    @classmethod
    def _count_not_bool(cls, value: object) -> object:
        return _not_bool(value)


def _accelerator_item(item: object) -> object:
    """Text "A100-80GB:8" -> {gpu, count}; a malformed count is left for the int check to report."""
    if not isinstance(item, str):
        return item
    gpu, sep, count = item.rpartition(":")
    if not sep:
        return {"gpu": item.strip()}
    count = count.strip()
    return {"gpu": gpu.strip(), "count": int(count) if count.isdigit() else count}


class RegionFilter(Strict):
    """Glob patterns over region names; deny wins over allow. Empty allow = all regions."""

    allow: tuple[str, ...] = Field(default=(), description="region globs, e.g. us-*, europe-*")
    deny: tuple[str, ...] = Field(default=(), description="region globs to exclude")

    @field_validator("allow", "deny", mode="before", json_schema_input_type=str | list[str])
    @classmethod
    def _one_glob(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


class Resources(Strict):
    """What one instance must have, and where it may run."""

    accelerators: tuple[AcceleratorRequest, ...] = Field(
        description="alternatives, any one fits: 'A100-80GB:8', a list of such, or {gpu, count}"
    )
    min_vcpus: int = Field(default=0, ge=0, description="vCPUs per instance, at least")
    min_memory_gb: float = Field(default=0.0, ge=0, description="instance memory in GB, at least")
    clouds: tuple[Cloud, ...] = Field(default=PUBLIC_CLOUDS, description="clouds to consider")
    regions: RegionFilter = Field(
        default=RegionFilter(), description="{allow: [globs], deny: [globs]} or a list (= allow)"
    )

    @field_validator(
        "accelerators",
        mode="before",
        json_schema_input_type=GpuSpec | AcceleratorRequest | list[GpuSpec | AcceleratorRequest],
    )
    @classmethod
    def _accelerator_shorthands(cls, value: object) -> object:
        if isinstance(value, str | Mapping):
            value = [value]
        if isinstance(value, list | tuple):
            if not value:
                raise _problem("no accelerators listed — add e.g. accelerators: A100-80GB:8")
            return [_accelerator_item(item) for item in value]
        return value

    @field_validator("min_vcpus", "min_memory_gb", mode="before")
    @classmethod
    def _numbers_not_bool(cls, value: object) -> object:
        return _not_bool(value)

    @field_validator(
        "clouds",
        mode="before",
        json_schema_input_type=Cloud | list[Cloud],
    )
    @classmethod
    def _cloud_list(cls, value: object) -> object:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, list | tuple):
            if not value:
                raise _problem("no clouds listed — add e.g. clouds: [aws, gcp, azure]")
            return [c.strip().lower() if isinstance(c, str) else c for c in value]
        return value

    @field_validator(
        "regions", mode="before", json_schema_input_type=RegionFilter | list[str] | str
    )
    @classmethod
    def _region_list_means_allow(cls, value: object) -> object:
        if isinstance(value, str):
            return {"allow": [value]}
        if isinstance(value, list | tuple):
            return {"allow": value}
        return value


class Checkpoint(Strict):
    """How the job saves progress; only checkpointed jobs may run on spot capacity."""

    interval_s: float = Field(
        gt=0,
        validation_alias="interval",
        description="how often the job saves a checkpoint: 30m, 1h, or seconds",
    )
    restore_overhead_s: float = Field(
        default=600.0,
        ge=0,
        validation_alias="restore_overhead",
        description="time to restart and load a checkpoint after an interruption: 10m, or seconds",
    )
    url: str = Field(
        default="auto",
        description='"auto" = the stack creates a checkpoint bucket in the placement\'s cloud;'
        " or an existing s3:// gs:// az:// file:// URL",
    )

    @field_validator("interval_s", mode="before", json_schema_input_type=PositiveDurationInput)
    @classmethod
    def _interval(cls, value: object) -> object:
        return _duration_s(value)

    @field_validator("restore_overhead_s", mode="before", json_schema_input_type=DurationInput)
    @classmethod
    def _overhead(cls, value: object) -> object:
        return _duration_s(value)

    @field_validator("url")
    @classmethod
    def _known_storage(cls, value: str) -> str:
        if value != "auto" and cloud_of_url(value) is None:
            raise _problem(
                f"cannot tell which storage {_show(value)} is — use auto or an"
                " s3://, gs://, az://, abfs:// or file:// URL"
            )
        return value


class Data(Strict):
    """The training data's location; moving it to another cloud or region costs egress."""

    url: str = Field(description="where the training data is: s3://, gs://, az://, file://, ...")
    cloud: Cloud | None = Field(
        default=None, validate_default=True, description="inferred from the URL scheme"
    )
    region: str = Field(description="region the data is in, e.g. us-east-1")
    size_gb: float = Field(ge=0, description="data size in GB (priced as egress when moved)")

    @field_validator("size_gb", mode="before")
    @classmethod
    def _size_not_bool(cls, value: object) -> object:
        return _not_bool(value)

    @field_validator("cloud")
    @classmethod
    def _infer_cloud(cls, value: str | None, info: ValidationInfo) -> str | None:
        url = info.data.get("url")
        if not isinstance(url, str):  # url itself is wrong: that is the error to report
            return value
        inferred = cloud_of_url(url)
        if value is None:
            if inferred is None:
                raise _problem(
                    f"cannot tell which cloud {_show(url)} is in — use an s3://, gs://, az://,"
                    " abfs:// or file:// URL, or add data.cloud: aws|gcp|azure|local",
                    field="url",
                )
            return inferred
        if inferred is not None and inferred != value:
            raise _problem(
                f"data.cloud is {value} but {_show(url)} is in {inferred} — fix one of them"
            )
        return value


class Run(Strict):
    """What runs on the instance."""

    image: str = Field(default="", description="container image; empty = run on the host")
    command: tuple[str, ...] = Field(description="a string (split like a shell) or a list")
    env: dict[str, str] = Field(default_factory=dict, description="environment variables")

    @field_validator("command", mode="before", json_schema_input_type=str | list[str | float])
    @classmethod
    def _split_command(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                value = shlex.split(value)
            except ValueError as e:
                raise _problem(
                    f"cannot split the command ({e}) — close the quote or write it as a list"
                ) from None
        if isinstance(value, list | tuple):
            if not value:
                raise _problem("command is empty — write e.g. command: [python, train.py]")
            return [
                str(w) if isinstance(w, int | float) and not isinstance(w, bool) else w
                for w in value
            ]
        return value

    @field_validator("env", mode="before", json_schema_input_type=dict[str, str | float])
    @classmethod
    def _env_text(cls, value: object) -> object:
        return _text_values(value, "env")

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not _ENV_NAME.fullmatch(name):
                raise _problem(
                    f"{name!r} is not a valid environment variable name"
                    " — use letters, digits and '_', not starting with a digit",
                    key=name,
                )
        return value


class Migration(Strict):
    """When a running job may move to a cheaper placement."""

    min_savings_pct: float = Field(
        default=20.0, ge=0, le=100, description="migrate only if it saves at least this % of cost"
    )
    cooldown_s: float = Field(
        default=3600.0,
        ge=0,
        validation_alias="cooldown",
        description="least time between two migrations: 2h, or seconds",
    )

    @field_validator("min_savings_pct", mode="before")
    @classmethod
    def _pct_not_bool(cls, value: object) -> object:
        return _not_bool(value)

    @field_validator("cooldown_s", mode="before", json_schema_input_type=DurationInput)
    @classmethod
    def _cooldown(cls, value: object) -> object:
        return _duration_s(value)


class Job(Strict):
    """A GPU training job: what it needs, what it may cost, and how it runs."""

    name: str = Field(description="stack name: lowercase letters, digits, dashes; 1-40 chars")
    resources: Resources
    market: Literal["spot", "on-demand", "reserved", "auto"] = Field(
        default="auto", description="auto = spot when checkpointed and cheaper, else on-demand"
    )
    max_price_per_hour: float | None = Field(
        default=None, gt=0, description="USD per instance-hour, at most"
    )
    duration_hours: float = Field(gt=0, description="expected run time in hours (or 90m, 2h)")
    deadline: datetime | None = Field(
        default=None, description="ISO 8601 with timezone, e.g. 2026-06-30T18:00:00Z"
    )
    node_count: int = Field(default=1, ge=1, le=64, description="instances")
    checkpoint: Checkpoint | None = Field(
        default=None, description="absent = the job cannot resume: spot is refused"
    )
    data: Data | None = None
    run: Run
    migration: Migration = Migration()
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="tags on every resource, e.g. team, cost-center (GCP label rules)",
    )

    @field_validator(
        "name", mode="before", json_schema_input_type=Annotated[str, Field(pattern=NAME_PATTERN)]
    )
    @classmethod
    def _stack_name(cls, value: object) -> object:
        if isinstance(value, str) and not re.fullmatch(NAME_PATTERN, value):
            raise _problem(
                f"{_show(value)} is not a valid name — use lowercase letters, digits and dashes,"
                f" starting with a letter, at most 40 characters, e.g. {suggested_name(value)!r}"
            )
        if isinstance(value, str) and value in RESERVED_NAMES:
            raise _problem(f"'{value}' is reserved for spotroute's own stack — choose another name")
        return value

    @field_validator("max_price_per_hour", "node_count", mode="before")
    @classmethod
    def _numbers_not_bool(cls, value: object) -> object:
        return _not_bool(value)

    @field_validator("duration_hours", mode="before", json_schema_input_type=PositiveDurationInput)
    @classmethod
    def _hours(cls, value: object) -> object:
        if isinstance(value, str) and re.search(r"[a-zA-Z]", value):
            try:
                return parse_duration_s(value) / 3600.0
            except ValueError:
                raise _problem(
                    f"bad duration {_show(value)} — write hours as a number (24) or e.g. 90m, 2h"
                ) from None
        return _not_bool(value)

    @field_validator("market", mode="before")
    @classmethod
    def _market_lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("deadline", mode="before")
    @classmethod
    def _deadline_has_time(cls, value: object) -> object:
        if isinstance(value, date) and not isinstance(value, datetime):
            raise _problem(
                f"{value.isoformat()} has no time — write e.g. {value.isoformat()}T18:00:00Z"
            )
        return value

    @field_validator("deadline")
    @classmethod
    def _deadline_has_timezone(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.utcoffset() is None:
            raise _problem(
                f"{value.isoformat()} has no timezone — add Z (UTC) or an offset like +02:00"
            )
        return value

    @field_validator("labels", mode="before", json_schema_input_type=dict[str, str | float])
    @classmethod
    def _label_text(cls, value: object) -> object:
        return _text_values(value, "label")

    @field_validator("labels")
    @classmethod
    def _portable_labels(cls, value: dict[str, str]) -> dict[str, str]:
        # The strictest cloud (GCP labels) decides, so a job can move between clouds.
        for key, text in value.items():
            if key.startswith("spotroute"):
                raise _problem(
                    f"label {key!r} is reserved (spotroute sets spotroute-* labels) — rename it",
                    key=key,
                )
            if not _LABEL_KEY.fullmatch(key):
                raise _problem(
                    f"label key {key!r} is not portable — use lowercase letters, digits, '_'"
                    " and '-', starting with a letter, at most 63 characters",
                    key=key,
                )
            if not _LABEL_VALUE.fullmatch(text):
                slug = re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-")[:63]
                raise _problem(
                    f"label value {_show(text)} is not portable — use lowercase letters,"
                    f" digits, '_' and '-', at most 63 characters, e.g. {slug!r}",
                    key=key,
                )
        return value


# ---------------------------------------------------------------------------------------------
# loading job.yaml: every problem becomes one line "<file>: <field.path>: <problem> — <fix>"


@dataclass(frozen=True, slots=True)
class _Problem:
    path: tuple[str | int, ...]  # as the user wrote it: mapping keys and list indices
    text: str  # "problem — fix"
    missing: bool = False  # a required field is absent
    meant: str | None = None  # an unknown key's likely intended sibling field


def load_job(path: str | Path) -> Job:
    """Read and validate a job file; raises BadInput naming the first problem."""
    job, problems = _check_file(path)
    if job is None:
        raise BadInput(problems[0])
    return job


def validate_job_file(path: str | Path) -> list[str]:
    """Every problem in a job file, one line each; an empty list means the job is valid."""
    return _check_file(path)[1]


def parse_job(data: object, source: str) -> Job:
    """Validate already-parsed job.yaml data; raises BadInput naming `source` and the field."""
    job, problems = _check_data(data, source)
    if job is None:
        raise BadInput(problems[0])
    return job


def job_problems(data: object, source: str) -> list[str]:
    """Every problem in already-parsed job.yaml data, one line each (empty = valid)."""
    return _check_data(data, source)[1]


def _line(source: str, where: str, text: str) -> str:
    """One line, whatever the file name or input contains (messages are never multi-line)."""
    line = f"{source}: {where}: {text}" if where else f"{source}: {text}"
    return " ".join(line.splitlines())


def _check_file(path: str | Path) -> tuple[Job | None, list[str]]:
    source = str(path)
    try:
        data = _read_yaml(Path(path), source)
    except _FileProblem as e:
        return None, [_line(source, e.where, e.text)]
    return _check_data(data, source)


def _check_data(data: object, source: str) -> tuple[Job | None, list[str]]:
    if data is None:
        return None, [
            _line(
                source,
                "",
                "the job is empty — it needs at least name, resources, duration_hours and run;"
                " see examples/quickstart.yaml",
            )
        ]
    if not isinstance(data, Mapping):
        return None, [
            _line(
                source,
                "",
                f"top level is {_kind(data)}, expected a mapping of fields"
                " — start with `name: my-job` (see examples/quickstart.yaml)",
            )
        ]
    shape = _shape_problem(data)
    if shape:
        return None, [_line(source, "", shape)]
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
    lines = list(dict.fromkeys(_line(source, _render_path(p.path), p.text) for p in problems))
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
        key = _show(err.get("input"))
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
    shown = _show(typed if isinstance(typed, str) and typed != value else value)
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
        key = _show(loc[-1] if loc else value)
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
        bound = _number(bound)
        return f"must be {op} {bound}, got {shown} — use {fix.format(bound)}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"expected a whole number, got {shown} — write e.g. 8"
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


def _kind(value: object) -> str:
    if value is None:
        return "empty (null)"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple | set | frozenset):
        return "a list"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"text {_show(value)}"
    return type(value).__name__


def _show(value: object) -> str:
    """A short one-line rendering of a user value for messages."""
    if isinstance(value, Mapping | list | tuple | set | frozenset) or value is None:
        return _kind(value)
    if isinstance(value, bool):
        return str(value).lower()
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…'"


# --- reading the file


class _FileProblem(Exception):
    def __init__(self, text: str, where: str = "") -> None:
        super().__init__(text)
        self.text = text
        self.where = where


class _JobLoader(yaml.SafeLoader):
    """Safe YAML that refuses duplicate keys (the later one would silently win)."""


def _construct_mapping(loader: _JobLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:
            continue  # unhashable: the constructor below reports it
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
    loader.flatten_mapping(node)
    return dict(loader.construct_pairs(node, deep=True))


_JobLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(path: Path, source: str) -> object:
    if not path.exists():
        raise _FileProblem("file not found — check the path and the current directory")
    if path.is_dir():
        hint = next((p.name for p in (path / "job.yaml", path / "job.yml") if p.is_file()), None)
        fix = f"pass the job file, e.g. {path / hint}" if hint else "pass a job .yaml file"
        raise _FileProblem(f"is a directory — {fix}")
    try:
        with path.open("rb") as f:
            raw = f.read(_MAX_FILE_BYTES + 1)
    except OSError as e:
        raise _FileProblem(
            f"cannot read the file ({e.strerror or type(e).__name__}) — check it exists and"
            " its permissions"
        ) from None
    if len(raw) > _MAX_FILE_BYTES:
        raise _FileProblem("file is larger than 1 MiB — is this the job file?")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise _FileProblem(
            f"not UTF-8 text (byte 0x{raw[e.start]:02x}) — save the file as UTF-8",
            where=f"line {line}",
        ) from None
    try:
        return yaml.load(text, Loader=_JobLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = e.problem or e.context or "invalid YAML"
        raise _FileProblem(f"YAML error: {problem} — {_yaml_fix(problem)}", where=where) from None
    except yaml.YAMLError as e:
        raise _FileProblem(f"YAML error: {e} — check the file is YAML") from None
    except (ValueError, RecursionError, OverflowError, TypeError) as e:
        # e.g. an integer with thousands of digits, or nesting deeper than Python's stack
        raise _FileProblem(
            f"cannot read the YAML ({type(e).__name__}) — a job file holds plain short values"
        ) from None


def _yaml_fix(problem: str) -> str:
    if "duplicate key" in problem:
        return "keep only one of them"
    if "another document" in problem or "single document" in problem:
        return "keep one job per file (remove the second '---' document)"
    if "constructor for the tag" in problem:
        return "remove the YAML tag (!!...); job files hold plain values"
    if "'\\t'" in problem:
        return "indent with spaces, not tabs"
    if "recursive" in problem:
        return "remove the alias that refers to itself"
    return "check indentation, colons and quotes around there"


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
