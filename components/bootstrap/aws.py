"""AwsDeployer: IAM role spotroute-deployer, trusted through web identity federation only."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pulumi

from components.args import require_type
from components.bootstrap.args import (
    AWS_STS_AUDIENCE,
    AZURE_EXCHANGE_AUDIENCE,
    DEPLOYER_NAME,
    GOOGLE_FEDERATED,
    AwsHome,
    AzureHome,
    GcpHome,
    Home,
    OidcIssuer,
    bootstrap_labels,
    require_strings,
    state_location,
)
from components.bootstrap.aws_boundary import (
    AWS_JOB_BOUNDARY_NAME,
    aws_job_boundary_policy,
    parse_job_buckets,
)
from components.bootstrap.aws_permissions import aws_deployer_policy

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
    # Besides spotroute-*: the buckets job roles may reach (data, reused checkpoint buckets),
    # `<bucket>` of this account or `<bucket>@<account id>`.
    job_buckets: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)


class AwsDeployer(pulumi.ComponentResource):
    """IAM role spotroute-deployer: web identity only, permissions for the AWS placement only."""

    role_arn: pulumi.Output[str]
    account_id: pulumi.Output[str]
    job_boundary_arn: pulumi.Output[str]  # the permissions boundary every job role must carry
    oidc_provider_arns: pulumi.Output[dict[str, str]]
    outbound_issuer: pulumi.Output[str]  # "" unless outbound federation is on
    has_outbound_federation: bool

    def __init__(
        self, name: str, args: AwsDeployerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        require_type(args, AwsDeployerArgs, "AwsDeployer")
        require_type(args.home, (GcpHome, AzureHome, type(None)), "AwsDeployerArgs.home")
        require_strings(args.existing_oidc_providers, "AwsDeployerArgs.existing_oidc_providers")
        for issuer in args.oidc_issuers:
            require_type(issuer, OidcIssuer, "AwsDeployerArgs.oidc_issuers")
        if not args.oidc_issuers and args.home is None:
            raise ValueError("oidc_issuers: nobody could assume the AWS deployer — add an issuer")
        state_bucket, state_prefix = "", ""
        if args.state_bucket:
            if not args.state_bucket.startswith("s3://"):
                raise ValueError(f"state_bucket: {args.state_bucket!r} is not an s3:// URL")
            state_bucket, state_prefix = state_location(args.state_bucket)
        require_strings(args.job_buckets, "AwsDeployerArgs.job_buckets")
        listed = {b for names in parse_job_buckets(args.job_buckets, "").values() for b in names}
        if state_bucket and state_bucket in listed:
            raise ValueError(
                f"job_buckets: {state_bucket!r} is the state bucket — jobs must never reach it; "
                "keep state and job data in different buckets"
            )
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

        # The ceiling of every job role: the deployer may create and edit job roles only with this
        # boundary (aws_permissions.aws_deployer_policy), and may never change the boundary itself.
        boundary = aws.iam.Policy(
            f"{name}-job-boundary",
            name=AWS_JOB_BOUNDARY_NAME,
            description="spotroute: the most any job role may do (checkpoints, data, shell)",
            policy=account_id.apply(
                lambda acct: json.dumps(
                    aws_job_boundary_policy(acct, args.job_buckets, state_bucket), indent=1
                )
            ),
            # Tells the policy pack this is a ceiling, not a grant (policies/rules/iam.py).
            tags={
                **tags,
                "Name": AWS_JOB_BOUNDARY_NAME,
                "spotroute-purpose": "permissions-boundary",
            },
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
        self.job_boundary_arn = boundary.arn
        self.oidc_provider_arns = pulumi.Output.all(
            **{url: arn for url, arn in provider_arns.items()}
        ).apply(dict)
        self.outbound_issuer = outbound_issuer
        self.has_outbound_federation = bool(token_audiences)
        self.register_outputs(
            {
                "role_arn": self.role_arn,
                "account_id": self.account_id,
                "job_boundary_arn": self.job_boundary_arn,
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
