"""The whole policy pack over what the placement program really builds, and over tampered stacks.

Every cloud module the program supports × market × new/reused bucket × with/without SSH runs
under the Pulumi mocks harness; every resource rule and the stack rule then see the captured
resources exactly as the engine would hand them over (camelCase inputs, URNs, parents), with a
budget and a region list configured so no rule is idle. A tampered copy of a compliant stack
must then trip exactly the rule it breaks, on exactly the resource that breaks it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from harness import CapturedStack, run_program
from test_azure import AZURE_CALLS, AZURE_STATES
from test_gcp import GCP_STATES

import policies
from policies.rules import StackResource, Violation, evaluate

JOB = "llm-finetune"
MAX_PRICE = 20.0
# Per cloud: where the job runs, what it runs on, and a bucket/data location of that cloud.
CLOUDS: dict[str, dict[str, Any]] = {
    "aws": {
        "region": "us-east-1",
        "zone": "us-east-1a",
        "instanceTypes": ["p4de.24xlarge", "p4d.24xlarge"],
        "checkpointUrl": "s3://acme-checkpoints/teams/ml/",
        "dataUrls": ["s3://acme-datasets/llm/"],
    },
    "gcp": {
        "region": "us-central1",
        "zone": "us-central1-a",
        "instanceTypes": ["a2-ultragpu-8g"],
        "checkpointUrl": "gs://acme-checkpoints/teams/ml/",
        "dataUrls": ["gs://acme-datasets/llm/"],
        "mocks": {"states": GCP_STATES},  # autonamed bucket and service account outputs
    },
    "azure": {
        "region": "eastus",
        "zone": "1",
        "instanceTypes": ["Standard_ND96amsr_A100_v4"],
        # The program cannot reuse an Azure container yet: access is granted by resource id,
        # which an https:// URL lacks (components/azure.py asks for storage_account_ids).
        "checkpointUrl": None,
        "dataUrls": [],
        "mocks": {"calls": AZURE_CALLS, "states": AZURE_STATES},
    },
}
PACK_CONFIG: dict[str, Any] = {
    "price-within-budget": {"max_price_per_hour": MAX_PRICE},
    "regions-allowed": {"allowed_regions": ["us-*", "eastus"]},
}


def stack_config(cloud: str, market: str, bucket: str, ssh: str) -> dict[str, Any]:
    """A valid `spotroute:*` config (keys without namespace) for one cell of the matrix."""
    place = CLOUDS[cloud]
    return {
        "jobName": JOB,
        "cloud": cloud,
        "region": place["region"],
        "zone": place["zone"],
        "instanceTypes": place["instanceTypes"],
        "market": market,
        "maxPrice": MAX_PRICE,
        "nodeCount": 2,
        "gpu": "A100-80GB",
        "gpuCount": 8,
        "bootDiskGb": 200,
        "job": {"image": "ghcr.io/acme/trainer:1.4", "command": ["python", "train.py"]},
        "checkpointing": market == "spot",
        "checkpointUrl": place["checkpointUrl"] if bucket == "reused-bucket" else "",
        "dataUrls": place["dataUrls"],
        "remoteAccess": ssh == "remote-access",
        "labels": {"team": "ml-platform", "cost-center": "4711"},
    }


def stack_resources(captured: CapturedStack) -> list[StackResource]:
    """The harness's captured registrations as the pack's stack rules see them."""
    urns = {(r.type, r.name): r.urn for r in captured.resources}
    return [
        StackResource(
            type=r.type,
            name=r.name,
            urn=r.urn,
            props=r.inputs,
            parent_urn=urns.get((r.parent_type, r.parent_name), ""),
        )
        for r in captured.resources
    ]


def findings(violations: list[Violation]) -> set[tuple[str, str]]:
    """(policy, resource name) pairs, the resource name being the last URN segment."""
    return {(v.policy, v.urn.rsplit("::", 1)[-1]) for v in violations}


def explain(violations: list[Violation]) -> str:
    return "\n".join(f"[{v.policy}] {v.urn.rsplit('::', 1)[-1]}: {v.message}" for v in violations)


def placement(cloud: str, market: str, bucket: str, ssh: str) -> CapturedStack:
    """Run the placement program under mocks for one cell of the matrix."""
    mocks = CLOUDS[cloud].get("mocks", {})
    return run_program(stack_config(cloud, market, bucket, ssh), **mocks)


MATRIX = [
    pytest.param(cloud, market, bucket, ssh, id=f"{cloud}-{market}-{bucket}-{ssh}")
    for cloud, place in CLOUDS.items()
    for market in ("spot", "on-demand")
    for bucket in ("new-bucket", "reused-bucket")
    if bucket == "new-bucket" or place["checkpointUrl"] is not None
    # Azure refuses remoteAccess (no keyless shell without inbound rules).
    for ssh in ("no-ssh", "remote-access")
    if ssh == "no-ssh" or cloud in ("aws", "gcp")
]


@pytest.mark.parametrize(("cloud", "market", "bucket", "ssh"), MATRIX)
def test_program_output_passes_every_policy(cloud: str, market: str, bucket: str, ssh: str) -> None:
    violations = evaluate(stack_resources(placement(cloud, market, bucket, ssh)), PACK_CONFIG)
    hint = ""
    if any(v.policy == "spot-requires-checkpointing" for v in violations):
        hint = "\nthe program must label checkpointing jobs spotroute-checkpointing=true"
    assert violations == [], explain(violations) + hint


def test_matrix_covers_every_cloud_the_program_can_deploy_to() -> None:
    from router.contract.clouds import CLOUDS as PROGRAM_CLOUDS

    # The local target creates only dynamic resources on this machine, which no rule covers.
    assert set(CLOUDS) == set(PROGRAM_CLOUDS) - {"local"}, "add the cloud to CLOUDS"


# --- tampered stacks -----------------------------------------------------------------------------


def compliant_stack(cloud: str, market: str) -> list[StackResource]:
    stack = stack_resources(placement(cloud, market, "new-bucket", "no-ssh"))
    assert evaluate(stack, PACK_CONFIG) == [], "the untampered stack must be compliant"
    return stack


@pytest.fixture(scope="module")
def aws_stack() -> list[StackResource]:
    return compliant_stack("aws", "on-demand")


@pytest.fixture(scope="module")
def gcp_stack() -> list[StackResource]:
    return compliant_stack("gcp", "on-demand")


@pytest.fixture(scope="module")
def azure_stack() -> list[StackResource]:
    return compliant_stack("azure", "on-demand")


@pytest.fixture(scope="module")
def aws_spot() -> list[StackResource]:
    return stack_resources(placement("aws", "spot", "new-bucket", "no-ssh"))


@pytest.fixture(scope="module")
def gcp_spot() -> list[StackResource]:
    return stack_resources(placement("gcp", "spot", "new-bucket", "no-ssh"))


def tamper(
    stack: list[StackResource], type_: str, change: Callable[[dict[str, Any]], dict[str, Any]]
) -> list[StackResource]:
    """The stack with the first resource of `type_` given new props."""
    target = next(r for r in stack if r.type == type_)
    return [replace(r, props=change(dict(r.props))) if r is target else r for r in stack]


def name_of(stack: list[StackResource], type_: str) -> str:
    target = next(r for r in stack if r.type == type_)
    return target.name


def test_security_group_open_to_the_internet_is_caught(aws_stack: list[StackResource]) -> None:
    sg = "aws:ec2/securityGroup:SecurityGroup"
    open_ingress = [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]}]
    stack = tamper(aws_stack, sg, lambda p: {**p, "ingress": open_ingress})
    violations = evaluate(stack, PACK_CONFIG)
    assert findings(violations) == {("no-inbound-from-internet", name_of(stack, sg))}
    assert "0.0.0.0/0" in violations[0].message


def test_public_checkpoint_bucket_is_caught(aws_stack: list[StackResource]) -> None:
    block = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
    policy = "aws:s3/bucketPolicy:BucketPolicy"
    public_read = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "*"}
        ],
    }
    stack = tamper(
        aws_stack,
        block,
        lambda p: {**p, "blockPublicPolicy": False, "restrictPublicBuckets": False},
    )
    stack = tamper(stack, policy, lambda p: {**p, "policy": json.dumps(public_read)})
    assert findings(evaluate(stack, PACK_CONFIG)) == {
        ("checkpoint-storage-not-public", name_of(stack, block)),
        ("checkpoint-storage-not-public", name_of(stack, policy)),
    }


def test_wildcard_role_policy_is_caught(aws_stack: list[StackResource]) -> None:
    role_policy = "aws:iam/rolePolicy:RolePolicy"
    everything = {"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    stack = tamper(aws_stack, role_policy, lambda p: {**p, "policy": json.dumps(everything)})
    violations = evaluate(stack, PACK_CONFIG)
    assert findings(violations) == {("no-iam-wildcards", name_of(stack, role_policy))}


def test_bucket_without_versioning_is_caught(aws_stack: list[StackResource]) -> None:
    stack = [r for r in aws_stack if r.type != "aws:s3/bucketVersioning:BucketVersioning"]
    violations = evaluate(stack, PACK_CONFIG)
    assert findings(violations) == {
        ("checkpoint-storage-complete", name_of(stack, "aws:s3/bucket:Bucket"))
    }
    assert "has no versioning" in violations[0].message


def test_spot_fleet_without_checkpointing_is_caught(aws_spot: list[StackResource]) -> None:
    fleet = "aws:ec2/fleet:Fleet"

    def undeclared(props: dict[str, Any]) -> dict[str, Any]:
        tags = {k: v for k, v in props["tags"].items() if k != "spotroute-checkpointing"}
        return {**props, "tags": tags}

    stack = tamper(aws_spot, fleet, undeclared)
    assert findings(evaluate(stack, PACK_CONFIG)) == {
        ("spot-requires-checkpointing", name_of(stack, fleet))
    }


def test_price_cap_over_budget_is_caught(aws_stack: list[StackResource]) -> None:
    config = {**PACK_CONFIG, "price-within-budget": {"max_price_per_hour": MAX_PRICE - 5}}
    violations = evaluate(aws_stack, config)
    assert findings(violations) == {
        ("price-within-budget", name_of(aws_stack, "aws:ec2/fleet:Fleet"))
    }
    assert "$20/instance-hour exceeds the budget $15" in violations[0].message


def test_region_outside_the_allowed_list_is_caught(aws_stack: list[StackResource]) -> None:
    config = {**PACK_CONFIG, "regions-allowed": {"allowed_regions": ["eu-*"]}}
    violations = evaluate(aws_stack, config)
    # The region lives on the stack's explicit provider; AWS resources inherit it.
    assert findings(violations) == {("regions-allowed", name_of(aws_stack, "pulumi:providers:aws"))}


def test_resource_missing_the_team_label_is_caught(aws_stack: list[StackResource]) -> None:
    vpc = "aws:ec2/vpc:Vpc"
    stack = tamper(
        aws_stack, vpc, lambda p: {**p, "tags": {k: v for k, v in p["tags"].items() if k != "team"}}
    )
    assert findings(evaluate(stack, PACK_CONFIG)) == {("required-labels", name_of(stack, vpc))}


def test_gcp_firewall_allowing_the_internet_is_caught(gcp_stack: list[StackResource]) -> None:
    firewall = "gcp:compute/firewall:Firewall"
    allow_all = {
        "direction": "INGRESS",
        "sourceRanges": ["0.0.0.0/0"],
        "allows": [{"protocol": "tcp", "ports": ["22"]}],
    }
    stack = tamper(gcp_stack, firewall, lambda p: {**p, **allow_all, "denies": []})
    assert findings(evaluate(stack, PACK_CONFIG)) == {
        ("no-inbound-from-internet", name_of(stack, firewall))
    }


def test_gcp_bucket_open_to_public_access_is_caught(gcp_stack: list[StackResource]) -> None:
    bucket = "gcp:storage/bucket:Bucket"
    stack = tamper(gcp_stack, bucket, lambda p: {**p, "publicAccessPrevention": "inherited"})
    violations = evaluate(stack, PACK_CONFIG)
    assert findings(violations) == {("checkpoint-storage-not-public", name_of(stack, bucket))}


def test_gcp_spot_template_without_checkpointing_is_caught(gcp_spot: list[StackResource]) -> None:
    template = "gcp:compute/instanceTemplate:InstanceTemplate"

    def undeclared(props: dict[str, Any]) -> dict[str, Any]:
        labels = {k: v for k, v in props["labels"].items() if k != "spotroute-checkpointing"}
        return {**props, "labels": labels}

    stack = tamper(gcp_spot, template, undeclared)
    assert findings(evaluate(stack, PACK_CONFIG)) == {
        ("spot-requires-checkpointing", name_of(stack, template))
    }


def test_azure_owner_role_assignment_is_caught(azure_stack: list[StackResource]) -> None:
    role = "azure-native:authorization:RoleAssignment"
    [checkpoints] = [
        r for r in azure_stack if r.type == role and not r.name.endswith("-self-delete")
    ]
    owner = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
    scope = checkpoints.props["roleDefinitionId"].rsplit("/", 1)[0]
    stack = [
        replace(r, props={**r.props, "roleDefinitionId": f"{scope}/{owner}"})
        if r is checkpoints
        else r
        for r in azure_stack
    ]
    violations = evaluate(stack, PACK_CONFIG)
    assert findings(violations) == {("no-iam-wildcards", checkpoints.name)}
    assert "assigns the Owner role" in violations[0].message


def test_azure_storage_open_to_anonymous_reads_is_caught(azure_stack: list[StackResource]) -> None:
    account = "azure-native:storage:StorageAccount"
    container = "azure-native:storage:BlobContainer"
    stack = tamper(azure_stack, account, lambda p: {**p, "allowBlobPublicAccess": True})
    stack = tamper(stack, container, lambda p: {**p, "publicAccess": "Container"})
    assert findings(evaluate(stack, PACK_CONFIG)) == {
        ("checkpoint-storage-not-public", name_of(stack, account)),
        ("checkpoint-storage-not-public", name_of(stack, container)),
    }


def test_azure_nsg_rule_allowing_the_internet_is_caught(azure_stack: list[StackResource]) -> None:
    nsg = "azure-native:network:NetworkSecurityGroup"
    ssh_from_anywhere = {
        "name": "ssh-anywhere",
        "direction": "Inbound",
        "access": "Allow",
        "protocol": "Tcp",
        "priority": 200,
        "sourceAddressPrefix": "*",
        "destinationPortRange": "22",
    }
    stack = tamper(
        azure_stack,
        nsg,
        lambda p: {**p, "securityRules": [*p.get("securityRules", []), ssh_from_anywhere]},
    )
    assert findings(evaluate(stack, PACK_CONFIG)) == {
        ("no-inbound-from-internet", name_of(stack, nsg))
    }


def test_advisory_config_reports_the_same_findings_without_blocking(
    aws_stack: list[StackResource],
) -> None:
    config = {**PACK_CONFIG, "all": "advisory", "price-within-budget": {"max_price_per_hour": 1.0}}
    violations = evaluate(aws_stack, config)
    assert [(v.policy, v.enforcement_level) for v in violations] == [
        ("price-within-budget", "advisory")
    ]


# --- the real engine -----------------------------------------------------------------------------


def _look_alike_program(resources: list[tuple[str, str, dict[str, Any]]]) -> Callable[[], None]:
    """A program registering components that carry a cloud resource's type token and inputs.

    The engine analyzes components like any resource, so this drives the pack through the real
    engine without cloud provider plugins.
    """

    def program() -> None:
        import pulumi

        class LookAlike(pulumi.ComponentResource):
            def __init__(self, type_: str, name: str, props: dict[str, Any]) -> None:
                super().__init__(type_, name, props)

        for type_, name, props in resources:
            LookAlike(type_, name, props)

    return program


@pytest.mark.engine
def test_engine_runs_the_pack_and_blocks_a_mandatory_violation(tmp_path: Path) -> None:
    from pulumi import automation as auto

    assert shutil.which("pulumi"), (
        "put the directory `bash scripts/ensure-pulumi.sh --print-dir` prints on PATH"
    )
    launcher = policies.write_launcher(tmp_path / "pack", sys.executable)
    (tmp_path / "state").mkdir()
    pack_config = tmp_path / "policy-config.json"
    pack_config.write_text(json.dumps({"required-labels": "advisory", **PACK_CONFIG}))
    tags = {"spotroute-job": JOB, "managed-by": "spotroute"}  # no team: an advisory finding
    compliant: list[tuple[str, str, dict[str, Any]]] = [
        ("pulumi:providers:aws", "aws", {"region": "us-east-1"}),
        ("aws:ec2/vpc:Vpc", "vpc", {"cidrBlock": "10.42.0.0/16", "tags": tags}),
    ]
    open_sg: tuple[str, str, dict[str, Any]] = (
        "aws:ec2/securityGroup:SecurityGroup",
        "sg",
        {
            "ingress": [
                {"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]}
            ]
        },
    )
    env = {
        "PULUMI_CONFIG_PASSPHRASE": "policy-test",
        "PULUMI_HOME": str(tmp_path / "pulumi-home"),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PATH": os.environ["PATH"],
    }
    project = auto.ProjectSettings(
        name="policy-test",
        runtime="python",
        backend=auto.ProjectBackend(url=f"file://{tmp_path / 'state'}"),
    )

    def preview(resources: list[tuple[str, str, dict[str, Any]]]) -> tuple[bool, str]:
        stack = auto.create_or_select_stack(
            "dev",
            project_name="policy-test",
            program=_look_alike_program(resources),
            opts=auto.LocalWorkspaceOptions(
                work_dir=str(tmp_path), project_settings=project, env_vars=env
            ),
        )
        lines: list[str] = []
        try:
            stack.preview(
                policy_packs=[str(launcher)],
                policy_pack_configs=[str(pack_config)],
                on_output=lines.append,
            )
        except auto.CommandError:
            return False, "\n".join(lines)
        return True, "\n".join(lines)

    passed, output = preview(compliant)
    assert passed, output
    assert "spotroute@v0.1.0" in output
    assert "[advisory]  required-labels" in output

    passed, output = preview([*compliant, open_sg])
    assert not passed
    assert "[mandatory]  no-inbound-from-internet" in output
    assert "ingress (tcp 22) is open to 0.0.0.0/0 — restrict the source" in output
