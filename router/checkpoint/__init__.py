"""spotroute's checkpoint library for training code: save, restore, survive preemption.

    from router.checkpoint import Checkpointer
    ckpt = Checkpointer.from_env()
    start = ckpt.restore(model=model, optimizer=optimizer)
    for step in range(start.step, total_steps):
        ...
        ckpt.maybe_save(step + 1)

Standalone: imports nothing else of `router`, no Pulumi, no cloud SDKs, no click/rich. torch,
numpy and fsspec are imported when used. See docs/checkpoints.md.

The names below are imported on first use, so `router.checkpoint.interval` (the pure interval
formulas the router's `route plan --explain` shows) loads without the rest of the library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router.checkpoint.checkpointer import Checkpointer
    from router.checkpoint.interval import (
        daly_interval_s,
        parse_interval_s,
        suggested_interval_s,
        young_interval_s,
    )
    from router.checkpoint.manifest import MANIFEST_NAME, MARKER_NAME, FileEntry, Manifest
    from router.checkpoint.notices import (
        AwsNotices,
        AzureNotices,
        GcpNotices,
        Notice,
        NoticeSource,
        SigtermNotices,
    )
    from router.checkpoint.results import EXIT_PREEMPTED, CheckpointError, Resume, SaveReport

_HOME = {
    "router.checkpoint.checkpointer": ("Checkpointer",),
    "router.checkpoint.interval": (
        "daly_interval_s", "parse_interval_s", "suggested_interval_s", "young_interval_s",
    ),
    "router.checkpoint.manifest": ("MANIFEST_NAME", "MARKER_NAME", "FileEntry", "Manifest"),
    "router.checkpoint.notices": (
        "AwsNotices", "AzureNotices", "GcpNotices", "Notice", "NoticeSource", "SigtermNotices",
    ),
    "router.checkpoint.results": ("EXIT_PREEMPTED", "CheckpointError", "Resume", "SaveReport"),
}  # fmt: skip
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}

__all__ = [
    "EXIT_PREEMPTED",
    "MANIFEST_NAME",
    "MARKER_NAME",
    "AwsNotices",
    "AzureNotices",
    "CheckpointError",
    "Checkpointer",
    "FileEntry",
    "GcpNotices",
    "Manifest",
    "Notice",
    "NoticeSource",
    "Resume",
    "SaveReport",
    "SigtermNotices",
    "daly_interval_s",
    "parse_interval_s",
    "suggested_interval_s",
    "young_interval_s",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'router.checkpoint' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
