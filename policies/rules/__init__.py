"""spotroute's CrossGuard rules: pure functions over resource properties, and their one registry.

Resource rules take `(resource_type, props, settings)` and return one-line violation messages
(empty list = compliant). `props` use the engine's camelCase wire names, as
`ResourceValidationArgs.props` and the Pulumi-mocks harness both deliver them. The one stack rule
takes the whole stack as `StackResource`s. `evaluate()` runs every rule the way the pack does
(policy config JSON in, violations with their enforcement level out), so tests and the engine call
the same functions; policies/pack.py wraps `RULES` for `pulumi_policy`.

One module per rule family: storage.py (not public, encrypted and versioned, complete), iam.py,
credentials.py (no long-lived keys), compute.py (node disks, IMDSv2),
network.py, labels.py, spot.py, budget.py, regions.py; model.py holds what they share and
resource_types.py the type tokens they inspect. A new rule is a function in its family's module
and one `Rule` entry in `RULES` below.

Values still unknown during a preview arrive as `UNKNOWN` and are skipped: the engine analyzes
every resource again during `up`, with final inputs, before creating it. docs/policies.md
describes each rule and its configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policies.rules.budget import (
    budget_violations,
)
from policies.rules.compute import (
    node_hardening_violations,
)
from policies.rules.credentials import (
    long_lived_key_violations,
)
from policies.rules.iam import (
    iam_wildcard_violations,
)
from policies.rules.labels import (
    required_label_violations,
)
from policies.rules.model import (
    DEFAULT_ENFORCEMENT,
    ENFORCEMENT_LEVELS,
    PACK_NAME,
    UNKNOWN,
    Rule,
    Settings,
    StackResource,
    Violation,
)
from policies.rules.network import (
    internet_ingress_violations,
)
from policies.rules.regions import (
    region_violations,
)
from policies.rules.resource_types import (
    AZURE_PRIVILEGED_ROLES,
)
from policies.rules.spot import (
    spot_checkpointing_violations,
)
from policies.rules.storage import (
    public_storage_violations,
    storage_completeness_violations,
    storage_protection_violations,
)

# --- the rules -----------------------------------------------------------------------------------

_STRINGS: Mapping[str, Any] = {"type": "array", "items": {"type": "string"}}

RULES: tuple[Rule, ...] = (
    Rule(
        "checkpoint-storage-not-public",
        "Checkpoint storage is never public: S3 public access blocked, no public ACLs or policies; "
        "GCS public access prevention enforced with uniform access; Azure blob public access off.",
        {},
        resource_check=public_storage_violations,
    ),
    Rule(
        "checkpoint-storage-encrypted-versioned",
        "Checkpoint storage keeps old versions and is encrypted; Azure storage also requires HTTPS "
        "and a minimum TLS version.",
        {"min_tls_version": {"type": "string", "enum": ["TLS1_2", "TLS1_3"], "default": "TLS1_2"}},
        resource_check=storage_protection_violations,
    ),
    Rule(
        "checkpoint-storage-complete",
        "Every bucket or storage account the stack creates has its versioning, encryption and "
        "public-access-block resources.",
        {},
        stack_check=storage_completeness_violations,
    ),
    Rule(
        "no-iam-wildcards",
        "Job identities get named actions on named resources: no '*' or 'service:*' actions, no "
        "writes on Resource '*', no primitive GCP roles, no Azure Owner/Contributor/User Access "
        "Administrator.",
        {
            "read_only_action_prefixes": {**_STRINGS, "default": ["Get", "List", "Describe"]},
            "forbidden_aws_managed_policies": {
                **_STRINGS,
                "default": ["AdministratorAccess", "PowerUserAccess", "IAMFullAccess"],
            },
            "forbidden_gcp_roles": {
                **_STRINGS,
                "default": ["roles/owner", "roles/editor", "roles/viewer"],
            },
            "forbidden_azure_role_ids": {**_STRINGS, "default": list(AZURE_PRIVILEGED_ROLES)},
        },
        resource_check=iam_wildcard_violations,
    ),
    Rule(
        "no-inbound-from-internet",
        "No security group, network ACL (beyond the return ports 1024-65535), firewall or NSG "
        "rule accepts inbound traffic from 0.0.0.0/0, ::/0, a bare 0.0.0.0, '*'/'Internet', or "
        "any set of ranges covering 1/256 or more of the address space.",
        {},
        resource_check=internet_ingress_violations,
    ),
    Rule(
        "no-long-lived-keys",
        "No static credential of any cloud: AWS access keys, GCP service-account or API keys, "
        "Azure AD application/service-principal secrets and certificates.",
        {},
        resource_check=long_lived_key_violations,
    ),
    Rule(
        "node-disks-encrypted-imdsv2",
        "EBS volumes and launch-template/instance disks are encrypted; instance metadata "
        "requires IMDSv2 session tokens.",
        {},
        resource_check=node_hardening_violations,
    ),
    Rule(
        "required-labels",
        "Every taggable resource carries the required labels/tags.",
        {"labels": {**_STRINGS, "default": ["spotroute-job", "team", "managed-by"]}},
        resource_check=required_label_violations,
    ),
    Rule(
        "spot-requires-checkpointing",
        "Spot or preemptible capacity only for jobs that declare checkpointing (label "
        "spotroute-checkpointing=true on the GPU group).",
        {"marker_label": {"type": "string", "default": "spotroute-checkpointing"}},
        resource_check=spot_checkpointing_violations,
    ),
    Rule(
        "price-within-budget",
        "A GPU group's declared max price stays within the budget (USD per instance-hour, and "
        "optionally per group-hour).",
        {
            "max_price_per_hour": {"type": "number", "exclusiveMinimum": 0},
            "max_total_price_per_hour": {"type": "number", "exclusiveMinimum": 0},
        },
        resource_check=budget_violations,
        requires_any=("max_price_per_hour", "max_total_price_per_hour"),
    ),
    Rule(
        "regions-allowed",
        "Providers and resources only in the allowed regions (globs, case-insensitive).",
        {"allowed_regions": {**_STRINGS, "minItems": 1}},
        resource_check=region_violations,
        requires_any=("allowed_regions",),
    ),
)
RULES_BY_NAME: Mapping[str, Rule] = {rule.name: rule for rule in RULES}


def is_configured(rule: Rule, settings: Settings) -> bool:
    """Whether a rule that needs configuration (a budget, a region list) has it."""
    if not rule.requires_any:
        return True
    return any(settings.get(key) not in (None, []) for key in rule.requires_any)


def _level(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("enforcementLevel"), str):
        return str(value["enforcementLevel"])
    return None


def rule_config(pack_config: Mapping[str, Any] | None, rule: Rule) -> tuple[str, dict[str, Any]]:
    """(enforcement level, settings) of one rule from a policy pack config (CLI file format)."""
    pack_config = pack_config or {}
    own = pack_config.get(rule.name)
    level = _level(own) or _level(pack_config.get("all")) or DEFAULT_ENFORCEMENT
    if level not in ENFORCEMENT_LEVELS:
        raise ValueError(
            f"policy config {rule.name}: enforcementLevel {level!r} — use one of "
            f"{', '.join(ENFORCEMENT_LEVELS)}"
        )
    return level, rule.settings(own if isinstance(own, Mapping) else None)


def evaluate(
    resources: Iterable[StackResource],
    pack_config: Mapping[str, Any] | None = None,
) -> list[Violation]:
    """Run every rule over a stack as the pack would; disabled rules are skipped."""
    stack = list(resources)
    violations = []
    for rule in RULES:
        level, settings = rule_config(pack_config, rule)
        if level == "disabled" or not is_configured(rule, settings):
            continue
        if level == "remediate":  # no rule remediates; the SDK reports these as mandatory
            level = "mandatory"
        if rule.resource_check is not None:
            for resource in stack:
                for message in rule.resource_check(resource.type, resource.props, settings):
                    violations.append(Violation(rule.name, message, resource.urn, level))
        if rule.stack_check is not None:
            for message, urn in rule.stack_check(stack, settings):
                violations.append(Violation(rule.name, message, urn, level))
    return violations


__all__ = [
    "PACK_NAME",
    "RULES",
    "RULES_BY_NAME",
    "UNKNOWN",
    "Rule",
    "StackResource",
    "Violation",
    "evaluate",
    "is_configured",
    "rule_config",
]
