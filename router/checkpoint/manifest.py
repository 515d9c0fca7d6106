"""The manifest: the file that makes a checkpoint count; written last, read by restore and router.

A checkpoint is the directory `<url>/step-<step, 12 digits>/`. It is complete only once
`manifest.json` exists in it and every file it lists has the listed size and checksum (xxh3-64
where xxhash is installed, else zlib's CRC-32; checkpoints of earlier versions may name CRC-32C;
the manifest names which, see Checksum). Anything else in that directory (a writer killed
mid-save, a partial upload) is ignored by restore and removed by a later save. The interruption
marker `<url>/interruption.json` sits beside the checkpoints.
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from dataclasses import asdict, dataclass, field
from typing import IO, Any

FORMAT = "spotroute-checkpoint/1"
MANIFEST_NAME = "manifest.json"
MARKER_NAME = "interruption.json"
STEP_PREFIX = "step-"
STEP_DIGITS = 12


def step_dir_name(step: int) -> str:
    """`step-000000000100` for step 100 (names sort in step order)."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    return f"{STEP_PREFIX}{step:0{STEP_DIGITS}d}"


def parse_step_dir(name: str) -> int | None:
    """The step of a checkpoint directory name, None for anything else."""
    base = name.rstrip("/").rsplit("/", 1)[-1]
    digits = base.removeprefix(STEP_PREFIX)
    if base == digits or not digits.isdigit():
        return None
    return int(digits)


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One stored file: path relative to the checkpoint directory, size in bytes, checksum (hex)."""

    path: str
    size: int
    checksum: str


@dataclass(frozen=True, slots=True)
class Manifest:
    step: int
    time: str  # ISO 8601, UTC, when the manifest was written
    world_size: int
    job_id: str
    mode: str  # "torch" (DCP state dicts) or "files" (plain directory)
    files: tuple[FileEntry, ...]
    epoch: int | None = None
    save_s: float | None = None  # wall time of the whole save (staging + upload + manifest)
    blocked_s: float | None = None  # how long the training loop waited for this save
    torch_version: str | None = None
    checksum_algorithm: str = "crc32"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.files)

    def to_json(self) -> str:
        data = asdict(self)
        data["format"] = FORMAT
        data["files"] = [asdict(entry) for entry in self.files]
        return json.dumps(data, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> Manifest:
        """Parse a manifest; ValueError says what is wrong with it."""
        try:
            data = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"manifest is not valid JSON ({error})") from error
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"manifest format is not {FORMAT}")
        try:
            files = tuple(
                FileEntry(str(f["path"]), int(f["size"]), str(f["checksum"]))
                for f in data["files"]
            )
            return cls(
                step=int(data["step"]),
                time=str(data["time"]),
                world_size=int(data["world_size"]),
                job_id=str(data.get("job_id", "")),
                mode=str(data.get("mode", "torch")),
                files=files,
                epoch=None if data.get("epoch") is None else int(data["epoch"]),
                save_s=data.get("save_s"),
                blocked_s=data.get("blocked_s"),
                torch_version=data.get("torch_version"),
                checksum_algorithm=str(data.get("checksum_algorithm", "crc32")),
                extra=dict(data.get("extra") or {}),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"manifest is missing or has a bad field ({error})") from error


def default_algorithm() -> str:
    """The checksum new manifests use: xxh3-64 where xxhash is installed (spotroute-checkpoint
    depends on it), else crc32 (zlib, in the standard library)."""
    try:
        import xxhash  # noqa: F401
    except ImportError:
        return "crc32"
    return "xxh3-64"


class Checksum:
    """An incremental checksum of one algorithm, as hex digits.

    xxh3-64 (xxhash): ~26 GB/s here and off the GIL, so it runs beside the read or write it
    checks. crc32 (zlib, ~2 GB/s) without xxhash; crc32c (google-crc32c), which earlier versions
    wrote, is still read. ValueError for an unknown algorithm, ImportError naming the package
    to install for one this Python cannot compute.
    """

    def __init__(self, algorithm: str) -> None:
        self.algorithm = algorithm
        self._crc = 0
        self._hash: Any = None
        if algorithm == "xxh3-64":
            try:
                import xxhash
            except ImportError as error:
                raise ImportError("this checkpoint uses xxh3-64 checksums — pip install "
                                  "xxhash") from error
            self._hash = xxhash.xxh3_64()
        elif algorithm == "crc32":
            self._extend: Any = lambda crc, data: zlib.crc32(data, crc)
        elif algorithm == "crc32c":
            try:
                import google_crc32c
                import numpy
            except ImportError as error:
                raise ImportError("this checkpoint uses crc32c checksums — pip install "
                                  "google-crc32c numpy") from error

            def crc32c(crc: int, data: Any) -> int:
                # The C extension refuses a writable memoryview but reads a NumPy view of it.
                if not isinstance(data, bytes):
                    data = numpy.frombuffer(memoryview(data).cast("B"), dtype=numpy.uint8)
                return int(google_crc32c.extend(crc, data))

            self._extend = crc32c
        else:
            raise ValueError(f"unknown checksum algorithm {algorithm!r}")

    def update(self, data: Any) -> None:
        if self._hash is not None:
            self._hash.update(data)
        else:
            self._crc = self._extend(self._crc, data)

    def hexdigest(self) -> str:
        return str(self._hash.hexdigest()) if self._hash is not None else crc_hex(self._crc)


def checksum_bytes(data: bytes, algorithm: str) -> str:
    checksum = Checksum(algorithm)
    checksum.update(data)
    return checksum.hexdigest()


class ChecksumWriter:
    """A write-only stream wrapper that counts bytes and checksums them as they pass through."""

    def __init__(self, raw: Any, algorithm: str, on_close: Any = None) -> None:
        self._raw = raw
        self._on_close = on_close
        self.size = 0
        self.checksum = Checksum(algorithm)
        self._closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        if view.nbytes < BESIDE_BYTES:
            self.checksum.update(view)
            written = self._raw.write(view)
        else:
            # A tensor's bytes: checksummed on a helper thread while this one writes them (both
            # release the GIL), so a save costs the write, not the write plus the checksum. The
            # caller may free or reuse the buffer once write returns: wait for the checksum.
            checksummed = _checksum_pool().submit(self.checksum.update, view)
            try:
                written = self._raw.write(view)
            finally:
                checksummed.result()
        self.size += view.nbytes
        return view.nbytes if written is None else int(written)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._on_close is not None:
                self._on_close(self)
        self._raw.close()

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return bool(self._raw.closed)

    def __getattr__(self, name: str) -> Any:
        # tell, flush, fileno, ...: whatever the underlying fsspec file offers.
        return getattr(self._raw, name)

    def __enter__(self) -> ChecksumWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


BESIDE_BYTES = 1 << 20  # writes at least this large are checksummed beside the write
# One checksum thread per writing thread a rank may run (verified_io.MAX_IO_THREADS is this).
CHECKSUM_THREADS = 4
_POOL_LOCK = threading.Lock()
_POOL: tuple[int, Any] | None = None  # (pid, executor): a forked child makes its own


def _checksum_pool() -> Any:
    """Threads that checksum large writes while the writing threads write them."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            from concurrent.futures import ThreadPoolExecutor

            _POOL = (os.getpid(), ThreadPoolExecutor(max_workers=CHECKSUM_THREADS,
                                                     thread_name_prefix="spotroute-checksum"))
        return _POOL[1]


def crc_hex(crc: int) -> str:
    return f"{crc & 0xFFFFFFFF:08x}"


PIECE = 2 << 20  # bytes read, then checksummed while still in the CPU cache


def checksum_stream(stream: IO[bytes], algorithm: str) -> tuple[int, str]:
    """(size in bytes, checksum hex) of everything left in `stream`, read PIECE bytes at a time
    into one buffer (readinto where the stream has it), each piece checksummed as it is read."""
    size, checksum = 0, Checksum(algorithm)
    readinto: Any = getattr(stream, "readinto", None)
    buffer = memoryview(bytearray(PIECE))
    while True:
        if readinto is None:
            piece: Any = stream.read(PIECE)
            count = len(piece)
        else:
            count = readinto(buffer)
            piece = buffer[:count]
        if not count:
            return size, checksum.hexdigest()
        checksum.update(piece)
        size += count
