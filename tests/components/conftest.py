"""Fixtures for component tests: the mock harness (see harness.py) and a valid AWS stack config."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from harness import CapturedStack, run_components, run_program


@pytest.fixture
def aws_config() -> dict[str, Any]:
    """A complete, valid `spotroute:*` config for an AWS spot placement (keys without namespace)."""
    return {
        "jobName": "llm-finetune",
        "cloud": "aws",
        "region": "us-east-1",
        "zone": "us-east-1a",
        "instanceTypes": ["p4de.24xlarge", "p4d.24xlarge"],
        "market": "spot",
        "maxPrice": 20.0,
        "nodeCount": 2,
        "gpu": "A100-80GB",
        "gpuCount": 8,
        "bootDiskGb": 200,
        "job": {
            "image": "ghcr.io/acme/trainer:1.4",
            "command": ["python", "train.py", "--resume"],
            "env": {"EPOCHS": "3"},
        },
        "checkpointing": True,
        "checkpointUrl": "",
        "dataUrls": ["s3://acme-datasets/llm/"],
        "remoteAccess": False,
        "labels": {"team": "ml-platform", "cost-center": "4711"},
        "pricePerHour": 12.5,
        "priceSource": "aws-api",
    }


@pytest.fixture
def program() -> Callable[..., CapturedStack]:
    """harness.run_program: run the placement program with a config dict."""
    return run_program


@pytest.fixture
def components() -> Callable[..., CapturedStack]:
    """harness.run_components: run any callable that builds components."""
    return run_components


def pytest_configure(config: pytest.Config) -> None:
    # pulumi_aws.s3 imports its own deprecated *V2 aliases, which warn on import; not ours to fix.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:pulumi_aws.*")
