"""spotroute's CrossGuard rules: pure functions over resource properties, plus the pack adapters.

Resource rules take `(resource_type, props, settings)` and return one-line
violation messages (empty list = compliant). `props` use the engine's camelCase wire names, as
`ResourceValidationArgs.props` and the Pulumi-mocks harness both deliver them. The one stack rule
takes the whole stack as `StackResource`s. `evaluate()` runs every rule the way the pack does
(policy config JSON in, violations with their enforcement level out), so tests and the engine call
the same functions. `build_policies()` wraps the rules for `pulumi_policy`; it is the only code that
imports it, lazily, so this module stays importable without the Policy SDK's gRPC stack.

Values still unknown during a preview arrive as `UNKNOWN` and are skipped: the engine analyzes
every resource again during `up`, with final inputs, before creating it. docs/policies.md
describes each rule and its configuration.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pulumi_policy import Policy, PolicyResource

PACK_NAME = "spotroute"
ENFORCEMENT_LEVELS = ("advisory", "mandatory", "remediate", "disabled")
DEFAULT_ENFORCEMENT = "mandatory"


class _Unknown:
    """A value the engine cannot know yet (preview of a resource whose inputs depend on outputs).

    One instance only, so copies of props (deepcopy, pickle) still compare `is UNKNOWN`.
    """

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()

# --- resource types ------------------------------------------------------------------------------

AWS_PROVIDER = "pulumi:providers:aws"
GCP_PROVIDER = "pulumi:providers:gcp"
AZURE_PROVIDER = "pulumi:providers:azure-native"

AWS_BUCKETS = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
AWS_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
AWS_BUCKET_ACLS = ("aws:s3/bucketAcl:BucketAcl", "aws:s3/bucketAclV2:BucketAclV2")
AWS_BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
AWS_VERSIONING = (
    "aws:s3/bucketVersioning:BucketVersioning",
    "aws:s3/bucketVersioningV2:BucketVersioningV2",
)
AWS_ENCRYPTION = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
AWS_POLICY_DOCUMENTS = (  # types whose `policy` input is an identity policy document
    "aws:iam/rolePolicy:RolePolicy",
    "aws:iam/policy:Policy",
    "aws:iam/userPolicy:UserPolicy",
    "aws:iam/groupPolicy:GroupPolicy",
)
AWS_ROLE = "aws:iam/role:Role"
AWS_POLICY_ATTACHMENTS = (
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    "aws:iam/policyAttachment:PolicyAttachment",
    "aws:iam/userPolicyAttachment:UserPolicyAttachment",
    "aws:iam/groupPolicyAttachment:GroupPolicyAttachment",
)
AWS_SECURITY_GROUPS = (
    "aws:ec2/securityGroup:SecurityGroup",
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
)
AWS_SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
AWS_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
AWS_FLEET = "aws:ec2/fleet:Fleet"
LOCAL_PROCESS = "pulumi-python:dynamic/spotroute:LocalProcess"  # components/local.py
AWS_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_INSTANCE = "aws:ec2/instance:Instance"
AWS_SPOT_INSTANCE_REQUEST = "aws:ec2/spotInstanceRequest:SpotInstanceRequest"
AWS_SPOT_FLEET_REQUEST = "aws:ec2/spotFleetRequest:SpotFleetRequest"
AWS_AUTOSCALING_GROUP = "aws:autoscaling/group:Group"

GCP_BUCKET = "gcp:storage/bucket:Bucket"
GCP_BUCKET_ACL = "gcp:storage/bucketACL:BucketACL"
GCP_BUCKET_ACCESS_CONTROLS = (
    "gcp:storage/bucketAccessControl:BucketAccessControl",
    "gcp:storage/defaultObjectAccessControl:DefaultObjectAccessControl",
)
GCP_BUCKET_IAM = (
    "gcp:storage/bucketIAMMember:BucketIAMMember",
    "gcp:storage/bucketIAMBinding:BucketIAMBinding",
    "gcp:storage/bucketIAMPolicy:BucketIAMPolicy",
)
GCP_FIREWALL = "gcp:compute/firewall:Firewall"
GCP_FIREWALL_POLICY_RULES = (
    "gcp:compute/firewallPolicyRule:FirewallPolicyRule",
    "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule",
    "gcp:compute/regionNetworkFirewallPolicyRule:RegionNetworkFirewallPolicyRule",
)
GCP_INSTANCE_LIKE = (  # carry `scheduling`, `labels` and `metadata`
    "gcp:compute/instanceTemplate:InstanceTemplate",
    "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate",
    "gcp:compute/instance:Instance",
)

AZURE_STORAGE_ACCOUNT = "azure-native:storage:StorageAccount"
AZURE_BLOB_CONTAINER = "azure-native:storage:BlobContainer"
AZURE_BLOB_SERVICE = "azure-native:storage:BlobServiceProperties"
AZURE_NSG = "azure-native:network:NetworkSecurityGroup"
AZURE_SECURITY_RULE = "azure-native:network:SecurityRule"
AZURE_ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"
AZURE_VMSS = "azure-native:compute:VirtualMachineScaleSet"
AZURE_VM = "azure-native:compute:VirtualMachine"

# Where each taggable type keeps its tags/labels. Types not listed cannot carry labels at all
# (AWS: bucket sub-resources, policies attached to roles, route-table associations; GCP: networks,
# subnetworks, firewalls, instance group managers, service accounts, IAM members; Azure: subnets,
# security rules, blob containers, blob service properties, role assignments).
TAGGABLE_TYPES: Mapping[str, str] = {
    **{
        token: "tags"
        for token in (
            "aws:ec2/vpc:Vpc",
            "aws:ec2/subnet:Subnet",
            "aws:ec2/securityGroup:SecurityGroup",
            "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
            "aws:ec2/internetGateway:InternetGateway",
            "aws:ec2/routeTable:RouteTable",
            "aws:ec2/vpcEndpoint:VpcEndpoint",
            "aws:ec2/natGateway:NatGateway",
            "aws:ec2/eip:Eip",
            "aws:ebs/volume:Volume",
            AWS_INSTANCE,
            AWS_LAUNCH_TEMPLATE,
            AWS_FLEET,
            AWS_SPOT_INSTANCE_REQUEST,
            AWS_SPOT_FLEET_REQUEST,
            *AWS_BUCKETS,
            AWS_ROLE,
            "aws:iam/instanceProfile:InstanceProfile",
            "aws:iam/policy:Policy",
            "aws:kms/key:Key",
        )
    },
    **{token: "labels" for token in (GCP_BUCKET, *GCP_INSTANCE_LIKE, "gcp:compute/disk:Disk")},
    **{
        token: "tags"
        for token in (
            "azure-native:resources:ResourceGroup",
            "azure-native:network:VirtualNetwork",
            AZURE_NSG,
            "azure-native:network:PublicIPAddress",
            "azure-native:network:NetworkInterface",
            AZURE_STORAGE_ACCOUNT,
            "azure-native:managedidentity:UserAssignedIdentity",
            AZURE_VMSS,
            AZURE_VM,
            "azure-native:compute:Disk",
        )
    },
}

# Azure built-in roles that let a principal change anything, or grant itself anything.
AZURE_PRIVILEGED_ROLES: Mapping[str, str] = {
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": "Owner",
    "b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
    "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9": "User Access Administrator",
}
AWS_PUBLIC_CANNED_ACLS = ("public-read", "public-read-write", "authenticated-read")
AWS_PUBLIC_GRANTEE_URIS = (
    "http://acs.amazonaws.com/groups/global/AllUsers",
    "http://acs.amazonaws.com/groups/global/AuthenticatedUsers",
)
GCP_PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
GCP_PUBLIC_PREDEFINED_ACLS = ("publicRead", "publicReadWrite", "authenticatedRead")
AZURE_INTERNET_SOURCES = ("*", "internet", "any")
TLS_VERSIONS = ("TLS1_0", "TLS1_1", "TLS1_2", "TLS1_3")
MAX_PRICE_METADATA_KEY = "spotroute-max-price"  # GCP has no spot bid field; see docs/policies.md

# --- small readers (props are plain data or UNKNOWN) ---------------------------------------------


def _get(value: Any, *path: str) -> Any:
    """Nested lookup: None when a key is missing, UNKNOWN when an enclosing value is unknown."""
    for key in path:
        if value is UNKNOWN:
            return UNKNOWN
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _list(value: Any) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return []


def _strings(value: Any) -> list[str]:
    """A string or a list of strings as a list (unknown and non-string items dropped)."""
    if isinstance(value, str):
        return [value]
    return [item for item in _list(value) if isinstance(item, str)]


def _is_true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _is_false(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.lower() == "false")


def _number(value: Any) -> float | None:
    """USD amounts arrive as numbers or decimal strings ("12.5"); None if absent or not a number."""
    if isinstance(value, bool) or value is None or value is UNKNOWN:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and value.strip():
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _money(amount: float) -> str:
    return f"${amount:.4f}".rstrip("0").rstrip(".")


def _cloud(resource_type: str) -> str:
    return resource_type.split(":", 1)[0]


# --- settings ------------------------------------------------------------------------------------

Settings = Mapping[str, Any]
ResourceCheck = Callable[[str, Mapping[str, Any], Settings], list[str]]


@dataclass(frozen=True)
class StackResource:
    """One resource as a stack rule sees it (from `StackValidationArgs` or the mocks harness)."""

    type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    parent_urn: str = ""
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Violation:
    """One finding: which policy, the one-line message, the resource URN ("" = the stack)."""

    policy: str
    message: str
    urn: str = ""
    enforcement_level: str = DEFAULT_ENFORCEMENT


StackCheck = Callable[[Sequence[StackResource], Settings], list[tuple[str, str]]]


@dataclass(frozen=True)
class Rule:
    """A policy: name, description, JSON-schema config properties (with defaults) and its check."""

    name: str
    description: str
    schema: Mapping[str, Mapping[str, Any]]
    resource_check: ResourceCheck | None = None
    stack_check: StackCheck | None = None
    requires_any: tuple[str, ...] = ()  # the rule applies once one of these settings is set

    def settings(self, config: Mapping[str, Any] | None) -> dict[str, Any]:
        """Schema defaults overlaid with the configured values (enforcementLevel dropped)."""
        merged = {key: spec["default"] for key, spec in self.schema.items() if "default" in spec}
        merged.update({k: v for k, v in (config or {}).items() if k != "enforcementLevel"})
        return merged


# --- checkpoint-storage-not-public -------------------------------------------------------------


def _policy_document(value: Any) -> Any:
    """An IAM/bucket policy document as a mapping; UNKNOWN if unknown; None if not a document."""
    if value is UNKNOWN:
        return UNKNOWN
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value.strip():
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, Mapping) else None
    return None


def _statements(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    statement = document.get("Statement")
    items = [statement] if isinstance(statement, Mapping) else _list(statement)
    return [s for s in items if isinstance(s, Mapping)]


def _statement_label(statement: Mapping[str, Any], index: int) -> str:
    sid = statement.get("Sid")
    return f"statement {sid!r}" if isinstance(sid, str) and sid else f"statement #{index + 1}"


def _anyone(principal: Any) -> bool:
    """True for Principal "*" or {"AWS": "*"} (also inside a list): anybody on the internet."""
    if principal == "*":
        return True
    return "*" in _strings(_get(principal, "AWS"))


def _public_bucket_policy(value: Any) -> list[str]:
    document = _policy_document(value)
    if document is UNKNOWN:
        return []
    if document is None:
        return ["bucket policy is not a JSON policy document — pass valid JSON (json.dumps)"]
    problems = []
    for index, statement in enumerate(_statements(document)):
        if statement.get("Effect") != "Allow" or not _anyone(statement.get("Principal")):
            continue
        if not statement.get("Condition"):
            problems.append(
                f"bucket policy {_statement_label(statement, index)} allows Principal '*' "
                "without a Condition — grant a specific principal (the job role) or add a Condition"
            )
    return problems


def _public_aws_acl(acl: Any, grants: Any) -> list[str]:
    problems = []
    if isinstance(acl, str) and acl in AWS_PUBLIC_CANNED_ACLS:
        problems.append(f"ACL {acl!r} makes objects readable by others — use acl 'private' or none")
    for grant in _list(grants):
        uri = _get(grant, "uri") or _get(grant, "grantee", "uri")
        if isinstance(uri, str) and uri in AWS_PUBLIC_GRANTEE_URIS:
            group = uri.rsplit("/", 1)[-1]
            problems.append(f"ACL grants access to the {group} group — remove that grant")
    return problems


def _gcp_public_members(props: Mapping[str, Any]) -> list[str]:
    members = _strings(props.get("member")) + _strings(props.get("members"))
    document = _policy_document(props.get("policyData"))
    if isinstance(document, Mapping):
        for binding in _list(document.get("bindings")):
            members += _strings(_get(binding, "members"))
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
        off = [f for f in flags if props.get(f) is not UNKNOWN and not _is_true(props.get(f))]
        if off:
            return [f"public access block leaves {', '.join(off)} off — set all four flags to true"]
        return []
    if resource_type in AWS_BUCKET_ACLS:
        return _public_aws_acl(props.get("acl"), _get(props, "accessControlPolicy", "grants"))
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
        if uniform is not UNKNOWN and not _is_true(uniform):
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
        for entity in _strings(props.get("roleEntities")):
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
        if allow is not UNKNOWN and not _is_false(allow):
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
        isinstance(_get(rule, "applyServerSideEncryptionByDefault", "sseAlgorithm"), str)
        for rule in _list(rules)
    )


def storage_protection_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Checkpoint storage keeps old versions and is encrypted (in transit too, on Azure)."""
    if resource_type in AWS_VERSIONING:
        status = _get(props, "versioningConfiguration", "status")
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
        if _is_false(_get(props, "versioning", "enabled")):
            problems.append("bucket disables versioning — remove versioning.enabled: false")
        inline_sse = props.get("serverSideEncryptionConfiguration")
        if isinstance(inline_sse, Mapping) and not _has_encryption_rule(
            [_get(inline_sse, "rule"), *_list(_get(inline_sse, "rules"))]
        ):
            problems.append(
                "inline serverSideEncryptionConfiguration has no default-encryption rule — add one"
            )
        return problems
    if resource_type == GCP_BUCKET:
        # Cloud Storage encrypts every object at rest with Google-managed keys; nothing to check.
        enabled = _get(props, "versioning", "enabled")
        if enabled is not UNKNOWN and not _is_true(enabled):
            return ["versioning is not enabled — set versioning: {enabled: true}"]
        return []
    if resource_type == AZURE_STORAGE_ACCOUNT:
        # Azure Storage encrypts at rest with Microsoft-managed keys and cannot turn it off.
        problems = []
        if _is_false(props.get("enableHttpsTrafficOnly")):
            problems.append("enableHttpsTrafficOnly is false — set enableHttpsTrafficOnly: true")
        tls = props.get("minimumTlsVersion")
        minimum = str(settings.get("min_tls_version", "TLS1_2"))
        if tls is not UNKNOWN and (
            tls not in TLS_VERSIONS or TLS_VERSIONS.index(tls) < TLS_VERSIONS.index(minimum)
        ):
            problems.append(f"minimumTlsVersion is {tls!r} — set minimumTlsVersion: {minimum!r}")
        return problems
    if resource_type == AZURE_BLOB_SERVICE:
        enabled = props.get("isVersioningEnabled")
        if enabled is not UNKNOWN and not _is_true(enabled):
            return ["blob versioning is off — set isVersioningEnabled: true"]
        return []
    return []


