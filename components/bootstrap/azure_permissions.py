"""What the Azure deployer may do: its roles' actions, the job roles the bootstrap defines and the
grants condition, each exactly what the placement components (components/azure.py) manage.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from components.azure_names import AZURE_JOB_IDENTITY_RESOURCE_GROUP as _JOB_IDENTITY_GROUP
from components.azure_names import AZURE_JOB_STORES_RESOURCE_GROUP as _JOB_STORES_GROUP
from components.bootstrap.args import DEPLOYER_NAME

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
    # A zone-less group's proximity placement group (one datacenter); the scale set joins it.
    "Microsoft.Compute/proximityPlacementGroups/read",
    "Microsoft.Compute/proximityPlacementGroups/write",
    "Microsoft.Compute/proximityPlacementGroups/delete",
    # The vaults and storage accounts themselves: AZURE_STORES_ACTIONS, in the stores group only.
    # Here only the location-level reads their long-running operations need.
    "Microsoft.KeyVault/locations/deletedVaults/read",
    "Microsoft.KeyVault/locations/operationResults/read",
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
# The jobs' stores live in one more bootstrap group (components/azure_names.py): the deployer may
# write Key Vaults, their secrets and storage accounts there and nowhere else. At subscription
# scope `Microsoft.KeyVault/vaults/write` would let it add itself to the access policy of any
# access-policy vault of the subscription and read its secrets, `vaults/secrets/write` overwrite
# any vault's secrets (Microsoft's warning: learn.microsoft.com/azure/key-vault/general/
# assign-access-policy, "can grant themselves data plane access by setting a Key Vault access
# policy"). A fourth role, assigned at that group only.
AZURE_JOB_STORES_RESOURCE_GROUP = _JOB_STORES_GROUP  # shared with components/azure*.py
AZURE_STORES_ROLE_NAME = f"{DEPLOYER_NAME}-stores"
AZURE_STORES_ACTIONS: tuple[str, ...] = (
    # SpotGpuGroup's secret env: a Key Vault per deployment (RBAC mode) and one secret in it,
    # written through ARM (the deployer holds no data-plane role on any vault).
    "Microsoft.KeyVault/vaults/read",
    "Microsoft.KeyVault/vaults/write",
    "Microsoft.KeyVault/vaults/delete",
    "Microsoft.KeyVault/vaults/secrets/read",
    "Microsoft.KeyVault/vaults/secrets/write",
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
)
# Role assignments live in a second role, assigned once per scope, each under
# azure_grant_condition() with the roles that scope needs (azure_grant_scopes).
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
# Key Vault Secrets User (built-in): read secret contents; azure.SpotGpuGroup gives it to the job
# identity on its one secret (the secret env).
AZURE_KEY_VAULT_SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"


def azure_role_guid(subscription_id: str, role_name: str) -> str:
    """A stable GUID for a spotroute role definition, so a re-run targets the same definition."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"spotroute:{subscription_id}/{role_name}"))


def azure_job_role_guid(subscription_id: str) -> str:
    """GUID of the job checkpoint role in this subscription (what azure.JobIdentity assigns)."""
    return azure_role_guid(subscription_id, AZURE_JOB_ROLE_NAME)


def azure_self_delete_role_guid(subscription_id: str) -> str:
    """GUID of the self-delete role in this subscription (what azure.SpotGpuGroup assigns)."""
    return azure_role_guid(subscription_id, AZURE_SELF_DELETE_ROLE_NAME)


def azure_grant_scopes(
    subscription_id: str, storage_account_ids: Sequence[str] = ()
) -> list[tuple[str, str, tuple[str, ...]]]:
    """Where the deployer may grant which job roles: (name part, scope, role GUIDs).

    - the subscription: the self-delete role only, which azure.SpotGpuGroup assigns at the job's
      resource group (a new, autonamed group per deployment: no narrower scope exists for it);
    - the stores group: the job checkpoint role (created checkpoint and staging containers) and
      Key Vault Secrets User (the secret env's secret);
    - each storage account the bootstrap lists (`azureJobStorageAccounts`: data, reused
      checkpoint containers): the job checkpoint role and Storage Blob Data Reader.
    """
    subscription = f"/subscriptions/{subscription_id}"
    job_role = azure_job_role_guid(subscription_id)
    scopes = [
        ("grants", subscription, (azure_self_delete_role_guid(subscription_id),)),
        (
            "grants-stores",
            f"{subscription}/resourceGroups/{AZURE_JOB_STORES_RESOURCE_GROUP}",
            (job_role, AZURE_KEY_VAULT_SECRETS_USER),
        ),
    ]
    for account_id in storage_account_ids:
        account = account_id.rstrip("/").rsplit("/", 1)[-1]
        scopes.append(
            (f"grants-{account}", account_id, (job_role, AZURE_STORAGE_BLOB_DATA_READER))
        )
    return scopes


def azure_grant_condition(deployer_principal_id: str, grantable: Sequence[str]) -> str:
    """ABAC condition (version 2.0) of the deployer's roleAssignments rights at one scope.

    Writes: only the `grantable` roles (job roles: azure_grant_scopes), only to service principals
    (managed identities), and never to the deployer itself (it could otherwise grant itself a
    container's blobs, a vault's secrets, or a VM's deletion). Deletes: only assignments of those
    roles to service principals (never a person's or a group's).

    That is all Azure's role-assignment conditions can say: their attributes are the role
    definition, the principal id and the principal type, nothing about the assignment's scope or
    the principal's resource group (docs/security.md, "What Azure conditions cannot express"),
    which is why each scope gets its own assignment with its own roles.
    """
    roles = ", ".join(grantable)
    return (
        "(\n (\n  !(ActionMatches{'Microsoft.Authorization/roleAssignments/write'})\n )\n OR\n (\n"
        "  @Request[Microsoft.Authorization/roleAssignments:RoleDefinitionId] "
        f"ForAnyOfAnyValues:GuidEquals {{{roles}}}\n"
        "  AND\n"
        "  @Request[Microsoft.Authorization/roleAssignments:PrincipalType] "
        "ForAnyOfAnyValues:StringEqualsIgnoreCase {'ServicePrincipal'}\n"
        "  AND\n"
        "  @Request[Microsoft.Authorization/roleAssignments:PrincipalId] "
        f"ForAnyOfAllValues:GuidNotEquals {{{deployer_principal_id}}}\n"
        " )\n)\nAND\n(\n (\n  !(ActionMatches{'Microsoft.Authorization/roleAssignments/delete'})\n"
        " )\n OR\n (\n"
        "  @Resource[Microsoft.Authorization/roleAssignments:RoleDefinitionId] "
        f"ForAnyOfAnyValues:GuidEquals {{{roles}}}\n"
        "  AND\n"
        "  @Resource[Microsoft.Authorization/roleAssignments:PrincipalType] "
        "ForAnyOfAnyValues:StringEqualsIgnoreCase {'ServicePrincipal'}\n"
        " )\n)"
    )
