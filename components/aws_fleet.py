"""Why an instant EC2 Fleet launched fewer instances than asked: the fleet's own errors.

CreateFleet (type instant) answers with `Errors[]`, one per launch template override it could
not fill: `ErrorCode`, `ErrorMessage`, `Lifecycle` and the override (`LaunchTemplateAndOverrides.
Overrides`: instance type, subnet, zone). The provider drops them (it keeps only the instances),
but DescribeFleets returns the same list for an instant fleet ("Information about the instances
that could not be launched by the fleet. Valid only when Type is set to instant.", EC2 API
reference, FleetData), so SpotGpuGroup reads them there after a short launch and names each
code as EC2 wrote it — InsufficientInstanceCapacity, VcpuLimitExceeded,
MaxSpotInstanceCountExceeded, Unsupported, SpotMaxPriceTooLow, or InvalidParameterValue for an
instance profile IAM has not propagated yet (EC2 API error codes,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html) — so the router's
failover (router/core/failover.py) blocks what actually refused.
"""

from __future__ import annotations

from typing import Any

import pulumi

from components.aws_names import launched_instances

# The most telling code leads the message, in the order router/core/failover.py classifies them:
# a quota outlasts a capacity dip, an instance profile not yet propagated is retried in place,
# then capacity, a type the zone does not offer, price; anything else last, as EC2 wrote it.
_RANK = {
    "VcpuLimitExceeded": 0,
    "MaxSpotInstanceCountExceeded": 0,
    "InvalidParameterValue": 1,
    "InsufficientInstanceCapacity": 2,
    "UnfulfillableCapacity": 3,
    "Unsupported": 4,
    "SpotMaxPriceTooLow": 5,
}
# Used only when the fleet's errors cannot be read: what a short launch most often is.
ASSUMED_CODE = "InsufficientInstanceCapacity"


def read_fleet_errors(fleet_id: str, region: str, *, ec2: Any = None) -> list[dict[str, Any]]:
    """The `Errors` DescribeFleets lists for an instant fleet (boto3's own dicts)."""
    if ec2 is None:
        import boto3

        ec2 = boto3.session.Session().client("ec2", region_name=region or None)
    fleets = ec2.describe_fleets(FleetIds=[fleet_id]).get("Fleets") or []
    return list(fleets[0].get("Errors") or []) if fleets else []


def shortfall_message(
    fleet_id: str, launched: int, node_count: int, errors: list[dict[str, Any]], unread: str = ""
) -> str:
    """One line: what launched and each distinct error as `Code: message (type, lifecycle)`."""
    head = f"EC2 Fleet {fleet_id} launched {launched} of {node_count} instances"
    tail = "; destroy the stack or let the router try the next placement"
    if not errors:
        why = f"its errors could not be read ({unread})" if unread else "it listed no errors"
        return f"{ASSUMED_CODE}: {head} — {why}, so no capacity is assumed{tail}"
    seen: dict[tuple[str, str], list[str]] = {}
    for error in errors:
        code = str(error.get("ErrorCode") or "UnknownError")
        message = " ".join(str(error.get("ErrorMessage") or "").split())
        override = (error.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
        where = ", ".join(
            str(v) for v in (override.get("InstanceType"), error.get("Lifecycle")) if v
        )
        seen.setdefault((code, message), []).append(where)
    ranked = sorted(seen.items(), key=lambda item: _RANK.get(item[0][0], 4))
    parts = [
        f"{code}: {message.rstrip('.')} ({'; '.join(w for w in wheres if w) or 'fleet'})"
        for (code, message), wheres in ranked
    ]
    return f"{parts[0]} — {head}" + "".join(f"; {p}" for p in parts[1:]) + tail


def require_full_capacity(
    fleet_id: str, fleet_instance_sets: Any, node_count: int, region: str
) -> str:
    """`fleet_id` if the fleet launched all `node_count` instances; else fail the deploy with
    the fleet's own error codes (read from DescribeFleets)."""
    launched = launched_instances(fleet_instance_sets)
    if launched >= node_count:
        return fleet_id
    unread = ""
    try:
        errors = read_fleet_errors(fleet_id, region)
    except Exception as exc:  # no credentials, no permission: say so, assume capacity
        errors, unread = [], f"{type(exc).__name__}: {exc}"
    raise pulumi.RunError(shortfall_message(fleet_id, launched, node_count, errors, unread))
