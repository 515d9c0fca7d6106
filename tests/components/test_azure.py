"""Azure components under Pulumi mocks: what a `pulumi up` of an Azure placement would create."""

from __future__ import annotations

import base64
import re
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pulumi
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from harness import (
    CallAnswer,
    CapturedResource,
    CapturedStack,
    StateFiller,
    run_components,
    run_program,
)
from hypothesis import given
from hypothesis import strategies as st

from components import azure as azure_components
from components import azure_names, azure_network, azure_storage
from components.args import (
    CheckpointBucketArgs,
    JobIdentityArgs,
    NetworkArgs,
)
from components.bootstrap.azure_permissions import azure_job_role_guid, azure_self_delete_role_guid
from components.program import JOB_NAME

SUBSCRIPTION = "00000000-0000-4000-8000-000000000001"
PRINCIPAL_ID = "11111111-1111-4111-8111-111111111111"
CLIENT_ID = "22222222-2222-4222-8222-222222222222"
VMSS = "azure-native:compute:VirtualMachineScaleSet"
PPG = "azure-native:compute:ProximityPlacementGroup"
NSG = "azure-native:network:NetworkSecurityGroup"
NAT_GATEWAY = "azure-native:network:NatGateway"
PUBLIC_IP = "azure-native:network:PublicIPAddress"
ROLE_DEFINITION = "azure-native:authorization:RoleDefinition"
SUBNET = "azure-native:network:Subnet"
ACCOUNT = "azure-native:storage:StorageAccount"
CONTAINER = "azure-native:storage:BlobContainer"
ROLE = "azure-native:authorization:RoleAssignment"
GROUP = "azure-native:resources:ResourceGroup"
IDENTITY = "azure-native:managedidentity:UserAssignedIdentity"
CONTRIBUTOR = azure_job_role_guid(SUBSCRIPTION)  # the checkpoint role: blob data actions only
READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"  # Storage Blob Data Reader
SELF_DELETE = azure_self_delete_role_guid(SUBSCRIPTION)  # finished nodes delete their VMs
BROAD_ROLES = {
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635",  # Owner
    "b24988ac-6180-42a0-ab88-20f7382dd24c",  # Contributor
    "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",  # User Access Administrator
}
EXISTING_URL = "https://acmeckpt.blob.core.windows.net/shared/teams/ml/"
DATA_URL = "https://acmedata.blob.core.windows.net/datasets/llm/"
ACCOUNT_IDS = {
    "acmeckpt": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/ml-storage/providers/"
    "Microsoft.Storage/storageAccounts/acmeckpt",
    "acmedata": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/ml-data/providers/"
    "Microsoft.Storage/storageAccounts/acmedata",
}
BLOBS = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
# Every Azure resource type the components create, split by whether Azure lets it carry tags. A
# new resource type fails test_every_resource_type_is_classified_for_tagging until it is listed.
TAGGABLE = {
    GROUP,
    "azure-native:network:VirtualNetwork",
    NSG,
    NAT_GATEWAY,
    PUBLIC_IP,
    ACCOUNT,
    IDENTITY,
    VMSS,
}
UNTAGGABLE = {
    SUBNET,
    "azure-native:storage:BlobServiceProperties",
    CONTAINER,
    "azure-native:storage:ManagementPolicy",
    ROLE,
}

# The azure-native invoke the components make: the deploying principal's subscription.
AZURE_CALLS: dict[str, CallAnswer] = {
    "azure-native:authorization:getClientConfig": lambda args: {
        "subscriptionId": SUBSCRIPTION,
        "tenantId": "33333333-3333-4333-8333-333333333333",
        "clientId": "44444444-4444-4444-8444-444444444444",
        "objectId": "55555555-5555-4555-8555-555555555555",
    }
}


def _named(name_input: str) -> StateFiller:
    """Azure's `name` output: the explicit physical name, else logical name + an autoname suffix."""
    return lambda name, inputs: {"name": inputs.get(name_input) or f"{name}a1b2c3"}


# Computed outputs the components read; the scale set's identity comes back as a map, not the
# list it was given (the SDK refuses to deserialize the echoed list).
AZURE_STATES: dict[str, StateFiller] = {
    GROUP: _named("resourceGroupName"),
    ACCOUNT: _named("accountName"),
    "azure-native:network:VirtualNetwork": _named("virtualNetworkName"),
    NSG: _named("networkSecurityGroupName"),
    IDENTITY: lambda name, inputs: {
        "name": inputs.get("resourceName") or f"{name}a1b2c3",
        "principalId": PRINCIPAL_ID,
        "clientId": CLIENT_ID,
    },
    VMSS: lambda name, inputs: {
        "identity": {
            "type": inputs["identity"]["type"],
            "userAssignedIdentities": {i: {} for i in inputs["identity"]["userAssignedIdentities"]},
        }
    },
}


