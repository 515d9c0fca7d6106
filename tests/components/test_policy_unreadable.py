"""Issue 32 item 6: a rule that cannot read a value fails closed, with a message naming the value.

`000.000.000.000/0` is a CIDR Python's ipaddress refuses (leading zeros), and the rules used to
skip what they could not parse: it passed "no inbound from the internet". Each row below is a
value some rule of the pack used to skip, or read as harmless, without a word.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.rules import RULES_BY_NAME, UNKNOWN
from policies.rules.model import shown

NO_INBOUND = "no-inbound-from-internet"
NOT_PUBLIC = "checkpoint-storage-not-public"
PROTECTED = "checkpoint-storage-encrypted-versioned"
NO_WILDCARDS = "no-iam-wildcards"
SPOT = "spot-requires-checkpointing"
BUDGET = "price-within-budget"

ODD_CIDR = "000.000.000.000/0"
TCP_22 = {"protocol": "tcp", "fromPort": 22, "toPort": 22}


def check(policy: str, resource_type: str, props: dict[str, Any], config: Any = None) -> list[str]:
    rule = RULES_BY_NAME[policy]
    assert rule.resource_check is not None
    return rule.resource_check(resource_type, props, rule.settings(config))


def _doc(effect: str, **statement: Any) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": effect, **statement}]})


BUDGET_CONFIG = {"max_price_per_hour": 10, "max_total_price_per_hour": 40}
ASG = "aws:autoscaling/group:Group"
SPOT_ASG = {"mixedInstancesPolicy": {"instancesDistribution": {
    "onDemandPercentageAboveBaseCapacity": 0, "spotMaxPrice": "4"}}, "maxSize": 2}  # fmt: skip

# (rule, resource type, props, policy config, the value the message must name)
UNREADABLE: list[Any] = [
    pytest.param(
        NO_INBOUND,
        "aws:ec2/securityGroup:SecurityGroup",
        {"ingress": [{**TCP_22, "cidrBlocks": [ODD_CIDR]}]},
        None,
        ODD_CIDR,
        id="aws-sg-leading-zeros",
    ),
    pytest.param(
        NO_INBOUND,
        "aws:ec2/securityGroupRule:SecurityGroupRule",
        {"type": "ingress", **TCP_22, "ipv6CidrBlocks": ["::/0/0"]},
        None,
        "::/0/0",
        id="aws-sg-rule",
    ),
    pytest.param(
        NO_INBOUND,
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        {"ipProtocol": "tcp", "fromPort": 22, "toPort": 22, "cidrIpv4": "0.0.0.0/0x"},
        None,
        "0.0.0.0/0x",
        id="aws-vpc-ingress-rule",
    ),
    pytest.param(
        NO_INBOUND,
        "aws:ec2/networkAcl:NetworkAcl",
        {"ingress": [{"action": "allow", **TCP_22, "ruleNo": 100, "cidrBlock": ODD_CIDR}]},
        None,
        ODD_CIDR,
        id="aws-nacl",
    ),
    pytest.param(
        NO_INBOUND,
        "gcp:compute/firewall:Firewall",
        {"allows": [{"protocol": "tcp"}], "sourceRanges": [ODD_CIDR]},
        None,
        ODD_CIDR,
        id="gcp-firewall",
    ),
    pytest.param(
        NO_INBOUND,
        "gcp:compute/firewallPolicyRule:FirewallPolicyRule",
        {"direction": "INGRESS", "action": "allow", "match": {"srcIpRanges": [ODD_CIDR]}},
        None,
        ODD_CIDR,
        id="gcp-firewall-policy-rule",
    ),
    pytest.param(
        NO_INBOUND,
        "azure-native:network:NetworkSecurityGroup",
        {
            "securityRules": [
                {
                    "name": "ssh",
                    "direction": "Inbound",
                    "access": "Allow",
                    "sourceAddressPrefix": "0.0.0.0/ 0",
                }
            ]
        },
        None,
        "0.0.0.0/ 0",
        id="azure-nsg",
    ),
    pytest.param(
        NOT_PUBLIC,
        "aws:s3/bucketAclV2:BucketAclV2",
        {"acl": "Public-Read"},
        None,
        "Public-Read",
        id="s3-acl-not-a-canned-acl",
    ),
    pytest.param(
        NOT_PUBLIC,
        "aws:s3/bucketPolicy:BucketPolicy",
        {
            "policy": _doc(
                "allow", Principal="*", Action="s3:GetObject", Resource="arn:aws:s3:::ckpt/*"
            )
        },
        None,
        "allow",
        id="s3-policy-effect",
    ),
    pytest.param(
        PROTECTED,
        "aws:s3/bucketV2:BucketV2",
        {"versioning": {"enabled": "no"}},
        None,
        "no",
        id="s3-inline-versioning",
    ),
    pytest.param(
        PROTECTED,
        "azure-native:storage:StorageAccount",
        {"enableHttpsTrafficOnly": "nope", "minimumTlsVersion": "TLS1_2"},
        None,
        "nope",
        id="azure-https-only",
    ),
    pytest.param(
        NO_WILDCARDS,
        "aws:iam/rolePolicy:RolePolicy",
        {"policy": _doc("ALLOW", Action="*", Resource="*")},
        None,
        "ALLOW",
        id="iam-effect",
    ),
    pytest.param(
        SPOT,
        ASG,
        {
            "mixedInstancesPolicy": {
                "instancesDistribution": {"onDemandPercentageAboveBaseCapacity": "most"}
            }
        },
        None,
        "most",
        id="asg-on-demand-share",
    ),
    pytest.param(
        SPOT,
        "aws:ec2/fleet:Fleet",
        {
            "targetCapacitySpecification": {
                "defaultTargetCapacityType": "on-demand",
                "spotTargetCapacity": "some",
            }
        },
        None,
        "some",
        id="fleet-spot-capacity",
    ),
    pytest.param(
        BUDGET,
        "aws:ec2/spotInstanceRequest:SpotInstanceRequest",
        {"spotPrice": "1,5"},
        BUDGET_CONFIG,
        "1,5",
        id="spot-price-comma",
    ),
    pytest.param(BUDGET, ASG, {**SPOT_ASG, "maxSize": "ten"}, BUDGET_CONFIG, "ten", id="asg-count"),
    pytest.param(
        BUDGET,
        "pulumi-python:dynamic/spotroute:LocalProcess",
        {"max_price_per_hour": "cheap"},
        BUDGET_CONFIG,
        "cheap",
        id="local-cap",
    ),
    pytest.param(
        BUDGET,
        "gcp:compute/instanceTemplate:InstanceTemplate",
        {"metadata": {"spotroute-max-price": "$4"}},
        BUDGET_CONFIG,
        "$4",
        id="gcp-cap-metadata",
    ),
    pytest.param(
        BUDGET, ASG, SPOT_ASG, {"max_price_per_hour": "forty"}, "forty", id="budget-setting"
    ),
]


@pytest.mark.parametrize(("policy", "resource_type", "props", "config", "value"), UNREADABLE)
def test_a_value_the_rule_cannot_read_is_refused_naming_it(
    policy: str, resource_type: str, props: dict[str, Any], config: Any, value: str
) -> None:
    messages = check(policy, resource_type, props, config)

    named = [m for m in messages if m.startswith("cannot read") and shown(value) in m]
    assert named, messages
    for message in named:
        assert "\n" not in message and " — " in message, message


# What the rules can read stays as it was: no new refusal for well-formed values.
READABLE: list[Any] = [
    pytest.param(
        NO_INBOUND,
        "aws:ec2/securityGroup:SecurityGroup",
        {"ingress": [{**TCP_22, "cidrBlocks": ["10.0.0.0/16", " 192.168.1.0/24"]}]},
        id="aws-private-cidrs",
    ),
    pytest.param(
        NO_INBOUND,
        "azure-native:network:NetworkSecurityGroup",
        {
            "securityRules": [
                {
                    "name": "lb",
                    "direction": "Inbound",
                    "access": "Allow",
                    "sourceAddressPrefixes": [
                        "VirtualNetwork",
                        "AzureLoadBalancer",
                        "Storage.EastUS",
                    ],
                }
            ]
        },
        id="azure-service-tags",
    ),
    pytest.param(
        NO_INBOUND,
        "aws:ec2/networkAcl:NetworkAcl",
        {
            "ingress": [
                {"action": "allow", "protocol": "icmp", "ruleNo": 100, "cidrBlock": "0.0.0.0/0"}
            ]
        },
        id="aws-nacl-icmp",
    ),
    pytest.param(
        NO_INBOUND,
        "aws:ec2/networkAcl:NetworkAcl",
        {
            "ingress": [
                {"action": "allow", "protocol": UNKNOWN, "ruleNo": 100, "cidrBlock": "0.0.0.0/0"}
            ]
        },
        id="aws-nacl-protocol-unknown-in-preview",
    ),
    pytest.param(
        NOT_PUBLIC,
        "aws:s3/bucketAclV2:BucketAclV2",
        {"acl": "bucket-owner-full-control"},
        id="s3-acl-owner",
    ),
    pytest.param(
        PROTECTED,
        "aws:s3/bucketV2:BucketV2",
        {"versioning": {"enabled": True}},
        id="s3-inline-versioning-on",
    ),
    pytest.param(
        SPOT,
        ASG,
        {
            "mixedInstancesPolicy": {
                "instancesDistribution": {"onDemandPercentageAboveBaseCapacity": "100"}
            }
        },
        id="asg-all-on-demand",
    ),
]


@pytest.mark.parametrize(("policy", "resource_type", "props"), READABLE)
def test_values_the_rule_can_read_are_judged_as_before(
    policy: str, resource_type: str, props: dict[str, Any]
) -> None:
    assert check(policy, resource_type, props) == []


def test_an_unreadable_spot_setting_counts_as_spot_and_passes_only_with_the_marker() -> None:
    share = {"onDemandPercentageAboveBaseCapacity": "x"}
    props = {
        "mixedInstancesPolicy": {"instancesDistribution": share},
        "tags": {"spotroute-checkpointing": "true"},
    }
    assert check(SPOT, ASG, props) == []  # checkpointed: spot is fine either way


def test_a_firewall_policy_rule_allowing_in_capitals_is_still_an_allow_rule() -> None:
    props = {"direction": "INGRESS", "action": "ALLOW", "match": {"srcIpRanges": ["0.0.0.0/0"]}}

    messages = check(NO_INBOUND, "gcp:compute/firewallPolicyRule:FirewallPolicyRule", props)

    assert messages and "open to 0.0.0.0/0" in messages[0]


def test_an_acl_rule_for_a_protocol_with_ports_beyond_tcp_and_udp_is_judged() -> None:
    # SCTP (IP protocol 132) has ports like TCP's; only ICMP and ICMPv6 are port-free.
    props = {"ingress": [{"action": "allow", "protocol": "132", "fromPort": 22, "toPort": 22,
                          "ruleNo": 100, "cidrBlock": "0.0.0.0/0"}]}  # fmt: skip

    messages = check(NO_INBOUND, "aws:ec2/networkAcl:NetworkAcl", props)

    assert messages and "from 0.0.0.0/0" in messages[0]
