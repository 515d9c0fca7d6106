"""The per-cloud contract: what each cloud module provides, and the one registry of them.

Every cloud module (components/aws.py, gcp.py, azure.py, local.py) ends with
`COMPONENTS = CloudComponents(cloud, make_provider, Network, CheckpointBucket, JobIdentity,
SpotGpuGroup)`; mypy checks each against the types below, so a module that drifts fails the
type check, not a deploy. `cloud_components(cloud)` imports only that cloud's module: an AWS
stack never loads pulumi_azure_native. Adding a cloud = one module + one line in `_MODULES`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import pulumi

from components.args import (
    CheckpointBucketArgs,
    JobIdentityArgs,
    NetworkArgs,
    ProviderArgs,
    SpotGpuGroupArgs,
)
from router.contract.clouds import CLOUDS, Cloud


class NetworkOutputs(Protocol):
    """What every Network exposes (docs/components.md)."""

    @property
    def network_id(self) -> pulumi.Output[str]: ...
    @property
    def subnet_id(self) -> pulumi.Output[str]: ...
    @property
    def firewall_id(self) -> pulumi.Output[str]: ...
    @property
    def resource_group_name(self) -> pulumi.Output[str] | None:
        """Azure: the job's resource group; None where a cloud has no such thing."""


class BucketOutputs(Protocol):
    """What every CheckpointBucket exposes."""

    @property
    def bucket_name(self) -> pulumi.Output[str]: ...
    @property
    def url(self) -> pulumi.Output[str]: ...
    @property
    def arn_or_id(self) -> pulumi.Output[str]: ...


class IdentityOutputs(Protocol):
    """What every JobIdentity exposes."""

    @property
    def identity_id(self) -> pulumi.Output[str]: ...
    @property
    def checkpoint_url(self) -> pulumi.Output[str]: ...


class GroupOutputs(Protocol):
    """What every SpotGpuGroup exposes."""

    @property
    def group_id(self) -> pulumi.Output[str]: ...
    @property
    def checkpoint_url(self) -> pulumi.Output[str]: ...


N = TypeVar("N", bound=NetworkOutputs)
B = TypeVar("B", bound=BucketOutputs)
I = TypeVar("I", bound=IdentityOutputs)  # noqa: E741 (the identity's type, next to N and B)
Opts = pulumi.ResourceOptions | None


@dataclass(frozen=True)
class CloudComponents(Generic[N, B, I]):
    """One cloud's provider factory and four component constructors, typed per cloud."""

    cloud: Cloud
    make_provider: Callable[[str, ProviderArgs], pulumi.ProviderResource | None]
    network: Callable[[str, NetworkArgs, Opts], N]
    checkpoint_bucket: Callable[[str, CheckpointBucketArgs, Opts], B]
    # (name, args, checkpoint bucket, opts, staging bucket for copied data or None)
    job_identity: Callable[[str, JobIdentityArgs, B, Opts, B | None], I]
    gpu_group: Callable[[str, SpotGpuGroupArgs, N, I, B, Opts], GroupOutputs]


AnyCloudComponents = CloudComponents[Any, Any, Any]

_MODULES: dict[Cloud, str] = {cloud: f"components.{cloud}" for cloud in CLOUDS}


def cloud_components(cloud: str) -> AnyCloudComponents:
    """The registered components of `cloud`; ValueError naming the choices for any other."""
    if cloud not in _MODULES:
        raise ValueError(f"cloud {cloud!r} is not supported — use one of {', '.join(CLOUDS)}")
    registered = importlib.import_module(_MODULES[cloud]).COMPONENTS
    if not isinstance(registered, CloudComponents) or registered.cloud != cloud:
        raise TypeError(f"{_MODULES[cloud]}.COMPONENTS is not {cloud}'s CloudComponents")
    return registered
