"""The job (job.yaml) model: what a user asks for, validated by pydantic.

The model's field names are the contract inside spotroute (`interval_s`, `cooldown_s`, ...);
job.yaml uses the names people write (`interval: 30m`, `cooldown: 2h`), declared as validation
aliases. Reading job.yaml: router.config.job_file; its problems: router.core.job.problems.
The data sets are in router.core.job.data, `migration:` in router.core.job.migration; the Strict
base and validation helpers in router.core.job.validation.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from router.contract.clouds import PUBLIC_CLOUDS, Cloud
from router.contract.stack_config import (
    JOB_NAME_MAX,
    JOB_NAME_PATTERN,
    JOB_NAME_RULE,
    RESERVED_ENV,
)
from router.core.durations import DURATION_PATTERN, parse_duration_s
from router.core.globs import glob_problem
from router.core.gpus import UnknownGpu, canonical_gpu, describe_gpu_field
from router.core.job.data import Data, cloud_of_url
from router.core.job.migration import Migration
from router.core.job.validation import (
    DurationInput,
    Strict,
    duration_input,
    duration_s,
    not_bool,
    problem,
    text_values,
)
from router.core.user_values import show_value

DEADLINE_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)  # job.yaml `deadline`: the sane range
DEADLINE_LATEST = datetime(2200, 1, 1, tzinfo=UTC)
RESERVED_NAMES = frozenset({"bootstrap"})  # stack names spotroute uses itself (route bootstrap)
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
# AWS and Azure allow 50 tags per resource (docs.aws.amazon.com/tag-editor/latest/userguide/
# tagging.html; learn.microsoft.com/azure/azure-resource-manager/management/tag-resources,
# "Limitations"); spotroute adds spotroute-job, managed-by, spotroute-checkpointing, Name and
# team when the job gives none (components/args.py standard_labels): provider_rules [labels].
MAX_TAGS = 50
ADDED_TAGS = ("spotroute-job", "managed-by", "spotroute-checkpointing", "Name")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# The sane range of each number a job names (docs/job-spec.md lists them all): wide enough for
# any real job, narrow enough that every cost, time and rate derived from one stays finite
# (`copy_gbps: 1.0e-320` made a staging time of inf hours, and `route plan --json` failed on it).
MIN_PRICE_PER_HOUR = 0.001  # USD per instance-hour
MAX_PRICE_PER_HOUR = 10_000.0  # ~100× the dearest GPU instance's list price (p5.48xlarge ~$98/h)
MIN_DURATION_HOURS = 0.0001  # 0.36 s: a rehearsal's jobs run on an accelerated clock
MAX_DURATION_HOURS = 87_600.0  # ten years
MAX_VCPUS = 2_048  # the largest instances have 896 (AWS u7in-32tb.224xlarge, Azure M896ixds)
MAX_MEMORY_GB = 65_536.0  # the largest have 32 TiB
MIN_INTERVAL_S = 1.0  # a checkpoint at most every second
MIN_SAVE_TIME_S = 0.001
MIN_IMAGE_GB = 0.001
MAX_IMAGE_GB = 1_000.0


GpuSpec = Annotated[str, Field(description="GPU[:count], e.g. A100-80GB:8 (count defaults to 1)")]


def suggested_name(name: str) -> str:
    """A valid job name close to `name` ("My_Job 2" -> "my-job-2"), for error messages."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug or not slug[0].isalpha():
        slug = f"job-{slug}".strip("-")
    return slug[:JOB_NAME_MAX].rstrip("-")


