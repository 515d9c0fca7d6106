"""Offers of the local target: the embedded default that deploys with no cloud at all.

The local target runs the job's command as a process on this machine (components/local.py). It has
no GPU and costs nothing; it stands in for whatever accelerator shape the job asks for, so a job
that lists `clouds: [local]` can be planned and deployed end to end without credentials.
"""

from __future__ import annotations

import os
from datetime import datetime

from router.config.datafiles import load_gpus
from router.contract.local_market import LocalMarket
from router.core.job.model import Job
from router.core.offers import Offer

LOCAL_REGION = "local"
LOCAL_INSTANCE_TYPE = "local-process"


def local_offers(job: Job, now: datetime, market: LocalMarket | None = None) -> list[Offer]:
    """Offers of the local target when the job allows `local`, per accelerator shape and market.

    Without a local market: one free offer per market in region `local`. With one (spotroute.yaml
    `local_market:`): each local region and market the trace offers at `now`, at its price then.
    Each offer carries the region's capacity: the planner rejects a region that cannot run the
    whole group at once; a region with capacity 0 refuses at launch (as a full cloud zone does).
    """
    if "local" not in job.resources.clouds:
        return []
    cpus = os.cpu_count() or 1
    places: list[tuple[str, str, float, int | None]] = (
        [(LOCAL_REGION, m, 0.0, None) for m in ("on-demand", "spot")]
        if market is None
        else [(r, m, row.price_per_hour, row.capacity) for (r, m), row in market.at(now).items()]
    )
    return [
        Offer(
            cloud="local",
            region=region,
            zone=None,
            instance_type=LOCAL_INSTANCE_TYPE,
            gpu=want.gpu,
            gpu_count=want.count,
            gpu_memory_gb=load_gpus()
            .gpu(want.gpu)
            .memory_gb,  # a stand-in: it reports what was asked
            vcpus=max(cpus, job.resources.min_vcpus),
            memory_gb=max(1.0, job.resources.min_memory_gb),
            market=kind,
            price_per_hour=price,
            source="local" if market is None else "local market",
            observed_at=now,
            interconnect="none (local process, no GPU)",
            capacity=capacity,
        )
        for want in job.resources.accelerators
        for region, kind, price, capacity in places
    ]
