"""The node pollers through the real boto3, google-cloud-compute and azure-mgmt-compute clients:
EC2 Fleet on moto's server, GCE managed instance groups and Azure scale sets on loopback fakes."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from google.auth.credentials import AnonymousCredentials

from router.core.errors import BadInput, OperationFailed
from router.nodes import aws, azure, gcp
from router.nodes.node_state import LOST, RUNNING, NodeState
from router.nodes.sources import poll_placement
from tests.adapters.fake_azure import FakeCredential, TlsFiles, make_tls
from tests.adapters.fake_nodes import AzureVm, FakeAzureScaleSets, FakeGcpGroups, GcpVm
from tests.backend_servers import S3_ENV


def _latency(poll: Callable[[], NodeState], cloud: str) -> None:
    times = []
    for _ in range(10):
        started = time.perf_counter()
        poll()
        times.append(time.perf_counter() - started)
    print(f"node poll {cloud}: median {statistics.median(times) * 1e3:.1f} ms")


# --- AWS: EC2 Fleet on moto's server --------------------------------------------------------


@pytest.fixture
def ec2(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    return boto3.client("ec2", endpoint_url=f"http://{moto_endpoint}", region_name="us-east-1")


def _fleet(ec2: Any, nodes: int) -> tuple[str, list[str]]:
    """An instant spot fleet as components/aws.py creates one; (fleet id, instance ids)."""
    template = ec2.create_launch_template(
        LaunchTemplateName=f"train-{time.monotonic_ns()}",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "p4d.24xlarge"},
    )["LaunchTemplate"]["LaunchTemplateId"]
    fleet = ec2.create_fleet(
        Type="instant",
        LaunchTemplateConfigs=[{
            "LaunchTemplateSpecification": {"LaunchTemplateId": template, "Version": "1"},
            "Overrides": [{"InstanceType": "p4d.24xlarge", "Priority": 0.0}],
        }],
        TargetCapacitySpecification={"TotalTargetCapacity": nodes, "SpotTargetCapacity": nodes,
                                     "DefaultTargetCapacityType": "spot"},
        SpotOptions={"AllocationStrategy": "price-capacity-optimized",
                     "InstanceInterruptionBehavior": "terminate",
                     "MinTargetCapacity": nodes, "SingleInstanceType": True},
    )  # fmt: skip
    ids = [i for group in fleet["Instances"] for i in group["InstanceIds"]]
    return fleet["FleetId"], ids


def test_aws_fleet_with_all_nodes_running_is_not_interrupted(ec2: Any) -> None:
    fleet_id, ids = _fleet(ec2, 2)
    state = aws.poll(fleet_id, "us-east-1", ec2=ec2)
    assert (state.wanted, state.running, state.interrupted) == (2, 2, False)
    assert sorted(n.id for n in state.nodes) == sorted(ids)
    _latency(lambda: aws.poll(fleet_id, "us-east-1", ec2=ec2), "aws (moto)")


def test_aws_fleet_that_lost_a_node_is_interrupted_and_says_which(ec2: Any) -> None:
    fleet_id, ids = _fleet(ec2, 2)
    ec2.terminate_instances(InstanceIds=ids[:1])
    state = aws.poll(fleet_id, "us-east-1", ec2=ec2)
    assert state.interrupted and state.running == 1
    # AWS keeps a terminated instance in the instant fleet's list (then it is named, with its
    # state reason); moto drops it: then the fleet is simply one node short.
    lost = [n for n in state.nodes if n.status == LOST]
    if lost:
        assert [n.id for n in lost] == ids[:1] and "terminated" in state.reason
    else:
        assert state.reason == "aws: 1 of 2 nodes present"


def test_aws_fleet_deleted_or_unknown_is_gone(ec2: Any) -> None:
    fleet_id, _ids = _fleet(ec2, 1)
    ec2.delete_fleets(FleetIds=[fleet_id], TerminateInstances=True)
    assert aws.poll(fleet_id, "us-east-1", ec2=ec2).interrupted
    unknown = aws.poll("fleet-00000000-0000-0000-0000-000000000000", "us-east-1", ec2=ec2)
    assert unknown.gone and unknown.interrupted


def test_aws_spot_reclaim_and_interruption_notice_read_as_reclaimed() -> None:
    # DescribeInstances as AWS answers for a reclaimed spot instance (EC2 API reference).
    reclaimed = {"InstanceId": "i-0a1", "State": {"Code": 48, "Name": "terminated"},
                 "StateReason": {"Code": "Server.SpotInstanceTermination",
                                 "Message": "Server.SpotInstanceTermination: Spot instance "
                                            "termination"}}  # fmt: skip
    assert aws.node(reclaimed, {}).reclaimed
    running = {"InstanceId": "i-0a2", "State": {"Code": 16, "Name": "running"}}
    assert aws.node(running, {}).status == RUNNING
    notice = aws.node(running, {"i-0a2": "marked-for-termination"})  # the 2-minute notice
    assert notice.status == LOST and notice.reclaimed



class _FleetListsAForgottenInstance:
    """The moto client, except that DescribeFleets also lists `forgotten`: an instance of the
    fleet that EC2 terminated over an hour ago and no longer knows (AWS keeps it in the instant
    fleet's list; moto drops it at termination)."""

    def __init__(self, ec2: Any, forgotten: str) -> None:
        self._ec2, self._forgotten = ec2, forgotten

    def describe_fleets(self, **kwargs: Any) -> Any:
        answer = self._ec2.describe_fleets(**kwargs)
        answer["Fleets"][0]["Instances"][0]["InstanceIds"].append(self._forgotten)
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ec2, name)


