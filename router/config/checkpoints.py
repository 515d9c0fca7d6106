"""What the router reads and writes next to a job's checkpoints (the checkpoint library's files).

The layout is the checkpoint library's (router/checkpoint/manifest.py, issue 8):

  <url>/step-<12 digits>/manifest.json   written last; counts only when every file it lists
                                         has its size and checksum ("spotroute-checkpoint/1":
                                         `checksum` + `checksum_algorithm` xxh3-64|crc32|
                                         crc32c, as router.checkpoint writes; or `crc32`, the
                                         example's)
  <url>/interruption.json                the library's marker after a preemption notice

and the files of the hand-over protocol (docs/migration.md):

  <url>/save-request.json   written by the router: {"id", "placement", "requested_at"}. The job
                            running as that placement (SPOTROUTE_PLACEMENT_ID) saves now, puts
                            the id in the manifest's extra.request, and holds (makes no more
                            progress) while the request stands; removing it lets the job go on.
  <url>/resumed.json        written by the job when it starts: {"step", "placement", "time"},
                            the step it restored — how the router confirms a new placement.
  <url>/finished.json       written by the job at the end: {"step", "time"}.
  <url>/handover-expired.json    the old placement ended its hold after SPOTROUTE_HOLD_TIMEOUT
                                 (the router gone): {"id", "placement", "step", "held_s", …}
  <url>/handover-abandoned.json  a new placement stopped, its move never completed within
                                 SPOTROUTE_HANDOVER_TIMEOUT: {"id", "placement", "step", …}
  <url>/handover-complete.json   written by the router in the new placement's storage once the
                                 old placement is down: {"id", "placement", "completed_at"}

and what each cloud node says when the job ends there (components/node_exit.py):

  <url>/exit-<node>.json    {"format": "spotroute-exit/1", "node", "status",
                            "interruption_marker", "placement", "job", "time"}
                            (a local node adds "group", its group id)
  <url>/boot-<node>.json    {"format": "spotroute-boot/1", "node", "placement", "job", "time"}:
                            the node's start-up script ran (again) at that time

Every URL the checkpoints use works here, through fsspec: file:// (or a plain path), s3:// (s3fs),
gs:// (gcsfs), az:// / abfs:// and the Azure stack's https://<account>.blob.core.windows.net/...
(adlfs); credentials and endpoints as those drivers read them (AWS_* / AWS_ENDPOINT_URL,
Application Default Credentials / STORAGE_EMULATOR_HOST, AZURE_STORAGE_*). Small files are
written whole: a temp name then a rename on a disk, one PUT on an object store, so a reader never
sees half of one. Copying a checkpoint between storages is router.config.checkpoint_copy.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
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
EXIT_PREFIX = "exit-"  # exit-<node>.json
BOOT_PREFIX = "boot-"  # boot-<node>.json
EXPIRED_NAME = "handover-expired.json"
ABANDONED_NAME = "handover-abandoned.json"
COMPLETE_NAME = "handover-complete.json"
STEP_PREFIX = "step-"
AZURE_BLOB_SUFFIX = ".blob.core.windows.net"
BLOCK = 8 << 20  # bytes per read while checksumming


class CheckpointStorageError(OperationFailed):
    """The checkpoint storage cannot be opened, read or written (no driver, no access, down)."""


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """One complete, verified checkpoint."""

    step: int
    time: datetime | None
    path: str  # its step directory: a local path, or the storage's path (bucket/prefix/step-…)
    total_bytes: int
    request: str | None  # the save request it answered, if any
    placement: str  # the placement (stack) that wrote it, if the job said


def storage_fs(url: str, options: dict[str, dict[str, Any]] | None = None) -> tuple[Any, str]:
    """(fsspec filesystem, path) for a checkpoint URL; `options` maps a scheme to fsspec storage
    options (tests: the servers' endpoints), else each driver reads the environment."""
    import fsspec.core

    parsed = urlparse(url)
    extra: dict[str, Any] = {}
    if parsed.scheme == "https" and parsed.netloc.lower().endswith(AZURE_BLOB_SUFFIX):
        # The Azure stack's blob URL: the container and prefix under the account's endpoint.
        extra = {"account_name": parsed.netloc.lower().removesuffix(AZURE_BLOB_SUFFIX)}
        url = f"abfs://{parsed.path.lstrip('/')}"
    scheme = url.split("://", 1)[0] if "://" in url else "file"
    try:
        fs, path = fsspec.core.url_to_fs(
            url, skip_instance_cache=True, **{**extra, **(options or {}).get(scheme, {})}
        )
    except (ImportError, ValueError) as exc:
        raise CheckpointStorageError(
            f"checkpoint URL {url}: no storage driver for {scheme}:// ({exc}) — pip install "
            "s3fs / gcsfs / adlfs"
        ) from None
    return fs, str(path)


@dataclass(frozen=True)
class CheckpointStore:
    """A job's checkpoint root on some storage: the URL, its fsspec filesystem and root path."""

    url: str
    fs: Any = field(repr=False)  # fsspec.AbstractFileSystem (fsspec ships no type information)
    root: str

    @property
    def is_local(self) -> bool:
        protocol = self.fs.protocol
        return bool({"file", "local"} & set((protocol,) if isinstance(protocol, str) else protocol))

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def read_json(self, name: str) -> dict[str, Any] | None:
        """A small JSON file under the root; None when it is missing or not a JSON object."""
        try:
            data = json.loads(self.read_bytes(self.path(name)))
        except FileNotFoundError:
            return None
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def read_bytes(self, path: str) -> bytes:
        """The file at `path`; FileNotFoundError when missing, OperationFailed when unreadable."""
        # s3fs answers from its listing cache: a file the job wrote after the last listing reads
        # as missing, one it rewrote with the old size. The hand-over files change: read afresh.
        self.fs.invalidate_cache(path)
        try:
            return bytes(self.fs.cat_file(path))
        except FileNotFoundError:
            raise
        except Exception as exc:  # drivers raise their SDK's own errors (no credentials, 403)
            raise self._failed(f"cannot read {path}", exc) from None

    def write_json(self, name: str, data: dict[str, Any]) -> None:
        """Write a small file whole: temp name + rename on a disk, one PUT on an object store."""
        blob = (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()
        path = self.path(name)
        try:
            if self.is_local:  # a rename within the directory replaces the file at once
                tmp = posixpath.join(self.root, f".{name}.tmp-{os.getpid()}")
                self.fs.makedirs(self.root, exist_ok=True)
                self.fs.pipe_file(tmp, blob)
                self.fs.mv(tmp, path)
            else:
                self.fs.pipe_file(path, blob)
        except Exception as exc:
            raise self._failed(f"cannot write {name}", exc) from None

    def remove(self, name: str) -> None:
        try:
            self.fs.rm_file(self.path(name))
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise self._failed(f"cannot remove {name}", exc) from None
        self.fs.invalidate_cache(self.root)

    def _failed(self, what: str, exc: Exception) -> CheckpointStorageError:
        kind = type(exc).__name__
        return CheckpointStorageError(f"checkpoints at {self.url}: {what}: {kind}: {exc}")

    def names(self) -> set[str]:
        """The names directly under the root (files and directories)."""
        self.fs.invalidate_cache(self.root)  # the job writes here: never trust a cached listing
        try:
            found = self.fs.ls(self.root, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return set()
        except Exception as exc:
            raise self._failed("cannot list", exc) from None
        return {posixpath.basename(str(n).rstrip("/")) for n in found}

    def step_dirs(self) -> list[str]:
        """Step directory names under the root, newest (highest step) first."""
        found = self.names()
        steps = [n for n in found if n.startswith(STEP_PREFIX) and n[len(STEP_PREFIX) :].isdigit()]
        return sorted(steps, reverse=True)


def checkpoint_store(
    url: str | Path, options: dict[str, dict[str, Any]] | None = None
) -> CheckpointStore:
    """The store of a checkpoint URL (file://, s3://, gs://, az://, Azure https, a plain path)."""
    text = str(url)
    if not text:
        raise CheckpointStorageError("the placement has no checkpointUrl output: nothing to read")
    fs, root = storage_fs(text, options)
    return CheckpointStore(text, fs, root.rstrip("/") or "/")


def _store(where: CheckpointStore | Path | str) -> CheckpointStore:
    return where if isinstance(where, CheckpointStore) else checkpoint_store(where)


def entry_checksum(manifest: dict[str, Any], entry: dict[str, Any]) -> tuple[str, str]:
    """(algorithm, hex) a manifest gives for one file: the library's `checksum` with the
    manifest's `checksum_algorithm`, or the older `crc32` field."""
    if "checksum" in entry:
        return str(manifest.get("checksum_algorithm", "crc32")), str(entry["checksum"])
    return "crc32", str(entry["crc32"])


class Checksum:
    """The checkpoint library's checksum of one algorithm (router.checkpoint.manifest: xxh3-64,
    crc32, crc32c); a package missing to compute it is an OperationFailed naming it."""

    def __init__(self, algorithm: str) -> None:
        from router.checkpoint.manifest import Checksum as LibraryChecksum

        try:
            self._checksum = LibraryChecksum(algorithm)
        except ImportError as error:
            raise OperationFailed(str(error)) from None
        self.algorithm = algorithm

    def update(self, data: bytes) -> None:
        self._checksum.update(data)

    def hexdigest(self) -> str:
        return self._checksum.hexdigest()


def checksum(data: bytes, algorithm: str) -> str:
    """The checksum of `data` as a manifest writes it."""
    c = Checksum(algorithm)
    c.update(data)
    return c.hexdigest()


def missing_ranks(manifest: dict[str, Any]) -> list[int]:
    """Ranks of a DCP (mode "torch") checkpoint whose part the manifest does not list.

    The library writes the manifest only after every rank's files are in (a gather, then rank 0
    writes); a manifest that names fewer ranks than its world size is not a checkpoint of the
    whole group, so it is neither restored from nor handed over.
    """
    if manifest.get("mode", "torch") != "torch":
        return []
    try:
        world_size = int(manifest.get("world_size") or 1)
        listed = {str(entry["path"]) for entry in manifest["files"]}
    except (KeyError, TypeError, ValueError):
        return [0]
    return [rank for rank in range(world_size) if f"rank-{rank:05d}.json" not in listed]


def _verify(store: CheckpointStore, name: str, checksums: bool) -> CheckpointInfo | None:
    """The checkpoint in step directory `name` if complete: every listed file there with its
    size, and (with `checksums`) its checksum."""
    step_dir = store.path(name)
    try:
        data = json.loads(store.read_bytes(posixpath.join(step_dir, MANIFEST_NAME)))
    except (FileNotFoundError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or missing_ranks(data):
        return None
    try:
        sizes = None if checksums else _sizes(store, step_dir)
        total = 0
        for entry in data["files"]:
            algorithm, want = entry_checksum(data, entry)
            path = posixpath.join(step_dir, str(entry["path"]))
            if sizes is not None:
                size = sizes.get(path.rstrip("/"))
                if size != int(entry["size"]):
                    return None
                total += size
                continue
            check, size = Checksum(algorithm), 0
            with store.fs.open(path, "rb") as reader:
                while block := reader.read(BLOCK):
                    check.update(block)
                    size += len(block)
            if size != int(entry["size"]) or check.hexdigest() != want:
                return None
            total += size
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


def _sizes(store: CheckpointStore, step_dir: str) -> dict[str, int]:
    """Path → size of every file under a step directory, from one recursive listing."""
    found = store.fs.find(step_dir, detail=True)
    return {str(p).rstrip("/"): int(info.get("size") or 0) for p, info in found.items()}


def checkpoints(
    where: CheckpointStore | Path | str, *, checksums: bool | None = None
) -> Iterator[CheckpointInfo]:
    """Every complete checkpoint, newest (highest step) first, verified as it is reached.

    `checksums`: read every file back and check its checksum (default: on a local disk; on an
    object store the sizes from one listing per checkpoint — the copy to another storage and the
    library's restore check the checksums as they read)."""
    store = _store(where)
    deep = store.is_local if checksums is None else checksums
    for name in store.step_dirs():
        info = _verify(store, name, deep)
        if info is not None:
            yield info


def complete_checkpoints(
    where: CheckpointStore | Path | str, *, checksums: bool | None = None
) -> list[CheckpointInfo]:
    """Every complete checkpoint in the directory, newest (highest step) first."""
    return list(checkpoints(where, checksums=checksums))


def latest_checkpoint(
    where: CheckpointStore | Path | str, *, checksums: bool | None = None
) -> CheckpointInfo | None:
    return next(checkpoints(where, checksums=checksums), None)


def request_save(
    where: CheckpointStore | Path | str, request_id: str, placement: str, at: datetime
) -> None:
    """Ask the job running as `placement` to save now and hold (idempotent for one id)."""
    record = {"id": request_id, "placement": placement, "requested_at": at.isoformat()}
    _write_once(_store(where), REQUEST_NAME, record)


def _write_once(store: CheckpointStore, name: str, record: dict[str, Any]) -> None:
    """Write `record` unless the file holds its id already (a step run twice writes once)."""
    current = store.read_json(name)
    if not (current and current.get("id") == record["id"]):
        store.write_json(name, record)


def withdraw_request(where: CheckpointStore | Path | str, request_id: str | None = None) -> None:
    """Let the job go on (rollback) or clean up after the hand-over; only our own request."""
    store = _store(where)
    current = store.read_json(REQUEST_NAME)
    if current is not None and (request_id is None or current.get("id") == request_id):
        store.remove(REQUEST_NAME)


def answered(where: CheckpointStore | Path | str, request_id: str) -> CheckpointInfo | None:
    """The complete checkpoint that answers the save request, if written yet."""
    for info in checkpoints(where):
        if info.request == request_id:
            return info
    return None


def resumed(where: CheckpointStore | Path | str) -> dict[str, Any] | None:
    """The job's last resume record: {"step", "placement", "time"}."""
    return _store(where).read_json(RESUMED_NAME)


def marker(where: CheckpointStore | Path | str) -> dict[str, Any] | None:
    """The library's interruption marker: {"cloud", "kind", "notice_time", "last_step", ...}."""
    return _store(where).read_json(MARKER_NAME)


def finished(where: CheckpointStore | Path | str) -> dict[str, Any] | None:
    """The job's record that it ran to the end: {"step", "time"}."""
    return _store(where).read_json(FINISHED_NAME)


def node_exits(where: CheckpointStore | Path | str) -> list[dict[str, Any]]:
    """Every node's exit record under the root (router.core.node_exit reads them)."""
    return node_records(where)[0]


def node_records(
    where: CheckpointStore | Path | str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every node's exit records and boot records under the root, from one listing."""
    store = _store(where)
    names = sorted(n for n in store.names() if n.endswith(".json"))
    found: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    for name in names:
        kind = 0 if name.startswith(EXIT_PREFIX) else 1 if name.startswith(BOOT_PREFIX) else None
        if kind is not None and (record := store.read_json(name)) is not None:
            found[kind].append(record)
    return found
def complete_handover(
    where: CheckpointStore | Path | str, request_id: str, placement: str, at: datetime
) -> None:
    """Tell the new placement its move is done (the old one is down); idempotent for one id."""
    record = {"id": request_id, "placement": placement, "completed_at": at.isoformat()}
    _write_once(_store(where), COMPLETE_NAME, record)


def hold_expired(where: CheckpointStore | Path | str, request_id: str) -> dict[str, Any] | None:
    """The old placement's record that it stopped holding for this request, if it did."""
    record = _store(where).read_json(EXPIRED_NAME)
    return record if record and record.get("id") == request_id else None


def handover_abandoned(
    where: CheckpointStore | Path | str, request_id: str
) -> dict[str, Any] | None:
    """The new placement's record that it gave up waiting for this move, if it did."""
    record = _store(where).read_json(ABANDONED_NAME)
    return record if record and record.get("id") == request_id else None
