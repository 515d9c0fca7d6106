"""The keyless bootstrap under Pulumi mocks: which deployer identities `route bootstrap` creates,
who may become them, and what they may do."""

from __future__ import annotations

import fnmatch
import itertools
import json
from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from harness import ACCOUNT_ID, CallAnswer, CapturedStack, StateFiller, run_components, run_program

from components import bootstrap
from components.bootstrap import (
    AWS_STS_AUDIENCE,
    AZURE_DEPLOYER_ACTIONS,
    AZURE_EXCHANGE_AUDIENCE,
    AZURE_GRANT_ACTIONS,
    AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR,
    AZURE_STORAGE_BLOB_DATA_READER,
    GCP_DEPLOYER_PERMISSIONS,
    AwsDeployer,
    AwsDeployerArgs,
    AwsHome,
    AzureDeployer,
    AzureDeployerArgs,
    BootstrapArgs,
    BootstrapConfigError,
    GcpDeployer,
    GcpDeployerArgs,
    GcpHome,
    OidcIssuer,
    bootstrap_inline_program,
    bootstrap_program,
    read_bootstrap_config,
)
from policies.rules import StackResource, evaluate
from policies.rules.iam import iam_wildcard_violations
from router.config.org_file import parse_org_config

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")

PROJECT_ID = "acme-ml"
PROJECT_NUMBER = "123456789012"
SA_UNIQUE_ID = "109876543210987654321"
SUBSCRIPTION = "00000000-0000-4000-8000-000000000001"
TENANT = "33333333-3333-4333-8333-333333333333"
PRINCIPAL_ID = "11111111-1111-4111-8111-111111111111"
CLIENT_ID = "22222222-2222-4222-8222-222222222222"
OUTBOUND_ISSUER = "https://a1b2c3d4-0000-4000-8000-000000000000.tokens.sts.global.api.aws"
FEDERATION_AUDIENCE = "api://spotroute-federation"
GITHUB = OidcIssuer(
    name="github-main",
    url="https://token.actions.githubusercontent.com",
    subject="repo:acme/infra:ref:refs/heads/main",
)
GITLAB = OidcIssuer(
    name="gitlab-prod",
    url="https://gitlab.example.com",
    subject="project_path:acme/infra:ref_type:branch:ref:main",
    audience="https://gitlab.example.com",
)

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
OIDC_PROVIDER = "aws:iam/openIdConnectProvider:OpenIdConnectProvider"
OUTBOUND = "aws:iam/outboundWebIdentityFederation:OutboundWebIdentityFederation"
GCP_ACCOUNT = "gcp:serviceaccount/account:Account"
GCP_SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
GCP_PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
GCP_CUSTOM_ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
GCP_PROVIDER = "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider"
GCP_BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
AZ_IDENTITY = "azure-native:managedidentity:UserAssignedIdentity"
AZ_CREDENTIAL = "azure-native:managedidentity:FederatedIdentityCredential"
AZ_ROLE_DEFINITION = "azure-native:authorization:RoleDefinition"
AZ_ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
AZ_GROUP = "azure-native:resources:ResourceGroup"
PRIMITIVE_GCP_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
BROAD_AZURE_ROLES = {
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635",  # Owner
    "b24988ac-6180-42a0-ab88-20f7382dd24c",  # Contributor
    "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",  # User Access Administrator
}
# Types that hold a long-lived secret: none may ever appear in a bootstrap stack.
LONG_LIVED_SECRETS = {
    "aws:iam/accessKey:AccessKey",
    "aws:iam/user:User",
    "aws:iam/userLoginProfile:UserLoginProfile",
    "gcp:serviceaccount/key:Key",
    "gcp:apikeys/key:Key",
    "azuread:index/applicationPassword:ApplicationPassword",
    "azuread:index/servicePrincipalPassword:ServicePrincipalPassword",
    "azure-native:storage:StorageAccount",  # account keys
}
SUBSETS = {
    "aws-only": ("aws",),
    "gcp-only": ("gcp",),
    "azure-only": ("azure",),
    "all-three": ("aws", "gcp", "azure"),
}
OUTPUTS = {
    "aws": {"aws_deployer_role_arn", "aws_account_id", "aws_oidc_provider_arns"},
    "gcp": {
        "gcp_project_id",
        "gcp_project_number",
        "gcp_deployer_sa_email",
        "gcp_deployer_sa_unique_id",
        "gcp_deployer_role",
        "gcp_workload_identity_pool",
        "gcp_workload_identity_providers",
    },
    "azure": {
        "azure_subscription_id",
        "azure_tenant_id",
        "azure_deployer_client_id",
        "azure_deployer_principal_id",
        "azure_deployer_identity_id",
        "azure_deployer_role_definition_id",
    },
}


