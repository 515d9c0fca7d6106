"""One-time, keyless bootstrap of the identities that deploy spotroute placements.

`route bootstrap` runs `bootstrap_inline_program()` once per organisation, as an administrator,
in its own stack (`bootstrap`, config namespace `spotroute-bootstrap:`; docs/security.md). It
creates one deployer identity per selected cloud, allowed exactly what the placement program
(components/aws.py, gcp.py, azure.py) manages, and reachable only through federation:

    AwsDeployer    IAM role spotroute-deployer; trust = web identity only (OIDC providers,
                   accounts.google.com, Entra ID), each pinned to an audience and a subject
    GcpDeployer    service account spotroute-deployer + one custom role; a workload identity
                   pool whose providers each accept exactly one identity
    AzureDeployer  user-assigned identity spotroute-deployer + federated credentials with exact
                   subjects; two custom roles (resources; storage-role grants under an ABAC
                   condition)

No access key, service-account key or client secret is created anywhere. Who may become a
deployer: every external OIDC issuer in `oidc_issuers` (CI, Kubernetes) may become every
selected deployer; and the router's *home* deployer (`home: aws|gcp|azure`) may become the
others, so a router running in one cloud reaches the rest with its own platform identity.

Public API (the CLI wires these):

    OidcIssuer(name, url, subject, audience="")
    BootstrapArgs(clouds, home, oidc_issuers=(), aws_*, gcp_*, azure_*, state_*, labels)
    read_bootstrap_config(config=None, stack_file=BOOTSTRAP_STACK_FILE) -> BootstrapArgs
    bootstrap_program(args: BootstrapArgs) -> dict[str, Any]   # exports the outputs too
    bootstrap_inline_program() -> None                         # reads config, then the above
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol
from urllib.parse import urlsplit

import pulumi

from components.args import require_type

CONFIG_NAMESPACE = "spotroute-bootstrap"
BOOTSTRAP_STACK = "bootstrap"
BOOTSTRAP_STACK_FILE = f"stacks/Pulumi.{BOOTSTRAP_STACK}.yaml"
CLOUDS: tuple[str, ...] = ("aws", "gcp", "azure")
DEPLOYER_NAME = "spotroute-deployer"
# Bootstrap resources carry a managed-by value of their own: the deployer's tag-conditioned
# permissions (managed-by = spotroute) then never reach the bootstrap's resources.
BOOTSTRAP_MANAGED_BY = "spotroute-bootstrap"
JOB_MANAGED_BY = "spotroute"  # components.args.MANAGED_BY: what every job resource is tagged with

# Audiences each cloud's tooling asks for by default (GitHub's aws/azure login actions and others).
AWS_STS_AUDIENCE = "sts.amazonaws.com"
AZURE_EXCHANGE_AUDIENCE = "api://AzureADTokenExchange"
GOOGLE_ISSUER = "https://accounts.google.com"
GOOGLE_FEDERATED = "accounts.google.com"  # AWS's built-in principal for Google ID tokens

# --- AWS: what the placement program creates (components/aws.py) ------------------------------
# Job roles, instance profiles and buckets are named by aws._name_prefix: "spotroute-<job>-...".
AWS_JOB_NAME_PREFIX = "spotroute-"
AWS_GPU_AMI_PARAMETER_PATH = "/aws/service/deeplearning/ami/*"
AWS_IMAGE_OWNER = "amazon"  # the Deep Learning AMIs aws.py launches are Amazon-owned
AWS_SERVICE_LINKED_ROLES = {
    "spot.amazonaws.com": "AWSServiceRoleForEC2Spot",
    "ec2fleet.amazonaws.com": "AWSServiceRoleForEC2Fleet",
}

# --- GCP ----------------------------------------------------------------------------------------
GCP_POOL_ID = "spotroute-deployers"
GCP_ROLE_ID = "spotrouteDeployer"
GCP_WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
GCP_TOKEN_CREATOR = "roles/iam.serviceAccountTokenCreator"
GCP_STATE_ROLE = "roles/storage.objectUser"
GCP_REQUIRED_SERVICES = (
    "iam.googleapis.com",  # service accounts, custom roles, pools
    "iamcredentials.googleapis.com",  # impersonation and ID tokens
    "sts.googleapis.com",  # federated token exchange
    "compute.googleapis.com",
    "storage.googleapis.com",
    "cloudbilling.googleapis.com",  # public price catalog for `route prices refresh`
)
# AWS ARNs as GCP's default AWS attribute mapping sees them: the role of an assumed-role session.
GCP_AWS_ROLE_MAPPING = (
    "assertion.arn.contains('assumed-role') ? "
    "assertion.arn.extract('{account_arn}assumed-role/') + 'assumed-role/' + "
    "assertion.arn.extract('assumed-role/{role_name}/') : assertion.arn"
)

# Exactly the permissions components/gcp.py needs (plus the price refresh's two lists). No
# wildcards: a custom role cannot hold them, and a reviewer should read every permission.
GCP_DEPLOYER_PERMISSIONS: tuple[str, ...] = (
    # Network: VPC, subnet, Cloud Router + NAT, firewalls (a firewall edits the network's policy).
    "compute.networks.create",
    "compute.networks.get",
    "compute.networks.delete",
    "compute.networks.update",
    "compute.networks.updatePolicy",
    "compute.networks.use",
    "compute.subnetworks.create",
    "compute.subnetworks.get",
    "compute.subnetworks.delete",
    "compute.subnetworks.update",
    "compute.subnetworks.use",
    "compute.routers.create",
    "compute.routers.get",
    "compute.routers.delete",
    "compute.routers.update",
    "compute.firewalls.create",
    "compute.firewalls.get",
    "compute.firewalls.delete",
    "compute.firewalls.update",
    # SpotGpuGroup: instance template + zonal or regional managed instance group.
    "compute.instanceTemplates.create",
    "compute.instanceTemplates.get",
    "compute.instanceTemplates.delete",
    "compute.instanceTemplates.useReadOnly",
    "compute.instanceGroupManagers.create",
    "compute.instanceGroupManagers.get",
    "compute.instanceGroupManagers.delete",
    "compute.instanceGroupManagers.update",
    "compute.instanceGroups.create",
    "compute.instanceGroups.get",
    "compute.instanceGroups.delete",
    "compute.instanceGroups.update",
    # The group's VMs and boot disks: created in the caller's name; the router restarts stopped
    # (preempted) nodes.
    "compute.instances.create",
    "compute.instances.get",
    "compute.instances.list",
    "compute.instances.delete",
    "compute.instances.start",
    "compute.instances.stop",
    "compute.instances.setMetadata",
    "compute.instances.setLabels",
    "compute.instances.setServiceAccount",
    "compute.disks.create",
    "compute.disks.get",
    "compute.disks.delete",
    "compute.disks.setLabels",
    # Long-running operations, and lookups the provider makes while planning.
    "compute.globalOperations.get",
    "compute.regionOperations.get",
    "compute.zoneOperations.get",
    "compute.regions.get",
    "compute.zones.get",
    "compute.projects.get",
    "resourcemanager.projects.get",
    # `route prices refresh` (router/prices/gcp.py).
    "compute.machineTypes.list",
    "compute.acceleratorTypes.list",
    # CheckpointBucket + the job's prefix-conditioned grant on it.
    "storage.buckets.create",
    "storage.buckets.get",
    "storage.buckets.update",
    "storage.buckets.delete",
    "storage.buckets.getIamPolicy",
    "storage.buckets.setIamPolicy",
    # JobIdentity: the job's service account; actAs lets the group's VMs run as it.
    "iam.serviceAccounts.create",
    "iam.serviceAccounts.get",
    "iam.serviceAccounts.update",
    "iam.serviceAccounts.delete",
    "iam.serviceAccounts.actAs",
)

# --- Azure ---------------------------------------------------------------------------------------
AZURE_RESOURCE_GROUP = "spotroute-bootstrap"
AZURE_MAX_FEDERATED_CREDENTIALS = 20  # per user-assigned identity
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
    "Microsoft.Storage/locations/asyncoperations/read",
    # JobIdentity: the job's identity; assign/action attaches it to the scale set.
    "Microsoft.ManagedIdentity/userAssignedIdentities/read",
    "Microsoft.ManagedIdentity/userAssignedIdentities/write",
    "Microsoft.ManagedIdentity/userAssignedIdentities/delete",
    "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action",
    # `route prices refresh` (router/prices/azure.py): SKU availability, spot eviction rates.
    "Microsoft.Compute/skus/read",
    "Microsoft.ResourceGraph/resources/read",
)
# Role assignments live in a second role, assigned under AZURE_GRANT_CONDITION.
AZURE_GRANT_ACTIONS: tuple[str, ...] = (
    "Microsoft.Authorization/roleAssignments/read",
    "Microsoft.Authorization/roleAssignments/write",
    "Microsoft.Authorization/roleAssignments/delete",
)
# Built-in data roles the Azure JobIdentity grants (same ids in every tenant; azure.py).
AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
AZURE_STORAGE_BLOB_DATA_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"
_GRANTABLE = f"{AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR}, {AZURE_STORAGE_BLOB_DATA_READER}"
# ABAC condition (version 2.0): the deployer may create or delete only assignments of the two
# storage data roles, and create them only for service principals (managed identities).
AZURE_GRANT_CONDITION = (
    "(\n (\n  !(ActionMatches{'Microsoft.Authorization/roleAssignments/write'})\n )\n OR\n (\n"
    "  @Request[Microsoft.Authorization/roleAssignments:RoleDefinitionId] "
    f"ForAnyOfAnyValues:GuidEquals {{{_GRANTABLE}}}\n"
    "  AND\n"
    "  @Request[Microsoft.Authorization/roleAssignments:PrincipalType] "
    "ForAnyOfAnyValues:StringEqualsIgnoreCase {'ServicePrincipal'}\n"
    " )\n)\nAND\n(\n (\n  !(ActionMatches{'Microsoft.Authorization/roleAssignments/delete'})\n"
    " )\n OR\n (\n"
    "  @Resource[Microsoft.Authorization/roleAssignments:RoleDefinitionId] "
    f"ForAnyOfAnyValues:GuidEquals {{{_GRANTABLE}}}\n"
    " )\n)"
)

_ISSUER_NAME = re.compile(r"[a-z][a-z0-9-]{1,25}[a-z0-9]")
_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_AWS_ACCOUNT = re.compile(r"\d{12}")
_GCP_PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
_SERVICE_ACCOUNT_EMAIL = re.compile(
    r"[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z0-9.-]+\.gserviceaccount\.com"
)
_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
# Subjects and audiences end up inside CEL and ABAC string literals: no quotes, no backslashes.
_UNSAFE = set("*?\"'\\") | {chr(c) for c in range(32)}
SUBJECT_LIMIT = 127  # GCP's limit for google.subject; the tightest of the three clouds


def _strings(value: object, what: str) -> None:
    if isinstance(value, str) or not isinstance(value, tuple):
        raise TypeError(f"{what} takes a tuple of strings, got {type(value).__name__}")
    for item in value:
        require_type(item, str, what)


# --- Args ---------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class OidcIssuer:
    """An external OIDC issuer whose token with exactly this subject may become the deployers.

    `audience` "" means each cloud's conventional audience: sts.amazonaws.com (AWS), the
    workload identity provider's own name (GCP), api://AzureADTokenExchange (Azure).
    """

    name: str  # short id for resource names: "github-main"
    url: str  # exactly the token's `iss`, e.g. https://token.actions.githubusercontent.com
    subject: str  # exactly the token's `sub`, e.g. repo:acme/infra:ref:refs/heads/main
    audience: str = ""

    def __post_init__(self) -> None:
        for attribute in ("name", "url", "subject", "audience"):
            require_type(getattr(self, attribute), str, f"OidcIssuer.{attribute}")
        where = f"oidc_issuers[{self.name or '?'}]"
        if not _ISSUER_NAME.fullmatch(self.name):
            raise ValueError(
                f"{where}.name: {self.name!r} — use 3–27 lowercase letters, digits and dashes, "
                "starting with a letter, e.g. github-main"
            )
        parts = urlsplit(self.url)
        if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment:
            raise ValueError(
                f"{where}.url: {self.url!r} is not an https issuer URL — use the token's iss "
                "claim, e.g. https://token.actions.githubusercontent.com"
            )
        if not self.subject:
            raise ValueError(f"{where}.subject: is empty — name the exact sub claim to trust")
        for attribute in ("subject", "audience"):
            value = getattr(self, attribute)
            if _UNSAFE & set(value):
                raise ValueError(
                    f"{where}.{attribute}: {value!r} has a wildcard, quote or control character "
                    f"— spotroute trusts exact {attribute}s only; add one entry per {attribute}"
                )
        if len(self.subject) > SUBJECT_LIMIT:
            raise ValueError(
                f"{where}.subject: {len(self.subject)} characters — GCP accepts at most "
                f"{SUBJECT_LIMIT}; use a shorter subject (e.g. a GitHub environment)"
            )

    @property
    def host_path(self) -> str:
        """The issuer URL without https:// — how AWS names the provider and its condition keys."""
        return self.url.removeprefix("https://")