# --- no-iam-wildcards ----------------------------------------------------------------------------


def _is_read_only(action: str, prefixes: Sequence[str]) -> bool:
    """s3:GetObject, ec2:Describe* … (IAM action names are case-insensitive)."""
    verb = action.split(":", 1)[-1].lower()
    return any(verb.startswith(prefix.lower()) for prefix in prefixes)


def _wildcard_statement_problems(
    statement: Mapping[str, Any], label: str, read_only_prefixes: Sequence[str]
) -> list[str]:
    if statement.get("Effect") != "Allow":
        return []
    if "NotAction" in statement:
        return [f"{label} allows NotAction, i.e. every other action — list the actions it needs"]
    actions = _strings(statement.get("Action"))
    problems = []
    for action in actions:
        if action == "*":
            problems.append(f"{label} allows Action '*' — list the actions the job needs")
        elif action.endswith(":*"):
            problems.append(
                f"{label} allows every {action.split(':', 1)[0]} action ({action!r}) — "
                "list the actions the job needs"
            )
    whole_account = "NotResource" in statement or "*" in _strings(statement.get("Resource"))
    writes = [a for a in actions if a != "*" and not a.endswith(":*")]
    writes = [a for a in writes if not _is_read_only(a, read_only_prefixes)]
    if whole_account and writes:
        problems.append(
            f"{label} allows {', '.join(writes)} on Resource '*' — scope Resource to the "
            "checkpoint bucket/prefix ARN"
        )
    return problems


