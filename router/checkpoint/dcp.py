"""The torch.distributed.checkpoint (DCP) glue of the checkpointer; torch is imported lazily.

State dicts to save and to load into, DCP's readers that check every file against the manifest
before DCP uses it (local files: DCP's FileSystemReader, tensors read in place), DCP's fsspec
writer that records each file's size and checksum as
it is written, and the switches that quiet DCP and skip torch.save's own CRC while it writes.
"""

from __future__ import annotations

import functools
import gc
import io
import os
import posixpath
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import IO, Any, ParamSpec, TypeVar

from router.checkpoint.manifest import ChecksumWriter, Manifest

# What went wrong while reading (re-exported: callers import them from here too).
from router.checkpoint.results import CheckpointDamaged as CheckpointDamaged
from router.checkpoint.results import CheckpointError as CheckpointError
from router.checkpoint.results import PartlyLoaded as PartlyLoaded
from router.checkpoint.results import damage_reason as damage_reason
from router.checkpoint.results import is_damage as is_damage
from router.checkpoint.storage import Location
from router.checkpoint.verified_io import MAX_IO_THREADS as MAX_IO_THREADS
from router.checkpoint.verified_io import io_pool as io_pool
from router.checkpoint.verified_io import io_threads as io_threads
from router.checkpoint.verified_io import open_verified_local as open_verified_local
from router.checkpoint.verified_io import (
    overlapping,
    read_exactly,
    read_into_checked,
    stored_size,
)
from router.checkpoint.verified_io import read_verified as read_verified

P = ParamSpec("P")
R = TypeVar("R")
DCP_METADATA = ".metadata"  # DCP's index of a checkpoint (what is stored where), one per step


