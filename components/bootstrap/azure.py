"""AzureDeployer: identity spotroute-deployer, federated credentials, its four custom roles."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import pulumi

from components.args import require_type
from components.bootstrap.args import (
    AZURE_EXCHANGE_AUDIENCE,
    DEPLOYER_NAME,
    GOOGLE_ISSUER,
    GUID,
    AwsHome,
    AzureHome,
    GcpHome,
    Home,
    OidcIssuer,
    bootstrap_labels,
    check_storage_account_ids,
    require_strings,
    state_location,
)
from components.bootstrap.azure_permissions import (
    AZURE_DEPLOYER_ACTIONS,
    AZURE_GRANT_ACTIONS,
    AZURE_IDENTITIES_ROLE_NAME,
    AZURE_IDENTITY_ACTIONS,
    AZURE_JOB_DATA_ACTIONS,
    AZURE_JOB_IDENTITY_RESOURCE_GROUP,
    AZURE_JOB_ROLE_NAME,
    AZURE_JOB_STORES_RESOURCE_GROUP,
    AZURE_RESOURCE_GROUP,
    AZURE_SELF_DELETE_ACTIONS,
    AZURE_SELF_DELETE_ROLE_NAME,
    AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR,
    AZURE_STORES_ACTIONS,
    AZURE_STORES_ROLE_NAME,
    azure_grant_condition,
    azure_grant_scopes,
    azure_job_role_guid,
    azure_role_guid,
    azure_self_delete_role_guid,
)

# --- Azure ----------------------------------------------------------------------------------------


def _grant_condition(principal: str, grantable: tuple[str, ...]) -> str:
    return azure_grant_condition(principal, grantable)


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
    # Storage accounts (resource ids) besides spotroute's own whose containers jobs may be granted
    # (data, reused checkpoint containers).
    job_storage_accounts: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)


class AzureDeployer(pulumi.ComponentResource):
    """Identity spotroute-deployer, federated credentials, four custom roles (docs/security.md)."""

    client_id: pulumi.Output[str]
    principal_id: pulumi.Output[str]
    identity_id: pulumi.Output[str]
    tenant_id: str
    federation_audience: str
    role_definition_id: pulumi.Output[str]
    job_role_definition_id: pulumi.Output[str]  # the job checkpoint role (data actions only)

    def __init__(
        self, name: str, args: AzureDeployerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        require_type(args, AzureDeployerArgs, "AzureDeployer")
        require_type(args.home, (AwsHome, GcpHome, type(None)), "AzureDeployerArgs.home")
        for issuer in args.oidc_issuers:
            require_type(issuer, OidcIssuer, "AzureDeployerArgs.oidc_issuers")
        for field_name in ("subscription_id", "tenant_id"):
            if not GUID.fullmatch(getattr(args, field_name)):
                raise ValueError(f"{field_name}: {getattr(args, field_name)!r} — use the GUID")
        if isinstance(args.home, AwsHome) and args.home.outbound_issuer is None:
            raise ValueError(
                "home: AWS reaches Azure only through IAM outbound identity federation — pass the "
                "AWS deployer's outbound_issuer"
            )
        require_strings(args.job_storage_accounts, "AzureDeployerArgs.job_storage_accounts")
        check_storage_account_ids(args.job_storage_accounts, "job_storage_accounts")
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

        from components.azure_names import role_definition_id

        child = pulumi.ResourceOptions(parent=self)
        tags = bootstrap_labels(args.labels)
        subscription = f"/subscriptions/{args.subscription_id}"

        def bootstrap_group(part: str, group_name: str) -> resources.ResourceGroup:
            return resources.ResourceGroup(
                f"{name}-{part}",
                resource_group_name=group_name,
                location=args.location,
                tags=tags,
                opts=child,
            )

        group = bootstrap_group("rg", AZURE_RESOURCE_GROUP)
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

        def define_role(
            role_name: str, part: str, description: str, actions: tuple[str, ...]
        ) -> pulumi.Output[str]:
            """A deployer custom role (assignable in the subscription); its full id."""
            guid = azure_role_guid(args.subscription_id, role_name)
            role = authorization.RoleDefinition(
                f"{name}-{part}",
                role_definition_id=guid,
                role_name=role_name,
                description=description,
                role_type="CustomRole",
                permissions=[authorization.PermissionArgs(actions=list(actions))],
                assignable_scopes=[subscription],
                scope=subscription,
                opts=child,
            )
            # The full id, computed so it is known at preview; `role.id` carries the dependency.
            return role.id.apply(lambda _: role_definition_id(args.subscription_id, guid))

        def assign(
            role_id: pulumi.Output[str],
            part: str,
            scope: pulumi.Input[str],
            purpose: str,
            condition: pulumi.Input[str] | None = None,
        ) -> None:
            authorization.RoleAssignment(
                f"{name}-{part}",
                scope=scope,
                role_definition_id=role_id,
                principal_id=identity.principal_id,
                principal_type="ServicePrincipal",
                condition=condition,
                condition_version="2.0" if condition is not None else None,
                description=purpose,
                opts=child,
            )

        def group_scope(group: resources.ResourceGroup) -> pulumi.Output[str]:
            return group.name.apply(lambda g: f"{subscription}/resourceGroups/{g}")

        # Subscription scope: every job creates its own resource groups, which no narrower
        # assignment could cover (docs/security.md: use a dedicated subscription).
        role_id = define_role(
            DEPLOYER_NAME,
            "role",
            "Exactly what spotroute's Azure placements manage (docs/security.md)",
            AZURE_DEPLOYER_ACTIONS,
        )
        assign(role_id, "role-assignment", subscription, "spotroute deployer: placements only")
        # Job identities: created, deleted and attached only in this one group, so the deployer
        # can never hand a scale set another workload's identity (no assign/action elsewhere).
        identities_group = bootstrap_group("job-identities-rg", AZURE_JOB_IDENTITY_RESOURCE_GROUP)
        assign(
            define_role(
                AZURE_IDENTITIES_ROLE_NAME,
                "identities-role",
                f"Create, delete and attach job identities in {AZURE_JOB_IDENTITY_RESOURCE_GROUP} "
                "only (docs/security.md)",
                AZURE_IDENTITY_ACTIONS,
            ),
            "identities-assignment",
            group_scope(identities_group),
            f"spotroute deployer: identities in {AZURE_JOB_IDENTITY_RESOURCE_GROUP}",
        )
        # The jobs' checkpoint storage and Key Vaults: written only in this one group.
        stores_group = bootstrap_group("job-stores-rg", AZURE_JOB_STORES_RESOURCE_GROUP)
        assign(
            define_role(
                AZURE_STORES_ROLE_NAME,
                "stores-role",
                f"Write job storage accounts, Key Vaults and secrets in "
                f"{AZURE_JOB_STORES_RESOURCE_GROUP} only (docs/security.md)",
                AZURE_STORES_ACTIONS,
            ),
            "stores-assignment",
            group_scope(stores_group),
            f"spotroute deployer: vaults and storage in {AZURE_JOB_STORES_RESOURCE_GROUP}",
        )
        # Role assignments: one assignment per scope, each admitting that scope's job roles only
        # (a grant condition cannot limit the scope: azure_grant_scopes).
        grants_id = define_role(
            f"{DEPLOYER_NAME}-grants",
            "grants-role",
            "Grant job identities spotroute's job roles only, each where it is needed",
            AZURE_GRANT_ACTIONS,
        )
        for part, scope, grantable in azure_grant_scopes(
            args.subscription_id, args.job_storage_accounts
        ):
            assign(
                grants_id,
                f"{part}-assignment",
                # The stores group must exist before anything is assigned in it.
                group_scope(stores_group) if part == "grants-stores" else scope,
                f"spotroute deployer: job role grants at {scope.rsplit('/', 1)[-1]}",
                condition=identity.principal_id.apply(
                    partial(_grant_condition, grantable=grantable)
                ),
            )
        # What azure.JobIdentity assigns on the checkpoint container, under its path condition:
        # blob data actions only, no control plane (a job can never write or delete a container,
        # nor mint a user delegation key).
        job_role_guid = azure_job_role_guid(args.subscription_id)
        job_role = authorization.RoleDefinition(
            f"{name}-job-role",
            role_definition_id=job_role_guid,
            role_name=AZURE_JOB_ROLE_NAME,
            description="spotroute job: read and write blobs under its own checkpoint prefix only",
            role_type="CustomRole",
            permissions=[
                authorization.PermissionArgs(actions=[], data_actions=list(AZURE_JOB_DATA_ACTIONS))
            ],
            assignable_scopes=[subscription],
            scope=subscription,
            opts=child,
        )
        # What azure.SpotGpuGroup assigns at the job's resource group: a finished node deletes
        # its own VM, disk and NIC (a stopped Azure VM still bills).
        authorization.RoleDefinition(
            f"{name}-self-delete-role",
            role_definition_id=azure_self_delete_role_guid(args.subscription_id),
            role_name=AZURE_SELF_DELETE_ROLE_NAME,
            description="spotroute job: a finished node deletes its VM, disk and NIC",
            role_type="CustomRole",
            permissions=[authorization.PermissionArgs(actions=list(AZURE_SELF_DELETE_ACTIONS))],
            assignable_scopes=[subscription],
            scope=subscription,
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
        self.job_role_definition_id = job_role.id.apply(
            lambda _: role_definition_id(args.subscription_id, job_role_guid)
        )
        self.register_outputs(
            {
                "job_role_definition_id": self.job_role_definition_id,
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