def _oidc_arn(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"arn": f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{inputs['url'][len('https://') :]}"}


STATES: dict[str, StateFiller] = {
    OIDC_PROVIDER: _oidc_arn,
    OUTBOUND: lambda name, inputs: {"issuerIdentifier": OUTBOUND_ISSUER},
    GCP_ACCOUNT: lambda name, inputs: {
        "email": f"{inputs['accountId']}@{inputs['project']}.iam.gserviceaccount.com",
        "uniqueId": SA_UNIQUE_ID,
    },
    AZ_GROUP: lambda name, inputs: {"name": inputs["resourceGroupName"]},
    AZ_IDENTITY: lambda name, inputs: {
        "name": inputs["resourceName"],
        "principalId": PRINCIPAL_ID,
        "clientId": CLIENT_ID,
    },
}


def args(**changes: Any) -> BootstrapArgs:
    values: dict[str, Any] = {
        "clouds": ("aws", "gcp", "azure"),
        "home": "oidc:github-main",
        "oidc_issuers": (GITHUB,),
        "gcp_project_id": PROJECT_ID,
        "gcp_project_number": PROJECT_NUMBER,
        "azure_subscription_id": SUBSCRIPTION,
        "azure_tenant_id": TENANT,
        "azure_location": "westeurope",
        "labels": {"team": "platform", "cost-center": "4711"},
    }
    values.update(changes)
    return BootstrapArgs(**values)


def deploy(
    bootstrap_args: BootstrapArgs, calls: Mapping[str, CallAnswer] | None = None
) -> CapturedStack:
    return run_components(
        lambda: bootstrap_program(bootstrap_args), calls=calls, states=STATES, stack="bootstrap"
    )


def document(stack: CapturedStack, type_: str, key: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(stack.one(type_).inputs[key])
    return parsed


def listed(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value)


def allowed_actions(policy: dict[str, Any]) -> set[str]:
    return {
        action
        for statement in policy["Statement"]
        if statement["Effect"] == "Allow"
        for action in listed(statement["Action"])
    }


def statement(policy: dict[str, Any], sid: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in policy["Statement"] if s.get("Sid") == sid)
    return found


def sa_members(stack: CapturedStack) -> dict[str, str]:
    """member → role of every binding on the deployer service account."""
    return {r.inputs["member"]: r.inputs["role"] for r in stack.of_type(GCP_SA_MEMBER)}


def pool(number: str = PROJECT_NUMBER) -> str:
    return f"projects/{number}/locations/global/workloadIdentityPools/spotroute-deployers"


# --- no long-lived credentials, nothing outside the selected clouds ----------------------------


@pytest.mark.parametrize("subset", SUBSETS)
def test_no_cloud_subset_creates_keys_users_or_secrets(subset: str) -> None:
    clouds = SUBSETS[subset]
    stack = deploy(args(clouds=clouds))

    types = stack.types()
    assert not types & LONG_LIVED_SECRETS
    assert not [t for t in types if "key" in t.lower().rsplit(":", 1)[-1]]
    assert not [t for t in types if "password" in t.lower() or "secret" in t.lower()]
    for name, value in stack.outputs.items():
        assert "secret" not in name and "key" not in name.replace("unique_id", "")
        assert "PRIVATE KEY" not in json.dumps(value)


@pytest.mark.parametrize("subset", SUBSETS)
def test_unselected_clouds_get_no_resources_and_no_outputs(subset: str) -> None:
    clouds = SUBSETS[subset]
    stack = deploy(args(clouds=clouds))

    prefixes = {"aws": "aws:", "gcp": "gcp:", "azure": "azure-native:"}
    for resource in stack.custom_resources():
        cloud = next(c for c, prefix in prefixes.items() if resource.type.startswith(prefix))
        assert cloud in clouds, resource.type
    providers = {r.type for r in stack.resources if r.type.startswith("pulumi:providers:")}
    assert providers == {
        f"pulumi:providers:{'azure-native' if c == 'azure' else c}" for c in clouds
    }
    for cloud, names in OUTPUTS.items():
        if cloud in clouds:
            assert names <= set(stack.outputs), cloud
        else:
            assert not names & set(stack.outputs), cloud
    assert stack.outputs["clouds"] == list(clouds)


@pytest.mark.parametrize("subset", SUBSETS)
def test_every_resource_is_parented_under_a_bootstrap_component(subset: str) -> None:
    stack = deploy(args(clouds=SUBSETS[subset]))

    components = {r.name: r.type for r in stack.resources if not r.custom}
    assert set(components.values()) == {
        f"spotroute:bootstrap:{c.capitalize()}Deployer" for c in SUBSETS[subset]
    }
    for resource in stack.custom_resources():
        assert components.get(resource.parent_name, "").startswith("spotroute:bootstrap:")


@pytest.mark.parametrize("subset", SUBSETS)
def test_bootstrap_stack_passes_the_spotroute_policy_pack(subset: str) -> None:
    stack = deploy(args(clouds=SUBSETS[subset], state_bucket=""))
    resources = [
        StackResource(type=r.type, name=r.name, urn=r.urn, props=r.inputs) for r in stack.resources
    ]

    violations = evaluate(resources)

    assert violations == [], [f"{v.policy}: {v.message}" for v in violations]


# --- AWS ------------------------------------------------------------------------------------------


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
    "aws:s3/bucket:Bucket": {"s3:CreateBucket", "s3:DeleteBucket", "s3:PutBucketTagging"},
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
    assert {i.token for i in placement.invokes} <= {"aws:ssm/getParameter:getParameter"}
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
    assert tokens["Condition"] == {
        "ForAnyValue:StringEquals": {"sts:IdentityTokenAudience": [AZURE_EXCHANGE_AUDIENCE]}
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


# --- GCP ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("home", ["oidc:github-main", "aws", "azure", "gcp"])
def test_gcp_deployer_holds_one_custom_role_and_no_primitive_role(home: str) -> None:
    stack = deploy(
        args(
            home=home,
            aws_outbound_federation=home == "aws",
            azure_federation_audience=FEDERATION_AUDIENCE,
        )
    )

    role = stack.one(GCP_CUSTOM_ROLE).inputs
    assert role["permissions"] == list(GCP_DEPLOYER_PERMISSIONS)
    assert not [p for p in role["permissions"] if "*" in p]
    assert role["stage"] == "GA"
    binding = stack.one(GCP_PROJECT_MEMBER).inputs
    assert binding["role"] == f"projects/{PROJECT_ID}/roles/spotrouteDeployer"
    assert (
        binding["member"]
        == f"serviceAccount:spotroute-deployer@{PROJECT_ID}.iam.gserviceaccount.com"
    )
    roles = {
        r.inputs["role"]
        for r in stack.resources
        if "role" in r.inputs and r.type.startswith("gcp:")
    }
    assert not roles & PRIMITIVE_GCP_ROLES
    assert not [r for r in roles if r.startswith("roles/") and r.endswith(("Admin", "admin"))]


@pytest.mark.parametrize("home", ["oidc:github-main", "aws", "azure"])
def test_every_gcp_provider_admits_exactly_one_identity(home: str) -> None:
    stack = deploy(
        args(
            home=home,
            oidc_issuers=(GITHUB, GITLAB),
            aws_outbound_federation=home == "aws",
            azure_federation_audience=FEDERATION_AUDIENCE,
        )
    )

    providers = stack.of_type(GCP_PROVIDER)
    assert providers
    for provider in providers:
        condition = provider.inputs["attributeCondition"]
        assert condition.count("==") == 1 and "||" not in condition, condition
        assert provider.inputs["attributeMapping"]["google.subject"].startswith("assertion.")
    for member, role in sa_members(stack).items():
        assert role == "roles/iam.workloadIdentityUser"
        assert not member.endswith("/*") and "*" not in member
        assert member.startswith(
            (f"principal://iam.googleapis.com/{pool()}/subject/", "principalSet://")
        ), member


def test_gcp_trusts_each_external_issuer_for_its_subject_and_audience() -> None:
    stack = deploy(args(clouds=("gcp",), oidc_issuers=(GITHUB, GITLAB)))

    by_id = {
        p.inputs["workloadIdentityPoolProviderId"]: p.inputs for p in stack.of_type(GCP_PROVIDER)
    }
    assert set(by_id) == {"oidc-github-main", "oidc-gitlab-prod"}
    github = by_id["oidc-github-main"]
    assert github["attributeCondition"] == 'assertion.sub == "repo:acme/infra:ref:refs/heads/main"'
    assert github["oidc"] == {"issuerUri": GITHUB.url}  # default audience: the provider's name
    assert by_id["oidc-gitlab-prod"]["oidc"]["allowedAudiences"] == ["https://gitlab.example.com"]
    assert set(sa_members(stack)) == {
        f"principal://iam.googleapis.com/{pool()}/subject/{GITHUB.subject}",
        f"principal://iam.googleapis.com/{pool()}/subject/{GITLAB.subject}",
    }
    assert stack.outputs["gcp_workload_identity_providers"] == {
        "oidc:github-main": f"{pool()}/providers/oidc-github-main",
        "oidc:gitlab-prod": f"{pool()}/providers/oidc-gitlab-prod",
    }


def test_gcp_trusts_only_the_aws_deployer_role_when_the_router_runs_in_aws() -> None:
    stack = deploy(args(clouds=("aws", "gcp"), home="aws"))

    provider = next(p.inputs for p in stack.of_type(GCP_PROVIDER) if p.name.endswith("from-aws"))
    role = f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/spotroute-deployer"
    assert provider["aws"] == {"accountId": ACCOUNT_ID}
    assert provider["attributeCondition"] == f'attribute.aws_role == "{role}"'
    assert f"principalSet://iam.googleapis.com/{pool()}/attribute.aws_role/{role}" in sa_members(
        stack
    )


def test_gcp_trusts_only_the_azure_identity_when_the_router_runs_on_azure() -> None:
    stack = deploy(
        args(clouds=("gcp", "azure"), home="azure", azure_federation_audience=FEDERATION_AUDIENCE)
    )

    provider = next(p.inputs for p in stack.of_type(GCP_PROVIDER) if p.name.endswith("from-azure"))
    assert provider["oidc"] == {
        "issuerUri": f"https://sts.windows.net/{TENANT}/",
        "allowedAudiences": [FEDERATION_AUDIENCE],
    }
    assert provider["attributeCondition"] == f'assertion.sub == "{PRINCIPAL_ID}"'
    assert f"principal://iam.googleapis.com/{pool()}/subject/{PRINCIPAL_ID}" in sa_members(stack)


def test_router_service_account_may_impersonate_the_deployer_and_nothing_else() -> None:
    router = f"route-runner@{PROJECT_ID}.iam.gserviceaccount.com"
    stack = deploy(args(home="gcp", router_service_account=router))

    impersonation = {m: r for m, r in sa_members(stack).items() if m.startswith("serviceAccount:")}
    assert impersonation == {f"serviceAccount:{router}": "roles/iam.serviceAccountTokenCreator"}
    target = next(
        r.inputs["serviceAccountId"]
        for r in stack.of_type(GCP_SA_MEMBER)
        if r.inputs["member"] == f"serviceAccount:{router}"
    )
    assert target == (
        f"projects/{PROJECT_ID}/serviceAccounts/spotroute-deployer@{PROJECT_ID}.iam.gserviceaccount.com"
    )
    assert len(stack.of_type(GCP_PROJECT_MEMBER)) == 1  # the router gets nothing on the project


def test_gcp_project_number_is_looked_up_when_not_given() -> None:
    calls = {
        "gcp:organizations/getProject:getProject": lambda a: {
            "projectId": a["projectId"],
            "number": "555",
            "name": a["projectId"],
        }
    }
    stack = deploy(args(clouds=("gcp",), gcp_project_number=""), calls=calls)

    assert stack.outputs["gcp_project_number"] == "555"
    assert stack.outputs["gcp_workload_identity_pool"] == pool("555")


def test_gcs_state_backend_is_granted_on_its_pulumi_prefix_only() -> None:
    stack = deploy(args(clouds=("gcp",), state_bucket="gs://acme-state"))

    grant = stack.one(GCP_BUCKET_MEMBER).inputs
    assert grant["bucket"] == "acme-state"
    assert grant["role"] == "roles/storage.objectUser"
    assert 'objects/.pulumi/")' in grant["condition"]["expression"]


GCP_NEEDS: dict[str, set[str]] = {
    "gcp:compute/network:Network": {"compute.networks.create", "compute.networks.delete"},
    "gcp:compute/subnetwork:Subnetwork": {
        "compute.subnetworks.create",
        "compute.subnetworks.delete",
        "compute.subnetworks.use",
    },
    "gcp:compute/router:Router": {"compute.routers.create", "compute.routers.delete"},
    "gcp:compute/routerNat:RouterNat": {"compute.routers.update"},
    "gcp:compute/firewall:Firewall": {
        "compute.firewalls.create",
        "compute.firewalls.delete",
        "compute.networks.updatePolicy",
    },
    "gcp:storage/bucket:Bucket": {"storage.buckets.create", "storage.buckets.delete"},
    "gcp:storage/bucketIAMMember:BucketIAMMember": {
        "storage.buckets.getIamPolicy",
        "storage.buckets.setIamPolicy",
    },
    "gcp:serviceaccount/account:Account": {
        "iam.serviceAccounts.create",
        "iam.serviceAccounts.delete",
    },
    "gcp:compute/instanceTemplate:InstanceTemplate": {
        "compute.instanceTemplates.create",
        "compute.instanceTemplates.delete",
        "iam.serviceAccounts.actAs",
    },
    "gcp:compute/instanceGroupManager:InstanceGroupManager": {
        "compute.instanceGroupManagers.create",
        "compute.instanceGroupManagers.delete",
        "compute.instanceTemplates.useReadOnly",
        "compute.instances.create",
    },
    "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager": {
        "compute.instanceGroupManagers.create",
        "compute.instanceGroupManagers.delete",
        "compute.instanceTemplates.useReadOnly",
        "compute.instances.create",
    },
}


@pytest.mark.parametrize("zone", ["us-central1-a", ""])
def test_gcp_deployer_may_manage_everything_a_gcp_placement_creates(
    aws_config: dict[str, Any], zone: str
) -> None:
    config = {
        **aws_config,
        "cloud": "gcp",
        "region": "us-central1",
        "zone": zone,
        "instanceTypes": ["a2-ultragpu-8g"],
        "dataUrl": "gs://acme-datasets/llm/",
    }
    states: dict[str, StateFiller] = {
        "gcp:storage/bucket:Bucket": lambda name, inputs: {"name": f"{name}-mock001"},
        GCP_ACCOUNT: lambda name, inputs: {
            "email": f"{inputs['accountId']}@{PROJECT_ID}.iam.gserviceaccount.com"
        },
    }
    placement = run_program(config, states=states)

    created = {r.type for r in placement.custom_resources()}
    assert created <= set(GCP_NEEDS), f"unlisted types: {created - set(GCP_NEEDS)}"
    for type_ in created:
        assert GCP_NEEDS[type_] <= set(GCP_DEPLOYER_PERMISSIONS), type_


# --- Azure ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("home", ["oidc:github-main", "aws", "gcp", "azure"])
def test_azure_federated_credentials_name_exact_subjects(home: str) -> None:
    stack = deploy(
        args(
            home=home,
            oidc_issuers=(GITHUB, GITLAB),
            aws_outbound_federation=home == "aws",
            azure_federation_audience=FEDERATION_AUDIENCE,
        )
    )

    credentials = stack.of_type(AZ_CREDENTIAL)
    expected = {GITHUB.subject, GITLAB.subject}
    if home == "gcp":
        expected.add(SA_UNIQUE_ID)
    if home == "aws":
        expected.add(f"arn:aws:iam::{ACCOUNT_ID}:role/spotroute-deployer")
    assert {c.inputs["subject"] for c in credentials} == expected
    for credential in credentials:
        inputs = credential.inputs
        assert not set(inputs["subject"]) & set("*?")
        assert inputs["issuer"].startswith("https://")
        assert len(inputs["audiences"]) == 1
        assert inputs["resourceName"] == "spotroute-deployer"
    # Azure refuses concurrent credential writes on one identity: each waits for the previous.
    for earlier, later in itertools.pairwise(credentials):
        assert earlier.urn in later.dependencies


def test_azure_credentials_use_each_issuers_audience_or_the_token_exchange_default() -> None:
    stack = deploy(args(clouds=("azure",), oidc_issuers=(GITHUB, GITLAB)))

    audiences = {c.inputs["issuer"]: c.inputs["audiences"] for c in stack.of_type(AZ_CREDENTIAL)}
    assert audiences == {
        GITHUB.url: [AZURE_EXCHANGE_AUDIENCE],
        GITLAB.url: ["https://gitlab.example.com"],
    }


def test_google_tokens_of_the_gcp_deployer_reach_azure_when_the_router_runs_on_gcp() -> None:
    stack = deploy(args(home="gcp"))

    google = next(c.inputs for c in stack.of_type(AZ_CREDENTIAL) if c.name.endswith("from-gcp"))
    assert google["issuer"] == "https://accounts.google.com"
    assert google["subject"] == SA_UNIQUE_ID
    assert google["audiences"] == [AZURE_EXCHANGE_AUDIENCE]


@pytest.mark.parametrize("home", ["oidc:github-main", "azure"])
def test_azure_deployer_roles_list_actions_and_never_broad_built_ins(home: str) -> None:
    stack = deploy(args(home=home, azure_federation_audience=FEDERATION_AUDIENCE))

    definitions = {r.inputs["roleName"]: r.inputs for r in stack.of_type(AZ_ROLE_DEFINITION)}
    assert set(definitions) == {"spotroute-deployer", "spotroute-deployer-grants"}
    for definition in definitions.values():
        assert definition["assignableScopes"] == [f"/subscriptions/{SUBSCRIPTION}"]
        for permission in definition["permissions"]:
            assert not [a for a in permission["actions"] if "*" in a]
            assert not permission.get("dataActions")
    deployer = definitions["spotroute-deployer"]["permissions"][0]["actions"]
    assert deployer == list(AZURE_DEPLOYER_ACTIONS)
    assert not [a for a in deployer if a.startswith("Microsoft.Authorization/")]
    assert definitions["spotroute-deployer-grants"]["permissions"][0]["actions"] == list(
        AZURE_GRANT_ACTIONS
    )
    for assignment in stack.of_type(AZ_ROLE_ASSIGNMENT):
        guid = assignment.inputs["roleDefinitionId"].rsplit("/", 1)[-1]
        assert guid not in BROAD_AZURE_ROLES
        assert assignment.inputs["principalId"] == PRINCIPAL_ID


def test_azure_deployer_may_grant_only_the_two_storage_data_roles_to_identities() -> None:
    stack = deploy(args(clouds=("azure",)))

    grants = next(a.inputs for a in stack.of_type(AZ_ROLE_ASSIGNMENT) if "grants" in a.name)
    condition = grants["condition"]
    assert grants["conditionVersion"] == "2.0"
    assert "!(ActionMatches{'Microsoft.Authorization/roleAssignments/write'})" in condition
    assert "!(ActionMatches{'Microsoft.Authorization/roleAssignments/delete'})" in condition
    pinned = (
        f"GuidEquals {{{AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR}, {AZURE_STORAGE_BLOB_DATA_READER}}}"
    )
    assert condition.count(pinned) == 2  # on writes (request) and deletes (resource)
    assert "StringEqualsIgnoreCase {'ServicePrincipal'}" in condition
    resources = next(a.inputs for a in stack.of_type(AZ_ROLE_ASSIGNMENT) if "grants" not in a.name)
    assert "condition" not in resources
    assert resources["scope"] == f"/subscriptions/{SUBSCRIPTION}"


def test_azblob_state_backend_is_granted_on_its_container_only() -> None:
    account = (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/state/providers/Microsoft.Storage/"
        "storageAccounts/acmestate"
    )
    stack = deploy(
        args(
            clouds=("azure",),
            state_bucket="azblob://pulumi?storage_account=acmestate",
            state_storage_account_id=account,
        )
    )

    state = next(a.inputs for a in stack.of_type(AZ_ROLE_ASSIGNMENT) if a.name.endswith("-state"))
    assert state["scope"] == f"{account}/blobServices/default/containers/pulumi"
    assert state["roleDefinitionId"].endswith(AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR)


AZURE_NEEDS: dict[str, set[str]] = {
    "azure-native:resources:ResourceGroup": {
        "Microsoft.Resources/subscriptions/resourceGroups/write",
        "Microsoft.Resources/subscriptions/resourceGroups/delete",
    },
    "azure-native:network:VirtualNetwork": {
        "Microsoft.Network/virtualNetworks/write",
        "Microsoft.Network/virtualNetworks/delete",
    },
    "azure-native:network:NetworkSecurityGroup": {
        "Microsoft.Network/networkSecurityGroups/write",
        "Microsoft.Network/networkSecurityGroups/delete",
    },
    "azure-native:network:Subnet": {
        "Microsoft.Network/virtualNetworks/subnets/write",
        "Microsoft.Network/virtualNetworks/subnets/delete",
        "Microsoft.Network/networkSecurityGroups/join/action",
    },
    "azure-native:storage:StorageAccount": {
        "Microsoft.Storage/storageAccounts/write",
        "Microsoft.Storage/storageAccounts/delete",
    },
    "azure-native:storage:BlobServiceProperties": {
        "Microsoft.Storage/storageAccounts/blobServices/write"
    },
    "azure-native:storage:BlobContainer": {
        "Microsoft.Storage/storageAccounts/blobServices/containers/write",
        "Microsoft.Storage/storageAccounts/blobServices/containers/delete",
    },
    "azure-native:storage:ManagementPolicy": {
        "Microsoft.Storage/storageAccounts/managementPolicies/write",
        "Microsoft.Storage/storageAccounts/managementPolicies/delete",
    },
    "azure-native:managedidentity:UserAssignedIdentity": {
        "Microsoft.ManagedIdentity/userAssignedIdentities/write",
        "Microsoft.ManagedIdentity/userAssignedIdentities/delete",
    },
    "azure-native:authorization:RoleAssignment": {
        "Microsoft.Authorization/roleAssignments/write",
        "Microsoft.Authorization/roleAssignments/delete",
    },
    "azure-native:compute:VirtualMachineScaleSet": {
        "Microsoft.Compute/virtualMachineScaleSets/write",
        "Microsoft.Compute/virtualMachineScaleSets/delete",
        "Microsoft.Compute/virtualMachines/write",
        "Microsoft.Compute/disks/write",
        "Microsoft.Network/networkInterfaces/write",
        "Microsoft.Network/virtualNetworks/subnets/join/action",
        "Microsoft.Network/networkSecurityGroups/join/action",
        "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action",
    },
}


def test_azure_deployer_may_manage_everything_an_azure_placement_creates(
    aws_config: dict[str, Any],
) -> None:
    config = {
        **aws_config,
        "cloud": "azure",
        "region": "eastus",
        "zone": "2",
        "instanceTypes": ["Standard_NC96ads_A100_v4"],
        "gpuCount": 4,
        "dataUrl": "",
    }
    calls: dict[str, CallAnswer] = {
        "azure-native:authorization:getClientConfig": lambda a: {
            "subscriptionId": SUBSCRIPTION,
            "tenantId": TENANT,
            "clientId": CLIENT_ID,
            "objectId": PRINCIPAL_ID,
        }
    }

    def named(key: str) -> StateFiller:
        return lambda name, inputs: {"name": inputs.get(key) or f"{name}a1b2c3"}

    states: dict[str, StateFiller] = {
        AZ_GROUP: named("resourceGroupName"),
        "azure-native:storage:StorageAccount": named("accountName"),
        "azure-native:network:VirtualNetwork": named("virtualNetworkName"),
        "azure-native:network:NetworkSecurityGroup": named("networkSecurityGroupName"),
        AZ_IDENTITY: lambda name, inputs: {
            "name": f"{name}a1b2c3",
            "principalId": PRINCIPAL_ID,
            "clientId": CLIENT_ID,
        },
        "azure-native:compute:VirtualMachineScaleSet": lambda name, inputs: {
            "identity": {
                "type": inputs["identity"]["type"],
                "userAssignedIdentities": {
                    i: {} for i in inputs["identity"]["userAssignedIdentities"]
                },
            }
        },
    }
    placement = run_program(config, calls=calls, states=states)
    granted = set(AZURE_DEPLOYER_ACTIONS) | set(AZURE_GRANT_ACTIONS)

    created = {r.type for r in placement.custom_resources()}
    assert created <= set(AZURE_NEEDS), f"unlisted types: {created - set(AZURE_NEEDS)}"
    for type_ in created:
        assert AZURE_NEEDS[type_] <= granted, (type_, AZURE_NEEDS[type_] - granted)
    # The job's own role assignments are ones the grants condition lets through.
    for assignment in placement.of_type("azure-native:authorization:RoleAssignment"):
        guid = assignment.inputs["roleDefinitionId"].rsplit("/", 1)[-1]
        assert guid in {AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR, AZURE_STORAGE_BLOB_DATA_READER}
        assert assignment.inputs["principalType"] == "ServicePrincipal"


# --- outputs and the org config snippet ----------------------------------------------------------


@pytest.mark.parametrize(
    ("home", "provider"),
    [
        ("oidc:github-main", "oidc-github-main"),
        ("aws", "from-aws"),
        ("azure", "from-azure"),
        ("gcp", None),
    ],
)
def test_org_config_snippet_is_a_valid_credentials_section_without_secrets(
    home: str, provider: str | None
) -> None:
    stack = deploy(
        args(
            home=home,
            aws_outbound_federation=home == "aws",
            azure_federation_audience=FEDERATION_AUDIENCE,
        )
    )
    snippet = stack.outputs["org_config_snippet"]

    org = parse_org_config(snippet, name="spotroute.yaml")  # refuses secret-looking keys
    hints = org.credentials
    assert hints["router_home"] == home
    assert hints["aws_role_arn"] == f"arn:aws:iam::{ACCOUNT_ID}:role/spotroute-deployer"
    assert hints["gcp_project"] == PROJECT_ID
    assert (
        hints["gcp_service_account"] == f"spotroute-deployer@{PROJECT_ID}.iam.gserviceaccount.com"
    )
    assert hints["azure_client_id"] == CLIENT_ID
    assert hints["azure_tenant_id"] == TENANT
    assert hints["azure_subscription_id"] == SUBSCRIPTION
    if provider is None:
        assert "gcp_workload_identity_provider" not in hints
    else:
        assert hints["gcp_workload_identity_provider"] == f"{pool()}/providers/{provider}"
    assert set(yaml.safe_load(snippet)) == {"credentials"}


def test_snippet_of_a_single_cloud_names_only_that_cloud() -> None:
    stack = deploy(args(clouds=("gcp",)))

    hints = yaml.safe_load(stack.outputs["org_config_snippet"])["credentials"]
    assert {k.split("_", 1)[0] for k in hints} == {"router", "gcp"}


# --- Args: types and values ---------------------------------------------------------------------


def test_mistyped_args_are_type_errors_before_anything_is_created() -> None:
    good = args()
    with pytest.raises(TypeError, match="AwsDeployer takes AwsDeployerArgs"):
        AwsDeployer("x", GcpDeployerArgs(project_id=PROJECT_ID))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="GcpDeployer takes GcpDeployerArgs"):
        GcpDeployer("x", {"project_id": PROJECT_ID})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AzureDeployer takes AzureDeployerArgs"):
        AzureDeployer("x", good)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bootstrap_program takes BootstrapArgs"):
        bootstrap_program({"clouds": ("aws",)})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="clouds takes a tuple of strings"):
        args(clouds="aws")
    with pytest.raises(TypeError, match="oidc_issuers"):
        args(oidc_issuers=({"name": "github-main"},))
    with pytest.raises(TypeError):
        BootstrapArgs(clouds=("aws",), home="aws", colud="gcp")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"AwsDeployerArgs\.home"):
        AwsDeployer("x", AwsDeployerArgs(home="gcp", oidc_issuers=(GITHUB,)))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"GcpDeployerArgs\.home"):
        # A deployer never trusts a home of its own cloud.
        GcpDeployer("x", GcpDeployerArgs(project_id=PROJECT_ID, home=GcpHome(unique_id="1")))


