"""Builders for planner tests: offers with realistic hardware, jobs with overridable fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from router.core.job.model import Job
from router.core.offers import Offer

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

# instance type → (cloud, gpu, gpu_count, gpu_memory_gb, vcpus, memory_gb)
HARDWARE: dict[str, tuple[str, str, int, int, int, float]] = {
    "p4de.24xlarge": ("aws", "A100-80GB", 8, 80, 96, 1152.0),
    "p4d.24xlarge": ("aws", "A100-40GB", 8, 40, 96, 1152.0),
    "p5.48xlarge": ("aws", "H100-80GB", 8, 80, 192, 2048.0),
    "g5.xlarge": ("aws", "A10G", 1, 24, 4, 16.0),
    "a2-ultragpu-8g": ("gcp", "A100-80GB", 8, 80, 96, 1360.0),
    "a2-ultragpu-1g": ("gcp", "A100-80GB", 1, 80, 12, 170.0),
    "a3-highgpu-8g": ("gcp", "H100-80GB", 8, 80, 208, 1872.0),
    "Standard_ND96amsr_A100_v4": ("azure", "A100-80GB", 8, 80, 96, 1900.0),
    "local-a100x8": ("local", "A100-80GB", 8, 80, 96, 1024.0),
}
DEFAULT_REGION = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus", "local": "local"}


def offer(
    instance_type: str = "p4de.24xlarge",
    *,
    region: str | None = None,
    zone: str | None = None,
    market: str = "spot",
    price: float = 10.0,
    source: str | None = None,
    age_s: float = 0.0,
    bucket: str | None = "<5%",
    **hardware: Any,
) -> Offer:
    """An offer for a known instance type; `hardware` overrides gpu, vcpus, memory_gb, ..."""
    cloud, gpu, gpus, gpu_mem, vcpus, mem = HARDWARE[instance_type]
    fields: dict[str, Any] = {
        "cloud": cloud,
        "region": region or DEFAULT_REGION[cloud],
        "zone": zone,
        "instance_type": instance_type,
        "gpu": gpu,
        "gpu_count": gpus,
        "gpu_memory_gb": gpu_mem,
        "vcpus": vcpus,
        "memory_gb": mem,
        "market": market,
        "price_per_hour": price,
        "source": source or f"{cloud}-api",
        "observed_at": NOW - timedelta(seconds=age_s),
        "interruption_bucket": bucket if market == "spot" else None,
    }
    fields.update(hardware)
    return Offer(**fields)


def job(**overrides: Any) -> Job:
    """A checkpointed spot job for A100-80GB×8, 10 h on one node; keys override job.yaml fields."""
    spec: dict[str, Any] = {
        "name": "train",
        "resources": {"accelerators": [{"gpu": "A100-80GB", "count": 8}]},
        "market": "spot",
        "duration_hours": 10,
        "checkpoint": {"interval_s": 1800, "restore_overhead_s": 600},
        "run": {"command": ["python", "train.py"]},
    }
    resources = overrides.pop("resources", None)
    if resources is not None:
        spec["resources"] = {**spec["resources"], **resources}
    spec.update(overrides)
    return Job.model_validate(spec)