@pytest.fixture
def azure_config(aws_config: dict[str, Any]) -> dict[str, Any]:
    """A complete, valid `spotroute:*` config for an Azure spot placement (keys unprefixed):
    conftest's AWS one with Azure's region, zone, VM sizes, GPU count, no data, price source."""
    return {
        **aws_config,
        "cloud": "azure",
        "region": "eastus",
        "zone": "2",
        "instanceTypes": ["Standard_NC96ads_A100_v4", "Standard_NC48ads_A100_v4"],
        "gpuCount": 4,
        "dataUrls": [],
        "priceSource": "azure-api",
    }


def placement(config: dict[str, Any], **changes: Any) -> CapturedStack:
    """The shared placement program (components/program.py), unchanged, on Azure."""
    return run_program({**config, **changes}, calls=AZURE_CALLS, states=AZURE_STATES)


def wired(config: dict[str, Any], **changes: Any) -> CapturedStack:
    """The program with the existing storage accounts' ids configured (storageAccountIds)."""
    return run_program(
        {**config, "storageAccountIds": ACCOUNT_IDS, **changes},
        calls=AZURE_CALLS,
        states=AZURE_STATES,
    )


def vm_profile(stack: CapturedStack) -> dict[str, Any]:
    profile: dict[str, Any] = stack.one(VMSS).inputs["virtualMachineProfile"]
    return profile


def custom_data(stack: CapturedStack) -> str:
    return base64.b64decode(vm_profile(stack)["osProfile"]["customData"]).decode()


def inbound_rules(stack: CapturedStack) -> list[dict[str, Any]]:
    rules = stack.one(NSG).inputs.get("securityRules", [])
    return [r for r in rules if r["direction"] == "Inbound"]


def role_guid(assignment: dict[str, Any]) -> str:
    definition: str = assignment["roleDefinitionId"]
    assert definition.startswith(
        f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/"
    )
    return definition.rsplit("/", 1)[1]


def assignments(stack: CapturedStack) -> dict[str, dict[str, Any]]:
    """Role assignments by role GUID."""
    data_plane = [r for r in stack.of_type(ROLE) if not r.name.endswith("-self-delete")]
    found = {role_guid(r.inputs): r.inputs for r in data_plane}
    assert len(found) == len(data_plane), "one assignment per role"
    return found


def checkpoint_prefix(stack: CapturedStack) -> str:
    """The blob path prefix (inside the container) of the job's checkpoint URL."""
    url: str = stack.outputs["checkpointUrl"]
    return url.split(".blob.core.windows.net/", 1)[1].split("/", 1)[1]


# --- market -----------------------------------------------------------------------------------


@pytest.mark.parametrize("existing_url", ["", EXISTING_URL])
def test_spot_nodes_are_evictable_spot_vms_capped_at_max_price(
    azure_config: dict[str, Any], existing_url: str
) -> None:
    stack = wired(azure_config, market="spot", checkpointUrl=existing_url)
    scale_set = stack.one(VMSS).inputs
    profile = vm_profile(stack)

    assert profile["priority"] == "Spot"
    assert profile["evictionPolicy"] == "Delete"
    assert profile["billingProfile"] == {"maxPrice": 20.0}
    assert scale_set["orchestrationMode"] == "Flexible"
    assert scale_set["platformFaultDomainCount"] == 1
    assert scale_set["sku"] == {"name": "Standard_NC96ads_A100_v4", "capacity": 2}


@pytest.mark.parametrize("existing_url", ["", EXISTING_URL])
def test_on_demand_nodes_are_regular_vms_without_eviction_or_bid(
    azure_config: dict[str, Any], existing_url: str
) -> None:
    stack = wired(azure_config, market="on-demand", checkpointUrl=existing_url)
    profile = vm_profile(stack)

    assert profile["priority"] == "Regular"
    assert "evictionPolicy" not in profile
    assert "billingProfile" not in profile
    assert stack.one(VMSS).inputs["sku"]["capacity"] == 2


