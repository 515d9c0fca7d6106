"""The keyless bootstrap under Pulumi mocks: what every cloud's deployer shares (no long-lived
credentials, nothing outside the selected clouds), the outputs, the Args and the stack config.
Per cloud: test_bootstrap_aws.py, test_bootstrap_gcp.py, test_bootstrap_azure.py.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from harness import ACCOUNT_ID, CallAnswer, CapturedStack, StateFiller, run_components

from components import bootstrap
from components.bootstrap import (
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
MANAGED_POLICY = "aws:iam/policy:Policy"
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
    "aws": {
        "aws_deployer_role_arn",
        "aws_account_id",
        "aws_oidc_provider_arns",
        "aws_job_permissions_boundary",
    },
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
        "azure_job_role_definition_id",
    },
}


def _oidc_arn(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    return {"arn": f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{inputs['url'][len('https://') :]}"}


STATES: dict[str, StateFiller] = {
    OIDC_PROVIDER: _oidc_arn,
    MANAGED_POLICY: lambda name, inputs: {
        "arn": f"arn:aws:iam::{ACCOUNT_ID}:policy/{inputs['name']}"
    },
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


GCP_LIST_ACCOUNTS = "gcp:serviceaccount/getS:getS"
# A project spotroute has to itself: the deployer and a job's account (gcp.GcpDeployer checks).
OWN_ACCOUNTS = [
    {"email": f"spotroute-deployer@{PROJECT_ID}.iam.gserviceaccount.com", "disabled": False},
    {"email": f"sr-llm@{PROJECT_ID}.iam.gserviceaccount.com", "disabled": False},
]


def deploy(
    bootstrap_args: BootstrapArgs, calls: Mapping[str, CallAnswer] | None = None
) -> CapturedStack:
    answers = {GCP_LIST_ACCOUNTS: lambda args: {"accounts": OWN_ACCOUNTS}, **(calls or {})}
    return run_components(
        lambda: bootstrap_program(bootstrap_args), calls=answers, states=STATES, stack="bootstrap"
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
    "spotroute-bootstrap:gcpJobBuckets": ["acme-datasets"],
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
        gcp_job_buckets=("acme-datasets",),
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
            {"spotroute-bootstrap:gcpJobBuckets": ["gs://acme"]},
            r"spotroute-bootstrap:gcpJobBuckets: 'gs://acme' is not a Cloud Storage bucket",
        ),
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
    stack = run_components(bootstrap_inline_program, CONFIG, states=STATES, stack="bootstrap",
                           calls={GCP_LIST_ACCOUNTS: lambda args: {"accounts": OWN_ACCOUNTS}})

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
