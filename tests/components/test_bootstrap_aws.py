"""The AWS deployer: who may assume it (web identity only) and what its policy allows."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import pytest
from harness import ACCOUNT_ID, run_program
from test_bootstrap import (
    AZ_CREDENTIAL,
    FEDERATION_AUDIENCE,
    GITHUB,
    GITLAB,
    MANAGED_POLICY,
    OIDC_PROVIDER,
    OUTBOUND,
    OUTBOUND_ISSUER,
    PRINCIPAL_ID,
    ROLE,
    ROLE_POLICY,
    SA_UNIQUE_ID,
    TENANT,
    allowed_actions,
    args,
    deploy,
    document,
    listed,
    statement,
)

from components.bootstrap import (
    AWS_STS_AUDIENCE,
    AZURE_EXCHANGE_AUDIENCE,
)
from policies.rules.iam import iam_wildcard_violations

# --- AWS ------------------------------------------------------------------------------------------

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")


@pytest.mark.parametrize("home", ["oidc:github-main", "gcp", "azure"])
def test_aws_deployer_trusts_only_web_identity_pinned_to_audience_and_subject(home: str) -> None:
    stack = deploy(args(home=home, azure_federation_audience=FEDERATION_AUDIENCE))
    trust = document(stack, ROLE, "assumeRolePolicy")

    for grant in trust["Statement"]:
        assert grant["Effect"] == "Allow"
        assert grant["Action"] == "sts:AssumeRoleWithWebIdentity"
        assert set(grant["Principal"]) == {"Federated"}
        assert set(grant["Condition"]) == {"StringEquals"}, "exact matches only, no StringLike"
        claims = grant["Condition"]["StringEquals"]
        assert {key.rsplit(":", 1)[1] for key in claims} >= {"aud", "sub"}
        for value in claims.values():
            assert isinstance(value, str) and value and not set(value) & set("*?")


def test_aws_deployer_trusts_each_external_issuer_for_its_exact_subject() -> None:
    stack = deploy(args(clouds=("aws",), oidc_issuers=(GITHUB, GITLAB)))
    trust = document(stack, ROLE, "assumeRolePolicy")

    github = statement(trust, "OidcGithubMain")
    assert github["Principal"]["Federated"] == (
        f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/token.actions.githubusercontent.com"
    )
    assert github["Condition"]["StringEquals"] == {
        "token.actions.githubusercontent.com:aud": AWS_STS_AUDIENCE,
        "token.actions.githubusercontent.com:sub": "repo:acme/infra:ref:refs/heads/main",
    }
    gitlab = statement(trust, "OidcGitlabProd")["Condition"]["StringEquals"]
    assert gitlab["gitlab.example.com:aud"] == "https://gitlab.example.com"
    providers = {r.inputs["url"]: r.inputs["clientIdLists"] for r in stack.of_type(OIDC_PROVIDER)}
    assert providers == {
        "https://token.actions.githubusercontent.com": [AWS_STS_AUDIENCE],
        "https://gitlab.example.com": ["https://gitlab.example.com"],
    }
    assert stack.one(ROLE).inputs["name"] == "spotroute-deployer"


def test_aws_deployer_trusts_the_gcp_deployer_by_its_unique_id_when_the_router_runs_on_gcp() -> (
    None
):
    stack = deploy(args(home="gcp"))
    trust = document(stack, ROLE, "assumeRolePolicy")

    google = statement(trust, "GcpDeployer")
    assert google["Principal"] == {"Federated": "accounts.google.com"}
    assert google["Condition"]["StringEquals"] == {
        "accounts.google.com:aud": SA_UNIQUE_ID,
        "accounts.google.com:oaud": AWS_STS_AUDIENCE,
        "accounts.google.com:sub": SA_UNIQUE_ID,
    }
    assert [s["Sid"] for s in trust["Statement"]] == ["OidcGithubMain", "GcpDeployer"]


def test_aws_deployer_trusts_the_azure_identity_by_tenant_audience_and_principal() -> None:
    stack = deploy(args(home="azure", azure_federation_audience=FEDERATION_AUDIENCE))
    trust = document(stack, ROLE, "assumeRolePolicy")

    issuer = f"sts.windows.net/{TENANT}/"
    azure = statement(trust, "AzureDeployer")
    assert azure["Principal"]["Federated"] == f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{issuer}"
    assert azure["Condition"]["StringEquals"] == {
        f"{issuer}:aud": FEDERATION_AUDIENCE,
        f"{issuer}:sub": PRINCIPAL_ID,
    }
    providers = {r.inputs["url"]: r.inputs["clientIdLists"] for r in stack.of_type(OIDC_PROVIDER)}
    assert providers[f"https://{issuer}"] == [FEDERATION_AUDIENCE]


def test_existing_aws_oidc_provider_is_referenced_not_created_again() -> None:
    stack = deploy(
        args(clouds=("aws",), aws_existing_oidc_providers=(GITHUB.url,), aws_account_id=ACCOUNT_ID)
    )

    assert stack.of_type(OIDC_PROVIDER) == []
    github = statement(document(stack, ROLE, "assumeRolePolicy"), "OidcGithubMain")
    assert github["Principal"]["Federated"] == (
        f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/token.actions.githubusercontent.com"
    )
    assert stack.outputs["aws_oidc_provider_arns"] == {GITHUB.url: github["Principal"]["Federated"]}


def test_aws_deployer_permissions_name_every_action_and_pass_the_wildcard_policy() -> None:
    stack = deploy(args(clouds=("aws",)))
    policy = document(stack, ROLE_POLICY, "policy")

    for grant in policy["Statement"]:
        assert "NotAction" not in grant and "NotResource" not in grant
        for action in listed(grant["Action"]):
            assert "*" not in action, action
        if "*" in listed(grant["Resource"]):
            # Only reads that IAM cannot scope to a resource.
            verbs = {a.split(":", 1)[1] for a in listed(grant["Action"])}
            assert all(v.startswith(("Describe", "Get", "List")) for v in verbs), grant["Sid"]
    violations = iam_wildcard_violations(
        ROLE_POLICY,
        stack.one(ROLE_POLICY).inputs,
        {"read_only_action_prefixes": ["Get", "List", "Describe"]},
    )
    assert violations == []


def test_aws_deployer_passes_only_job_roles_and_only_to_ec2() -> None:
    policy = document(deploy(args(clouds=("aws",))), ROLE_POLICY, "policy")

    passing = [s for s in policy["Statement"] if "iam:PassRole" in listed(s["Action"])]
    allow = [s for s in passing if s["Effect"] == "Allow"]
    assert len(allow) == 1
    assert allow[0]["Resource"] == f"arn:aws:iam::{ACCOUNT_ID}:role/spotroute-*"
    assert allow[0]["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}
    deny = statement(policy, "NeverTheDeployerItself")
    assert deny["Effect"] == "Deny"
    assert deny["Resource"] == f"arn:aws:iam::{ACCOUNT_ID}:role/spotroute-deployer"
    assert {"iam:PassRole", "iam:PutRolePolicy", "iam:UpdateAssumeRolePolicy"} <= set(
        deny["Action"]
    )


BOUNDARY = f"arn:aws:iam::{ACCOUNT_ID}:policy/spotroute-job-boundary"
JOB_ROLES = f"arn:aws:iam::{ACCOUNT_ID}:role/spotroute-*"
ANY_ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/*"


def granting(policy: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [
        s for s in policy["Statement"] if s["Effect"] == "Allow" and action in listed(s["Action"])
    ]


def test_aws_deployer_creates_and_edits_job_roles_only_under_the_spotroute_boundary() -> None:
    policy = document(deploy(args(clouds=("aws",))), ROLE_POLICY, "policy")

    assert granting(policy, "iam:CreateRole") == [
        {
            "Sid": "CreateBoundedJobRoles",
            "Effect": "Allow",
            "Action": "iam:CreateRole",
            "Resource": JOB_ROLES,
            "Condition": {
                "StringEquals": {
                    "aws:RequestTag/managed-by": "spotroute",
                    "iam:PermissionsBoundary": BOUNDARY,
                }
            },
        }
    ]
    bounded = {"StringEquals": {"iam:PermissionsBoundary": BOUNDARY}}
    for action in ("iam:PutRolePolicy", "iam:PutRolePermissionsBoundary"):
        (grant,) = granting(policy, action)
        assert grant["Resource"] == JOB_ROLES
        assert grant["Condition"] == bounded
    # Job roles have inline policies only: no managed policy (AdministratorAccess!) is attachable.
    assert "iam:AttachRolePolicy" not in allowed_actions(policy)
    assert statement(policy, "NoUnboundedRoles") == {
        "Sid": "NoUnboundedRoles",
        "Effect": "Deny",
        "Action": ["iam:CreateRole", "iam:PutRolePolicy", "iam:PutRolePermissionsBoundary"],
        "Resource": ANY_ROLE,
        "Condition": {"StringNotEquals": {"iam:PermissionsBoundary": BOUNDARY}},
    }


def test_aws_deployer_can_never_rewrite_a_trust_policy_or_drop_a_boundary() -> None:
    policy = document(deploy(args(clouds=("aws",))), ROLE_POLICY, "policy")

    # A job role's trust (ec2.amazonaws.com) is written once, at creation; rewriting it could let
    # an outside account assume the role.
    assert "iam:UpdateAssumeRolePolicy" not in allowed_actions(policy)
    assert "iam:DeleteRolePermissionsBoundary" not in allowed_actions(policy)
    assert statement(policy, "JobRolesKeepBoundaryAndTrust") == {
        "Sid": "JobRolesKeepBoundaryAndTrust",
        "Effect": "Deny",
        "Action": [
            "iam:DeleteRolePermissionsBoundary",
            "iam:UpdateAssumeRolePolicy",
            "iam:AttachRolePolicy",
        ],
        "Resource": ANY_ROLE,
    }
    never = statement(policy, "NeverTheBoundary")
    assert never["Effect"] == "Deny" and never["Resource"] == BOUNDARY
    assert {"iam:CreatePolicyVersion", "iam:SetDefaultPolicyVersion"} <= set(never["Action"])
    granted = allowed_actions(policy)
    assert not [a for a in granted if "PolicyVersion" in a or a == "iam:DeletePolicy"]


def test_bootstrap_creates_the_job_boundary_which_holds_only_on_ec2_instances() -> None:
    stack = deploy(args(clouds=("aws",)))

    boundary = stack.one(MANAGED_POLICY)
    assert boundary.inputs["name"] == "spotroute-job-boundary"
    assert stack.outputs["aws_job_permissions_boundary"] == BOUNDARY
    from_instances = {"Null": {"ec2:SourceInstanceARN": "false"}}
    assert document(stack, MANAGED_POLICY, "policy") == {
        "Version": "2012-10-17",
        "Statement": [
            {
                # spotroute's own buckets, of this account only: bucket names are global, and
                # s3:ResourceAccount is the owner's account (Amazon S3 condition keys,
                # docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html).
                "Sid": "OwnBucketsFromInstances",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"],
                "Resource": ["arn:aws:s3:::spotroute-*", "arn:aws:s3:::spotroute-*/*"],
                # ec2:SourceInstanceARN is present only for EC2 instance-role credentials: a job
                # role trusted by an outside account would be worth nothing there.
                "Condition": {
                    "StringEquals": {"s3:ResourceAccount": ACCOUNT_ID},
                    **from_instances,
                },
            },
            {
                # The secret env: the node reads its stack's one SecureString parameter.
                "Sid": "SecretEnvFromInstances",
                "Effect": "Allow",
                "Action": ["ssm:GetParameter"],
                "Resource": "arn:aws:ssm:*:*:parameter/spotroute/*",
                "Condition": from_instances,
            },
            {
                # remoteAccess: the SSM agent registers its own instance...
                "Sid": "SessionManagerFromInstances",
                "Effect": "Allow",
                "Action": ["ssm:UpdateInstanceInformation"],
                "Resource": "arn:aws:ec2:*:*:instance/*",
                "Condition": from_instances,
            },
            {
                # ... and opens the shell's channels (no resource types: "*" only).
                "Sid": "SessionChannelsFromInstances",
                "Effect": "Allow",
                "Action": [
                    "ssmmessages:CreateControlChannel",
                    "ssmmessages:CreateDataChannel",
                    "ssmmessages:OpenControlChannel",
                    "ssmmessages:OpenDataChannel",
                ],
                "Resource": "*",
                "Condition": from_instances,
            },
        ],
    }


def test_the_job_boundary_reaches_listed_buckets_each_in_its_own_account_never_the_state() -> None:
    stack = deploy(
        args(
            clouds=("aws",),
            aws_job_buckets=("acme-datasets", "lake-eval@210987654321"),
            state_bucket="s3://spotroute-state/teams/ml",
        )
    )
    boundary = document(stack, MANAGED_POLICY, "policy")

    own = statement(boundary, f"ListedBucketsOf{ACCOUNT_ID}FromInstances")
    assert own["Resource"] == ["arn:aws:s3:::acme-datasets", "arn:aws:s3:::acme-datasets/*"]
    assert own["Condition"]["StringEquals"] == {"s3:ResourceAccount": ACCOUNT_ID}
    lake = statement(boundary, "ListedBucketsOf210987654321FromInstances")
    assert lake["Resource"] == ["arn:aws:s3:::lake-eval", "arn:aws:s3:::lake-eval/*"]
    assert lake["Condition"]["StringEquals"] == {"s3:ResourceAccount": "210987654321"}
    # No statement reaches every bucket any more.
    s3 = [r for grant in boundary["Statement"] for r in listed(grant["Resource"]) if ":s3:" in r]
    assert not any(r.startswith(("arn:aws:s3:::*", "arn:aws:s3:::*/")) for r in s3), s3
    # The state bucket matches spotroute-*: the boundary denies it to every job role.
    never = statement(boundary, "NeverTheStateBucket")
    assert never["Effect"] == "Deny"
    assert never["Resource"] == ["arn:aws:s3:::spotroute-state", "arn:aws:s3:::spotroute-state/*"]


@pytest.mark.parametrize(
    ("buckets", "problem"),
    [
        (("acme.data",), "'acme.data'"),
        (("acme@12345",), "'acme@12345'"),
        (("s3://acme",), "'s3://acme'"),
    ],
)
def test_a_listed_aws_job_bucket_must_be_a_bucket_name(
    buckets: tuple[str, ...], problem: str
) -> None:
    with pytest.raises(ValueError, match=f"aws_job_buckets: {problem}"):
        args(clouds=("aws",), aws_job_buckets=buckets)


def test_the_job_boundary_covers_every_bucket_a_placement_grants(
    aws_config: dict[str, Any],
) -> None:
    import fnmatch

    boundary = document(
        deploy(args(clouds=("aws",), aws_job_buckets=("acme-data",))), MANAGED_POLICY, "policy"
    )
    reach = [r for grant in boundary["Statement"] if grant["Effect"] == "Allow"
             for r in listed(grant["Resource"]) if r.startswith("arn:aws:s3:::")]  # fmt: skip
    placement = run_program({**aws_config, "dataUrls": ["s3://acme-data/imagenet/"]})

    for resource in placement.of_type(ROLE_POLICY):
        for grant in json.loads(resource.inputs["policy"])["Statement"]:
            for arn in listed(grant["Resource"]):
                if arn.startswith("arn:aws:s3:::"):
                    assert any(fnmatch.fnmatchcase(arn, pattern) for pattern in reach), arn


def test_the_job_boundary_covers_every_action_a_job_role_is_granted(
    aws_config: dict[str, Any],
) -> None:
    boundary = document(deploy(args(clouds=("aws",))), MANAGED_POLICY, "policy")
    ceiling = allowed_actions(boundary)
    placement = run_program({**aws_config, "dataUrls": ["s3://acme-data/imagenet/"]})

    for resource in placement.of_type(ROLE_POLICY):
        granted = allowed_actions(json.loads(resource.inputs["policy"]))
        assert granted <= ceiling, granted - ceiling


def test_the_job_boundary_lets_a_remote_access_node_register_with_session_manager(
    aws_config: dict[str, Any],
) -> None:
    # remoteAccess gives the job role the SSM agent's actions; a boundary without them would
    # leave the node unreachable (the agent cannot register), whatever the role says.
    boundary = document(deploy(args(clouds=("aws",))), MANAGED_POLICY, "policy")
    ceiling = allowed_actions(boundary)
    placement = run_program({**aws_config, "remoteAccess": True})

    policies = [json.loads(r.inputs["policy"]) for r in placement.of_type(ROLE_POLICY)]
    granted = set().union(*(allowed_actions(p) for p in policies))
    assert "ssm:UpdateInstanceInformation" in granted
    assert granted <= ceiling, granted - ceiling


def test_aws_placement_job_roles_carry_the_bootstrap_boundary(aws_config: dict[str, Any]) -> None:
    placement = run_program(aws_config)

    assert placement.of_type(ROLE)
    for role in placement.of_type(ROLE):
        assert role.inputs.get("permissionsBoundary") == BOUNDARY


def test_aws_deployer_changes_ec2_resources_only_when_tagged_as_spotroutes() -> None:
    policy = document(deploy(args(clouds=("aws",))), ROLE_POLICY, "policy")

    for grant in policy["Statement"]:
        writes = [
            a
            for a in listed(grant["Action"])
            if a.startswith("ec2:") and not a.startswith("ec2:Describe")
        ]
        resources = listed(grant["Resource"])
        if not writes or grant["Effect"] != "Allow":
            continue
        only_rules = all(r.endswith(":security-group-rule/*") for r in resources)
        # Rules live inside a group that itself must be tagged (checked by another statement).
        assert "Condition" in grant or only_rules, grant["Sid"]
    assert statement(policy, "ManageTaggedResources")["Condition"] == {
        "StringEquals": {"aws:ResourceTag/managed-by": "spotroute"}
    }
    assert statement(policy, "CreateTaggedNetworkAndTemplates")["Condition"] == {
        "StringEquals": {"aws:RequestTag/managed-by": "spotroute"}
    }


# What each AWS resource type of a placement needs from the deployer. A new type in
# components/aws.py fails test_aws_deployer_may_manage_everything_an_aws_placement_creates until
# it is listed here and the deployer policy grants it.
AWS_NEEDS: dict[str, set[str]] = {
    "aws:ec2/vpc:Vpc": {"ec2:CreateVpc", "ec2:ModifyVpcAttribute", "ec2:DeleteVpc"},
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": {
        "ec2:CreateTags",
        "ec2:RevokeSecurityGroupIngress",
        "ec2:RevokeSecurityGroupEgress",
    },
    "aws:ec2/subnet:Subnet": {"ec2:CreateSubnet", "ec2:ModifySubnetAttribute", "ec2:DeleteSubnet"},
    "aws:ec2/internetGateway:InternetGateway": {
        "ec2:CreateInternetGateway",
        "ec2:AttachInternetGateway",
        "ec2:DetachInternetGateway",
        "ec2:DeleteInternetGateway",
    },
    "aws:ec2/routeTable:RouteTable": {
        "ec2:CreateRouteTable",
        "ec2:CreateRoute",
        "ec2:DeleteRouteTable",
    },
    "aws:ec2/routeTableAssociation:RouteTableAssociation": {
        "ec2:AssociateRouteTable",
        "ec2:DisassociateRouteTable",
    },
    "aws:ec2/vpcEndpoint:VpcEndpoint": {"ec2:CreateVpcEndpoint", "ec2:DeleteVpcEndpoints"},
    "aws:ec2/securityGroup:SecurityGroup": {
        "ec2:CreateSecurityGroup",
        "ec2:AuthorizeSecurityGroupIngress",
        "ec2:AuthorizeSecurityGroupEgress",
        "ec2:DeleteSecurityGroup",
    },
    "aws:ec2/eip:Eip": {"ec2:AllocateAddress", "ec2:ReleaseAddress", "ec2:DescribeAddresses"},
    "aws:ec2/natGateway:NatGateway": {
        "ec2:CreateNatGateway",
        "ec2:DeleteNatGateway",
        "ec2:DescribeNatGateways",
    },
    # force_destroy (staging buckets, discarded copies) lists and deletes every object version.
    "aws:s3/bucket:Bucket": {
        "s3:CreateBucket",
        "s3:DeleteBucket",
        "s3:PutBucketTagging",
        "s3:ListBucketVersions",
        "s3:DeleteObjectVersion",
    },
    "aws:s3/bucketVersioning:BucketVersioning": {"s3:PutBucketVersioning"},
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": {
        "s3:PutEncryptionConfiguration"
    },
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": {"s3:PutBucketPublicAccessBlock"},
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": {"s3:PutBucketOwnershipControls"},
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": {
        "s3:PutLifecycleConfiguration"
    },
    "aws:s3/bucketPolicy:BucketPolicy": {"s3:PutBucketPolicy", "s3:DeleteBucketPolicy"},
    "aws:iam/role:Role": {"iam:CreateRole", "iam:TagRole", "iam:DeleteRole"},
    "aws:iam/rolePolicy:RolePolicy": {"iam:PutRolePolicy", "iam:DeleteRolePolicy"},
    "aws:iam/instanceProfile:InstanceProfile": {
        "iam:CreateInstanceProfile",
        "iam:AddRoleToInstanceProfile",
        "iam:RemoveRoleFromInstanceProfile",
        "iam:DeleteInstanceProfile",
    },
    "aws:ec2/launchTemplate:LaunchTemplate": {
        "ec2:CreateLaunchTemplate",
        "ec2:CreateLaunchTemplateVersion",
        "ec2:DeleteLaunchTemplate",
        "iam:PassRole",
    },
    # EFA groups (p4d, p4de, p5): a cluster placement group, created tagged, deleted by tag.
    "aws:ec2/placementGroup:PlacementGroup": {
        "ec2:CreatePlacementGroup",
        "ec2:DeletePlacementGroup",
    },
    "aws:ec2/fleet:Fleet": {
        "ec2:CreateFleet",
        "ec2:RunInstances",
        "ec2:DeleteFleets",
        "ec2:TerminateInstances",
        "iam:PassRole",
        "iam:CreateServiceLinkedRole",
    },
}


def test_aws_deployer_may_manage_everything_an_aws_placement_creates(
    aws_config: dict[str, Any],
) -> None:
    placement = run_program(aws_config)
    policy = document(deploy(args(clouds=("aws",))), ROLE_POLICY, "policy")
    granted = allowed_actions(policy)

    created = {r.type for r in placement.custom_resources()}
    assert created <= set(AWS_NEEDS), f"unlisted types: {created - set(AWS_NEEDS)}"
    for type_ in created:
        assert AWS_NEEDS[type_] <= granted, (type_, AWS_NEEDS[type_] - granted)
    # sts:GetCallerIdentity needs no permission (it cannot be denied).
    assert {i.token for i in placement.invokes} <= {
        "aws:ssm/getParameter:getParameter",
        "aws:index/getCallerIdentity:getCallerIdentity",
    }
    assert "ssm:GetParameter" in granted
    # Physical names of the job's buckets, roles and profiles fall under the deployer's patterns.
    buckets = statement(policy, "CheckpointBuckets")["Resource"]
    roles, profiles = statement(policy, "ManageJobRoles")["Resource"]
    for resource in placement.of_type("aws:s3/bucket:Bucket"):
        assert fnmatch.fnmatchcase(f"arn:aws:s3:::{resource.inputs['bucketPrefix']}x", buckets)
    for resource in placement.of_type("aws:iam/role:Role"):
        arn = f"arn:aws:iam::{ACCOUNT_ID}:role/{resource.inputs['namePrefix']}x"
        assert fnmatch.fnmatchcase(arn, roles)
    for resource in placement.of_type("aws:iam/instanceProfile:InstanceProfile"):
        arn = f"arn:aws:iam::{ACCOUNT_ID}:instance-profile/{resource.inputs['namePrefix']}x"
        assert fnmatch.fnmatchcase(arn, profiles)
    # Every tag condition the deployer relies on is met by what the placement tags.
    for resource in placement.custom_resources():
        tags = resource.inputs.get("tags")
        if tags is not None:
            assert tags.get("managed-by") == "spotroute", resource.type


# IAM actions the deployer holds besides AWS_NEEDS' create/delete ones, each for a reason.
AWS_IAM_UPKEEP = {
    # The provider reads back and updates what it created.
    "iam:GetRole",
    "iam:UpdateRole",
    "iam:UpdateRoleDescription",
    "iam:ListRoleTags",
    "iam:UntagRole",
    "iam:GetRolePolicy",
    "iam:ListRolePolicies",
    "iam:ListAttachedRolePolicies",
    "iam:ListInstanceProfilesForRole",
    "iam:GetInstanceProfile",
    "iam:TagInstanceProfile",
    "iam:UntagInstanceProfile",
    "iam:ListInstanceProfileTags",
    # A job role made before the boundary existed may be given it (and only it).
    "iam:PutRolePermissionsBoundary",
}


def test_every_iam_action_of_the_aws_deployer_is_justified() -> None:
    granted = allowed_actions(document(deploy(args(clouds=("aws",))), ROLE_POLICY, "policy"))
    needed = {a for actions in AWS_NEEDS.values() for a in actions if a.startswith("iam:")}

    assert {a for a in granted if a.startswith("iam:")} == needed | AWS_IAM_UPKEEP


def test_aws_deployer_reads_prices_for_the_router() -> None:
    granted = allowed_actions(document(deploy(args(clouds=("aws",))), ROLE_POLICY, "policy"))

    assert {
        "ec2:DescribeSpotPriceHistory",
        "ec2:DescribeInstanceTypeOfferings",
        "pricing:GetProducts",
    } <= granted


def test_s3_state_backend_is_granted_under_its_pulumi_prefix_only() -> None:
    stack = deploy(args(clouds=("aws",), state_bucket="s3://acme-state/teams/ml"))
    policy = document(stack, ROLE_POLICY, "policy")

    objects = statement(policy, "StateBackendObjects")
    assert objects["Resource"] == "arn:aws:s3:::acme-state/teams/ml/.pulumi/*"
    assert set(objects["Action"]) == {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}
    assert statement(policy, "StateBackendList")["Resource"] == "arn:aws:s3:::acme-state"


def test_aws_deployer_may_empty_only_spotroutes_buckets_of_its_account() -> None:
    # force_destroy lists every version (ListObjectVersions needs s3:ListBucketVersions) and
    # deletes each by version id (s3:DeleteObjectVersion): docs.aws.amazon.com/AmazonS3/latest/
    # API/API_ListObjectVersions.html and API_DeleteObjects.html. Without them a staging
    # bucket's destroy fails with AccessDenied.
    policy = document(deploy(args(clouds=("aws",))), ROLE_POLICY, "policy")

    empty = statement(policy, "EmptyJobBucketsOnDestroy")
    assert set(empty["Action"]) == {"s3:ListBucketVersions", "s3:DeleteObjectVersion"}
    assert empty["Resource"] == ["arn:aws:s3:::spotroute-*", "arn:aws:s3:::spotroute-*/*"]
    assert empty["Condition"] == {"StringEquals": {"s3:ResourceAccount": ACCOUNT_ID}}
    holders = [g["Sid"] for g in policy["Statement"] if g["Effect"] == "Allow"
               and {"s3:ListBucketVersions", "s3:DeleteObjectVersion"} & set(listed(g["Action"]))]
    assert holders == ["EmptyJobBucketsOnDestroy"]  # fmt: skip


def test_aws_deployer_never_empties_or_reconfigures_a_spotroute_named_state_bucket() -> None:
    stack = deploy(args(clouds=("aws",), state_bucket="s3://spotroute-state/teams/ml"))
    policy = document(stack, ROLE_POLICY, "policy")

    never = statement(policy, "NeverReconfigureTheStateBucket")
    assert never["Effect"] == "Deny"
    assert never["Resource"] == ["arn:aws:s3:::spotroute-state", "arn:aws:s3:::spotroute-state/*"]
    assert {"s3:DeleteObjectVersion", "s3:DeleteBucket", "s3:PutLifecycleConfiguration",
            "s3:PutBucketPolicy"} <= set(never["Action"])  # fmt: skip
    # The backend itself still works: objects under its prefix.
    assert "s3:PutObject" not in never["Action"]


# --- AWS home: outbound identity federation into Azure ------------------------------------------


def test_router_in_aws_reaches_azure_through_outbound_federation() -> None:
    stack = deploy(args(home="aws", aws_outbound_federation=True))

    stack.one(OUTBOUND)
    credential = next(r.inputs for r in stack.of_type(AZ_CREDENTIAL) if r.name.endswith("from-aws"))
    assert credential["issuer"] == OUTBOUND_ISSUER
    assert credential["subject"] == f"arn:aws:iam::{ACCOUNT_ID}:role/spotroute-deployer"
    assert credential["audiences"] == [AZURE_EXCHANGE_AUDIENCE]
    tokens = statement(document(stack, ROLE_POLICY, "policy"), "WebIdentityTokensForAzure")
    assert tokens["Action"] == "sts:GetWebIdentityToken"
    # Every audience of the token must be Azure's exchange audience, and there must be one.
    assert tokens["Condition"] == {
        "ForAllValues:StringEquals": {"sts:IdentityTokenAudience": [AZURE_EXCHANGE_AUDIENCE]},
        "Null": {"sts:IdentityTokenAudience": "false"},
    }
    assert stack.outputs["aws_outbound_issuer"] == OUTBOUND_ISSUER


def test_existing_outbound_issuer_is_trusted_without_switching_the_account_setting() -> None:
    stack = deploy(args(home="aws", aws_outbound_issuer_url=OUTBOUND_ISSUER))

    assert stack.of_type(OUTBOUND) == []
    issuers = {r.inputs["issuer"] for r in stack.of_type(AZ_CREDENTIAL)}
    assert OUTBOUND_ISSUER in issuers


def test_outbound_federation_is_never_enabled_unless_the_router_runs_in_aws() -> None:
    for home in ("oidc:github-main", "gcp"):
        stack = deploy(args(home=home))
        assert stack.of_type(OUTBOUND) == []
        policy = document(stack, ROLE_POLICY, "policy")
        assert "sts:GetWebIdentityToken" not in allowed_actions(policy)