def iam_wildcard_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Identities get named actions on named resources, never `*` or primitive/owner roles."""
    read_only = _strings(settings.get("read_only_action_prefixes"))
    documents: list[tuple[str, Any]] = []
    if resource_type in AWS_POLICY_DOCUMENTS:
        documents.append(("policy", props.get("policy")))
    if resource_type == AWS_ROLE:
        for inline in _list(props.get("inlinePolicies")):
            documents.append((f"inline policy {_get(inline, 'name')!r}", _get(inline, "policy")))
    problems: list[str] = []
    for what, value in documents:
        document = _policy_document(value)
        if document is UNKNOWN:
            continue
        if document is None:
            if value not in (None, ""):
                problems.append(f"{what} is not a JSON policy document — pass valid JSON")
            continue
        for index, statement in enumerate(_statements(document)):
            label = f"{what} {_statement_label(statement, index)}"
            problems += _wildcard_statement_problems(statement, label, read_only)

    forbidden_managed = set(_strings(settings.get("forbidden_aws_managed_policies")))
    arns = []
    if resource_type in AWS_POLICY_ATTACHMENTS:
        arns = _strings(props.get("policyArn"))
    elif resource_type == AWS_ROLE:
        arns = _strings(props.get("managedPolicyArns"))
    for arn in arns:
        if (
            arn.startswith("arn:")
            and arn.rsplit("/", 1)[-1] in forbidden_managed
            and ":aws:policy/" in arn
        ):
            problems.append(
                f"attaches AWS managed policy {arn.rsplit('/', 1)[-1]} — attach a policy that "
                "names the job's actions and resources"
            )

    if resource_type.startswith("gcp:"):
        kind = resource_type.rsplit(":", 1)[-1]
        roles: list[str] = []
        if kind.endswith(("IAMMember", "IAMBinding")):
            roles = _strings(props.get("role"))
        elif kind.endswith("IAMPolicy"):
            document = _policy_document(props.get("policyData"))
            if isinstance(document, Mapping):
                roles = [
                    r for b in _list(document.get("bindings")) for r in _strings(_get(b, "role"))
                ]
        forbidden_roles = set(_strings(settings.get("forbidden_gcp_roles")))
        for role in sorted(set(roles) & forbidden_roles):
            problems.append(
                f"grants the primitive role {role} — grant a predefined role such as "
                "roles/storage.objectUser on the checkpoint bucket"
            )

    if resource_type == AZURE_ROLE_ASSIGNMENT:
        role_id = props.get("roleDefinitionId")
        forbidden_ids = {i.lower() for i in _strings(settings.get("forbidden_azure_role_ids"))}
        if isinstance(role_id, str):
            guid = role_id.rstrip("/").rsplit("/", 1)[-1].lower()
            if guid in forbidden_ids:
                role = AZURE_PRIVILEGED_ROLES.get(guid, guid)
                problems.append(
                    f"assigns the {role} role — assign 'Storage Blob Data Contributor' scoped to "
                    "the checkpoint container"
                )
    return problems


# --- no-inbound-from-internet --------------------------------------------------------------------


def _is_internet(source: str) -> bool:
    """0.0.0.0/0, ::/0 (any /0), or Azure's "*", "Internet", "Any"."""
    text = source.strip()
    if text.lower() in AZURE_INTERNET_SOURCES:
        return True
    try:
        return ipaddress.ip_network(text, strict=False).prefixlen == 0
    except ValueError:
        return False


