"""One-time, keyless bootstrap of the identities that deploy spotroute placements.

`route bootstrap` runs `bootstrap_inline_program()` once per organisation, as an administrator,
in its own stack (`bootstrap`, config namespace `spotroute-bootstrap:`; docs/security.md). It
creates one deployer identity per selected cloud, allowed exactly what the placement program
(components/aws.py, gcp.py, azure.py) manages, and reachable only through federation:

    AwsDeployer    IAM role spotroute-deployer; trust = web identity only (OIDC providers,
                   accounts.google.com, Entra ID), each pinned to an audience and a subject
    GcpDeployer    service account spotroute-deployer + one custom role, and a bucket-grants
                   role under a condition naming spotroute's job buckets; a workload identity
                   pool whose providers each accept exactly one identity
    AzureDeployer  user-assigned identity spotroute-deployer + federated credentials with exact
                   subjects; three custom roles (resources; job identities, in the
                   spotroute-job-identities group only; job-role grants under an ABAC condition)

No access key, service-account key or client secret is created anywhere. Who may become a
deployer: every external OIDC issuer in `oidc_issuers` (CI, Kubernetes) may become every
selected deployer; and the router's *home* deployer (`home: aws|gcp|azure`) may become the
others, so a router running in one cloud reaches the rest with its own platform identity.

Modules: args.py (BootstrapArgs, OidcIssuer, checks, home identities), aws_permissions.py /
gcp_permissions.py / azure_permissions.py (what each deployer may do), aws.py / gcp.py /
azure.py (one deployer component per cloud),
program.py (stack config → deployers → outputs).

Public API (the CLI wires these):

    OidcIssuer(name, url, subject, audience="")
    BootstrapArgs(clouds, home, oidc_issuers=(), aws_*, gcp_*, azure_*, state_*, labels)
    read_bootstrap_config(config=None, stack_file=BOOTSTRAP_STACK_FILE) -> BootstrapArgs
    bootstrap_program(args: BootstrapArgs) -> dict[str, Any]   # exports the outputs too
    bootstrap_inline_program() -> None                         # reads config, then the above
"""

from components.bootstrap.args import (
    AWS_STS_AUDIENCE,
    AZURE_EXCHANGE_AUDIENCE,
    BOOTSTRAP_STACK,
    BOOTSTRAP_STACK_FILE,
    CONFIG_NAMESPACE,
    AwsHome,
    AzureHome,
    BootstrapArgs,
    BootstrapConfigError,
    GcpHome,
    Home,
    OidcIssuer,
)
from components.bootstrap.aws import (
    AwsDeployer,
    AwsDeployerArgs,
)
from components.bootstrap.aws_permissions import aws_deployer_policy
from components.bootstrap.azure import (
    AzureDeployer,
    AzureDeployerArgs,
)
from components.bootstrap.azure_permissions import (
    AZURE_DEPLOYER_ACTIONS,
    AZURE_GRANT_ACTIONS,
    AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR,
    AZURE_STORAGE_BLOB_DATA_READER,
)
from components.bootstrap.gcp import (
    GcpDeployer,
    GcpDeployerArgs,
)
from components.bootstrap.gcp_permissions import GCP_DEPLOYER_PERMISSIONS
from components.bootstrap.program import (
    CONFIG_KEYS,
    bootstrap_inline_program,
    bootstrap_program,
    credential_hints,
    org_config_snippet,
    read_bootstrap_config,
)

__all__ = [
    "AWS_STS_AUDIENCE",
    "AZURE_DEPLOYER_ACTIONS",
    "AZURE_EXCHANGE_AUDIENCE",
    "AZURE_GRANT_ACTIONS",
    "AZURE_STORAGE_BLOB_DATA_CONTRIBUTOR",
    "AZURE_STORAGE_BLOB_DATA_READER",
    "BOOTSTRAP_STACK",
    "BOOTSTRAP_STACK_FILE",
    "CONFIG_KEYS",
    "CONFIG_NAMESPACE",
    "GCP_DEPLOYER_PERMISSIONS",
    "AwsDeployer",
    "AwsDeployerArgs",
    "AwsHome",
    "AzureDeployer",
    "AzureDeployerArgs",
    "AzureHome",
    "BootstrapArgs",
    "BootstrapConfigError",
    "GcpDeployer",
    "GcpDeployerArgs",
    "GcpHome",
    "Home",
    "OidcIssuer",
    "aws_deployer_policy",
    "bootstrap_inline_program",
    "bootstrap_program",
    "credential_hints",
    "org_config_snippet",
    "read_bootstrap_config",
]