@pytest.mark.parametrize(("zone", "zones"), [("2", ["2"]), ("eastus-3", ["3"]), ("", None)])
def test_scale_set_is_pinned_to_the_placement_zone_only_when_one_is_given(
    azure_config: dict[str, Any], zone: str, zones: list[str] | None
) -> None:
    stack = placement(azure_config, zone=zone)

    assert stack.one(VMSS).inputs.get("zones") == zones


def test_zone_of_another_region_is_refused_at_construction(azure_config: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="zone"):
        placement(azure_config, zone="westeurope-1")


# --- network ----------------------------------------------------------------------------------


def test_nsg_admits_only_the_subnets_own_nodes(azure_config: dict[str, Any]) -> None:
    stack = placement(azure_config, nodeCount=4)
    rules = {r["name"]: r for r in inbound_rules(stack)}

    nodes = rules["allow-nodes-inbound"]
    assert (nodes["access"], nodes["protocol"]) == ("Allow", "*")
    assert nodes["sourceAddressPrefix"] == nodes["destinationAddressPrefix"] == "10.42.0.0/20"
    vnet = rules["deny-vnet-inbound"]
    assert (vnet["access"], vnet["sourceAddressPrefix"]) == ("Deny", "VirtualNetwork")
    internet = rules["deny-internet-inbound"]
    assert (internet["access"], internet["sourceAddressPrefix"]) == ("Deny", "Internet")
    assert nodes["priority"] < vnet["priority"] < internet["priority"]
    assert [r for r in rules.values() if r["access"] == "Allow"] == [nodes]


def test_remote_access_is_refused_on_azure_naming_the_field() -> None:
    args = NetworkArgs(job_name="llm", region="eastus", remote_access=True)

    with pytest.raises(ValueError, match="remote_access"):
        run_components(lambda: azure_network.Network("llm", args), calls=AZURE_CALLS)


def test_nodes_have_private_addresses_only_in_the_subnet_behind_the_nsg(
    azure_config: dict[str, Any],
) -> None:
    stack = placement(azure_config)
    (nic,) = vm_profile(stack)["networkProfile"]["networkInterfaceConfigurations"]
    (ip,) = nic["ipConfigurations"]

    assert "publicIPAddressConfiguration" not in ip
    assert not [t for t in stack.types() if "LoadBalancer" in t]
    assert ip["subnet"]["id"] == f"{stack.one(SUBNET).name}-id"
    assert nic["networkSecurityGroup"]["id"] == f"{stack.one(NSG).name}-id"
    assert stack.one(SUBNET).inputs["networkSecurityGroup"]["id"] == f"{stack.one(NSG).name}-id"


def test_subnet_reaches_the_internet_through_a_standard_nat_gateway_only(
    azure_config: dict[str, Any],
) -> None:
    stack = placement(azure_config)
    subnet = stack.one(SUBNET).inputs
    nat = stack.one(NAT_GATEWAY)
    address = stack.one(PUBLIC_IP)

    # Flexible scale sets get no default outbound access: outbound must be explicit.
    assert subnet["natGateway"] == {"id": f"{nat.name}-id"}
    assert subnet["defaultOutboundAccess"] is False
    assert nat.inputs["sku"] == {"name": "Standard"}
    assert nat.inputs["publicIpAddresses"] == [{"id": f"{address.name}-id"}]
    assert address.inputs["sku"]["name"] == "Standard"
    assert address.inputs["publicIPAllocationMethod"] == "Static"
    # The address belongs to the NAT gateway alone, never to a node's NIC.
    assert subnet["serviceEndpoints"] == [{"service": "Microsoft.Storage"}]


def test_finished_nodes_delete_themselves_with_a_role_confined_to_the_job_group(
    azure_config: dict[str, Any],
) -> None:
    stack = wired(azure_config)
    grant = stack.named("llm-finetune-self-delete").inputs
    group_scope = (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{stack.named('llm-finetune-rg').name}a1b2c3"
    )

    # The role is the bootstrap's (test_bootstrap_azure checks its actions); the job defines none.
    assert not stack.of_type(ROLE_DEFINITION)
    assert set(azure_components.SELF_DELETE_ACTIONS) == {
        "Microsoft.Compute/virtualMachines/read",
        "Microsoft.Compute/virtualMachines/delete",
        "Microsoft.Compute/disks/delete",
        "Microsoft.Network/networkInterfaces/delete",
    }
    assert grant["scope"] == group_scope
    assert grant["roleDefinitionId"] == (
        f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Authorization/roleDefinitions/"
        f"{azure_self_delete_role_guid(SUBSCRIPTION)}"
    )
    assert grant["principalId"] == PRINCIPAL_ID
    script = custom_data(stack)
    finish = script[script.index("spotroute_finish() {") : script.index("trap spotroute_finish")]
    assert "-X DELETE" in finish and "management.azure.com${vm}" in finish
    assert "shutdown -h +" not in script  # a guest power-off alone would keep billing


