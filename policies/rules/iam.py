"""no-iam-wildcards: job identities get named actions on named resources."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies.rules.model import (
    UNKNOWN,
    Settings,
    as_list,
    as_strings,
    cannot_read,
    policy_document,
    prop_at,
    statement_label,
    statements,
)
from policies.rules.resource_types import (
    AWS_POLICY_ATTACHMENTS,
    AWS_POLICY_DOCUMENTS,
    AWS_ROLE,
    AZURE_PRIVILEGED_ROLES,
    AZURE_ROLE_ASSIGNMENT,
    IAM_EFFECTS,
)

# --- no-iam-wildcards ----------------------------------------------------------------------------

# Actions AWS defines without resource types: a policy can grant them only on Resource "*"
# (Service Authorization Reference, "Amazon Message Gateway Service"). Session Manager's agent
# needs exactly these to open a shell; nothing else may use the exemption.
ACTIONS_WITHOUT_RESOURCE_TYPES = frozenset(
    {
        "ssmmessages:createcontrolchannel",
        "ssmmessages:createdatachannel",
        "ssmmessages:opencontrolchannel",
        "ssmmessages:opendatachannel",
    }
)

GCP_IMPERSONATION_ROLES = (
    "roles/iam.serviceAccountTokenCreator",
    "roles/iam.serviceAccountUser",
    "roles/iam.serviceAccountKeyAdmin",
    "roles/iam.workloadIdentityUser",
    "roles/iam.serviceAccountOpenIdTokenCreator",
)


# Roles that read secret values. Granted on a project, folder or organization they read every
# secret in it; a job gets them on its one secret (gcp.secretmanager.SecretIamMember).
GCP_SECRET_READ_ROLES = ("roles/secretmanager.secretAccessor", "roles/secretmanager.admin")
# Azure roles that read Key Vault secret values: Secrets User, Secrets Officer, Administrator.
# A job gets Secrets User on its one secret (scope .../vaults/<v>/secrets/<name>).
AZURE_SECRET_READ_ROLES = {
    "4633458b-17de-408a-b874-0445c86b69e6": "Key Vault Secrets User",
    "b86a8fe4-44ce-4948-aee5-eccb2c155cd7": "Key Vault Secrets Officer",
    "00482a5a-887f-4fb3-b363-3b7fe8e74483": "Key Vault Administrator",
}


def _is_read_only(action: str, prefixes: Sequence[str]) -> bool:
    """s3:GetObject, ec2:Describe* … (IAM action names are case-insensitive)."""
    verb = action.split(":", 1)[-1].lower()
    return any(verb.startswith(prefix.lower()) for prefix in prefixes)


# Reads that return data (secrets, keys, objects) rather than metadata: "read-only" is no excuse
# for reaching every secret or bucket of the account.
DATA_READ_ACTIONS = (
    "secretsmanager:getsecretvalue",
    "secretsmanager:batchgetsecretvalue",
    "ssm:getparameter",
    "ssm:getparameters",
    "ssm:getparametersbypath",
    "ssm:getparameterhistory",
    "kms:decrypt",
    "s3:getobject",
    "s3:getobjectversion",
    "dynamodb:getitem",
    "dynamodb:scan",
    "dynamodb:query",
)
# Actions that change who can do what: on every role they are a path to administrator.
ESCALATION_PREFIXES = ("iam:passrole", "iam:put", "iam:attach", "iam:create", "iam:update")


def _matches_any(action: str, names: Sequence[str]) -> bool:
    """An action (maybe with wildcards, e.g. ssm:GetParameter*) that can be any of `names`."""
    import fnmatch

    lowered = action.lower()
    return any(fnmatch.fnmatchcase(name, lowered) or name.startswith(lowered) for name in names)


def _reaches_everything(resource: str) -> bool:
    """Whether a Resource names every resource of its kind: '*', 'arn:aws:s3:::*/*', 'role/*'."""
    if resource == "*":
        return True
    parts = resource.split(":", 5)
    if len(parts) < 6:
        return False
    service, rest = parts[2], parts[5]
    if service == "s3":
        return "*" in rest.split("/", 1)[0]  # the bucket name itself is a wildcard
    name = rest.split("/", 1)[1] if "/" in rest else rest.split(":", 1)[-1]
    return set(name) <= {"*", "/", ":"}


# A managed policy carrying this tag is a permissions boundary: a ceiling that grants nothing by
# itself (IAM evaluates it only intersected with the role's own policies). Data reads across all
# buckets are allowed in it (job data lives in the user's buckets, unknown at bootstrap); `*`
# actions, writes on `*` and privilege changes are still refused.
BOUNDARY_TAG = ("spotroute-purpose", "permissions-boundary")


def _is_boundary(resource_type: str, props: Mapping[str, Any]) -> bool:
    tags = props.get("tags")
    return (
        resource_type == "aws:iam/policy:Policy"
        and isinstance(tags, Mapping)
        and tags.get(BOUNDARY_TAG[0]) == BOUNDARY_TAG[1]
    )


def _wildcard_statement_problems(
    statement: Mapping[str, Any],
    label: str,
    read_only_prefixes: Sequence[str],
    *,
    boundary: bool = False,
) -> list[str]:
    if statement.get("Effect") not in IAM_EFFECTS:
        return [
            cannot_read(
                f"{label} Effect",
                statement.get("Effect"),
                "write Effect: Allow or Deny (IAM reads them case-sensitively)",
            )
        ]
    if statement.get("Effect") != "Allow":
        return []
    if "NotAction" in statement:
        return [f"{label} allows NotAction, i.e. every other action — list the actions it needs"]
    actions = as_strings(statement.get("Action"))
    problems = []
    for action in actions:
        if action == "*":
            problems.append(f"{label} allows Action '*' — list the actions the job needs")
        elif action.endswith(":*"):
            problems.append(
                f"{label} allows every {action.split(':', 1)[0]} action ({action!r}) — "
                "list the actions the job needs"
            )
    resources = as_strings(statement.get("Resource"))
    whole_account = "NotResource" in statement or "*" in resources
    writes = [a for a in actions if a != "*" and not a.endswith(":*")]
    writes = [a for a in writes if not _is_read_only(a, read_only_prefixes)]
    writes = [a for a in writes if a.lower() not in ACTIONS_WITHOUT_RESOURCE_TYPES]
    if whole_account and writes:
        problems.append(
            f"{label} allows {', '.join(writes)} on Resource '*' — scope Resource to the "
            "checkpoint bucket/prefix ARN"
        )
    # By what an action can reach: data reads and privilege changes on every resource of a kind.
    everything = [r for r in resources if _reaches_everything(r)] or (
        ["NotResource"] if "NotResource" in statement else []
    )
    if everything:
        reach = everything[0]
        readers = [a for a in actions if a != "*" and _matches_any(a, DATA_READ_ACTIONS)]
        if readers and not boundary and not (whole_account and writes):  # refused already
            problems.append(
                f"{label} allows {', '.join(readers)} on {reach!r}, which reads every secret, "
                "key or object of the account — name the resources the job reads"
            )
        escalators = [
            a
            for a in actions
            if a != "*" and (a.lower().startswith(ESCALATION_PREFIXES) or a.lower() == "iam:*")
        ]
        if escalators and (reach in ("*", "NotResource") or ":iam:" in reach):
            problems.append(
                f"{label} allows {', '.join(escalators)} on {reach!r}, a path to administrator "
                "— name the one role (arn:aws:iam::<account>:role/<name>)"
            )
    return problems


def iam_wildcard_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Identities get named actions on named resources, never `*` or primitive/owner roles."""
    read_only = as_strings(settings.get("read_only_action_prefixes"))
    documents: list[tuple[str, Any]] = []
    if resource_type in AWS_POLICY_DOCUMENTS:
        documents.append(("policy", props.get("policy")))
    if resource_type == AWS_ROLE:
        for inline in as_list(props.get("inlinePolicies")):
            documents.append(
                (f"inline policy {prop_at(inline, 'name')!r}", prop_at(inline, "policy"))
            )
    problems: list[str] = []
    for what, value in documents:
        document = policy_document(value)
        if document is UNKNOWN:
            continue
        if document is None:
            if value not in (None, ""):
                problems.append(f"{what} is not a JSON policy document — pass valid JSON")
            continue
        for index, statement in enumerate(statements(document)):
            label = f"{what} {statement_label(statement, index)}"
            problems += _wildcard_statement_problems(
                statement, label, read_only, boundary=_is_boundary(resource_type, props)
            )

    forbidden_managed = set(as_strings(settings.get("forbidden_aws_managed_policies")))
    arns = []
    if resource_type in AWS_POLICY_ATTACHMENTS:
        arns = as_strings(props.get("policyArn"))
    elif resource_type == AWS_ROLE:
        arns = as_strings(props.get("managedPolicyArns"))
    for arn in arns:
        managed = arn.rsplit("/", 1)[-1]
        if (
            arn.startswith("arn:")
            and ":aws:policy/" in arn
            and (managed in forbidden_managed or managed.endswith("FullAccess"))
        ):
            problems.append(
                f"attaches AWS managed policy {arn.rsplit('/', 1)[-1]} — attach a policy that "
                "names the job's actions and resources"
            )

    if resource_type.startswith("gcp:"):
        kind = resource_type.rsplit(":", 1)[-1]
        roles: list[str] = []
        if kind.endswith(("IAMMember", "IAMBinding")):
            roles = as_strings(props.get("role"))
        elif kind.endswith("IAMPolicy"):
            document = policy_document(props.get("policyData"))
            if isinstance(document, Mapping):
                roles = [
                    r
                    for b in as_list(document.get("bindings"))
                    for r in as_strings(prop_at(b, "role"))
                ]
        forbidden_roles = set(as_strings(settings.get("forbidden_gcp_roles")))
        for role in sorted(set(roles) & forbidden_roles):
            problems.append(
                f"grants the primitive role {role} — grant a predefined role such as "
                "roles/storage.objectUser on the checkpoint bucket"
            )
        # Granted on a project/folder/organization, these let the member act as every service
        # account in it; granted on one service account they are how federation works.
        if resource_type.startswith(("gcp:projects/", "gcp:folder/", "gcp:organizations/")):
            for role in sorted(set(roles) & set(GCP_IMPERSONATION_ROLES)):
                problems.append(
                    f"grants {role} on the whole {kind.split('IAM')[0].lower() or 'project'} — "
                    "grant it on the one service account (gcp.serviceaccount.IAMMember)"
                )
            for role in sorted(set(roles) & set(GCP_SECRET_READ_ROLES)):
                problems.append(
                    f"grants {role} on the whole {kind.split('IAM')[0].lower() or 'project'}, "
                    "which reads every secret in it — grant it on the one secret "
                    "(gcp.secretmanager.SecretIamMember)"
                )

    if resource_type == AZURE_ROLE_ASSIGNMENT:
        role_id = props.get("roleDefinitionId")
        forbidden_ids = {i.lower() for i in as_strings(settings.get("forbidden_azure_role_ids"))}
        if isinstance(role_id, str):
            guid = role_id.rstrip("/").rsplit("/", 1)[-1].lower()
            if guid in forbidden_ids:
                role = AZURE_PRIVILEGED_ROLES.get(guid, guid)
                problems.append(
                    f"assigns the {role} role — assign 'Storage Blob Data Contributor' scoped to "
                    "the checkpoint container"
                )
            scope = props.get("scope")
            reader = AZURE_SECRET_READ_ROLES.get(guid)
            if reader and isinstance(scope, str) and "/secrets/" not in scope.lower():
                problems.append(
                    f"assigns {reader} on {scope.rstrip('/').rsplit('/', 1)[-1] or scope!r}, "
                    "which reads every secret below it — assign it on the one secret "
                    "(…/vaults/<vault>/secrets/<name>)"
                )
    return problems
