"""Where checkpoints live: one fsspec filesystem and a root path (file://, s3://, gs://, az://).

Credentials come from each driver's usual chain (instance role / metadata server / managed
identity, or the environment: AWS_ENDPOINT_URL, STORAGE_EMULATOR_HOST,
AZURE_STORAGE_CONNECTION_STRING ...). An Azure blob URL as the Azure stack passes it,
`https://<account>.blob.core.windows.net/<container>/<prefix>`, becomes `abfs://<container>/<prefix>`
with `account_name=<account>`.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from router.checkpoint.manifest import (
    MANIFEST_NAME,
    MARKER_NAME,
    Manifest,
    checksum_stream,
    parse_step_dir,
    step_dir_name,
)

AZURE_BLOB_SUFFIX = ".blob.core.windows.net"
DAMAGED_DIR = "damaged"  # where restore sets damaged checkpoints aside (Location.set_aside)


@dataclass(frozen=True)
class Location:
    """A checkpoint root: `url` as given, the fsspec filesystem and its path for the root."""

    url: str
    fs: Any  # fsspec.AbstractFileSystem (fsspec ships no type information)
    root: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    @property
    def protocol(self) -> str:
        protocol = self.fs.protocol
        return str(protocol[0] if isinstance(protocol, tuple | list) else protocol)

    @property
    def is_local(self) -> bool:
        return self.protocol in ("file", "local")

    def path(self, *parts: str) -> str:
        """fsspec path under the root."""
        return posixpath.join(self.root, *parts)

    def url_of(self, *parts: str) -> str:
        """A full URL (with protocol) under the root, for DCP's fsspec reader and writer."""
        return str(self.fs.unstrip_protocol(self.path(*parts)))

    def step_path(self, step: int, *parts: str) -> str:
        return self.path(step_dir_name(step), *parts)

    # --- listing ------------------------------------------------------------------------------

    def steps(self) -> list[int]:
        """Steps that have a checkpoint directory (complete or not), newest first."""
        # Another writer (another rank, a previous run) may have changed it: never trust the
        # driver's listing cache here.
        self.fs.invalidate_cache(self.root)
        try:
            names = self.fs.ls(self.root, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        steps = {s for name in names if (s := parse_step_dir(str(name))) is not None}
        return sorted(steps, reverse=True)

    def has_manifest(self, step: int) -> bool:
        return bool(self.fs.exists(self.step_path(step, MANIFEST_NAME)))

    def read_manifest(self, step: int) -> Manifest:
        """The manifest of `step`; FileNotFoundError or ValueError when it is missing or bad."""
        return Manifest.from_json(self.fs.cat_file(self.step_path(step, MANIFEST_NAME)))

    def write_manifest(self, manifest: Manifest) -> None:
        self.write_text(self.step_path(manifest.step, MANIFEST_NAME), manifest.to_json())

    def write_text(self, path: str, text: str) -> None:
        """Write a small file so that a reader never sees half of it (rename on a local disk)."""
        data = text.encode()
        if self.is_local:
            tmp = f"{path}.tmp-{os.getpid()}"
            self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        else:
            self.fs.pipe_file(path, data)  # one PUT: object stores never show a partial object

    def remove_step(self, step: int) -> None:
        """Delete a checkpoint directory, its manifest first so it never looks complete."""
        # Another writer of the same directory (the other placement during a hand-over) may be
        # removing the same step: what it removed first is simply gone.
        manifest = self.step_path(step, MANIFEST_NAME)
        with contextlib.suppress(FileNotFoundError):
            if self.fs.exists(manifest):
                self.fs.rm_file(manifest)
        directory = self.step_path(step)
        with contextlib.suppress(FileNotFoundError):
            if self.fs.exists(directory):
                self.fs.rm(directory, recursive=True)
        self.fs.invalidate_cache(self.root)

    def set_aside(self, step: int, stamp: str) -> str:
        """Move a damaged checkpoint to `damaged/<step dir>-<stamp>/` (out of every listing of
        step directories: restore, retention and the router never count it again, and nothing
        deletes it); its URL. A disk renames it; an object store copies it, then deletes the
        original manifest first, so a move cut short leaves the damaged original to be found
        (and moved) again, never a half."""
        target = self.path(DAMAGED_DIR, f"{step_dir_name(step)}-{stamp}")
        source = self.step_path(step)
        if self.is_local:
            self.fs.makedirs(self.path(DAMAGED_DIR), exist_ok=True)
            os.replace(source, target)
        else:
            self.fs.copy(source, target, recursive=True)
            self.remove_step(step)
        self.fs.invalidate_cache(self.root)
        return self.url_of(DAMAGED_DIR, f"{step_dir_name(step)}-{stamp}")

    # --- verification -------------------------------------------------------------------------

    def verify_files(self, manifest: Manifest, paths: list[str] | None = None) -> list[str]:
        """Problems found checking files of `manifest` (all, or only `paths`); [] when sound."""
        problems: list[str] = []
        wanted = set(paths) if paths is not None else None
        for entry in manifest.files:
            if wanted is not None and entry.path not in wanted:
                continue
            full = self.step_path(manifest.step, entry.path)
            try:
                with self.fs.open(full, "rb") as stream:
                    size, crc = checksum_stream(stream, manifest.checksum_algorithm)
            except FileNotFoundError:
                problems.append(f"{entry.path} is missing")
                continue
            if size != entry.size:
                problems.append(f"{entry.path} has {size} bytes, the manifest says {entry.size}")
            elif crc != entry.checksum:
                problems.append(f"{entry.path} checksum {crc} differs from the manifest's "
                                f"{entry.checksum}")
        return problems

    # --- small JSON files beside the checkpoints (marker, hand-over) -------------------------

    def write_json(self, name: str, data: dict[str, Any]) -> None:
        self.write_text(self.path(name), json.dumps(data, indent=1, sort_keys=True) + "\n")

    def read_json(self, name: str) -> dict[str, Any] | None:
        """A JSON object beside the checkpoints; None when it is missing (or not an object)."""
        # Read afresh: s3fs answers from its listing cache, where a file the router wrote after
        # this process last listed the root is missing (or has its old size).
        self.fs.invalidate_cache(self.path(name))
        try:
            data = json.loads(self.fs.cat_file(self.path(name)))
        except FileNotFoundError:
            return None
        return data if isinstance(data, dict) else None

    def write_marker(self, marker: dict[str, Any]) -> None:
        self.write_json(MARKER_NAME, marker)

    def read_marker(self) -> dict[str, Any] | None:
        return self.read_json(MARKER_NAME)


def normalise_url(url: str, storage_options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(fsspec URL, storage options): Azure https blob URLs become abfs:// with account_name."""
    parsed = urlparse(url)
    if parsed.scheme == "https" and parsed.netloc.lower().endswith(AZURE_BLOB_SUFFIX):
        account = parsed.netloc.lower().removesuffix(AZURE_BLOB_SUFFIX)
        return f"abfs://{parsed.path.lstrip('/')}", {"account_name": account, **storage_options}
    return url, dict(storage_options)


def open_location(url: str, storage_options: dict[str, Any] | None = None) -> Location:
    """The Location for a checkpoint URL (`file://`, `s3://`, `gs://`, `az://`, a plain path)."""
    import fsspec.core

    fsspec_url, options = normalise_url(url, storage_options or {})
    fs, root = fsspec.core.url_to_fs(fsspec_url, **options)
    root = str(root).rstrip("/") or "/"
    if fs.protocol in ("file", ("file", "local")) or "file" in fs.protocol:
        fs.makedirs(root, exist_ok=True)
    return Location(url=url, fs=fs, root=root, storage_options=options)
