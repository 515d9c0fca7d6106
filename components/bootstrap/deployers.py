"""The per-cloud contract of the `bootstrap` stack, and the one registry of it.

Each cloud registers a `CloudDeployer`: its explicit provider, its deployer built from
`BootstrapArgs`, the stack outputs it adds and the spotroute.yaml `credentials:` hints it
gives. mypy checks every entry against its deployer's type, and the program
(components/bootstrap/program.py) walks the registry with no branch per cloud. Adding a
cloud = a deployer module + one entry in `DEPLOYERS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import pulumi

from components.bootstrap.args import BootstrapArgs, Home
from components.bootstrap.aws import AwsDeployer, AwsDeployerArgs
from components.bootstrap.azure import AzureDeployer, AzureDeployerArgs
from components.bootstrap.gcp import GcpDeployer, GcpDeployerArgs
from router.contract.clouds import Cloud


class Deployer(Protocol):
    """What every cloud's deployer offers the program: itself as the router's home."""

    def as_home(self) -> Home: ...


D = TypeVar("D", bound=Deployer)


@dataclass(frozen=True)
class CloudDeployer(Generic[D]):
    """One cloud's bootstrap pieces, typed per cloud."""

    cloud: Cloud
    # Explicit, so no ambient aws:/gcp:/azure-native: config decides where we write.
    make_provider: Callable[[BootstrapArgs], pulumi.ProviderResource]
    # (args, the router's home deployer when it is another cloud's, options)
    make_deployer: Callable[[BootstrapArgs, Home | None, pulumi.ResourceOptions], D]
    outputs: Callable[[BootstrapArgs, D], dict[str, Any]]
    # (args, the resolved stack outputs) → names and ids for `credentials:`, never secrets
    hints: Callable[[BootstrapArgs, Mapping[str, Any]], dict[str, str]]


def _state_bucket(args: BootstrapArgs, scheme: str) -> str:
    """The state bucket when it lives in this cloud (its URL scheme), else ''."""
    return args.state_bucket if args.state_bucket.startswith(scheme) else ""


# --- aws ------------------------------------------------------------------------------------------


def _aws_provider(args: BootstrapArgs) -> pulumi.ProviderResource:
    import pulumi_aws as aws

    return aws.Provider(
        "bootstrap-aws",
        region=args.aws_region,
        allowed_account_ids=[args.aws_account_id] if args.aws_account_id else None,
    )


def _aws_deployer(
    args: BootstrapArgs, home: Home | None, opts: pulumi.ResourceOptions
) -> AwsDeployer:
    deployer_args = AwsDeployerArgs(
        account_id=args.aws_account_id,
        oidc_issuers=args.oidc_issuers,
        existing_oidc_providers=args.aws_existing_oidc_providers,
        home=home,
        outbound_federation=args.aws_outbound_federation,
        outbound_issuer_url=args.aws_outbound_issuer_url,
        state_bucket=_state_bucket(args, "s3://"),
        job_buckets=args.aws_job_buckets,
        labels=args.labels,
    )
    return AwsDeployer("aws-deployer", deployer_args, opts)


def _aws_outputs(args: BootstrapArgs, deployer: AwsDeployer) -> dict[str, Any]:
    outputs: dict[str, Any] = {
        "aws_deployer_role_arn": deployer.role_arn,
        "aws_account_id": deployer.account_id,
        # What aws.JobIdentity sets as `permissions_boundary` on every job role.
        "aws_job_permissions_boundary": deployer.job_boundary_arn,
        "aws_oidc_provider_arns": deployer.oidc_provider_arns,
    }
    if args.home == "aws" and "azure" in args.clouds:
        outputs["aws_outbound_issuer"] = deployer.outbound_issuer
    return outputs


def _aws_hints(args: BootstrapArgs, outputs: Mapping[str, Any]) -> dict[str, str]:
    return {"aws_role_arn": str(outputs["aws_deployer_role_arn"]), "aws_region": args.aws_region}


# --- gcp ------------------------------------------------------------------------------------------


def _gcp_provider(args: BootstrapArgs) -> pulumi.ProviderResource:
    import pulumi_gcp as gcp

    return gcp.Provider("bootstrap-gcp", project=args.gcp_project_id)


def _gcp_deployer(
    args: BootstrapArgs, home: Home | None, opts: pulumi.ResourceOptions
) -> GcpDeployer:
    deployer_args = GcpDeployerArgs(
        project_id=args.gcp_project_id,
        project_number=args.gcp_project_number,
        oidc_issuers=args.oidc_issuers,
        home=home,
        router_service_account=args.router_service_account,
        job_buckets=args.gcp_job_buckets,
        state_bucket=_state_bucket(args, "gs://"),
        shared_project=args.gcp_project_shared,
    )
    return GcpDeployer("gcp-deployer", deployer_args, opts)


