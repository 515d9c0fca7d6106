"""The placement program: stack config in, one cloud's components and the stack outputs out."""

from __future__ import annotations

import base64
import json
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import run_components, run_program

from components.program import PlacementConfigError, read_placement_config
from components.registry import cloud_components

REPO = Path(__file__).resolve().parents[2]
REQUIRED_KEYS = [
    "jobName",
    "cloud",
    "region",
    "instanceTypes",
    "market",
    "maxPrice",
    "gpu",
    "gpuCount",
    "job",
]


class RawConfig:
    """pulumi.Config stand-in: values stored as Pulumi stores them (strings, JSON for data)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}

    def get(self, key: str) -> str | None:
        return self.values.get(key)


def test_aws_stack_exports_what_the_router_reads(aws_config: dict[str, Any]) -> None:
    stack = run_program(aws_config)

    assert stack.outputs == {
        "jobName": "llm-finetune",
        "groupId": "llm-finetune-fleet-id",
        "checkpointUrl": stack.outputs["checkpointUrl"],
        "identity": stack.outputs["identity"],
        "maxPrice": 20.0,
        "market": "spot",
        "cloud": "aws",
        "region": "us-east-1",
        "zone": "us-east-1a",
        "instanceTypes": ["p4de.24xlarge", "p4d.24xlarge"],
        "labels": {
            "team": "ml-platform",
            "cost-center": "4711",
            # A checkpointed job says so on its resources: the policy pack's spot rule reads it.
            "spotroute-checkpointing": "true",
            "spotroute-job": "llm-finetune",
            "managed-by": "spotroute",
        },
    }
    assert stack.outputs["checkpointUrl"].endswith("/llm-finetune/")


def test_pulumi_up_entry_point_runs_the_placement_program(aws_config: dict[str, Any]) -> None:
    # Pulumi.yaml `main: components/`: the Python host runs the directory like this.
    stack = run_components(
        lambda: runpy.run_path(str(REPO / "components"), run_name="__main__"),
        aws_config,
        stack="llm-finetune",
    )

    assert stack.outputs["groupId"] == "llm-finetune-fleet-id"
    assert stack.outputs["jobName"] == "llm-finetune"


def test_optional_keys_fall_back_to_documented_defaults(aws_config: dict[str, Any]) -> None:
    minimal = {key: aws_config[key] for key in REQUIRED_KEYS}
    minimal["market"] = "on-demand"

    stack = run_program(minimal)

    fleet = stack.one("aws:ec2/fleet:Fleet").inputs
    assert fleet["targetCapacitySpecification"]["totalTargetCapacity"] == 1
    template = stack.one("aws:ec2/launchTemplate:LaunchTemplate").inputs
    assert template["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 200
    (ingress,) = stack.one("aws:ec2/securityGroup:SecurityGroup").inputs["ingress"]
    assert ingress["self"] is True  # the job's own nodes, nothing else
    assert stack.outputs["zone"] == ""
    assert stack.outputs["labels"]["team"] == "unassigned"


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_missing_required_key_fails_naming_the_key_and_creates_nothing(
    aws_config: dict[str, Any], key: str
) -> None:
    del aws_config[key]

    with pytest.raises(PlacementConfigError, match=rf"spotroute:{key}: missing") as failure:
        run_program(aws_config)
    assert "stacks/Pulumi." in str(failure.value)


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("jobName", "LLM_Finetune", "jobName"),
        ("cloud", "oracle", "cloud"),
        ("market", "spott", "market"),
        ("maxPrice", -1, "maxPrice"),
        ("maxPrice", "cheap", "maxPrice"),
        ("nodeCount", 0, "nodeCount"),
        ("nodeCount", 1.5, "nodeCount"),
        ("gpuCount", "eight", "gpuCount"),
        ("bootDiskGb", 5, "bootDiskGb"),
        ("instanceTypes", "p4d.24xlarge", "instanceTypes"),
        ("instanceTypes", [], "instanceTypes"),
        ("checkpointing", "yes", "checkpointing"),
        ("checkpointUrl", "gs://acme-checkpoints/", "checkpointUrl"),
        ("remoteAccess", "yes", "remoteAccess"),
        ("sshCidrs", ["203.0.113.0/24"], "sshCidrs"),
        ("labels", {"Team": "ml"}, "labels.Team"),
        ("labels", ["team=ml"], "labels"),
        ("job", {"imagee": "ghcr.io/acme/t:1"}, "job.imagee"),
        ("job", {"image": "", "command": []}, "job"),
        ("job", {"command": "python train.py"}, "job.command"),
        ("job", {"command": ["t"], "env": {"EPOCHS": 3}}, "job.env"),
        ("job", {"command": ["t"], "env": {"SPOTROUTE_JOB_ID": "x"}}, "job.env.SPOTROUTE_JOB_ID"),
    ],
)
def test_invalid_value_fails_naming_the_key(
    aws_config: dict[str, Any], key: str, value: Any, named: str
) -> None:
    aws_config[key] = value

    with pytest.raises(PlacementConfigError, match=rf"spotroute:{named}: ") as failure:
        run_program(aws_config)
    assert "\n" not in str(failure.value)


def test_spot_for_a_job_without_checkpoints_is_refused(aws_config: dict[str, Any]) -> None:
    aws_config["checkpointing"] = False

    with pytest.raises(PlacementConfigError, match="spotroute:market: spot needs a job"):
        run_program(aws_config)


def test_misspelt_key_is_refused_instead_of_ignored(aws_config: dict[str, Any]) -> None:
    aws_config["maxprice"] = 5.0

    with pytest.raises(PlacementConfigError, match="spotroute:maxprice: unknown key"):
        run_program(aws_config)


def test_config_in_other_namespaces_is_left_alone(aws_config: dict[str, Any]) -> None:
    stack = run_program({**aws_config, "aws:region": "ap-south-1"})

    assert stack.one("pulumi:providers:aws").inputs["region"] == "us-east-1"


def test_config_reader_works_on_plain_strings_as_pulumi_stores_them(
    aws_config: dict[str, Any],
) -> None:
    placement = read_placement_config(RawConfig(aws_config))

    assert placement.instance_types == ("p4de.24xlarge", "p4d.24xlarge")
    assert placement.max_price_per_hour == 20.0
    assert placement.job.command == ("python", "train.py", "--resume")
    assert placement.labels == {"team": "ml-platform", "cost-center": "4711"}


def test_numeric_label_values_are_kept_as_text(aws_config: dict[str, Any]) -> None:
    placement = read_placement_config(RawConfig({**aws_config, "labels": {"cost-center": 4711}}))

    assert placement.labels == {"cost-center": "4711"}


def test_unknown_cloud_is_refused_by_the_registry() -> None:
    with pytest.raises(ValueError, match="oracle"):
        cloud_components("oracle")


def test_aws_stack_never_imports_other_clouds_sdks() -> None:
    script = (
        "import sys\n"
        "from components.registry import cloud_components\n"
        "import components.program\n"
        "cloud_components('aws')\n"
        "print(sorted(m for m in ('pulumi_gcp', 'pulumi_azure_native') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    )

    assert result.stdout.strip() == "[]"


def test_users_cannot_set_the_checkpointing_label_themselves(aws_config: dict[str, Any]) -> None:
    config = {**aws_config, "labels": {"team": "ml", "spotroute-checkpointing": "true"}}
    with pytest.raises(Exception, match=r"labels\.spotroute-checkpointing"):
        run_program(config)


def test_jobs_without_checkpointing_carry_no_checkpointing_label(
    aws_config: dict[str, Any],
) -> None:
    config = {**aws_config, "market": "on-demand", "checkpointing": False}
    stack = run_program(config)
    assert "spotroute-checkpointing" not in stack.outputs["labels"]


def test_checkpoint_interval_is_read_into_the_job_and_reaches_the_node(
    aws_config: dict[str, Any],
) -> None:
    placement = read_placement_config(RawConfig({**aws_config, "checkpointIntervalS": 1800}))
    assert placement.job.checkpoint_interval_s == 1800
    assert read_placement_config(RawConfig(aws_config)).job.checkpoint_interval_s == 0
    with pytest.raises(PlacementConfigError, match="spotroute:checkpointIntervalS: "):
        read_placement_config(RawConfig({**aws_config, "checkpointIntervalS": -5}))

    stack = run_program({**aws_config, "checkpointIntervalS": 600})
    data = stack.one("aws:ec2/launchTemplate:LaunchTemplate").inputs["userData"]
    assert "export SPOTROUTE_CHECKPOINT_INTERVAL=600" in base64.b64decode(data).decode()
