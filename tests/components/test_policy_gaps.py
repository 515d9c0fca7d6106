"""Issue 12 item 7: the bad component variants that passed the MANDATORY pack, per cloud, with
the rule that must fire for each (and the good twin that must not)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.rules import RULES_BY_NAME

NO_INBOUND = "no-inbound-from-internet"
NO_KEYS = "no-long-lived-keys"
NO_WILDCARDS = "no-iam-wildcards"
NODES = "node-disks-encrypted-imdsv2"


def _doc(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def _allow(action: Any, resource: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource}


HALVES = ["0.0.0.0/1", "128.0.0.0/1"]
# (cloud, variant, resource type, props, rule that must fire)
BAD: list[tuple[str, str, str, dict[str, Any], str]] = [
    # --- the internet as ranges
    (
        "aws",
        "sg two halves",
        "aws:ec2/securityGroup:SecurityGroup",
        {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": HALVES}]},
        NO_INBOUND,
    ),
    (
        "aws",
        "sg /1 alone",
        "aws:ec2/securityGroup:SecurityGroup",
        {"ingress": [{"protocol": "-1", "cidrBlocks": ["0.0.0.0/1"]}]},
        NO_INBOUND,
    ),
    (
        "aws",
        "sg many /8s",
        "aws:ec2/securityGroup:SecurityGroup",
        {
            "ingress": [
                {
                    "protocol": "tcp",
                    "fromPort": 22,
                    "toPort": 22,
                    "cidrBlocks": [f"{n}.0.0.0/8" for n in range(1, 200)],
                }
            ]
        },
        NO_INBOUND,
    ),
    (
        "aws",
        "sg ipv6 halves",
        "aws:ec2/securityGroup:SecurityGroup",
        {
            "ingress": [
                {
                    "protocol": "tcp",
                    "fromPort": 22,
                    "toPort": 22,
                    "ipv6CidrBlocks": ["::/1", "8000::/1"],
                }
            ]
        },
        NO_INBOUND,
    ),
    (
        "aws",
        "separate sg rule",
        "aws:ec2/securityGroupRule:SecurityGroupRule",
        {"type": "ingress", "protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": HALVES},
        NO_INBOUND,
    ),
    (
        "aws",
        "separate vpc ingress rule",
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        {"ipProtocol": "tcp", "fromPort": 22, "toPort": 22, "cidrIpv4": "0.0.0.0/1"},
        NO_INBOUND,
    ),
    (
        "gcp",
        "firewall halves",
        "gcp:compute/firewall:Firewall",
        {"direction": "INGRESS", "allows": [{"protocol": "tcp"}], "sourceRanges": HALVES},
        NO_INBOUND,
    ),
    (
        "azure",
        "nsg halves",
        "azure-native:network:NetworkSecurityGroup",
        {
            "securityRules": [
                {
                    "name": "ssh",
                    "direction": "Inbound",
                    "access": "Allow",
                    "sourceAddressPrefixes": HALVES,
                }
            ]
        },
        NO_INBOUND,
    ),
    (
        "azure",
        "separate security rule",
        "azure-native:network:SecurityRule",
        {"direction": "Inbound", "access": "Allow", "sourceAddressPrefix": "0.0.0.0/1"},
        NO_INBOUND,
    ),
    # --- issue 24 item 12: a bare unspecified address, and AWS network ACLs. Azure's
    # sourceAddressPrefix is "CIDR or source IP range … '*' … all source IPs"
    # (https://learn.microsoft.com/en-us/rest/api/virtualnetwork/security-rules/create-or-update);
    # an ACL rule's fields: https://docs.aws.amazon.com/vpc/latest/userguide/nacl-rules.html
    (
        "azure",
        "security rule from bare 0.0.0.0",
        "azure-native:network:SecurityRule",
        {"direction": "Inbound", "access": "Allow", "sourceAddressPrefix": "0.0.0.0"},
        NO_INBOUND,
    ),
    (
        "azure",
        "nsg rule from bare 0.0.0.0",
        "azure-native:network:NetworkSecurityGroup",
        {
            "securityRules": [
                {"name": "ssh", "direction": "Inbound", "access": "Allow",
                 "sourceAddressPrefixes": ["0.0.0.0"]}
            ]
        },
        NO_INBOUND,
    ),
    (
        "aws",
        "network ACL allows all traffic from the internet",
        "aws:ec2/networkAcl:NetworkAcl",
        {
            "ingress": [
                {"ruleNo": 100, "action": "allow", "protocol": "-1", "fromPort": 0,
                 "toPort": 0, "cidrBlock": "0.0.0.0/0"}
            ]
        },
        NO_INBOUND,
    ),
    (
        "aws",
        "network ACL rule allows ssh from the internet",
        "aws:ec2/networkAclRule:NetworkAclRule",
        {"ruleNumber": 110, "egress": False, "ruleAction": "allow", "protocol": "6",
         "fromPort": 22, "toPort": 22, "cidrBlock": "0.0.0.0/0"},
        NO_INBOUND,
    ),
    (
        "aws",
        "default network ACL allows IPv6 everything",
        "aws:ec2/defaultNetworkAcl:DefaultNetworkAcl",
        {
            "ingress": [
                {"ruleNo": 101, "action": "allow", "protocol": "all", "fromPort": 0,
                 "toPort": 0, "ipv6CidrBlock": "::/0"}
            ]
        },
        NO_INBOUND,
    ),
    # --- long-lived keys of any cloud
    ("aws", "access key", "aws:iam/accessKey:AccessKey", {"user": "ci"}, NO_KEYS),
    (
        "gcp",
        "service-account key",
        "gcp:serviceaccount/key:Key",
        {"serviceAccountId": "sa"},
        NO_KEYS,
    ),
    (
        "azure",
        "application password",
        "azuread:index/applicationPassword:ApplicationPassword",
        {},
        NO_KEYS,
    ),
    (
        "azure",
        "service principal password",
        "azuread:index/servicePrincipalPassword:ServicePrincipalPassword",
        {},
        NO_KEYS,
    ),
    # --- IAM by what an action can reach
    (
        "aws",
        "GetSecretValue on *",
        "aws:iam/rolePolicy:RolePolicy",
        {"policy": _doc(_allow("secretsmanager:GetSecretValue", "*"))},
        NO_WILDCARDS,
    ),
    (
        "aws",
        "GetParameter* on all parameters",
        "aws:iam/rolePolicy:RolePolicy",
        {"policy": _doc(_allow("ssm:GetParameter*", "arn:aws:ssm:*:*:parameter/*"))},
        NO_WILDCARDS,
    ),
    (
        "aws",
        "objects of every bucket",
        "aws:iam/rolePolicy:RolePolicy",
        {"policy": _doc(_allow(["s3:GetObject", "s3:PutObject"], "arn:aws:s3:::*/*"))},
        NO_WILDCARDS,
    ),
    (
        "aws",
        "boundary tag does not excuse PassRole on role/*",
        "aws:iam/policy:Policy",
        {
            "policy": _doc(_allow("iam:PassRole", "arn:aws:iam::123456789012:role/*")),
            "tags": {"spotroute-purpose": "permissions-boundary"},
        },
        NO_WILDCARDS,
    ),
    (
        "aws",
        "boundary tag on an inline role policy is no boundary",
        "aws:iam/rolePolicy:RolePolicy",
        {
            "policy": _doc(_allow("s3:GetObject", "arn:aws:s3:::*/*")),
            "tags": {"spotroute-purpose": "permissions-boundary"},
        },
        NO_WILDCARDS,
    ),
    (
        "aws",
        "PassRole on role/*",
        "aws:iam/policy:Policy",
        {"policy": _doc(_allow("iam:PassRole", "arn:aws:iam::123456789012:role/*"))},
        NO_WILDCARDS,
    ),
    (
        "aws",
        "iam:Put* on role/*",
        "aws:iam/rolePolicy:RolePolicy",
        {"policy": _doc(_allow("iam:Put*", "arn:aws:iam::*:role/*"))},
        NO_WILDCARDS,
    ),
    (
        "aws",
        "broad managed policy",
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
        {"policyArn": "arn:aws:iam::aws:policy/AmazonS3FullAccess"},
        NO_WILDCARDS,
    ),
    (
        "gcp",
        "project-level token creator",
        "gcp:projects/iAMMember:IAMMember",
        {"role": "roles/iam.serviceAccountTokenCreator", "member": "user:a@b.c"},
        NO_WILDCARDS,
    ),
    (
        "gcp",
        "project-level service-account user",
        "gcp:projects/iAMBinding:IAMBinding",
        {"role": "roles/iam.serviceAccountUser", "members": ["user:a@b.c"]},
        NO_WILDCARDS,
    ),
    (
        "azure",
        "Owner role assignment",
        "azure-native:authorization:RoleAssignment",
        {
            "roleDefinitionId": "/subscriptions/s/providers/Microsoft.Authorization/"
            "roleDefinitions/8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
        },
        NO_WILDCARDS,
    ),
    # --- node disks and metadata
    (
        "aws",
        "unencrypted EBS volume",
        "aws:ebs/volume:Volume",
        {"size": 100, "encrypted": False},
        NODES,
    ),
    (
        "aws",
        "launch template plain disk",
        "aws:ec2/launchTemplate:LaunchTemplate",
        {
            "blockDeviceMappings": [{"deviceName": "/dev/sda1", "ebs": {"volumeSize": 200}}],
            "metadataOptions": {"httpTokens": "required"},
        },
        NODES,
    ),
    (
        "aws",
        "launch template IMDSv1",
        "aws:ec2/launchTemplate:LaunchTemplate",
        {"metadataOptions": {"httpTokens": "optional"}},
        NODES,
    ),
    (
        "aws",
        "instance IMDSv1 by default",
        "aws:ec2/instance:Instance",
        {"instanceType": "p4d.24xlarge"},
        NODES,
    ),
    # --- Azure shared-key storage
    (
        "azure",
        "shared-key storage",
        "azure-native:storage:StorageAccount",
        {
            "enableHttpsTrafficOnly": True,
            "minimumTlsVersion": "TLS1_2",
            "allowSharedKeyAccess": True,
        },
        NO_KEYS,
    ),
    (
        "azure",
        "shared-key unset (default on)",
        "azure-native:storage:StorageAccount",
        {"enableHttpsTrafficOnly": True, "minimumTlsVersion": "TLS1_2"},
        NO_KEYS,
    ),
]

GOOD: list[tuple[str, str, dict[str, Any], str]] = [
    (
        # Stateless ACLs need the return ports open to the internet (replies through the NAT
        # gateway): https://docs.aws.amazon.com/vpc/latest/userguide/nacl-ephemeral-ports.html
        "network ACL allows the ephemeral return ports from the internet",
        "aws:ec2/networkAcl:NetworkAcl",
        {
            "ingress": [
                {"ruleNo": 100, "action": "allow", "protocol": "tcp", "fromPort": 1024,
                 "toPort": 65535, "cidrBlock": "0.0.0.0/0"},
                {"ruleNo": 110, "action": "allow", "protocol": "-1", "fromPort": 0,
                 "toPort": 0, "cidrBlock": "10.0.0.0/16"},
                {"ruleNo": 120, "action": "deny", "protocol": "-1", "fromPort": 0,
                 "toPort": 0, "cidrBlock": "0.0.0.0/0"},
            ]
        },
        NO_INBOUND,
    ),
    (
        "network ACL egress rule to the internet",
        "aws:ec2/networkAclRule:NetworkAclRule",
        {"ruleNumber": 100, "egress": True, "ruleAction": "allow", "protocol": "-1",
         "cidrBlock": "0.0.0.0/0"},
        NO_INBOUND,
    ),
    (
        "security rule from one host",
        "azure-native:network:SecurityRule",
        {"direction": "Inbound", "access": "Allow", "sourceAddressPrefix": "203.0.113.7"},
        NO_INBOUND,
    ),
    (
        "permissions boundary reads every bucket (a ceiling, not a grant)",
        "aws:iam/policy:Policy",
        {
            "policy": _doc(_allow("s3:GetObject", ["arn:aws:s3:::*", "arn:aws:s3:::*/*"])),
            "tags": {"spotroute-purpose": "permissions-boundary"},
        },
        NO_WILDCARDS,
    ),
    (
        "office /16",
        "aws:ec2/securityGroup:SecurityGroup",
        {
            "ingress": [
                {"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["203.0.0.0/16"]}
            ]
        },
        NO_INBOUND,
    ),
    (
        "named bucket objects",
        "aws:iam/rolePolicy:RolePolicy",
        {
            "policy": _doc(
                _allow(["s3:GetObject", "s3:PutObject"], "arn:aws:s3:::ckpt-bucket/job/*")
            )
        },
        NO_WILDCARDS,
    ),
    (
        "PassRole on one role prefix",
        "aws:iam/policy:Policy",
        {"policy": _doc(_allow("iam:PassRole", "arn:aws:iam::123456789012:role/spotroute-job-*"))},
        NO_WILDCARDS,
    ),
    (
        "token creator on one service account",
        "gcp:serviceaccount/iAMMember:IAMMember",
        {"role": "roles/iam.serviceAccountTokenCreator", "member": "principal://x"},
        NO_WILDCARDS,
    ),
    (
        "encrypted IMDSv2 template",
        "aws:ec2/launchTemplate:LaunchTemplate",
        {
            "blockDeviceMappings": [{"deviceName": "/dev/sda1", "ebs": {"encrypted": "true"}}],
            "metadataOptions": {"httpTokens": "required"},
        },
        NODES,
    ),
    (
        "keyless storage",
        "azure-native:storage:StorageAccount",
        {
            "enableHttpsTrafficOnly": True,
            "minimumTlsVersion": "TLS1_2",
            "allowSharedKeyAccess": False,
        },
        NO_KEYS,
    ),
]


def _fires(rule: str, resource_type: str, props: dict[str, Any]) -> list[str]:
    r = RULES_BY_NAME[rule]
    assert r.resource_check is not None
    return r.resource_check(resource_type, props, r.settings(None))


@pytest.mark.parametrize(
    ("cloud", "variant", "rtype", "props", "rule"), BAD, ids=[f"{c}-{v}" for c, v, *_ in BAD]
)
def test_bad_variant_is_refused_by_its_rule(
    cloud: str, variant: str, rtype: str, props: dict[str, Any], rule: str
) -> None:
    problems = _fires(rule, rtype, props)
    assert problems, f"{cloud} {variant}: {rule} did not fire"
    assert all("\n" not in p and " — " in p for p in problems), problems  # one line with the fix


@pytest.mark.parametrize(("variant", "rtype", "props", "rule"), GOOD, ids=[g[0] for g in GOOD])
def test_good_twin_passes(variant: str, rtype: str, props: dict[str, Any], rule: str) -> None:
    assert _fires(rule, rtype, props) == []


def test_every_cloud_has_bad_variants_for_every_new_rule() -> None:
    by_cloud = {(c, r) for c, _v, _t, _p, r in BAD}
    for rule in (NO_INBOUND, NO_KEYS, NO_WILDCARDS):
        assert {c for c, r in by_cloud if r == rule} == {"aws", "gcp", "azure"}, rule