def test_azure_deployer_refuses_an_aws_home_without_outbound_federation() -> None:
    aws_home = AwsHome(account_id=ACCOUNT_ID, role_arn=f"arn:aws:iam::{ACCOUNT_ID}:role/x")
    azure_args = AzureDeployerArgs(
        subscription_id=SUBSCRIPTION, tenant_id=TENANT, location="westeurope", home=aws_home
    )

    with pytest.raises(ValueError, match="AWS reaches Azure only through IAM outbound"):
        AzureDeployer("x", azure_args)


@pytest.mark.parametrize(
    ("issuer", "field"),
    [
        ({"subject": "repo:acme/*"}, "subject"),
        ({"subject": "repo:acme/infra:ref:refs/heads/?ain"}, "subject"),
        ({"subject": 'repo:acme/infra" || true || "'}, "subject"),
        ({"subject": ""}, "subject"),
        ({"subject": "x" * 200}, "subject"),
        ({"audience": "api://*"}, "audience"),
        ({"url": "http://token.actions.githubusercontent.com"}, "url"),
        ({"url": "https://issuer.example.com/?tenant=1"}, "url"),
        ({"name": "GitHub"}, "name"),
    ],
)
def test_issuers_that_would_trust_more_than_one_identity_are_refused(
    issuer: dict[str, str], field: str
) -> None:
    values = {"name": "github-main", "url": GITHUB.url, "subject": GITHUB.subject, **issuer}

    with pytest.raises(ValueError, match=rf"oidc_issuers\[.*\]\.{field}: "):
        OidcIssuer(**values)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"clouds": ()}, "clouds"),
        ({"clouds": ("aws", "local")}, "clouds"),
        ({"clouds": ("aws", "aws")}, "clouds"),
        ({"home": "laptop"}, "home"),
        ({"home": "oidc:gitlab"}, "home"),
        ({"clouds": ("aws",), "home": "gcp"}, "home"),
        ({"clouds": ("aws",), "home": "aws", "oidc_issuers": ()}, "oidc_issuers"),
        ({"home": "azure", "azure_federation_audience": ""}, "azure_federation_audience"),
        ({"home": "aws"}, "aws_outbound_federation"),
        ({"aws_outbound_federation": True}, "aws_outbound_federation"),
        ({"aws_account_id": "12345"}, "aws_account_id"),
        ({"gcp_project_id": ""}, "gcp_project_id"),
        ({"gcp_project_number": "acme"}, "gcp_project_number"),
        ({"azure_tenant_id": "contoso"}, "azure_tenant_id"),
        ({"azure_location": ""}, "azure_location"),
        (
            {"router_service_account": "route-runner@acme-ml.iam.gserviceaccount.com"},
            "router_service_account",
        ),
        ({"state_bucket": "file:///tmp/state"}, "state_bucket"),
        ({"clouds": ("gcp",), "home": "gcp", "state_bucket": "s3://acme-state"}, "state_bucket"),
        ({"state_bucket": "azblob://pulumi"}, "state_storage_account_id"),
        ({"labels": {"managed-by": "me"}}, "labels.managed-by"),
        ({"oidc_issuers": (GITHUB, GITHUB)}, "oidc_issuers"),
    ],
)
def test_bootstrap_args_that_cannot_work_name_the_field(
    changes: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=rf"^{field}: "):
        args(**changes)


