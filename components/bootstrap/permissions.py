"""What each deployer may do: the AWS policy document, the GCP custom role's permissions and the
Azure roles' actions, each exactly what the placement components (components/aws.py, gcp.py,
azure.py) manage.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from components.azure_names import AZURE_JOB_IDENTITY_RESOURCE_GROUP as _JOB_IDENTITY_GROUP
from components.bootstrap.args import (
    DEPLOYER_NAME,
    JOB_MANAGED_BY,
)

# --- AWS: what the placement program creates (components/aws.py) ------------------------------
# Job roles, instance profiles and buckets are named by aws._name_prefix: "spotroute-<job>-...".
AWS_JOB_NAME_PREFIX = "spotroute-"
AWS_GPU_AMI_PARAMETER_PATH = "/aws/service/deeplearning/ami/*"
AWS_IMAGE_OWNER = "amazon"  # the Deep Learning AMIs aws.py launches are Amazon-owned
# The permissions boundary every job role must carry (created by the bootstrap, aws.py). A job
# role can never do more than this, whatever inline policy the deployer writes on it.
AWS_JOB_BOUNDARY_NAME = "spotroute-job-boundary"
# At most what aws.checkpoint_policy_document grants a job: its checkpoints and its data, which
# that policy narrows to the job's prefixes. Data and reused checkpoint buckets may be any bucket.
AWS_JOB_BOUNDARY_S3_ACTIONS = (
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:ListBucket",
)
# With remoteAccess, aws.JobIdentity gives the job role what the SSM agent needs for Session
# Manager shells (aws.session_manager_policy_document); the boundary must leave room for it, or
# the agent cannot register and the node is unreachable. Instance registration is on instances;
# the channel actions have no resource types (Resource "*" only).
AWS_JOB_BOUNDARY_SESSION_ACTIONS = (
    "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
)
AWS_SERVICE_LINKED_ROLES = {
    "spot.amazonaws.com": "AWSServiceRoleForEC2Spot",
    "ec2fleet.amazonaws.com": "AWSServiceRoleForEC2Fleet",
}

# --- GCP ----------------------------------------------------------------------------------------
GCP_POOL_ID = "spotroute-deployers"
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
)
# AWS ARNs as GCP's default AWS attribute mapping sees them: the role of an assumed-role session.
GCP_AWS_ROLE_MAPPING = (
    "assertion.arn.contains('assumed-role') ? "
    "assertion.arn.extract('{account_arn}assumed-role/') + 'assumed-role/' + "
    "assertion.arn.extract('assumed-role/{role_name}/') : assertion.arn"
)

# Exactly the permissions components/gcp.py needs (plus the price refresh's two lists). No
# wildcards: a custom role cannot hold them, and a reviewer should read every permission.
GCP_DEPLOYER_PERMISSIONS: tuple[str, ...] = (
    # Network: VPC, subnet, Cloud Router + NAT, firewalls (a firewall edits the network's policy).
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
    "compute.firewalls.create",
    "compute.firewalls.get",
    "compute.firewalls.delete",
    "compute.firewalls.update",
    # SpotGpuGroup: instance template + zonal or regional managed instance group.
    "compute.instanceTemplates.create",
    "compute.instanceTemplates.get",
    "compute.instanceTemplates.delete",
    "compute.instanceTemplates.useReadOnly",
    "compute.instanceGroupManagers.create",
    "compute.instanceGroupManagers.get",
    "compute.instanceGroupManagers.delete",
    "compute.instanceGroupManagers.update",
    "compute.instanceGroups.create",
    "compute.instanceGroups.get",
    "compute.instanceGroups.delete",
    "compute.instanceGroups.update",
    # The group's VMs and boot disks: created in the caller's name; the router restarts stopped
    # (preempted) nodes.
    "compute.instances.create",
    "compute.instances.get",
    "compute.instances.list",
    "compute.instances.delete",
    "compute.instances.start",
    "compute.instances.stop",
    "compute.instances.setMetadata",
    "compute.instances.setLabels",
    "compute.instances.setServiceAccount",
    "compute.disks.create",
    "compute.disks.get",
    "compute.disks.delete",
    "compute.disks.setLabels",
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
    # CheckpointBucket. Its IAM policy (the job's prefix-conditioned grant) needs
    # GCP_GRANT_PERMISSIONS, held under a bucket-name condition.
    "storage.buckets.create",
    "storage.buckets.get",
    "storage.buckets.update",
    "storage.buckets.delete",
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
)

# The job's grant on its checkpoint bucket and on its data bucket: only on spotroute's buckets
# (gcp.CheckpointBucket names them spotroute-...) and the buckets the bootstrap lists
# (gcpJobBuckets: data, reused checkpoint buckets), never the state bucket or anyone else's.
GCP_GRANTS_ROLE_ID = "spotrouteDeployerGrants"
GCP_GRANT_PERMISSIONS: tuple[str, ...] = (
    "storage.buckets.getIamPolicy",
    "storage.buckets.setIamPolicy",
)
GCP_JOB_BUCKET_PREFIX = "spotroute-"
# gcp.CheckpointBucket names every bucket it creates spotroute-<job>-ckpt-<8 hex>; the grants
# condition asks for both parts, so another bucket that merely starts with spotroute- (a state
# bucket, someone's logs) is not grantable.
GCP_JOB_BUCKET_MARKER = "-ckpt-"


def gcp_grant_condition(extra_buckets: Sequence[str] = (), state_bucket: str = "") -> str:
    """CEL condition on the grants role: spotroute's job buckets or listed ones, never the state.

    Cloud Storage names a bucket `projects/_/buckets/<name>` in IAM Conditions, whose resource
    names take only ==, !=, startsWith, endsWith and extract: `extract` returns "" when the
    name lacks the template, so `spotroute-{job}-ckpt-` matches exactly CheckpointBucket's names.
    Callers have refused names with quotes or backslashes.
    """
    buckets = "projects/_/buckets/"
    job_buckets = (
        f'(resource.name.startsWith("{buckets}{GCP_JOB_BUCKET_PREFIX}") && '
        f'resource.name.extract("{buckets}{GCP_JOB_BUCKET_PREFIX}{{job}}{GCP_JOB_BUCKET_MARKER}")'
        ' != "")'
    )
    names = [job_buckets, *(f'resource.name == "{buckets}{bucket}"' for bucket in extra_buckets)]
    condition = f'resource.type == "storage.googleapis.com/Bucket" && ({" || ".join(names)})'
    if state_bucket:
        # Whatever its name: a grant on the state bucket would open every stack's state.
        condition += f' && resource.name != "{buckets}{state_bucket}"'
    return condition


# --- Azure ---------------------------------------------------------------------------------------
AZURE_RESOURCE_GROUP = "spotroute-bootstrap"
# Exactly the actions components/azure.py needs (plus the price refresh's two reads).
AZURE_DEPLOYER_ACTIONS: tuple[str, ...] = (
    # Every job makes its own resource groups (network + identity, checkpoints).
    "Microsoft.Resources/subscriptions/resourceGroups/read",
    "Microsoft.Resources/subscriptions/resourceGroups/write",
    "Microsoft.Resources/subscriptions/resourceGroups/delete",
    # Network: VNet, subnet, NSG; the scale set's NICs join both.
    "Microsoft.Network/virtualNetworks/read",
    "Microsoft.Network/virtualNetworks/write",
    "Microsoft.Network/virtualNetworks/delete",
    "Microsoft.Network/virtualNetworks/subnets/read",
    "Microsoft.Network/virtualNetworks/subnets/write",
    "Microsoft.Network/virtualNetworks/subnets/delete",
    "Microsoft.Network/virtualNetworks/subnets/join/action",
    "Microsoft.Network/networkSecurityGroups/read",
    "Microsoft.Network/networkSecurityGroups/write",
    "Microsoft.Network/networkSecurityGroups/delete",
    "Microsoft.Network/networkSecurityGroups/join/action",
    "Microsoft.Network/networkInterfaces/read",
    "Microsoft.Network/networkInterfaces/write",
    "Microsoft.Network/networkInterfaces/delete",
    "Microsoft.Network/networkInterfaces/join/action",
    # Outbound for the private nodes: a NAT gateway with its static public address; the subnet
    # joins the gateway, the gateway joins the address.
    "Microsoft.Network/natGateways/read",
    "Microsoft.Network/natGateways/write",
    "Microsoft.Network/natGateways/delete",
    "Microsoft.Network/natGateways/join/action",
    "Microsoft.Network/publicIPAddresses/read",
    "Microsoft.Network/publicIPAddresses/write",
    "Microsoft.Network/publicIPAddresses/delete",
    "Microsoft.Network/publicIPAddresses/join/action",
    "Microsoft.Network/locations/operations/read",
    "Microsoft.Network/locations/operationResults/read",
    # SpotGpuGroup: a Flexible scale set creates its VMs and disks in the caller's name.
    "Microsoft.Compute/virtualMachineScaleSets/read",
    "Microsoft.Compute/virtualMachineScaleSets/write",
    "Microsoft.Compute/virtualMachineScaleSets/delete",
    "Microsoft.Compute/virtualMachines/read",
    "Microsoft.Compute/virtualMachines/write",
    "Microsoft.Compute/virtualMachines/delete",
    "Microsoft.Compute/disks/read",
    "Microsoft.Compute/disks/write",
    "Microsoft.Compute/disks/delete",
    "Microsoft.Compute/locations/operations/read",
    # CheckpointBucket: account, blob service (versioning), container, lifecycle policy.
    "Microsoft.Storage/storageAccounts/read",
    "Microsoft.Storage/storageAccounts/write",
    "Microsoft.Storage/storageAccounts/delete",
    "Microsoft.Storage/storageAccounts/blobServices/read",
    "Microsoft.Storage/storageAccounts/blobServices/write",
    "Microsoft.Storage/storageAccounts/blobServices/containers/read",
    "Microsoft.Storage/storageAccounts/blobServices/containers/write",
    "Microsoft.Storage/storageAccounts/blobServices/containers/delete",
    "Microsoft.Storage/storageAccounts/managementPolicies/read",
    "Microsoft.Storage/storageAccounts/managementPolicies/write",
    "Microsoft.Storage/storageAccounts/managementPolicies/delete",
    "Microsoft.Storage/locations/asyncoperations/read",
    # JobIdentity's identity: AZURE_IDENTITY_ACTIONS, in the job-identities group only (below).
    # `route prices refresh` (router/prices/azure.py): SKU availability, spot eviction rates.
    "Microsoft.Compute/skus/read",
    "Microsoft.ResourceGraph/resources/read",
    # `route quotas refresh` (router/prices/quotas/azure.py): family, regional and spot vCPU usage.
    "Microsoft.Compute/locations/usages/read",
)
# Job identities live in one resource group the bootstrap creates; the deployer may create,
# delete and attach (assign/action: give a scale set the identity) user-assigned identities there
# and nowhere else, so it can never attach another workload's identity of the subscription to a
# VM it launches. A third role, assigned at that group's scope only.
AZURE_JOB_IDENTITY_RESOURCE_GROUP = _JOB_IDENTITY_GROUP  # shared with components/azure.py
AZURE_IDENTITIES_ROLE_NAME = f"{DEPLOYER_NAME}-identities"
AZURE_IDENTITY_ACTIONS: tuple[str, ...] = (
    "Microsoft.ManagedIdentity/userAssignedIdentities/read",
    "Microsoft.ManagedIdentity/userAssignedIdentities/write",
    "Microsoft.ManagedIdentity/userAssignedIdentities/delete",
    "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action",
)
# Role assignments live in a second role, assigned under azure_grant_condition().
AZURE_GRANT_ACTIONS: tuple[str, ...] = (
    "Microsoft.Authorization/roleAssignments/read",
    "Microsoft.Authorization/roleAssignments/write",
    "Microsoft.Authorization/roleAssignments/delete",
)
# The Azure JobIdentity's checkpoint role: a custom role the bootstrap defines (one per
# subscription, under a GUID derived from the subscription), holding blob data actions only. The
# built-in Storage Blob Data Contributor it replaces also carries control-plane actions
# (containers/write, containers/delete, generateUserDelegationKey) that the job's path condition
# cannot restrict: a job could have deleted a shared container with other jobs' checkpoints.
AZURE_JOB_ROLE_NAME = "spotroute-job-checkpoints"
_AZURE_BLOBS = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
AZURE_JOB_DATA_ACTIONS: tuple[str, ...] = (
    # Exactly the actions azure_names.blob_prefix_condition guards with the job's path prefix.
    f"{_AZURE_BLOBS}/read",
    f"{_AZURE_BLOBS}/write",
    f"{_AZURE_BLOBS}/delete",
    f"{_AZURE_BLOBS}/add/action",
    f"{_AZURE_BLOBS}/move/action",
)
# What a finished node may do to end its own bill: delete its VM with its disk and NIC. A custom
# role the bootstrap defines once per subscription (like the checkpoint role), which
# azure.SpotGpuGroup assigns to the job identity at the job's resource group only (that group
# holds nothing but the job's network and nodes). Defined by the bootstrap, not per job: the
# deployer then needs no roleDefinitions/write (which would let it define any role) and its
# grants condition names this role's GUID exactly.
AZURE_SELF_DELETE_ROLE_NAME = "spotroute-job-self-delete"
AZURE_SELF_DELETE_ACTIONS: tuple[str, ...] = (
    "Microsoft.Compute/virtualMachines/read",
    "Microsoft.Compute/virtualMachines/delete",
    "Microsoft.Compute/disks/delete",
    "Microsoft.Network/networkInterfaces/delete",
)
# Built-in roles (same ids in every tenant): the reader is what JobIdentity grants on data.
AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"  # state container
AZURE_STORAGE_BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"


def azure_role_guid(subscription_id: str, role_name: str) -> str:
    """A stable GUID for a spotroute role definition, so a re-run targets the same definition."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"spotroute:{subscription_id}/{role_name}"))


