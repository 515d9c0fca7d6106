"""What the GCP deployer may do: its custom roles' permissions and the grants condition, each
exactly what the placement components (components/gcp.py) manage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from components.bootstrap.args import DEPLOYER_NAME

GCP_POOL_ID = "spotroute-deployers"
JOB_ACCOUNT_PREFIX = "sr-"  # every job's service account (components.gcp_names)
GCP_ROLE_ID = "spotrouteDeployer"
GCP_WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
GCP_TOKEN_CREATOR = "roles/iam.serviceAccountTokenCreator"
GCP_STATE_ROLE = "roles/storage.objectUser"
GCP_REQUIRED_SERVICES = (
    "iam.googleapis.com",  # service accounts, custom roles, pools
    "iamcredentials.googleapis.com",  # impersonation and ID tokens
    "sts.googleapis.com",  # federated token exchange
    "compute.googleapis.com",
    "storage.googleapis.com",
    "cloudbilling.googleapis.com",  # public price catalog for `route prices refresh`
    "secretmanager.googleapis.com",  # gcp.SpotGpuGroup's secret env
)
# AWS ARNs as GCP's default AWS attribute mapping sees them: the role of an assumed-role session.
GCP_AWS_ROLE_MAPPING = (
    "assertion.arn.contains('assumed-role') ? "
    "assertion.arn.extract('{account_arn}assumed-role/') + 'assumed-role/' + "
    "assertion.arn.extract('assumed-role/{role_name}/') : assertion.arn"
)

# Compute Engine resource types whose names IAM Conditions recognise (resource.type /
# resource.name), as Google lists them: https://cloud.google.com/iam/docs/conditions-resource-
# attributes (resource type values) and https://cloud.google.com/iam/docs/conditions-attribute-
# reference (resource name attribute). Of what a placement touches: firewall rules, instance
# templates, zonal disks and VM instances. Networks, subnetworks, routers, instance group managers
# and instance groups are not among them: a name condition would never match their checks and
# would deny every deploy, so their permissions stay project-wide (docs/security.md).
GCP_NAME_CONDITION_TYPES: dict[str, str] = {
    "firewalls": "compute.googleapis.com/Firewall",
    "instanceTemplates": "compute.googleapis.com/InstanceTemplate",
    "disks": "compute.googleapis.com/Disk",
    "instances": "compute.googleapis.com/Instance",
}

# Exactly the permissions components/gcp.py needs (plus the price refresh's two lists). No
# wildcards: a custom role cannot hold them, and a reviewer should read every permission.
# Everything on a resource type IAM Conditions name (GCP_NAME_CONDITION_TYPES) is in
# GCP_NAMED_PERMISSIONS instead, creating included: Compute Engine checks a create on the new
# resource's own name (projects/<p>/global/firewalls/<name>), which the condition then admits.
GCP_DEPLOYER_PERMISSIONS: tuple[str, ...] = (
    # Network: VPC, subnet, Cloud Router + NAT. A firewall rule (named, below) edits its network's
    # policy: updatePolicy is checked on the network, a type IAM Conditions do not name.
    "compute.networks.create",
    "compute.networks.get",
    "compute.networks.delete",
    "compute.networks.update",
    "compute.networks.updatePolicy",
    "compute.networks.use",
    "compute.subnetworks.create",
    "compute.subnetworks.get",
    "compute.subnetworks.delete",
    "compute.subnetworks.update",
    "compute.subnetworks.use",
    "compute.routers.create",
    "compute.routers.get",
    "compute.routers.delete",
    "compute.routers.update",
    # SpotGpuGroup: zonal or regional managed instance group (its template: named, below).
    "compute.instanceGroupManagers.create",
    "compute.instanceGroupManagers.get",
    "compute.instanceGroupManagers.delete",
    "compute.instanceGroupManagers.update",
    "compute.instanceGroups.create",
    "compute.instanceGroups.get",
    "compute.instanceGroups.delete",
    "compute.instanceGroups.update",
    # Listing the group's VMs is checked on the project; everything else of a VM or its boot
    # disk is in GCP_NAMED_PERMISSIONS.
    "compute.instances.list",
    # Long-running operations, and lookups the provider makes while planning.
    "compute.globalOperations.get",
    "compute.regionOperations.get",
    "compute.zoneOperations.get",
    "compute.regions.get",  # also `route quotas refresh` (prices/quotas/gcp.py): region quotas
    "compute.zones.get",
    "compute.projects.get",
    "resourcemanager.projects.get",
    # `route prices refresh` (router/prices/gcp.py).
    "compute.machineTypes.list",
    "compute.acceleratorTypes.list",
    # CheckpointBucket: create and read here; update, delete and emptying it (force_destroy) in
    # GCP_NAMED_PERMISSIONS; its IAM policy (the job's prefix-conditioned grant) needs
    # GCP_GRANT_PERMISSIONS. Both under bucket-name conditions.
    "storage.buckets.create",
    "storage.buckets.get",
    # JobIdentity: the job's service account; actAs lets the group's VMs run as it. actAs stays
    # project-wide: IAM Conditions recognise resource.name/type/service only for the services
    # their attribute reference lists, and IAM (service accounts) is not one, so a name condition
    # would deny every launch; tags on a service account are its project's; and a binding on each
    # job's account would need iam.serviceAccounts.setIamPolicy, unconditionable and worse —
    # docs/security.md, residual risks.
    "iam.serviceAccounts.create",
    "iam.serviceAccounts.get",
    "iam.serviceAccounts.update",
    "iam.serviceAccounts.delete",
    "iam.serviceAccounts.actAs",
    # SpotGpuGroup's secret env: one secret `spotroute-<stack>-secret-env`, created here (creation
    # is checked on the project); reading, changing and deleting it and its versions is in
    # GCP_NAMED_PERMISSIONS, its IAM policy in GCP_GRANT_PERMISSIONS, both under name conditions.
    "secretmanager.secrets.create",
)

# Every project-scoped name spotroute gives a GCP resource starts with this (gcp_names.gcp_name;
# buckets: GCP_JOB_BUCKET_PREFIX): the deployer's name conditions admit nothing else.
GCP_NAME_PREFIX = "spotroute-"
# What changes or reads an existing resource spotroute made, held under gcp_named_condition: only
# on resources named spotroute-… (buckets: spotroute-<job>-ckpt-…), never the state bucket.
GCP_NAMED_ROLE_ID = "spotrouteDeployerNamed"
GCP_NAMED_PERMISSIONS: tuple[str, ...] = (
    # CheckpointBucket settings, and emptying a bucket before deleting it (force_destroy: a
    # staging bucket, a checkpoint copy the router discards): objects.list + objects.delete.
    "storage.buckets.update",
    "storage.buckets.delete",
    "storage.objects.list",
    "storage.objects.delete",
    # Firewall rules of the job's network: created, read, edited and deleted by name.
    "compute.firewalls.create",
    "compute.firewalls.get",
    "compute.firewalls.update",
    "compute.firewalls.delete",
    # The group's instance template (its start-up script and service account): by name, so the
    # deployer reads no other template's metadata and deletes no other template.
    "compute.instanceTemplates.create",
    "compute.instanceTemplates.get",
    "compute.instanceTemplates.delete",
    "compute.instanceTemplates.useReadOnly",
    # The group's VMs and their boot disks (named after the VMs), created in the caller's name:
    # metadata (the start-up script), service account, labels, restart, delete.
    "compute.instances.create",
    "compute.instances.get",
    "compute.disks.create",
    "compute.disks.get",
    "compute.disks.delete",
    "compute.disks.setLabels",
    "compute.instances.setMetadata",
    "compute.instances.setServiceAccount",
    "compute.instances.setLabels",
    "compute.instances.start",
    "compute.instances.stop",
    "compute.instances.delete",
    # The secret env's secret and its versions.
    "secretmanager.secrets.get",
    "secretmanager.secrets.update",
    "secretmanager.secrets.delete",
    "secretmanager.versions.add",
    "secretmanager.versions.get",
    "secretmanager.versions.access",
    "secretmanager.versions.enable",
    "secretmanager.versions.disable",
    "secretmanager.versions.destroy",
)

# The job's grant on its checkpoint bucket and on its data bucket: only on spotroute's buckets
# (gcp.CheckpointBucket names them spotroute-...) and the buckets the bootstrap lists
# (gcpJobBuckets: data, reused checkpoint buckets), never the state bucket or anyone else's.
GCP_GRANTS_ROLE_ID = "spotrouteDeployerGrants"
GCP_GRANT_PERMISSIONS: tuple[str, ...] = (
    "storage.buckets.getIamPolicy",
    "storage.buckets.setIamPolicy",
    "secretmanager.secrets.getIamPolicy",
    "secretmanager.secrets.setIamPolicy",
)
# gcp.SpotGpuGroup names its secret spotroute-<stack>-secret-env (components/gcp.py); Secret
# Manager names it projects/<number>/secrets/<id> in IAM Conditions.
GCP_SECRET_SUFFIX = "-secret-env"
GCP_JOB_BUCKET_PREFIX = GCP_NAME_PREFIX
# gcp.CheckpointBucket names every bucket it creates spotroute-<job>-ckpt-<8 hex>; the conditions
# ask for both parts, so another bucket that merely starts with spotroute- (a state bucket,
# someone's logs) is not a job bucket.
GCP_JOB_BUCKET_MARKER = "-ckpt-"
_BUCKETS = "projects/_/buckets/"
_JOB_BUCKETS = (
    f'(resource.name.startsWith("{_BUCKETS}{GCP_JOB_BUCKET_PREFIX}") && '
    f'resource.name.extract("{_BUCKETS}{GCP_JOB_BUCKET_PREFIX}{{job}}{GCP_JOB_BUCKET_MARKER}")'
    ' != "")'
)


def _secrets(project_number: str) -> str:
    return f'resource.name.startsWith("projects/{project_number}/secrets/{GCP_NAME_PREFIX}")'


def gcp_grant_condition(
    project_number: str, extra_buckets: Sequence[str] = (), state_bucket: str = ""
) -> str:
    """CEL condition on the grants role: spotroute's job buckets or listed ones, never the state;
    spotroute's secret env secrets (spotroute-…-secret-env) in this project.

    Cloud Storage names a bucket `projects/_/buckets/<name>` in IAM Conditions, whose resource
    names take only ==, !=, startsWith, endsWith and extract: `extract` returns "" when the
    name lacks the template, so `spotroute-{job}-ckpt-` matches exactly CheckpointBucket's names.
    Callers have refused names with quotes or backslashes.
    """
    names = [_JOB_BUCKETS, *(f'resource.name == "{_BUCKETS}{bucket}"' for bucket in extra_buckets)]
    condition = f'resource.type == "storage.googleapis.com/Bucket" && ({" || ".join(names)})'
    if state_bucket:
        # Whatever its name: a grant on the state bucket would open every stack's state.
        condition += f' && resource.name != "{_BUCKETS}{state_bucket}"'
    secrets = (
        'resource.type == "secretmanager.googleapis.com/Secret" && '
        f'{_secrets(project_number)} && resource.name.endsWith("{GCP_SECRET_SUFFIX}")'
    )
    return f"({condition}) || ({secrets})"


def gcp_named_condition(project_id: str, project_number: str, state_bucket: str = "") -> str:
    """CEL condition on GCP_NAMED_PERMISSIONS: each resource type paired with spotroute's names.

    Resource names as IAM Conditions see them (cloud.google.com/iam/docs/conditions-resource-
    attributes): `projects/_/buckets/<b>[/objects/<o>]`, `projects/<p>/global/firewalls/<f>`,
    `projects/<p>/global/instanceTemplates/<t>`, `projects/<p>/zones/<z>/disks/<d>`,
    `projects/<p>/zones/<z>/instances/<i>`, `projects/<number>/secrets/<s>[/versions/<v>]`.
    Objects are named after their bucket, so an object of a job bucket matches the bucket's rule.
    Every spotroute name starts with GCP_NAME_PREFIX, whichever stack of a job made it
    (`spotroute-<job>-…`, `spotroute-<n>-<job>-…`): the conditions ask for that prefix only.
    """
    storage = (
        '(resource.type == "storage.googleapis.com/Bucket" || '
        f'resource.type == "storage.googleapis.com/Object") && {_JOB_BUCKETS}'
    )
    if state_bucket:
        # The state bucket and its objects, whatever the bucket is called.
        storage += (
            f' && resource.name != "{_BUCKETS}{state_bucket}"'
            f' && !resource.name.startsWith("{_BUCKETS}{state_bucket}/")'
        )
    firewalls = (
        'resource.type == "compute.googleapis.com/Firewall" && '
        f'resource.name.startsWith("projects/{project_id}/global/firewalls/{GCP_NAME_PREFIX}")'
    )
    templates = (
        'resource.type == "compute.googleapis.com/InstanceTemplate" && resource.name.startsWith('
        f'"projects/{project_id}/global/instanceTemplates/{GCP_NAME_PREFIX}")'
    )
    disks = (
        'resource.type == "compute.googleapis.com/Disk" && resource.name.extract('
        f'"projects/{project_id}/zones/{{zone}}/disks/{GCP_NAME_PREFIX}") != ""'
    )
    instances = (
        'resource.type == "compute.googleapis.com/Instance" && resource.name.extract('
        f'"projects/{project_id}/zones/{{zone}}/instances/{GCP_NAME_PREFIX}") != ""'
    )
    secrets = (
        '(resource.type == "secretmanager.googleapis.com/Secret" || '
        f'resource.type == "secretmanager.googleapis.com/SecretVersion") && '
        f"{_secrets(project_number)}"
    )
    clauses = (storage, firewalls, templates, disks, instances, secrets)
    return " || ".join(f"({clause})" for clause in clauses)


def foreign_service_accounts(
    accounts: Iterable[Mapping[str, Any]], project_id: str, router_service_account: str = ""
) -> list[str]:
    """Enabled service accounts of the project that are not spotroute's — its deployer, its job
    accounts `sr-…` (gcp_names.service_account_id), the router's own: every one of them the
    deployer could run a VM as (`iam.serviceAccounts.actAs` is project-wide)."""
    domain = f"@{project_id}.iam.gserviceaccount.com"
    ours = {f"{DEPLOYER_NAME}{domain}", router_service_account}
    return sorted(
        str(a.get("email"))
        for a in accounts
        if not a.get("disabled")
        and str(a.get("email")) not in ours
        and not (str(a.get("email")).startswith(JOB_ACCOUNT_PREFIX)
                 and str(a.get("email")).endswith(domain))
    )  # fmt: skip