class AcceleratorRequest(Strict):
    """One acceptable accelerator shape, e.g. A100-80GB × 8 (parsed from "A100-80GB:8")."""

    gpu: str = Field(json_schema_extra=describe_gpu_field)  # the names of gpus.csv
    count: int = Field(default=1, ge=1, le=64, description="GPUs per instance")

    @field_validator("gpu")
    @classmethod
    def _canonical_gpu(cls, value: str) -> str:
        try:
            return canonical_gpu(value)
        except UnknownGpu as e:
            raise problem(str(e)) from None

    @field_validator("count", mode="before")
    @classmethod
    def _count_not_bool(cls, value: object) -> object:
        return not_bool(value)


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

    @field_validator("allow", "deny")
    @classmethod
    def _well_formed(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:  # '[' never closed is a typo, not a pattern that matches nothing
            if (why := glob_problem(pattern)) is not None:
                raise problem(why)
        return value


class Resources(Strict):
    """What one instance must have, and where it may run."""

    accelerators: tuple[AcceleratorRequest, ...] = Field(
        description="alternatives, any one fits: 'A100-80GB:8', a list of such, or {gpu, count}"
    )
    min_vcpus: int = Field(
        default=0, ge=0, le=MAX_VCPUS, description="vCPUs per instance, at least"
    )
    min_memory_gb: float = Field(
        default=0.0, ge=0, le=MAX_MEMORY_GB, description="instance memory in GB, at least"
    )
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
                raise problem("no accelerators listed — add e.g. accelerators: A100-80GB:8")
            return [_accelerator_item(item) for item in value]
        return value

    @field_validator("min_vcpus", "min_memory_gb", mode="before")
    @classmethod
    def _numbers_not_bool(cls, value: object) -> object:
        return not_bool(value)

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
                raise problem("no clouds listed — add e.g. clouds: [aws, gcp, azure]")
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
        ge=MIN_INTERVAL_S,
        validation_alias="interval",
        description="how often the job saves a checkpoint: 30m, 1h, or seconds",
    )
    restore_overhead_s: float = Field(
        default=600.0,
        ge=0,
        validation_alias="restore_overhead",
        description="time to restart and load a checkpoint after an interruption: 10m, or seconds",
    )
    save_time_s: float | None = Field(
        default=None,
        ge=MIN_SAVE_TIME_S,
        validation_alias="save_time",
        description="how long one save takes (the save_s each checkpoint's manifest records):"
        " 45s, 2m; route plan --explain suggests an interval from it",
    )
    url: str = Field(
        default="auto",
        description='"auto" = the stack creates a checkpoint bucket in the placement\'s cloud;'
        " or an existing s3:// gs:// az:// file:// URL",
    )

    @field_validator(
        "interval_s", mode="before", json_schema_input_type=duration_input(MIN_INTERVAL_S)
    )
    @classmethod
    def _interval(cls, value: object) -> object:
        return duration_s(value)

    @field_validator("restore_overhead_s", mode="before", json_schema_input_type=DurationInput)
    @classmethod
    def _overhead(cls, value: object) -> object:
        return duration_s(value)

    @field_validator(
        "save_time_s", mode="before", json_schema_input_type=duration_input(MIN_SAVE_TIME_S) | None
    )
    @classmethod
    def _save_time(cls, value: object) -> object:
        return None if value is None else duration_s(value)

    @field_validator("url")
    @classmethod
    def _known_storage(cls, value: str) -> str:
        if value != "auto" and cloud_of_url(value) is None:
            raise problem(
                f"cannot tell which storage {show_value(value)} is — use auto or an"
                " s3://, gs://, az://, abfs:// or file:// URL"
            )
        return value


def _env_name_problem(name: str) -> PydanticCustomError | None:
    if not _ENV_NAME.fullmatch(name):
        return problem(
            f"{name!r} is not a valid environment variable name"
            " — use letters, digits and '_', not starting with a digit",
            key=name,
        )
    if name in RESERVED_ENV:
        return problem(f"{name} is set by spotroute on every node — remove it", key=name)
    return None