def _gcp_outputs(args: BootstrapArgs, deployer: GcpDeployer) -> dict[str, Any]:
    return {
        "gcp_project_id": args.gcp_project_id,
        "gcp_project_number": deployer.project_number,
        # The default: the project is spotroute's alone (gcpProjectShared: false).
        "gcp_project_dedicated": not args.gcp_project_shared,
        "gcp_deployer_sa_email": deployer.service_account_email,
        "gcp_deployer_sa_unique_id": deployer.unique_id,
        "gcp_deployer_role": deployer.role_name,
        "gcp_workload_identity_pool": deployer.pool_name,
        "gcp_workload_identity_providers": deployer.provider_names,
    }


def _gcp_hints(args: BootstrapArgs, outputs: Mapping[str, Any]) -> dict[str, str]:
    hints = {
        "gcp_project": args.gcp_project_id,
        "gcp_service_account": str(outputs["gcp_deployer_sa_email"]),
    }
    # The provider the router's home federates through (its cloud name, or the OIDC issuer's).
    source = {"aws": "aws", "azure": "azure"}.get(args.home, args.home)
    provider = dict(outputs.get("gcp_workload_identity_providers") or {}).get(source)
    if provider:
        hints["gcp_workload_identity_provider"] = str(provider)
    return hints


# --- azure ----------------------------------------------------------------------------------------


def _azure_provider(args: BootstrapArgs) -> pulumi.ProviderResource:
    from pulumi_azure_native.provider import Provider

    return Provider(
        "bootstrap-azure",
        subscription_id=args.azure_subscription_id,
        tenant_id=args.azure_tenant_id,
        location=args.azure_location,
    )


def _azure_deployer(
    args: BootstrapArgs, home: Home | None, opts: pulumi.ResourceOptions
) -> AzureDeployer:
    deployer_args = AzureDeployerArgs(
        subscription_id=args.azure_subscription_id,
        tenant_id=args.azure_tenant_id,
        location=args.azure_location,
        oidc_issuers=args.oidc_issuers,
        home=home,
        federation_audience=args.azure_federation_audience,
        state_bucket=_state_bucket(args, "azblob://"),
        state_storage_account_id=args.state_storage_account_id,
        job_storage_accounts=args.azure_job_storage_accounts,
        labels=args.labels,
    )
    return AzureDeployer("azure-deployer", deployer_args, opts)


def _azure_outputs(args: BootstrapArgs, deployer: AzureDeployer) -> dict[str, Any]:
    return {
        "azure_subscription_id": args.azure_subscription_id,
        "azure_tenant_id": args.azure_tenant_id,
        "azure_deployer_client_id": deployer.client_id,
        "azure_deployer_principal_id": deployer.principal_id,
        "azure_deployer_identity_id": deployer.identity_id,
        "azure_deployer_role_definition_id": deployer.role_definition_id,
        "azure_job_role_definition_id": deployer.job_role_definition_id,
    }


def _azure_hints(args: BootstrapArgs, outputs: Mapping[str, Any]) -> dict[str, str]:
    hints = {
        "azure_subscription_id": args.azure_subscription_id,
        "azure_tenant_id": args.azure_tenant_id,
        "azure_client_id": str(outputs["azure_deployer_client_id"]),
    }
    if args.home == "azure" and args.azure_federation_audience:
        hints["azure_federation_audience"] = args.azure_federation_audience
    return hints


AWS: CloudDeployer[AwsDeployer] = CloudDeployer(
    "aws", _aws_provider, _aws_deployer, _aws_outputs, _aws_hints
)
GCP: CloudDeployer[GcpDeployer] = CloudDeployer(
    "gcp", _gcp_provider, _gcp_deployer, _gcp_outputs, _gcp_hints
)
AZURE: CloudDeployer[AzureDeployer] = CloudDeployer(
    "azure", _azure_provider, _azure_deployer, _azure_outputs, _azure_hints
)
DEPLOYERS: dict[str, CloudDeployer[Any]] = {entry.cloud: entry for entry in (AWS, GCP, AZURE)}


def cloud_deployer(cloud: str) -> CloudDeployer[Any]:
    """The registered bootstrap pieces of `cloud`; ValueError naming the choices otherwise."""
    try:
        return DEPLOYERS[cloud]
    except KeyError:
        raise ValueError(
            f"cloud {cloud!r} has no deployer — use one of {', '.join(DEPLOYERS)}"
        ) from None