def _ports(rule: Mapping[str, Any]) -> str:
    """ "tcp 22", "tcp 8000-8100" or "all traffic" (ports arrive as floats from the engine)."""
    protocol = rule.get("protocol")
    low, high = (_number(rule.get(key)) for key in ("fromPort", "toPort"))
    if protocol in ("-1", "all", -1, -1.0) or protocol is None:
        return "all traffic"
    if low is None:
        return str(protocol)
    if high is None or low == high:
        return f"{protocol} {low:g}"
    return f"{protocol} {low:g}-{high:g}"


def internet_ingress_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Nothing may accept connections from the whole internet (0.0.0.0/0, ::/0, "*")."""
    fix = "restrict the source to your CIDRs (spotroute:sshCidrs) or remove the rule"
    problems: list[str] = []
    if resource_type in AWS_SECURITY_GROUPS:
        for rule in _list(props.get("ingress")):
            sources = _strings(_get(rule, "cidrBlocks")) + _strings(_get(rule, "ipv6CidrBlocks"))
            for source in filter(_is_internet, sources):
                problems.append(f"ingress ({_ports(rule)}) is open to {source} — {fix}")
    elif resource_type == AWS_SECURITY_GROUP_RULE:
        if props.get("type") == "ingress":
            sources = _strings(props.get("cidrBlocks")) + _strings(props.get("ipv6CidrBlocks"))
            for source in filter(_is_internet, sources):
                problems.append(f"ingress rule ({_ports(props)}) is open to {source} — {fix}")
    elif resource_type == AWS_INGRESS_RULE:
        rule = {
            "protocol": props.get("ipProtocol"),
            "fromPort": props.get("fromPort"),
            "toPort": props.get("toPort"),
        }
        sources = _strings(props.get("cidrIpv4")) + _strings(props.get("cidrIpv6"))
        for source in filter(_is_internet, sources):
            problems.append(f"ingress rule ({_ports(rule)}) is open to {source} — {fix}")
    elif resource_type == GCP_FIREWALL:
        direction = str(props.get("direction") or "INGRESS").upper()
        if (
            direction == "INGRESS"
            and not _is_true(props.get("disabled"))
            and _list(props.get("allows"))
        ):
            ranges = props.get("sourceRanges")
            if ranges is not UNKNOWN:
                sources = _strings(ranges)
                unscoped = (
                    not sources
                    and not _list(props.get("sourceTags"))
                    and not _list(props.get("sourceServiceAccounts"))
                )
                if unscoped:
                    problems.append(
                        "allow rule has no source, which GCP treats as 0.0.0.0/0 — set "
                        "sourceRanges to your CIDRs or remove the rule"
                    )
                for source in filter(_is_internet, sources):
                    problems.append(f"allow rule is open to {source} — {fix}")
    elif resource_type in GCP_FIREWALL_POLICY_RULES:
        if str(props.get("direction", "")).upper() == "INGRESS" and props.get("action") == "allow":
            for source in filter(_is_internet, _strings(_get(props, "match", "srcIpRanges"))):
                problems.append(f"allow rule is open to {source} — {fix}")
    elif resource_type in (AZURE_NSG, AZURE_SECURITY_RULE):
        rules = _list(props.get("securityRules")) if resource_type == AZURE_NSG else [props]
        for rule in rules:
            if not isinstance(rule, Mapping):
                continue
            inbound = str(rule.get("direction", "")).lower() == "inbound"
            allow = str(rule.get("access", "")).lower() == "allow"
            sources = _strings(rule.get("sourceAddressPrefix")) + _strings(
                rule.get("sourceAddressPrefixes")
            )
            if inbound and allow:
                name = rule.get("name") or "inbound rule"
                for source in filter(_is_internet, sources):
                    problems.append(
                        f"security rule {name!r} allows inbound from {source!r} — {fix}"
                    )
    return problems


# --- required-labels -----------------------------------------------------------------------------


def _label_maps(resource_type: str, props: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(where, labels) pairs a taggable resource must label; AWS tags merge `tags` and `tagsAll`."""
    prop = TAGGABLE_TYPES.get(resource_type)
    if prop is None:
        return []
    labels = props.get(prop)
    if prop == "tags" and _cloud(resource_type) == "aws":
        every = props.get("tagsAll")
        if isinstance(every, Mapping):
            labels = {**every, **(labels if isinstance(labels, Mapping) else {})}
    maps = [(prop, labels)]
    if resource_type == AWS_LAUNCH_TEMPLATE:
        for spec in _list(props.get("tagSpecifications")):
            maps.append((f"tagSpecifications[{_get(spec, 'resourceType')}]", _get(spec, "tags")))
    return maps


