"""Offers of the local target: the embedded default that deploys with no cloud at all.

The local target runs the job's command as a process on this machine (components/local.py). It has
no GPU and costs nothing; it stands in for whatever accelerator shape the job asks for, so a job
that lists `clouds: [local]` can be planned and deployed end to end without credentials.
"""

from __future__ import annotations

import os
from datetime import datetime

from router.core.gpus import gpu_memory_gb
from router.core.job.model import Job
from router.core.offers import Offer

LOCAL_REGION = "local"
LOCAL_INSTANCE_TYPE = "local-process"


def local_offers(job: Job, now: datetime) -> list[Offer]:
    """One free offer per requested accelerator shape and market, when the job allows `local`."""
    if "local" not in job.resources.clouds:
        return []
    cpus = os.cpu_count() or 1
    return [
        Offer(
            cloud="local",
            region=LOCAL_REGION,
            zone=None,
            instance_type=LOCAL_INSTANCE_TYPE,
            gpu=want.gpu,
            gpu_count=want.count,
            gpu_memory_gb=gpu_memory_gb(want.gpu),  # a stand-in: it reports what was asked
            vcpus=max(cpus, job.resources.min_vcpus),
            memory_gb=max(1.0, job.resources.min_memory_gb),
            market=market,
            price_per_hour=0.0,
            source="local",
            observed_at=now,
            interconnect="none (local process, no GPU)",
        )
        for want in job.resources.accelerators
        for market in ("on-demand", "spot")
    ]