def azure_job_role_guid(subscription_id: str) -> str:
    """GUID of the job checkpoint role in this subscription (what azure.JobIdentity assigns)."""
    return azure_role_guid(subscription_id, AZURE_JOB_ROLE_NAME)


def azure_self_delete_role_guid(subscription_id: str) -> str:
    """GUID of the self-delete role in this subscription (what azure.SpotGpuGroup assigns)."""
    return azure_role_guid(subscription_id, AZURE_SELF_DELETE_ROLE_NAME)


def azure_grant_condition(subscription_id: str, deployer_principal_id: str) -> str:
    """ABAC condition (version 2.0) of the deployer's roleAssignments rights.

    Writes: only the job checkpoint role, the self-delete role or Storage Blob Data Reader, only
    to service principals (managed identities), and never to the deployer itself (it could
    otherwise grant itself any container's blobs, or any VM's deletion). Deletes: only
    assignments of those three roles to service principals (never a person's or a group's).

    That is all Azure's role-assignment conditions can say: their attributes are the role
    definition, the principal id and the principal type, nothing about the assignment's scope or
    the principal's resource group (docs/security.md, "What Azure conditions cannot express").
    """
    grantable = (
        f"{azure_job_role_guid(subscription_id)}, {azure_self_delete_role_guid(subscription_id)}, "
        f"{AZURE_STORAGE_BLOB_DATA_READER}"
    )
    return (
        "(\n (\n  !(ActionMatches{'Microsoft.Authorization/roleAssignments/write'})\n )\n OR\n (\n"
        "  @Request[Microsoft.Authorization/roleAssignments:RoleDefinitionId] "
        f"ForAnyOfAnyValues:GuidEquals {{{grantable}}}\n"
        "  AND\n"
        "  @Request[Microsoft.Authorization/roleAssignments:PrincipalType] "
        "ForAnyOfAnyValues:StringEqualsIgnoreCase {'ServicePrincipal'}\n"
        "  AND\n"
        "  @Request[Microsoft.Authorization/roleAssignments:PrincipalId] "
        f"ForAnyOfAllValues:GuidNotEquals {{{deployer_principal_id}}}\n"
        " )\n)\nAND\n(\n (\n  !(ActionMatches{'Microsoft.Authorization/roleAssignments/delete'})\n"
        " )\n OR\n (\n"
        "  @Resource[Microsoft.Authorization/roleAssignments:RoleDefinitionId] "
        f"ForAnyOfAnyValues:GuidEquals {{{grantable}}}\n"
        "  AND\n"
        "  @Resource[Microsoft.Authorization/roleAssignments:PrincipalType] "
        "ForAnyOfAnyValues:StringEqualsIgnoreCase {'ServicePrincipal'}\n"
        " )\n)"
    )


