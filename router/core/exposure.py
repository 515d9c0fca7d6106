"""Pure: what a stack grants and exposes, as reviewable lines, and how two renderings differ.

Input: the resources a program registers (type, name, inputs; see router.engine.mocked_run).
Every security-relevant resource becomes one entry per section, each with lines in full:
IAM policy statements expanded to one line per effect × action × resource (with principal and
condition), role bindings, federated credentials, firewall rules one per rule, bucket policies,
public-access settings and encryption.

A line is a *grant* (adding it widens access) or a *guard* (removing it widens access: a
public-access block, an encryption setting, a deny rule). `diff` says which lines were added or
removed and which of those widen.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# (section, type-token fragments); the first match wins.
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("federated credentials", (
        "aws:iam/openIdConnectProvider:", "gcp:iam/workloadIdentityPool",
        "azure-native:managedidentity:FederatedIdentityCredential",
    )),
    ("IAM roles and policies", (
        "aws:iam/", "gcp:projects/iAMCustomRole", "azure-native:authorization:RoleDefinition",
    )),
    ("service accounts and role assignments", (
        "gcp:serviceaccount/", "gcp:projects/iAM", "gcp:organizations/iAM",
        "azure-native:managedidentity:", "azure-native:authorization:",
    )),
    ("network ingress and egress", (
        "aws:ec2/securityGroup", "aws:ec2/defaultSecurityGroup", "aws:vpc/securityGroup",
        "aws:ec2/networkAcl", "gcp:compute/firewall:", "azure-native:network:NetworkSecurityGroup",
        "azure-native:network:SecurityRule",
    )),
    ("bucket policies and public access", (
        "aws:s3/bucketPolicy:", "aws:s3/bucketPublicAccessBlock:", "aws:s3/bucketOwnership",
        "aws:s3/bucketAcl", "gcp:storage/bucketIAM", "gcp:storage/bucket:",
        "azure-native:storage:StorageAccount", "azure-native:storage:BlobContainer",
    )),
    ("encryption", (
        "aws:s3/bucketServerSideEncryption", "aws:kms/", "gcp:kms/", "azure-native:keyvault:",
    )),
)
# Input keys whose presence protects (removing them widens); matched against the key path.
_GUARD_KEY = re.compile(
    r"(block|restrict|ignorePublic|encrypt|kms|sse|uniformBucketLevelAccess|publicAccessPrevention|"
    r"minimumTls|httpsOnly|supportsHttpsTrafficOnly|allowBlobPublicAccess|"
    r"allowSharedKeyAccess|publicNetworkAccess|objectOwnership|httpTokens|deny)",
    re.IGNORECASE,
)
# Inputs that name the resource or carry bookkeeping, not access: left out of the lines.
_NOISE_KEYS = frozenset({"tags", "labels", "tagsAll", "__defaults", "name", "namePrefix",
                         "description", "displayName", "location", "project", "region",
                         "forceDestroy", "resourceGroupName"})


@dataclass(frozen=True, order=True)
class Line:
    """One reviewable fact: `grant` lines widen access when added, `guard` lines when removed."""

    section: str
    resource: str  # "type name"
    text: str
    kind: str = "grant"  # grant | guard


@dataclass(frozen=True)
class Exposure:
    """Everything one stack grants and exposes, in section order."""

    lines: tuple[Line, ...]

    def by_section(self) -> dict[str, dict[str, list[Line]]]:
        out: dict[str, dict[str, list[Line]]] = {name: {} for name, _ in SECTIONS}
        for line in self.lines:
            out[line.section].setdefault(line.resource, []).append(line)
        return out


def section_of(resource_type: str) -> str | None:
    for name, fragments in SECTIONS:
        if any(f in resource_type for f in fragments):
            return name
    return None


def exposure(resources: Iterable[Mapping[str, Any]]) -> Exposure:
    """The exposure lines of registered resources (component wrappers and providers skipped)."""
    lines: list[Line] = []
    for r in resources:
        type_ = str(r.get("type", ""))
        section = section_of(type_)
        if section is None or not r.get("custom", True):
            continue
        resource = f"{type_.rsplit(':', 1)[-1]} {r.get('name', '')}"
        inputs = r.get("inputs") or {}
        for path, text in _facts(inputs, ""):
            guard = section == "encryption" or _GUARD_KEY.search(path) or _is_deny(text)
            kind = "guard" if guard else "grant"
            lines.append(Line(section, resource, f"{path}: {text}" if path else text, kind))
    return Exposure(tuple(dict.fromkeys(lines)))


def _is_deny(text: str) -> bool:
    return text.startswith("Deny ") or '"access": "Deny"' in text or "'access': 'Deny'" in text


def _facts(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(key path, text) for every fact in an input value; policy documents expanded."""
    if isinstance(value, str):
        doc = _policy_document(value)
        if doc is not None:
            yield from ((path, s) for s in statement_lines(doc))
            return
        yield path, value
    elif isinstance(value, Mapping):
        if "Statement" in value:
            yield from ((path, s) for s in statement_lines(value))
            return
        for key, item in sorted(value.items()):
            if key in _NOISE_KEYS or key.startswith("__"):
                continue
            yield from _facts(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, Mapping) and "Statement" not in item:
                yield path, json.dumps(item, sort_keys=True, default=str)
            else:
                yield from _facts(item, path)
    elif value is not None:
        yield path, json.dumps(value)


