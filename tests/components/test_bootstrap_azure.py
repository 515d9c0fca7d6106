"""The Azure deployer: federated credentials with exact subjects and its four roles."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from harness import ACCOUNT_ID, CallAnswer, StateFiller, run_program
from test_bootstrap import (
    AZ_CREDENTIAL,
    AZ_GROUP,
    AZ_IDENTITY,
    AZ_ROLE_ASSIGNMENT,
    AZ_ROLE_DEFINITION,
    BROAD_AZURE_ROLES,
    CLIENT_ID,
    FEDERATION_AUDIENCE,
    GITHUB,
    GITLAB,
    PRINCIPAL_ID,
    SA_UNIQUE_ID,
    SUBSCRIPTION,
    TENANT,
    args,
    deploy,
)

from components.bootstrap import (
    AZURE_DEPLOYER_ACTIONS,
    AZURE_EXCHANGE_AUDIENCE,
    AZURE_GRANT_ACTIONS,
    AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR,
    AZURE_STORAGE_BLOB_DATA_READER,
)
from components.bootstrap.azure_permissions import (
    AZURE_IDENTITY_ACTIONS,
    AZURE_JOB_IDENTITY_RESOURCE_GROUP,
    AZURE_SELF_DELETE_ACTIONS,
    AZURE_STORES_ACTIONS,
    azure_job_role_guid,
    azure_self_delete_role_guid,
)

# --- Azure ----------------------------------------------------------------------------------------

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")


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
    assert set(definitions) == {
        "spotroute-deployer",
        "spotroute-deployer-grants",
        "spotroute-deployer-identities",  # job identities, one resource group only (below)
        "spotroute-deployer-stores",  # job storage and Key Vaults, one resource group only
        "spotroute-job-checkpoints",  # for job identities (test_azure_job_role.py)
        "spotroute-job-self-delete",  # finished nodes end their bill (test_azure.py)
    }
    for role_name, definition in definitions.items():
        assert definition["assignableScopes"] == [f"/subscriptions/{SUBSCRIPTION}"]
        for permission in definition["permissions"]:
            assert not [a for a in permission["actions"] if "*" in a]
            if role_name.startswith("spotroute-deployer"):
                assert not permission.get("dataActions")
    self_delete = next(
        r for r in stack.of_type(AZ_ROLE_DEFINITION) if r.name.endswith("-self-delete-role")
    ).inputs
    assert self_delete["roleDefinitionId"] == azure_self_delete_role_guid(SUBSCRIPTION)
    assert self_delete["permissions"] == [
        {"actions": list(AZURE_SELF_DELETE_ACTIONS)}
    ]  # control plane only: no blob data, no role or network writes
    # The deployer never defines roles itself (it could define any role).
    assert not [a for a in AZURE_DEPLOYER_ACTIONS if "roleDefinitions" in a]
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


SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"  # Key Vault Secrets User (secret env)
DATA_ACCOUNT = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/data/providers/Microsoft.Storage/"
    "storageAccounts/acmedata"
)


def grant_condition(roles: str) -> str:
    request = "@Request[Microsoft.Authorization/roleAssignments:"
    return (
        "(\n (\n  !(ActionMatches{'Microsoft.Authorization/roleAssignments/write'})\n )\n OR\n"
        " (\n"
        f"  {request}RoleDefinitionId] ForAnyOfAnyValues:GuidEquals {{{roles}}}\n"
        "  AND\n"
        f"  {request}PrincipalType] ForAnyOfAnyValues:StringEqualsIgnoreCase "
        "{'ServicePrincipal'}\n"
        "  AND\n"
        # The deployer can never grant itself a container's blobs.
        f"  {request}PrincipalId] ForAnyOfAllValues:GuidNotEquals {{{PRINCIPAL_ID}}}\n"
        " )\n)\nAND\n(\n"
        " (\n  !(ActionMatches{'Microsoft.Authorization/roleAssignments/delete'})\n )\n OR\n"
        " (\n"
        "  @Resource[Microsoft.Authorization/roleAssignments:RoleDefinitionId] "
        f"ForAnyOfAnyValues:GuidEquals {{{roles}}}\n"
        "  AND\n"
        # Never a person's or a group's assignment of those roles, e.g. a user's data reader.
        "  @Resource[Microsoft.Authorization/roleAssignments:PrincipalType] "
        "ForAnyOfAnyValues:StringEqualsIgnoreCase {'ServicePrincipal'}\n"
        " )\n)"
    )


def test_azure_deployer_grants_each_job_role_only_where_it_is_needed_never_to_itself() -> None:
    # A role-assignment condition cannot limit the scope (its attributes are the role, the
    # principal and its type: learn.microsoft.com/azure/role-based-access-control/
    # delegate-role-assignments-portal), so each scope has an assignment of its own.
    stack = deploy(args(clouds=("azure",), azure_job_storage_accounts=(DATA_ACCOUNT,)))
    grants = {a.name: a.inputs for a in stack.of_type(AZ_ROLE_ASSIGNMENT) if "grants" in a.name}
    job_role, self_delete = azure_job_role_guid(SUBSCRIPTION), azure_self_delete_role_guid(
        SUBSCRIPTION
    )

    subscription = f"/subscriptions/{SUBSCRIPTION}"
    assert {g["scope"]: g["condition"] for g in grants.values()} == {
        # Job groups are new (autonamed) per deployment: only the self-delete role goes there.
        subscription: grant_condition(self_delete),
        f"{subscription}/resourceGroups/spotroute-job-stores": grant_condition(
            f"{job_role}, {SECRETS_USER}"
        ),
        DATA_ACCOUNT: grant_condition(f"{job_role}, {AZURE_STORAGE_BLOB_DATA_READER}"),
    }
    assert all(g["conditionVersion"] == "2.0" for g in grants.values())
    # Storage Blob Data Contributor (container writes and deletes) is no longer grantable.
    assert not [g for g in grants.values() if AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR in g["condition"]]
    resources = next(
        a.inputs for a in stack.of_type(AZ_ROLE_ASSIGNMENT) if a.name.endswith("-role-assignment")
    )
    assert "condition" not in resources
    assert resources["scope"] == subscription


def test_azure_deployer_writes_vaults_secrets_and_storage_in_the_stores_group_only() -> None:
    stack = deploy(args(clouds=("azure",)))

    # Microsoft.KeyVault/vaults/write anywhere would let the deployer add itself to the access
    # policy of any access-policy vault and read its secrets (learn.microsoft.com/azure/
    # key-vault/general/assign-access-policy); secrets/write would overwrite any vault's secrets.
    subscription_wide = set(AZURE_DEPLOYER_ACTIONS)
    for action in ("Microsoft.KeyVault/vaults/write", "Microsoft.KeyVault/vaults/secrets/write",
                   "Microsoft.Storage/storageAccounts/write"):
        assert action in AZURE_STORES_ACTIONS and action not in subscription_wide
    assert not [a for a in subscription_wide
                if a.startswith(("Microsoft.KeyVault/vaults", "Microsoft.Storage/storageAccounts"))]
    role = next(r.inputs for r in stack.of_type(AZ_ROLE_DEFINITION)
                if r.inputs["roleName"] == "spotroute-deployer-stores")  # fmt: skip
    assert role["permissions"] == [{"actions": list(AZURE_STORES_ACTIONS)}]
    groups = {g.inputs["resourceGroupName"] for g in stack.of_type(AZ_GROUP)}
    assert "spotroute-job-stores" in groups
    assignments = stack.of_type(AZ_ROLE_ASSIGNMENT)
    (assignment,) = [a.inputs for a in assignments if a.name.endswith("deployer-stores-assignment")]
    assert assignment["scope"] == (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/spotroute-job-stores"
    )
    assert assignment["roleDefinitionId"].endswith(role["roleDefinitionId"])


@pytest.mark.parametrize(
    "account", ["acmedata", "/subscriptions/x/resourceGroups/data", f"{DATA_ACCOUNT}/blobServices"]
)
def test_a_listed_azure_storage_account_must_be_its_resource_id(account: str) -> None:
    with pytest.raises(ValueError, match=r"azure_job_storage_accounts: .* not a storage account"):
        args(clouds=("azure",), azure_job_storage_accounts=(account,))


def test_azure_deployer_attaches_identities_of_the_job_identities_group_only() -> None:
    stack = deploy(args(clouds=("azure",)))

    # No identity action at subscription scope: assign/action there would let the deployer give a
    # scale set it launches any user-assigned identity of the subscription.
    assert not [a for a in AZURE_DEPLOYER_ACTIONS if a.startswith("Microsoft.ManagedIdentity/")]
    assert AZURE_IDENTITY_ACTIONS == (
        "Microsoft.ManagedIdentity/userAssignedIdentities/read",
        "Microsoft.ManagedIdentity/userAssignedIdentities/write",
        "Microsoft.ManagedIdentity/userAssignedIdentities/delete",
        "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action",
    )
    role = next(
        r.inputs
        for r in stack.of_type(AZ_ROLE_DEFINITION)
        if r.inputs["roleName"] == "spotroute-deployer-identities"
    )
    assert role["permissions"] == [{"actions": list(AZURE_IDENTITY_ACTIONS)}]
    groups = {g.inputs["resourceGroupName"] for g in stack.of_type(AZ_GROUP)}
    assert AZURE_JOB_IDENTITY_RESOURCE_GROUP == "spotroute-job-identities"
    assert AZURE_JOB_IDENTITY_RESOURCE_GROUP in groups
    (assignment,) = [a.inputs for a in stack.of_type(AZ_ROLE_ASSIGNMENT) if "identities" in a.name]
    assert assignment["scope"] == (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/spotroute-job-identities"
    )
    assert assignment["principalId"] == PRINCIPAL_ID
    assert assignment["roleDefinitionId"].endswith(role["roleDefinitionId"])
    assert "condition" not in assignment


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
        "Microsoft.Network/natGateways/join/action",
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
    "azure-native:network:PublicIPAddress": {
        "Microsoft.Network/publicIPAddresses/write",
        "Microsoft.Network/publicIPAddresses/delete",
    },
    "azure-native:network:NatGateway": {
        "Microsoft.Network/natGateways/write",
        "Microsoft.Network/natGateways/delete",
        "Microsoft.Network/publicIPAddresses/join/action",
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
    "azure-native:compute:ProximityPlacementGroup": {
        "Microsoft.Compute/proximityPlacementGroups/write",
        "Microsoft.Compute/proximityPlacementGroups/delete",
    },
}


def _azure_placement(aws_config: dict[str, Any], zone: str = "2") -> Any:
    config = {
        **aws_config,
        "cloud": "azure",
        "region": "eastus",
        "zone": zone,
        "instanceTypes": ["Standard_NC96ads_A100_v4"],
        "gpuCount": 4,
        "dataUrls": [],
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
    return run_program(config, calls=calls, states=states)


@pytest.mark.parametrize("zone", ["2", ""])  # zone-less: a group gets a proximity placement group
def test_azure_deployer_may_manage_everything_an_azure_placement_creates(
    aws_config: dict[str, Any], zone: str
) -> None:
    placement = _azure_placement(aws_config, zone)
    granted = {*AZURE_DEPLOYER_ACTIONS, *AZURE_GRANT_ACTIONS, *AZURE_IDENTITY_ACTIONS,
               *AZURE_STORES_ACTIONS}  # fmt: skip

    created = {r.type for r in placement.custom_resources()}
    assert created <= set(AZURE_NEEDS), f"unlisted types: {created - set(AZURE_NEEDS)}"
    for type_ in created:
        assert AZURE_NEEDS[type_] <= granted, (type_, AZURE_NEEDS[type_] - granted)
    # The job's own role assignments are ones the grants condition lets through.
    for assignment in placement.of_type("azure-native:authorization:RoleAssignment"):
        guid = assignment.inputs["roleDefinitionId"].rsplit("/", 1)[-1]
        assert guid in {
            azure_job_role_guid(SUBSCRIPTION),
            azure_self_delete_role_guid(SUBSCRIPTION),
            AZURE_STORAGE_BLOB_DATA_READER,
        }
        assert assignment.inputs["principalType"] == "ServicePrincipal"


def test_azure_placement_job_identities_live_in_the_job_identities_group(
    aws_config: dict[str, Any],
) -> None:
    # The deployer may write and attach identities there only; anywhere else the deploy is denied.
    placement = _azure_placement(aws_config)

    identities = placement.of_type(AZ_IDENTITY)
    assert identities
    for identity in identities:
        assert identity.inputs["resourceGroupName"] == AZURE_JOB_IDENTITY_RESOURCE_GROUP


def test_azure_placement_storage_lives_in_the_stores_group_where_its_grant_is_allowed(
    aws_config: dict[str, Any],
) -> None:
    placement = _azure_placement(aws_config)
    stores = "spotroute-job-stores"

    for type_ in ("azure-native:storage:StorageAccount", "azure-native:storage:BlobContainer",
                  "azure-native:storage:BlobServiceProperties",
                  "azure-native:storage:ManagementPolicy"):  # fmt: skip
        assert [r.inputs["resourceGroupName"] for r in placement.of_type(type_)] == [stores]
    # The checkpoint grant is scoped to the container, inside the stores group, and is the job
    # role the stores-group assignment admits; self-delete goes to the job's own group.
    by_guid = {
        a.inputs["roleDefinitionId"].rsplit("/", 1)[-1]: a.inputs["scope"]
        for a in placement.of_type("azure-native:authorization:RoleAssignment")
    }
    assert by_guid[azure_job_role_guid(SUBSCRIPTION)] == (
        placement.one("azure-native:storage:BlobContainer").name + "-id"
    )
    assert "/resourceGroups/llm-finetune-rg" in by_guid[azure_self_delete_role_guid(SUBSCRIPTION)]
