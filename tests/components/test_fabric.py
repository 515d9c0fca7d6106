"""The fabric a group needs, under Pulumi mocks: EFA interfaces and a cluster placement group on
p4d/p4de/p5 (AWS), gVNIC on A3 (GCP: A3 machine types run only on gVNIC, so a single node needs it
too), InfiniBand devices in the containers of ND A100/H100 scale sets (Azure), and each provider's
NCCL settings; a single node and other types stay as they were. Sources: components/fabric.csv."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from harness import CapturedStack, run_program
from test_azure import AZURE_CALLS, AZURE_STATES
from test_gcp import GCP_STATES
from test_secret_env import STATES as SECRET_STATES

from components.fabric import Fabric, fabric_for, parse_fabric_csv

TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
FLEET = "aws:ec2/fleet:Fleet"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
GCP_TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
VMSS = "azure-native:compute:VirtualMachineScaleSet"
USER_DATA_LIMIT = 16 * 1024  # EC2: user data is limited to 16 KB before base64 encoding
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html


def aws_p5(aws_config: dict[str, Any], **changes: Any) -> CapturedStack:
    return run_program({**aws_config, "instanceTypes": ["p5.48xlarge"], "gpu": "H100-80GB",
                        **changes},
                       states={**SECRET_STATES["aws"],
                               PLACEMENT_GROUP: lambda name, inputs: {"name": f"{name}-pg"}})


def user_data(stack: CapturedStack) -> str:
    return base64.b64decode(stack.one(TEMPLATE).inputs["userData"]).decode()


def test_every_fabric_row_parses_and_names_its_source() -> None:
    assert fabric_for("aws", "p5.48xlarge").efa_interfaces == 32
    assert fabric_for("aws", "p4d.24xlarge").efa_interfaces == 4
    assert fabric_for("gcp", "a3-megagpu-8g").nic_type == "GVNIC"
    assert fabric_for("azure", "Standard_ND96isr_H100_v5").infiniband
    assert fabric_for("aws", "g4dn.xlarge") == Fabric()
    with pytest.raises(ValueError, match="row 2: nccl_env"):
        parse_fabric_csv("cloud,instance_type,efa_interfaces,placement,nic_type,infiniband,"
                         "nccl_env,source\naws,x,1,,,,bad-name=1,https://example.com/\n")
    with pytest.raises(ValueError, match=r"row 2: .*@default-route"):
        parse_fabric_csv("cloud,instance_type,efa_interfaces,placement,nic_type,infiniband,"
                         "nccl_env,source\ngcp,x,,,,,NCCL_SOCKET_IFNAME=@gateway,https://e.com/\n")


def test_a_p5_group_gets_every_efa_device_in_one_cluster_placement_group(
    aws_config: dict[str, Any],
) -> None:
    stack = aws_p5(aws_config)
    template = stack.one(TEMPLATE).inputs
    group = stack.one(PLACEMENT_GROUP)
    sg, subnet = stack.named("llm-finetune-sg"), stack.named("llm-finetune-subnet")

    assert group.inputs["strategy"] == "cluster"
    assert template["placement"] == {"groupName": f"{group.name}-pg"}
    interfaces = template["networkInterfaces"]
    # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html: the primary an
    # ENA interface, card 0 device 1 EFA-only, every further card device 0 EFA-only.
    assert [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"])
            for i in interfaces[:3]] == [(0, 0, "interface"), (0, 1, "efa-only"),
                                         (1, 0, "efa-only")]
    assert len(interfaces) == 33 and interfaces[-1]["networkCardIndex"] == 31
    for interface in interfaces:
        assert interface["subnetId"] == f"{subnet.name}-id"
        assert interface["securityGroups"] == [f"{sg.name}-id"]
        assert "associatePublicIpAddress" not in interface  # private nodes, NAT outbound
    assert "vpcSecurityGroupIds" not in template  # EC2 takes them per interface then
    overrides = stack.one(FLEET).inputs["launchTemplateConfigs"][0]["overrides"]
    assert all("subnetId" not in o for o in overrides)  # else the fleet ignores the interfaces
    script = user_data(stack)
    assert "export FI_PROVIDER=efa" in script and "export FI_EFA_USE_DEVICE_RDMA=1" in script
    assert "--device=/dev/infiniband" in script and "--ulimit memlock=-1:-1" in script


def test_a_p5_group_may_send_to_its_own_security_group_as_efa_requires(
    aws_config: dict[str, Any],
) -> None:
    # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html#efa-start-security: an
    # EFA-enabled security group needs an inbound AND an outbound rule for all traffic naming the
    # group itself; EFA traffic matches no CIDR rule, so egress to 0.0.0.0/0 does not count.
    stack = aws_p5(aws_config)
    sg = stack.named("llm-finetune-sg")
    rules = {(r["protocol"], r["fromPort"], r["toPort"]) for r in sg.inputs["egress"]
             if r.get("self") is True and not r.get("cidrBlocks")}
    inbound = {(r["protocol"], r["fromPort"], r["toPort"]) for r in sg.inputs["ingress"]
               if r.get("self") is True}

    assert rules == inbound == {("-1", 0, 0)}
    assert {i["securityGroups"][0] for i in stack.one(TEMPLATE).inputs["networkInterfaces"]} == {
        f"{sg.name}-id"}


def test_a_single_node_and_other_types_keep_the_plain_network(
    aws_config: dict[str, Any],
) -> None:
    for stack in (aws_p5(aws_config, nodeCount=1),
                  run_program({**aws_config, "instanceTypes": ["g5.12xlarge"], "gpu": "A10G",
                               "gpuCount": 4})):
        template = stack.one(TEMPLATE).inputs
        assert not stack.of_type(PLACEMENT_GROUP)
        assert "networkInterfaces" not in template and template["vpcSecurityGroupIds"]
        assert "FI_PROVIDER" not in user_data(stack)
        assert "/dev/infiniband" not in user_data(stack)


def test_a_p5_group_with_secrets_fits_in_ec2_user_data(aws_config: dict[str, Any]) -> None:
    job = {**aws_config["job"], "env": {f"SETTING_{i}": "x" * 40 for i in range(20)}}
    stack = aws_p5(aws_config, job=job, secretEnvNames=["HF_TOKEN", "WANDB_API_KEY"],
                   secretEnv={"HF_TOKEN": "hf", "WANDB_API_KEY": "wb"})

    assert len(user_data(stack).encode()) < USER_DATA_LIMIT


@pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")
@pytest.mark.parametrize("nodes", [1, 2])
def test_a3_nodes_run_on_gvnic_even_alone(aws_config: dict[str, Any], nodes: int) -> None:
    config = {**aws_config, "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
              "instanceTypes": ["a3-highgpu-8g"], "gpu": "H100-80GB", "dataUrls": [],
              "priceSource": "gcp-api", "nodeCount": nodes}
    template = run_program(config, states=GCP_STATES).one(GCP_TEMPLATE).inputs

    # https://cloud.google.com/compute/docs/accelerator-optimized-machines#a3-vms and
    # https://cloud.google.com/compute/docs/networking/using-gvnic: A3 runs only on gVNIC; without
    # nicType the template asks for VIRTIO_NET and every A3 placement fails.
    assert [i.get("nicType") for i in template["networkInterfaces"]] == ["GVNIC"]
    script = template["metadata"]["startup-script"]
    assert ("NCCL_SOCKET_IFNAME" in script) == (nodes > 1)
    assert "eth0" not in script


# What `ip -o route show default` prints on an A3 VM of the Ubuntu DLVM: its primary gVNIC has a
# predictable name, enp0s12 (Google's A3 recipes set NCCL_SOCKET_IFNAME=enp0s12:
# https://cloud.google.com/cluster-toolkit/docs/machine-learning/a3-mega-enable-gpudirect-tcpxo).
A3_DEFAULT_ROUTE = "default via 10.128.0.1 dev enp0s12 proto dhcp src 10.128.0.4 metric 100 \n"
FAKE_IP = """#!/bin/sh
[ -n "$FAKE_ROUTE" ] || exit 1
printf "$FAKE_ROUTE"
"""


@pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")
@pytest.mark.parametrize("machine_type", ["a3-highgpu-8g", "a3-megagpu-8g"])
def test_an_a3_group_gives_nccl_the_interface_of_its_default_route(
    aws_config: dict[str, Any], machine_type: str, tmp_path: Path
) -> None:
    config = {**aws_config, "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
              "instanceTypes": [machine_type], "gpu": "H100-80GB", "dataUrls": [],
              "priceSource": "gcp-api", "nodeCount": 2}
    script = run_program(config, states=GCP_STATES).one(GCP_TEMPLATE).inputs["metadata"][
        "startup-script"]
    lines = script.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("spotroute_dev="))
    found = "\n".join(["set -euo pipefail", *lines[first : first + 3],
                       'echo "NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME-unset}"'])
    (tmp_path / "ip").write_text(FAKE_IP)
    (tmp_path / "ip").chmod(0o755)

    def run(route: str) -> str:
        env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "FAKE_ROUTE": route}
        env.pop("NCCL_SOCKET_IFNAME", None)
        done = subprocess.run(["bash", "-c", found], env=env, capture_output=True, text=True,
                              check=True)
        return done.stdout.strip()

    assert run(A3_DEFAULT_ROUTE) == "NCCL_SOCKET_IFNAME=enp0s12"
    # No default route (or no `ip`): unset, so NCCL picks an interface itself; the boot goes on.
    assert run("") == "NCCL_SOCKET_IFNAME=unset"
    (docker_run,) = [x for x in lines if x.strip().startswith("docker run ")]
    assert " -e NCCL_SOCKET_IFNAME " in docker_run  # the container gets what the host found


@pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")
def test_a_jobs_own_nccl_socket_ifname_wins_over_the_default_route(
    aws_config: dict[str, Any],
) -> None:
    job = {**aws_config["job"], "env": {"NCCL_SOCKET_IFNAME": "=enp0s12"}}
    config = {**aws_config, "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
              "instanceTypes": ["a3-megagpu-8g"], "gpu": "H100-80GB", "dataUrls": [],
              "priceSource": "gcp-api", "nodeCount": 2, "job": job}
    script = run_program(config, states=GCP_STATES).one(GCP_TEMPLATE).inputs["metadata"][
        "startup-script"]

    assert "spotroute_dev=" not in script
    assert "export NCCL_SOCKET_IFNAME==enp0s12" in script


@pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")
def test_other_gcp_machine_types_keep_the_default_vnic(aws_config: dict[str, Any]) -> None:
    config = {**aws_config, "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a",
              "instanceTypes": ["a2-ultragpu-8g"], "dataUrls": [], "priceSource": "gcp-api"}
    template = run_program(config, states=GCP_STATES).one(GCP_TEMPLATE).inputs

    assert "nicType" not in template["networkInterfaces"][0]


def azure(aws_config: dict[str, Any], size: str, nodes: int) -> str:
    config = {**aws_config, "cloud": "azure", "region": "eastus", "zone": "2",
              "instanceTypes": [size], "dataUrls": [], "priceSource": "azure-api",
              "nodeCount": nodes}
    stack = run_program(config, calls=AZURE_CALLS, states=AZURE_STATES)
    profile = stack.one(VMSS).inputs["virtualMachineProfile"]
    return base64.b64decode(profile["osProfile"]["customData"]).decode()


def test_an_nd_group_gets_infiniband_in_its_containers_and_microsofts_nccl_settings(
    aws_config: dict[str, Any],
) -> None:
    script = azure(aws_config, "Standard_ND96asr_v4", 2)
    run_line = next(line.strip() for line in script.splitlines()
                    if line.strip().startswith("docker run"))

    # https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nda100v4-series:
    # InfiniBand is configured between the VMs of one scale set; the HPC image holds the topology.
    for option in ("--device=/dev/infiniband", "--ulimit memlock=-1:-1", "--cap-add=IPC_LOCK",
                   "-v /opt/microsoft:/opt/microsoft:ro"):
        assert option in run_line
    assert "export NCCL_TOPO_FILE=/opt/microsoft/ndv4-topo.xml" in script
    assert "-e NCCL_TOPO_FILE " in run_line
    assert "ndv5-topo.xml" in azure(aws_config, "Standard_ND96isr_H100_v5", 2)


def test_nd_alone_and_nc_groups_get_no_infiniband(aws_config: dict[str, Any]) -> None:
    for script in (azure(aws_config, "Standard_ND96asr_v4", 1),
                   azure(aws_config, "Standard_NC96ads_A100_v4", 2)):
        assert "/dev/infiniband" not in script and "NCCL_TOPO_FILE" not in script