@dataclass(frozen=True, kw_only=True)
class BootstrapArgs:
    """What `route bootstrap` sets up; see docs/security.md for every field and its config key.

    `home` is where the router runs: "aws", "gcp" or "azure" (the router holds that cloud's
    deployer identity natively and reaches the other clouds' deployers through federation), or
    "oidc:<issuer name>" (CI or Kubernetes: the issuer's tokens reach every deployer directly).
    """

    clouds: tuple[str, ...]
    home: str
    oidc_issuers: tuple[OidcIssuer, ...] = ()
    aws_account_id: str = ""  # "" = the account of the identity running the bootstrap
    aws_region: str = "us-east-1"  # where the AWS provider talks to IAM/STS; IAM is global
    aws_existing_oidc_providers: tuple[str, ...] = ()  # issuer URLs the account already trusts
    aws_outbound_federation: bool = False  # home aws + azure: enable IAM outbound federation
    aws_outbound_issuer_url: str = ""  # ... or the issuer URL it already has
    gcp_project_id: str = ""
    gcp_project_number: str = ""  # "" = looked up from the project id
    router_service_account: str = ""  # home gcp: the SA the router runs as ("" = the deployer)
    azure_subscription_id: str = ""
    azure_tenant_id: str = ""
    azure_location: str = ""  # where the deployer identity's resource group lives
    azure_federation_audience: str = ""  # home azure: App ID URI the identity asks tokens for
    state_bucket: str = ""  # Pulumi DIY backend to grant: s3://b[/p], gs://b[/p], azblob://c
    state_storage_account_id: str = ""  # azblob only: the account's resource id
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _strings(self.clouds, "BootstrapArgs.clouds")
        if not isinstance(self.oidc_issuers, tuple):
            raise TypeError(
                "BootstrapArgs.oidc_issuers takes a tuple of OidcIssuer, got "
                f"{type(self.oidc_issuers).__name__}"
            )
        for issuer in self.oidc_issuers:
            require_type(issuer, OidcIssuer, "BootstrapArgs.oidc_issuers")
        _strings(self.aws_existing_oidc_providers, "BootstrapArgs.aws_existing_oidc_providers")
        require_type(self.aws_outbound_federation, bool, "BootstrapArgs.aws_outbound_federation")
        for name in (
            "home",
            "aws_account_id",
            "aws_region",
            "aws_outbound_issuer_url",
            "gcp_project_id",
            "gcp_project_number",
            "router_service_account",
            "azure_subscription_id",
            "azure_tenant_id",
            "azure_location",
            "azure_federation_audience",
            "state_bucket",
            "state_storage_account_id",
        ):
            require_type(getattr(self, name), str, f"BootstrapArgs.{name}")
        require_type(self.labels, dict, "BootstrapArgs.labels")
        check_bootstrap_args(self)

    @property
    def home_cloud(self) -> str:
        """The cloud the router runs in, or "" when it comes in through an OIDC issuer."""
        return self.home if self.home in CLOUDS else ""

    @property
    def home_issuer(self) -> OidcIssuer | None:
        """The issuer the router's tokens come from when home is "oidc:<name>"."""
        wanted = self.home.removeprefix("oidc:") if self.home.startswith("oidc:") else None
        return next((i for i in self.oidc_issuers if i.name == wanted), None)


