"""Azure placement components: Network (in azure_network.py), CheckpointBucket (in
azure_storage.py), JobIdentity, SpotGpuGroup; the pure names and conditions they apply are in
azure_names.py.

Same contract as components/aws.py (class names, constructor shapes, output names); the
Azure-only inputs are fields of the shared Args (`storage_account_ids`, `resource_group_name`), so
the shared program builds the same Args for every cloud:

    make_provider(name, ProviderArgs) -> azure-native Provider pinned to the region
    Network(name, args, opts=None)
        outputs: network_id (VNet id), subnet_id, firewall_id (NSG id)
                 Azure also: resource_group_name (the job's resource group)
    CheckpointBucket(name, args, opts=None)
        outputs: bucket_name ("<account>/<container>"), url
                 ("https://<account>.blob.core.windows.net/<container>/" + base prefix),
                 arn_or_id (the container's resource id: what role assignments are scoped to)
                 Azure also: account_name
        plain attributes: key_prefix ("" or the existing URL's path), container_name
    JobIdentity(name, args, bucket, opts=None)
        outputs: identity_id (user-assigned identity resource id), checkpoint_url
                 Azure also: client_id, principal_id
    SpotGpuGroup(name, args, network, identity, bucket, opts=None)
        outputs: group_id (the VM scale set id), checkpoint_url

Resource groups. Every Azure resource lives in one, and a resource group's deletion deletes
everything in it. Network creates the job's resource group (VNet, NAT gateway, NSG, scale set).
The checkpoint storage account and the secret env's Key Vault go into the bootstrap's
`spotroute-job-stores` group; account and container are kept on `pulumi destroy`, so checkpoints
outlive the stack as they do on AWS. JobIdentity puts the identity into the bootstrap's
`spotroute-job-identities` group unless `JobIdentityArgs.resource_group_name` names another.

Existing storage. Azure grants access by resource id, which a blob URL does not carry: reusing an
account (`existing_url`) or reading Azure data (`data_urls`) needs the Args'
`storage_account_ids`, a map from account name to `/subscriptions/<id>/resourceGroups/<rg>/
providers/Microsoft.Storage/storageAccounts/<account>`. The subscription comes from the
environment at deploy time (ARM_SUBSCRIPTION_ID, or the Azure CLI's default), never from the
components.
"""

from __future__ import annotations

import base64
import re
from dataclasses import replace

import pulumi
from pulumi_azure_native import (
    authorization,
    compute,
    keyvault,
    managedidentity,
)
from pulumi_azure_native.provider import Provider

from components.args import (
    STAGING_PREFIX,
    JobIdentityArgs,
    ProviderArgs,
    SpotGpuGroupArgs,
    check_group_inputs,
    check_identity_inputs,
    secret_env_json,
)
from components.azure_names import (
    AZURE_JOB_IDENTITY_RESOURCE_GROUP,
    AZURE_JOB_STORES_RESOURCE_GROUP,
    azure_tags,
    blob_prefix_condition,
    container_resource_id,
    is_blob_url,
    locked_ssh_public_key,
    parse_blob_url,
    physical_name,
    role_definition_id,
    storage_account_name,
    zone_number,
)
from components.azure_network import Network
from components.azure_storage import CheckpointBucket
from components.bootstrap.azure_permissions import (
    AZURE_SELF_DELETE_ACTIONS,
    azure_job_role_guid,
    azure_self_delete_role_guid,
)
from components.fabric import group_fabric
from components.node_exit import azure_exit_channel
from components.registry import CloudComponents
from components.rendezvous import azure_rendezvous
from components.startup import (
    NO_SECRET_STORE_YET,
    SHUTDOWN_GRACE_MIN,
    azure_secret_channel,
    render_startup_script,
)

