"""GcpDeployer: service account spotroute-deployer, one custom role, a workload identity pool."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import pulumi

from components.args import require_type
from components.bootstrap.args import (
    BOOTSTRAP_STACK_FILE,
    CONFIG_NAMESPACE,
    DEPLOYER_NAME,
    GCP_PROJECT_ID_PATTERN,
    GCS_BUCKET_PATTERN,
    AwsHome,
    AzureHome,
    BootstrapConfigError,
    GcpHome,
    Home,
    OidcIssuer,
    require_strings,
    state_location,
)
from components.bootstrap.gcp_permissions import (
    GCP_AWS_ROLE_MAPPING,
    GCP_DEPLOYER_PERMISSIONS,
    GCP_GRANT_PERMISSIONS,
    GCP_GRANTS_ROLE_ID,
    GCP_NAMED_PERMISSIONS,
    GCP_NAMED_ROLE_ID,
    GCP_POOL_ID,
    GCP_REQUIRED_SERVICES,
    GCP_ROLE_ID,
    GCP_STATE_ROLE,
    GCP_TOKEN_CREATOR,
    GCP_WORKLOAD_IDENTITY_USER,
    foreign_service_accounts,
    gcp_grant_condition,
    gcp_named_condition,
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
    job_buckets: tuple[str, ...] = ()  # besides spotroute-*: buckets the deployer may grant on
    state_bucket: str = ""  # gs://bucket[/path]
    enable_services: bool = True
    shared_project: bool = False  # False: refuse a project with service accounts not spotroute's


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
        require_strings(args.job_buckets, "GcpDeployerArgs.job_buckets")
        for bucket in args.job_buckets:
            if not GCS_BUCKET_PATTERN.fullmatch(bucket):
                raise ValueError(f"job_buckets: {bucket!r} is not a Cloud Storage bucket name")
        if not GCP_PROJECT_ID_PATTERN.fullmatch(args.project_id):
            raise ValueError(f"project_id: {args.project_id!r} is not a GCP project id")
        state_bucket, state_prefix = "", ""
        if args.state_bucket:
            if not args.state_bucket.startswith("gs://"):
                raise ValueError(f"state_bucket: {args.state_bucket!r} is not a gs:// URL")
            state_bucket, state_prefix = state_location(args.state_bucket)
            if state_bucket in args.job_buckets:
                raise ValueError(
                    f"job_buckets: {state_bucket!r} is the state bucket — the deployer must never "
                    "grant jobs on it; keep state and job data in different buckets"
                )
        super().__init__("spotroute:bootstrap:GcpDeployer", name, None, opts)
        import pulumi_gcp as gcp

        from components.gcp_names import prefix_condition

        project = args.project_id
        if not args.shared_project:
            self._refuse_a_shared_project(project, args.router_service_account)
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
        member = account.email.apply(lambda email: f"serviceAccount:{email}")

        def bound_role(
            parts: tuple[str, str],
            role_id: str,
            title: str,
            description: str,
            permissions: tuple[str, ...],
            condition: gcp.projects.IAMMemberConditionArgs | None = None,
        ) -> pulumi.Output[str]:
            """A custom role of the project bound to the deployer (under `condition`)."""
            role = gcp.projects.IAMCustomRole(
                f"{name}-{parts[0]}",
                project=project,
                role_id=role_id,
                title=title,
                description=description,
                permissions=list(permissions),
                stage="GA",
                opts=after_apis,
            )
            full_name = role.role_id.apply(lambda rid: f"projects/{project}/roles/{rid}")
            gcp.projects.IAMMember(
                f"{name}-{parts[1]}",
                project=project,
                role=full_name,
                member=member,
                condition=condition,
                opts=child,
            )
            return full_name

        role_name = bound_role(
            ("role", "role-binding"),
            GCP_ROLE_ID,
            "spotroute deployer",
            "Exactly what spotroute's GCP placements manage (docs/security.md)",
            GCP_DEPLOYER_PERMISSIONS,
        )
        # Bucket IAM policies only on spotroute's buckets and the listed ones: a project-wide
        # setIamPolicy would let the deployer grant itself (or anyone) any bucket.
        bound_role(
            ("grants-role", "grants-binding"),
            GCP_GRANTS_ROLE_ID,
            "spotroute deployer grants",
            "Job grants on spotroute's buckets only (docs/security.md)",
            GCP_GRANT_PERMISSIONS,
            gcp.projects.IAMMemberConditionArgs(
                title="spotroute buckets only",
                description=(
                    "Buckets named spotroute-<job>-ckpt-... and the bootstrap's gcpJobBuckets, "
                    "never the state bucket; secrets named spotroute-...-secret-env"
                ),
                expression=project_number.apply(
                    lambda number: gcp_grant_condition(number, args.job_buckets, state_bucket)
                ),
            ),
        )
        # Creating, changing, reading or deleting what spotroute makes of a type IAM Conditions
        # name (firewall rules, instance templates, disks, VMs) and changing its buckets and
        # secrets: only resources named spotroute-..., never the state.
        bound_role(
            ("named-role", "named-binding"),
            GCP_NAMED_ROLE_ID,
            "spotroute deployer: its own resources",
            "Edits of resources named spotroute-... only (docs/security.md)",
            GCP_NAMED_PERMISSIONS,
            gcp.projects.IAMMemberConditionArgs(
                title="spotroute resources only",
                description=(
                    "Buckets spotroute-<job>-ckpt-..., firewalls, instance templates, disks, VMs "
                    "and secrets spotroute-..., never the state bucket"
                ),
                expression=project_number.apply(
                    lambda number: gcp_named_condition(project, number, state_bucket)
                ),
            ),
        )
        if state_bucket:
            gcp.storage.BucketIAMMember(
                f"{name}-state",
                bucket=state_bucket,
                role=GCP_STATE_ROLE,
                member=member,
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

    def _refuse_a_shared_project(self, project: str, router_service_account: str) -> None:
        """The project must be spotroute's alone (the default): no enabled service account but
        spotroute's, since the deployer may act as every account of the project. A project
        whose accounts cannot be listed yet (a new one: the IAM API not enabled) passes."""
        import pulumi_gcp as gcp

        try:
            listed = gcp.serviceaccount.get_s(
                project=project, opts=pulumi.InvokeOptions(parent=self)
            ).accounts
        except Exception as exc:  # the IAM API off in a new project, or no list permission
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            pulumi.log.warn(
                f"could not list the service accounts of project {project} to check it is "
                f"spotroute's alone ({reason}); docs/security.md, 'Residual risks'",
                resource=self,
            )
            return
        accounts = [{"email": a.email, "disabled": a.disabled} for a in listed or []]
        foreign = foreign_service_accounts(accounts, project, router_service_account)
        if foreign:
            more = f" (+{len(foreign) - 1} more)" if len(foreign) > 1 else ""
            raise BootstrapConfigError(
                f"{BOOTSTRAP_STACK_FILE}: {CONFIG_NAMESPACE}:gcpProjectId: project {project} "
                f"is not spotroute's alone: the deployer could run VMs as {foreign[0]}{more} "
                "(iam.serviceAccounts.actAs cannot be narrowed) — give spotroute a project of "
                "its own, disable those accounts (gcloud iam service-accounts disable EMAIL), or "
                f"set {CONFIG_NAMESPACE}:gcpProjectShared: true to accept it (docs/security.md)"
            )

    def as_home(self) -> GcpHome:
        """How AWS and Azure trust this deployer when the router runs on GCP."""
        return GcpHome(unique_id=self.unique_id)