def test_aws_fleet_whose_instance_ec2_no_longer_knows_is_lost_not_healthy(ec2: Any) -> None:
    from botocore.exceptions import ClientError

    fleet_id, ids = _fleet(ec2, 1)
    forgotten = "i-0f0f0f0f0f0f0f0f0"
    # What EC2 (here moto's server) answers for an id it no longer knows: the real botocore
    # error, InvalidInstanceID.NotFound (EC2 API reference, DescribeInstances: "If you specify
    # an instance ID that is not valid, an error is returned"; "Recently terminated instances
    # might appear in the returned results. This interval is usually less than one hour.").
    with pytest.raises(ClientError) as raised:
        ec2.describe_instances(InstanceIds=[ids[0], forgotten])
    assert raised.value.response["Error"]["Code"] == "InvalidInstanceID.NotFound"

    state = aws.poll(fleet_id, "us-east-1", ec2=_FleetListsAForgottenInstance(ec2, forgotten))

    assert state.interrupted and state.running == 1
    (lost,) = [n for n in state.nodes if n.status == LOST]
    assert lost.id == forgotten and "no longer lists it" in lost.detail


# --- GCP: managed instance groups on a loopback fake ------------------------------------------


@pytest.fixture
def fake_gcp() -> Iterator[FakeGcpGroups]:
    server = FakeGcpGroups().start()
    yield server
    server.stop()


def _gcp_poll(fake: FakeGcpGroups, group_id: str) -> NodeState:
    return gcp.poll(group_id, "us-central1", credentials=AnonymousCredentials(),
                    endpoint=fake.url)  # fmt: skip


ZONAL = "projects/spotroute-test/zones/us-central1-a/instanceGroupManagers/train-group"


def test_gcp_group_with_running_nodes_is_not_interrupted(fake_gcp: FakeGcpGroups) -> None:
    fake_gcp.groups[("zones", "us-central1-a", "train-group")] = (
        2, [GcpVm("us-central1-a", "train-node-a1"), GcpVm("us-central1-a", "train-node-b2")]
    )
    state = _gcp_poll(fake_gcp, ZONAL)
    assert (state.wanted, state.running, state.interrupted) == (2, 2, False)
    assert not any("/operations" in s for s in fake_gcp.seen), "no need to ask about preemptions"
    _latency(lambda: _gcp_poll(fake_gcp, ZONAL), "gcp (fake)")


def test_gcp_preempted_node_is_reclaimed_per_the_zone_operations(fake_gcp: FakeGcpGroups) -> None:
    # Compute Engine records a preemption as a system operation `compute.instances.preempted`
    # targeting the VM, listed by the zone's operations (Compute Engine, "Create and use Spot
    # VMs", section "Detect preemption", https://cloud.google.com/compute/docs/instances/
    # create-use-spot); a managed group then recreates the VM (currentAction RECREATING).
    fake_gcp.groups[("regions", "us-central1", "train-group")] = (2, [
        GcpVm("us-central1-b", "train-node-a1"),
        GcpVm("us-central1-b", "train-node-b2", "TERMINATED", "RECREATING",
              preempted_at="2026-12-01T10:02:00.000-08:00"),
    ])  # fmt: skip
    state = _gcp_poll(
        fake_gcp, "projects/spotroute-test/regions/us-central1/instanceGroupManagers/train-group"
    )
    assert state.interrupted and state.running == 1
    (lost,) = [n for n in state.nodes if n.status == LOST]
    assert lost.id == "train-node-b2" and lost.reclaimed
    assert "compute.instances.preempted" in state.reason and "reclaimed" in state.reason
    assert "GET /compute/v1/projects/spotroute-test/zones/us-central1-b/operations" in fake_gcp.seen


def test_gcp_node_recreated_without_preemption_is_lost_not_reclaimed(
    fake_gcp: FakeGcpGroups,
) -> None:
    fake_gcp.groups[("zones", "us-central1-a", "train-group")] = (
        1, [GcpVm("us-central1-a", "train-node-a1", "STOPPING", "RECREATING")]
    )
    state = _gcp_poll(fake_gcp, ZONAL)
    assert state.interrupted and not state.nodes[0].reclaimed


