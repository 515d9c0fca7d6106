"""AzureDeployer: identity spotroute-deployer, federated credentials, its three custom roles."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    AZURE_RESOURCE_GROUP,
    AZURE_SELF_DELETE_ACTIONS,
    AZURE_SELF_DELETE_ROLE_NAME,
    AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR,
    azure_grant_condition,
    azure_job_role_guid,
    azure_role_guid,
    azure_self_delete_role_guid,
)

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


class AzureDeployer(pulumi.ComponentResource):
    """Identity spotroute-deployer, federated credentials, three custom roles (docs/security.md)."""

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

        def assigned_role(
            role_name: str,
            parts: tuple[str, str],
            description: str,
            actions: tuple[str, ...],
            scope: pulumi.Input[str],
            purpose: str,
            condition: pulumi.Input[str] | None = None,
        ) -> pulumi.Output[str]:
            """A deployer custom role and its assignment to the identity at `scope`; its full id."""
            guid = azure_role_guid(args.subscription_id, role_name)
            role = authorization.RoleDefinition(
                f"{name}-{parts[0]}",
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
            role_id = role.id.apply(lambda _: role_definition_id(args.subscription_id, guid))
            authorization.RoleAssignment(
                f"{name}-{parts[1]}",
                scope=scope,
                role_definition_id=role_id,
                principal_id=identity.principal_id,
                principal_type="ServicePrincipal",
                condition=condition,
                condition_version="2.0" if condition is not None else None,
                description=purpose,
                opts=child,
            )
            return role_id

        # Subscription scope: every job creates its own resource groups, which no narrower
        # assignment could cover (docs/security.md: use a dedicated subscription).
        role_id = assigned_role(
            DEPLOYER_NAME,
            ("role", "role-assignment"),
            "Exactly what spotroute's Azure placements manage (docs/security.md)",
            AZURE_DEPLOYER_ACTIONS,
            subscription,
            "spotroute deployer: spotroute placements only",
        )
        # Job identities: created, deleted and attached only in this one group, so the deployer
        # can never hand a scale set another workload's identity (no assign/action elsewhere).
        identities_group = resources.ResourceGroup(
            f"{name}-job-identities-rg",
            resource_group_name=AZURE_JOB_IDENTITY_RESOURCE_GROUP,
            location=args.location,
            tags=tags,
            opts=child,
        )
        assigned_role(
            AZURE_IDENTITIES_ROLE_NAME,
            ("identities-role", "identities-assignment"),
            f"Create, delete and attach job identities in {AZURE_JOB_IDENTITY_RESOURCE_GROUP} "
            "only (docs/security.md)",
            AZURE_IDENTITY_ACTIONS,
            identities_group.name.apply(
                lambda group_name: f"{subscription}/resourceGroups/{group_name}"
            ),
            f"spotroute deployer: identities in {AZURE_JOB_IDENTITY_RESOURCE_GROUP}",
        )
        assigned_role(
            f"{DEPLOYER_NAME}-grants",
            ("grants-role", "grants-assignment"),
            "Grant job identities the checkpoint, self-delete and Blob Data Reader roles only",
            AZURE_GRANT_ACTIONS,
            subscription,
            "spotroute deployer: job checkpoint role and Blob Data Reader grants only",
            condition=identity.principal_id.apply(
                lambda principal: azure_grant_condition(args.subscription_id, principal)
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
