"""checkpoint-storage-not-public, checkpoint-storage-encrypted-versioned (resource rules) and
checkpoint-storage-complete (the stack rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies.rules.model import (
    UNKNOWN,
    Settings,
    StackResource,
    as_list,
    as_strings,
    cannot_read,
    is_false,
    is_true,
    policy_document,
    present,
    prop_at,
    statement_label,
    statements,
)
from policies.rules.resource_types import (
    AWS_BUCKET_ACLS,
    AWS_BUCKET_POLICY,
    AWS_BUCKETS,
    AWS_CANNED_ACLS,
    AWS_ENCRYPTION,
    AWS_PUBLIC_ACCESS_BLOCK,
    AWS_PUBLIC_CANNED_ACLS,
    AWS_PUBLIC_GRANTEE_URIS,
    AWS_VERSIONING,
    AZURE_BLOB_CONTAINER,
    AZURE_BLOB_SERVICE,
    AZURE_STORAGE_ACCOUNT,
    GCP_BUCKET,
    GCP_BUCKET_ACCESS_CONTROLS,
    GCP_BUCKET_ACL,
    GCP_BUCKET_IAM,
    GCP_PUBLIC_MEMBERS,
    GCP_PUBLIC_PREDEFINED_ACLS,
    IAM_EFFECTS,
    TLS_VERSIONS,
)

# --- checkpoint-storage-not-public -------------------------------------------------------------


def _anyone(principal: Any) -> bool:
    """True for Principal "*" or {"AWS": "*"} (also inside a list): anybody on the internet."""
    if principal == "*":
        return True
    return "*" in as_strings(prop_at(principal, "AWS"))


def _public_bucket_policy(value: Any) -> list[str]:
    document = policy_document(value)
    if document is UNKNOWN:
        return []
    if document is None:
        return ["bucket policy is not a JSON policy document — pass valid JSON (json.dumps)"]
    problems = []
    for index, statement in enumerate(statements(document)):
        effect = statement.get("Effect")
        if effect not in IAM_EFFECTS:
            problems.append(_unreadable_effect(statement, index))
            continue
        if effect != "Allow" or not _anyone(statement.get("Principal")):
            continue
        if not statement.get("Condition"):
            problems.append(
                f"bucket policy {statement_label(statement, index)} allows Principal '*' "
                "without a Condition — grant a specific principal (the job role) or add a Condition"
            )
    return problems


def _unreadable_effect(statement: Mapping[str, Any], index: int) -> str:
    return cannot_read(
        f"{statement_label(statement, index)} Effect",
        statement.get("Effect"),
        "write Effect: Allow or Deny (IAM reads them case-sensitively)",
    )


def _public_aws_acl(acl: Any, grants: Any) -> list[str]:
    problems = []
    if isinstance(acl, str) and acl in AWS_PUBLIC_CANNED_ACLS:
        problems.append(f"ACL {acl!r} makes objects readable by others — use acl 'private' or none")
    elif present(acl) and acl not in AWS_CANNED_ACLS:
        problems.append(cannot_read("ACL", acl, "use acl 'private' or none"))
    for grant in as_list(grants):
        uri = prop_at(grant, "uri") or prop_at(grant, "grantee", "uri")
        if isinstance(uri, str) and uri in AWS_PUBLIC_GRANTEE_URIS:
            group = uri.rsplit("/", 1)[-1]
            problems.append(f"ACL grants access to the {group} group — remove that grant")
    return problems


def _gcp_public_members(props: Mapping[str, Any]) -> list[str]:
    members = as_strings(props.get("member")) + as_strings(props.get("members"))
    document = policy_document(props.get("policyData"))
    if isinstance(document, Mapping):
        for binding in as_list(document.get("bindings")):
            members += as_strings(prop_at(binding, "members"))
    public = sorted({m for m in members if m in GCP_PUBLIC_MEMBERS})
    return [
        f"bucket IAM grants {member} — grant the job's service account instead" for member in public
    ]


def public_storage_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Checkpoint storage must not be readable or writable by the public."""
    if resource_type == AWS_PUBLIC_ACCESS_BLOCK:
        flags = (
            "blockPublicAcls",
            "blockPublicPolicy",
            "ignorePublicAcls",
            "restrictPublicBuckets",
        )
        off = [f for f in flags if props.get(f) is not UNKNOWN and not is_true(props.get(f))]
        if off:
            return [f"public access block leaves {', '.join(off)} off — set all four flags to true"]
        return []
    if resource_type in AWS_BUCKET_ACLS:
        return _public_aws_acl(props.get("acl"), prop_at(props, "accessControlPolicy", "grants"))
    if resource_type == AWS_BUCKET_POLICY:
        return _public_bucket_policy(props.get("policy"))
    if resource_type in AWS_BUCKETS:
        problems = _public_aws_acl(props.get("acl"), props.get("grants"))
        if props.get("policy") not in (None, ""):
            problems += _public_bucket_policy(props.get("policy"))
        return problems
    if resource_type == GCP_BUCKET:
        problems = []
        prevention = props.get("publicAccessPrevention")
        if prevention is not UNKNOWN and prevention != "enforced":
            problems.append(
                f"publicAccessPrevention is {prevention!r} — set publicAccessPrevention: 'enforced'"
            )
        uniform = props.get("uniformBucketLevelAccess")
        if uniform is not UNKNOWN and not is_true(uniform):
            problems.append(
                "uniformBucketLevelAccess is not true, so object ACLs can grant access — "
                "set uniformBucketLevelAccess: true"
            )
        return problems
    if resource_type in GCP_BUCKET_IAM:
        return _gcp_public_members(props)
    if resource_type == GCP_BUCKET_ACL:
        problems = []
        predefined = props.get("predefinedAcl")
        if isinstance(predefined, str) and predefined in GCP_PUBLIC_PREDEFINED_ACLS:
            problems.append(
                f"predefinedAcl {predefined!r} is public — use 'private' or 'projectPrivate'"
            )
        for entity in as_strings(props.get("roleEntities")):
            if entity.rsplit(":", 1)[-1] in GCP_PUBLIC_MEMBERS:
                problems.append(f"ACL entry {entity!r} is public — remove it")
        return problems
    if resource_type in GCP_BUCKET_ACCESS_CONTROLS:
        grantee = props.get("entity")
        if isinstance(grantee, str) and grantee in GCP_PUBLIC_MEMBERS:
            return [f"access control grants {grantee} — grant the job's service account instead"]
        return []
    if resource_type == AZURE_STORAGE_ACCOUNT:
        allow = props.get("allowBlobPublicAccess")
        if allow is not UNKNOWN and not is_false(allow):
            return ["allowBlobPublicAccess is not false — set allowBlobPublicAccess: false"]
        return []
    if resource_type == AZURE_BLOB_CONTAINER:
        access = props.get("publicAccess")
        if access not in (None, "None", UNKNOWN):
            return [f"container publicAccess is {access!r} — set publicAccess: 'None'"]
        return []
    return []