def required_label_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Every taggable resource carries the required labels (spotroute-job, team, managed-by)."""
    required = _strings(settings.get("labels"))
    problems = []
    for where, labels in _label_maps(resource_type, props):
        if labels is UNKNOWN:
            continue
        present = labels if isinstance(labels, Mapping) else {}
        missing = [k for k in required if not isinstance(present.get(k), str) or not present.get(k)]
        if missing:
            problems.append(
                f"{where} lacks {', '.join(missing)} — label it with standard_labels() and set "
                "team in spotroute:labels"
            )
    if resource_type == AWS_LAUNCH_TEMPLATE:
        kinds = {_get(spec, "resourceType") for spec in _list(props.get("tagSpecifications"))}
        if UNKNOWN not in kinds and "instance" not in kinds:
            problems.append(
                "tagSpecifications has no 'instance' entry, so instances start untagged — add one"
            )
    return problems


# --- spot-requires-checkpointing -----------------------------------------------------------------


def spot_market(resource_type: str, props: Mapping[str, Any]) -> bool:
    """True when this resource requests spot (or preemptible) capacity."""
    if resource_type in (AWS_SPOT_INSTANCE_REQUEST, AWS_SPOT_FLEET_REQUEST):
        return True
    if resource_type == AWS_FLEET:
        spec = props.get("targetCapacitySpecification")
        return bool(_get(spec, "defaultTargetCapacityType") == "spot") or (
            (_number(_get(spec, "spotTargetCapacity")) or 0) > 0
        )
    if resource_type in (AWS_LAUNCH_TEMPLATE, AWS_INSTANCE):
        return bool(_get(props, "instanceMarketOptions", "marketType") == "spot")
    if resource_type == AWS_AUTOSCALING_GROUP:
        distribution = _get(props, "mixedInstancesPolicy", "instancesDistribution")
        if not isinstance(distribution, Mapping):
            return False
        on_demand_pct = _number(distribution.get("onDemandPercentageAboveBaseCapacity"))
        return on_demand_pct is not None and on_demand_pct < 100
    if resource_type == LOCAL_PROCESS:
        return props.get("market") == "spot"
    if resource_type in GCP_INSTANCE_LIKE:
        scheduling = props.get("scheduling")
        return str(_get(scheduling, "provisioningModel") or "").upper() == "SPOT" or _is_true(
            _get(scheduling, "preemptible")
        )
    if resource_type == AZURE_VMSS:
        return str(_get(props, "virtualMachineProfile", "priority") or "").lower() in (
            "spot",
            "low",
        )
    if resource_type == AZURE_VM:
        return str(props.get("priority") or "").lower() in ("spot", "low")
    return False


def spot_checkpointing_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Spot capacity only for jobs that declare checkpointing (the marker label on the group)."""
    if not spot_market(resource_type, props):
        return []
    marker = str(settings.get("marker_label", "spotroute-checkpointing"))
    maps = _label_maps(resource_type, props) or [("tags", props.get("tags"))]
    for _, labels in maps:
        if labels is UNKNOWN:
            return []
        if isinstance(labels, Mapping) and _is_true(labels.get(marker)):
            return []
    return [
        f"requests spot capacity but does not declare checkpointing (label {marker}=true) — set "
        "spotroute:checkpointing: true (job.yaml checkpoint:) or use market on-demand"
    ]


