"""What the AWS deployer may do: its policy document, exactly what the placement components
(components/aws.py) manage. The boundary every job role carries is in aws_boundary.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.aws_names import SECRET_PARAMETER_PATH
from components.bootstrap.args import DEPLOYER_NAME, JOB_MANAGED_BY
from components.bootstrap.aws_boundary import AWS_JOB_NAME_PREFIX, aws_job_boundary_arn

# --- AWS: what the placement program creates (components/aws.py) ------------------------------
AWS_GPU_AMI_PARAMETER_PATH = "/aws/service/deeplearning/ami/*"
AWS_IMAGE_OWNER = "amazon"  # the Deep Learning AMIs aws.py launches are Amazon-owned
AWS_SERVICE_LINKED_ROLES = {
    "spot.amazonaws.com": "AWSServiceRoleForEC2Spot",
    "ec2fleet.amazonaws.com": "AWSServiceRoleForEC2Fleet",
}
# What force_destroy needs to empty a versioned bucket before DeleteBucket: ListObjectVersions
# (s3:ListBucketVersions) and DeleteObjects naming each version (s3:DeleteObjectVersion)
# (docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectVersions.html, API_DeleteObjects.html).
AWS_EMPTY_BUCKET_ACTIONS = ("s3:ListBucketVersions", "s3:DeleteObjectVersion")
# Bucket settings the deployer writes on its job buckets: never on the state bucket.
AWS_BUCKET_WRITES = (
    "s3:DeleteBucket",
    "s3:PutBucketVersioning",
    "s3:PutLifecycleConfiguration",
    "s3:PutEncryptionConfiguration",
    "s3:PutBucketPolicy",
    "s3:DeleteBucketPolicy",
    "s3:PutBucketPublicAccessBlock",
    "s3:PutBucketOwnershipControls",
    "s3:PutBucketTagging",
)


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
            # force_destroy empties a bucket before deleting it: a staging bucket always, a
            # checkpoint copy the router discards (router/engine/retention.py). Only spotroute's
            # buckets of this account (s3:ResourceAccount: names are global). The deployer can
            # already rewrite those buckets' lifecycle and policy, so this adds no reach.
            "Sid": "EmptyJobBucketsOnDestroy",
            "Effect": "Allow",
            "Action": list(AWS_EMPTY_BUCKET_ACTIONS),
            "Resource": [
                f"arn:aws:s3:::{AWS_JOB_NAME_PREFIX}*",
                f"arn:aws:s3:::{AWS_JOB_NAME_PREFIX}*/*",
            ],
            "Condition": {"StringEquals": {"s3:ResourceAccount": acct}},
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
                # Whatever its name (a spotroute-… state bucket matches the job buckets' pattern):
                # the deployer never empties, deletes or reconfigures the state bucket.
                "Sid": "NeverReconfigureTheStateBucket",
                "Effect": "Deny",
                "Action": [*AWS_EMPTY_BUCKET_ACTIONS, *AWS_BUCKET_WRITES],
                "Resource": [f"arn:aws:s3:::{state_bucket}", f"arn:aws:s3:::{state_bucket}/*"],
            },
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
