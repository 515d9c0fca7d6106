"""The `bootstrap` stack's program: `spotroute-bootstrap:*` config → deployers → outputs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

import pulumi

from components.args import require_type
from components.bootstrap.args import (
    BOOTSTRAP_STACK_FILE,
    CLOUDS,
    CONFIG_NAMESPACE,
    BootstrapArgs,
    BootstrapConfigError,
    Home,
    OidcIssuer,
)
from components.bootstrap.deployers import Deployer, cloud_deployer

# --- the program ----------------------------------------------------------------------------------


def bootstrap_program(args: BootstrapArgs) -> dict[str, Any]:
    """Create the selected deployers, the router's home first; export and return the outputs."""
    require_type(args, BootstrapArgs, "bootstrap_program")
    chosen = [c for c in CLOUDS if c in args.clouds]
    providers = {cloud: cloud_deployer(cloud).make_provider(args) for cloud in chosen}
    deployers: dict[str, Deployer] = {}
    home: Home | None = None
    # The home deployer comes first: the others trust its identity, which exists only once it does.
    for cloud in sorted(chosen, key=lambda c: c != args.home_cloud):
        opts = pulumi.ResourceOptions(provider=providers[cloud])
        make = cloud_deployer(cloud).make_deployer
        deployer = make(args, None if cloud == args.home_cloud else home, opts)
        deployers[cloud] = deployer
        if cloud == args.home_cloud:
            home = deployer.as_home()

    outputs: dict[str, Any] = {"clouds": chosen, "home": args.home}
    for cloud in chosen:  # in one order, whichever cloud is home
        outputs.update(cloud_deployer(cloud).outputs(args, deployers[cloud]))
    outputs["org_config_snippet"] = pulumi.Output.all(**outputs).apply(
        lambda resolved: org_config_snippet(args, resolved)
    )
    for key, value in outputs.items():
        pulumi.export(key, value)
    return outputs


def credential_hints(args: BootstrapArgs, outputs: Mapping[str, Any]) -> dict[str, str]:
    """The `credentials:` hints of spotroute.yaml for these outputs: names and ids, no secrets."""
    hints: dict[str, str] = {"router_home": args.home}
    for cloud in CLOUDS:
        if cloud in args.clouds:
            hints.update(cloud_deployer(cloud).hints(args, outputs))
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
    "gcp_project_shared": "gcpProjectShared",
    "router_service_account": "routerServiceAccount",
    "gcp_job_buckets": "gcpJobBuckets",
    "aws_job_buckets": "awsJobBuckets",
    "azure_job_storage_accounts": "azureJobStorageAccounts",
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
    shared = data("gcpProjectShared", False)
    if not isinstance(shared, bool):
        raise fail("gcpProjectShared", f"{shared!r} is not true or false")
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
            gcp_project_shared=shared,
            router_service_account=text("routerServiceAccount"),
            gcp_job_buckets=strings("gcpJobBuckets"),
            aws_job_buckets=strings("awsJobBuckets"),
            azure_job_storage_accounts=strings("azureJobStorageAccounts"),
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
