"""The contract every cloud's components keep (docs/components.md), checked once for all clouds.

The placement program runs under mocks for every registered target × market. Whatever a cloud
creates must be a named child of one of its four components, reach its cloud through the
placement's explicit provider, carry the standard labels, and expose nothing to the internet.
The cloud components (not the local target) also refuse a wrong Args class and an unknown market
at construction, before anything is created. Per-cloud test files hold only what differs between
clouds.
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import CapturedResource, CapturedStack, run_components, run_program
from test_azure import AZURE_CALLS, AZURE_STATES
from test_gcp import GCP_STATES

from components.args import (
    CheckpointBucketArgs,
    JobCommand,
    JobIdentityArgs,
    NetworkArgs,
    SpotGpuGroupArgs,
)
from components.registry import cloud_components
from policies.rules.network import internet_ingress_violations
from policies.rules.resource_types import TAGGABLE_TYPES
from policies.rules.storage import public_storage_violations
from router.contract.clouds import CLOUDS

JOB = "llm-finetune"
COMPONENTS = ("Network", "CheckpointBucket", "JobIdentity", "SpotGpuGroup")
STANDARD = {"spotroute-job": JOB, "team": "ml-platform", "managed-by": "spotroute"}
# Per target: where the job runs and on what, the provider it must use, the mocks it needs.
TARGETS: dict[str, dict[str, Any]] = {
    "aws": {
        "config": {
            "region": "us-east-1",
            "zone": "us-east-1a",
            "dataUrls": ["s3://acme-data/llm/"],
        },
        "instanceTypes": ["p4de.24xlarge", "p4d.24xlarge"],
        "provider": "pulumi:providers:aws",
    },
    "gcp": {
        "config": {
            "region": "us-central1",
            "zone": "us-central1-a",
            "dataUrls": ["gs://acme/llm/"],
        },
        "instanceTypes": ["a2-ultragpu-8g"],
        "provider": "pulumi:providers:gcp",
        "mocks": {"states": GCP_STATES},
    },
    "azure": {
        "config": {"region": "eastus", "zone": "1"},
        "instanceTypes": ["Standard_ND96amsr_A100_v4"],
        "provider": "pulumi:providers:azure-native",
        "mocks": {"calls": AZURE_CALLS, "states": AZURE_STATES},
    },
    "local": {
        "config": {
            "region": "local",
            "maxPrice": 0.0,
            "localSandboxDir": "/srv/spotroute/sandbox/llm-finetune",
            "localCheckpointDir": "/srv/spotroute/checkpoints/llm-finetune",
        },
        "instanceTypes": ["local"],
        "provider": None,  # dynamic resources bring their own provider
        "mocks": {
            "states": {
                # What the dynamic providers would report after creating the directory/process.
                "pulumi-python:dynamic/spotroute:LocalDirectory": lambda _name, inputs: {
                    "path": inputs["directory"],
                    "url": f"file://{inputs['directory']}/",
                },
                "pulumi-python:dynamic/spotroute:LocalProcess": lambda _name, inputs: {
                    "pid": 4242,
                    "sandbox": inputs["sandbox_dir"],
                    "log_path": f"{inputs['sandbox_dir']}/job.log",
                },
            }
        },
    },
}
# The local target's dynamic resources carry their labels as a plain `labels` property.
LOCAL_LABELLED = {
    "pulumi-python:dynamic/spotroute:LocalProcess": "labels",
    "pulumi-python:dynamic/spotroute:LocalDirectory": "labels",
}


def stack_config(cloud: str, market: str) -> dict[str, Any]:
    """A valid `spotroute:*` config (keys without namespace) for one target and market."""
    target = TARGETS[cloud]
    return {
        "jobName": JOB,
        "cloud": cloud,
        "zone": "",
        "instanceTypes": target["instanceTypes"],
        "market": market,
        "maxPrice": 20.0,
        "nodeCount": 2,
        "gpu": "A100-80GB",
        "gpuCount": 8,
        "job": {"image": "ghcr.io/acme/trainer:1.4", "command": ["python", "train.py"]},
        "checkpointing": market == "spot",
        "remoteAccess": False,
        "labels": {"team": "ml-platform", "cost-center": "4711"},
        **target["config"],
    }


def placement(cloud: str, market: str) -> CapturedStack:
    return run_program(stack_config(cloud, market), **TARGETS[cloud].get("mocks", {}))


def labels_of(resource: CapturedResource) -> Any:
    where = TAGGABLE_TYPES.get(resource.type) or LOCAL_LABELLED.get(resource.type)
    return None if where is None else resource.inputs.get(where)


MATRIX = [
    pytest.param(cloud, market, id=f"{cloud}-{market}")
    for cloud in CLOUDS
    for market in ("spot", "on-demand")
]


def test_every_target_is_in_the_matrix_and_registered() -> None:
    assert set(TARGETS) == set(CLOUDS)
    for cloud in CLOUDS:
        assert cloud_components(cloud).cloud == cloud


@pytest.mark.parametrize(("cloud", "market"), MATRIX)
def test_every_resource_is_a_named_child_of_a_component_using_the_placement_provider(
    cloud: str, market: str
) -> None:
    stack = placement(cloud, market)
    provider_type = TARGETS[cloud]["provider"]
    providers = [r for r in stack.resources if r.type.startswith("pulumi:providers:")]

    assert {r.type for r in stack.resources if not r.custom} == {
        f"spotroute:{cloud}:{name}" for name in COMPONENTS
    }
    assert [p.type for p in providers] == ([provider_type] if provider_type else [])
    assert stack.custom_resources()
    for resource in stack.custom_resources():
        assert resource.parent_type.startswith(f"spotroute:{cloud}:"), resource.name
        assert resource.name.startswith(f"{JOB}-"), resource.name
        if provider_type:
            assert resource.provider.startswith(providers[0].urn + "::"), resource.name


@pytest.mark.parametrize(("cloud", "market"), MATRIX)
def test_every_labelled_resource_carries_the_standard_labels(cloud: str, market: str) -> None:
    stack = placement(cloud, market)
    labelled = [r for r in stack.custom_resources() if labels_of(r) is not None]

    assert labelled, "a placement without any labelled resource cannot be found by its labels"
    for resource in labelled:
        assert STANDARD.items() <= labels_of(resource).items(), resource.name
    assert STANDARD.items() <= stack.outputs["labels"].items()
    if market == "spot":
        group = [r for r in labelled if "spotroute-checkpointing" in labels_of(r)]
        assert group, "spot capacity must carry the checkpointing marker"


@pytest.mark.parametrize(("cloud", "market"), MATRIX)
def test_nothing_is_reachable_from_the_internet(cloud: str, market: str) -> None:
    stack = placement(cloud, market)

    for resource in stack.custom_resources():
        assert internet_ingress_violations(resource.type, resource.inputs, {}) == [], resource.name
        assert public_storage_violations(resource.type, resource.inputs, {}) == [], resource.name


# The clouds' components check their Args; the local target records what it is given.
CLOUD_TARGETS = [cloud for cloud in CLOUDS if cloud != "local"]


@pytest.mark.parametrize("cloud", CLOUD_TARGETS)
def test_component_given_the_wrong_args_class_fails_before_creating_anything(cloud: str) -> None:
    args = CheckpointBucketArgs(job_name="llm", region=TARGETS[cloud]["config"]["region"])
    network, mocks = cloud_components(cloud).network, TARGETS[cloud].get("mocks", {})

    with pytest.raises(TypeError, match="NetworkArgs"):
        run_components(lambda: network("llm", args, None), **mocks)  # type: ignore[arg-type]


@pytest.mark.parametrize("cloud", CLOUD_TARGETS)
def test_group_with_unknown_market_fails_at_construction(cloud: str) -> None:
    target, registered = TARGETS[cloud], cloud_components(cloud)
    region = target["config"]["region"]

    def build() -> None:
        network = registered.network("llm", NetworkArgs(job_name="llm", region=region), None)
        bucket = registered.checkpoint_bucket(
            "llm", CheckpointBucketArgs(job_name="llm", region=region), None
        )
        identity = registered.job_identity(
            "llm",
            JobIdentityArgs(job_name="llm", region=region, checkpoint_prefix="llm/"),
            bucket,
            None,
            None,
        )
        registered.gpu_group(
            "llm",
            SpotGpuGroupArgs(
                job_name="llm",
                region=region,
                zone=target["config"]["zone"],
                instance_types=tuple(target["instanceTypes"][:1]),
                market="reserved",
                max_price_per_hour=1.0,
                node_count=1,
                gpu="A100-80GB",
                gpu_count=8,
                boot_disk_gb=100,
                job=JobCommand(image="ghcr.io/acme/t:1", command=("python", "t.py")),
            ),
            network,
            identity,
            bucket,
            None,
        )

    with pytest.raises(ValueError, match="market"):
        run_components(build, **target.get("mocks", {}))
