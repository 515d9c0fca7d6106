"""The router copies a hand-over checkpoint between storages with fsspec, verified, manifest last:
file → S3 (moto's server) → GCS (fake-gcs-server), checkpoints written and restored by the real
checkpoint library (router.checkpoint)."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from router.checkpoint import Checkpointer
from router.config.checkpoint_copy import copy_checkpoint, latest_complete_step, same_storage
from router.core.errors import OperationFailed
from tests.backend_servers import S3_ENV
from tests.checkpoint.servers import StorageServer, start_gcs

Options = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def gcs() -> Iterator[StorageServer]:
    server = start_gcs()
    yield server
    server.stop()


@pytest.fixture
def stores(
    moto_endpoint: str, gcs: StorageServer, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str, Options]:
    """A fresh S3 bucket on moto and a fresh prefix on fake-gcs-server; fsspec options."""
    import boto3

    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    endpoint = f"http://{moto_endpoint}"
    bucket = f"ckpt-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    options: Options = {
        "s3": {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}},
        "gs": gcs.storage_options,
    }  # fmt: skip
    return f"s3://{bucket}/train", f"{gcs.url}/train-{uuid.uuid4().hex[:8]}", options


def _checkpointer(url: str, options: Options | None = None) -> Checkpointer:
    scheme = url.split("://", 1)[0]
    return Checkpointer(url, interval_s=None, job_id="train", handle_sigterm=False,
                        asynchronous=False, notice_sources=[],
                        storage_options=(options or {}).get(scheme))  # fmt: skip


def _save(url: str, step: int, tmp_path: Path, size: int) -> dict[str, bytes]:
    files = {"model.bin": os.urandom(size), "opt/state.bin": os.urandom(size // 3 + 1)}
    src = tmp_path / f"save-{step}"
    for name, blob in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(blob)
    ckpt = _checkpointer(url)
    assert ckpt.save_files(step, src)
    ckpt.close()
    return files


def _restore(url: str, options: Options, tmp_path: Path, name: str) -> tuple[int, Path]:
    out = tmp_path / name
    out.mkdir()
    ckpt = _checkpointer(url, options)
    resume = ckpt.restore_files(out)
    ckpt.close()
    return resume.step, out


def test_a_checkpoint_travels_file_to_s3_to_gcs_and_the_library_restores_it_each_time(
    stores: tuple[str, str, Options], tmp_path: Path
) -> None:
    s3_url, gs_url, options = stores
    file_url = f"file://{tmp_path / 'local'}"
    _save(file_url, 10, tmp_path, 1 << 20)
    files = _save(file_url, 20, tmp_path, 3 << 20)  # the hand-over checkpoint
    assert latest_complete_step(file_url) == 20

    to_s3 = copy_checkpoint(file_url, s3_url, 20, options=options)
    assert (to_s3.step, to_s3.files, to_s3.already_there) == (20, 3, False)
    assert to_s3.bytes >= sum(len(b) for b in files.values())
    to_gs = copy_checkpoint(s3_url, gs_url, 20, options=options)
    assert not to_gs.already_there
    for url, name in ((s3_url, "from-s3"), (gs_url, "from-gs")):
        assert latest_complete_step(url, options=options) == 20
        step, out = _restore(url, options, tmp_path, name)
        assert step == 20
        assert {n: (out / n).read_bytes() for n in files} == files, url

    again = copy_checkpoint(s3_url, gs_url, 20, options=options)  # a router re-running the step
    assert again.already_there
    print(f"checkpoint copy of {to_s3.bytes / 1e6:.1f} MB: file→s3 {to_s3.seconds:.2f} s, "
          f"s3→gcs {to_gs.seconds:.2f} s")  # fmt: skip


def test_a_copy_torn_by_a_kill_never_counts_and_running_it_again_completes_it(
    stores: tuple[str, str, Options], tmp_path: Path
) -> None:
    import fsspec.core

    s3_url, _gs_url, options = stores
    file_url = f"file://{tmp_path / 'local'}"
    _save(file_url, 7, tmp_path, 256 << 10)
    fs, root = fsspec.core.url_to_fs(s3_url, **options["s3"])
    # what a router killed mid-copy leaves: one file, half written, and no manifest
    fs.pipe_file(f"{root}/step-000000000007/model.bin", b"half")
    assert latest_complete_step(s3_url, options=options) is None
    copied = copy_checkpoint(file_url, s3_url, 7, options=options)
    assert not copied.already_there
    assert latest_complete_step(s3_url, options=options) == 7


def test_a_damaged_source_is_refused_and_nothing_counts_at_the_target(
    stores: tuple[str, str, Options], tmp_path: Path
) -> None:
    s3_url, _gs_url, options = stores
    local = tmp_path / "local"
    file_url = f"file://{local}"
    _save(file_url, 3, tmp_path, 64 << 10)
    manifest = json.loads((local / "step-000000000003" / "manifest.json").read_text())
    damaged = local / "step-000000000003" / manifest["files"][0]["path"]
    damaged.write_bytes(b"x" + damaged.read_bytes()[1:])  # same size, one byte changed
    assert latest_complete_step(file_url) is None
    with pytest.raises(OperationFailed, match="does not match its manifest"):
        copy_checkpoint(file_url, s3_url, 3, options=options)
    assert latest_complete_step(s3_url, options=options) is None
    with pytest.raises(OperationFailed, match="no manifest"):
        copy_checkpoint(file_url, s3_url, 99, options=options)


def test_the_same_storage_needs_no_copy() -> None:
    assert same_storage("s3://b/train/", "s3://b/train")
    assert not same_storage("s3://b/train", "gs://b/train")
