"""The CrossGuard rules one resource at a time: what passes and what is reported, per rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.rules import RULES, RULES_BY_NAME, UNKNOWN

NOT_PUBLIC = "checkpoint-storage-not-public"
PROTECTED = "checkpoint-storage-encrypted-versioned"
NO_WILDCARDS = "no-iam-wildcards"
NO_INBOUND = "no-inbound-from-internet"
LABELLED = "required-labels"
SPOT_CHECKPOINTS = "spot-requires-checkpointing"
BUDGETED = "price-within-budget"
REGIONED = "regions-allowed"
PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
S3_BUCKET = "aws:s3/bucket:Bucket"
S3_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
SG = "aws:ec2/securityGroup:SecurityGroup"
FLEET = "aws:ec2/fleet:Fleet"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
GCS_BUCKET = "gcp:storage/bucket:Bucket"
GCE_TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
FIREWALL = "gcp:compute/firewall:Firewall"
STORAGE_ACCOUNT = "azure-native:storage:StorageAccount"
NSG = "azure-native:network:NetworkSecurityGroup"
VMSS = "azure-native:compute:VirtualMachineScaleSet"
ROLE_ASSIGNMENT = "azure-native:authorization:RoleAssignment"

LABELS = {"spotroute-job": "llm", "team": "ml", "managed-by": "spotroute"}
SPOT_LABELS = {**LABELS, "spotroute-checkpointing": "true"}
BLOCK_ALL = {
    "blockPublicAcls": True,
    "blockPublicPolicy": True,
    "ignorePublicAcls": True,
    "restrictPublicBuckets": True,
}
OWNER = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
CONTRIBUTOR = "b24988ac-6180-42a0-ab88-20f7382dd24c"
USER_ACCESS_ADMIN = "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9"
BLOB_DATA_CONTRIBUTOR = "ba92f5b4-2d11-453d-a403-e96b0029c9fe"
BUDGET = {"max_price_per_hour": 20.0}
REGIONS = {"allowed_regions": ["us-*", "europe-west4"]}


def doc(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def allow(action: Any, resource: Any = "arn:aws:s3:::ckpt/llm/*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def role_assignment(guid: str) -> dict[str, Any]:
    sub = "/subscriptions/00000000-0000-0000-0000-000000000000"
    return {
        "principalId": "11111111-1111-1111-1111-111111111111",
        "roleDefinitionId": f"{sub}/providers/Microsoft.Authorization/roleDefinitions/{guid}",
        "scope": f"{sub}/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/acct",
    }


def fleet(market: str, max_price: str | None, count: float = 2.0, **extra: Any) -> dict[str, Any]:
    override: dict[str, Any] = {"instanceType": "p4d.24xlarge", "subnetId": "subnet-1"}
    if max_price is not None:
        override["maxPrice"] = max_price
    return {
        "type": "instant",
        "targetCapacitySpecification": {
            "defaultTargetCapacityType": market,
            "totalTargetCapacity": count,
        },
        "launchTemplateConfigs": [{"overrides": [override]}],
        "tags": SPOT_LABELS if market == "spot" else LABELS,
        **extra,
    }


def vmss(
    priority: str, max_price: float | None = None, tags: dict[str, str] = SPOT_LABELS
) -> dict[str, Any]:
    profile: dict[str, Any] = {"priority": priority}
    if max_price is not None:
        profile["billingProfile"] = {"maxPrice": max_price}
    return {
        "location": "eastus",
        "sku": {"name": "Standard_ND96asr_v4", "capacity": 2},
        "virtualMachineProfile": profile,
        "tags": tags,
    }


def check(
    policy: str, resource_type: str, props: dict[str, Any], config: dict[str, Any] | None = None
) -> list[str]:
    rule = RULES_BY_NAME[policy]
    assert rule.resource_check is not None
    return rule.resource_check(resource_type, props, rule.settings(config))


# (policy, resource type, props, policy config)
COMPLIANT = [
    # checkpoint-storage-not-public
    pytest.param(NOT_PUBLIC, PAB, BLOCK_ALL, None, id="s3-public-access-fully-blocked"),
    pytest.param(
        NOT_PUBLIC, "aws:s3/bucketAclV2:BucketAclV2", {"acl": "private"}, None, id="s3-private-acl"
    ),
    pytest.param(
        NOT_PUBLIC,
        S3_POLICY,
        {
            "policy": doc(
                {
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": "*",
                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                }
            )
        },
        None,
        id="s3-tls-only-deny-for-everyone",
    ),
    pytest.param(
        NOT_PUBLIC,
        S3_POLICY,
        {
            "policy": doc(
                allow(
                    "s3:GetObject",
                    Principal="*",
                    Condition={"StringEquals": {"aws:PrincipalAccount": "123456789012"}},
                )
            )
        },
        None,
        id="s3-allow-everyone-narrowed-by-condition",
    ),
    pytest.param(
        NOT_PUBLIC,
        GCS_BUCKET,
        {"publicAccessPrevention": "enforced", "uniformBucketLevelAccess": True},
        None,
        id="gcs-prevention-enforced-uniform-access",
    ),
    pytest.param(
        NOT_PUBLIC,
        "gcp:storage/bucketIAMMember:BucketIAMMember",
        {
            "member": "serviceAccount:job@p.iam.gserviceaccount.com",
            "role": "roles/storage.objectUser",
        },
        None,
        id="gcs-iam-for-service-account",
    ),
    pytest.param(
        NOT_PUBLIC,
        STORAGE_ACCOUNT,
        {"allowBlobPublicAccess": False},
        None,
        id="azure-blob-public-access-off",
    ),
    pytest.param(
        NOT_PUBLIC,
        "azure-native:storage:BlobContainer",
        {"publicAccess": "None"},
        None,
        id="azure-private-container",
    ),
    # checkpoint-storage-encrypted-versioned
    pytest.param(
        PROTECTED,
        "aws:s3/bucketVersioning:BucketVersioning",
        {"bucket": "b", "versioningConfiguration": {"status": "Enabled"}},
        None,
        id="s3-versioning-enabled",
    ),
    pytest.param(
        PROTECTED,
        "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
        {
            "bucket": "b",
            "rules": [
                {
                    "applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"},
                    "bucketKeyEnabled": True,
                }
            ],
        },
        None,
        id="s3-kms-default-encryption",
    ),
    pytest.param(
        PROTECTED, GCS_BUCKET, {"versioning": {"enabled": True}}, None, id="gcs-versioning-enabled"
    ),
    pytest.param(
        PROTECTED,
        STORAGE_ACCOUNT,
        {"enableHttpsTrafficOnly": True, "minimumTlsVersion": "TLS1_2"},
        None,
        id="azure-https-only-tls12",
    ),
    pytest.param(
        PROTECTED,
        "azure-native:storage:BlobServiceProperties",
        {"isVersioningEnabled": True},
        None,
        id="azure-blob-versioning-on",
    ),
    # no-iam-wildcards
    pytest.param(
        NO_WILDCARDS,
        ROLE_POLICY,
        {
            "policy": doc(
                allow(["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]),
                allow("s3:ListBucket", "arn:aws:s3:::ckpt"),
            )
        },
        None,
        id="aws-actions-scoped-to-checkpoint-prefix",
    ),
    pytest.param(
        NO_WILDCARDS,
        ROLE_POLICY,
        {"policy": {"Statement": [allow(["ec2:Describe*", "s3:listallmybuckets"], "*")]}},
        None,
        id="aws-read-only-actions-on-every-resource",
    ),
    pytest.param(
        NO_WILDCARDS,
        ROLE_POLICY,
        {"policy": doc({"Effect": "Deny", "Action": "*", "Resource": "*"})},
        None,
        id="aws-deny-everything",
    ),
    pytest.param(
        NO_WILDCARDS,
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
        {"policyArn": "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"},
        None,
        id="aws-narrow-managed-policy",
    ),
    pytest.param(
        NO_WILDCARDS,
        "gcp:projects/iAMMember:IAMMember",
        {
            "role": "roles/storage.objectUser",
            "member": "serviceAccount:j@p.iam.gserviceaccount.com",
        },
        None,
        id="gcp-predefined-role",
    ),
    pytest.param(
        NO_WILDCARDS,
        ROLE_ASSIGNMENT,
        role_assignment(BLOB_DATA_CONTRIBUTOR),
        None,
        id="azure-blob-data-contributor",
    ),
    # no-inbound-from-internet
    pytest.param(
        NO_INBOUND,
        SG,
        {
            "ingress": [
                {"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["203.0.113.0/24"]}
            ],
            "egress": [{"protocol": "-1", "cidrBlocks": ["0.0.0.0/0"]}],
        },
        None,
        id="aws-ssh-from-office-egress-anywhere",
    ),
    pytest.param(
        NO_INBOUND,
        "aws:ec2/securityGroupRule:SecurityGroupRule",
        {"type": "egress", "cidrBlocks": ["0.0.0.0/0"]},
        None,
        id="aws-egress-rule-to-internet",
    ),
    pytest.param(
        NO_INBOUND,
        FIREWALL,
        {"direction": "INGRESS", "sourceRanges": ["0.0.0.0/0"], "denies": [{"protocol": "all"}]},
        None,
        id="gcp-deny-all-from-internet",
    ),
    pytest.param(
        NO_INBOUND,
        FIREWALL,
        {"sourceRanges": ["203.0.113.0/24"], "allows": [{"protocol": "tcp", "ports": ["22"]}]},
        None,
        id="gcp-ssh-from-office",
    ),
    pytest.param(
        NO_INBOUND,
        FIREWALL,
        {
            "direction": "EGRESS",
            "destinationRanges": ["0.0.0.0/0"],
            "allows": [{"protocol": "all"}],
        },
        None,
        id="gcp-egress-to-internet",
    ),
    pytest.param(
        NO_INBOUND,
        NSG,
        {
            "securityRules": [
                {
                    "name": "deny-internet",
                    "direction": "Inbound",
                    "access": "Deny",
                    "sourceAddressPrefix": "Internet",
                },
                {
                    "name": "out",
                    "direction": "Outbound",
                    "access": "Allow",
                    "sourceAddressPrefix": "*",
                },
            ]
        },
        None,
        id="azure-deny-internet-allow-outbound",
    ),
    # required-labels
    pytest.param(
        LABELLED,
        "aws:ec2/vpc:Vpc",
        {"tags": {**LABELS, "Name": "llm-vpc"}},
        None,
        id="aws-vpc-tagged",
    ),
    pytest.param(
        LABELLED,
        TEMPLATE,
        {
            "tags": LABELS,
            "tagSpecifications": [
                {"resourceType": "instance", "tags": LABELS},
                {"resourceType": "volume", "tags": LABELS},
            ],
        },
        None,
        id="aws-launch-template-tags-its-instances",
    ),
    pytest.param(
        LABELLED,
        ROLE_POLICY,
        {"policy": doc(allow("s3:GetObject"))},
        None,
        id="aws-untaggable-type-needs-no-tags",
    ),
    pytest.param(
        LABELLED, GCE_TEMPLATE, {"labels": LABELS}, None, id="gcp-instance-template-labelled"
    ),
    pytest.param(
        LABELLED,
        "gcp:compute/instanceGroupManager:InstanceGroupManager",
        {"targetSize": 2},
        None,
        id="gcp-instance-group-cannot-carry-labels",
    ),
    pytest.param(LABELLED, VMSS, vmss("Regular", tags=LABELS), None, id="azure-scale-set-tagged"),
    # spot-requires-checkpointing
    pytest.param(
        SPOT_CHECKPOINTS,
        FLEET,
        fleet("spot", "20"),
        None,
        id="aws-spot-fleet-declares-checkpointing",
    ),
    pytest.param(
        SPOT_CHECKPOINTS,
        FLEET,
        fleet("on-demand", None),
        None,
        id="aws-on-demand-fleet-needs-no-marker",
    ),
    pytest.param(
        SPOT_CHECKPOINTS,
        GCE_TEMPLATE,
        {"scheduling": {"provisioningModel": "SPOT"}, "labels": SPOT_LABELS},
        None,
        id="gcp-spot-template-declares-checkpointing",
    ),
    pytest.param(
        SPOT_CHECKPOINTS,
        VMSS,
        vmss("Spot", 3.5),
        None,
        id="azure-spot-scale-set-declares-checkpointing",
    ),
    # price-within-budget
    pytest.param(BUDGETED, FLEET, fleet("spot", "20"), BUDGET, id="aws-spot-max-price-at-budget"),
    pytest.param(
        BUDGETED,
        FLEET,
        fleet("on-demand", None, onDemandOptions={"maxTotalPrice": "40"}),
        BUDGET,
        id="aws-on-demand-total-within-budget",
    ),
    pytest.param(BUDGETED, FLEET, fleet("spot", "99"), None, id="aws-no-budget-configured"),
    pytest.param(
        BUDGETED, VMSS, vmss("Spot", 3.5), BUDGET, id="azure-spot-max-price-within-budget"
    ),
    pytest.param(BUDGETED, VMSS, vmss("Regular"), BUDGET, id="azure-pay-as-you-go-has-no-bid"),
    pytest.param(
        BUDGETED,
        GCE_TEMPLATE,
        {"scheduling": {"provisioningModel": "SPOT"}},
        BUDGET,
        id="gcp-spot-without-recorded-cap",
    ),
    # regions-allowed
    pytest.param(
        REGIONED, "pulumi:providers:aws", {"region": "us-east-1"}, REGIONS, id="aws-provider-in-us"
    ),
    pytest.param(
        REGIONED,
        "pulumi:providers:gcp",
        {"region": "europe-west4", "zone": "europe-west4-a"},
        REGIONS,
        id="gcp-provider-in-allowed-region",
    ),
    pytest.param(
        REGIONED,
        GCS_BUCKET,
        {"location": "US-CENTRAL1"},
        REGIONS,
        id="gcs-location-matched-case-insensitively",
    ),
    pytest.param(
        REGIONED,
        "pulumi:providers:aws",
        {"region": "ap-south-1"},
        None,
        id="no-region-list-configured",
    ),
    pytest.param(
        REGIONED,
        "azure-native:network:PrivateDnsZone",
        {"location": "global"},
        REGIONS,
        id="azure-global-resource",
    ),
    # no-long-lived-keys (more in test_policy_gaps.py)
    pytest.param(
        "no-long-lived-keys",
        STORAGE_ACCOUNT,
        {"allowSharedKeyAccess": False},
        None,
        id="azure-storage-without-shared-keys",
    ),
    # node-disks-encrypted-imdsv2
    pytest.param(
        "node-disks-encrypted-imdsv2",
        TEMPLATE,
        {
            "blockDeviceMappings": [{"deviceName": "/dev/sda1", "ebs": {"encrypted": "true"}}],
            "metadataOptions": {"httpTokens": "required"},
        },
        None,
        id="aws-template-encrypted-imdsv2",
    ),
]
# (policy, resource type, props, policy config, words the message must contain)
VIOLATING = [
    # checkpoint-storage-not-public
    pytest.param(
        NOT_PUBLIC,
        PAB,
        {**BLOCK_ALL, "blockPublicPolicy": False},
        None,
        "blockPublicPolicy",
        id="s3-public-policy-not-blocked",
    ),
    pytest.param(
        NOT_PUBLIC,
        "aws:s3/bucketAclV2:BucketAclV2",
        {"acl": "public-read"},
        None,
        "public-read",
        id="s3-public-read-acl",
    ),
    pytest.param(
        NOT_PUBLIC,
        "aws:s3/bucketAcl:BucketAcl",
        {
            "accessControlPolicy": {
                "grants": [
                    {
                        "grantee": {
                            "type": "Group",
                            "uri": "http://acs.amazonaws.com/groups/global/AllUsers",
                        },
                        "permission": "READ",
                    }
                ]
            }
        },
        None,
        "AllUsers",
        id="s3-acl-grant-to-all-users",
    ),
    pytest.param(
        NOT_PUBLIC,
        S3_BUCKET,
        {"acl": "public-read-write"},
        None,
        "public-read-write",
        id="s3-bucket-inline-public-acl",
    ),
    pytest.param(
        NOT_PUBLIC,
        S3_POLICY,
        {"policy": doc(allow("s3:GetObject", Principal="*", Sid="Anyone"))},
        None,
        "Principal '*'",
        id="s3-policy-allows-everyone",
    ),
    pytest.param(
        NOT_PUBLIC,
        S3_POLICY,
        {"policy": doc(allow("s3:GetObject", Principal={"AWS": ["*"]}))},
        None,
        "Principal '*'",
        id="s3-policy-allows-any-aws-principal",
    ),
    pytest.param(
        NOT_PUBLIC,
        GCS_BUCKET,
        {"publicAccessPrevention": "inherited", "uniformBucketLevelAccess": True},
        None,
        "publicAccessPrevention",
        id="gcs-prevention-inherited",
    ),
    pytest.param(
        NOT_PUBLIC,
        GCS_BUCKET,
        {"publicAccessPrevention": "enforced"},
        None,
        "uniformBucketLevelAccess",
        id="gcs-fine-grained-acls",
    ),
    pytest.param(
        NOT_PUBLIC,
        "gcp:storage/bucketIAMMember:BucketIAMMember",
        {"member": "allUsers", "role": "roles/storage.objectViewer"},
        None,
        "allUsers",
        id="gcs-iam-for-all-users",
    ),
    pytest.param(
        NOT_PUBLIC,
        "gcp:storage/bucketIAMBinding:BucketIAMBinding",
        {"members": ["allAuthenticatedUsers"], "role": "roles/storage.objectViewer"},
        None,
        "allAuthenticatedUsers",
        id="gcs-iam-binding-for-any-google-account",
    ),
    pytest.param(
        NOT_PUBLIC,
        "gcp:storage/bucketACL:BucketACL",
        {"predefinedAcl": "publicRead"},
        None,
        "publicRead",
        id="gcs-public-predefined-acl",
    ),
    pytest.param(
        NOT_PUBLIC,
        STORAGE_ACCOUNT,
        {"allowBlobPublicAccess": True},
        None,
        "allowBlobPublicAccess",
        id="azure-blob-public-access-on",
    ),
    pytest.param(
        NOT_PUBLIC,
        STORAGE_ACCOUNT,
        {},
        None,
        "allowBlobPublicAccess",
        id="azure-blob-public-access-left-to-default",
    ),
    pytest.param(
        NOT_PUBLIC,
        "azure-native:storage:BlobContainer",
        {"publicAccess": "Blob"},
        None,
        "publicAccess",
        id="azure-anonymous-blob-read",
    ),
    # checkpoint-storage-encrypted-versioned
    pytest.param(
        PROTECTED,
        "aws:s3/bucketVersioningV2:BucketVersioningV2",
        {"versioningConfiguration": {"status": "Suspended"}},
        None,
        "Suspended",
        id="s3-versioning-suspended",
    ),
    pytest.param(
        PROTECTED,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        {"bucket": "b", "rules": []},
        None,
        "no default-encryption rule",
        id="s3-encryption-config-without-rule",
    ),
    pytest.param(
        PROTECTED,
        S3_BUCKET,
        {"versioning": {"enabled": False}},
        None,
        "versioning",
        id="s3-bucket-disables-versioning-inline",
    ),
    pytest.param(
        PROTECTED,
        GCS_BUCKET,
        {"publicAccessPrevention": "enforced"},
        None,
        "versioning",
        id="gcs-unversioned",
    ),
    pytest.param(
        PROTECTED,
        STORAGE_ACCOUNT,
        {"enableHttpsTrafficOnly": False, "minimumTlsVersion": "TLS1_2"},
        None,
        "enableHttpsTrafficOnly",
        id="azure-plain-http-allowed",
    ),
    pytest.param(
        PROTECTED,
        STORAGE_ACCOUNT,
        {"minimumTlsVersion": "TLS1_0"},
        None,
        "TLS1_0",
        id="azure-tls10-allowed",
    ),
    pytest.param(
        PROTECTED, STORAGE_ACCOUNT, {}, None, "minimumTlsVersion", id="azure-tls-left-to-default"
    ),
    pytest.param(
        PROTECTED,
        "azure-native:storage:BlobServiceProperties",
        {"isVersioningEnabled": False},
        None,
        "isVersioningEnabled",
        id="azure-blob-versioning-off",
    ),
    # no-iam-wildcards
    pytest.param(
        NO_WILDCARDS,
        ROLE_POLICY,
        {"policy": doc(allow("*", "*"))},
        None,
        "Action '*'",
        id="aws-admin-statement",
    ),
    pytest.param(
        NO_WILDCARDS,
        ROLE_POLICY,
        {"policy": doc(allow("s3:*", "arn:aws:s3:::ckpt/*", Sid="AllS3"))},
        None,
        "'AllS3' allows every s3 action",
        id="aws-whole-service",
    ),
    pytest.param(
        NO_WILDCARDS,
        "aws:iam/policy:Policy",
        {"policy": doc(allow(["s3:GetObject", "s3:PutObject"], "*"))},
        None,
        "s3:PutObject on Resource '*'",
        id="aws-write-on-every-resource",
    ),
    pytest.param(
        NO_WILDCARDS,
        ROLE_POLICY,
        {"policy": doc({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"})},
        None,
        "NotAction",
        id="aws-allow-not-action",
    ),
    pytest.param(
        NO_WILDCARDS,
        "aws:iam/role:Role",
        {"inlinePolicies": [{"name": "inline", "policy": doc(allow("*"))}]},
        None,
        "inline policy 'inline'",
        id="aws-role-inline-wildcard",
    ),
    pytest.param(
        NO_WILDCARDS,
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
        {"policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"},
        None,
        "AdministratorAccess",
        id="aws-administrator-access-attached",
    ),
    pytest.param(
        NO_WILDCARDS,
        "gcp:projects/iAMMember:IAMMember",
        {"role": "roles/editor", "member": "serviceAccount:j@p.iam.gserviceaccount.com"},
        None,
        "roles/editor",
        id="gcp-project-editor",
    ),
    pytest.param(
        NO_WILDCARDS,
        "gcp:storage/bucketIAMBinding:BucketIAMBinding",
        {"role": "roles/owner", "members": ["serviceAccount:j@p.iam.gserviceaccount.com"]},
        None,
        "roles/owner",
        id="gcp-bucket-owner",
    ),
    pytest.param(
        NO_WILDCARDS,
        "gcp:projects/iAMPolicy:IAMPolicy",
        {
            "policyData": json.dumps(
                {"bindings": [{"role": "roles/viewer", "members": ["user:a@b.c"]}]}
            )
        },
        None,
        "roles/viewer",
        id="gcp-policy-with-viewer",
    ),
    pytest.param(
        NO_WILDCARDS, ROLE_ASSIGNMENT, role_assignment(OWNER), None, "Owner", id="azure-owner"
    ),
    pytest.param(
        NO_WILDCARDS,
        ROLE_ASSIGNMENT,
        role_assignment(CONTRIBUTOR.upper()),
        None,
        "Contributor",
        id="azure-contributor-uppercase-guid",
    ),
    pytest.param(
        NO_WILDCARDS,
        ROLE_ASSIGNMENT,
        role_assignment(USER_ACCESS_ADMIN),
        None,
        "User Access Administrator",
        id="azure-user-access-administrator",
    ),
    # no-inbound-from-internet
    pytest.param(
        NO_INBOUND,
        SG,
        {
            "ingress": [
                {"protocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "cidrBlocks": ["0.0.0.0/0"]}
            ]
        },
        None,
        "tcp 22) is open to 0.0.0.0/0",
        id="aws-ssh-from-anywhere",
    ),
    pytest.param(
        NO_INBOUND,
        "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
        {"ingress": [{"protocol": "-1", "ipv6CidrBlocks": ["::/0"]}]},
        None,
        "all traffic) is open to ::/0",
        id="aws-default-group-open-on-ipv6",
    ),
    pytest.param(
        NO_INBOUND,
        "aws:ec2/securityGroupRule:SecurityGroupRule",
        {
            "type": "ingress",
            "protocol": "tcp",
            "fromPort": 8000,
            "toPort": 8100,
            "cidrBlocks": ["0.0.0.0/0"],
        },
        None,
        "tcp 8000-8100",
        id="aws-ingress-rule-from-anywhere",
    ),
    pytest.param(
        NO_INBOUND,
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        {"ipProtocol": "tcp", "fromPort": 443, "toPort": 443, "cidrIpv4": "0.0.0.0/0"},
        None,
        "0.0.0.0/0",
        id="aws-vpc-ingress-rule-from-anywhere",
    ),
    pytest.param(
        NO_INBOUND,
        FIREWALL,
        {
            "direction": "INGRESS",
            "sourceRanges": ["0.0.0.0/0"],
            "allows": [{"protocol": "tcp", "ports": ["22"]}],
        },
        None,
        "0.0.0.0/0",
        id="gcp-allow-from-anywhere",
    ),
    pytest.param(
        NO_INBOUND,
        FIREWALL,
        {"allows": [{"protocol": "tcp", "ports": ["22"]}]},
        None,
        "no source",
        id="gcp-allow-without-source-means-anywhere",
    ),
    pytest.param(
        NO_INBOUND,
        NSG,
        {
            "securityRules": [
                {
                    "name": "ssh",
                    "direction": "Inbound",
                    "access": "Allow",
                    "sourceAddressPrefix": "*",
                }
            ]
        },
        None,
        "'ssh' allows inbound from '*'",
        id="azure-nsg-allow-from-star",
    ),
    pytest.param(
        NO_INBOUND,
        "azure-native:network:SecurityRule",
        {
            "direction": "Inbound",
            "access": "Allow",
            "sourceAddressPrefixes": ["10.0.0.0/8", "Internet"],
        },
        None,
        "Internet",
        id="azure-rule-allow-from-internet-tag",
    ),
    # required-labels
    pytest.param(
        LABELLED,
        "aws:ec2/vpc:Vpc",
        {"tags": {"spotroute-job": "llm", "managed-by": "spotroute"}},
        None,
        "lacks team",
        id="aws-vpc-without-team",
    ),
    pytest.param(
        LABELLED,
        "aws:s3/bucket:Bucket",
        {},
        None,
        "spotroute-job, team, managed-by",
        id="aws-bucket-untagged",
    ),
    pytest.param(
        LABELLED,
        "aws:iam/role:Role",
        {"tags": {**LABELS, "team": ""}},
        None,
        "lacks team",
        id="aws-role-with-empty-team",
    ),
    pytest.param(
        LABELLED,
        TEMPLATE,
        {"tags": LABELS, "tagSpecifications": [{"resourceType": "volume", "tags": LABELS}]},
        None,
        "'instance'",
        id="aws-template-leaves-instances-untagged",
    ),
    pytest.param(
        LABELLED,
        TEMPLATE,
        {
            "tags": LABELS,
            "tagSpecifications": [{"resourceType": "instance", "tags": {"team": "ml"}}],
        },
        None,
        "tagSpecifications[instance] lacks spotroute-job",
        id="aws-template-instance-tags-incomplete",
    ),
    pytest.param(
        LABELLED,
        GCS_BUCKET,
        {"labels": {"team": "ml"}},
        None,
        "labels lacks spotroute-job, managed-by",
        id="gcs-bucket-missing-labels",
    ),
    pytest.param(
        LABELLED, VMSS, vmss("Regular", tags={}), None, "tags lacks", id="azure-scale-set-untagged"
    ),
    # spot-requires-checkpointing
    pytest.param(
        SPOT_CHECKPOINTS,
        FLEET,
        {**fleet("spot", "20"), "tags": LABELS},
        None,
        "spotroute:checkpointing: true",
        id="aws-spot-fleet-without-checkpointing",
    ),
    pytest.param(
        SPOT_CHECKPOINTS,
        TEMPLATE,
        {"instanceMarketOptions": {"marketType": "spot"}, "tags": LABELS},
        None,
        "spot capacity",
        id="aws-spot-launch-template",
    ),
    pytest.param(
        SPOT_CHECKPOINTS,
        "aws:ec2/spotInstanceRequest:SpotInstanceRequest",
        {"spotPrice": "3", "tags": LABELS},
        None,
        "spot capacity",
        id="aws-spot-instance-request",
    ),
    pytest.param(
        SPOT_CHECKPOINTS,
        GCE_TEMPLATE,
        {"scheduling": {"provisioningModel": "SPOT"}, "labels": LABELS},
        None,
        "spotroute-checkpointing=true",
        id="gcp-spot-template",
    ),
    pytest.param(
        SPOT_CHECKPOINTS,
        GCE_TEMPLATE,
        {
            "scheduling": {"preemptible": True},
            "labels": {**LABELS, "spotroute-checkpointing": "false"},
        },
        None,
        "spot capacity",
        id="gcp-preemptible-marked-false",
    ),
    pytest.param(
        SPOT_CHECKPOINTS,
        VMSS,
        vmss("Spot", 3.5, tags=LABELS),
        None,
        "spot capacity",
        id="azure-spot-scale-set",
    ),
    # price-within-budget
    pytest.param(
        BUDGETED,
        FLEET,
        fleet("spot", "25"),
        BUDGET,
        "$25/instance-hour exceeds the budget $20",
        id="aws-spot-bid-over-budget",
    ),
    pytest.param(
        BUDGETED, FLEET, fleet("spot", None), BUDGET, "no max price", id="aws-spot-fleet-uncapped"
    ),
    pytest.param(
        BUDGETED,
        FLEET,
        fleet("on-demand", None, onDemandOptions={"maxTotalPrice": "50"}),
        BUDGET,
        "$25/instance-hour",
        id="aws-on-demand-total-over-budget",
    ),
    pytest.param(
        BUDGETED,
        FLEET,
        fleet("spot", "20", count=4.0),
        {"max_total_price_per_hour": 60},
        "$80/hour, over the budget $60",
        id="aws-group-total-over-group-budget",
    ),
    pytest.param(
        BUDGETED,
        VMSS,
        vmss("Spot", -1),
        BUDGET,
        "no max price",
        id="azure-spot-capped-at-pay-as-you-go",
    ),
    pytest.param(
        BUDGETED,
        VMSS,
        vmss("Spot", 21.5),
        BUDGET,
        "$21.5/instance-hour",
        id="azure-spot-over-budget",
    ),
    pytest.param(
        BUDGETED,
        GCE_TEMPLATE,
        {"metadata": {"spotroute-max-price": "30"}},
        BUDGET,
        "$30/instance-hour",
        id="gcp-recorded-cap-over-budget",
    ),
    # regions-allowed
    pytest.param(
        REGIONED,
        "pulumi:providers:aws",
        {"region": "eu-west-3"},
        REGIONS,
        "region eu-west-3 is not allowed",
        id="aws-provider-outside-list",
    ),
    pytest.param(
        REGIONED,
        "aws:s3/bucket:Bucket",
        {"region": "ap-south-1"},
        REGIONS,
        "ap-south-1",
        id="aws-resource-region-override",
    ),
    pytest.param(
        REGIONED,
        "gcp:compute/instanceGroupManager:InstanceGroupManager",
        {"zone": "asia-east1-b"},
        REGIONS,
        "asia-east1",
        id="gcp-zone-outside-list",
    ),
    pytest.param(
        REGIONED,
        GCS_BUCKET,
        {"location": "EU"},
        REGIONS,
        "region eu is not allowed",
        id="gcs-multi-region-not-listed",
    ),
    pytest.param(
        REGIONED,
        VMSS,
        vmss("Regular", tags=LABELS) | {"location": "westeurope"},
        REGIONS,
        "westeurope",
        id="azure-location-outside-list",
    ),
    # no-long-lived-keys (more in test_policy_gaps.py)
    pytest.param(
        "no-long-lived-keys",
        "aws:iam/accessKey:AccessKey",
        {"user": "ci"},
        None,
        "long-lived secret",
        id="aws-access-key",
    ),
    # node-disks-encrypted-imdsv2
    pytest.param(
        "node-disks-encrypted-imdsv2",
        TEMPLATE,
        {"metadataOptions": {"httpTokens": "optional"}},
        None,
        "IMDSv1",
        id="aws-template-imdsv1",
    ),
]


@pytest.mark.parametrize(("policy", "resource_type", "props", "config"), COMPLIANT)
def test_compliant_resource_passes(
    policy: str, resource_type: str, props: dict[str, Any], config: dict[str, Any] | None
) -> None:
    assert check(policy, resource_type, props, config) == []


@pytest.mark.parametrize(("policy", "resource_type", "props", "config", "expected"), VIOLATING)
def test_violation_is_one_line_saying_what_and_how_to_fix(
    policy: str,
    resource_type: str,
    props: dict[str, Any],
    config: dict[str, Any] | None,
    expected: str,
) -> None:
    messages = check(policy, resource_type, props, config)
    assert len(messages) == 1, messages
    message = messages[0]
    assert expected in message
    assert "\n" not in message
    what, _, fix = message.partition(" — ")
    assert what and fix, f"no fix after ' — ' in: {message}"


def test_every_rule_has_compliant_and_violating_cases() -> None:
    resource_rules = {rule.name for rule in RULES if rule.resource_check is not None}
    assert {case.values[0] for case in COMPLIANT} == resource_rules
    assert {case.values[0] for case in VIOLATING} == resource_rules


def test_several_problems_on_one_resource_are_all_reported() -> None:
    props = {"publicAccessPrevention": "inherited", "uniformBucketLevelAccess": False}
    messages = check(NOT_PUBLIC, GCS_BUCKET, props)
    assert len(messages) == 2


def test_values_unknown_during_preview_are_not_reported() -> None:
    assert check(NOT_PUBLIC, PAB, dict.fromkeys(BLOCK_ALL, UNKNOWN)) == []
    assert check(NO_WILDCARDS, ROLE_POLICY, {"policy": UNKNOWN}) == []
    assert check(LABELLED, "aws:ec2/vpc:Vpc", {"tags": UNKNOWN}) == []
    assert (
        check(
            NOT_PUBLIC,
            GCS_BUCKET,
            {"publicAccessPrevention": "enforced", "uniformBucketLevelAccess": UNKNOWN},
        )
        == []
    )


def test_policy_document_that_is_not_json_is_reported() -> None:
    messages = check(NO_WILDCARDS, ROLE_POLICY, {"policy": "{not json"})
    assert messages == ["policy is not a JSON policy document — pass valid JSON"]
