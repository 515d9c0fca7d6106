"""Cloud name → component module, imported lazily so an AWS stack never loads pulumi_azure_native.

Every cloud module (components/aws.py, gcp.py, azure.py, local.py) has the same shape:

- classes `Network`, `CheckpointBucket`, `JobIdentity`, `SpotGpuGroup` (see docs/components.md);
- `make_provider(name: str, region: str) -> pulumi.ProviderResource | None`: the explicit provider
  for the placement's region (None for the local target, which needs no provider).
"""

from __future__ import annotations

import importlib
from types import ModuleType

CLOUDS: tuple[str, ...] = ("aws", "gcp", "azure", "local")
COMPONENT_NAMES: tuple[str, ...] = (
    "Network",
    "CheckpointBucket",
    "JobIdentity",
    "SpotGpuGroup",
    "make_provider",
)


def cloud_module(cloud: str) -> ModuleType:
    """The components module for `cloud`, checked to have the shared shape."""
    if cloud not in CLOUDS:
        raise ValueError(f"cloud {cloud!r} is not supported — use one of {', '.join(CLOUDS)}")
    module = importlib.import_module(f"components.{cloud}")
    missing = [attr for attr in COMPONENT_NAMES if not hasattr(module, attr)]
    if missing:
        raise ImportError(f"components.{cloud} lacks {', '.join(missing)} — see docs/components.md")
    return module
