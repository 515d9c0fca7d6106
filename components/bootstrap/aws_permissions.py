"""What the AWS deployer may do: its policy document and the permissions boundary every job role
carries, each exactly what the placement components (components/aws.py) manage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.aws_names import SECRET_PARAMETER_PATH
from components.bootstrap.args import DEPLOYER_NAME, JOB_MANAGED_BY

# --- AWS: what the placement program creates (components/aws.py) ------------------------------
# Job roles, instance profiles and buckets are named by aws_names.physical_name_prefix:
# "spotroute-<job>-...".
AWS_JOB_NAME_PREFIX = "spotroute-"
AWS_GPU_AMI_PARAMETER_PATH = "/aws/service/deeplearning/ami/*"
AWS_IMAGE_OWNER = "amazon"  # the Deep Learning AMIs aws.py launches are Amazon-owned
# The permissions boundary every job role must carry (created by the bootstrap, aws.py). A job
# role can never do more than this, whatever inline policy the deployer writes on it.
AWS_JOB_BOUNDARY_NAME = "spotroute-job-boundary"
# At most what aws_names.checkpoint_policy_document grants a job: its checkpoints and its data,
# which that policy narrows to the job's prefixes. Data and reused checkpoint buckets may be any
# bucket.
AWS_JOB_BOUNDARY_S3_ACTIONS = (
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:ListBucket",
)
# With remoteAccess, aws.JobIdentity gives the job role what the SSM agent needs for Session
# Manager shells (aws_names.session_manager_policy_document); the boundary must leave room for it,
# or the agent cannot register and the node is unreachable. Instance registration is on instances;
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
                # aws.SpotGpuGroup's secret env: one SecureString parameter per stack under
                # /spotroute/, read by the node at boot (the role's own policy names the one ARN).
                "Sid": "SecretEnvFromInstances",
                "Effect": "Allow",
                "Action": ["ssm:GetParameter"],
                "Resource": f"arn:aws:ssm:*:*:parameter{SECRET_PARAMETER_PATH}/*",
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
    # The cluster placement group of an EFA group (components/fabric.py): nodes launch into it.
    placement_group = f"{ec2}:placement-group/*"
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
        "ec2:CreatePlacementGroup",
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
                "ec2:DescribePlacementGroups",
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
            "Resource": [*network, template, placement_group],
            "Condition": requested,
        },
        {
            # Tags may be written while creating (tag-on-create) — never onto existing resources.
            "Sid": "TagOnCreate",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": [*network, template, placement_group, fleet, *launched],
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
                "ec2:DeletePlacementGroup",
                "ec2:DeleteFleets",
                "ec2:TerminateInstances",
                "ec2:CreateTags",
                "ec2:DeleteTags",
            ],
            "Resource": [*network, template, placement_group, fleet, *launched],
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
                placement_group,
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
            # aws.SpotGpuGroup's secret env parameters, /spotroute/<stack>/secret-env only.
            "Sid": "SecretEnvParameters",
            "Effect": "Allow",
            "Action": [
                "ssm:PutParameter",
                "ssm:DeleteParameter",
                "ssm:GetParameter",
                "ssm:GetParameters",
                "ssm:AddTagsToResource",
                "ssm:RemoveTagsFromResource",
                "ssm:ListTagsForResource",
            ],
            "Resource": f"arn:aws:ssm:*:{acct}:parameter{SECRET_PARAMETER_PATH}/*",
        },
        {
            # The provider reads a parameter's metadata by DescribeParameters, which has no
            # resource type (Service Authorization Reference): metadata only, never values.
            "Sid": "DescribeSecretEnvParameters",
            "Effect": "Allow",
            "Action": ["ssm:DescribeParameters"],
            "Resource": "*",
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