# --- stack config ---------------------------------------------------------------------------------


CONFIG: dict[str, object] = {
    "spotroute-bootstrap:clouds": ["aws", "gcp", "azure"],
    "spotroute-bootstrap:home": "oidc:github-main",
    "spotroute-bootstrap:oidcIssuers": [
        {"name": GITHUB.name, "url": GITHUB.url, "subject": GITHUB.subject},
        {
            "name": GITLAB.name,
            "url": GITLAB.url,
            "subject": GITLAB.subject,
            "audience": GITLAB.audience,
        },
    ],
    "spotroute-bootstrap:awsAccountId": ACCOUNT_ID,
    "spotroute-bootstrap:gcpProjectId": PROJECT_ID,
    "spotroute-bootstrap:gcpProjectNumber": PROJECT_NUMBER,
    "spotroute-bootstrap:azureSubscriptionId": SUBSCRIPTION,
    "spotroute-bootstrap:azureTenantId": TENANT,
    "spotroute-bootstrap:azureLocation": "westeurope",
    "spotroute-bootstrap:stateBucket": "s3://acme-state",
    "spotroute-bootstrap:labels": {"team": "platform"},
}


class DictConfig:
    """Config values as Pulumi stores them: strings verbatim, everything else as JSON."""

    def __init__(self, values: Mapping[str, object]) -> None:
        self.values = {
            key.split(":", 1)[1]: value if isinstance(value, str) else json.dumps(value)
            for key, value in values.items()
        }

    def get(self, key: str) -> str | None:
        return self.values.get(key)