# --- checkpoint storage -----------------------------------------------------------------------


def test_created_storage_is_private_https_only_tls12_and_keyless(
    azure_config: dict[str, Any],
) -> None:
    stack = placement(azure_config)
    account = stack.one(ACCOUNT).inputs

    assert (account["kind"], account["sku"]["name"]) == ("StorageV2", "Standard_LRS")
    assert account["allowBlobPublicAccess"] is False
    assert account["enableHttpsTrafficOnly"] is True
    assert account["minimumTlsVersion"] == "TLS1_2"
    assert account["allowSharedKeyAccess"] is False
    assert stack.one(CONTAINER).inputs["publicAccess"] == "None"


def test_created_storage_keeps_versions_and_expires_old_ones_after_the_configured_days(
    azure_config: dict[str, Any],
) -> None:
    stack = placement(azure_config)
    service = stack.one("azure-native:storage:BlobServiceProperties").inputs
    (rule,) = stack.one("azure-native:storage:ManagementPolicy").inputs["policy"]["rules"]

    assert service["isVersioningEnabled"] is True
    assert service["deleteRetentionPolicy"] == {"enabled": False}  # test_bucket_destroy.py
    assert rule["enabled"] is True
    assert rule["definition"]["actions"]["version"]["delete"] == {"daysAfterCreationGreaterThan": 7}


def test_checkpoint_storage_survives_stack_destroy_but_compute_does_not(
    azure_config: dict[str, Any],
) -> None:
    kept: dict[str, bool] = {}

    def build() -> None:
        def record(args: pulumi.ResourceTransformationArgs) -> None:
            kept[args.name] = bool(args.opts.retain_on_delete)

        pulumi.runtime.register_stack_transformation(record)
        bucket = azure_storage.CheckpointBucket(
            "llm", CheckpointBucketArgs(job_name="llm", region="eastus")
        )
        azure_network.Network("llm", NetworkArgs(job_name="llm", region="eastus"))
        azure_components.JobIdentity(
            "llm",
            JobIdentityArgs(job_name="llm", region="eastus", checkpoint_prefix="llm/"),
            bucket,
        )

    run_components(build, calls=AZURE_CALLS, states=AZURE_STATES)

    assert {name for name, keep in kept.items() if keep} == {
        "llm-storage",
        "llm-blob-service",
        "llm-container",
        "llm-lifecycle",
    }
    assert kept["llm-rg"] is False and kept["llm-identity"] is False


def test_created_storage_checkpoint_url_is_the_job_prefix_of_the_new_container(
    azure_config: dict[str, Any],
) -> None:
    stack = placement(azure_config)
    account_name = stack.one(ACCOUNT).inputs["accountName"]

    assert re.fullmatch(r"srllmfinetune[0-9a-f]{8}", account_name)
    assert stack.outputs["checkpointUrl"] == (
        f"https://{account_name}.blob.core.windows.net/checkpoints/llm-finetune/"
    )


@pytest.mark.parametrize(
    "job_name",
    ["a", "llm-finetune", "x" * 63, "a-b-c-d-e-f-g-h-i-j-k-l-m-n-o-p", "job-2024-01-01", "z9"],
)
def test_storage_account_name_fits_azure_rules_for_any_job_name(job_name: str) -> None:
    name = azure_names.storage_account_name(job_name, f"{SUBSCRIPTION}/rg-a1b2c3")

    assert re.fullmatch(r"[a-z0-9]{3,24}", name)
    assert name == azure_names.storage_account_name(job_name, f"{SUBSCRIPTION}/rg-a1b2c3")


@given(job_name=st.from_regex(JOB_NAME, fullmatch=True), salt=st.text(max_size=80))
def test_storage_account_name_is_valid_for_every_valid_job_name(job_name: str, salt: str) -> None:
    assert re.fullmatch(r"sr[a-z0-9]{9,22}", azure_names.storage_account_name(job_name, salt))


def test_storage_account_name_differs_between_deployments_and_similar_job_names() -> None:
    names = {
        azure_names.storage_account_name("llm-finetune", f"{SUBSCRIPTION}/rg-1"),
        azure_names.storage_account_name("llm-finetune", f"{SUBSCRIPTION}/rg-2"),
        azure_names.storage_account_name("llmfinetune", f"{SUBSCRIPTION}/rg-1"),
        azure_names.storage_account_name("llm-finetune", "other-subscription/rg-1"),
    }

    assert len(names) == 4


