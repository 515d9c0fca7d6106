"""GCP: the nodes of a managed instance group (a stack's `groupId`), from
instanceGroupManagers.get + listManagedInstances, and zoneOperations.list for preemptions.

A spot VM Compute Engine preempts goes TERMINATED (the group then RECREATES it), and the zone
records a system operation `compute.instances.preempted` whose targetLink is the VM — that is
how the cloud itself says "preempted" (`gcloud compute operations list
--filter=operationType=compute.instances.preempted`). A node not RUNNING or being recreated
counts as lost; the operation marks it reclaimed.
"""

from __future__ import annotations

import re
from typing import Any

from router.core.errors import BadInput, CredentialsMissing, OperationFailed
from router.nodes.node_state import LOST, RUNNING, STARTING, Node, NodeState

GROUP_ID = re.compile(
    r"^(?:https://www\.googleapis\.com/compute/v1/)?projects/(?P<project>[^/]+)/"
    r"(?P<kind>zones|regions)/(?P<where>[^/]+)/instanceGroupManagers/(?P<name>[^/]+)$"
)
PREEMPTED = "compute.instances.preempted"
HEALTHY_ACTIONS = {"", "NONE", "VERIFYING", "REFRESHING"}
STARTING_STATUSES = {"PROVISIONING", "STAGING"}
NO_CREDENTIALS = (
    "GCP credentials not found — run `gcloud auth application-default login` so route watch can "
    "see whether the cloud preempted the job's spot nodes"
)


def poll(
    group_id: str, region: str, *, credentials: Any = None, endpoint: str | None = None
) -> NodeState:
    """The group's nodes now; `endpoint` (with scheme) overrides where the client connects."""
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth_exceptions

    match = GROUP_ID.match(group_id)
    if match is None:
        raise BadInput(
            f"groupId {group_id!r}: not a GCE instance group manager — expected "
            "projects/P/zones/Z/instanceGroupManagers/NAME (or regions/R/…)"
        )
    project, kind, where, name = match["project"], match["kind"], match["where"], match["name"]
    try:
        creds = credentials if credentials is not None else _default_credentials()
        groups = _groups_client(kind, creds, endpoint)
        scope = {"zone": where} if kind == "zones" else {"region": where}
        manager = groups.get(project=project, instance_group_manager=name, **scope)
        managed = list(
            groups.list_managed_instances(project=project, instance_group_manager=name, **scope)
        )
        suspect = [m for m in managed if _status(m) != RUNNING]
        preempted = _preempted(project, suspect, creds, endpoint) if suspect else set()
    except api.NotFound:
        return NodeState("gcp", group_id, 0, gone=True)
    except auth_exceptions.DefaultCredentialsError:
        raise CredentialsMissing(NO_CREDENTIALS) from None
    except api.Forbidden as exc:
        raise OperationFailed(
            f"gcp {project}: cannot read instance group {name}: {exc.message} (route watch needs "
            "compute.instanceGroupManagers.get and compute.zoneOperations.list)"
        ) from None
    except api.GoogleAPIError as exc:
        raise OperationFailed(f"gcp {project}: cannot read instance group {name}: {exc}") from None
    nodes = tuple(_node(m, preempted) for m in managed)
    return NodeState("gcp", group_id, int(manager.target_size or 0), nodes)


def _status(m: Any) -> str:
    status, action = str(m.instance_status or ""), str(m.current_action or "")
    if status == "RUNNING" and action in HEALTHY_ACTIONS:
        return RUNNING
    if action == "CREATING" or (status in STARTING_STATUSES and action in HEALTHY_ACTIONS):
        return STARTING
    return LOST


def _node(m: Any, preempted: set[str]) -> Node:
    url = str(m.instance or "")
    name = url.rsplit("/", 1)[-1] or str(m.id or "?")
    detail = f"{m.instance_status or 'NO INSTANCE'} ({m.current_action or 'NONE'})"
    status = _status(m)
    if url and _tail(url) in preempted:
        return Node(name, LOST, f"{detail}, {PREEMPTED}", reclaimed=True)
    return Node(name, status, detail)


def _preempted(project: str, suspect: list[Any], creds: Any, endpoint: str | None) -> set[str]:
    """The VMs of `suspect` that their zone's operations say were preempted (URL tails)."""
    from google.cloud import compute_v1

    operations = compute_v1.ZoneOperationsClient(
        transport="rest", credentials=creds, client_options=_options(endpoint)
    )
    zones = {m.instance.split("/zones/", 1)[1].split("/", 1)[0]
             for m in suspect if "/zones/" in str(m.instance or "")}  # fmt: skip
    found = set()
    for zone in sorted(zones):
        request = compute_v1.ListZoneOperationsRequest(
            project=project, zone=zone, filter=f'operationType="{PREEMPTED}"'
        )
        for op in operations.list(request=request):
            if op.operation_type == PREEMPTED and op.target_link:
                found.add(_tail(op.target_link))
    return found


def _tail(url: str) -> str:
    """projects/P/zones/Z/instances/N of a full or partial resource URL."""
    return url[url.index("projects/") :] if "projects/" in url else url


def _options(endpoint: str | None) -> Any:
    from google.api_core.client_options import ClientOptions

    return ClientOptions(api_endpoint=endpoint) if endpoint else None


def _groups_client(kind: str, creds: Any, endpoint: str | None) -> Any:
    from google.cloud import compute_v1

    cls = (
        compute_v1.InstanceGroupManagersClient
        if kind == "zones"
        else compute_v1.RegionInstanceGroupManagersClient
    )
    return cls(transport="rest", credentials=creds, client_options=_options(endpoint))


def _default_credentials() -> Any:
    import google.auth

    credentials, _project = google.auth.default(
        scopes=["https://www.googleapis.com/auth/cloud-platform"]
    )
    return credentials
