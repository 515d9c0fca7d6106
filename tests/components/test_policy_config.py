"""The policy config knobs: enforcement levels and each rule's parameters, through evaluate()."""

from __future__ import annotations

import pytest
from test_policies import (
    FLEET,
    LABELS,
    NO_WILDCARDS,
    PROTECTED,
    ROLE_POLICY,
    SG,
    SPOT_CHECKPOINTS,
    STORAGE_ACCOUNT,
    allow,
    check,
    doc,
    fleet,
)

from policies.rules import StackResource, evaluate

# --- configuration knobs -------------------------------------------------------------------------

OPEN_SG = StackResource(
    type=SG,
    name="sg",
    urn="urn:pulumi:s::p::aws:ec2/securityGroup:SecurityGroup::sg",
    props={
        "ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]}],
        "tags": LABELS,
    },
)
UNTAGGED_VPC = StackResource(
    type="aws:ec2/vpc:Vpc", name="vpc", urn="urn:vpc", props={"tags": {"team": "ml"}}
)


def test_every_rule_is_mandatory_unless_configured() -> None:
    violations = evaluate([OPEN_SG, UNTAGGED_VPC])
    assert {(v.policy, v.enforcement_level) for v in violations} == {
        ("no-inbound-from-internet", "mandatory"),
        ("required-labels", "mandatory"),
    }
    assert {v.urn for v in violations} == {OPEN_SG.urn, UNTAGGED_VPC.urn}


def test_disabled_rule_reports_nothing() -> None:
    violations = evaluate([OPEN_SG], {"no-inbound-from-internet": {"enforcementLevel": "disabled"}})
    assert violations == []


def test_advisory_for_all_with_one_rule_kept_mandatory() -> None:
    config = {"all": "advisory", "required-labels": "mandatory"}
    levels = {v.policy: v.enforcement_level for v in evaluate([OPEN_SG, UNTAGGED_VPC], config)}
    assert levels == {"no-inbound-from-internet": "advisory", "required-labels": "mandatory"}


def test_unknown_enforcement_level_is_refused_naming_the_rule() -> None:
    with pytest.raises(ValueError, match="required-labels: enforcementLevel 'warn'"):
        evaluate([UNTAGGED_VPC], {"required-labels": {"enforcementLevel": "warn"}})


def test_custom_required_labels_replace_the_default_list() -> None:
    vpc = StackResource(
        type="aws:ec2/vpc:Vpc", name="vpc", urn="urn:vpc", props={"tags": {"team": "ml"}}
    )
    violations = evaluate([vpc], {"required-labels": {"labels": ["team", "cost-center"]}})
    assert [v.message.split(" — ")[0] for v in violations] == ["tags lacks cost-center"]


def test_budget_comes_from_policy_config() -> None:
    group = StackResource(type=FLEET, name="fleet", urn="urn:fleet", props=fleet("spot", "12.5"))
    assert evaluate([group]) == []
    assert evaluate([group], {"price-within-budget": {"max_price_per_hour": 12.5}}) == []
    [over] = evaluate([group], {"price-within-budget": {"max_price_per_hour": 10}})
    assert over.policy == "price-within-budget"
    assert "$12.5/instance-hour exceeds the budget $10" in over.message


def test_region_list_comes_from_policy_config() -> None:
    provider = StackResource(
        type="pulumi:providers:aws", name="aws", urn="urn:aws", props={"region": "eu-west-1"}
    )
    assert evaluate([provider]) == []
    assert evaluate([provider], {"regions-allowed": {"allowed_regions": ["eu-*"]}}) == []
    [outside] = evaluate([provider], {"regions-allowed": {"allowed_regions": ["us-east-?"]}})
    assert outside.urn == "urn:aws"


def test_checkpoint_marker_label_is_configurable() -> None:
    props = {**fleet("spot", "20"), "tags": {**LABELS, "checkpoints": "true"}}
    assert check(SPOT_CHECKPOINTS, FLEET, props) != []
    assert check(SPOT_CHECKPOINTS, FLEET, props, {"marker_label": "checkpoints"}) == []


def test_minimum_tls_version_is_configurable() -> None:
    account = {"allowBlobPublicAccess": False, "minimumTlsVersion": "TLS1_2"}
    assert check(PROTECTED, STORAGE_ACCOUNT, account) == []
    [message] = check(PROTECTED, STORAGE_ACCOUNT, account, {"min_tls_version": "TLS1_3"})
    assert "set minimumTlsVersion: 'TLS1_3'" in message


def test_read_only_action_prefixes_are_configurable() -> None:
    props = {"policy": doc(allow("logs:PutLogEvents", "*"))}
    assert check(NO_WILDCARDS, ROLE_POLICY, props) != []
    assert (
        check(NO_WILDCARDS, ROLE_POLICY, props, {"read_only_action_prefixes": ["Get", "Put"]}) == []
    )