def state_dicts_for_save(objects: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The DCP state dict for `objects` and the names it holds."""
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    model = objects.get("model")
    state: dict[str, Any] = {}
    for name, obj in objects.items():
        if name == "optimizer":
            if not obj.state:
                # Never stepped: saving it would run DCP's zero-lr initialising step, changing
                # e.g. Adam's step count. A fresh optimizer on resume is the same thing.
                continue
            if model is not None:
                state[name] = get_optimizer_state_dict(model, obj)
            else:
                state[name] = obj.state_dict()
        elif name == "model":
            state[name] = get_model_state_dict(obj)
        else:
            sub = obj.state_dict()
            if sub:  # e.g. a disabled GradScaler has an empty state dict
                state[name] = sub
    return state, sorted(state)


def state_dicts_for_load(
    objects: dict[str, Any],
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], None]]:
    """A state dict to load into, and the function that applies it to `objects` afterwards."""
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        get_optimizer_state_dict,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    model = objects.get("model")
    state: dict[str, Any] = {}
    for name, obj in objects.items():
        if name == "model":
            state[name] = get_model_state_dict(obj)
        elif name == "optimizer":
            state[name] = (get_optimizer_state_dict(model, obj) if model is not None
                           else obj.state_dict())
        else:
            state[name] = obj.state_dict()

    def apply(loaded: dict[str, Any]) -> None:
        for name, obj in objects.items():
            if name == "model":
                set_model_state_dict(obj, loaded[name])
            elif name == "optimizer":
                if model is not None:
                    set_optimizer_state_dict(model, obj, loaded[name])
                else:
                    obj.load_state_dict(loaded[name])
            else:
                obj.load_state_dict(loaded[name])

    return state, apply


def dcp_fsspec_module() -> Any:
    import importlib

    try:
        return importlib.import_module("torch.distributed.checkpoint.fsspec_filesystem")
    except ImportError:  # torch < 2.6 has only the private module
        return importlib.import_module("torch.distributed.checkpoint._fsspec_filesystem")


def verifying_reader(location: Location, manifest: Manifest, *, fused: bool = False) -> Any:
    """A DCP storage reader that checks every file a rank reads before DCP loads any of them
    (`fused`: local files may be checked while read, see local_reader).

    A local checkpoint is read by DCP's own FileSystemReader, tensors straight into the model's
    memory (local_reader); object stores through DCP's FsspecReader, the rank's files fetched
    at once (one GET each), checked, and held in memory while DCP reads them.
    """
    if location.is_local:
        return local_reader(location, manifest, fused=fused)
    url = location.url_of(posixpath.basename(location.step_path(manifest.step)))
    prefix = url.rstrip("/") + "/"
    fetched: dict[str, bytes] = {}

    class FetchFirstReader(dcp_fsspec_module().FsspecReader):  # type: ignore[misc]
        def read_data(self, plan: Any, planner: Any) -> Any:
            # Every file this rank reads, fetched at once and checked before DCP loads any.
            files = sorted({self.storage_data[i.storage_index].relative_path for i in plan.items})
            with io_pool(len(files), "checkpoint-fetch") as pool:
                data = pool.map(lambda relative: read_verified(location, manifest, relative), files)
                fetched.update(zip(files, data, strict=True))
            try:
                return super().read_data(plan, planner)
            finally:
                fetched.clear()

    @contextmanager
    def open_checked(path: Any) -> Iterator[IO[bytes]]:
        text = str(os.fspath(path))
        relative = text[len(prefix):] if text.startswith(prefix) else posixpath.basename(text)
        data = fetched.get(relative)
        yield io.BytesIO(data if data is not None else read_verified(location, manifest, relative))

    reader = FetchFirstReader(url, **location.storage_options)
    verifying = verifying_filesystem(type(reader.fs), open_checked)
    reader.fs = verifying
    reader.path = verifying.init_path(url, **location.storage_options)
    return reader


def local_reader(location: Location, manifest: Manifest, *, fused: bool = False) -> Any:
    """DCP's FileSystemReader for a local checkpoint: the files checked, then read in place.

    Every file of the rank is checked against the manifest (size, checksum) before any of them
    is read into the objects; the files are checked, and then read, at once (one thread each,
    io_pool). A tensor is then read from the file straight into the tensor it restores, the way
    DCP's own experimental CheckpointReader does (torch.load on the meta device gives the
    record's offset): DCP's generic path torch.loads every record into a new tensor (1 GB of fresh
    pages per GB) and copies that into the model, two copies more. Anything else (a resharded
    or strided target, another dtype, an object record) takes DCP's generic path.

    `fused`: a file whose tensors all map in place is read once, front to back, each piece
    checksummed as it lands in the model (fused_read); damage is then found after the model
    was written, so the caller passes it only where an older checkpoint can still be loaded
    over it. `reader.fs.served` counts the files read into the objects.
    """
    from torch.distributed.checkpoint.filesystem import FileSystem, FileSystemReader

    directory = location.step_path(manifest.step)
    entries = {entry.path: entry for entry in manifest.files}

    @contextmanager
    def open_checked(path: Any) -> Iterator[IO[bytes]]:
        relative = os.path.relpath(os.fspath(path), directory).replace(os.sep, "/")
        with open_verified_local(location, manifest, relative) as stream:
            yield stream

    class InPlaceReader(FileSystemReader):
        def read_data(self, plan: Any, planner: Any) -> Any:
            from torch.futures import Future

            per_file: dict[str, list[Any]] = {}
            for item in plan.items:
                per_file.setdefault(self.storage_data[item.storage_index].relative_path,
                                    []).append(item)

            def one_pass(relative: str) -> bool:
                return fused and fused_read(self, os.path.join(directory, relative),
                                            entries.get(relative), manifest.checksum_algorithm,
                                            per_file[relative], planner)

            def check(relative: str) -> None:
                with open_verified_local(location, manifest, relative):
                    pass

            def read(relative: str) -> None:
                with open(os.path.join(directory, relative), "rb") as stream:
                    for item in per_file[relative]:
                        _read_item(self, stream, item, planner)

            # A rank's files (io_threads() of them) are read at once, one thread each. Files
            # not read in one pass are all checked before any of them is read into the objects.
            with io_pool(len(per_file), "checkpoint-read") as pool:
                passed = dict(zip(per_file, pool.map(one_pass, per_file), strict=True))
                rest = [relative for relative, done in passed.items() if not done]
                list(pool.map(check, rest))
                counted: Any = self.fs
                counted.served += len(rest)
                list(pool.map(read, rest))
            done: Future[None] = Future()
            done.set_result(None)
            return done

    reader = InPlaceReader(directory)
    reader.fs = verifying_filesystem(FileSystem, open_checked)
    return reader


def verifying_filesystem(base: type,
                         open_checked: Callable[[Any], AbstractContextManager[IO[bytes]]]) -> Any:
    """An instance of DCP filesystem class `base` whose read streams are `open_checked(path)`
    (a file checked against the manifest); writes pass through. `served` counts the data files
    it handed to DCP once checked: a failure after that may have left objects partly loaded."""

    class VerifyingFileSystem(base):  # type: ignore[misc]
        served = 0

        @contextmanager
        def create_stream(self, path: Any, mode: str) -> Iterator[Any]:
            if "r" not in mode:
                with super().create_stream(path, mode) as stream:
                    yield stream
                return
            with open_checked(path) as stream:
                if posixpath.basename(str(os.fspath(path))) != DCP_METADATA:
                    self.served += 1
                yield stream

    return VerifyingFileSystem()


def _read_item(reader: Any, stream: Any, item: Any, planner: Any) -> None:
    """One ReadItem of DCP's plan: into the target tensor's memory where it can, else as DCP."""
    import torch
    from torch.distributed._shard._utils import narrow_tensor_by_index
    from torch.distributed.checkpoint.planner import LoadItemType
    from torch.distributed.checkpoint.utils import _create_file_view

    info = reader.storage_data[item.storage_index]
    view: Any
    if item.type == LoadItemType.BYTE_IO:
        planner.load_bytes(item, io.BytesIO(_create_file_view(stream, info.offset,
                                                              info.length).read(-1)))
        return
    if info.transform_descriptors:  # DCP's stream extensions (we write none): DCP's own path
        view = reader.transforms.transform_load_stream(
            item, info.transform_descriptors, _create_file_view(stream, info.offset, info.length))
        source = torch.load(io.BytesIO(view.read(-1)), map_location="cpu", weights_only=True)
    else:
        view = _create_file_view(stream, info.offset, info.length)
        source = torch.load(view, map_location="meta", weights_only=True)
    target = planner.resolve_tensor(item).detach()
    if source.is_meta:
        destination = _in_place_destination(source, target, item)
        if destination is not None:
            start = info.offset + source.untyped_storage()._checkpoint_offset
            read_exactly(stream, start + source.storage_offset() * source.element_size(),
                          destination)
            planner.commit_tensor(item, target)
            return
        view = _create_file_view(stream, info.offset, info.length)
        source = torch.load(view, map_location="cpu", weights_only=True)
    source = narrow_tensor_by_index(source, item.storage_offsets, item.lengths)
    if target.size() != source.size():
        raise RuntimeError(f"{item.storage_index.fqn}: stored size {tuple(source.size())} "
                           f"differs from the model's {tuple(target.size())}")
    target.copy_(source)
    planner.commit_tensor(item, target)


def fused_read(reader: Any, path: str, entry: Any, algorithm: str, items: list[Any],
               planner: Any) -> bool:
    """Read one local file in a single pass: every tensor straight into its target, the bytes
    between (zip and pickle headers, object records) as new bytes, all checksummed in
    file order as they are read, compared with the manifest `entry` at the end.

    False (nothing read into the objects) where a record does not map in place: the caller
    takes the check-first path. CheckpointDamaged on a size or checksum mismatch, possibly after
    targets were written. Object records go to DCP only after the file checked out.
    """
    import torch
    from torch.distributed.checkpoint.planner import LoadItemType
    from torch.distributed.checkpoint.utils import _create_file_view

    if entry is None:
        return False
    pieces: list[tuple[int, memoryview, Any, Any]] = []  # (file offset, destination, item, target)
    objects: list[Any] = []
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError as error:
        raise CheckpointDamaged(f"{entry.path} is missing") from error
    with handle:
        stored_size(path, entry)
        for item in items:
            info = reader.storage_data[item.storage_index]
            if item.type == LoadItemType.BYTE_IO:
                objects.append(item)
                continue
            if info.transform_descriptors:
                return False
            view: Any = _create_file_view(handle, info.offset, info.length)
            try:
                source = torch.load(view, map_location="meta", weights_only=True)
            except Exception:  # a damaged header: the check-first path names the damage
                return False
            target = planner.resolve_tensor(item).detach()
            destination = _in_place_destination(source, target, item) if source.is_meta else None
            if destination is None:
                return False
            start = (info.offset + source.untyped_storage()._checkpoint_offset
                     + source.storage_offset() * source.element_size())
            pieces.append((start, destination, item, target))
        pieces.sort(key=lambda piece: piece[0])
        if overlapping([(start, destination) for start, destination, _, _ in pieces]):
            return False
        reader.fs.served += 1  # from here on the targets change
        read_into_checked(path, entry, algorithm,
                          [(start, destination) for start, destination, _, _ in pieces])
        for _, _, item, target in pieces:
            planner.commit_tensor(item, target)
        for item in objects:
            info = reader.storage_data[item.storage_index]
            planner.load_bytes(item, io.BytesIO(_create_file_view(handle, info.offset,
                                                                  info.length).read(-1)))
    return True


def _in_place_destination(source: Any, target: Any, item: Any) -> memoryview | None:
    """The bytes of `target` to read the stored tensor into, or None where that cannot be done.

    Only a whole stored tensor into a contiguous CPU tensor of its dtype and shape, stored
    contiguously, with its record's offset known (torch >= 2.7 writes it).
    """
    if (getattr(source.untyped_storage(), "_checkpoint_offset", None) is None
            or not source.is_contiguous() or target.device.type != "cpu"
            or not target.is_contiguous() or target.dtype != source.dtype
            or target.size() != source.size() or any(item.storage_offsets)
            or list(item.lengths) != list(source.size())):
        return None
    import torch

    try:
        return memoryview(target.reshape(-1).view(torch.uint8).numpy()).cast("B")
    except (RuntimeError, TypeError, ValueError):  # no byte view of this dtype: DCP's path
        return None


def recording_writer(url: str, storage_options: dict[str, Any], *, sync_files: bool,
                      algorithm: str, files: int) -> Any:
    """DCP's FsspecWriter whose streams record each file's size and checksum as it is written;
    it writes a rank's state as `files` files, one thread each (DCP's thread_count)."""
    module = dcp_fsspec_module()
    writer = _indexing_writer_class(module.FsspecWriter)(url, sync_files=sync_files,
                                                         thread_count=files, **storage_options)
    base: Any = type(writer.fs)
    recording = _recording_class(base)()
    recording.algorithm, recording.prefix = algorithm, url.rstrip("/") + "/"
    writer.fs = recording
    writer.path = recording.init_path(url, **storage_options)
    return writer


@functools.cache
def _indexing_writer_class(base: type) -> type:
    """DCP's writer class `base`, keeping the Metadata it writes to .metadata (`metadata`,
    rank 0 only), from which the save writes the light restore's index."""

    class IndexingWriter(base):  # type: ignore[misc]
        metadata: Any = None

        def finish(self, metadata: Any, results: Any) -> None:
            super().finish(metadata, results)
            self.metadata = metadata

    return IndexingWriter