def _policy_document(text: str) -> Mapping[str, Any] | None:
    if "Statement" not in text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, Mapping) and "Statement" in doc else None


def statement_lines(doc: Mapping[str, Any]) -> list[str]:
    """One line per Effect × Action × Resource of an IAM policy document, in full."""
    statements = doc.get("Statement") or []
    if isinstance(statements, Mapping):
        statements = [statements]
    out = []
    for s in statements:
        if not isinstance(s, Mapping):
            continue
        effect = s.get("Effect", "Allow")
        actions = _list(s.get("Action")) or [f"NOT {a}" for a in _list(s.get("NotAction"))]
        targets = _list(s.get("Resource")) or [f"NOT {r}" for r in _list(s.get("NotResource"))]
        extra = ""
        if s.get("Principal") is not None:
            extra += f" for {json.dumps(s['Principal'], sort_keys=True)}"
        if s.get("Condition"):
            extra += f" if {json.dumps(s['Condition'], sort_keys=True)}"
        for action in actions or ["*"]:
            for target in targets or ["(the resource)"]:
                out.append(f"{effect} {action} on {target}{extra}")
    return out


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


# --- diff --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExposureDiff:
    added: tuple[Line, ...]
    removed: tuple[Line, ...]

    @property
    def widened(self) -> tuple[Line, ...]:
        """Added grants and removed guards: what a reviewer must approve."""
        return tuple(
            [ln for ln in self.added if ln.kind == "grant"]
            + [ln for ln in self.removed if ln.kind == "guard"]
        )

    @property
    def narrowed(self) -> tuple[Line, ...]:
        return tuple(
            [ln for ln in self.removed if ln.kind == "grant"]
            + [ln for ln in self.added if ln.kind == "guard"]
        )


def diff(before: Exposure, after: Exposure) -> ExposureDiff:
    old, new = set(before.lines), set(after.lines)
    return ExposureDiff(
        added=tuple(ln for ln in after.lines if ln not in old),
        removed=tuple(ln for ln in before.lines if ln not in new),
    )


# --- rendering ----------------------------------------------------------------------------


def review_json(
    stack: str, against: str | None, after: Exposure, d: ExposureDiff | None
) -> dict[str, Any]:
    def line(ln: Line) -> dict[str, str]:
        return {"section": ln.section, "resource": ln.resource, "line": ln.text, "kind": ln.kind}

    return {
        "stack": stack,
        "against": against,
        "widened": [line(ln) for ln in d.widened] if d else [],
        "narrowed": [line(ln) for ln in d.narrowed] if d else [],
        "sections": {
            section: {res: [ln.text for ln in lines] for res, lines in resources.items()}
            for section, resources in after.by_section().items()
        },
    }


def review_markdown(
    stack: str, against: str | None, after: Exposure, d: ExposureDiff | None,
    errors: Sequence[str] = (),
) -> str:
    title = f"## spotroute review: `{stack}`" + (f" against `{against}`" if against else "")
    out = [title, ""]
    if d is not None:
        widened, narrowed = d.widened, d.narrowed
        out.append(
            f"**{len(widened)} widened, {len(narrowed)} narrowed**"
            + (" — needs a reviewer's approval" if widened else "")
        )
        out.append("")
        for heading, changed, sign in (("Widened", widened, "+"), ("Narrowed", narrowed, "-")):
            if changed:
                out += [f"### {heading}", "", "```diff"]
                out += [f"{sign} [{ln.section}] {ln.resource}: {ln.text}" for ln in changed]
                out += ["```", ""]
    out += [f"> {e}" for e in errors]
    out += ["### Everything the stack grants and exposes", ""]
    for section, resources in after.by_section().items():
        out.append(f"#### {section[0].upper()}{section[1:]} ({len(resources)})")
        out.append("")
        if not resources:
            out += ["_none_", ""]
            continue
        for res, lines in resources.items():
            out.append(f"- `{res}`")
            out += [f"  - `{ln.text}`" + (" (guard)" if ln.kind == "guard" else "") for ln in lines]
        out.append("")
    return "\n".join(out)