# Data-plane roles only, never Owner/Contributor. Checkpoints get the bootstrap's custom role with
# blob data actions only (azure_job_role_guid: no container writes or deletes, no delegation
# keys); data gets the built-in reader (its id is the same in every tenant).
STORAGE_BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
# Key Vault Secrets User: read secret contents, nothing else (built-in, same id in every tenant);
# assigned on the job's one secret, never on the vault or above.
KEY_VAULT_SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"
SECRET_NAME = "secret-env"
VAULT_SOFT_DELETE_DAYS = 7  # the minimum: a destroyed job's vault is purged a week later
# Ubuntu 22.04 HPC image: NVIDIA driver, CUDA, NCCL, InfiniBand, Moby and the NVIDIA container
# toolkit preinstalled, so the start-up script installs nothing (Azure/azhpc-images).
GPU_IMAGE = {
    "publisher": "microsoft-dsvm",
    "offer": "ubuntu-hpc",
    "sku": "2204",
    "version": "latest",
}
ADMIN_USERNAME = "spotroute"
# What a node may do to end its own bill: delete a VM with its disk and NIC (the bootstrap's
# self-delete role, assigned in the job's resource group only, which holds nothing but this job's
# network and nodes). Deallocating would stop compute billing too, but leaves the disk and the
# scale set's count.
SELF_DELETE_ACTIONS = AZURE_SELF_DELETE_ACTIONS
COMPUTE_API_VERSION = "2024-07-01"
IMDS = "http://169.254.169.254/metadata"
# Guest `shutdown` leaves an Azure VM "Stopped (Allocated)", billed like a running one; so after
# the grace period the node deletes itself through ARM with its own identity (from IMDS).
# The identity is named by its client id in the script itself, never through ${AZURE_CLIENT_ID}:
# run.env may set that variable for the job's own use, and the delete must still use the node's.
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def self_delete_lines(client_id: str) -> tuple[str, ...]:
    """The finish lines of a node: wait the grace period, then DELETE its own VM through ARM with
    the token of the managed identity `client_id` (the job identity's client id, a GUID)."""
    if not _GUID.fullmatch(client_id):
        raise ValueError(f"client_id: {client_id!r} is not a managed identity's client id (GUID)")
    return (
        f"sleep {SHUTDOWN_GRACE_MIN * 60}",
        "token=$(curl -sS -H Metadata:true "
        f'"{IMDS}/identity/oauth2/token?api-version=2018-02-01'
        f'&resource=https%3A%2F%2Fmanagement.azure.com%2F&client_id={client_id}"'
        r""" | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p')""",
        "vm=$(curl -sS -H Metadata:true "
        f'"{IMDS}/instance/compute/resourceId?api-version=2021-02-01&format=text")',
        'echo "spotroute: deleting $vm so it stops billing"',
        'curl -sS --fail -X DELETE -H "Authorization: Bearer $token" '
        f'"https://management.azure.com${{vm}}?api-version={COMPUTE_API_VERSION}" '
        "|| { echo 'spotroute: self-delete failed; powering off (an allocated VM still bills)'; "
        "shutdown -h now; }",
    )


SCALE_SET_REPLACE_ON_CHANGES = ("virtualMachineProfile", "sku")
NETWORK_API_VERSION = "2020-11-01"  # required by Flexible scale sets that create their own NICs


def make_provider(name: str, args: ProviderArgs) -> pulumi.ProviderResource:
    """Explicit azure-native provider pinned to the region; the subscription comes from the env."""
    return Provider(name, location=args.region)


# --- components ---------------------------------------------------------------------------------


