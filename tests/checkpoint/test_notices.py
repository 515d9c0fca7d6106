"""Preemption notices from loopback metadata servers, and what the checkpointer does with them."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from fake_metadata import FakeMetadataServer
from servers import Store
from training import build, reference, run, same, train_step

from router.checkpoint import (
    EXIT_PREEMPTED,
    AwsNotices,
    AzureNotices,
    Checkpointer,
    GcpNotices,
    Manifest,
    SigtermNotices,
)
from router.checkpoint.notices import MetadataUnavailable, source_for


@pytest.fixture
def metadata() -> Iterator[FakeMetadataServer]:
    with FakeMetadataServer() as server:
        yield server


def test_aws_asks_for_a_session_token_then_reads_instance_action(
    metadata: FakeMetadataServer,
) -> None:
    source = AwsNotices(metadata.endpoint)
    assert source.poll() is None
    metadata.state.preempt_aws("stop")
    notice = source.poll()
    assert notice is not None
    assert (notice.cloud, notice.kind, notice.terminal) == ("aws", "stop", True)
    assert notice.deadline is not None and notice.deadline.tzinfo is not None
    assert metadata.state.token_requests == 1  # one token for every request
    assert metadata.state.requests[0] == ("PUT", "/latest/api/token")


def test_aws_fetches_a_new_token_when_the_old_one_is_refused(metadata: FakeMetadataServer) -> None:
    source = AwsNotices(metadata.endpoint)
    source.poll()
    metadata.state.tokens.clear()  # expired
    metadata.state.preempt_aws()
    assert source.poll() is not None
    assert metadata.state.token_requests == 2


def test_aws_rebalance_recommendation_is_reported_once_and_not_terminal(
    metadata: FakeMetadataServer,
) -> None:
    source = AwsNotices(metadata.endpoint)
    metadata.state.rebalance_aws()
    first = source.poll()
    assert first is not None and first.kind == "rebalance" and not first.terminal
    assert source.poll() is None


def test_gcp_long_polls_preempted_until_it_turns_true(metadata: FakeMetadataServer) -> None:
    source = GcpNotices(metadata.endpoint, wait_s=10)
    assert source.poll() is None  # the first read returns at once with the current value
    threading.Timer(0.3, metadata.state.preempt_gcp).start()
    started = time.monotonic()
    notice = source.poll()  # blocks on wait_for_change
    assert notice is not None and (notice.cloud, notice.kind) == ("gcp", "preempted")
    assert time.monotonic() - started < 5
    assert any("wait_for_change=true" in path for _, path in metadata.state.requests)


def test_gcp_without_the_flavor_header_is_refused() -> None:
    with FakeMetadataServer() as server:
        from router.checkpoint.notices import _request

        status, _, _ = _request(f"{server.endpoint}/computeMetadata/v1/instance/preempted")
        assert status == 403


def test_azure_reports_a_preempt_event_for_this_vm_and_acknowledges_it(
    metadata: FakeMetadataServer,
) -> None:
    source = AzureNotices(metadata.endpoint)
    assert source.poll() is None
    metadata.state.preempt_azure(resources=["other-vm_3"])
    assert source.poll() is None  # another VM of the scale set
    event_id = metadata.state.preempt_azure()
    notice = source.poll()
    assert notice is not None and notice.kind == "Preempt" and notice.detail["EventId"] == event_id
    assert notice.deadline is not None
    source.acknowledge(notice)
    assert metadata.state.azure_acks == [event_id]


def test_an_unreachable_endpoint_raises_metadata_unavailable() -> None:
    from servers import free_port

    source = AwsNotices(f"http://127.0.0.1:{free_port()}", timeout_s=0.5)
    with pytest.raises(MetadataUnavailable):
        source.poll()


def test_unknown_notice_source_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="use aws, gcp, azure, local or none"):
        source_for("ibm")


def test_sigterm_is_a_local_notice() -> None:
    source = SigtermNotices(wait_s=0.01)
    try:
        assert source.poll() is None
        os.kill(os.getpid(), signal.SIGTERM)
        notice = source.poll()
        assert notice is not None and (notice.cloud, notice.kind) == ("local", "sigterm")
    finally:
        source.close()


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_a_notice_mid_run_saves_writes_the_marker_and_exits_75(
    cloud: str, metadata: FakeMetadataServer, local_store: Store
) -> None:
    sources = {"aws": AwsNotices(metadata.endpoint), "gcp": GcpNotices(metadata.endpoint, wait_s=1),
               "azure": AzureNotices(metadata.endpoint)}
    preempt = {"aws": metadata.state.preempt_aws, "gcp": metadata.state.preempt_gcp,
               "azure": metadata.state.preempt_azure}[cloud]
    ckpt = Checkpointer(local_store.url, interval_s=None, every_steps=5, handle_sigterm=False,
                        notice_sources=[sources[cloud]], job_id="train-1")
    ckpt.watcher.poll_interval_s = 0.05

    def on_step(step: int) -> None:
        if step == 7:
            preempt()
            deadline = time.monotonic() + 10
            while ckpt.notice() is None and time.monotonic() < deadline:
                time.sleep(0.02)

    with pytest.raises(SystemExit) as exited:
        run(ckpt, seed=21, steps=20, width=8, on_step=on_step)
    assert exited.value.code == EXIT_PREEMPTED
    fs, root = local_store.fs_path()
    marker = json.loads(fs.cat_file(f"{root}/interruption.json"))
    assert (marker["cloud"], marker["last_step"], marker["exit_code"], marker["job_id"]) == (
        {"aws": "aws", "gcp": "gcp", "azure": "azure"}[cloud], 8, 75, "train-1")
    assert marker["kind"] == {"aws": "terminate", "gcp": "preempted", "azure": "Preempt"}[cloud]
    assert marker["notice_time"]
    manifest = Manifest.from_json(fs.cat_file(f"{root}/step-000000000008/manifest.json"))
    assert manifest.step == 8
    if cloud == "azure":
        assert len(metadata.state.azure_acks) == 1  # acknowledged, after the save
    with Checkpointer(local_store.url, interval_s=None, handle_sigterm=False) as again:
        final, started = run(again, seed=21, steps=20, width=8)
    assert started == 8
    assert same(final, reference(seed=21, steps=20, width=8))


def test_a_rebalance_recommendation_saves_and_keeps_training(
    metadata: FakeMetadataServer, local_store: Store
) -> None:
    ckpt = Checkpointer(local_store.url, interval_s=None, handle_sigterm=False,
                        notice_sources=[AwsNotices(metadata.endpoint)])
    ckpt.watcher.poll_interval_s = 0.05
    model, optimizer, scheduler = build(22, 8)
    ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    metadata.state.rebalance_aws()
    deadline = time.monotonic() + 10
    saved = False
    step = 0
    while not saved and time.monotonic() < deadline:
        train_step(model, optimizer, scheduler, 8)
        step += 1
        saved = ckpt.maybe_save(step)
        time.sleep(0.02)
    ckpt.close()
    assert saved
    fs, root = local_store.fs_path()
    marker = json.loads(fs.cat_file(f"{root}/interruption.json"))
    assert (marker["kind"], marker["exiting"], marker["exit_code"]) == ("rebalance", False, None)