class Run(Strict):
    """What runs on the instance."""

    image: str = Field(default="", description="container image; empty = run on the host")
    image_size_gb: float | None = Field(
        default=None,
        ge=MIN_IMAGE_GB,
        le=MAX_IMAGE_GB,
        description="the image's (compressed) size in GB: how long a node's `docker pull` may"
        " take when the job moves (docs/migration.md); default 10",
    )
    command: tuple[str, ...] = Field(description="a string (split like a shell) or a list")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="environment variables; an entry left empty (NAME: or NAME: '') is a"
        " secret taken from the environment of `route deploy` (SkyPilot's convention)",
    )
    secrets: tuple[str, ...] = Field(
        default=(),
        description="names of secret environment variables: the value is run.env's if it gives"
        " one, else taken from the environment of `route deploy`; stored and delivered as a"
        " secret, never in clear (docs/security.md)",
    )

    @model_validator(mode="before")
    @classmethod
    def _empty_env_is_secret(cls, data: object) -> object:
        # `HF_TOKEN:` (null) or `HF_TOKEN: ""` means "take it from my environment at deploy".
        if not isinstance(data, Mapping) or not isinstance(data.get("env"), Mapping):
            return data
        env = data["env"]
        # A bad name stays in env, where its own problem is reported under run.env.
        empty = [
            k
            for k, v in env.items()
            if (v is None or v == "") and isinstance(k, str) and _env_name_problem(k) is None
        ]
        listed = data.get("secrets", [])
        if not empty or not isinstance(listed, str | list | tuple):
            return data
        listed = [listed] if isinstance(listed, str) else list(listed)
        return {
            **data,
            "env": {k: v for k, v in env.items() if k not in empty},
            "secrets": [*listed, *(k for k in empty if k not in listed)],
        }

    @field_validator("command", mode="before", json_schema_input_type=str | list[str | float])
    @classmethod
    def _split_command(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                value = shlex.split(value)
            except ValueError as e:
                raise problem(
                    f"cannot split the command ({e}) — close the quote or write it as a list"
                ) from None
        if isinstance(value, list | tuple):
            if not value:
                raise problem("command is empty — write e.g. command: [python, train.py]")
            return [
                str(w) if isinstance(w, int | float) and not isinstance(w, bool) else w
                for w in value
            ]
        return value

    @field_validator("env", mode="before", json_schema_input_type=dict[str, str | float | None])
    @classmethod
    def _env_text(cls, value: object) -> object:
        for name in value if isinstance(value, Mapping) else ():
            problem = _env_name_problem(name) if isinstance(name, str) else None
            if problem is not None:
                raise problem
        return text_values(value, "env")

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            problem = _env_name_problem(name)
            if problem is not None:
                raise problem
        return value

    @field_validator("secrets", mode="before", json_schema_input_type=str | list[str])
    @classmethod
    def _one_secret(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            problem = _env_name_problem(name)
            if problem is not None:
                raise problem
        return tuple(dict.fromkeys(value))

    @property
    def plain_env(self) -> dict[str, str]:
        """The env entries that are not secret: written to the stack config in clear."""
        return {k: v for k, v in self.env.items() if k not in self.secrets}

    @property
    def secrets_from_environment(self) -> tuple[str, ...]:
        """Secret names the job file gives no value for: `route deploy` reads its environment."""
        return tuple(name for name in self.secrets if name not in self.env)


class Job(Strict):
    """A GPU training job: what it needs, what it may cost, and how it runs."""

    name: str = Field(description="stack name: lowercase letters, digits, dashes; 1-40 chars")
    resources: Resources
    market: Literal["spot", "on-demand", "reserved", "auto"] = Field(
        default="auto", description="auto = spot when checkpointed and cheaper, else on-demand"
    )
    max_price_per_hour: float | None = Field(
        default=None,
        ge=MIN_PRICE_PER_HOUR,
        le=MAX_PRICE_PER_HOUR,
        description="USD per instance-hour, at most",
    )
    duration_hours: float = Field(
        ge=MIN_DURATION_HOURS,
        le=MAX_DURATION_HOURS,
        description="expected run time in hours (or 90m, 2h); at most 10 years",
    )
    deadline: datetime | None = Field(
        default=None, description="ISO 8601 with timezone, e.g. 2026-06-30T18:00:00Z"
    )
    node_count: int = Field(default=1, ge=1, le=64, description="instances")
    checkpoint: Checkpoint | None = Field(
        default=None, description="absent = the job cannot resume: spot is refused"
    )
    data: tuple[Data, ...] = Field(
        default=(),
        description="training data sets: one mapping or a list of them (each priced per placement)",
    )
    run: Run
    migration: Migration = Migration()
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="tags on every resource, e.g. team, cost-center (GCP label rules)",
    )

    @field_validator(
        "name",
        mode="before",
        json_schema_input_type=Annotated[str, Field(pattern=JOB_NAME_PATTERN)],
    )
    @classmethod
    def _stack_name(cls, value: object) -> object:
        if isinstance(value, str) and not re.fullmatch(JOB_NAME_PATTERN, value):
            raise problem(
                f"{show_value(value)} is not a valid name — use {JOB_NAME_RULE},"
                f" e.g. {suggested_name(value)!r}"
            )
        if isinstance(value, str) and value in RESERVED_NAMES:
            raise problem(f"'{value}' is reserved for spotroute's own stack — choose another name")
        return value

    @field_validator("max_price_per_hour", "node_count", mode="before")
    @classmethod
    def _numbers_not_bool(cls, value: object) -> object:
        return not_bool(value)

    @field_validator("data", mode="before", json_schema_input_type=Data | list[Data] | None)
    @classmethod
    def _data_list(cls, value: object) -> object:
        # One mapping is one data set (the original form of `data:`); null is none.
        if value is None:
            return []
        return [value] if isinstance(value, Mapping | Data) else value

    @field_validator(
        "duration_hours",
        mode="before",
        json_schema_input_type=Annotated[float, Field(ge=MIN_DURATION_HOURS, le=MAX_DURATION_HOURS)]
        | Annotated[str, Field(pattern=DURATION_PATTERN)],
    )
    @classmethod
    def _hours(cls, value: object) -> object:
        if isinstance(value, str) and re.search(r"[a-zA-Z]", value):
            try:
                return parse_duration_s(value) / 3600.0
            except ValueError:
                raise problem(
                    f"bad duration {show_value(value)} — write hours as a number (24)"
                    " or e.g. 90m, 2h"
                ) from None
        return not_bool(value)

    @field_validator("market", mode="before")
    @classmethod
    def _market_lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("deadline", mode="before")
    @classmethod
    def _deadline_has_time(cls, value: object) -> object:
        if isinstance(value, date) and not isinstance(value, datetime):
            raise problem(
                f"{value.isoformat()} has no time — write e.g. {value.isoformat()}T18:00:00Z"
            )
        return value

    @field_validator("deadline")
    @classmethod
    def _deadline_has_timezone(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.utcoffset() is None:
            raise problem(
                f"{value.isoformat()} has no timezone — add Z (UTC) or an offset like +02:00"
            )
        if value is not None and not DEADLINE_EARLIEST <= value < DEADLINE_LATEST:
            # Far dates overflow the date arithmetic of planning (deadline − duration, up to 10
            # years); no job runs before 2000 or plans past 2200.
            raise problem(
                f"{value.isoformat()} is out of range — give a date between "
                f"{DEADLINE_EARLIEST:%Y} and {DEADLINE_LATEST.year - 1}, e.g. 2026-06-30T18:00:00Z"
            )
        return value

    @field_validator("labels", mode="before", json_schema_input_type=dict[str, str | float])
    @classmethod
    def _label_text(cls, value: object) -> object:
        return text_values(value, "label")

    @field_validator("labels")
    @classmethod
    def _portable_labels(cls, value: dict[str, str]) -> dict[str, str]:
        # The strictest cloud (GCP labels) decides, so a job can move between clouds.
        tags = len(value) + len(ADDED_TAGS) + (0 if "team" in value else 1)
        if tags > MAX_TAGS:
            room = MAX_TAGS - len(ADDED_TAGS)
            raise problem(
                f"{len(value)} labels, at most {room} with a team label ({room - 1} without) —"
                f" AWS and Azure allow {MAX_TAGS} tags per resource and spotroute adds"
                f" {', '.join(ADDED_TAGS)} and team; drop some"
            )
        for key, text in value.items():
            if key.startswith("spotroute"):
                raise problem(
                    f"label {key!r} is reserved (spotroute sets spotroute-* labels) — rename it",
                    key=key,
                )
            if not _LABEL_KEY.fullmatch(key):
                raise problem(
                    f"label key {key!r} is not portable — use lowercase letters, digits, '_'"
                    " and '-', starting with a letter, at most 63 characters",
                    key=key,
                )
            if not _LABEL_VALUE.fullmatch(text):
                slug = re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-")[:63]
                raise problem(
                    f"label value {show_value(text)} is not portable — use lowercase letters,"
                    f" digits, '_' and '-', at most 63 characters, e.g. {slug!r}",
                    key=key,
                )
        return value