def test_gcp_missing_group_is_gone_and_forbidden_names_the_permission(
    fake_gcp: FakeGcpGroups,
) -> None:
    assert _gcp_poll(fake_gcp, ZONAL).gone
    fake_gcp.status = 403
    with pytest.raises(OperationFailed, match=r"compute\.instanceGroupManagers\.get"):
        _gcp_poll(fake_gcp, ZONAL)
    with pytest.raises(BadInput, match="instance group manager"):
        _gcp_poll(fake_gcp, "train-group")


# --- Azure: VM scale sets on a loopback fake (TLS) --------------------------------------------


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("nodes-tls"))


@pytest.fixture
def fake_azure(tls: TlsFiles) -> Iterator[FakeAzureScaleSets]:
    server = FakeAzureScaleSets(tls_files=tls).start()
    yield server
    server.stop()


def _azure_poll(fake: FakeAzureScaleSets, name: str) -> NodeState:
    from azure.mgmt.compute import ComputeManagementClient

    assert fake.tls is not None
    client = ComputeManagementClient(
        credential=FakeCredential(), subscription_id=fake.subscription, base_url=fake.url,
        connection_verify=str(fake.tls.ca_path),
    )  # fmt: skip
    return azure.poll(fake.vmss_id(name), "eastus", compute=client)


def test_azure_scale_set_with_running_vms_is_not_interrupted(
    fake_azure: FakeAzureScaleSets,
) -> None:
    fake_azure.scale_sets["train-vmss"] = (2, "Spot", [AzureVm("train_1a"), AzureVm("train_2b")])
    state = _azure_poll(fake_azure, "train-vmss")
    assert (state.wanted, state.running, state.interrupted) == (2, 2, False)
    assert any("%24expand=instanceView" in s or "$expand=instanceView" in s
               for s in fake_azure.seen)  # fmt: skip
    _latency(lambda: _azure_poll(fake_azure, "train-vmss"), "azure (fake, TLS)")


def test_azure_deallocated_spot_vm_is_reclaimed_and_a_missing_one_lost_with_cause_unknown(
    fake_azure: FakeAzureScaleSets,
) -> None:
    # An evicted Spot VM under eviction policy Deallocate stays in the scale set, stopped and
    # deallocated; under Delete it is gone (Azure, "Use Azure Spot Virtual Machines", section
    # "Eviction policy", https://learn.microsoft.com/azure/virtual-machines/spot-vms). The
    # instance view's power state code reads `PowerState/deallocated` (Azure, "States and
    # billing status of Azure Virtual Machines",
    # https://learn.microsoft.com/azure/virtual-machines/states-billing).
    # A node deletes itself after its job (components/azure.py), crashed or not: a missing VM is
    # not the cloud saying it evicted it, so it cannot overrule the node's crash record.
    fake_azure.scale_sets["train-vmss"] = (2, "Spot", [AzureVm("train_1a")])  # one gone
    state = _azure_poll(fake_azure, "train-vmss")
    assert state.interrupted and state.running == 1
    (lost,) = [n for n in state.nodes if n.status == LOST]
    assert "deleted itself" in lost.detail and not lost.reclaimed
    fake_azure.scale_sets["train-vmss"] = (
        2, "Spot", [AzureVm("train_1a"), AzureVm("train_2b", "PowerState/deallocated")]
    )
    state = _azure_poll(fake_azure, "train-vmss")
    assert state.interrupted and [n.id for n in state.nodes if n.reclaimed] == ["train_2b"]


def test_azure_missing_scale_set_is_gone_and_forbidden_names_the_permission(
    fake_azure: FakeAzureScaleSets,
) -> None:
    assert _azure_poll(fake_azure, "nope").gone
    fake_azure.status = 403
    with pytest.raises(OperationFailed, match="virtualMachineScaleSets/read"):
        _azure_poll(fake_azure, "nope")


# --- the registry -------------------------------------------------------------------------------


def test_placement_records_dispatch_to_their_cloud_and_local_reads_its_records(
    tmp_path: Path,
) -> None:
    asked: list[tuple[str, str]] = []

    def fake(group_id: str, region: str) -> NodeState:
        asked.append((group_id, region))
        return NodeState("gcp", group_id, 1)

    pollers = {"gcp": fake}
    record = {"cloud": "gcp", "region": "us-central1", "outputs": {"groupId": ZONAL}}
    state = poll_placement(record, pollers)
    assert state is not None and state.interrupted  # wanted 1, none present
    assert asked == [(ZONAL, "us-central1")]
    # The local target has its own poller: a legacy one-process id whose process is gone is lost.
    local = poll_placement({"cloud": "local", "outputs": {"groupId": "local-process:1:1"}})
    assert local is not None and local.cloud == "local" and local.interrupted
    assert poll_placement({"cloud": "local", "outputs": {}}) is None