def test_existing_container_is_reused_and_no_storage_is_created(
    azure_config: dict[str, Any],
) -> None:
    stack = wired(azure_config, checkpointUrl=EXISTING_URL)

    assert not [r for r in stack.resources if r.type.startswith("azure-native:storage:")]
    assert stack.outputs["checkpointUrl"] == (
        "https://acmeckpt.blob.core.windows.net/shared/teams/ml/llm-finetune/"
    )
    assert [r.name for r in stack.of_type(GROUP)] == ["llm-finetune-rg"]


def test_existing_container_without_its_account_id_is_refused_naming_the_fix(
    azure_config: dict[str, Any],
) -> None:
    with pytest.raises(ValueError, match=r"existing_url: .*storage_account_ids"):
        placement(azure_config, checkpointUrl=EXISTING_URL)


@pytest.mark.parametrize(
    "url",
    [
        "s3://acme/checkpoints/",
        "https://acmeckpt.example.com/shared/",
        "https://acmeckpt.blob.core.windows.net/",
        "https://Bad_Account.blob.core.windows.net/shared/",
        "https://acmeckpt.blob.core.windows.net/shared/it's/",
    ],
)
def test_existing_url_that_is_not_a_usable_blob_container_is_refused(url: str) -> None:
    args = CheckpointBucketArgs(job_name="llm", region="eastus", existing_url=url)

    with pytest.raises(ValueError, match="existing_url"):
        run_components(
            lambda: azure_storage.CheckpointBucket(
                "llm", replace(args, storage_account_ids=ACCOUNT_IDS)
            ),
            calls=AZURE_CALLS,
        )


def test_account_id_of_another_account_is_refused() -> None:
    args = CheckpointBucketArgs(job_name="llm", region="eastus", existing_url=EXISTING_URL)
    wrong = {"acmeckpt": ACCOUNT_IDS["acmedata"]}

    with pytest.raises(ValueError, match="storage_account_ids"):
        run_components(
            lambda: azure_storage.CheckpointBucket("llm", replace(args, storage_account_ids=wrong)),
            calls=AZURE_CALLS,
        )


# --- identity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("existing_url", ["", EXISTING_URL])
def test_job_identity_writes_only_under_its_checkpoint_prefix_in_the_container(
    azure_config: dict[str, Any], existing_url: str
) -> None:
    stack = wired(azure_config, checkpointUrl=existing_url)
    prefix = checkpoint_prefix(stack)
    (checkpoints,) = assignments(stack).values()

    assert role_guid(checkpoints) == CONTRIBUTOR
    expected_scope = (
        f"{ACCOUNT_IDS['acmeckpt']}/blobServices/default/containers/shared"
        if existing_url
        else f"{stack.one(CONTAINER).name}-id"
    )
    assert checkpoints["scope"] == expected_scope
    assert checkpoints["conditionVersion"] == "2.0"
    assert f"@Resource[{BLOBS}:path] StringStartsWith '{prefix}'" in checkpoints["condition"]
    assert f"@Request[{BLOBS}:prefix] StringStartsWith '{prefix}'" in checkpoints["condition"]
    assert checkpoints["principalId"] == PRINCIPAL_ID
    assert checkpoints["principalType"] == "ServicePrincipal"


def test_checkpoint_condition_guards_every_blob_action_of_the_contributor_role(
    azure_config: dict[str, Any],
) -> None:
    condition = assignments(placement(azure_config))[CONTRIBUTOR]["condition"]
    guarded = set(re.findall(r"ActionMatches\{'" + re.escape(BLOBS) + r"/([a-z/]+)'\}", condition))

    # Storage Blob Data Contributor's data actions: read (incl. list), write, add, delete, move.
    assert guarded == {"read", "write", "add/action", "delete", "move/action"}
    assert "AND NOT SubOperationMatches{'Blob.List'}" in condition
    assert "AND SubOperationMatches{'Blob.List'}" in condition


def test_only_the_two_data_plane_roles_are_ever_assigned(azure_config: dict[str, Any]) -> None:
    stack = wired(azure_config, checkpointUrl=EXISTING_URL, dataUrls=[DATA_URL])
    roles = assignments(stack)

    assert set(roles) == {CONTRIBUTOR, READER}
    assert not set(roles) & BROAD_ROLES
    for assignment in roles.values():
        assert re.fullmatch(
            r"/subscriptions/.+/storageAccounts/\w+/blobServices/default/"
            r"containers/[a-z0-9-]+",
            assignment["scope"],
        )