# --- checkpoint-storage-encrypted-versioned ----------------------------------------------------


def _has_encryption_rule(rules: Any) -> bool:
    return any(
        isinstance(prop_at(rule, "applyServerSideEncryptionByDefault", "sseAlgorithm"), str)
        for rule in as_list(rules)
    )


def storage_protection_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Checkpoint storage keeps old versions and is encrypted (in transit too, on Azure)."""
    if resource_type in AWS_VERSIONING:
        status = prop_at(props, "versioningConfiguration", "status")
        if status is not UNKNOWN and status != "Enabled":
            return [
                f"versioning status is {status!r} — set versioningConfiguration.status: 'Enabled'"
            ]
        return []
    if resource_type in AWS_ENCRYPTION:
        rules = props.get("rules")
        if rules is not UNKNOWN and not _has_encryption_rule(rules):
            return [
                "server-side encryption configuration has no default-encryption rule — add a rule "
                "with applyServerSideEncryptionByDefault.sseAlgorithm 'aws:kms' or 'AES256'"
            ]
        return []
    if resource_type in AWS_BUCKETS:
        problems = []
        versioning = prop_at(props, "versioning", "enabled")
        if is_false(versioning):
            problems.append("bucket disables versioning — remove versioning.enabled: false")
        elif present(versioning) and not is_true(versioning):
            problems.append(cannot_read("versioning.enabled", versioning, "write true"))
        inline_sse = props.get("serverSideEncryptionConfiguration")
        if isinstance(inline_sse, Mapping) and not _has_encryption_rule(
            [prop_at(inline_sse, "rule"), *as_list(prop_at(inline_sse, "rules"))]
        ):
            problems.append(
                "inline serverSideEncryptionConfiguration has no default-encryption rule — add one"
            )
        return problems
    if resource_type == GCP_BUCKET:
        # Cloud Storage encrypts every object at rest with Google-managed keys; nothing to check.
        enabled = prop_at(props, "versioning", "enabled")
        if enabled is not UNKNOWN and not is_true(enabled):
            return ["versioning is not enabled — set versioning: {enabled: true}"]
        return []
    if resource_type == AZURE_STORAGE_ACCOUNT:
        # Azure Storage encrypts at rest with Microsoft-managed keys and cannot turn it off.
        problems = []
        https_only = props.get("enableHttpsTrafficOnly")
        if is_false(https_only):
            problems.append("enableHttpsTrafficOnly is false — set enableHttpsTrafficOnly: true")
        elif present(https_only) and not is_true(https_only):
            problems.append(cannot_read("enableHttpsTrafficOnly", https_only, "write true"))

        tls = props.get("minimumTlsVersion")
        minimum = str(settings.get("min_tls_version", "TLS1_2"))
        if tls is not UNKNOWN and (
            tls not in TLS_VERSIONS or TLS_VERSIONS.index(tls) < TLS_VERSIONS.index(minimum)
        ):
            problems.append(f"minimumTlsVersion is {tls!r} — set minimumTlsVersion: {minimum!r}")
        return problems
    if resource_type == AZURE_BLOB_SERVICE:
        enabled = props.get("isVersioningEnabled")
        if enabled is not UNKNOWN and not is_true(enabled):
            return ["blob versioning is off — set isVersioningEnabled: true"]
        return []
    return []


# --- checkpoint-storage-complete (stack) ---------------------------------------------------------

# Storage created by the stack → settings resources it needs, and the prop that names the storage.
STORAGE_COMPANIONS: Mapping[str, tuple[tuple[str, tuple[str, ...], str], ...]] = {
    **{
        bucket: (
            ("versioning", AWS_VERSIONING, "bucket"),
            ("server-side encryption configuration", AWS_ENCRYPTION, "bucket"),
            ("public access block", (AWS_PUBLIC_ACCESS_BLOCK,), "bucket"),
        )
        for bucket in AWS_BUCKETS
    },
    AZURE_STORAGE_ACCOUNT: (
        ("blob service properties (versioning)", (AZURE_BLOB_SERVICE,), "accountName"),
    ),
}
STORAGE_IDENTIFIERS = ("bucket", "id", "name", "accountName")


def _inline_setting(storage: StackResource, what: str) -> bool:
    """AWS buckets may carry versioning/encryption inline instead of in a separate resource."""
    if what == "versioning":
        return is_true(prop_at(storage.props, "versioning", "enabled"))
    if what.startswith("server-side encryption"):
        inline = storage.props.get("serverSideEncryptionConfiguration")
        return isinstance(inline, Mapping) and _has_encryption_rule(
            [prop_at(inline, "rule"), *as_list(prop_at(inline, "rules"))]
        )
    return False


def _belongs_to(companion: StackResource, storage: StackResource, link: str) -> bool:
    """Linked by a property dependency, by the storage's known name, or by sharing its component."""
    if storage.urn in companion.property_dependencies.get(link, ()):
        return True
    names = {storage.props.get(key) for key in STORAGE_IDENTIFIERS}
    value = companion.props.get(link)
    if isinstance(value, str) and value and value in names:
        return True
    return bool(storage.parent_urn) and companion.parent_urn == storage.parent_urn


def storage_completeness_violations(
    resources: Sequence[StackResource], settings: Settings
) -> list[tuple[str, str]]:
    """Each bucket/storage account the stack creates has its versioning/encryption/blocking."""
    problems = []
    for storage in resources:
        for what, types, link in STORAGE_COMPANIONS.get(storage.type, ()):
            if _inline_setting(storage, what):
                continue
            if not any(r.type in types and _belongs_to(r, storage, link) for r in resources):
                kind = types[0].rsplit(":", 1)[-1]
                problems.append(
                    (
                        f"{storage.name} has no {what} — add a {kind} for it "
                        "(the CheckpointBucket component creates one)",
                        storage.urn,
                    )
                )
    return problems
