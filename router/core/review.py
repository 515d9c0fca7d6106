"""Pure: the review summary of a preview — identities, access grants, firewall rules and storage
exposure first (what platform engineers must check before merging), then the full diff."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Ordered: the first matching category wins. Matched against the resource type token.
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "identities",
        (
            "aws:iam/role:",
            "aws:iam/instanceProfile:",
            "aws:iam/openIdConnectProvider:",
            "gcp:serviceaccount/account:",
            "gcp:iam/workloadIdentityPool",
            "azure-native:managedidentity:",
        ),
    ),
    (
        "access",
        (
            "aws:iam/rolePolicy",
            "aws:iam/policy",
            "aws:s3/bucketPolicy:",
            "gcp:storage/bucketIAM",
            "gcp:projects/iAM",
            "gcp:serviceaccount/iAM",
            "azure-native:authorization:",
        ),
    ),
    (
        "network exposure",
        (
            "aws:ec2/securityGroup",
            "aws:vpc/securityGroup",
            "gcp:compute/firewall:",
            "azure-native:network:NetworkSecurityGroup",
            "azure-native:network:SecurityRule",
        ),
    ),
    (
        "storage",
        (
            "aws:s3/",
            "gcp:storage/bucket:",
            "azure-native:storage:",
            "pulumi-python:dynamic/spotroute:LocalDirectory",
        ),
    ),
)
SKIPPED_OPS = {"same", "read", "refresh"}


@dataclass(frozen=True)
class Change:
    """One planned step of the engine for one resource."""

    op: str
    type: str
    name: str
    urn: str
    diffs: tuple[str, ...] = ()
    inputs: Mapping[str, Any] = field(default_factory=dict)


def category(resource_type: str, urn: str = "") -> str:
    """The review category of a resource type ("compute and other" when none matches)."""
    for name, prefixes in CATEGORIES:
        if any(resource_type.startswith(p) or p in urn for p in prefixes):
            return name
    return "compute and other"


def change_from_event(metadata: Any) -> Change:
    """A Change from an engine StepEventMetadata (resource_pre_event.metadata)."""
    state = metadata.new or metadata.old
    inputs = dict(getattr(state, "inputs", None) or {}) if state is not None else {}
    op = metadata.op.value if hasattr(metadata.op, "value") else str(metadata.op)
    return Change(
        op=op,
        type=metadata.type,
        name=metadata.urn.rsplit("::", 1)[-1],
        urn=metadata.urn,
        diffs=tuple(metadata.diffs or ()),
        inputs=inputs,
    )


@dataclass(frozen=True)
class Review:
    stack: str
    counts: Mapping[str, int]
    by_category: Mapping[str, tuple[Change, ...]]
    config_diff: tuple[str, ...]
    policy_violations: tuple[str, ...] = ()


def review(
    stack: str,
    changes: Iterable[Change],
    config_diff: Sequence[str] = (),
    policy_violations: Sequence[str] = (),
) -> Review:
    """Group the steps that change something by category, security-relevant ones first."""
    real = [
        c
        for c in changes
        if c.op not in SKIPPED_OPS and not c.type.startswith("pulumi:pulumi:Stack")
    ]
    grouped: dict[str, list[Change]] = {name: [] for name, _ in CATEGORIES}
    grouped["compute and other"] = []
    for c in real:
        grouped[category(c.type, c.urn)].append(c)
    return Review(
        stack=stack,
        counts=dict(Counter(c.op for c in real)),
        by_category={k: tuple(v) for k, v in grouped.items()},
        config_diff=tuple(config_diff),
        policy_violations=tuple(policy_violations),
    )


def review_json(r: Review) -> dict[str, Any]:
    return {
        "stack": r.stack,
        "counts": dict(r.counts),
        "config_diff": list(r.config_diff),
        "policy_violations": list(r.policy_violations),
        "categories": {
            name: [
                {
                    "op": c.op,
                    "type": c.type,
                    "name": c.name,
                    "diffs": list(c.diffs),
                    "inputs": _plain(c.inputs),
                }
                for c in changes
            ]
            for name, changes in r.by_category.items()
        },
    }


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def review_markdown(r: Review) -> str:
    counts = ", ".join(f"{n} to {op}" for op, n in sorted(r.counts.items())) or "no changes"
    lines = [f"## spotroute preview: `{r.stack}`", "", f"**{counts}**", ""]
    if r.policy_violations:
        lines += ["### Policy violations", ""] + [f"- {v}" for v in r.policy_violations] + [""]
    for name, changes in r.by_category.items():
        if name == "compute and other":
            continue
        lines += [f"### {name.capitalize()} ({len(changes)})", ""]
        if not changes:
            lines += ["_none_", ""]
            continue
        for c in changes:
            lines.append(f"- **{c.op}** `{c.type}` `{c.name}`")
            lines += [
                f"  - `{k}`: `{_short(v)}`"
                for k, v in sorted(c.inputs.items())
                if not k.startswith("__")
            ]
        lines.append("")
    if r.config_diff:
        lines += ["### Stack config", "", "```diff", *r.config_diff, "```", ""]
    lines += ["<details><summary>Full diff</summary>", ""]
    for changes in r.by_category.values():
        for c in changes:
            extra = f" ({', '.join(c.diffs)})" if c.diffs else ""
            lines.append(f"- {c.op} `{c.type}` `{c.name}`{extra}")
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def _short(value: Any, limit: int = 160) -> str:
    text = str(_plain(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"
