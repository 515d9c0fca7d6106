"""The manifest's checksum algorithms: xxh3-64 (written where xxhash is installed), crc32 (zlib,
written without it) and crc32c (written by earlier versions, still read). Each gives its
published check value, saves and restores through the library, and catches a flipped byte; the
router checks a job's checkpoints with the same algorithms."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest
from training import build, params, same, train_step

from router.checkpoint import Checkpointer, Manifest, manifest
from router.checkpoint.manifest import (
    BESIDE_BYTES,
    Checksum,
    ChecksumWriter,
    checksum_bytes,
    checksum_stream,
    default_algorithm,
)
from router.config import checkpoints as router_files

# Published check values: the CRC catalogue's over b"123456789", xxHash's XXH3_64bits of b"".
CHECK = {"crc32": (b"123456789", "cbf43926"), "crc32c": (b"123456789", "e3069283"),
         "xxh3-64": (b"", "2d06800538d394c2")}


@pytest.mark.parametrize("algorithm", sorted(CHECK))
def test_each_algorithm_gives_its_check_value_and_the_same_in_pieces(algorithm: str) -> None:
    data, value = CHECK[algorithm]
    assert checksum_bytes(data, algorithm) == value
    router = router_files.Checksum(algorithm)
    router.update(data)
    assert router.hexdigest() == value
    whole = bytes(range(256)) * 64
    pieces = Checksum(algorithm)
    for piece in (whole[:1000], memoryview(bytearray(whole[1000:]))):  # bytes, a writable view
        pieces.update(piece)
    assert pieces.hexdigest() == checksum_bytes(whole, algorithm)


def test_a_stream_is_checksummed_across_piece_boundaries(tmp_path: Path) -> None:
    data = bytes(range(256)) * 20_000  # 5.1 MB: more than two 2 MiB pieces
    path = tmp_path / "blob"
    path.write_bytes(data)
    with path.open("rb") as stream:
        assert checksum_stream(stream, "xxh3-64") == (len(data), checksum_bytes(data, "xxh3-64"))


@pytest.mark.parametrize("algorithm", ["xxh3-64", "crc32"])
def test_a_large_write_is_checksummed_beside_it_and_done_when_write_returns(
        monkeypatch: pytest.MonkeyPatch, algorithm: str) -> None:
    """A tensor's bytes (BESIDE_BYTES or more) are checksummed on another thread while written;
    write() returns only once they are checksummed, so the caller may then reuse the buffer."""
    threads: list[str] = []
    original = Checksum.update

    def slow_update(self: Checksum, data: object) -> None:
        threads.append(threading.current_thread().name)
        time.sleep(0.05)  # a checksum slower than the write: write must still wait for it
        original(self, data)

    monkeypatch.setattr(Checksum, "update", slow_update)
    sink = io.BytesIO()
    writer = ChecksumWriter(sink, algorithm)
    buffer = bytearray(b"\x5a" * BESIDE_BYTES)
    writer.write(b"header")
    writer.write(buffer)
    buffer[:] = b"\x00" * BESIDE_BYTES  # reused by the caller once write returned
    writer.write(memoryview(buffer))
    expected = b"header" + b"\x5a" * BESIDE_BYTES + b"\x00" * BESIDE_BYTES
    monkeypatch.setattr(Checksum, "update", original)
    assert (writer.size, writer.checksum.hexdigest()) == (len(expected),
                                                          checksum_bytes(expected, algorithm))
    assert sink.getvalue() == expected
    here = threading.current_thread().name
    assert threads[0] == here  # a small write: checksummed in the writing thread
    assert all(name != here and name.startswith("spotroute-checksum") for name in threads[1:])


def test_a_forked_child_checksums_with_its_own_threads() -> None:
    """The checksum threads are per process: a child forked after the parent made them gets its
    own (an executor copied by fork has no threads and would never run the checksum)."""
    import multiprocessing

    checksum_in_child(BESIDE_BYTES)  # the parent's threads exist, and are idle
    parent = manifest._checksum_pool()
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        digest = pool.apply_async(checksum_in_child, (BESIDE_BYTES + 1,)).get(timeout=60)
    assert digest == checksum_bytes(b"\x01" * (BESIDE_BYTES + 1), "xxh3-64")
    assert manifest._checksum_pool() is parent


def checksum_in_child(size: int) -> str:
    writer = ChecksumWriter(io.BytesIO(), "xxh3-64")
    writer.write(b"\x01" * size)
    return str(writer.checksum.hexdigest())


def test_new_manifests_use_xxh3_where_xxhash_is_installed() -> None:
    assert default_algorithm() == "xxh3-64"


def test_an_unknown_algorithm_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown checksum algorithm 'md4'"):
        Checksum("md4")


@pytest.mark.parametrize("algorithm", sorted(CHECK))
def test_save_restore_and_damage_with_each_algorithm(tmp_path: Path, algorithm: str) -> None:
    url = tmp_path.as_uri()
    saved: list[object] = []
    with Checkpointer(url, interval_s=None, handle_sigterm=False) as ckpt:
        ckpt.checksum_algorithm = algorithm  # what a version writing `algorithm` would do
        for step in (2, 4):
            model, optimizer, scheduler = build(step, 8)
            train_step(model, optimizer, scheduler, 8)
            ckpt.save(step, blocking=True, model=model, optimizer=optimizer,
                      scheduler=scheduler)
            saved.append(params(model))
    newest = tmp_path / "step-000000000004"
    assert Manifest.from_json((newest / "manifest.json").read_bytes()).checksum_algorithm \
        == algorithm
    store = router_files.checkpoint_store(url)
    assert [c.step for c in router_files.complete_checkpoints(store, checksums=True)] == [4, 2]
    blob = newest / "__0_0.distcp"
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0x01
    blob.write_bytes(bytes(data))
    assert [c.step for c in router_files.complete_checkpoints(store, checksums=True)] == [2]
    model, optimizer, scheduler = build(9, 8)
    with Checkpointer(url, interval_s=None, handle_sigterm=False) as again:
        start = again.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    assert start.step == 2 and "step 4: damaged (__0_0.distcp" in start.messages[0]
    assert same(params(model), saved[0])

