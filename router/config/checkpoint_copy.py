"""Copying a complete checkpoint from one storage to another (route migrate between clouds).

When a job moves to a placement whose checkpoint URL is elsewhere (another cloud's bucket, or
from the local disk into one), the router copies the hand-over checkpoint there with fsspec
(file://, s3:// with s3fs, gs:// with gcsfs, az:// with adlfs; credentials and endpoints as those
drivers read them: AWS_* / AWS_ENDPOINT_URL, Application Default Credentials /
STORAGE_EMULATOR_HOST, AZURE_STORAGE_*). It keeps the checkpoint library's rules
(router/checkpoint/manifest.py): every file is checked against the manifest's size and checksum
while it is read from the source, read back from the target and checked again, and the manifest
is written last — so a copy torn by a kill never counts, and running the copy again finishes it.
A target that already holds the same complete checkpoint is left alone.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from router.config.checkpoints import (
    FORMAT,
    MANIFEST_NAME,
    STEP_PREFIX,
    Checksum,
    entry_checksum,
    missing_ranks,
    storage_fs,
)
from router.core.errors import OperationFailed

BLOCK = 8 << 20  # bytes per read while copying


@dataclass(frozen=True, slots=True)
class Copied:
    """One checkpoint copied (or found already there): where from, where to, how much, how long."""

    step: int
    source: str
    target: str
    files: int
    bytes: int
    seconds: float
    already_there: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def same_storage(a: str, b: str) -> bool:
    """Whether two checkpoint URLs name the same place (then there is nothing to copy)."""
    return a.rstrip("/") == b.rstrip("/")


def step_url(url: str, step: int) -> str:
    return f"{url.rstrip('/')}/{STEP_PREFIX}{step:012d}"


def copy_checkpoint(
    source_url: str, target_url: str, step: int, *, options: dict[str, dict[str, Any]] | None = None
) -> Copied:
    """Copy checkpoint `step` from `source_url` to `target_url`, verified; manifest last.

    `options` maps a URL scheme to fsspec storage options (tests: the servers' endpoints);
    without it each driver reads the environment. OperationFailed names what is wrong.
    """
    started = time.monotonic()
    src_fs, src_dir = storage_fs(step_url(source_url, step), options)
    dst_fs, dst_dir = storage_fs(step_url(target_url, step), options)
    manifest_blob = _read(src_fs, f"{src_dir}/{MANIFEST_NAME}", source_url)
    manifest = _manifest(manifest_blob, step, source_url)
    entries = manifest["files"]
    total = sum(int(e["size"]) for e in entries)
    if _complete(dst_fs, dst_dir, manifest):
        return Copied(step, source_url, target_url, len(entries), total,
                      time.monotonic() - started, True)  # fmt: skip
    try:
        if dst_fs.exists(f"{dst_dir}/{MANIFEST_NAME}"):
            dst_fs.rm_file(f"{dst_dir}/{MANIFEST_NAME}")  # a different or torn one: not ours
        dst_fs.makedirs(dst_dir, exist_ok=True)
    except OSError as exc:
        raise OperationFailed(f"checkpoint copy: cannot write {target_url}: {exc}") from None
    for entry in entries:
        algorithm, want = entry_checksum(manifest, entry)
        name = str(entry["path"])
        got = _copy_file(src_fs, f"{src_dir}/{name}", dst_fs, f"{dst_dir}/{name}", algorithm,
                         source_url, target_url)  # fmt: skip
        if got != (int(entry["size"]), want):
            raise OperationFailed(
                f"checkpoint copy: {source_url} step {step}: {name} does not match its manifest "
                f"(size/checksum {got[0]}/{got[1]}, manifest {entry['size']}/{want}) — the "
                "source checkpoint is damaged; nothing was handed over"
            )
        back = _checksum_of(dst_fs, f"{dst_dir}/{name}", algorithm, target_url)
        if back != got:
            raise OperationFailed(
                f"checkpoint copy: {target_url} step {step}: {name} reads back as {back[0]} bytes "
                f"/{back[1]}, not {got[0]}/{got[1]} — the target storage lost data; retry"
            )
    try:
        with dst_fs.open(f"{dst_dir}/{MANIFEST_NAME}", "wb") as f:
            f.write(manifest_blob)
    except OSError as exc:
        raise OperationFailed(f"checkpoint copy: cannot write {target_url}: {exc}") from None
    return Copied(step, source_url, target_url, len(entries), total,
                  time.monotonic() - started, False)  # fmt: skip


def latest_complete_step(
    url: str, *, options: dict[str, dict[str, Any]] | None = None
) -> int | None:
    """The highest step under `url` whose manifest and files all check out (None: none)."""
    fs, root = storage_fs(url.rstrip("/"), options)
    try:
        names = [str(n).rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(root, detail=False)]
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OperationFailed(f"checkpoints at {url}: cannot list: {exc}") from None
    steps = sorted((int(n[len(STEP_PREFIX):]) for n in names
                    if n.startswith(STEP_PREFIX) and n[len(STEP_PREFIX):].isdigit()),
                   reverse=True)  # fmt: skip
    for step in steps:
        directory = f"{root.rstrip('/')}/{STEP_PREFIX}{step:012d}"
        try:
            manifest = json.loads(fs.cat_file(f"{directory}/{MANIFEST_NAME}"))
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and not missing_ranks(manifest) and _complete(
            fs, directory, manifest
        ):
            return step
    return None


# --- helpers -------------------------------------------------------------------------------------


def _read(fs: Any, path: str, url: str) -> bytes:
    try:
        return bytes(fs.cat_file(path))
    except FileNotFoundError:
        raise OperationFailed(
            f"checkpoint copy: {url} has no manifest at {path} — that step is not complete there"
        ) from None
    except OSError as exc:
        raise OperationFailed(f"checkpoint copy: cannot read {url}: {exc}") from None


def _manifest(blob: bytes, step: int, url: str) -> dict[str, Any]:
    try:
        data = json.loads(blob)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not {FORMAT}")
        if int(data["step"]) != step or not isinstance(data["files"], list):
            raise ValueError("step or files do not match")
        for entry in data["files"]:
            entry_checksum(data, entry)
            path = str(entry["path"])
            if not path or path.startswith("/") or ".." in path.split("/"):
                raise ValueError(f"file path {path!r} leaves the checkpoint directory")
        if missing := missing_ranks(data):
            raise ValueError(
                f"no part of rank(s) {', '.join(map(str, missing))} of {data.get('world_size')}: "
                "not a checkpoint of the whole group"
            )
    except (ValueError, KeyError, TypeError) as exc:
        raise OperationFailed(f"checkpoint copy: {url} step {step}: bad manifest ({exc})") from None
    return data


def _complete(fs: Any, directory: str, manifest: dict[str, Any]) -> bool:
    """Whether `directory` holds this manifest and every file it lists, checked."""
    try:
        there = json.loads(fs.cat_file(f"{directory}/{MANIFEST_NAME}"))
    except (OSError, ValueError):
        return False
    if there != manifest:
        return False
    try:
        for entry in manifest["files"]:
            algorithm, want = entry_checksum(manifest, entry)
            got = _checksum_of(fs, f"{directory}/{entry['path']}", algorithm, directory)
            if got != (int(entry["size"]), want):
                return False
    except (OperationFailed, KeyError, TypeError, ValueError):
        return False
    return True


def _copy_file(src_fs: Any, src: str, dst_fs: Any, dst: str, algorithm: str, src_url: str,
               dst_url: str) -> tuple[int, str]:  # fmt: skip
    """Stream one file across; (size, checksum) of what was read from the source."""
    check, size = Checksum(algorithm), 0
    try:
        parent = dst.rsplit("/", 1)[0]
        dst_fs.makedirs(parent, exist_ok=True)
        with src_fs.open(src, "rb") as reader, dst_fs.open(dst, "wb") as writer:
            while block := reader.read(BLOCK):
                check.update(block)
                size += len(block)
                writer.write(block)
    except FileNotFoundError:
        raise OperationFailed(f"checkpoint copy: {src_url}: {src} is missing") from None
    except OSError as exc:
        raise OperationFailed(f"checkpoint copy {src_url} → {dst_url}: {exc}") from None
    return size, check.hexdigest()


def _checksum_of(fs: Any, path: str, algorithm: str, url: str) -> tuple[int, str]:
    check, size = Checksum(algorithm), 0
    try:
        with fs.open(path, "rb") as reader:
            while block := reader.read(BLOCK):
                check.update(block)
                size += len(block)
    except OSError as exc:
        raise OperationFailed(f"checkpoint at {url}: cannot read {path}: {exc}") from None
    return size, check.hexdigest()