def check_bootstrap_args(args: BootstrapArgs) -> None:
    """Refuse a bootstrap that cannot work or trusts too much; ValueError names the field."""
    clouds = args.clouds
    if not clouds:
        raise ValueError("clouds: is empty — name the clouds to bootstrap: aws, gcp, azure")
    for cloud in clouds:
        if cloud not in CLOUDS:
            hint = " (the local target needs no identities)" if cloud == "local" else ""
            raise ValueError(f"clouds: {cloud!r} is not a cloud{hint} — use aws, gcp, azure")
    if len(set(clouds)) != len(clouds):
        raise ValueError(f"clouds: {list(clouds)} names a cloud twice — list each once")

    names = [i.name for i in args.oidc_issuers]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"oidc_issuers: name {name!r} is used twice — names must be unique")
    exact = [(i.url, i.subject, i.audience) for i in args.oidc_issuers]
    if len(set(exact)) != len(exact):
        raise ValueError("oidc_issuers: two entries trust the same url, subject and audience")

    if args.home.startswith("oidc:"):
        if args.home_issuer is None:
            raise ValueError(
                f"home: {args.home!r} names no entry of oidc_issuers — use oidc:<name> with one "
                f"of {names or 'your issuers (none are listed)'}"
            )
    elif args.home not in CLOUDS:
        raise ValueError(
            f"home: {args.home!r} — use aws, gcp or azure (where the router runs) or "
            "oidc:<issuer name> (CI, Kubernetes)"
        )
    elif args.home not in clouds:
        raise ValueError(
            f"home: {args.home!r} is not in clouds {list(clouds)} — bootstrap the router's own "
            "cloud too"
        )

    if "aws" in clouds:
        if args.aws_account_id and not _AWS_ACCOUNT.fullmatch(args.aws_account_id):
            raise ValueError(f"aws_account_id: {args.aws_account_id!r} — use the 12-digit id")
        if not args.aws_region:
            raise ValueError("aws_region: is empty — name a region, e.g. us-east-1")
        for url in args.aws_existing_oidc_providers:
            if not url.startswith("https://"):
                raise ValueError(
                    f"aws_existing_oidc_providers: {url!r} — list issuer URLs (https://...)"
                )
        if args.home == "aws" and not args.oidc_issuers:
            raise ValueError(
                "oidc_issuers: is empty but home is aws — the AWS deployer accepts web identity "
                "only; list the issuer your router's platform provides (EKS service-account "
                "tokens, CI) or pick another home"
            )
    if "gcp" in clouds:
        if not _GCP_PROJECT.fullmatch(args.gcp_project_id):
            raise ValueError(
                f"gcp_project_id: {args.gcp_project_id!r} — name the project id (6–30 lowercase "
                "letters, digits, dashes)"
            )
        if args.gcp_project_number and not args.gcp_project_number.isdigit():
            raise ValueError(
                f"gcp_project_number: {args.gcp_project_number!r} — use the numeric project "
                "number, or leave it empty to look it up"
            )
    if args.router_service_account:
        if args.home != "gcp":
            raise ValueError(
                "router_service_account: is set but home is not gcp — it names the service "
                "account the router runs as on GCP"
            )
        if not _SERVICE_ACCOUNT_EMAIL.fullmatch(args.router_service_account):
            raise ValueError(
                f"router_service_account: {args.router_service_account!r} is not a service "
                "account email"
            )
        if args.router_service_account.startswith(f"{DEPLOYER_NAME}@"):
            raise ValueError(
                "router_service_account: is the deployer itself — leave it empty when the router "
                "runs as the deployer"
            )
    if "azure" in clouds:
        for name in ("azure_subscription_id", "azure_tenant_id"):
            if not _GUID.fullmatch(getattr(args, name)):
                raise ValueError(f"{name}: {getattr(args, name)!r} — use the GUID")
        if not args.azure_location:
            raise ValueError("azure_location: is empty — name a region, e.g. westeurope")
        if args.home == "aws" and not (
            args.aws_outbound_federation or args.aws_outbound_issuer_url
        ):
            raise ValueError(
                "aws_outbound_federation: AWS reaches Azure only through IAM outbound identity "
                "federation — set aws_outbound_federation: true (the bootstrap enables it for the "
                "account) or aws_outbound_issuer_url (already enabled), or use another home"
            )
        peers = 1 if args.home in ("aws", "gcp") else 0
        if len(args.oidc_issuers) + peers > AZURE_MAX_FEDERATED_CREDENTIALS:
            raise ValueError(
                f"oidc_issuers: {len(args.oidc_issuers)} entries — an Azure identity holds at most "
                f"{AZURE_MAX_FEDERATED_CREDENTIALS} federated credentials"
            )
    if (args.aws_outbound_federation or args.aws_outbound_issuer_url) and not (
        args.home == "aws" and "azure" in clouds
    ):
        raise ValueError(
            "aws_outbound_federation: is only for home aws with azure bootstrapped (AWS → Azure) "
            "— remove it and aws_outbound_issuer_url"
        )
    if args.aws_outbound_issuer_url and not args.aws_outbound_issuer_url.startswith("https://"):
        raise ValueError(
            f"aws_outbound_issuer_url: {args.aws_outbound_issuer_url!r} — use the https issuer "
            "URL that `aws iam get-outbound-web-identity-federation-info` shows"
        )
    if args.home == "azure" and len(clouds) > 1:
        audience = args.azure_federation_audience
        if not audience or _UNSAFE & set(audience):
            raise ValueError(
                "azure_federation_audience: home azure needs the Application ID URI the deployer "
                "identity requests tokens for (an app registration without secrets, e.g. "
                "api://spotroute-federation)"
            )
    _check_state_bucket(args)
    for key, value in args.labels.items():
        if not _LABEL_KEY.fullmatch(key) or not isinstance(value, str):
            raise ValueError(f"labels.{key}: use lowercase keys and string values")
    if args.labels.get("managed-by", BOOTSTRAP_MANAGED_BY) != BOOTSTRAP_MANAGED_BY:
        raise ValueError("labels.managed-by: is set by spotroute itself — remove it")


def _check_state_bucket(args: BootstrapArgs) -> None:
    url = args.state_bucket
    if not url:
        if args.state_storage_account_id:
            raise ValueError("state_storage_account_id: is set but state_bucket is empty")
        return
    scheme = url.partition("://")[0]
    cloud = {"s3": "aws", "gs": "gcp", "azblob": "azure"}.get(scheme)
    if cloud is None:
        raise ValueError(
            f"state_bucket: {url!r} — only s3://, gs:// and azblob:// backends are granted to the "
            "deployers (file:// and postgres:// need no cloud identity)"
        )
    if cloud not in args.clouds:
        raise ValueError(f"state_bucket: {url!r} is in {cloud}, which clouds does not include")
    bucket, _ = state_location(url)
    if not bucket or _UNSAFE & set(url.partition("?")[0]):
        raise ValueError(f"state_bucket: {url!r} names no bucket — e.g. {scheme}://acme-state")
    if cloud == "azure" and not re.fullmatch(
        r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Storage/"
        r"storageAccounts/[a-z0-9]{3,24}",
        args.state_storage_account_id,
        flags=re.IGNORECASE,
    ):
        raise ValueError(
            "state_storage_account_id: azblob:// state needs the storage account's resource id "
            "(/subscriptions/<id>/resourceGroups/<rg>/providers/Microsoft.Storage/"
            "storageAccounts/<name>)"
        )


def state_location(url: str) -> tuple[str, str]:
    """(bucket or container, object prefix where Pulumi keeps state: "<path>/.pulumi/")."""
    rest = url.partition("://")[2].partition("?")[0]
    bucket, _, path = rest.partition("/")
    path = path.strip("/")
    return bucket, (f"{path}/" if path else "") + ".pulumi/"


