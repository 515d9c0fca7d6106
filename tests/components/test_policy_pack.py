"""The pulumi_policy adapter (real ResourceValidationArgs, unknown values) and the pack launcher."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_policies import (
    BLOCK_ALL,
    FLEET,
    GCE_TEMPLATE,
    LABELS,
    PAB,
    ROLE_POLICY,
    S3_BUCKET,
    SG,
    fleet,
)

import policies
from policies.pack import build_policies
from policies.rules import RULES

# --- the pulumi_policy adapter -------------------------------------------------------------------


def _policy(name: str) -> Any:
    [policy] = [p for p in build_policies() if p.name == name]
    return policy


def _resource_args(
    resource_type: str, props: dict[str, Any], config: dict[str, Any] | None = None
) -> Any:
    from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs
    from pulumi_policy.proxy import unknown_checking_proxy

    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
    return ResourceValidationArgs(
        resource_type,
        unknown_checking_proxy(props),
        f"urn:pulumi:s::p::{resource_type}::r",
        "r",
        opts,
        None,
        config,
    )


def _reported(policy: Any, args: Any) -> list[tuple[str, str | None]]:
    reports: list[tuple[str, str | None]] = []
    policy.validate(args, lambda message, urn=None: reports.append((message, urn)))
    return reports


def test_pack_has_one_mandatory_policy_per_rule_with_its_config_schema() -> None:
    from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy

    built = build_policies()
    assert [p.name for p in built] == [rule.name for rule in RULES]
    assert all(p.enforcement_level == EnforcementLevel.MANDATORY for p in built)
    for policy, rule in zip(built, RULES, strict=True):
        kind = StackValidationPolicy if rule.stack_check else ResourceValidationPolicy
        assert isinstance(policy, kind)
        assert policy.config_schema is not None
        assert policy.config_schema.properties == rule.schema


def test_pack_reports_the_rule_message_for_a_resource() -> None:
    args = _resource_args(
        SG,
        {
            "ingress": [
                {"protocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "cidrBlocks": ["0.0.0.0/0"]}
            ]
        },
    )
    [(message, urn)] = _reported(_policy("no-inbound-from-internet"), args)
    assert message.startswith("ingress (tcp 22) is open to 0.0.0.0/0 — ")
    assert urn is None  # the engine attaches the resource's own URN


def test_pack_skips_values_unknown_during_preview() -> None:
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    args = _resource_args(
        ROLE_POLICY, {"policy": UNKNOWN_STRING_VALUE, "role": UNKNOWN_STRING_VALUE}
    )
    assert _reported(_policy("no-iam-wildcards"), args) == []


def test_pack_uses_the_policy_config_it_is_given() -> None:
    props = fleet("spot", "25")
    assert (
        _reported(
            _policy("price-within-budget"), _resource_args(FLEET, props, {"max_price_per_hour": 30})
        )
        == []
    )
    [(message, _)] = _reported(
        _policy("price-within-budget"), _resource_args(FLEET, props, {"max_price_per_hour": 20})
    )
    assert "exceeds the budget $20" in message


def test_pack_marks_budget_and_region_rules_not_applicable_without_config() -> None:
    from pulumi_policy.policy import _NotApplicableError  # what args.not_applicable() raises

    for name, wanted in (
        ("price-within-budget", "max_price_per_hour"),
        ("regions-allowed", "allowed_regions"),
    ):
        with pytest.raises(_NotApplicableError) as raised:
            _reported(_policy(name), _resource_args(FLEET, fleet("spot", "25")))
        assert wanted in str(raised.value.reason)


def test_pack_stack_policy_reports_against_the_bucket_urn() -> None:
    from pulumi_policy import (
        PolicyCustomTimeouts,
        PolicyResource,
        PolicyResourceOptions,
        StackValidationArgs,
    )
    from pulumi_policy.proxy import unknown_checking_proxy

    opts = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])

    def resource(resource_type: str, name: str, props: dict[str, Any]) -> PolicyResource:
        urn = f"urn:pulumi:s::p::{resource_type}::{name}"
        return PolicyResource(
            resource_type, unknown_checking_proxy(props), urn, name, opts, None, None, [], {}
        )

    bucket = resource(S3_BUCKET, "ckpt", {"bucket": "ckpt-123", "tags": LABELS})
    versioning = resource("aws:s3/bucketVersioning:BucketVersioning", "v", {"bucket": "other"})
    versioning.property_dependencies["bucket"] = [bucket]
    block = resource(PAB, "block", {"bucket": "ckpt-123", **BLOCK_ALL})
    args = StackValidationArgs([bucket, versioning, block], {})
    reports = _reported(_policy("checkpoint-storage-complete"), args)
    assert reports == [
        (
            "ckpt has no server-side encryption configuration — add a BucketServerSide"
            "EncryptionConfiguration for it (the CheckpointBucket component creates one)",
            bucket.urn,
        )
    ]


# --- how the engine starts the pack --------------------------------------------------------------


def test_policy_project_file_is_what_the_engine_expects() -> None:
    project = yaml.safe_load((policies.PACK_DIR / "PulumiPolicy.yaml").read_text())
    # No runtime options: a `virtualenv` option would bind the pack to one checkout's venv.
    assert project["runtime"] == "python"
    assert isinstance(project["version"], str) and project["version"]


def test_launcher_runs_the_pack_with_the_given_interpreter(tmp_path: Path) -> None:
    log = tmp_path / "argv"
    fake_python = tmp_path / "fake python"
    fake_python.write_text(f'#!/bin/sh\nfor a in "$@"; do echo "$a"; done > "{log}"\n')
    fake_python.chmod(0o755)

    launcher = policies.write_launcher(tmp_path / "pack", str(fake_python))

    assert launcher.stat().st_mode & stat.S_IXUSR
    assert (tmp_path / "pack" / "PulumiPolicy.yaml").read_text() == (
        policies.PACK_DIR / "PulumiPolicy.yaml"
    ).read_text()
    subprocess.run([str(launcher), "127.0.0.1:40123"], check=True, env={**os.environ}, timeout=30)
    assert log.read_text().splitlines() == [
        "-u",
        "-m",
        "pulumi.policy",
        "127.0.0.1:40123",
        str(policies.PACK_DIR),
    ]


def test_launcher_is_replaced_in_place_when_written_again(tmp_path: Path) -> None:
    first = policies.write_launcher(tmp_path, "/opt/a/python")
    second = policies.write_launcher(tmp_path, "/opt/b/python")
    assert first == second
    assert "/opt/b/python" in second.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "PulumiPolicy.yaml",
        policies.LAUNCHER_NAME,
    ]


def test_budget_covers_the_local_target_and_gcp_templates() -> None:
    from policies.rules import budget as rules
    from policies.rules.resource_types import LOCAL_PROCESS, MAX_PRICE_METADATA_KEY

    budget = {"max_price_per_hour": 1.0}
    local = {"max_price_per_hour": 5.0, "command": ["/bin/true"]}
    assert rules.budget_violations(LOCAL_PROCESS, local, budget)
    assert not rules.budget_violations(LOCAL_PROCESS, {**local, "max_price_per_hour": 0.5}, budget)
    template = {"metadata": {MAX_PRICE_METADATA_KEY: "3"}, "scheduling": {}}
    assert rules.budget_violations(GCE_TEMPLATE, template, budget)
