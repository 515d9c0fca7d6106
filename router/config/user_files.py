"""The one way spotroute reads a file a user names: a regular file of bounded size, or one line.

Job files, spotroute.yaml, local market traces, backtest workloads and traces, price imports and
stack files all come through here. A path to /dev/zero would otherwise be read without end, a
FIFO would block the reader forever, and a directory or a socket would surface as an OSError
deep inside a parser. The file is opened without blocking (O_NONBLOCK: a FIFO with no writer
opens at once) and checked with fstat on the open descriptor, so what is checked is what is read.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from router.core.errors import BadInput

MIB = 1 << 20
CONFIG_LIMIT_BYTES = 1 * MIB  # job.yaml, spotroute.yaml, stack files: a few KB in practice
DATA_LIMIT_BYTES = 512 * MIB  # traces, catalogs, workloads: the largest SkyPilot vms.csv is ~30 MB

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class FileProblem(BadInput):
    """A user file that cannot be read: `text` is the problem and fix, `where` a line if any."""

    def __init__(self, path: Path | str, text: str, where: str = "") -> None:
        super().__init__(f"{path}: {where}: {text}" if where else f"{path}: {text}")
        self.path = str(path)
        self.text = text
        self.where = where


def read_user_bytes(path: Path | str, *, limit_bytes: int, what: str = "file") -> bytes:
    """The bytes of the regular file at `path`, at most `limit_bytes`; FileProblem otherwise."""
    fd = _open(Path(path), what)
    try:
        info = os.fstat(fd)
        _refuse_kind(path, info.st_mode, what)
        if info.st_size > limit_bytes:
            raise FileProblem(path, _too_large(limit_bytes, what))
        chunks: list[bytes] = []
        left = limit_bytes + 1  # a file that grows past its stat size (or /proc) is still bounded
        while left > 0:
            chunk = os.read(fd, min(left, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise FileProblem(path, f"cannot read it ({_why(exc)}) — check the {what}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit_bytes:
        raise FileProblem(path, _too_large(limit_bytes, what))
    return data


def check_user_file(path: Path | str, *, limit_bytes: int, what: str = "file") -> None:
    """Refuse (FileProblem) anything at `path` but a readable regular file of bounded size."""
    fd = _open(Path(path), what)
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    _refuse_kind(path, info.st_mode, what)
    if info.st_size > limit_bytes:
        raise FileProblem(path, _too_large(limit_bytes, what))


def read_user_text(
    path: Path | str, *, limit_bytes: int, what: str = "file", encoding: str = "utf-8-sig"
) -> str:
    """The text of the regular file at `path` (UTF-8, a BOM dropped); FileProblem otherwise."""
    raw = read_user_bytes(path, limit_bytes=limit_bytes, what=what)
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise FileProblem(
            path,
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x}) — save the file as UTF-8",
            where=f"line {line}",
        ) from None


def _open(path: Path, what: str) -> int:
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise FileProblem(path, "no such file — check the path and the current directory") from None
    except PermissionError:
        raise FileProblem(
            path, f"permission denied — make the {what} readable by this user (or its folder)"
        ) from None
    except OSError as exc:  # ENXIO (a socket), ENAMETOOLONG, ELOOP, ENOTDIR …
        with contextlib.suppress(OSError):
            _refuse_kind(path, os.stat(path).st_mode, what)
        raise FileProblem(path, f"cannot open it ({_why(exc)}) — check the path") from None


def _refuse_kind(path: Path | str, mode: int, what: str) -> None:
    for is_kind, kind in _KINDS:
        if is_kind(mode):
            raise FileProblem(path, f"is {kind}, not a regular file — pass the {what} itself")


def _too_large(limit_bytes: int, what: str) -> str:
    return f"file is larger than {limit_bytes // MIB} MiB — is this the {what}?"


def _why(exc: OSError) -> str:
    if exc.errno == errno.ENXIO:
        return "not a file that can be read, e.g. a socket"
    return exc.strerror or type(exc).__name__
