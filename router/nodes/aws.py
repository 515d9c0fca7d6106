"""AWS: the nodes of an EC2 Fleet (a stack's `groupId`), from DescribeFleets, DescribeInstances
and DescribeSpotInstanceRequests.

A spot node the cloud reclaims shows as an instance `shutting-down`/`terminated` with state
reason `Server.SpotInstanceTermination`, and ~2 minutes earlier as its spot request's status
`marked-for-termination` (the interruption notice, seen from outside the node). Either counts as
lost. An instant fleet (what components/aws.py creates) lists its instances in DescribeFleets; a
maintain/request fleet's come from DescribeFleetInstances.

EC2 forgets a terminated instance within about an hour ("Recently terminated instances might
appear in the returned results. This interval is usually less than one hour."; an id "that is not
valid" is an error, `InvalidInstanceID.NotFound` — EC2 API reference, DescribeInstances,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstances.html). The
instances are therefore asked for with an `instance-id` filter, which never fails for an unknown
id: a fleet instance EC2 no longer lists is gone, so lost.
"""

from __future__ import annotations

from typing import Any

from router.core.errors import CredentialsMissing, OperationFailed
from router.nodes.node_state import LOST, RUNNING, STARTING, Node, NodeState

RECLAIM_REASONS = {"Server.SpotInstanceTermination"}
# Spot request status codes that mean the cloud is taking (or took) the capacity back.
RECLAIM_REQUEST_CODES = {
    "marked-for-termination",
    "marked-for-stop",
    "instance-terminated-by-price",
    "instance-terminated-no-capacity",
    "instance-terminated-capacity-oversubscribed",
    "instance-stopped-by-price",
    "instance-stopped-no-capacity",
}
# A fleet instance EC2 no longer lists: terminated over an hour ago.
FORGOTTEN = "gone (EC2 no longer lists it: terminated over an hour ago)"
NO_CREDENTIALS = (
    "AWS credentials not found — run `aws configure sso` / set AWS_PROFILE so route watch can "
    "see whether the cloud reclaimed the job's spot nodes"
)


def poll(group_id: str, region: str, *, ec2: Any = None) -> NodeState:
    """The fleet's nodes now; `ec2` is a boto3 EC2 client (default: the default session's)."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    client = ec2 if ec2 is not None else _client(region)
    try:
        fleets = client.describe_fleets(FleetIds=[group_id]).get("Fleets", [])
        if not fleets or str(fleets[0].get("FleetState", "")).startswith("deleted"):
            return NodeState("aws", group_id, 0, gone=True)
        fleet = fleets[0]
        wanted = int(fleet.get("TargetCapacitySpecification", {}).get("TotalTargetCapacity", 0))
        if fleet.get("Type") == "instant":
            ids = [i for group in fleet.get("Instances", []) for i in group.get("InstanceIds", [])]
        else:
            pages = client.get_paginator("describe_fleet_instances").paginate(FleetId=group_id)
            ids = [a["InstanceId"] for page in pages for a in page.get("ActiveInstances", [])]
        instances = _instances(client, ids)
        requests = [i["SpotInstanceRequestId"] for i in instances if i.get("SpotInstanceRequestId")]
        notices: dict[str, str] = {}
        if requests:
            answer = client.describe_spot_instance_requests(SpotInstanceRequestIds=requests)
            for req in answer.get("SpotInstanceRequests", []):
                code = str(req.get("Status", {}).get("Code", ""))
                if code in RECLAIM_REQUEST_CODES:
                    notices[str(req.get("InstanceId", ""))] = code
    except NoCredentialsError:
        raise CredentialsMissing(NO_CREDENTIALS) from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") in ("InvalidFleetId.NotFound", "InvalidFleetId.Malformed"):
            return NodeState("aws", group_id, 0, gone=True)
        raise OperationFailed(
            f"aws {region}: cannot read fleet {group_id}: {error.get('Code')}: "
            f"{error.get('Message', '')} (route watch needs ec2:DescribeFleets, "
            "ec2:DescribeInstances, ec2:DescribeSpotInstanceRequests)"
        ) from None
    except BotoCoreError as exc:
        raise OperationFailed(f"aws {region}: cannot read fleet {group_id}: {exc}") from None
    seen = {str(i.get("InstanceId")) for i in instances}
    gone = tuple(Node(i, LOST, FORGOTTEN) for i in ids if i not in seen)
    return NodeState("aws", group_id, wanted, tuple(node(i, notices) for i in instances) + gone)


def _instances(client: Any, ids: list[str]) -> list[dict[str, Any]]:
    """DescribeInstances for `ids` by filter (200 values per filter): unknown ids are left out."""
    found: list[dict[str, Any]] = []
    for start in range(0, len(ids), 200):
        pages = client.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "instance-id", "Values": ids[start : start + 200]}]
        )
        found += [i for p in pages for r in p.get("Reservations", []) for i in r["Instances"]]
    return found


def node(instance: dict[str, Any], notices: dict[str, str]) -> Node:
    """One instance of DescribeInstances as a node (`notices`: instance id → spot status code)."""
    iid = str(instance.get("InstanceId", "?"))
    state = str(instance.get("State", {}).get("Name", "unknown"))
    reason = str(instance.get("StateReason", {}).get("Code", ""))
    if iid in notices:
        return Node(iid, LOST, f"{state}, spot request {notices[iid]}", reclaimed=True)
    if state == "running":
        return Node(iid, RUNNING, state)
    if state == "pending":
        return Node(iid, STARTING, state)
    detail = f"{state} ({reason})" if reason else state
    return Node(iid, LOST, detail, reclaimed=reason in RECLAIM_REASONS)


def _client(region: str) -> Any:
    import boto3

    return boto3.session.Session().client("ec2", region_name=region or None)
