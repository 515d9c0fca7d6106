"""The job.yaml model: what a user asks for. Loading never raises anything but BadInput."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """Base for every job.yaml section: unknown keys are errors (typos must not pass silently)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class AcceleratorRequest(Strict):
    """One acceptable accelerator shape, e.g. A100-80GB × 8 (parsed from "A100-80GB:8")."""

    gpu: str
    count: int = Field(ge=1, le=64)


class RegionFilter(Strict):
    """Glob patterns over region names; deny wins over allow. Empty allow = all regions."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


class Resources(Strict):
    accelerators: tuple[AcceleratorRequest, ...]  # alternatives, any one fits
    min_vcpus: int = Field(default=0, ge=0)
    min_memory_gb: float = Field(default=0, ge=0)
    clouds: tuple[Literal["aws", "gcp", "azure", "local"], ...] = ("aws", "gcp", "azure")
    regions: RegionFilter = RegionFilter()


class Checkpoint(Strict):
    interval_s: float = Field(gt=0)  # job.yaml: `interval: 30m`
    restore_overhead_s: float = Field(default=600, ge=0)  # job.yaml: `restore_overhead: 10m`
    url: str = "auto"  # "auto" = the stack creates a checkpoint bucket in the placement's cloud


class Data(Strict):
    url: str
    cloud: Literal["aws", "gcp", "azure", "local"] | None = None  # inferred from the URL scheme
    region: str
    size_gb: float = Field(ge=0)


class Run(Strict):
    image: str = ""
    command: tuple[str, ...]
    env: dict[str, str] = Field(default_factory=dict)


class Migration(Strict):
    min_savings_pct: float = Field(default=20, ge=0, le=100)
    cooldown_s: float = Field(default=3600, ge=0)  # job.yaml: `cooldown: 1h`


class Job(Strict):
    name: str  # becomes the stack name: lowercase letters, digits, dashes
    resources: Resources
    market: Literal["spot", "on-demand", "reserved", "auto"] = "auto"
    max_price_per_hour: float | None = Field(default=None, gt=0)  # USD per instance-hour
    duration_hours: float = Field(gt=0)  # expected run time
    deadline: datetime | None = None
    node_count: int = Field(default=1, ge=1, le=64)
    checkpoint: Checkpoint | None = None  # None = the job cannot resume: spot is refused
    data: Data | None = None
    run: Run
    migration: Migration = Migration()
    labels: dict[str, str] = Field(default_factory=dict)