# --- price-within-budget -------------------------------------------------------------------------


@dataclass(frozen=True)
class PriceCap:
    """The most one GPU group may pay: USD per instance-hour and for the whole group per hour."""

    per_instance: float | None
    total: float | None
    uncapped: bool = False  # spot that may pay up to the on-demand price (no max price set)


def price_cap(resource_type: str, props: Mapping[str, Any]) -> PriceCap | None:
    """The declared price cap of a GPU group resource; None if the type carries no price."""
    spot = spot_market(resource_type, props)
    if resource_type == AWS_FLEET:
        caps = [
            _number(_get(override, "maxPrice"))
            for config in _list(props.get("launchTemplateConfigs"))
            for override in _list(_get(config, "overrides"))
        ]
        options = props.get("spotOptions" if spot else "onDemandOptions")
        total = _number(_get(options, "maxTotalPrice"))
        count = _number(_get(props, "targetCapacitySpecification", "totalTargetCapacity"))
        known = [c for c in caps if c is not None]
        per_instance = max(known) if known and None not in caps else None
        if per_instance is None and total is not None and count:
            per_instance = total / count
        if total is None and per_instance is not None and count:
            total = per_instance * count
        return PriceCap(per_instance, total, uncapped=spot and per_instance is None)
    if resource_type in (AWS_LAUNCH_TEMPLATE, AWS_INSTANCE):
        if not spot:
            return None
        cap = _number(_get(props, "instanceMarketOptions", "spotOptions", "maxPrice"))
        return PriceCap(cap, cap, uncapped=cap is None)
    if resource_type == AWS_SPOT_INSTANCE_REQUEST:
        cap = _number(props.get("spotPrice"))
        return PriceCap(cap, cap, uncapped=cap is None)
    if resource_type == AWS_SPOT_FLEET_REQUEST:
        cap = _number(props.get("spotPrice"))
        count = _number(props.get("targetCapacity"))
        return PriceCap(
            cap, cap * count if cap is not None and count else None, uncapped=cap is None
        )
    if resource_type == AWS_AUTOSCALING_GROUP:
        if not spot:
            return None
        cap = _number(_get(props, "mixedInstancesPolicy", "instancesDistribution", "spotMaxPrice"))
        count = _number(props.get("maxSize"))
        return PriceCap(
            cap, cap * count if cap is not None and count else None, uncapped=cap is None
        )
    if resource_type in (AZURE_VMSS, AZURE_VM):
        if not spot:
            return None
        profile = props.get("virtualMachineProfile") if resource_type == AZURE_VMSS else props
        cap = _number(_get(profile, "billingProfile", "maxPrice"))
        if cap is not None and cap < 0:  # -1: pay up to the pay-as-you-go price
            cap = None
        count = _number(_get(props, "sku", "capacity")) if resource_type == AZURE_VMSS else 1.0
        return PriceCap(
            cap, cap * count if cap is not None and count else None, uncapped=cap is None
        )
    if resource_type == LOCAL_PROCESS:
        cap = _number(props.get("max_price_per_hour"))
        return PriceCap(cap, cap) if cap is not None else None
    if resource_type in GCP_INSTANCE_LIKE:
        # GCP Spot VMs have no bid; the group's cap is only visible if the component records it.
        cap = _number(_get(props, "metadata", MAX_PRICE_METADATA_KEY))
        return PriceCap(cap, None) if cap is not None else None
    return None