def test_data_reader_is_scoped_to_the_data_container_and_prefix(
    azure_config: dict[str, Any],
) -> None:
    data = assignments(wired(azure_config, dataUrls=[DATA_URL]))[READER]

    assert data["scope"] == f"{ACCOUNT_IDS['acmedata']}/blobServices/default/containers/datasets"
    assert f"@Resource[{BLOBS}:path] StringStartsWith 'llm/'" in data["condition"]
    assert "blobs/write" not in data["condition"]
    assert data["principalType"] == "ServicePrincipal"


@pytest.mark.parametrize("data_url", ["", "s3://acme-datasets/llm/", "gs://acme/llm/"])
def test_data_outside_azure_adds_no_grant(azure_config: dict[str, Any], data_url: str) -> None:
    stack = placement(azure_config, dataUrls=[data_url] if data_url else [])

    assert set(assignments(stack)) == {CONTRIBUTOR}


def test_azure_data_without_its_account_id_is_refused_naming_the_fix(
    azure_config: dict[str, Any],
) -> None:
    with pytest.raises(ValueError, match=r"data_urls: .*storage_account_ids"):
        placement(azure_config, dataUrls=[DATA_URL])


def test_identity_refuses_a_prefix_that_would_grant_the_whole_container() -> None:
    def build() -> None:
        bucket = azure_storage.CheckpointBucket(
            "llm", CheckpointBucketArgs(job_name="llm", region="eastus")
        )
        azure_components.JobIdentity(
            "llm",
            JobIdentityArgs(job_name="llm", region="eastus", checkpoint_prefix="/"),
            bucket,
        )

    with pytest.raises(ValueError, match="checkpoint_prefix"):
        run_components(build, calls=AZURE_CALLS, states=AZURE_STATES)


def test_role_definitions_are_looked_up_in_the_deploying_subscription_via_the_provider(
    azure_config: dict[str, Any],
) -> None:
    stack = placement(azure_config)
    provider = stack.one("pulumi:providers:azure-native")

    assert {i.token for i in stack.invokes} == {"azure-native:authorization:getClientConfig"}
    assert all(i.provider.startswith(provider.urn + "::") for i in stack.invokes)
    assert provider.inputs["location"] == "eastus"


# --- resource groups --------------------------------------------------------------------------


def test_program_gives_the_job_one_group_and_its_identity_and_storage_to_the_bootstraps(
    azure_config: dict[str, Any],
) -> None:
    stack = placement(azure_config)
    groups = {r.name: r for r in stack.of_type(GROUP)}

    assert set(groups) == {"llm-finetune-rg"}
    # The one group where the deployer may write storage accounts and grant the job role there.
    assert stack.one(ACCOUNT).inputs["resourceGroupName"] == "spotroute-job-stores"
    assert all(g.inputs["location"] == "eastus" for g in groups.values())
    assert stack.one(VMSS).inputs["resourceGroupName"] == "llm-finetune-rga1b2c3"
    # The one group where the deployer may create and attach identities (bootstrap, item 12).
    assert stack.one(IDENTITY).inputs["resourceGroupName"] == "spotroute-job-identities"


def test_identity_goes_to_the_bootstraps_identities_group_and_creates_no_group_of_its_own(
    azure_config: dict[str, Any],
) -> None:
    stack = wired(azure_config)

    assert {r.name for r in stack.of_type(GROUP)} == {"llm-finetune-rg"}
    assert stack.one(IDENTITY).inputs["resourceGroupName"] == "spotroute-job-identities"
    assert stack.one(ACCOUNT).inputs["resourceGroupName"] == "spotroute-job-stores"


def test_created_storage_gets_a_new_account_for_each_deployment_and_never_moves(
    azure_config: dict[str, Any],
) -> None:
    def account(deployment: str) -> CapturedResource:
        return placement({**azure_config, "deploymentId": deployment}).one(ACCOUNT)

    # A kept account keeps its global name: a stack created again must not ask for it (ARM's
    # create-or-update would adopt the old job's checkpoints).
    assert account("1a2b3c4d").inputs["accountName"] == account("1a2b3c4d").inputs["accountName"]
    assert account("1a2b3c4d").inputs["accountName"] != account("5e6f7a8b").inputs["accountName"]
    # A stack from before the stores group keeps its account in its old group, under its name.
    assert {"resourceGroupName", "accountName"} <= set(account("1a2b3c4d").ignore_changes)