def test_bootstrap_config_becomes_bootstrap_args() -> None:
    parsed = read_bootstrap_config(DictConfig(CONFIG))

    assert parsed == args(
        oidc_issuers=(GITHUB, GITLAB),
        aws_account_id=ACCOUNT_ID,
        state_bucket="s3://acme-state",
        labels={"team": "platform"},
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"spotroute-bootstrap:clouds": None}, r"spotroute-bootstrap:clouds: missing"),
        ({"spotroute-bootstrap:home": None}, r"spotroute-bootstrap:home: missing"),
        (
            {"spotroute-bootstrap:clouds": ["aws", "laptop"]},
            r"spotroute-bootstrap:clouds: 'laptop'",
        ),
        (
            {"spotroute-bootstrap:oidcIssuers": [{"name": "ci", "url": GITHUB.url}]},
            r"spotroute-bootstrap:oidcIssuers\[0\]: ",
        ),
        (
            {
                "spotroute-bootstrap:oidcIssuers": [
                    {"name": "ci-main", "url": GITHUB.url, "subjekt": "s"}
                ]
            },
            r"spotroute-bootstrap:oidcIssuers\[0\]\.subjekt: unknown key",
        ),
        ({"spotroute-bootstrap:awsOutboundFederation": "yes"}, r"awsOutboundFederation: 'yes'"),
        ({"spotroute-bootstrap:azureTenantId": "contoso"}, r"spotroute-bootstrap:azureTenantId: "),
        (
            {"spotroute-bootstrap:labels": {"managed-by": "x"}},
            r"spotroute-bootstrap:labels\.managed-by",
        ),
    ],
)
def test_bad_bootstrap_config_names_the_stack_file_and_key(
    changes: dict[str, object], message: str
) -> None:
    config = {k: v for k, v in {**CONFIG, **changes}.items() if v is not None}

    with pytest.raises(
        BootstrapConfigError, match=rf"^stacks/Pulumi\.bootstrap\.yaml: .*{message}"
    ):
        read_bootstrap_config(DictConfig(config))


def test_inline_program_builds_the_deployers_from_the_bootstrap_stack_config() -> None:
    stack = run_components(bootstrap_inline_program, CONFIG, states=STATES, stack="bootstrap")

    assert stack.outputs["aws_deployer_role_arn"] == (
        f"arn:aws:iam::{ACCOUNT_ID}:role/spotroute-deployer"
    )
    assert stack.outputs["gcp_deployer_sa_email"].startswith("spotroute-deployer@")
    assert stack.outputs["azure_deployer_client_id"] == CLIENT_ID
    assert {r.inputs["url"] for r in stack.of_type(OIDC_PROVIDER)} == {GITHUB.url, GITLAB.url}


def test_inline_program_refuses_a_misspelt_bootstrap_key() -> None:
    config = {**CONFIG, "spotroute-bootstrap:gcpProject": PROJECT_ID}

    with pytest.raises(BootstrapConfigError, match="spotroute-bootstrap:gcpProject: unknown key"):
        run_components(bootstrap_inline_program, config, states=STATES, stack="bootstrap")


def test_config_keys_cover_every_bootstrap_args_field() -> None:
    fields = set(BootstrapArgs.__dataclass_fields__)

    assert set(bootstrap.CONFIG_KEYS) == fields
