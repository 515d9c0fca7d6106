"""spotroute's checkpoint library for training code: save, restore, survive preemption.

    from router.checkpoint import Checkpointer
    ckpt = Checkpointer.from_env()
    start = ckpt.restore(model=model, optimizer=optimizer)
    for step in range(start.step, total_steps):
        ...
        ckpt.maybe_save(step + 1)

Standalone: imports nothing else of `router`, no Pulumi, no cloud SDKs, no click/rich. torch,
numpy and fsspec are imported when used. See docs/checkpoints.md.
"""

from router.checkpoint.checkpointer import (
    EXIT_PREEMPTED,
    Checkpointer,
    CheckpointError,
    Resume,
    SaveReport,
)
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