class JobIdentity(pulumi.ComponentResource):
    """User-assigned identity that may touch only the job's checkpoint prefix and read its data."""

    identity_id: pulumi.Output[str]
    client_id: pulumi.Output[str]
    principal_id: pulumi.Output[str]
    checkpoint_url: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: JobIdentityArgs,
        bucket: CheckpointBucket,
        opts: pulumi.ResourceOptions | None = None,
        staging: CheckpointBucket | None = None,
    ) -> None:
        relative_prefix, key_prefix = check_identity_inputs(
            "azure.JobIdentity", args, bucket, staging, CheckpointBucket
        )
        # Fails here, before registering anything, if the prefix would grant the whole container.
        checkpoint_condition = blob_prefix_condition(key_prefix, write=True)
        # (container resource id, read-only condition or "" for the whole container) per prefix.
        data: list[tuple[str, str]] = []
        for url in args.data_urls:
            if not is_blob_url(url):
                continue
            account, container, data_prefix = parse_blob_url(url, "data_urls")
            scope = container_resource_id(account, container, args.storage_account_ids, "data_urls")
            data.append(
                (scope, blob_prefix_condition(data_prefix, write=False) if data_prefix else "")
            )
        # Data elsewhere (s3://, gs://, other https) cannot be granted by an Azure role: the job
        # brings its own credentials for it, so nothing is added here.
        super().__init__("spotroute:azure:JobIdentity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        job, tags = args.job_name, azure_tags(args.job_name, args.labels)

        # The bootstrap's job-identities group: the deployer may create and attach identities
        # there only, so it can never attach another workload's identity to a VM it launches.
        resource_group_name = args.resource_group_name or AZURE_JOB_IDENTITY_RESOURCE_GROUP
        identity = managedidentity.UserAssignedIdentity(
            f"{name}-identity",
            resource_group_name=resource_group_name,
            location=args.region,
            tags=tags,
            opts=child,
        )
        client = authorization.get_client_config_output(
            opts=pulumi.InvokeOutputOptions(parent=self)
        )
        # The bootstrap's job role on a container, conditioned on one prefix: the checkpoints,
        # and the staged data when there is a staging bucket.
        grants = [("checkpoints", bucket, checkpoint_condition, f"checkpoints under {key_prefix}")]
        if staging is not None:
            condition = blob_prefix_condition(STAGING_PREFIX, write=True)
            grants.append(("staging", staging, condition, f"staged data under {STAGING_PREFIX}"))
        for kind, granted, condition, what in grants:
            authorization.RoleAssignment(
                f"{name}-{kind}-access",
                scope=granted.arn_or_id,
                role_definition_id=client.subscription_id.apply(
                    lambda sub: role_definition_id(sub, azure_job_role_guid(sub))
                ),
                principal_id=identity.principal_id,
                # Skips the directory lookup that fails while a new identity is still replicating.
                principal_type="ServicePrincipal",
                condition=condition,
                condition_version="2.0",
                description=f"spotroute job {job}: {what} only",
                opts=child,
            )
        for i, (data_scope, data_condition) in enumerate(data):
            authorization.RoleAssignment(
                f"{name}-data-access" if i == 0 else f"{name}-data-access-{i}",
                scope=data_scope,
                role_definition_id=client.subscription_id.apply(
                    lambda sub: role_definition_id(sub, STORAGE_BLOB_DATA_READER)
                ),
                principal_id=identity.principal_id,
                principal_type="ServicePrincipal",
                condition=data_condition or None,
                condition_version="2.0" if data_condition else None,
                description=f"spotroute job {job}: read its data",
                opts=child,
            )

        self.identity_id = identity.id
        self.client_id = identity.client_id
        self.principal_id = identity.principal_id
        self.checkpoint_url = bucket.url.apply(lambda url: url + relative_prefix)
        self.register_outputs(
            {
                "identity_id": self.identity_id,
                "client_id": self.client_id,
                "principal_id": self.principal_id,
                "checkpoint_url": self.checkpoint_url,
            }
        )


class SpotGpuGroup(pulumi.ComponentResource):
    """Flexible VM scale set of node_count GPU VMs (Spot or Regular), private IPs only."""

    group_id: pulumi.Output[str]
    checkpoint_url: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: SpotGpuGroupArgs,
        network: Network,
        identity: JobIdentity,
        bucket: CheckpointBucket,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        check_group_inputs(
            "azure.SpotGpuGroup",
            args,
            ((network, Network), (identity, JobIdentity), (bucket, CheckpointBucket)),
            "Azure VM sizes",
        )
        zone = _check_group_args(args)
        super().__init__("spotroute:azure:SpotGpuGroup", name, None, opts)
        job = args.job_name
        spot = args.market == "spot"

        secrets = _secret_store(name, args, network, identity, self)
        # The scale set's ND VMs share its InfiniBand fabric; the containers need the devices.
        fabric = group_fabric("azure", args.instance_types[:1], args.node_count)

        def custom_data(values: list[str]) -> str:
            url, client_id, secret_url = values
            # azure-identity (DefaultAzureCredential, adlfs) picks the node's identity by this.
            command = replace(args.job, env={"AZURE_CLIENT_ID": client_id, **args.job.env})
            script = render_startup_script(
                job,
                url,
                command,
                finish=self_delete_lines(client_id),
                node_count=args.node_count,
                notice_source="azure",
                placement=pulumi.get_stack(),
                secrets=azure_secret_channel(secret_url, client_id) if secrets else None,
                rendezvous=azure_rendezvous(client_id),
                fabric=fabric.docker_options(),
                fabric_env=fabric.nccl_env,
                exit_record=azure_exit_channel(client_id),
            )
            return base64.b64encode(script.encode()).decode()

        self_delete = _self_delete_grant(name, job, network, identity, self)

        # A group is placed in one place. A scale set without zones spreads its VMs over the
        # region; a proximity placement group keeps them in one datacenter ("Proximity placement
        # groups", https://learn.microsoft.com/azure/virtual-machines/co-location). With a zone
        # the scale set is zonal already.
        colocated = None
        if args.node_count > 1 and not zone:
            group = compute.ProximityPlacementGroup(
                f"{name}-ppg",
                resource_group_name=network.resource_group_name,
                proximity_placement_group_name=physical_name(job, "group", 80),
                location=args.region,
                proximity_placement_group_type=compute.ProximityPlacementGroupType.STANDARD,
                intent=compute.ProximityPlacementGroupPropertiesIntentArgs(
                    vm_sizes=[args.instance_types[0]]
                ),
                tags=azure_tags(job, args.labels),
                opts=pulumi.ResourceOptions(parent=self),
            )
            colocated = compute.SubResourceArgs(id=group.id)

        scale_set = compute.VirtualMachineScaleSet(
            f"{name}-vmss",
            resource_group_name=network.resource_group_name,
            vm_scale_set_name=physical_name(job, "nodes", 64),
            location=args.region,
            orchestration_mode="Flexible",
            platform_fault_domain_count=1,
            # Only the first (cheapest) type: a scale set runs one VM size.
            sku=compute.SkuArgs(name=args.instance_types[0], capacity=args.node_count),
            zones=[zone] if zone else None,
            proximity_placement_group=colocated,
            identity=compute.VirtualMachineScaleSetIdentityArgs(
                type=compute.ResourceIdentityType.USER_ASSIGNED,
                user_assigned_identities=[identity.identity_id],
            ),
            virtual_machine_profile=compute.VirtualMachineScaleSetVMProfileArgs(
                priority="Spot" if spot else "Regular",
                # Evicted VMs and their disks go away: nothing bills after an eviction.
                eviction_policy="Delete" if spot else None,
                billing_profile=compute.BillingProfileArgs(max_price=args.max_price_per_hour)
                if spot
                else None,
                os_profile=compute.VirtualMachineScaleSetOSProfileArgs(
                    computer_name_prefix=job[:15].rstrip("-"),
                    admin_username=ADMIN_USERNAME,
                    custom_data=pulumi.Output.all(
                        identity.checkpoint_url,
                        identity.client_id,
                        secrets[0] if secrets else "",
                    ).apply(custom_data),
                    linux_configuration=compute.LinuxConfigurationArgs(
                        disable_password_authentication=True,
                        provision_vm_agent=True,
                        ssh=compute.SshConfigurationArgs(
                            public_keys=[
                                compute.SshPublicKeyArgs(
                                    path=f"/home/{ADMIN_USERNAME}/.ssh/authorized_keys",
                                    key_data=locked_ssh_public_key(),
                                )
                            ]
                        ),
                    ),
                ),
                storage_profile=compute.VirtualMachineScaleSetStorageProfileArgs(
                    image_reference=compute.ImageReferenceArgs(**GPU_IMAGE),
                    os_disk=compute.VirtualMachineScaleSetOSDiskArgs(
                        create_option="FromImage",
                        caching=compute.CachingTypes.READ_WRITE,
                        disk_size_gb=args.boot_disk_gb,
                        delete_option="Delete",
                        managed_disk=compute.VirtualMachineScaleSetManagedDiskParametersArgs(
                            storage_account_type="Premium_LRS"
                        ),
                    ),
                ),
                network_profile=compute.VirtualMachineScaleSetNetworkProfileArgs(
                    network_api_version=NETWORK_API_VERSION,
                    network_interface_configurations=[
                        compute.VirtualMachineScaleSetNetworkConfigurationArgs(
                            name="nic",
                            primary=True,
                            delete_option="Delete",
                            network_security_group=compute.SubResourceArgs(id=network.firewall_id),
                            # No public_ip_address_configuration: nodes have private IPs only.
                            ip_configurations=[
                                compute.VirtualMachineScaleSetIPConfigurationArgs(
                                    name="ipconfig",
                                    primary=True,
                                    subnet=compute.ApiEntityReferenceArgs(id=network.subnet_id),
                                )
                            ],
                        )
                    ],
                ),
                # Serial log and screenshot in managed storage: the first place to look when a
                # node never starts the job.
                diagnostics_profile=compute.DiagnosticsProfileArgs(
                    boot_diagnostics=compute.BootDiagnosticsArgs(enabled=True)
                ),
            ),
            tags=azure_tags(job, args.labels),
            opts=pulumi.ResourceOptions(
                parent=self,
                # Nodes start the job at boot: their identity and its role assignments must exist.
                depends_on=[identity, network, self_delete, *(secrets[1] if secrets else [])],
                # A changed model (job script, VM size, node count) reaches only VMs created after
                # it (upgrade policy Manual): replace the set, like AWS's one-shot fleet, freeing
                # its fixed name first so two sets of one job never bill at once.
                replace_on_changes=list(SCALE_SET_REPLACE_ON_CHANGES),
                delete_before_replace=True,
            ),
        )

        self.group_id = scale_set.id
        self.checkpoint_url = identity.checkpoint_url
        self.register_outputs({"group_id": scale_set.id, "checkpoint_url": self.checkpoint_url})


def _secret_store(
    name: str,
    args: SpotGpuGroupArgs,
    net: Network,
    identity: JobIdentity,
    parent: pulumi.Resource,
) -> tuple[pulumi.Output[str], list[pulumi.Resource]] | None:
    """The job's secret env in a Key Vault of its own (RBAC mode, no access policies), which
    the job identity alone may read: Key Vault Secrets User on that one secret. Returns (the
    secret's URL, what nodes need before they boot)."""
    if not args.job.secret_names:
        return None
    child = pulumi.ResourceOptions(parent=parent)
    client = authorization.get_client_config_output(opts=pulumi.InvokeOutputOptions(parent=parent))
    tags = azure_tags(args.job_name, args.labels)
    vault = keyvault.Vault(
        f"{name}-vault",
        # The bootstrap's stores group: the only place the deployer may write vaults and secrets
        # (Microsoft.KeyVault/vaults/write anywhere would let it add itself to any access-policy
        # vault's policy), and grant Key Vault Secrets User.
        resource_group_name=AZURE_JOB_STORES_RESOURCE_GROUP,
        # Globally unique, and new for every deployment (the group's name is): a destroyed
        # job's soft-deleted vault never blocks its next one.
        vault_name=pulumi.Output.all(client.subscription_id, net.resource_group_name).apply(
            lambda ids: storage_account_name(args.job_name, f"{ids[0]}/{ids[1]}/vault")
        ),
        location=args.region,
        properties=keyvault.VaultPropertiesArgs(
            tenant_id=client.tenant_id,
            sku=keyvault.SkuArgs(family="A", name=keyvault.SkuName.STANDARD),
            enable_rbac_authorization=True,
            enable_soft_delete=True,
            soft_delete_retention_in_days=VAULT_SOFT_DELETE_DAYS,
            enabled_for_deployment=False,
            enabled_for_disk_encryption=False,
            enabled_for_template_deployment=False,
        ),
        tags=tags,
        opts=child,
    )
    secret = keyvault.Secret(
        f"{name}-secret-env",
        resource_group_name=AZURE_JOB_STORES_RESOURCE_GROUP,
        vault_name=vault.name,
        secret_name=SECRET_NAME,
        properties=keyvault.SecretPropertiesArgs(
            content_type="application/json",
            value=secret_env_json(args.job.secret_env),
        ),
        tags=tags,
        opts=child,
    )
    grant = authorization.RoleAssignment(
        f"{name}-secret-read",
        scope=secret.id,
        role_definition_id=client.subscription_id.apply(
            lambda sub: role_definition_id(sub, KEY_VAULT_SECRETS_USER)
        ),
        principal_id=identity.principal_id,
        principal_type="ServicePrincipal",
        description=f"spotroute job {args.job_name}: read its secret env only",
        opts=child,
    )
    # The unversioned URL, from the vault's name: the secret's own outputs are secret as a whole
    # (they hold the value), and user data built from them would be hidden from every review.
    url = vault.name.apply(lambda v: f"https://{v}.vault.azure.net/secrets/{SECRET_NAME}")
    return url, [secret, grant]


def _self_delete_grant(
    name: str,
    job: str,
    net: Network,
    identity: JobIdentity,
    parent: pulumi.Resource,
) -> authorization.RoleAssignment:
    """The bootstrap's self-delete role for the job identity, in the job's group only."""
    client = authorization.get_client_config_output(opts=pulumi.InvokeOutputOptions(parent=parent))
    group_scope = pulumi.Output.all(client.subscription_id, net.resource_group_name).apply(
        lambda ids: f"/subscriptions/{ids[0]}/resourceGroups/{ids[1]}"
    )
    return authorization.RoleAssignment(
        f"{name}-self-delete",
        scope=group_scope,
        role_definition_id=client.subscription_id.apply(
            lambda sub: role_definition_id(sub, azure_self_delete_role_guid(sub))
        ),
        principal_id=identity.principal_id,
        principal_type="ServicePrincipal",
        description=f"spotroute job {job}: finished nodes delete themselves",
        opts=pulumi.ResourceOptions(parent=parent),
    )


def _check_group_args(args: SpotGpuGroupArgs) -> str:
    """Validate the group's Args before anything is registered; returns the zone number."""
    # Renders (and so validates env names, reserved keys, empty commands) before registering.
    render_startup_script(args.job_name, "https://validate/", args.job, secrets=NO_SECRET_STORE_YET)
    return zone_number(args.zone, args.region)


COMPONENTS = CloudComponents(
    "azure", make_provider, Network, CheckpointBucket, JobIdentity, SpotGpuGroup
)