# --- nodes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("existing_url", ["", EXISTING_URL])
def test_custom_data_runs_the_job_with_job_id_checkpoint_url_and_identity(
    azure_config: dict[str, Any], existing_url: str
) -> None:
    stack = wired(azure_config, checkpointUrl=existing_url)
    script = custom_data(stack)

    assert "export SPOTROUTE_JOB_ID=llm-finetune\n" in script
    assert f"export SPOTROUTE_CHECKPOINT_URL={stack.outputs['checkpointUrl']}\n" in script
    assert f"export AZURE_CLIENT_ID={CLIENT_ID}\n" in script
    assert "export EPOCHS=3\n" in script
    assert "ghcr.io/acme/trainer:1.4 python train.py --resume" in script


def test_job_env_may_choose_its_own_azure_client_id_but_the_self_delete_keeps_the_nodes(
    azure_config: dict[str, Any], tmp_path: Path
) -> None:
    job = {**azure_config["job"], "env": {"AZURE_CLIENT_ID": "mine"}}
    # One node: a group's rendezvous reads its storage with the node's identity (its client id).
    script = custom_data(placement(azure_config, job=job, nodeCount=1))
    assert "export AZURE_CLIENT_ID=mine\n" in script

    # Run the script's finish function on a host whose curl records what it was asked.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/curl\n')
    (bin_dir / "sleep").write_text("#!/bin/sh\n")
    (bin_dir / "shutdown").write_text("#!/bin/sh\n")
    for tool in ("curl", "sleep", "shutdown"):
        (bin_dir / tool).chmod(0o755)
    finish = script[script.index("spotroute_finish() {") : script.index("trap spotroute_finish")]
    subprocess.run(
        ["bash", "-c", f"{finish}\nfalse; spotroute_finish"],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "AZURE_CLIENT_ID": "mine"},
        capture_output=True, check=False,
    )  # fmt: skip

    token_request = (tmp_path / "curl").read_text().splitlines()[0]
    assert "identity/oauth2/token" in token_request
    assert f"client_id={CLIENT_ID}" in token_request and "client_id=mine" not in token_request


def test_nodes_boot_the_hpc_gpu_image_on_a_premium_disk_of_the_asked_size(
    azure_config: dict[str, Any],
) -> None:
    storage_profile = vm_profile(placement(azure_config, bootDiskGb=512))["storageProfile"]

    assert storage_profile["imageReference"] == {
        "publisher": "microsoft-dsvm",
        "offer": "ubuntu-hpc",
        "sku": "2204",
        "version": "latest",
    }
    disk = storage_profile["osDisk"]
    assert disk["diskSizeGB"] == 512
    assert disk["managedDisk"] == {"storageAccountType": "Premium_LRS"}
    assert disk["deleteOption"] == "Delete"


def test_nodes_allow_no_password_and_no_usable_ssh_key(azure_config: dict[str, Any]) -> None:
    os_profile = vm_profile(placement(azure_config))["osProfile"]
    (key,) = os_profile["linuxConfiguration"]["ssh"]["publicKeys"]

    assert "adminPassword" not in os_profile
    assert os_profile["linuxConfiguration"]["disablePasswordAuthentication"] is True
    assert key["path"] == f"/home/{os_profile['adminUsername']}/.ssh/authorized_keys"
    public_key = load_ssh_public_key(key["keyData"].encode())
    assert isinstance(public_key, rsa.RSAPublicKey) and public_key.key_size == 2048
    assert key["keyData"] == azure_names.locked_ssh_public_key()


def test_nodes_run_as_the_job_identity_only(azure_config: dict[str, Any]) -> None:
    stack = placement(azure_config)

    assert stack.one(VMSS).inputs["identity"] == {
        "type": "UserAssigned",
        "userAssignedIdentities": [f"{stack.one(IDENTITY).name}-id"],
    }
    assert stack.outputs["identity"] == f"{stack.one(IDENTITY).name}-id"
    assert stack.outputs["groupId"] == f"{stack.one(VMSS).name}-id"


