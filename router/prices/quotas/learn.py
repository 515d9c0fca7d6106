"""Failover learns: a launch that failed on a quota is recorded, so the next plan rejects it.

The migration/failover code calls `record_quota_failure` when a cloud refuses a launch for
quota; `parse_quota_error` finds the quota a cloud's error message names. The record stands
until the quota is read again (`route quotas refresh`), when the fresh numbers decide.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from router.config.datafiles import load_quota_definitions, load_type_quotas
from router.core.errors import BadInput
from router.core.quotas import LaunchFailure
from router.prices.quotas.cache import QuotaCache, default_path

# Error texts the clouds return when a launch exceeds a quota (one example each in docs/quotas.md).
_GCP_METRIC = re.compile(r"Quota '([A-Z0-9_]+)' exceeded")
_AZURE_FAMILY = re.compile(r"exceeding approved (\w+) Cores quota", re.IGNORECASE)
_AZURE_LOW_PRIORITY = re.compile(r"low[- ]?priority ?cores", re.IGNORECASE)
_AWS_SPOT = ("MaxSpotInstanceCountExceeded",)
_AWS_ON_DEMAND = ("VcpuLimitExceeded", "InstanceLimitExceeded")


def parse_quota_error(cloud: str, message: str) -> str | None:
    """The quota a launch error names, or None when the message does not name one.

    AWS errors name no quota code: the caller's instance type decides (None is returned, and
    `record_quota_failure` uses the type's mapping). GCP names the metric, Azure the family or
    the low-priority total.
    """
    if cloud == "gcp":
        found = _GCP_METRIC.search(message)
        return found.group(1) if found else None
    if cloud == "azure":
        if _AZURE_LOW_PRIORITY.search(message):
            return "lowPriorityCores"
        found = _AZURE_FAMILY.search(message)
        if found is None:
            return None
        wanted = found.group(1).lower()
        for d in load_quota_definitions():
            if d.cloud == "azure" and d.quota.lower() == wanted:
                return d.quota
        return found.group(1)
    return None


def is_quota_error(cloud: str, message: str) -> bool:
    """Whether a launch error message is a quota refusal (rather than capacity or permissions)."""
    if cloud == "aws":
        return any(code in message for code in (*_AWS_SPOT, *_AWS_ON_DEMAND))
    return parse_quota_error(cloud, message) is not None or "quota" in message.lower()


def record_quota_failure(
    *,
    cloud: str,
    region: str,
    instance_type: str,
    market: str,
    now: datetime,
    node_count: int = 1,
    quota: str | None = None,
    message: str = "",
    cache_path: Path | None = None,
) -> list[LaunchFailure]:
    """Record that launching `node_count` × `instance_type` (`market`) in `region` failed on quota.

    `quota` is the quota code/metric/usage name when known; otherwise the one `message` names
    (`parse_quota_error`), else the first quota the instance type draws on in that market
    (router/data/instances.csv). Returns what was stored in the quota cache (default: the one
    in SPOTROUTE_HOME); the next `route plan` rejects placements needing as much of it.
    Raises BadInput for an instance type spotroute has no quota mapping for.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    mapping = {(t.cloud, t.instance_type): t for t in load_type_quotas()}
    it = mapping.get((cloud, instance_type))
    if it is None:
        raise BadInput(
            f"{cloud} {instance_type}: no quota mapping in router/data/instances.csv — "
            "add its quota_on_demand/quota_spot columns"
        )
    groups = it.groups(market)
    chosen = quota or parse_quota_error(cloud, message)
    if chosen is None:
        if not groups:
            raise BadInput(f"{cloud} {instance_type}: no {market} quota is mapped")
        chosen = groups[0][0]
    units = {d.quota: d.unit for d in load_quota_definitions() if d.cloud == cloud}
    needed = float(it.per_instance(units.get(chosen, "vcpus")) * max(1, node_count))
    failure = LaunchFailure(
        cloud=cloud,
        region=region,
        quota=chosen,
        instance_type=instance_type,
        market=market,
        needed=needed,
        message=" ".join(message.split())[:300],
        observed_at=now,
    )
    if cache_path is None:
        from router.config.home import spotroute_home

        cache_path = default_path(spotroute_home())
    with QuotaCache(cache_path) as cache:
        cache.add_failures([failure])
    return [failure]
