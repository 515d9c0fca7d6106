"""Secret env under the Pulumi mocks: every cloud keeps the value out of user data, in its own
secret store, readable by the job's identity alone (docs/security.md, "Secret env")."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

import pytest
from harness import ACCOUNT_ID, CapturedStack, run_program
from test_azure import AZURE_CALLS, AZURE_STATES
from test_gcp import GCP_STATES
from test_policy_pack_over_stacks import PACK_CONFIG, stack_config, stack_resources

from components.azure import KEY_VAULT_SECRETS_USER
from components.gcp import SECRET_ROLE
from policies.rules import evaluate

# Hostile on purpose: quotes, $, a newline; and unique enough to grep for.
SECRET = "hf_Zq8-s3cr3t 'quoted' \"double\" $HOME `x`\nline2"
NAMES = ["HF_TOKEN", "WANDB_API_KEY"]
VALUES = {"HF_TOKEN": SECRET, "WANDB_API_KEY": "wandb-0xDEADBEEF-secret"}

PARAMETER = "aws:ssm/parameter:Parameter"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
GCP_SECRET = "gcp:secretmanager/secret:Secret"
GCP_VERSION = "gcp:secretmanager/secretVersion:SecretVersion"
GCP_SECRET_MEMBER = "gcp:secretmanager/secretIamMember:SecretIamMember"
VAULT = "azure-native:keyvault:Vault"
VAULT_SECRET = "azure-native:keyvault:Secret"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"

STATES: dict[str, dict[str, Any]] = {
    "aws": {
        PARAMETER: lambda name, inputs: {
            "arn": f"arn:aws:ssm:us-east-1:{ACCOUNT_ID}:parameter{inputs['name']}",
            "version": 3,
        },
    },
    "gcp": {
        **GCP_STATES,
        GCP_SECRET: lambda name, inputs: {
            "name": f"projects/123456789/secrets/{inputs['secretId']}"
        },
        GCP_VERSION: lambda name, inputs: {"name": f"projects/123456789/secrets/{name}/versions/1"},
    },
    "azure": {
        **AZURE_STATES,
        VAULT: lambda name, inputs: {"name": inputs["vaultName"]},
        # The ARM id of a Key Vault secret: what the grant is scoped to.
        VAULT_SECRET: lambda name, inputs: {
            "__id": f"/subscriptions/s/resourceGroups/{inputs['resourceGroupName']}/providers/"
            f"Microsoft.KeyVault/vaults/{inputs['vaultName']}/secrets/{inputs['secretName']}"
        },
    },
}


def secret_stack(cloud: str, market: str = "on-demand") -> CapturedStack:
    config = {
        **stack_config(cloud, market, "new-bucket", "no-ssh"),
        "job": {
            "image": "ghcr.io/acme/trainer:1.4",
            "command": ["python", "train.py"],
            "env": {"EPOCHS": "3"},
        },
        "secretEnvNames": NAMES,
        "secretEnv": VALUES,
    }
    calls = AZURE_CALLS if cloud == "azure" else None
    return run_program(config, calls=calls, states=STATES[cloud])


def user_data(stack: CapturedStack, cloud: str) -> str:
    if cloud == "aws":
        encoded = stack.one("aws:ec2/launchTemplate:LaunchTemplate").inputs["userData"]
        return base64.b64decode(encoded).decode()
    if cloud == "gcp":
        template = stack.one("gcp:compute/instanceTemplate:InstanceTemplate")
        script: str = template.inputs["metadata"]["startup-script"]
        return script
    profile = stack.one("azure-native:compute:VirtualMachineScaleSet").inputs
    return base64.b64decode(profile["virtualMachineProfile"]["osProfile"]["customData"]).decode()


def _texts(value: Any) -> list[str]:
    """Every string inside `value`, and inside any JSON text among them (policies, maps)."""
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    if not isinstance(value, str):
        return []
    try:
        decoded = json.loads(value)
    except ValueError:
        decoded = None
    return [value, *(_texts(decoded) if isinstance(decoded, dict | list) else [])]


def holders_of(stack: CapturedStack, text: str) -> list[str]:
    """Names of the resources whose inputs contain `text` anywhere (also inside JSON text)."""
    return [r.name for r in stack.resources if any(text in t for t in _texts(r.inputs))]


@pytest.fixture(scope="module", params=["aws", "gcp", "azure"])
def cloud_stack(request: pytest.FixtureRequest) -> tuple[str, CapturedStack]:
    return request.param, secret_stack(request.param)


def test_user_data_holds_the_names_and_the_channel_never_a_value(
    cloud_stack: tuple[str, CapturedStack],
) -> None:
    cloud, stack = cloud_stack
    script = user_data(stack, cloud)

    for value in VALUES.values():
        assert value not in script and json.dumps(value)[1:-1] not in script
    assert "wandb-0xDEADBEEF" not in script and "s3cr3t" not in script
    channel = {
        "aws": "aws ssm get-parameter --with-decryption",
        "gcp": "secretmanager.googleapis.com",
        "azure": "vault.azure.net",
    }[cloud]
    assert channel in script
    # Passed to the container by name: the value is copied from the script's environment.
    assert "-e HF_TOKEN -e WANDB_API_KEY" in script
    assert "export EPOCHS=3" in script
    carrier = {
        "aws": "aws:ec2/launchTemplate:LaunchTemplate",
        "gcp": "gcp:compute/instanceTemplate:InstanceTemplate",
        "azure": "azure-native:compute:VirtualMachineScaleSet",
    }[cloud]
    assert stack.one(carrier).secret_inputs == (), "user data stays reviewable in the diff"


def test_each_value_is_in_exactly_one_resource_the_cloud_secret_store_as_a_secret(
    cloud_stack: tuple[str, CapturedStack],
) -> None:
    cloud, stack = cloud_stack
    store, path = {
        "aws": (PARAMETER, "value"),
        "gcp": (GCP_VERSION, "secretData"),
        "azure": (VAULT_SECRET, "properties.value"),
    }[cloud]

    for value in VALUES.values():
        assert holders_of(stack, value) == [stack.one(store).name]
    held = stack.one(store)
    assert path in held.secret_inputs, "sent to the engine as a secret: encrypted in the state"
    stored: Any = held.inputs
    for part in path.split("."):
        stored = stored[part]
    if isinstance(stored, dict):  # the mock monitor hands a secret back in its wire wrapper
        stored = stored["value"]
    assert json.loads(stored) == VALUES


def test_aws_role_may_read_exactly_the_one_parameter() -> None:
    stack = secret_stack("aws")
    parameter = stack.one(PARAMETER)
    assert parameter.inputs["type"] == "SecureString"
    assert parameter.inputs["name"] == "/spotroute/llm-finetune/secret-env"
    grants = [
        r
        for r in stack.of_type(ROLE_POLICY)
        if "ssm:" in json.dumps(json.loads(r.inputs["policy"]))
    ]
    assert [g.name for g in grants] == ["llm-finetune-secret-read"]
    policy = json.loads(grants[0].inputs["policy"])
    assert policy["Statement"] == [
        {
            "Sid": "SecretEnvRead",
            "Effect": "Allow",
            "Action": "ssm:GetParameter",
            "Resource": f"arn:aws:ssm:us-east-1:{ACCOUNT_ID}:parameter"
            "/spotroute/llm-finetune/secret-env",
        }
    ]
    assert "--name /spotroute/llm-finetune/secret-env:3" in user_data(stack, "aws"), "pinned"
    role = stack.one("aws:iam/role:Role")
    assert grants[0].inputs["role"] == f"{role.inputs['namePrefix']}mock0001"
    fleet = stack.one("aws:ec2/fleet:Fleet")
    assert grants[0].urn in fleet.dependencies, "nodes boot only after the grant exists"


def test_gcp_service_account_may_access_exactly_the_one_secret() -> None:
    stack = secret_stack("gcp")
    secret = stack.one(GCP_SECRET)
    replicas = secret.inputs["replication"]["userManaged"]["replicas"]
    assert replicas == [{"location": "us-central1"}], "kept in the job's region"
    member = stack.one(GCP_SECRET_MEMBER).inputs
    account = stack.one("gcp:serviceaccount/account:Account").inputs["accountId"]
    assert member == {
        "secretId": f"{secret.name}-id",
        "role": SECRET_ROLE,
        "member": f"serviceAccount:{account}@acme-ml.iam.gserviceaccount.com",
    }
    assert not [r for r in stack.resources if r.type.startswith("gcp:projects/")]
    script = user_data(stack, "gcp")
    assert f"projects/123456789/secrets/{stack.one(GCP_VERSION).name}/versions/1" in script
    group = stack.one("gcp:compute/instanceGroupManager:InstanceGroupManager")
    assert stack.one(GCP_SECRET_MEMBER).urn in group.dependencies


def test_azure_identity_is_key_vault_secrets_user_on_the_one_secret_of_an_rbac_vault() -> None:
    stack = secret_stack("azure")
    vault = stack.one(VAULT).inputs["properties"]
    assert vault["enableRbacAuthorization"] is True and "accessPolicies" not in vault
    secret = stack.one(VAULT_SECRET)
    grants = [
        r.inputs
        for r in stack.of_type(ROLE_ASSIGNMENT)
        if r.inputs["roleDefinitionId"].endswith(KEY_VAULT_SECRETS_USER)
    ]
    assert len(grants) == 1
    assert grants[0]["scope"].endswith(
        "/vaults/" + stack.one(VAULT).inputs["vaultName"] + "/secrets/secret-env"
    ), "the secret, not the vault"
    assert secret.inputs["secretName"] == "secret-env"
    assert grants[0]["principalId"] == "11111111-1111-4111-8111-111111111111"
    script = user_data(stack, "azure")
    vault_name = stack.one(VAULT).inputs["vaultName"]
    assert f"https://{vault_name}.vault.azure.net/secrets/secret-env" in script
    assert "22222222-2222-4222-8222-222222222222" in script, "the job identity's client id"


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_policy_pack_passes_stacks_with_secret_env(cloud: str) -> None:
    for market in ("spot", "on-demand"):
        assert evaluate(stack_resources(secret_stack(cloud, market)), PACK_CONFIG) == []


def test_aws_secret_read_widened_to_every_parameter_is_refused_by_the_pack() -> None:
    stack = stack_resources(secret_stack("aws"))
    target = next(r for r in stack if r.name == "llm-finetune-secret-read")
    wide = json.loads(target.props["policy"])
    wide["Statement"][0]["Resource"] = f"arn:aws:ssm:us-east-1:{ACCOUNT_ID}:parameter/*"
    tampered = [
        r if r is not target else type(r)(**{**r.__dict__, "props": {**r.props,
                                             "policy": json.dumps(wide)}})
        for r in stack
    ]  # fmt: skip
    violations = evaluate(tampered, PACK_CONFIG)
    assert {(v.policy, v.urn.rsplit("::", 1)[-1]) for v in violations} == {
        ("no-iam-wildcards", "llm-finetune-secret-read")
    }
    assert "reads every secret" in violations[0].message


def test_a_job_without_secrets_creates_no_secret_store() -> None:
    for cloud in ("aws", "gcp", "azure"):
        config = stack_config(cloud, "on-demand", "new-bucket", "no-ssh")
        stack = run_program(
            config, calls=AZURE_CALLS if cloud == "azure" else None, states=STATES[cloud]
        )
        assert not stack.types() & {PARAMETER, GCP_SECRET, VAULT, VAULT_SECRET}


def test_program_refuses_secret_values_that_do_not_match_the_names() -> None:
    config = {
        **stack_config("aws", "on-demand", "new-bucket", "no-ssh"),
        "secretEnvNames": NAMES,
        "secretEnv": {"HF_TOKEN": SECRET},
    }
    with pytest.raises(Exception, match=r"spotroute:secretEnv: does not hold a text value"):
        run_program(config, states=STATES["aws"])


def _tampered(stack: list[Any], name: str, **props: Any) -> list[Any]:
    return [replace(r, props={**r.props, **props}) if r.name == name else r for r in stack]


def test_gcp_secret_accessor_on_the_whole_project_is_refused_by_the_pack() -> None:
    stack = stack_resources(secret_stack("gcp"))
    member = next(r for r in stack if r.type == GCP_SECRET_MEMBER)
    project_wide = replace(member, type="gcp:projects/iAMMember:IAMMember", name="project-wide")
    violations = evaluate([*stack, project_wide], PACK_CONFIG)
    assert [v.policy for v in violations] == ["no-iam-wildcards"]
    assert "grants roles/secretmanager.secretAccessor on the whole project" in violations[0].message


def test_azure_secrets_user_on_the_vault_is_refused_by_the_pack() -> None:
    stack = stack_resources(secret_stack("azure"))
    vault = next(r for r in stack if r.type == VAULT)
    tampered = _tampered(stack, "llm-finetune-secret-read", scope=f"{vault.name}-id")
    violations = evaluate(tampered, PACK_CONFIG)
    assert {(v.policy, v.urn.rsplit("::", 1)[-1]) for v in violations} == {
        ("no-iam-wildcards", "llm-finetune-secret-read")
    }
    assert "Key Vault Secrets User" in violations[0].message


# --- the bootstrap lets the deployer build the secret stores, and the job read them -----------


def test_aws_bootstrap_boundary_and_deployer_cover_the_secret_parameter() -> None:
    import fnmatch

    from components.bootstrap.aws_boundary import aws_job_boundary_policy
    from components.bootstrap.aws_permissions import aws_deployer_policy

    name = secret_stack("aws").one(PARAMETER).inputs["name"]
    arn = f"arn:aws:ssm:us-east-1:{ACCOUNT_ID}:parameter{name}"

    def allows(policy: dict[str, Any], action: str) -> bool:
        return any(
            s["Effect"] == "Allow"
            and action in s["Action"]
            and any(fnmatch.fnmatchcase(arn, r) for r in [s["Resource"]] if isinstance(r, str))
            for s in policy["Statement"]
        )

    # The boundary caps the job role: without this the node's read is denied on a real account.
    assert allows(aws_job_boundary_policy(ACCOUNT_ID), "ssm:GetParameter")
    deployer = aws_deployer_policy(ACCOUNT_ID)
    for action in ("ssm:PutParameter", "ssm:DeleteParameter", "ssm:GetParameter",
                   "ssm:AddTagsToResource", "ssm:ListTagsForResource"):  # fmt: skip
        assert allows(deployer, action), action
    assert not allows(aws_deployer_policy("999999999999"), "ssm:PutParameter")  # own account


def test_gcp_bootstrap_lets_the_deployer_create_the_secret_and_grant_only_such_secrets() -> None:
    from components.bootstrap.gcp_permissions import (
        GCP_DEPLOYER_PERMISSIONS,
        GCP_GRANT_PERMISSIONS,
        GCP_REQUIRED_SERVICES,
        gcp_grant_condition,
    )

    secret_id = secret_stack("gcp").one(GCP_SECRET).inputs["secretId"]
    from components.bootstrap.gcp_permissions import GCP_NAMED_PERMISSIONS

    assert "secretmanager.secrets.create" in GCP_DEPLOYER_PERMISSIONS
    # Versions are added under the name condition (spotroute-… secrets only).
    assert "secretmanager.versions.add" in GCP_NAMED_PERMISSIONS
    assert "secretmanager.secrets.setIamPolicy" in GCP_GRANT_PERMISSIONS
    assert "secretmanager.googleapis.com" in GCP_REQUIRED_SERVICES
    condition = gcp_grant_condition("555")
    assert 'resource.type == "secretmanager.googleapis.com/Secret"' in condition
    suffix = condition.split('resource.name.endsWith("', 1)[1].split('"', 1)[0]
    assert secret_id.endswith(suffix), (secret_id, suffix)
    # Only spotroute's secrets: another team's `db-secret-env` is not grantable.
    prefix = condition.split('resource.name.startsWith("projects/555/secrets/', 1)[1]
    assert secret_id.startswith(prefix.split('"', 1)[0] or "?"), (secret_id, prefix)


def test_azure_bootstrap_lets_the_deployer_write_the_vault_and_grant_secrets_user() -> None:
    from components.azure import KEY_VAULT_SECRETS_USER
    from components.bootstrap.azure_permissions import (
        AZURE_JOB_STORES_RESOURCE_GROUP,
        AZURE_STORES_ACTIONS,
        azure_grant_scopes,
    )

    stack = secret_stack("azure")
    # Vault and secret live in the stores group, where the deployer may write them...
    for kind in ("azure-native:keyvault:Vault", "azure-native:keyvault:Secret"):
        assert stack.one(kind).inputs["resourceGroupName"] == AZURE_JOB_STORES_RESOURCE_GROUP
    assert {"Microsoft.KeyVault/vaults/write", "Microsoft.KeyVault/vaults/secrets/write"} <= set(
        AZURE_STORES_ACTIONS
    )
    # ... and grant Key Vault Secrets User, there only.
    scopes = {scope: roles for _part, scope, roles in azure_grant_scopes("sub")}
    assert [s for s, roles in scopes.items() if KEY_VAULT_SECRETS_USER in roles] == [
        f"/subscriptions/sub/resourceGroups/{AZURE_JOB_STORES_RESOURCE_GROUP}"
    ]
