"""What the router reads and writes next to a job's checkpoints (the checkpoint library's files).

The layout is the checkpoint library's (router/checkpoint/manifest.py, issue 8):

  <url>/step-<12 digits>/manifest.json   written last; counts only when every file it lists
                                         has its size and checksum ("spotroute-checkpoint/1":
                                         `checksum` + `checksum_algorithm` crc32c|crc32, as
                                         router.checkpoint writes; or `crc32`, the example's)
  <url>/interruption.json                the library's marker after a preemption notice

and two files of the hand-over protocol the router adds (docs/migration.md):

  <url>/save-request.json   written by the router: {"id", "placement", "requested_at"}. The job
                            running as that placement (SPOTROUTE_PLACEMENT_ID) saves now, puts
                            the id in the manifest's extra.request, and holds (makes no more
                            progress) while the request stands; removing it lets the job go on.
  <url>/resumed.json        written by the job when it starts: {"step", "placement", "time"},
                            the step it restored — how the router confirms a new placement.

This reader is deliberately small; it handles file:// URLs (the local target). Copying a
checkpoint between storages (file, s3, gs, az) is router.config.checkpoint_copy, with fsspec.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from router.core.errors import OperationFailed

FORMAT = "spotroute-checkpoint/1"
MANIFEST_NAME = "manifest.json"
MARKER_NAME = "interruption.json"
REQUEST_NAME = "save-request.json"
RESUMED_NAME = "resumed.json"
FINISHED_NAME = "finished.json"
STEP_PREFIX = "step-"


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """One complete, verified checkpoint."""

    step: int
    time: datetime | None
    path: Path
    total_bytes: int
    request: str | None  # the save request it answered, if any
    placement: str  # the placement (stack) that wrote it, if the job said


def checkpoint_dir(url: str) -> Path:
    """The directory of a file:// checkpoint URL; OperationFailed for other schemes (for now)."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise OperationFailed(
            f"checkpoint URL {url}: only file:// checkpoints can be read by the router yet — "
            "migration between clouds needs the checkpoint library's storage (issue 8)"
        )
    return Path(parsed.path)


def _verify(step_dir: Path) -> CheckpointInfo | None:
    try:
        data = json.loads((step_dir / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    total = 0
    try:
        for entry in data["files"]:
            algorithm, want = entry_checksum(data, entry)
            blob = (step_dir / str(entry["path"])).read_bytes()
            if len(blob) != int(entry["size"]) or checksum(blob, algorithm) != want:
                return None
            total += len(blob)
        step = int(data["step"])
    except (OSError, KeyError, TypeError, ValueError):
        return None
    extra = data.get("extra") or {}
    try:
        at = datetime.fromisoformat(str(data.get("time")))
    except ValueError:
        at = None
    return CheckpointInfo(
        step=step,
        time=at,
        path=step_dir,
        total_bytes=total,
        request=extra.get("request") if isinstance(extra, dict) else None,
        placement=str(extra.get("placement", "")) if isinstance(extra, dict) else "",
    )


def entry_checksum(manifest: dict[str, Any], entry: dict[str, Any]) -> tuple[str, str]:
    """(algorithm, hex) a manifest gives for one file: the library's `checksum` with the
    manifest's `checksum_algorithm`, or the older `crc32` field."""
    if "checksum" in entry:
        return str(manifest.get("checksum_algorithm", "crc32")), str(entry["checksum"])
    return "crc32", str(entry["crc32"])


class Checksum:
    """An incremental CRC-32C (google-crc32c) or CRC-32 (zlib), as 8 hex digits."""

    def __init__(self, algorithm: str) -> None:
        if algorithm not in ("crc32", "crc32c"):
            raise ValueError(f"unknown checksum algorithm {algorithm!r}")
        self.algorithm, self.value = algorithm, 0

    def update(self, data: bytes) -> None:
        if self.algorithm == "crc32":
            self.value = zlib.crc32(data, self.value)
        else:
            try:
                import google_crc32c
            except ImportError:
                raise OperationFailed(
                    "this checkpoint uses crc32c checksums — pip install google-crc32c"
                ) from None
            self.value = int(google_crc32c.extend(self.value, data))

    def hexdigest(self) -> str:
        return f"{self.value & 0xFFFFFFFF:08x}"


def checksum(data: bytes, algorithm: str) -> str:
    """The checksum of `data` as a manifest writes it."""
    c = Checksum(algorithm)
    c.update(data)
    return c.hexdigest()


def complete_checkpoints(directory: Path) -> list[CheckpointInfo]:
    """Every complete checkpoint in the directory, newest (highest step) first."""
    if not directory.is_dir():
        return []
    found = []
    for entry in sorted(directory.iterdir(), reverse=True):
        if entry.is_dir() and entry.name.startswith(STEP_PREFIX):
            info = _verify(entry)
            if info is not None:
                found.append(info)
    return found


def latest_checkpoint(directory: Path) -> CheckpointInfo | None:
    found = complete_checkpoints(directory)
    return found[0] if found else None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def request_save(directory: Path, request_id: str, placement: str, at: datetime) -> None:
    """Ask the job running as `placement` to save now and hold (idempotent for one id)."""
    current = _read(directory / REQUEST_NAME)
    if current and current.get("id") == request_id:
        return
    _write(
        directory / REQUEST_NAME,
        {"id": request_id, "placement": placement, "requested_at": at.isoformat()},
    )


def withdraw_request(directory: Path, request_id: str | None = None) -> None:
    """Let the job go on (rollback) or clean up after the hand-over; only our own request."""
    current = _read(directory / REQUEST_NAME)
    if current is not None and (request_id is None or current.get("id") == request_id):
        (directory / REQUEST_NAME).unlink(missing_ok=True)


def answered(directory: Path, request_id: str) -> CheckpointInfo | None:
    """The complete checkpoint that answers the save request, if written yet."""
    for info in complete_checkpoints(directory):
        if info.request == request_id:
            return info
    return None


def resumed(directory: Path) -> dict[str, Any] | None:
    """The job's last resume record: {"step", "placement", "time"}."""
    return _read(directory / RESUMED_NAME)


def marker(directory: Path) -> dict[str, Any] | None:
    """The library's interruption marker: {"cloud", "kind", "notice_time", "last_step", ...}."""
    return _read(directory / MARKER_NAME)


def finished(directory: Path) -> dict[str, Any] | None:
    """The job's record that it ran to the end: {"step", "time"}."""
    return _read(directory / FINISHED_NAME)
