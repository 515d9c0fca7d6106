"""Preemption notices from loopback metadata servers, and what the checkpointer does with them."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

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
    Notice,
    SaveReport,
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


def test_aws_scheduled_events_are_a_risk_ahead_and_terminal_before_not_before(
    metadata: FakeMetadataServer,
) -> None:
    # IMDS `events/maintenance/scheduled` lists the instance's active scheduled events — an
    # on-demand instance gets them too — as [{"NotBefore": "21 Jan 2019 09:00:43 GMT", "Code":
    # "system-reboot", "Description", "EventId", "NotAfter", "State": "active"}]; the codes that
    # end the instance's run are instance-stop, instance-retirement, instance-reboot and
    # system-reboot; system-maintenance only affects network or power for a while (EC2 User
    # Guide, "Scheduled events for Amazon EC2 instances": types of scheduled events; View
    # scheduled events — instance metadata).
    source = AwsNotices(metadata.endpoint)
    assert source.poll() is None  # `[]`: nothing scheduled
    metadata.state.schedule_aws("system-maintenance", not_before_s=3600)
    metadata.state.schedule_aws("instance-stop", not_before_s=300, state="canceled")
    week = metadata.state.schedule_aws("system-reboot", not_before_s=7 * 86400)
    risk = source.poll()
    assert risk is not None and (risk.kind, risk.terminal) == ("scheduled-event", False)
    assert risk.detail["EventId"] == week and risk.detail["Code"] == "system-reboot"
    assert risk.deadline is not None
    assert abs((risk.deadline - risk.notice_time).total_seconds() - 7 * 86400) < 5
    assert source.poll() is None, "each scheduled event is reported once while it is far off"

    metadata.state.schedule_aws("instance-retirement", not_before_s=240)
    notice = source.poll()
    assert notice is not None and (notice.kind, notice.terminal) == ("instance-retirement", True)
    assert notice.deadline is not None
    left = notice.seconds_left(datetime.now(UTC))
    assert left is not None and 230 < left <= 240, "the save must finish before NotBefore"
    assert ("GET", "/latest/meta-data/events/maintenance/scheduled") in metadata.state.requests


def test_an_aws_scheduled_event_turns_terminal_its_lead_before_not_before(
    metadata: FakeMetadataServer,
) -> None:
    source = AwsNotices(metadata.endpoint, scheduled_lead_s=600)
    metadata.state.schedule_aws("instance-stop", not_before_s=900)
    first = source.poll()
    assert first is not None and not first.terminal
    later = AwsNotices(metadata.endpoint, scheduled_lead_s=1200)  # 900 s left is inside it
    notice = later.poll()
    assert notice is not None and notice.kind == "instance-stop" and notice.terminal


def test_azure_waits_for_the_first_scheduled_events_call_that_enables_the_service(
    metadata: FakeMetadataServer,
) -> None:
    # "Scheduled Events is enabled for your service the first time you make a request for
    # events. You should expect a delayed response in your first call of up to two minutes"
    # (Azure, "Scheduled Events for Linux VMs", Enabling and disabling Scheduled Events,
    # https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events). Here the first
    # answer takes 3 s, longer than the 2 s every later call is given.
    metadata.state.azure_first_call_s = 3.0
    event_id = metadata.state.preempt_azure(not_before_s=60)
    source = AzureNotices(metadata.endpoint)
    started = time.monotonic()
    notice = source.poll()
    assert time.monotonic() - started >= 3.0
    assert notice is not None and notice.detail["EventId"] == event_id
    assert source.timeout_s == 2.0 and source._answered  # later calls: the short timeout


def test_a_slow_first_azure_call_never_stalls_training(
    metadata: FakeMetadataServer, local_store: Store
) -> None:
    metadata.state.azure_first_call_s = 8.0
    metadata.state.preempt_azure(not_before_s=60)
    ckpt = Checkpointer(local_store.url, interval_s=None, every_steps=1000, handle_sigterm=False,
                        notice_sources=[AzureNotices(metadata.endpoint)], job_id="train-2")
    ckpt.watcher.poll_interval_s = 0.05
    answered: list[bool] = []  # per step: had the first call answered yet?

    def on_step(step: int) -> None:
        answered.append(metadata.state.azure_first_answered.is_set())
        time.sleep(0.05)

    with pytest.raises(SystemExit) as exited:
        run(ckpt, seed=23, steps=100000, width=8, on_step=on_step)
    assert exited.value.code == EXIT_PREEMPTED  # the eviction was seen, once the call answered
    assert answered.count(False) >= 3, "training went on while the first call was waiting"
    assert metadata.state.azure_first_answered.is_set()
    assert len(metadata.state.azure_acks) == 1


def test_gcp_long_polls_preempted_until_it_turns_true(metadata: FakeMetadataServer) -> None:
    # `instance/preempted` reads FALSE, then TRUE once Compute Engine preempts the Spot VM
    # (Compute Engine, "Create and use Spot VMs", section "Detect preemption",
    # https://cloud.google.com/compute/docs/instances/create-use-spot); `?wait_for_change=true`
    # holds the request until the value changes (Compute Engine, "Query VM metadata", section
    # "Wait for change", https://cloud.google.com/compute/docs/metadata/querying-metadata).
    source = GcpNotices(metadata.endpoint, wait_s=10)
    assert source.poll() is None  # the first read returns at once with the current value
    threading.Timer(0.3, metadata.state.preempt_gcp).start()
    started = time.monotonic()
    notice = source.poll()  # blocks on wait_for_change
    assert notice is not None and (notice.cloud, notice.kind) == ("gcp", "preempted")
    assert time.monotonic() - started < 5
    assert any("wait_for_change=true" in path for _, path in metadata.state.requests)


def test_gcp_without_the_flavor_header_is_refused() -> None:
    # Every request must carry `Metadata-Flavor: Google`; the metadata server denies one without
    # it (https://cloud.google.com/compute/docs/metadata/querying-metadata).
    with FakeMetadataServer() as server:
        from router.checkpoint.notices import _request

        status, _, _ = _request(f"{server.endpoint}/computeMetadata/v1/instance/preempted")
        assert status == 403


def test_azure_reports_a_preempt_event_for_this_vm_and_acknowledges_it(
    metadata: FakeMetadataServer,
) -> None:
    # Scheduled Events (GET /metadata/scheduledevents, header `Metadata: true`): an event lists
    # the VMs it affects in `Resources` (a scale set's events reach every VM of its placement
    # group), `Preempt` is a Spot eviction with `NotBefore` ahead, and a VM approves an event
    # early with POST {"StartRequests": [{"EventId": …}]} (Azure Instance Metadata Service,
    # "Scheduled Events for Linux VMs",
    # https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events).
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


def test_gcp_host_maintenance_of_a_gpu_vm_is_a_terminal_notice_60_s_ahead(
    metadata: FakeMetadataServer,
) -> None:
    # A VM with GPUs cannot live-migrate: host maintenance terminates it, and the metadata key
    # `maintenance-event` "changes 60 seconds before a maintenance event starts", to
    # TERMINATE_ON_HOST_MAINTENANCE (Compute Engine, "Query metadata server for maintenance
    # event notices", https://cloud.google.com/compute/docs/metadata/getting-live-migration-notice).
    source = GcpNotices(metadata.endpoint, wait_s=1)
    assert source.poll() is None
    metadata.state.maintain_gcp("TERMINATE_ON_HOST_MAINTENANCE")
    notice = source.poll()
    assert notice is not None and notice.kind == "TERMINATE_ON_HOST_MAINTENANCE" and notice.terminal
    assert notice.deadline is not None
    assert 58 <= (notice.deadline - notice.notice_time).total_seconds() <= 60
    assert ("GET", "/computeMetadata/v1/instance/maintenance-event") in metadata.state.requests


def test_gcp_live_migration_and_scheduled_maintenance_are_risks_reported_once(
    metadata: FakeMetadataServer,
) -> None:
    # `upcoming-maintenance?alt=json` holds the scheduled window (window_start_time, …) once
    # maintenance is planned, an error object before (Compute Engine, "Monitor and plan for a
    # host maintenance event", https://cloud.google.com/compute/docs/instances/
    # monitor-plan-host-maintenance-event).
    source = GcpNotices(metadata.endpoint, wait_s=1)
    assert source.poll() is None
    metadata.state.schedule_gcp_maintenance("2026-12-02T19:00:01Z")
    upcoming = source.poll()
    assert upcoming is not None and upcoming.kind == "upcoming-maintenance"
    assert not upcoming.terminal
    assert upcoming.deadline == datetime(2026, 12, 2, 19, 0, 1, tzinfo=UTC)
    assert upcoming.detail["maintenance_status"] == "PENDING"
    assert source.poll() is None, "the same window is reported once"
    metadata.state.maintain_gcp("MIGRATE_ON_HOST_MAINTENANCE")
    migrate = source.poll()
    assert migrate is not None and not migrate.terminal
    assert source.poll() is None


@pytest.mark.parametrize(
    ("event_type", "acted_on"),
    [("Preempt", True), ("Terminate", True), ("Reboot", True), ("Redeploy", True),
     ("Freeze", False)],
)  # fmt: skip
def test_azure_acts_on_every_event_that_ends_the_vms_job_and_acknowledges_it(
    metadata: FakeMetadataServer, event_type: str, acted_on: bool
) -> None:
    # Scheduled Events types: Freeze (a pause of seconds), Reboot, Redeploy (another host),
    # Preempt (Spot eviction), Terminate (deletion); approve one with POST {"StartRequests":
    # [{"EventId": …}]} (https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events).
    source = AzureNotices(metadata.endpoint)
    event_id = metadata.state.preempt_azure(event_type=event_type, not_before_s=600)
    notice = source.poll()
    if not acted_on:
        assert notice is None
        return
    assert notice is not None and notice.kind == event_type and notice.terminal
    assert notice.deadline is not None and notice.detail["EventId"] == event_id
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


@pytest.mark.parametrize(
    ("cloud", "kind"),
    [("aws", "terminate"), ("gcp", "preempted"), ("azure", "Preempt"),
     ("gcp", "TERMINATE_ON_HOST_MAINTENANCE"), ("azure", "Redeploy"), ("aws", "instance-stop")],
)  # fmt: skip
def test_a_notice_mid_run_saves_writes_the_marker_and_exits_75(
    cloud: str, kind: str, metadata: FakeMetadataServer, local_store: Store
) -> None:
    sources = {"aws": AwsNotices(metadata.endpoint), "gcp": GcpNotices(metadata.endpoint, wait_s=1),
               "azure": AzureNotices(metadata.endpoint)}
    preempt = {"terminate": metadata.state.preempt_aws, "preempted": metadata.state.preempt_gcp,
               "Preempt": metadata.state.preempt_azure,
               "TERMINATE_ON_HOST_MAINTENANCE": metadata.state.maintain_gcp,
               "Redeploy": lambda: metadata.state.preempt_azure(event_type="Redeploy"),
               # An on-demand instance's scheduled stop (EC2 scheduled events): saved before
               # its NotBefore, a minute ahead here.
               "instance-stop": lambda: metadata.state.schedule_aws("instance-stop", 60)}[kind]
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
    assert marker["kind"] == kind
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


# --- how fast a notice becomes a complete checkpoint ------------------------------------------

STEP_S = 0.25  # one training step of the loops below


def _train_until_preempted(ckpt: Checkpointer, trigger: Callable[[], None], *,
                           step_s: float = STEP_S, micro_batches: int = 1,
                           check_should_stop: bool = False,
                           trigger_after_s: float = 1.0) -> tuple[float, dict[str, Any]]:
    """Train (step_s per step) until the notice `trigger` sends makes maybe_save exit 75.

    Returns (wall seconds from the trigger to the checkpoint being complete, the marker).
    """
    model, optimizer, scheduler = build(31, 8)
    ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    sent: list[float] = []
    timer = threading.Timer(trigger_after_s, lambda: (sent.append(time.time()), trigger()))
    timer.start()
    step = 0
    try:
        with pytest.raises(SystemExit) as exited:
            for step in range(1, 10_000):
                for _ in range(micro_batches):
                    time.sleep(step_s / micro_batches)
                    if check_should_stop and ckpt.should_stop():
                        break  # end the step early: maybe_save saves at once
                train_step(model, optimizer, scheduler, 8)
                ckpt.maybe_save(step)
        assert exited.value.code == EXIT_PREEMPTED
    finally:
        timer.cancel()
    fs, root = fs_of(ckpt)
    marker = json.loads(fs.cat_file(f"{root}/interruption.json"))
    assert fs.exists(f"{root}/step-{step:012d}/manifest.json")  # the step it stopped at
    assert marker["last_step"] == step and marker["exit_code"] == EXIT_PREEMPTED
    written = datetime.fromisoformat(marker["written_at"]).timestamp()
    return written - sent[0], marker


def fs_of(ckpt: Checkpointer) -> tuple[Any, str]:
    return ckpt.location.fs, ckpt.location.root


@pytest.mark.parametrize("cloud", ["aws", "gcp", "sigterm"])
def test_notice_becomes_a_complete_checkpoint_within_poll_plus_step_plus_save(
    cloud: str, metadata: FakeMetadataServer, local_store: Store
) -> None:
    sources: list[Any] = {"aws": [AwsNotices(metadata.endpoint)],
                          "gcp": [GcpNotices(metadata.endpoint, wait_s=5)], "sigterm": []}[cloud]
    trigger = {"aws": metadata.state.preempt_aws, "gcp": metadata.state.preempt_gcp,
               "sigterm": lambda: os.kill(os.getpid(), signal.SIGTERM)}[cloud]
    # Default poll interval (2 s): AWS is polled; GCP long-polls and SIGTERM wakes at once.
    ckpt = Checkpointer(local_store.url, interval_s=None, handle_sigterm=cloud == "sigterm",
                        notice_sources=sources)
    poll_s = {"aws": ckpt.watcher.poll_interval_s, "gcp": 0.0, "sigterm": 0.0}[cloud]

    latency_s, marker = _train_until_preempted(ckpt, trigger)

    # The bound docs/checkpoints.md states: poll + the rest of a step + one synchronous save
    # (+ 1.5 s for a loaded 2-core machine). Far inside GCP's 30 s, let alone AWS's 120 s.
    bound_s = poll_s + STEP_S + marker["save_s"] + 1.5
    print(f"{cloud}: notice → complete checkpoint {latency_s:.3f} s (bound {bound_s:.2f} s)")
    assert latency_s <= bound_s, (latency_s, marker)
    assert 0 <= marker["notice_to_saved_s"] <= latency_s + 0.01
    assert marker["skipped_save"] is None


def test_should_stop_ends_a_long_step_early_so_the_save_does_not_wait_for_it(
    local_store: Store,
) -> None:
    # A 4 s step (16 micro-batches): without should_stop() the save would wait for its end.
    ckpt = Checkpointer(local_store.url, interval_s=None)
    latency_s, marker = _train_until_preempted(
        ckpt, lambda: os.kill(os.getpid(), signal.SIGTERM), step_s=4.0, micro_batches=16,
        check_should_stop=True, trigger_after_s=5.0)  # inside the second step
    assert ckpt.should_stop()
    print(f"4 s step, should_stop(): notice → complete checkpoint {latency_s:.3f} s")
    assert latency_s <= 4.0 / 16 + marker["save_s"] + 1.5, (latency_s, marker)
    assert latency_s < 3.0  # well under the rest of the step (≈ 3 s)


def test_should_stop_is_false_until_a_notice_arrives(local_store: Store) -> None:
    with Checkpointer(local_store.url, interval_s=None) as ckpt:
        assert not ckpt.should_stop()
        ckpt.watcher.record(Notice(cloud="gcp", kind="preempted", notice_time=datetime.now(UTC)))
        assert ckpt.should_stop()


def test_notice_seconds_left_uses_the_deadline_else_the_clouds_grace_period() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    aws = Notice(cloud="aws", kind="terminate", notice_time=now,
                 deadline=now + timedelta(seconds=120))
    gcp = Notice(cloud="gcp", kind="preempted", notice_time=now - timedelta(seconds=10))
    assert aws.seconds_left(now + timedelta(seconds=20)) == 100
    assert gcp.seconds_left(now) == 20  # 30 s after the notice, 10 s of them gone
    assert Notice(cloud="aws", kind="rebalance", notice_time=now).seconds_left(now) is None


def test_a_notice_with_no_time_for_another_save_keeps_the_one_in_flight_and_exits(
    local_store: Store,
) -> None:
    ckpt = Checkpointer(local_store.url, interval_s=None, handle_sigterm=False)
    model, optimizer, scheduler = build(32, 8)
    ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler)
    train_step(model, optimizer, scheduler, 8)
    ckpt.reports.append(SaveReport(step=0, blocked_s=0.1, save_s=60.0))  # saves take a minute
    assert ckpt.save(4)  # asynchronous: in flight when the notice arrives
    # GCP's notice came 25 s ago: 5 s are left, less than a save.
    ckpt.watcher.record(Notice(cloud="gcp", kind="preempted",
                               notice_time=datetime.now(UTC) - timedelta(seconds=25)))
    train_step(model, optimizer, scheduler, 8)
    with pytest.raises(SystemExit) as exited:
        ckpt.maybe_save(5)
    assert exited.value.code == EXIT_PREEMPTED
    fs, root = fs_of(ckpt)
    marker = json.loads(fs.cat_file(f"{root}/interruption.json"))
    assert marker["last_step"] == 4
    assert "kept step 4" in marker["skipped_save"]
    assert fs.exists(f"{root}/step-000000000004/manifest.json")
    assert not fs.exists(f"{root}/step-000000000005")
