"""Adapters between the pure rules and `pulumi_policy`: the only code that imports the Policy SDK,
lazily, so policies.rules stays importable without its gRPC stack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pulumi_policy import Policy, PolicyResource

from policies.rules import RULES, UNKNOWN, Rule, StackResource, is_configured

# --- adapters for pulumi_policy ------------------------------------------------------------------


def plain(value: Any) -> Any:
    """Unwrap pulumi_policy's unknown-checking proxies into plain data, unknowns as UNKNOWN."""
    from pulumi_policy.proxy import _DictProxy, _is_unknown, _ListProxy

    if isinstance(value, (_DictProxy, _ListProxy)):
        value = value["__target"]
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(item) for item in value]
    if _is_unknown(value):
        return UNKNOWN
    return value


def stack_resource(resource: PolicyResource) -> StackResource:
    """A StackValidationArgs resource as a StackResource."""
    return StackResource(
        type=resource.resource_type,
        name=resource.name,
        urn=resource.urn,
        props=plain(resource.props),
        parent_urn=resource.parent.urn
        if resource.parent is not None
        else (resource.opts.parent or ""),
        property_dependencies={
            key: tuple(dep.urn for dep in deps)
            for key, deps in resource.property_dependencies.items()
        },
    )


def build_policies() -> list[Policy]:
    """The pack's policies (all MANDATORY by default), each calling the pure rule above."""
    from pulumi_policy import (
        EnforcementLevel,
        PolicyConfigSchema,
        ReportViolation,
        ResourceValidationArgs,
        ResourceValidationPolicy,
        StackValidationArgs,
        StackValidationPolicy,
    )

    def resource_validator(rule: Rule) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
        check = rule.resource_check
        assert check is not None

        def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
            settings = rule.settings(args.get_config())
            if not is_configured(rule, settings):
                wanted = " or ".join(rule.requires_any)
                args.not_applicable(f"set {wanted} in the policy config to check this")
            for message in check(args.resource_type, plain(args.props), settings):
                report(message, None)

        return validate

    def stack_validator(rule: Rule) -> Callable[[StackValidationArgs, ReportViolation], None]:
        check = rule.stack_check
        assert check is not None

        def validate(args: StackValidationArgs, report: ReportViolation) -> None:
            settings = rule.settings(args.get_config())
            for message, urn in check([stack_resource(r) for r in args.resources], settings):
                report(message, urn or None)

        return validate

    def policy(rule: Rule) -> Policy:
        common: dict[str, Any] = {
            "name": rule.name,
            "description": rule.description,
            "enforcement_level": EnforcementLevel.MANDATORY,
            "config_schema": PolicyConfigSchema(
                properties={k: dict(v) for k, v in rule.schema.items()}
            ),
        }
        if rule.resource_check is not None:
            return ResourceValidationPolicy(validate=resource_validator(rule), **common)
        return StackValidationPolicy(validate=stack_validator(rule), **common)

    return [policy(rule) for rule in RULES]
