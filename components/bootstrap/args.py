"""Inputs of the bootstrap: names, OIDC issuers, BootstrapArgs and its checks, home identities."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pulumi

from components.args import require_type
from router.contract.clouds import PUBLIC_CLOUDS

CONFIG_NAMESPACE = "spotroute-bootstrap"
BOOTSTRAP_STACK = "bootstrap"
BOOTSTRAP_STACK_FILE = f"stacks/Pulumi.{BOOTSTRAP_STACK}.yaml"


class BootstrapConfigError(pulumi.RunError):
    """A `spotroute-bootstrap:*` stack config value is missing or wrong; the message names it."""


CLOUDS = PUBLIC_CLOUDS  # the clouds with deployer identities (local needs none)
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


_ISSUER_NAME = re.compile(r"[a-z][a-z0-9-]{1,25}[a-z0-9]")
GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_AWS_ACCOUNT = re.compile(r"\d{12}")
GCP_PROJECT_ID_PATTERN = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
_SERVICE_ACCOUNT_EMAIL = re.compile(
    r"[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z0-9.-]+\.gserviceaccount\.com"
)
# An Azure storage account's resource id (what `azureJobStorageAccounts` lists).
STORAGE_ACCOUNT_ID = re.compile(
    r"/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w.()]{1,90}"
    r"/providers/Microsoft\.Storage/storageAccounts/[a-z0-9]{3,24}"
)
GCS_BUCKET_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]")  # no dots: no domain buckets
_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
# Subjects and audiences end up inside CEL and ABAC string literals: no quotes, no backslashes.
_UNSAFE = set("*?\"'\\") | {chr(c) for c in range(32)}
AZURE_MAX_FEDERATED_CREDENTIALS = 20  # per user-assigned identity
SUBJECT_LIMIT = 127  # GCP's limit for google.subject; the tightest of the three clouds


def require_strings(value: object, what: str) -> None:
    """TypeError unless `value` is a tuple of strings (a lone string is refused)."""
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
    # False (the default): the project is spotroute's alone, and the bootstrap refuses one that
    # holds other enabled service accounts — the deployer's actAs and firewall rights cannot be
    # narrowed to spotroute's (docs/security.md, "Residual risks"). True accepts a shared project.
    gcp_project_shared: bool = False
    # Buckets besides spotroute-* whose IAM policy the GCP deployer may edit to grant jobs (their
    # data buckets, reused checkpoint buckets).
    gcp_job_buckets: tuple[str, ...] = ()
    # Buckets besides this account's spotroute-* that AWS job roles may reach (the job boundary):
    # `<bucket>` of the account, or `<bucket>@<account id>`.
    aws_job_buckets: tuple[str, ...] = ()
    azure_subscription_id: str = ""
    azure_tenant_id: str = ""
    azure_location: str = ""  # where the deployer identity's resource group lives
    azure_federation_audience: str = ""  # home azure: App ID URI the identity asks tokens for
    state_bucket: str = ""  # Pulumi DIY backend to grant: s3://b[/p], gs://b[/p], azblob://c
    state_storage_account_id: str = ""  # azblob only: the account's resource id
    # Storage accounts (resource ids) besides spotroute's own whose containers the Azure deployer
    # may grant jobs on (data, reused checkpoint containers).
    azure_job_storage_accounts: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require_strings(self.clouds, "BootstrapArgs.clouds")
        if not isinstance(self.oidc_issuers, tuple):
            raise TypeError(
                "BootstrapArgs.oidc_issuers takes a tuple of OidcIssuer, got "
                f"{type(self.oidc_issuers).__name__}"
            )
        for issuer in self.oidc_issuers:
            require_type(issuer, OidcIssuer, "BootstrapArgs.oidc_issuers")
        require_strings(
            self.aws_existing_oidc_providers, "BootstrapArgs.aws_existing_oidc_providers"
        )
        require_type(self.aws_outbound_federation, bool, "BootstrapArgs.aws_outbound_federation")
        require_type(self.gcp_project_shared, bool, "BootstrapArgs.gcp_project_shared")
        require_strings(self.gcp_job_buckets, "BootstrapArgs.gcp_job_buckets")
        require_strings(self.aws_job_buckets, "BootstrapArgs.aws_job_buckets")
        require_strings(
            self.azure_job_storage_accounts, "BootstrapArgs.azure_job_storage_accounts"
        )
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


def check_storage_account_ids(ids: tuple[str, ...], field: str) -> None:
    """ValueError naming `field` unless every entry is an Azure storage account's resource id."""
    for account_id in ids:
        if not STORAGE_ACCOUNT_ID.fullmatch(account_id):
            raise ValueError(
                f"{field}: {account_id!r} is not a storage account resource id — use "
                "/subscriptions/<id>/resourceGroups/<group>/providers/"
                "Microsoft.Storage/storageAccounts/<account>"
            )


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
        if not GCP_PROJECT_ID_PATTERN.fullmatch(args.gcp_project_id):
            raise ValueError(
                f"gcp_project_id: {args.gcp_project_id!r} — name the project id (6–30 lowercase "
                "letters, digits, dashes)"
            )
        if args.gcp_project_number and not args.gcp_project_number.isdigit():
            raise ValueError(
                f"gcp_project_number: {args.gcp_project_number!r} — use the numeric project "
                "number, or leave it empty to look it up"
            )
    if args.aws_job_buckets:
        from components.bootstrap.aws_boundary import parse_job_buckets

        if "aws" not in clouds:
            raise ValueError("aws_job_buckets: is set but clouds does not include aws")
        parse_job_buckets(args.aws_job_buckets, args.aws_account_id)
    if args.azure_job_storage_accounts and "azure" not in clouds:
        raise ValueError("azure_job_storage_accounts: is set but clouds does not include azure")
    check_storage_account_ids(args.azure_job_storage_accounts, "azure_job_storage_accounts")
    if args.gcp_project_shared and "gcp" not in clouds:
        raise ValueError("gcp_project_shared: is set but clouds does not include gcp")
    for bucket in args.gcp_job_buckets:
        if "gcp" not in clouds:
            raise ValueError("gcp_job_buckets: is set but clouds does not include gcp")
        if not GCS_BUCKET_PATTERN.fullmatch(bucket):
            raise ValueError(
                f"gcp_job_buckets: {bucket!r} is not a Cloud Storage bucket name — list bare "
                "names such as acme-datasets"
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
            if not GUID.fullmatch(getattr(args, name)):
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