def budget_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """A GPU group's declared price cap stays within the configured budget (USD per hour)."""
    budget = _number(settings.get("max_price_per_hour"))
    total_budget = _number(settings.get("max_total_price_per_hour"))
    if budget is None and total_budget is None:
        return []
    cap = price_cap(resource_type, props)
    if cap is None:
        return []
    if cap.uncapped:
        return [
            "spot request sets no max price, so it may pay up to the on-demand price — set "
            "spotroute:maxPrice within the budget"
        ]
    problems = []
    if budget is not None and cap.per_instance is not None and cap.per_instance > budget + 1e-9:
        problems.append(
            f"max price {_money(cap.per_instance)}/instance-hour exceeds the budget "
            f"{_money(budget)} (max_price_per_hour) — lower spotroute:maxPrice or pick a "
            "cheaper placement"
        )
    if total_budget is not None and cap.total is not None and cap.total > total_budget + 1e-9:
        problems.append(
            f"group may spend {_money(cap.total)}/hour, over the budget {_money(total_budget)} "
            "(max_total_price_per_hour) — use fewer nodes or a lower spotroute:maxPrice"
        )
    return problems


# --- regions-allowed -----------------------------------------------------------------------------


def _zone_region(zone: str) -> str:
    """us-central1-a → us-central1 (GCP zones are the region plus one dash-separated suffix)."""
    return zone.rsplit("-", 1)[0] if zone.count("-") >= 2 else zone


