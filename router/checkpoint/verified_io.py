"""Reading checkpoint files against their manifest: whole, checked before use, or checked while
read into place. No torch.distributed here, so a restore that does not need DCP (light_restore)
reads with the same checks as one through DCP (dcp.py).
"""

from __future__ import annotations

import io
import itertools
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import IO, Any

from router.checkpoint.manifest import (
    CHECKSUM_THREADS,
    PIECE,
    Checksum,
    FileEntry,
    Manifest,
    checksum_bytes,
    checksum_stream,
)
from router.checkpoint.results import CheckpointDamaged
from router.checkpoint.storage import Location

MAX_IO_THREADS = CHECKSUM_THREADS  # files a rank writes or reads at once; one checksum each


def io_threads(local: bool = False) -> int:
    """How many files each rank writes at once (DCP's thread_count) unless
    Checkpointer(io_threads=) says: one per CPU this rank has (cores / LOCAL_WORLD_SIZE), at
    most MAX_IO_THREADS; to a local disk (`local`), one per two of those CPUs, because each
    writing thread keeps a second one busy checksumming beside it (manifest.ChecksumWriter) —
    with a writer per CPU, two writers on two cores made one save in five 2-4x slower here
    (docs/benchmarks.md). Restore reads a rank's files at once, up to MAX_IO_THREADS."""
    text = os.environ.get("LOCAL_WORLD_SIZE", "")  # torchrun's ranks on this node
    per_node = int(text) if text.isdigit() and int(text) > 0 else 1
    cpus = (os.cpu_count() or 1) // per_node
    return max(1, min(MAX_IO_THREADS, cpus // 2 if local else cpus))


def io_pool(files: int, name: str) -> ThreadPoolExecutor:
    """Threads for reading `files` files at once (at most MAX_IO_THREADS)."""
    return ThreadPoolExecutor(
        max_workers=max(1, min(MAX_IO_THREADS, files)), thread_name_prefix=name
    )


def entry_of(manifest: Manifest, relative: str) -> FileEntry:
    """The manifest's entry for a file of the checkpoint; CheckpointDamaged without one."""
    for entry in manifest.files:
        if entry.path == relative:
            return entry
    raise CheckpointDamaged(f"{relative} is not in the manifest")


def read_verified(location: Location, manifest: Manifest, relative: str) -> bytes:
    """A file of the checkpoint, whole, after checking its size and checksum."""
    entry = entry_of(manifest, relative)
    try:
        data = bytes(location.fs.cat_file(location.step_path(manifest.step, relative)))
    except FileNotFoundError as error:
        raise CheckpointDamaged(f"{relative} is missing") from error
    if len(data) != entry.size:
        raise CheckpointDamaged(f"{relative} has {len(data)} bytes, the manifest says {entry.size}")
    checksum = checksum_bytes(data, manifest.checksum_algorithm)
    if checksum != entry.checksum:
        raise CheckpointDamaged(
            f"{relative} checksum {checksum} differs from the manifest's {entry.checksum}"
        )
    return data


@contextmanager
def open_verified_local(
    location: Location, manifest: Manifest, relative: str
) -> Iterator[IO[bytes]]:
    """A local checkpoint file, open at its start, after checking its size and checksum."""
    entry = entry_of(manifest, relative)
    try:
        handle = open(location.step_path(manifest.step, relative), "rb")  # noqa: SIM115
    except FileNotFoundError as error:
        raise CheckpointDamaged(f"{relative} is missing") from error
    with handle:
        size, checksum = checksum_stream(handle, manifest.checksum_algorithm)
        if size != entry.size:
            raise CheckpointDamaged(f"{relative} has {size} bytes, the manifest says {entry.size}")
        if checksum != entry.checksum:
            raise CheckpointDamaged(
                f"{relative} checksum {checksum} differs from the manifest's {entry.checksum}"
            )
        handle.seek(0)
        yield handle


def stored_size(path: str, entry: FileEntry) -> int:
    """The size of a local checkpoint file, CheckpointDamaged unless it is the manifest's."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError as error:
        raise CheckpointDamaged(f"{entry.path} is missing") from error
    if size != entry.size:
        raise CheckpointDamaged(f"{entry.path} has {size} bytes, the manifest says {entry.size}")
    return size


def overlapping(pieces: list[tuple[int, memoryview]]) -> bool:
    """Whether any two (file offset, destination) pieces, sorted by offset, overlap."""
    return any(a[0] + a[1].nbytes > b[0] for a, b in itertools.pairwise(pieces))


def read_into_checked(
    path: str, entry: FileEntry, algorithm: str, pieces: list[tuple[int, memoryview]]
) -> None:
    """Read a local file once, front to back: each (file offset, destination) piece straight
    into its destination, the bytes between as new bytes, all checksummed in file order as
    they are read (while in the CPU cache) and compared with the manifest's `entry` at the end.
    `pieces` sorted by offset, not overlapping. CheckpointDamaged after the destinations were
    written when the file is damaged."""
    size = stored_size(path, entry)
    checksum = Checksum(algorithm)
    with open(path, "rb", buffering=0) as raw:
        position = 0
        for start, destination in pieces:
            position = _summed_read(raw, position, start, checksum)
            position = _summed_read(
                raw, position, start + destination.nbytes, checksum, into=destination, base=start
            )
        _summed_read(raw, position, size, checksum)
    digest = checksum.hexdigest()
    if digest != entry.checksum:
        raise CheckpointDamaged(
            f"{entry.path} checksum {digest} differs from the manifest's {entry.checksum}"
        )


def _summed_read(
    raw: Any,
    position: int,
    end: int,
    checksum: Checksum,
    *,
    into: memoryview | None = None,
    base: int = 0,
) -> int:
    """Read file bytes [position, end) in PIECE-sized pieces, each checksummed right after it
    is read, while it is in the CPU cache: into `into` (at position - base), or as new bytes
    (the headers between the tensors). Returns the new position."""
    while position < end:
        length = min(PIECE, end - position)
        if into is None:
            piece: Any = raw.read(length)
            count = len(piece)
        else:
            piece = into[position - base : position - base + length]
            count = raw.readinto(piece)
            piece = piece[:count]
        if not count:
            raise CheckpointDamaged(f"a record ends early at byte {position}")
        checksum.update(piece)
        position += count
    return position


def read_exactly(stream: Any, offset: int, destination: memoryview) -> None:
    """Fill `destination` from `stream` at `offset`; CheckpointDamaged if the file ends first."""
    stream.seek(offset)
    done = 0
    while done < destination.nbytes:
        count = stream.readinto(destination[done:])
        if not count:
            raise CheckpointDamaged(f"a tensor record ends early at byte {offset + done}")
        done += count


class RecordView(io.RawIOBase):
    """Bytes [offset, offset + length) of a seekable stream, as a stream of their own (one
    record of a DCP data file: what torch.load reads)."""

    def __init__(self, base: Any, offset: int, length: int) -> None:
        super().__init__()
        self._base, self._offset, self._length = base, offset, length
        self._base.seek(offset)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return int(self._base.tell()) - self._offset

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            offset += self.tell()
        elif whence == os.SEEK_END:
            offset += self._length
        self._base.seek(self._offset + max(0, offset))
        return self.tell()

    def readinto(self, buffer: Any) -> int:
        left = self._length - self.tell()
        if left <= 0:
            return 0
        view = memoryview(buffer).cast("B")
        return int(self._base.readinto(view[:left]))