def aws_job_boundary_arn(account_id: str) -> str:
    """ARN of the managed policy every spotroute job role must have as its permissions boundary."""
    return f"arn:aws:iam::{account_id}:policy/{AWS_JOB_BOUNDARY_NAME}"


def aws_job_boundary_policy() -> dict[str, Any]:
    """The job roles' permissions boundary: S3 objects and listings and the Session Manager
    agent's actions, from EC2 instances only.

    The boundary caps every role the deployer creates. It holds only for requests signed with an
    EC2 instance's role credentials (ec2:SourceInstanceARN is present exactly then, as in AWS's
    data-perimeter examples), so a job role that someone made trust an outside account is worth
    nothing outside an instance.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "CheckpointsAndDataFromInstances",
                "Effect": "Allow",
                "Action": list(AWS_JOB_BOUNDARY_S3_ACTIONS),
                "Resource": ["arn:aws:s3:::*", "arn:aws:s3:::*/*"],
                "Condition": {"Null": {"ec2:SourceInstanceARN": "false"}},
            },
            {
                "Sid": "SessionManagerFromInstances",
                "Effect": "Allow",
                "Action": list(AWS_JOB_BOUNDARY_SESSION_ACTIONS[:1]),
                "Resource": "arn:aws:ec2:*:*:instance/*",
                "Condition": {"Null": {"ec2:SourceInstanceARN": "false"}},
            },
            {
                "Sid": "SessionChannelsFromInstances",
                "Effect": "Allow",
                "Action": list(AWS_JOB_BOUNDARY_SESSION_ACTIONS[1:]),
                "Resource": "*",
                "Condition": {"Null": {"ec2:SourceInstanceARN": "false"}},
            },
        ],
    }


def aws_deployer_policy(
    account_id: str,
    *,
    state_bucket: str = "",
    state_prefix: str = "",
    web_identity_audiences: Sequence[str] = (),
) -> dict[str, Any]:
    """The AWS deployer's permissions: exactly what components/aws.py manages, no `*` actions.

    Each statement's Sid says what it is for; docs/security.md explains why each is shaped so.
    """
    acct = account_id
    ec2 = f"arn:aws:ec2:*:{acct}"
    tagged = {"StringEquals": {"aws:ResourceTag/managed-by": JOB_MANAGED_BY}}
    requested = {"StringEquals": {"aws:RequestTag/managed-by": JOB_MANAGED_BY}}
    network_types = (
        "vpc",
        "subnet",
        "internet-gateway",
        "route-table",
        "security-group",
        "vpc-endpoint",
        "elastic-ip",  # the NAT gateway's address
        "natgateway",  # outbound for private nodes
    )
    network = [f"{ec2}:{kind}/*" for kind in network_types]
    launched = [
        f"{ec2}:{kind}/*"
        for kind in ("instance", "volume", "network-interface", "spot-instances-request")
    ]
    template = f"{ec2}:launch-template/*"
    fleet = f"{ec2}:fleet/*"
    job_roles = f"arn:aws:iam::{acct}:role/{AWS_JOB_NAME_PREFIX}*"
    job_profiles = f"arn:aws:iam::{acct}:instance-profile/{AWS_JOB_NAME_PREFIX}*"
    boundary = aws_job_boundary_arn(acct)
    bounded = {"StringEquals": {"iam:PermissionsBoundary": boundary}}
    create_actions = [
        "ec2:CreateVpc",
        "ec2:CreateSubnet",
        "ec2:CreateInternetGateway",
        "ec2:CreateRouteTable",
        "ec2:CreateSecurityGroup",
        "ec2:CreateVpcEndpoint",
        "ec2:AllocateAddress",
        "ec2:CreateNatGateway",
        "ec2:CreateLaunchTemplate",
    ]
    statements: list[dict[str, Any]] = [
        {
            # These EC2 and Pricing reads support no resource-level permissions: "*" is the only
            # resource IAM accepts for them. Reads only (the policy pack checks it).
            "Sid": "ReadOnlyLookups",
            "Effect": "Allow",
            "Action": [
                "ec2:DescribeAccountAttributes",
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeRegions",
                "ec2:DescribeVpcs",
                "ec2:DescribeVpcAttribute",
                "ec2:DescribeSubnets",
                "ec2:DescribeInternetGateways",
                "ec2:DescribeAddresses",
                "ec2:DescribeAddressesAttribute",
                "ec2:DescribeNatGateways",
                "ec2:DescribeRouteTables",
                "ec2:DescribeNetworkAcls",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSecurityGroupRules",
                "ec2:DescribeVpcEndpoints",
                "ec2:DescribeVpcEndpointServices",
                "ec2:DescribePrefixLists",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribeLaunchTemplateVersions",
                "ec2:DescribeFleets",
                "ec2:DescribeFleetInstances",
                "ec2:DescribeFleetHistory",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeImages",
                "ec2:DescribeVolumes",
                "ec2:DescribeTags",
                "ec2:DescribeSpotInstanceRequests",
                "ec2:DescribeSpotPriceHistory",
                "pricing:GetProducts",
                # `route quotas refresh` (router/prices/quotas/aws.py): GPU quotas and usage.
                "servicequotas:GetServiceQuota",
                "servicequotas:GetAWSDefaultServiceQuota",
                "cloudwatch:GetMetricData",
            ],
            "Resource": "*",
        },
        {
            # Network resources and launch templates only come into being tagged as spotroute's.
            "Sid": "CreateTaggedNetworkAndTemplates",
            "Effect": "Allow",
            "Action": create_actions,
            "Resource": [*network, template],
            "Condition": requested,
        },
        {
            # Tags may be written while creating (tag-on-create) — never onto existing resources.
            "Sid": "TagOnCreate",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": [*network, template, fleet, *launched],
            "Condition": {
                "StringEquals": {
                    "ec2:CreateAction": [
                        *(action.removeprefix("ec2:") for action in create_actions),
                        "CreateFleet",
                        "RunInstances",
                    ]
                }
            },
        },
        {
            # Change and delete only resources that carry managed-by=spotroute.
            "Sid": "ManageTaggedResources",
            "Effect": "Allow",
            "Action": [
                "ec2:ModifyVpcAttribute",
                "ec2:DeleteVpc",
                "ec2:ModifySubnetAttribute",
                "ec2:DeleteSubnet",
                "ec2:AttachInternetGateway",
                "ec2:DetachInternetGateway",
                "ec2:DeleteInternetGateway",
                "ec2:ReleaseAddress",
                "ec2:DeleteNatGateway",
                "ec2:CreateRoute",
                "ec2:ReplaceRoute",
                "ec2:DeleteRoute",
                "ec2:AssociateRouteTable",
                "ec2:DisassociateRouteTable",
                "ec2:DeleteRouteTable",
                "ec2:ModifyVpcEndpoint",
                "ec2:DeleteVpcEndpoints",
                "ec2:AuthorizeSecurityGroupIngress",
                "ec2:AuthorizeSecurityGroupEgress",
                "ec2:RevokeSecurityGroupIngress",
                "ec2:RevokeSecurityGroupEgress",
                "ec2:UpdateSecurityGroupRuleDescriptionsIngress",
                "ec2:UpdateSecurityGroupRuleDescriptionsEgress",
                "ec2:ModifySecurityGroupRules",
                "ec2:DeleteSecurityGroup",
                "ec2:CreateLaunchTemplateVersion",
                "ec2:ModifyLaunchTemplate",
                "ec2:DeleteLaunchTemplate",
                "ec2:DeleteLaunchTemplateVersions",
                "ec2:DeleteFleets",
                "ec2:TerminateInstances",
                "ec2:CreateTags",
                "ec2:DeleteTags",
            ],
            "Resource": [*network, template, fleet, *launched],
            "Condition": tagged,
        },
        {
            # A rule is created inside its group; the group itself must be tagged (above).
            "Sid": "RulesOfTaggedSecurityGroups",
            "Effect": "Allow",
            "Action": [
                "ec2:AuthorizeSecurityGroupIngress",
                "ec2:AuthorizeSecurityGroupEgress",
                "ec2:RevokeSecurityGroupIngress",
                "ec2:RevokeSecurityGroupEgress",
                "ec2:ModifySecurityGroupRules",
            ],
            "Resource": f"{ec2}:security-group-rule/*",
        },
        {
            # AWS creates a VPC's default security group untagged; aws.Network adopts it by
            # tagging it managed-by=spotroute, after which ManageTaggedResources applies.
            "Sid": "AdoptDefaultSecurityGroup",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": f"{ec2}:security-group/*",
            "Condition": requested,
        },
        {
            # Launch only through a spotroute launch template, into spotroute subnets and groups.
            "Sid": "LaunchFromTaggedTemplates",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": [
                template,
                f"{ec2}:subnet/*",
                f"{ec2}:security-group/*",
            ],
            "Condition": tagged,
        },
        {
            # The instances, volumes and NICs a launch creates come from such a template.
            "Sid": "NewInstancesFromTemplates",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": launched,
            "Condition": {"ArnLike": {"ec2:LaunchTemplate": template}},
        },
        {
            "Sid": "CreateTaggedFleets",
            "Effect": "Allow",
            "Action": "ec2:CreateFleet",
            "Resource": fleet,
            "Condition": requested,
        },
        {
            # Amazon's Deep Learning AMIs only (aws.GPU_AMI_PARAMETER).
            "Sid": "AmazonImages",
            "Effect": "Allow",
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": "arn:aws:ec2:*::image/*",
            "Condition": {"StringEquals": {"ec2:Owner": AWS_IMAGE_OWNER}},
        },
        {
            "Sid": "GpuImageParameter",
            "Effect": "Allow",
            "Action": ["ssm:GetParameter", "ssm:GetParameters"],
            "Resource": f"arn:aws:ssm:*::parameter{AWS_GPU_AMI_PARAMETER_PATH}",
        },
        {
            # EC2 Spot and EC2 Fleet create their service-linked roles on first use.
            "Sid": "SpotServiceLinkedRoles",
            "Effect": "Allow",
            "Action": "iam:CreateServiceLinkedRole",
            "Resource": [
                f"arn:aws:iam::{acct}:role/aws-service-role/{service}/{role}"
                for service, role in AWS_SERVICE_LINKED_ROLES.items()
            ],
            "Condition": {"StringEquals": {"iam:AWSServiceName": list(AWS_SERVICE_LINKED_ROLES)}},
        },
        {
            # A job role comes into being tagged as spotroute's and bounded by the job boundary,
            # so no inline policy written on it later can reach beyond the boundary.
            "Sid": "CreateBoundedJobRoles",
            "Effect": "Allow",
            "Action": "iam:CreateRole",
            "Resource": job_roles,
            "Condition": {"StringEquals": {**requested["StringEquals"], **bounded["StringEquals"]}},
        },
        {
            "Sid": "CreateTaggedJobProfiles",
            "Effect": "Allow",
            "Action": ["iam:TagRole", "iam:CreateInstanceProfile", "iam:TagInstanceProfile"],
            "Resource": [job_roles, job_profiles],
            "Condition": requested,
        },
        {
            # Inline policies only on roles that carry the boundary; a role created before the
            # boundary existed may be given it, never another one.
            "Sid": "PoliciesOfBoundedJobRoles",
            "Effect": "Allow",
            "Action": ["iam:PutRolePolicy", "iam:PutRolePermissionsBoundary"],
            "Resource": job_roles,
            "Condition": bounded,
        },
        {
            # Job roles and instance profiles: aws.JobIdentity names them spotroute-<job>-...
            # No UpdateAssumeRolePolicy: a job role's trust (ec2.amazonaws.com) is fixed at
            # creation, and no AttachRolePolicy: job roles have inline policies only.
            "Sid": "ManageJobRoles",
            "Effect": "Allow",
            "Action": [
                "iam:GetRole",
                "iam:UpdateRole",
                "iam:UpdateRoleDescription",
                "iam:DeleteRole",
                "iam:UntagRole",
                "iam:ListRoleTags",
                "iam:GetRolePolicy",
                "iam:DeleteRolePolicy",
                "iam:ListRolePolicies",
                "iam:ListAttachedRolePolicies",
                "iam:ListInstanceProfilesForRole",
                "iam:GetInstanceProfile",
                "iam:DeleteInstanceProfile",
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:UntagInstanceProfile",
                "iam:ListInstanceProfileTags",
            ],
            "Resource": [job_roles, job_profiles],
        },
        {
            # Job roles may be handed to EC2 instances, nothing else, no other role.
            "Sid": "PassJobRolesToEc2",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": job_roles,
            "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        },
        {
            # aws.CheckpointBucket: buckets named spotroute-<job>-...; configuration only, the
            # deployer never reads or writes checkpoint objects.
            "Sid": "CheckpointBuckets",
            "Effect": "Allow",
            "Action": [
                "s3:CreateBucket",
                "s3:DeleteBucket",
                "s3:ListBucket",
                "s3:GetBucketLocation",
                "s3:GetBucketAcl",
                "s3:GetBucketCORS",
                "s3:GetBucketWebsite",
                "s3:GetBucketVersioning",
                "s3:PutBucketVersioning",
                "s3:GetAccelerateConfiguration",
                "s3:GetBucketRequestPayment",
                "s3:GetBucketLogging",
                "s3:GetLifecycleConfiguration",
                "s3:PutLifecycleConfiguration",
                "s3:GetReplicationConfiguration",
                "s3:GetEncryptionConfiguration",
                "s3:PutEncryptionConfiguration",
                "s3:GetBucketObjectLockConfiguration",
                "s3:GetBucketTagging",
                "s3:PutBucketTagging",
                "s3:GetBucketPolicy",
                "s3:PutBucketPolicy",
                "s3:DeleteBucketPolicy",
                "s3:GetBucketPublicAccessBlock",
                "s3:PutBucketPublicAccessBlock",
                "s3:GetBucketOwnershipControls",
                "s3:PutBucketOwnershipControls",
            ],
            "Resource": f"arn:aws:s3:::{AWS_JOB_NAME_PREFIX}*",
        },
        {
            # Defence in depth, whatever else is attached to the deployer: no role without the
            # boundary, no boundary taken off, no trust rewritten (which could let an outside
            # account in), no managed policy attached.
            "Sid": "NoUnboundedRoles",
            "Effect": "Deny",
            "Action": [
                "iam:CreateRole",
                "iam:PutRolePolicy",
                "iam:PutRolePermissionsBoundary",
            ],
            "Resource": f"arn:aws:iam::{acct}:role/*",
            "Condition": {"StringNotEquals": {"iam:PermissionsBoundary": boundary}},
        },
        {
            "Sid": "JobRolesKeepBoundaryAndTrust",
            "Effect": "Deny",
            "Action": [
                "iam:DeleteRolePermissionsBoundary",
                "iam:UpdateAssumeRolePolicy",
                "iam:AttachRolePolicy",
            ],
            "Resource": f"arn:aws:iam::{acct}:role/*",
        },
        {
            # The boundary itself is the bootstrap's: the deployer can never widen it.
            "Sid": "NeverTheBoundary",
            "Effect": "Deny",
            "Action": [
                "iam:CreatePolicyVersion",
                "iam:SetDefaultPolicyVersion",
                "iam:DeletePolicyVersion",
                "iam:DeletePolicy",
                "iam:TagPolicy",
                "iam:UntagPolicy",
            ],
            "Resource": boundary,
        },
        {
            # Defence in depth: spotroute-deployer matches role/spotroute-*, so it may never
            # change, pass or delete itself.
            "Sid": "NeverTheDeployerItself",
            "Effect": "Deny",
            "Action": [
                "iam:PassRole",
                "iam:UpdateAssumeRolePolicy",
                "iam:PutRolePolicy",
                "iam:DeleteRolePolicy",
                "iam:AttachRolePolicy",
                "iam:DetachRolePolicy",
                "iam:PutRolePermissionsBoundary",
                "iam:DeleteRolePermissionsBoundary",
                "iam:UpdateRole",
                "iam:DeleteRole",
                "iam:TagRole",
                "iam:UntagRole",
            ],
            "Resource": f"arn:aws:iam::{acct}:role/{DEPLOYER_NAME}",
        },
    ]
    if state_bucket:
        statements += [
            {
                "Sid": "StateBackendList",
                "Effect": "Allow",
                "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
                "Resource": f"arn:aws:s3:::{state_bucket}",
            },
            {
                # Pulumi's DIY backend keeps everything under <path>/.pulumi/.
                "Sid": "StateBackendObjects",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                "Resource": f"arn:aws:s3:::{state_bucket}/{state_prefix}*",
            },
        ]
    if web_identity_audiences:
        statements.append(
            {
                # IAM outbound federation: JWTs for Azure's token exchange, nothing else. The
                # request's Audience is a list: ForAllValues makes every audience asked for one of
                # ours (ForAnyValue would let a token carry extra audiences next to ours), and the
                # Null check refuses a request without one (ForAllValues alone holds for none).
                "Sid": "WebIdentityTokensForAzure",
                "Effect": "Allow",
                "Action": "sts:GetWebIdentityToken",
                "Resource": "*",
                "Condition": {
                    "ForAllValues:StringEquals": {
                        "sts:IdentityTokenAudience": list(web_identity_audiences)
                    },
                    "Null": {"sts:IdentityTokenAudience": "false"},
                },
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}