@functools.cache
def _recording_class(base: type) -> type:
    """The recording subclass of DCP's filesystem class `base`, made once: a class made per
    save is cyclic garbage that only a full collection frees."""

    class RecordingFileSystem(base):  # type: ignore[misc]
        algorithm = ""
        prefix = ""

        def __init__(self) -> None:
            super().__init__()
            self.records: dict[str, tuple[int, str]] = {}

        @contextmanager
        def create_stream(self, path: Any, mode: str) -> Iterator[Any]:
            if "w" not in mode:
                with super().create_stream(path, mode) as stream:
                    yield stream
                return
            with super().create_stream(path, mode) as raw:
                wrapped = ChecksumWriter(raw, self.algorithm)
                yield wrapped
                self.records[self._relative(path)] = (wrapped.size,
                                                      wrapped.checksum.hexdigest())

        def rename(self, path: Any, new_path: Any) -> None:
            super().rename(path, new_path)
            record = self.records.pop(self._relative(path), None)
            if record is not None:
                self.records[self._relative(new_path)] = record

        def _relative(self, path: Any) -> str:
            text = str(os.fspath(path))
            return (text[len(self.prefix):] if text.startswith(self.prefix)
                    else posixpath.basename(text))

    return RecordingFileSystem


class _ZipCrcSwitch:
    """Turns off torch.save's per-record CRC-32 while DCP writes (torch >= 2.6).

    Every file gets our own checksum in the manifest, so the zip records' CRC only doubles the
    CPU time of a save. Counted, because an asynchronous save's upload outlives the call.
    Other torch.save calls made meanwhile also skip it; their files still load.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._saved: bool | None = None

    def _config(self) -> Any:
        try:
            from torch.utils.serialization import config
        except ImportError:
            return None
        return getattr(config, "save", None)

    def disable(self) -> None:
        config = self._config()
        if config is None or not hasattr(config, "compute_crc32"):
            return
        with self._lock:
            if self._active == 0:
                self._saved = bool(config.compute_crc32)
                config.compute_crc32 = False
            self._active += 1

    def restore(self) -> None:
        config = self._config()
        if config is None or not hasattr(config, "compute_crc32"):
            return
        with self._lock:
            self._active = max(0, self._active - 1)
            if self._active == 0 and self._saved is not None:
                config.compute_crc32 = self._saved
                self._saved = None


ZIP_CRC = _ZipCrcSwitch()


@contextmanager
def without_zip_crc() -> Iterator[None]:
    ZIP_CRC.disable()
    try:
        yield
    finally:
        ZIP_CRC.restore()


class _GcHold:
    """Holds Python's automatic cyclic garbage collection while the training thread waits for a
    save: a full collection in a process that imported torch took 0.1-0.2 s here, and one fell
    into a save about every 11 saves. Garbage made meanwhile is collected at the first
    allocation after the save, as it would have been. DCP's own state-dict helpers do the same
    (`torch.distributed.checkpoint.state_dict._gc_context`). Counted, like the CRC switch; a
    collector the application disabled stays disabled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._was_enabled = False

    def hold(self) -> None:
        with self._lock:
            if self._active == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._active += 1

    def release(self) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0 and self._was_enabled:
                gc.enable()


GC_HOLD = _GcHold()


def gc_held(method: Callable[P, R]) -> Callable[P, R]:
    """Run `method` with the cyclic garbage collector held (GC_HOLD)."""

    @functools.wraps(method)
    def held(*args: P.args, **kwargs: P.kwargs) -> R:
        GC_HOLD.hold()
        try:
            return method(*args, **kwargs)
        finally:
            GC_HOLD.release()

    return held


@contextmanager
def quiet_dcp() -> Iterator[None]:
    """DCP warns that it assumes one process without torch.distributed, and about overwriting a
    directory a killed writer left (which we emptied first): both expected here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        warnings.filterwarnings("ignore", message=".*Detected an existing checkpoint.*")
        yield