def bootstrap_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Labels every taggable bootstrap resource carries (the policy pack's required keys)."""
    return {
        "team": "platform",
        **labels,
        "spotroute-job": BOOTSTRAP_STACK,
        "managed-by": BOOTSTRAP_MANAGED_BY,
    }


# --- who the home deployer is, as the other clouds see it ---------------------------------------


@dataclass(frozen=True, kw_only=True)
class AwsHome:
    """The AWS deployer as GCP and Azure trust it (the router runs in AWS)."""

    account_id: pulumi.Input[str]
    role_arn: pulumi.Input[str]  # arn:aws:iam::<acct>:role/spotroute-deployer: Azure's subject
    outbound_issuer: pulumi.Input[str] | None = None  # IAM outbound federation issuer, for Azure


@dataclass(frozen=True, kw_only=True)
class GcpHome:
    """The GCP deployer as AWS and Azure trust it: its Google ID tokens' sub (and azp)."""

    unique_id: pulumi.Input[str]


@dataclass(frozen=True, kw_only=True)
class AzureHome:
    """The Azure deployer as AWS and GCP trust it: Entra ID v1 tokens for `audience`."""

    tenant_id: str
    audience: str
    principal_id: pulumi.Input[str]

    @property
    def issuer(self) -> str:
        return f"https://sts.windows.net/{self.tenant_id}/"


Home = AwsHome | GcpHome | AzureHome


# --- AWS ------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class WebIdentityTrust:
    """One statement of the AWS deployer's trust policy: a federated principal + exact claims."""

    sid: str
    federated: str  # provider ARN, or "accounts.google.com"
    claims: dict[str, str]  # condition key → exact value (StringEquals)


def aws_trust_policy(trusts: Sequence[WebIdentityTrust]) -> dict[str, Any]:
    """Trust policy allowing only sts:AssumeRoleWithWebIdentity, each pinned to aud and sub."""
    if not trusts:
        raise ValueError("oidc_issuers: nobody could assume the AWS deployer — add an issuer")
    statements = []
    for trust in trusts:
        keys = {key.rsplit(":", 1)[-1] for key in trust.claims}
        if not {"aud", "sub"} <= keys:
            raise ValueError(f"{trust.sid}: a web identity trust must pin both aud and sub")
        statements.append(
            {
                "Sid": trust.sid,
                "Effect": "Allow",
                "Principal": {"Federated": trust.federated},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {"StringEquals": dict(trust.claims)},
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def _sid(text: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", text) if part)


def aws_oidc_provider_arn(account_id: str, url: str) -> str:
    """ARN of the account's IAM OIDC provider for an issuer URL."""
    return f"arn:aws:iam::{account_id}:oidc-provider/{url.removeprefix('https://')}"


def oidc_trust(issuer: OidcIssuer, provider_arn: str) -> WebIdentityTrust:
    """Trust of one external issuer's tokens with exactly its audience and subject."""
    return WebIdentityTrust(
        sid=f"Oidc{_sid(issuer.name)}",
        federated=provider_arn,
        claims={
            f"{issuer.host_path}:aud": issuer.audience or AWS_STS_AUDIENCE,
            f"{issuer.host_path}:sub": issuer.subject,
        },
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
    )
    network = [f"{ec2}:{kind}/*" for kind in network_types]
    launched = [
        f"{ec2}:{kind}/*"
        for kind in ("instance", "volume", "network-interface", "spot-instances-request")
    ]
    template = f"{ec2}:launch-template/*"
    fleet = f"{ec2}:fleet/*"
    job_roles = f"arn:aws:iam::{acct}:role/{AWS_JOB_NAME_PREFIX}*"
    job_profiles = f"arn:aws:iam::{acct}:instance-profile/{AWS_JOB_NAME_PREFIX}*"
    create_actions = [
        "ec2:CreateVpc",
        "ec2:CreateSubnet",
        "ec2:CreateInternetGateway",
        "ec2:CreateRouteTable",
        "ec2:CreateSecurityGroup",
        "ec2:CreateVpcEndpoint",
        "ec2:CreateLaunchTemplate",
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
            ],
            "Resource": "*",
        },
        {
            # Network resources and launch templates only come into being tagged as spotroute's.
            "Sid": "CreateTaggedNetworkAndTemplates",
            "Effect": "Allow",
            "Action": create_actions,
            "Resource": [*network, template],
            "Condition": requested,
        },
        {
            # Tags may be written while creating (tag-on-create) — never onto existing resources.
            "Sid": "TagOnCreate",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": [*network, template, fleet, *launched],
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
                "ec2:DeleteFleets",
                "ec2:TerminateInstances",
                "ec2:CreateTags",
                "ec2:DeleteTags",
            ],
            "Resource": [*network, template, fleet, *launched],
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
            "Sid": "CreateTaggedJobRoles",
            "Effect": "Allow",
            "Action": [
                "iam:CreateRole",
                "iam:TagRole",
                "iam:CreateInstanceProfile",
                "iam:TagInstanceProfile",
            ],
            "Resource": [job_roles, job_profiles],
            "Condition": requested,
        },
        {
            # Job roles and instance profiles: aws.JobIdentity names them spotroute-<job>-...
            "Sid": "ManageJobRoles",
            "Effect": "Allow",
            "Action": [
                "iam:GetRole",
                "iam:UpdateRole",
                "iam:UpdateRoleDescription",
                "iam:UpdateAssumeRolePolicy",
                "iam:DeleteRole",
                "iam:UntagRole",
                "iam:ListRoleTags",
                "iam:PutRolePolicy",
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
                # IAM outbound federation: JWTs for Azure's token exchange, nothing else.
                "Sid": "WebIdentityTokensForAzure",
                "Effect": "Allow",
                "Action": "sts:GetWebIdentityToken",
                "Resource": "*",
                "Condition": {
                    "ForAnyValue:StringEquals": {
                        "sts:IdentityTokenAudience": list(web_identity_audiences)
                    }
                },
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


@dataclass(frozen=True, kw_only=True)
class AwsDeployerArgs:
    """Typed inputs of AwsDeployer; `home`: the GCP or Azure deployer if the router runs there."""

    account_id: str = ""  # "" = look up the deploying identity's account
    oidc_issuers: tuple[OidcIssuer, ...] = ()
    existing_oidc_providers: tuple[str, ...] = ()  # issuer URLs with an IAM provider already
    home: Home | None = None  # GcpHome or AzureHome
    outbound_federation: bool = False  # enable IAM outbound federation (AWS → Azure)
    outbound_issuer_url: str = ""  # ... or use the account's existing issuer
    state_bucket: str = ""  # s3://bucket[/path]
    labels: dict[str, str] = field(default_factory=dict)


class AwsDeployer(pulumi.ComponentResource):
    """IAM role spotroute-deployer: web identity only, permissions for the AWS placement only."""

    role_arn: pulumi.Output[str]
    account_id: pulumi.Output[str]
    oidc_provider_arns: pulumi.Output[dict[str, str]]
    outbound_issuer: pulumi.Output[str]  # "" unless outbound federation is on
    has_outbound_federation: bool

    def __init__(
        self, name: str, args: AwsDeployerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        require_type(args, AwsDeployerArgs, "AwsDeployer")
        require_type(args.home, (GcpHome, AzureHome, type(None)), "AwsDeployerArgs.home")
        _strings(args.existing_oidc_providers, "AwsDeployerArgs.existing_oidc_providers")
        for issuer in args.oidc_issuers:
            require_type(issuer, OidcIssuer, "AwsDeployerArgs.oidc_issuers")
        if not args.oidc_issuers and args.home is None:
            raise ValueError("oidc_issuers: nobody could assume the AWS deployer — add an issuer")
        state_bucket, state_prefix = "", ""
        if args.state_bucket:
            if not args.state_bucket.startswith("s3://"):
                raise ValueError(f"state_bucket: {args.state_bucket!r} is not an s3:// URL")
            state_bucket, state_prefix = state_location(args.state_bucket)
        super().__init__("spotroute:bootstrap:AwsDeployer", name, None, opts)
        import pulumi_aws as aws

        child = pulumi.ResourceOptions(parent=self)
        tags = bootstrap_labels(args.labels)
        account_id: pulumi.Output[str] = (
            pulumi.Output.from_input(args.account_id)
            if args.account_id
            else aws.get_caller_identity_output(
                opts=pulumi.InvokeOutputOptions(parent=self)
            ).account_id
        )

        # One IAM OIDC provider per issuer URL (AWS allows no duplicates); its client ids are the
        # audiences the trust statements below accept.
        audiences: dict[str, list[str]] = {}
        for issuer in args.oidc_issuers:
            audiences.setdefault(issuer.url, [])
            audience = issuer.audience or AWS_STS_AUDIENCE
            if audience not in audiences[issuer.url]:
                audiences[issuer.url].append(audience)
        if isinstance(args.home, AzureHome):
            audiences.setdefault(args.home.issuer, []).append(args.home.audience)
        provider_arns: dict[str, pulumi.Output[str]] = {}
        for url, client_ids in audiences.items():
            host_path = url.removeprefix("https://")
            if url in args.existing_oidc_providers:
                provider_arns[url] = account_id.apply(partial(aws_oidc_provider_arn, url=url))
                continue
            provider = aws.iam.OpenIdConnectProvider(
                # Named by URL, so reordering the issuers never replaces a provider.
                f"{name}-oidc-{re.sub(r'[^a-z0-9]+', '-', host_path.lower()).strip('-')}",
                url=url,
                client_id_lists=client_ids,
                tags={**tags, "Name": f"spotroute {host_path}"[:256]},
                opts=child,
            )
            provider_arns[url] = provider.arn

        trusts: list[pulumi.Output[WebIdentityTrust]] = []
        for issuer in args.oidc_issuers:
            trusts.append(provider_arns[issuer.url].apply(partial(oidc_trust, issuer)))
        if isinstance(args.home, GcpHome):
            # AWS maps accounts.google.com:aud to the token's azp (the service account's unique
            # id) and :oaud to its aud; sub is the unique id too.
            trusts.append(
                pulumi.Output.from_input(args.home.unique_id).apply(
                    lambda unique_id: WebIdentityTrust(
                        sid="GcpDeployer",
                        federated=GOOGLE_FEDERATED,
                        claims={
                            f"{GOOGLE_FEDERATED}:aud": unique_id,
                            f"{GOOGLE_FEDERATED}:oaud": AWS_STS_AUDIENCE,
                            f"{GOOGLE_FEDERATED}:sub": unique_id,
                        },
                    )
                )
            )
        if isinstance(args.home, AzureHome):
            home = args.home
            host_path = home.issuer.removeprefix("https://")
            trusts.append(
                pulumi.Output.all(provider_arns[home.issuer], home.principal_id).apply(
                    lambda values: WebIdentityTrust(
                        sid="AzureDeployer",
                        federated=values[0],
                        claims={
                            f"{host_path}:aud": home.audience,
                            f"{host_path}:sub": values[1],
                        },
                    )
                )
            )
        trust_policy = pulumi.Output.all(*trusts).apply(
            lambda resolved: json.dumps(aws_trust_policy(resolved), indent=1)
        )
        role = aws.iam.Role(
            f"{name}-role",
            name=DEPLOYER_NAME,
            description="spotroute deployer: manages spotroute placements; federated, no keys",
            assume_role_policy=trust_policy,
            max_session_duration=3600,
            tags={**tags, "Name": DEPLOYER_NAME},
            opts=child,
        )

        outbound_issuer: pulumi.Output[str] = pulumi.Output.from_input(args.outbound_issuer_url)
        token_audiences: tuple[str, ...] = ()
        if args.outbound_federation or args.outbound_issuer_url:
            token_audiences = (AZURE_EXCHANGE_AUDIENCE,)
            if not args.outbound_issuer_url:
                # An account-wide switch: principals still need sts:GetWebIdentityToken to use it.
                federation = aws.iam.OutboundWebIdentityFederation(f"{name}-outbound", opts=child)
                outbound_issuer = federation.issuer_identifier
        aws.iam.RolePolicy(
            f"{name}-permissions",
            role=role.id,
            name="spotroute-placements",
            policy=account_id.apply(
                lambda acct: json.dumps(
                    aws_deployer_policy(
                        acct,
                        state_bucket=state_bucket,
                        state_prefix=state_prefix,
                        web_identity_audiences=token_audiences,
                    ),
                    indent=1,
                )
            ),
            opts=child,
        )

        self.role_arn = role.arn
        self.account_id = account_id
        self.oidc_provider_arns = pulumi.Output.all(
            **{url: arn for url, arn in provider_arns.items()}
        ).apply(dict)
        self.outbound_issuer = outbound_issuer
        self.has_outbound_federation = bool(token_audiences)
        self.register_outputs(
            {
                "role_arn": self.role_arn,
                "account_id": self.account_id,
                "oidc_provider_arns": self.oidc_provider_arns,
                "outbound_issuer": self.outbound_issuer,
            }
        )

    def as_home(self) -> AwsHome:
        """How GCP and Azure trust this deployer when the router runs in AWS."""
        return AwsHome(
            account_id=self.account_id,
            role_arn=self.role_arn,
            outbound_issuer=self.outbound_issuer if self.has_outbound_federation else None,
        )


# --- GCP ------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GcpDeployerArgs:
    """Typed inputs of GcpDeployer; `home`: the AWS or Azure deployer if the router runs there."""

    project_id: str
    project_number: str = ""  # "" = look it up
    oidc_issuers: tuple[OidcIssuer, ...] = ()
    home: Home | None = None  # AwsHome or AzureHome
    router_service_account: str = ""  # may impersonate the deployer (router runs on GCP)
    state_bucket: str = ""  # gs://bucket[/path]
    enable_services: bool = True


def _cel_string(text: str) -> str:
    """A CEL string literal; callers have refused quotes and backslashes already."""
    return f'"{text}"'


def subject_principal(pool_name: str, subject: str) -> str:
    """The one federated identity with this subject in the pool (an IAM principal identifier)."""
    return f"principal://iam.googleapis.com/{pool_name}/subject/{subject}"


def workload_identity_provider_name(project_number: str, provider_id: str) -> str:
    """Full resource name of a provider in the spotroute pool (what google-auth configs name)."""
    return (
        f"projects/{project_number}/locations/global/workloadIdentityPools/{GCP_POOL_ID}/"
        f"providers/{provider_id}"
    )


class GcpDeployer(pulumi.ComponentResource):
    """Service account spotroute-deployer with one custom role; reachable by federation only."""

    service_account_email: pulumi.Output[str]
    unique_id: pulumi.Output[str]
    project_number: pulumi.Output[str]
    role_name: pulumi.Output[str]
    pool_name: pulumi.Output[str]
    provider_names: pulumi.Output[dict[str, str]]

    def __init__(
        self, name: str, args: GcpDeployerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        require_type(args, GcpDeployerArgs, "GcpDeployer")
        require_type(args.home, (AwsHome, AzureHome, type(None)), "GcpDeployerArgs.home")
        for issuer in args.oidc_issuers:
            require_type(issuer, OidcIssuer, "GcpDeployerArgs.oidc_issuers")
        if not _GCP_PROJECT.fullmatch(args.project_id):
            raise ValueError(f"project_id: {args.project_id!r} is not a GCP project id")
        state_bucket, state_prefix = "", ""
        if args.state_bucket:
            if not args.state_bucket.startswith("gs://"):
                raise ValueError(f"state_bucket: {args.state_bucket!r} is not a gs:// URL")
            state_bucket, state_prefix = state_location(args.state_bucket)
        super().__init__("spotroute:bootstrap:GcpDeployer", name, None, opts)
        import pulumi_gcp as gcp

        from components.gcp import prefix_condition

        project = args.project_id
        services: list[pulumi.Resource] = []
        if args.enable_services:
            services = [
                gcp.projects.Service(
                    f"{name}-api-{service.split('.')[0]}",
                    project=project,
                    service=service,
                    # Other workloads in the project may use the same APIs.
                    disable_on_destroy=False,
                    disable_dependent_services=False,
                    opts=pulumi.ResourceOptions(parent=self),
                )
                for service in GCP_REQUIRED_SERVICES
            ]
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=services)
        child = pulumi.ResourceOptions(parent=self)
        project_number: pulumi.Output[str] = (
            pulumi.Output.from_input(args.project_number)
            if args.project_number
            else gcp.organizations.get_project_output(
                project_id=project, opts=pulumi.InvokeOutputOptions(parent=self)
            ).number
        )

        account = gcp.serviceaccount.Account(
            f"{name}-sa",
            project=project,
            account_id=DEPLOYER_NAME,
            display_name="spotroute deployer",
            description="Deploys spotroute placements; federated only, never has keys",
            opts=after_apis,
        )
        account_resource = account.email.apply(
            lambda email: f"projects/{project}/serviceAccounts/{email}"
        )
        role = gcp.projects.IAMCustomRole(
            f"{name}-role",
            project=project,
            role_id=GCP_ROLE_ID,
            title="spotroute deployer",
            description="Exactly what spotroute's GCP placements manage (docs/security.md)",
            permissions=list(GCP_DEPLOYER_PERMISSIONS),
            stage="GA",
            opts=after_apis,
        )
        role_name = role.role_id.apply(lambda role_id: f"projects/{project}/roles/{role_id}")
        gcp.projects.IAMMember(
            f"{name}-role-binding",
            project=project,
            role=role_name,
            member=account.email.apply(lambda email: f"serviceAccount:{email}"),
            opts=child,
        )
        if state_bucket:
            gcp.storage.BucketIAMMember(
                f"{name}-state",
                bucket=state_bucket,
                role=GCP_STATE_ROLE,
                member=account.email.apply(lambda email: f"serviceAccount:{email}"),
                condition=gcp.storage.BucketIAMMemberConditionArgs(
                    title="spotroute state",
                    description=f"Pulumi state under gs://{state_bucket}/{state_prefix}",
                    expression=prefix_condition(state_bucket, state_prefix),
                ),
                opts=child,
            )
        if args.router_service_account:
            # The router runs on GCP as its own account and borrows the deployer's identity.
            gcp.serviceaccount.IAMMember(
                f"{name}-router-impersonation",
                service_account_id=account_resource,
                role=GCP_TOKEN_CREATOR,
                member=f"serviceAccount:{args.router_service_account}",
                opts=child,
            )

        pool = gcp.iam.WorkloadIdentityPool(
            f"{name}-pool",
            project=project,
            workload_identity_pool_id=GCP_POOL_ID,
            display_name="spotroute deployers",
            description="Identities that may become the spotroute deployer (docs/security.md)",
            opts=after_apis,
        )
        pool_resource = project_number.apply(
            lambda number: f"projects/{number}/locations/global/workloadIdentityPools/{GCP_POOL_ID}"
        )
        providers: dict[str, pulumi.Output[str]] = {}

        def trust(
            source: str,
            provider_id: str,
            principal: pulumi.Output[str],
            **provider_args: Any,
        ) -> None:
            provider = gcp.iam.WorkloadIdentityPoolProvider(
                f"{name}-{provider_id}",
                project=project,
                workload_identity_pool_id=pool.workload_identity_pool_id,
                workload_identity_pool_provider_id=provider_id,
                display_name=f"spotroute {source}"[:32],
                opts=child,
                **provider_args,
            )
            gcp.serviceaccount.IAMMember(
                f"{name}-wif-{provider_id}",
                service_account_id=account_resource,
                role=GCP_WORKLOAD_IDENTITY_USER,
                member=principal,
                # The binding is useless (and misleading) before its provider exists.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[provider]),
            )
            providers[source] = project_number.apply(
                lambda number: workload_identity_provider_name(number, provider_id)
            )

        # Each provider's condition admits exactly one identity; the binding names that identity,
        # so a subject from one provider can never stand in for another's.
        for issuer in args.oidc_issuers:
            trust(
                f"oidc:{issuer.name}",
                f"oidc-{issuer.name}"[:32],
                pool_resource.apply(partial(subject_principal, subject=issuer.subject)),
                attribute_mapping={"google.subject": "assertion.sub"},
                attribute_condition=f"assertion.sub == {_cel_string(issuer.subject)}",
                oidc=gcp.iam.WorkloadIdentityPoolProviderOidcArgs(
                    issuer_uri=issuer.url,
                    allowed_audiences=[issuer.audience] if issuer.audience else None,
                ),
            )
        if isinstance(args.home, AwsHome):
            aws_role = pulumi.Output.from_input(args.home.account_id).apply(
                lambda acct: f"arn:aws:sts::{acct}:assumed-role/{DEPLOYER_NAME}"
            )
            trust(
                "aws",
                "from-aws",
                pulumi.Output.all(pool_resource, aws_role).apply(
                    lambda v: f"principalSet://iam.googleapis.com/{v[0]}/attribute.aws_role/{v[1]}"
                ),
                attribute_mapping={
                    "google.subject": "assertion.arn",
                    "attribute.aws_role": GCP_AWS_ROLE_MAPPING,
                },
                attribute_condition=aws_role.apply(
                    lambda arn: f"attribute.aws_role == {_cel_string(arn)}"
                ),
                aws=gcp.iam.WorkloadIdentityPoolProviderAwsArgs(account_id=args.home.account_id),
            )
        if isinstance(args.home, AzureHome):
            home = args.home
            principal_id = pulumi.Output.from_input(home.principal_id)
            trust(
                "azure",
                "from-azure",
                pulumi.Output.all(pool_resource, principal_id).apply(
                    lambda v: subject_principal(v[0], v[1])
                ),
                attribute_mapping={"google.subject": "assertion.sub"},
                attribute_condition=principal_id.apply(
                    lambda pid: f"assertion.sub == {_cel_string(pid)}"
                ),
                oidc=gcp.iam.WorkloadIdentityPoolProviderOidcArgs(
                    issuer_uri=home.issuer, allowed_audiences=[home.audience]
                ),
            )

        self.service_account_email = account.email
        self.unique_id = account.unique_id
        self.project_number = project_number
        self.role_name = role_name
        self.pool_name = pool_resource
        self.provider_names = pulumi.Output.all(**providers).apply(dict)
        self.register_outputs(
            {
                "service_account_email": self.service_account_email,
                "unique_id": self.unique_id,
                "project_number": self.project_number,
                "role_name": self.role_name,
                "pool_name": self.pool_name,
                "provider_names": self.provider_names,
            }
        )

    def as_home(self) -> GcpHome:
        """How AWS and Azure trust this deployer when the router runs on GCP."""
        return GcpHome(unique_id=self.unique_id)


# --- Azure ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AzureDeployerArgs:
    """Typed inputs of AzureDeployer; `home`: the AWS or GCP deployer if the router runs there."""

    subscription_id: str
    tenant_id: str
    location: str
    oidc_issuers: tuple[OidcIssuer, ...] = ()
    home: Home | None = None  # AwsHome or GcpHome
    federation_audience: str = ""  # App ID URI this identity asks tokens for when it is the home
    state_bucket: str = ""  # azblob://container
    state_storage_account_id: str = ""
    labels: dict[str, str] = field(default_factory=dict)


def _deterministic_guid(*parts: str) -> str:
    """A stable GUID for names Azure wants as GUIDs, so a re-run targets the same object."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "spotroute:" + "/".join(parts)))


class AzureDeployer(pulumi.ComponentResource):
    """User-assigned identity spotroute-deployer, federated credentials, two custom roles."""

    client_id: pulumi.Output[str]
    principal_id: pulumi.Output[str]
    identity_id: pulumi.Output[str]
    tenant_id: str
    federation_audience: str
    role_definition_id: pulumi.Output[str]

    def __init__(
        self, name: str, args: AzureDeployerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        require_type(args, AzureDeployerArgs, "AzureDeployer")
        require_type(args.home, (AwsHome, GcpHome, type(None)), "AzureDeployerArgs.home")
        for issuer in args.oidc_issuers:
            require_type(issuer, OidcIssuer, "AzureDeployerArgs.oidc_issuers")
        for field_name in ("subscription_id", "tenant_id"):
            if not _GUID.fullmatch(getattr(args, field_name)):
                raise ValueError(f"{field_name}: {getattr(args, field_name)!r} — use the GUID")
        if isinstance(args.home, AwsHome) and args.home.outbound_issuer is None:
            raise ValueError(
                "home: AWS reaches Azure only through IAM outbound identity federation — pass the "
                "AWS deployer's outbound_issuer"
            )
        state_scope = ""
        if args.state_bucket:
            if not args.state_bucket.startswith("azblob://"):
                raise ValueError(f"state_bucket: {args.state_bucket!r} is not an azblob:// URL")
            container, _ = state_location(args.state_bucket)
            state_scope = (
                f"{args.state_storage_account_id}/blobServices/default/containers/{container}"
            )
        super().__init__("spotroute:bootstrap:AzureDeployer", name, None, opts)
        from pulumi_azure_native import authorization, managedidentity, resources

        from components.azure import role_definition_id

        child = pulumi.ResourceOptions(parent=self)
        tags = bootstrap_labels(args.labels)
        subscription = f"/subscriptions/{args.subscription_id}"

        group = resources.ResourceGroup(
            f"{name}-rg",
            resource_group_name=AZURE_RESOURCE_GROUP,
            location=args.location,
            tags=tags,
            opts=child,
        )
        identity = managedidentity.UserAssignedIdentity(
            f"{name}-identity",
            resource_group_name=group.name,
            resource_name_=DEPLOYER_NAME,
            location=args.location,
            tags=tags,
            opts=child,
        )

        credentials: list[tuple[str, pulumi.Input[str], pulumi.Input[str], str]] = [
            (
                f"oidc-{issuer.name}",
                issuer.url,
                issuer.subject,
                issuer.audience or AZURE_EXCHANGE_AUDIENCE,
            )
            for issuer in args.oidc_issuers
        ]
        if isinstance(args.home, GcpHome):
            # Google ID tokens of the GCP deployer: sub is its unique id.
            credentials.append(
                ("from-gcp", GOOGLE_ISSUER, args.home.unique_id, AZURE_EXCHANGE_AUDIENCE)
            )
        if isinstance(args.home, AwsHome) and args.home.outbound_issuer is not None:
            # IAM outbound federation JWTs: sub is the role's ARN (not a session ARN).
            credentials.append(
                (
                    "from-aws",
                    args.home.outbound_issuer,
                    args.home.role_arn,
                    AZURE_EXCHANGE_AUDIENCE,
                )
            )
        previous: list[pulumi.Resource] = []
        for credential_name, issuer_url, subject, audience in credentials:
            credential = managedidentity.FederatedIdentityCredential(
                f"{name}-{credential_name}",
                resource_group_name=group.name,
                resource_name_=identity.name,
                federated_identity_credential_resource_name=credential_name,
                issuer=issuer_url,
                subject=subject,
                audiences=[audience],
                # Azure refuses concurrent writes of credentials on one identity.
                opts=pulumi.ResourceOptions(parent=self, depends_on=previous),
            )
            previous = [credential]

        role_guid = _deterministic_guid(args.subscription_id, DEPLOYER_NAME)
        role = authorization.RoleDefinition(
            f"{name}-role",
            role_definition_id=role_guid,
            role_name=DEPLOYER_NAME,
            description="Exactly what spotroute's Azure placements manage (docs/security.md)",
            role_type="CustomRole",
            permissions=[authorization.PermissionArgs(actions=list(AZURE_DEPLOYER_ACTIONS))],
            assignable_scopes=[subscription],
            scope=subscription,
            opts=child,
        )
        # The role's full id, computed so it is known at preview; `role.id` carries the dependency.
        role_id = role.id.apply(lambda _: role_definition_id(args.subscription_id, role_guid))
        # Subscription scope: every job creates its own resource groups, which no narrower
        # assignment could cover (docs/security.md: use a dedicated subscription).
        authorization.RoleAssignment(
            f"{name}-role-assignment",
            scope=subscription,
            role_definition_id=role_id,
            principal_id=identity.principal_id,
            principal_type="ServicePrincipal",
            description="spotroute deployer: spotroute placements only",
            opts=child,
        )
        grants_guid = _deterministic_guid(args.subscription_id, f"{DEPLOYER_NAME}-grants")
        grants = authorization.RoleDefinition(
            f"{name}-grants-role",
            role_definition_id=grants_guid,
            role_name=f"{DEPLOYER_NAME}-grants",
            description="Assign the two storage data roles to job identities, nothing else",
            role_type="CustomRole",
            permissions=[authorization.PermissionArgs(actions=list(AZURE_GRANT_ACTIONS))],
            assignable_scopes=[subscription],
            scope=subscription,
            opts=child,
        )
        authorization.RoleAssignment(
            f"{name}-grants-assignment",
            scope=subscription,
            role_definition_id=grants.id.apply(
                lambda _: role_definition_id(args.subscription_id, grants_guid)
            ),
            principal_id=identity.principal_id,
            principal_type="ServicePrincipal",
            condition=AZURE_GRANT_CONDITION,
            condition_version="2.0",
            description="spotroute deployer: Storage Blob Data Contributor/Reader grants only",
            opts=child,
        )
        if state_scope:
            authorization.RoleAssignment(
                f"{name}-state",
                scope=state_scope,
                role_definition_id=role_definition_id(
                    args.subscription_id, AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR
                ),
                principal_id=identity.principal_id,
                principal_type="ServicePrincipal",
                description="spotroute deployer: Pulumi state container",
                opts=child,
            )

        self.client_id = identity.client_id
        self.principal_id = identity.principal_id
        self.identity_id = identity.id
        self.tenant_id = args.tenant_id
        self.federation_audience = args.federation_audience
        self.role_definition_id = role_id
        self.register_outputs(
            {
                "client_id": self.client_id,
                "principal_id": self.principal_id,
                "identity_id": self.identity_id,
                "role_definition_id": self.role_definition_id,
            }
        )

    def as_home(self) -> AzureHome:
        """How AWS and GCP trust this deployer when the router runs on Azure."""
        return AzureHome(
            tenant_id=self.tenant_id,
            audience=self.federation_audience,
            principal_id=self.principal_id,
        )


# --- the program ----------------------------------------------------------------------------------


def _providers(args: BootstrapArgs) -> dict[str, pulumi.ProviderResource]:
    """Explicit providers, so no ambient aws:/gcp:/azure-native: config decides where we write."""
    made: dict[str, pulumi.ProviderResource] = {}
    if "aws" in args.clouds:
        import pulumi_aws as aws

        made["aws"] = aws.Provider(
            "bootstrap-aws",
            region=args.aws_region,
            allowed_account_ids=[args.aws_account_id] if args.aws_account_id else None,
        )
    if "gcp" in args.clouds:
        import pulumi_gcp as gcp

        made["gcp"] = gcp.Provider("bootstrap-gcp", project=args.gcp_project_id)
    if "azure" in args.clouds:
        from pulumi_azure_native.provider import Provider

        made["azure"] = Provider(
            "bootstrap-azure",
            subscription_id=args.azure_subscription_id,
            tenant_id=args.azure_tenant_id,
            location=args.azure_location,
        )
    return made


def _deployer(
    cloud: str, args: BootstrapArgs, home: Home | None, opts: pulumi.ResourceOptions
) -> AwsDeployer | GcpDeployer | AzureDeployer:
    """One cloud's deployer; `home` is the router's home deployer when it is another cloud's."""
    if cloud == "aws":
        return AwsDeployer(
            "aws-deployer",
            AwsDeployerArgs(
                account_id=args.aws_account_id,
                oidc_issuers=args.oidc_issuers,
                existing_oidc_providers=args.aws_existing_oidc_providers,
                home=home,
                outbound_federation=args.aws_outbound_federation,
                outbound_issuer_url=args.aws_outbound_issuer_url,
                state_bucket=args.state_bucket if args.state_bucket.startswith("s3://") else "",
                labels=args.labels,
            ),
            opts,
        )
    if cloud == "gcp":
        return GcpDeployer(
            "gcp-deployer",
            GcpDeployerArgs(
                project_id=args.gcp_project_id,
                project_number=args.gcp_project_number,
                oidc_issuers=args.oidc_issuers,
                home=home,
                router_service_account=args.router_service_account,
                state_bucket=args.state_bucket if args.state_bucket.startswith("gs://") else "",
            ),
            opts,
        )
    return AzureDeployer(
        "azure-deployer",
        AzureDeployerArgs(
            subscription_id=args.azure_subscription_id,
            tenant_id=args.azure_tenant_id,
            location=args.azure_location,
            oidc_issuers=args.oidc_issuers,
            home=home,
            federation_audience=args.azure_federation_audience,
            state_bucket=args.state_bucket if args.state_bucket.startswith("azblob://") else "",
            state_storage_account_id=args.state_storage_account_id,
            labels=args.labels,
        ),
        opts,
    )


def bootstrap_program(args: BootstrapArgs) -> dict[str, Any]:
    """Create the selected deployers, the router's home first; export and return the outputs."""
    require_type(args, BootstrapArgs, "bootstrap_program")
    providers = _providers(args)
    deployers: dict[str, AwsDeployer | GcpDeployer | AzureDeployer] = {}
    home: Home | None = None
    # The home deployer comes first: the others trust its identity, which exists only once it does.
    for cloud in sorted(args.clouds, key=lambda c: (c != args.home_cloud, CLOUDS.index(c))):
        opts = pulumi.ResourceOptions(provider=providers[cloud])
        deployer = _deployer(cloud, args, None if cloud == args.home_cloud else home, opts)
        deployers[cloud] = deployer
        if cloud == args.home_cloud:
            home = deployer.as_home()
    aws_deployer = deployers.get("aws")
    gcp_deployer = deployers.get("gcp")
    azure_deployer = deployers.get("azure")

    outputs: dict[str, Any] = {
        "clouds": [c for c in CLOUDS if c in args.clouds],
        "home": args.home,
    }
    if isinstance(aws_deployer, AwsDeployer):
        outputs["aws_deployer_role_arn"] = aws_deployer.role_arn
        outputs["aws_account_id"] = aws_deployer.account_id
        outputs["aws_oidc_provider_arns"] = aws_deployer.oidc_provider_arns
        if args.home == "aws" and "azure" in args.clouds:
            outputs["aws_outbound_issuer"] = aws_deployer.outbound_issuer
    if isinstance(gcp_deployer, GcpDeployer):
        outputs["gcp_project_id"] = args.gcp_project_id
        outputs["gcp_project_number"] = gcp_deployer.project_number
        outputs["gcp_deployer_sa_email"] = gcp_deployer.service_account_email
        outputs["gcp_deployer_sa_unique_id"] = gcp_deployer.unique_id
        outputs["gcp_deployer_role"] = gcp_deployer.role_name
        outputs["gcp_workload_identity_pool"] = gcp_deployer.pool_name
        outputs["gcp_workload_identity_providers"] = gcp_deployer.provider_names
    if isinstance(azure_deployer, AzureDeployer):
        outputs["azure_subscription_id"] = args.azure_subscription_id
        outputs["azure_tenant_id"] = args.azure_tenant_id
        outputs["azure_deployer_client_id"] = azure_deployer.client_id
        outputs["azure_deployer_principal_id"] = azure_deployer.principal_id
        outputs["azure_deployer_identity_id"] = azure_deployer.identity_id
        outputs["azure_deployer_role_definition_id"] = azure_deployer.role_definition_id
    outputs["org_config_snippet"] = pulumi.Output.all(**outputs).apply(
        lambda resolved: org_config_snippet(args, resolved)
    )
    for key, value in outputs.items():
        pulumi.export(key, value)
    return outputs


def credential_hints(args: BootstrapArgs, outputs: Mapping[str, Any]) -> dict[str, str]:
    """The `credentials:` hints of spotroute.yaml for these outputs: names and ids, no secrets."""
    hints: dict[str, str] = {"router_home": args.home}
    if "aws" in args.clouds:
        hints["aws_role_arn"] = str(outputs["aws_deployer_role_arn"])
        hints["aws_region"] = args.aws_region
    if "gcp" in args.clouds:
        hints["gcp_project"] = args.gcp_project_id
        hints["gcp_service_account"] = str(outputs["gcp_deployer_sa_email"])
        source = {"aws": "aws", "azure": "azure"}.get(args.home, args.home)
        provider = dict(outputs.get("gcp_workload_identity_providers") or {}).get(source)
        if provider:
            hints["gcp_workload_identity_provider"] = str(provider)
    if "azure" in args.clouds:
        hints["azure_subscription_id"] = args.azure_subscription_id
        hints["azure_tenant_id"] = args.azure_tenant_id
        hints["azure_client_id"] = str(outputs["azure_deployer_client_id"])
    if args.home == "azure" and args.azure_federation_audience:
        hints["azure_federation_audience"] = args.azure_federation_audience
    return hints


def org_config_snippet(args: BootstrapArgs, outputs: Mapping[str, Any]) -> str:
    """YAML text of the `credentials:` section for spotroute.yaml (hints only, never secrets)."""
    import yaml

    body = yaml.safe_dump(
        {"credentials": credential_hints(args, outputs)}, sort_keys=False, width=200
    )
    return (
        "# Written by `route bootstrap`: which deployer identities to use. Hints only — no key,\n"
        "# token or secret exists for them (docs/security.md).\n" + body
    )


# --- stack config --------------------------------------------------------------------------------


class ConfigSource(Protocol):
    """What the reader needs from pulumi.Config: raw string values by key (None = unset)."""

    def get(self, key: str) -> str | None: ...


class BootstrapConfigError(pulumi.RunError):
    """A `spotroute-bootstrap:*` stack config value is missing or wrong; the message names it."""


# BootstrapArgs field → stack config key (camelCase, as the placement keys are).
CONFIG_KEYS: dict[str, str] = {
    "clouds": "clouds",
    "home": "home",
    "oidc_issuers": "oidcIssuers",
    "aws_account_id": "awsAccountId",
    "aws_region": "awsRegion",
    "aws_existing_oidc_providers": "awsExistingOidcProviders",
    "aws_outbound_federation": "awsOutboundFederation",
    "aws_outbound_issuer_url": "awsOutboundIssuerUrl",
    "gcp_project_id": "gcpProjectId",
    "gcp_project_number": "gcpProjectNumber",
    "router_service_account": "routerServiceAccount",
    "azure_subscription_id": "azureSubscriptionId",
    "azure_tenant_id": "azureTenantId",
    "azure_location": "azureLocation",
    "azure_federation_audience": "azureFederationAudience",
    "state_bucket": "stateBucket",
    "state_storage_account_id": "stateStorageAccountId",
    "labels": "labels",
}
_ISSUER_KEYS = ("name", "url", "subject", "audience")


def read_bootstrap_config(
    config: ConfigSource | None = None, stack_file: str = BOOTSTRAP_STACK_FILE
) -> BootstrapArgs:
    """Parse `spotroute-bootstrap:*` config into BootstrapArgs; errors name the file and key."""
    source: ConfigSource = config if config is not None else pulumi.Config(CONFIG_NAMESPACE)

    def fail(key: str, problem: str) -> BootstrapConfigError:
        where = f"{stack_file}: " if stack_file else ""
        return BootstrapConfigError(f"{where}{CONFIG_NAMESPACE}:{key}: {problem}")

    def data(key: str, default: Any) -> Any:
        raw = source.get(key)
        if raw is None:
            return default
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw  # a bare string

    def text(key: str, default: str = "") -> str:
        raw = source.get(key)
        return default if raw is None else raw.strip()

    def strings(key: str) -> tuple[str, ...]:
        value = data(key, [])
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(key, f"{value!r} is not a list of strings")
        return tuple(value)

    issuers_raw = data("oidcIssuers", [])
    if not isinstance(issuers_raw, list):
        raise fail("oidcIssuers", "is not a list of {name, url, subject, audience} maps")
    issuers: list[OidcIssuer] = []
    for index, entry in enumerate(issuers_raw):
        if not isinstance(entry, dict):
            raise fail(f"oidcIssuers[{index}]", "is not a map with name, url, subject")
        unknown = sorted(set(entry) - set(_ISSUER_KEYS))
        if unknown:
            raise fail(
                f"oidcIssuers[{index}].{unknown[0]}", f"unknown key — use {', '.join(_ISSUER_KEYS)}"
            )
        values = {k: entry.get(k, "") for k in _ISSUER_KEYS}
        for k, v in values.items():
            if not isinstance(v, str):
                raise fail(f"oidcIssuers[{index}].{k}", f"{v!r} is not a string")
        try:
            issuers.append(OidcIssuer(**values))
        except ValueError as exc:
            raise fail(f"oidcIssuers[{index}]", str(exc).split(": ", 1)[-1]) from None

    outbound = data("awsOutboundFederation", False)
    if not isinstance(outbound, bool):
        raise fail("awsOutboundFederation", f"{outbound!r} is not true or false")
    labels = data("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise fail("labels", 'is not a map of strings — quote numbers, e.g. cost-center: "4711"')
    if source.get("clouds") is None:
        raise fail("clouds", "missing — list the clouds to bootstrap, e.g. [aws, gcp, azure]")
    if source.get("home") is None:
        raise fail("home", "missing — aws, gcp, azure (where the router runs) or oidc:<issuer>")

    try:
        return BootstrapArgs(
            clouds=strings("clouds"),
            home=text("home"),
            oidc_issuers=tuple(issuers),
            aws_account_id=text("awsAccountId"),
            aws_region=text("awsRegion", "us-east-1"),
            aws_existing_oidc_providers=strings("awsExistingOidcProviders"),
            aws_outbound_federation=outbound,
            aws_outbound_issuer_url=text("awsOutboundIssuerUrl"),
            gcp_project_id=text("gcpProjectId"),
            gcp_project_number=text("gcpProjectNumber"),
            router_service_account=text("routerServiceAccount"),
            azure_subscription_id=text("azureSubscriptionId"),
            azure_tenant_id=text("azureTenantId"),
            azure_location=text("azureLocation"),
            azure_federation_audience=text("azureFederationAudience"),
            state_bucket=text("stateBucket"),
            state_storage_account_id=text("stateStorageAccountId"),
            labels=dict(labels),
        )
    except ValueError as exc:
        field_name, _, problem = str(exc).partition(": ")
        base = field_name.split(".", 1)[0].split("[", 1)[0]
        key = CONFIG_KEYS.get(base)
        if key is None:
            raise fail("?", str(exc)) from None
        raise fail(key + field_name[len(base) :], problem) from None


def _unknown_config_keys() -> list[str]:
    """`spotroute-bootstrap:*` keys the stack sets that the program does not know (typos)."""
    from pulumi.runtime import config as runtime_config

    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    prefix = f"{CONFIG_NAMESPACE}:"
    known = set(CONFIG_KEYS.values())
    return sorted(k for k in keys if k.startswith(prefix) and k[len(prefix) :] not in known)


def bootstrap_inline_program() -> None:
    """Program of the `bootstrap` stack: read `spotroute-bootstrap:*`, build the deployers."""
    unknown = _unknown_config_keys()
    if unknown:
        raise BootstrapConfigError(
            f"{BOOTSTRAP_STACK_FILE}: {unknown[0]}: unknown key — see docs/security.md for the keys"
        )
    bootstrap_program(read_bootstrap_config())