def test_a_zone_less_group_is_kept_in_one_datacenter_by_a_proximity_placement_group(
    azure_config: dict[str, Any],
) -> None:
    # Azure quotes are regional, so most placements name no zone, and a scale set without zones
    # spreads its VMs over the region. A group is placed in one place: a proximity placement
    # group keeps its VMs in one datacenter (https://learn.microsoft.com/azure/virtual-machines/
    # co-location). A zonal scale set is in one zone already; one node needs nothing.
    stack = placement(azure_config, zone="", nodeCount=2)
    group = stack.one(PPG)
    assert group.inputs["location"] == "eastus"
    assert group.inputs["proximityPlacementGroupType"] == "Standard"
    assert group.inputs["intent"] == {"vmSizes": ["Standard_NC96ads_A100_v4"]}
    wanted = {"spotroute-job": "llm-finetune", "team": "ml-platform", "managed-by": "spotroute"}
    assert wanted.items() <= group.inputs["tags"].items()
    scale_set = stack.one(VMSS).inputs
    assert "zones" not in scale_set
    assert scale_set["proximityPlacementGroup"] == {"id": f"{group.name}-id"}

    for changes in ({"zone": "2", "nodeCount": 2}, {"zone": "", "nodeCount": 1}):
        other = placement(azure_config, **changes)
        assert not other.of_type(PPG), changes
        assert "proximityPlacementGroup" not in other.one(VMSS).inputs


# --- every resource ---------------------------------------------------------------------------


def test_every_resource_type_is_classified_for_tagging(azure_config: dict[str, Any]) -> None:
    stack = wired(azure_config, dataUrls=[DATA_URL])

    assert {r.type for r in stack.custom_resources()} == TAGGABLE | UNTAGGABLE


@pytest.mark.parametrize("build", [placement, wired])
def test_every_taggable_resource_carries_job_team_and_managed_by(
    azure_config: dict[str, Any], build: Callable[..., CapturedStack]
) -> None:
    stack = build(azure_config)
    wanted = {"spotroute-job": "llm-finetune", "team": "ml-platform", "managed-by": "spotroute"}

    taggable = [r for r in stack.custom_resources() if r.type in TAGGABLE]
    assert {r.type for r in taggable} == TAGGABLE
    for resource in taggable:
        assert wanted.items() <= resource.inputs["tags"].items(), resource.name


def test_every_resource_is_in_the_placement_location(azure_config: dict[str, Any]) -> None:
    # Parent, name prefix and provider of every resource: test_component_contract.py.
    stack = placement(azure_config)

    for resource in stack.custom_resources():
        if "location" in resource.inputs:
            assert resource.inputs["location"] == "eastus", resource.name


# --- components on their own (wrong Args, unknown market: test_component_contract.py) ---------


def test_network_component_builds_on_its_own_without_a_program() -> None:
    stack = run_components(
        lambda: azure_network.Network("solo", NetworkArgs(job_name="solo", region="westeurope")),
        states=AZURE_STATES,
    )

    vnet = stack.named("solo-vnet")
    assert vnet.inputs["addressSpace"] == {"addressPrefixes": ["10.42.0.0/16"]}
    assert vnet.inputs["location"] == "westeurope"
    assert vnet.parent_type == "spotroute:azure:Network"
    assert stack.named("solo-rg").inputs["tags"]["spotroute-job"] == "solo"


def test_a_changed_job_size_or_node_count_replaces_the_scale_set(
    azure_config: dict[str, Any],
) -> None:
    scale_set = placement(azure_config).one(VMSS)

    # Running VMs keep the model they were created with; only a new set runs the new job.
    assert {"virtualMachineProfile", "sku"} <= set(scale_set.replace_on_changes)
    assert scale_set.delete_before_replace is True


def test_nodes_write_their_exit_record_with_their_own_identity(
    azure_config: dict[str, Any],
) -> None:
    # How route watch tells a crash from a preemption (components/node_exit.py).
    from components.node_exit import azure_exit_channel

    script = custom_data(placement(azure_config))
    assert azure_exit_channel(CLIENT_ID).command in script
    assert 'spotroute_exit_record "$code"' in script and "export SPOTROUTE_NODE_DIR=" in script


def test_nodes_watch_azure_preemption_notices(azure_config: dict[str, Any]) -> None:
    # router.checkpoint reads SPOTROUTE_NOTICE_SOURCE to know which metadata service to poll.
    assert "export SPOTROUTE_NOTICE_SOURCE=azure" in custom_data(placement(azure_config))


def test_nodes_know_their_placement_for_the_hand_over(
    azure_config: dict[str, Any],
) -> None:
    # The job answers only save requests addressed to its stack (docs/migration.md).
    script = custom_data(placement({**azure_config, "jobName": "moved-job-2"}))
    assert "export SPOTROUTE_PLACEMENT_ID=moved-job-2" in script