def resource_regions(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    """Regions a resource (or a provider) places things in, lowercase; [] if it names none."""
    cloud = _cloud(resource_type)
    found: list[Any] = []
    if resource_type in (AWS_PROVIDER, GCP_PROVIDER) or cloud in ("aws", "gcp"):
        found.append(props.get("region"))
    if resource_type == GCP_PROVIDER or cloud == "gcp":
        zone = props.get("zone")
        found.append(_zone_region(zone) if isinstance(zone, str) else None)
    if resource_type == AZURE_PROVIDER or cloud in ("gcp", "azure-native"):
        found.append(props.get("location"))
    regions = []
    for value in found:
        if isinstance(value, str) and value.strip() and value.lower() != "global":
            region = value.strip().lower()
            if region not in regions:
                regions.append(region)
    return regions


def region_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Resources only in regions the org allows (policy config allowed_regions, globs)."""
    allowed = [g.lower() for g in _strings(settings.get("allowed_regions"))]
    if not allowed:
        return []
    return [
        f"region {region} is not allowed (allowed_regions: {', '.join(allowed)}) — plan the job "
        "into an allowed region or add this one to the policy config"
        for region in resource_regions(resource_type, props)
        if not any(fnmatch.fnmatchcase(region, glob) for glob in allowed)
    ]


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
        return _is_true(_get(storage.props, "versioning", "enabled"))
    if what.startswith("server-side encryption"):
        inline = storage.props.get("serverSideEncryptionConfiguration")
        return isinstance(inline, Mapping) and _has_encryption_rule(
            [_get(inline, "rule"), *_list(_get(inline, "rules"))]
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
        "No security group, firewall or NSG rule accepts inbound traffic from 0.0.0.0/0, ::/0 or "
        "'*'/'Internet'.",
        {},
        resource_check=internet_ingress_violations,
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


def _configured(rule: Rule, settings: Settings) -> bool:
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
        if level == "disabled" or not _configured(rule, settings):
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
            if not _configured(rule, settings):
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

    policies: list[Policy] = []
    for rule in RULES:
        schema = PolicyConfigSchema(properties={k: dict(v) for k, v in rule.schema.items()})
        if rule.resource_check is not None:
            policies.append(
                ResourceValidationPolicy(
                    name=rule.name,
                    description=rule.description,
                    validate=resource_validator(rule),
                    enforcement_level=EnforcementLevel.MANDATORY,
                    config_schema=schema,
                )
            )
        else:
            policies.append(
                StackValidationPolicy(
                    name=rule.name,
                    description=rule.description,
                    validate=stack_validator(rule),
                    enforcement_level=EnforcementLevel.MANDATORY,
                    config_schema=schema,
                )
            )
    return policies
