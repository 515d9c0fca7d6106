"""The network fabric of GPU instance types (EFA, gVNIC, InfiniBand) and the NCCL settings their
providers document, read from components/fabric.csv (each row names its source).

Pure lookups; the cloud modules apply them: AWS attaches EFA interfaces and a cluster placement
group to a group's nodes, GCP sets the vNIC type (A3 accepts only gVNIC, single nodes too), Azure
gives a group's containers the InfiniBand devices; every group gets the NCCL settings.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from dataclasses import dataclass, field
from importlib import resources

_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
# An nccl_env value the node finds at start-up: the interface of its default route. Images name
# their interfaces differently (Ubuntu's predictable names: enp0s12 on GCP A3, not eth0), and an
# NCCL_SOCKET_IFNAME that names no interface leaves NCCL with none (components/startup.py).
DEFAULT_ROUTE_DEVICE = "@default-route"
# What a container needs for RDMA on InfiniBand/EFA: the verbs devices, pinned memory, and (Azure)
# the HPC image's NCCL topology files; --network host is already given.
RDMA_DOCKER_OPTIONS: tuple[str, ...] = (
    "--device=/dev/infiniband",
    "--ulimit memlock=-1:-1",
    "--cap-add=IPC_LOCK",
)
AZURE_TOPOLOGY_MOUNT = "-v /opt/microsoft:/opt/microsoft:ro"


@dataclass(frozen=True, slots=True)
class Fabric:
    """What one instance type's nodes get for multi-node NCCL (none of it for other types)."""

    efa_interfaces: int = 0
    cluster_placement: bool = False
    nic_type: str = ""
    infiniband: bool = False
    nccl_env: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def docker_options(self) -> tuple[str, ...]:
        """Extra `docker run` options for a group's container on this fabric."""
        if self.infiniband:
            return (*RDMA_DOCKER_OPTIONS, AZURE_TOPOLOGY_MOUNT)
        if self.efa_interfaces:
            return RDMA_DOCKER_OPTIONS
        return ()


NO_FABRIC = Fabric()


def parse_fabric_csv(text: str) -> dict[tuple[str, str], Fabric]:
    """(cloud, instance_type) → Fabric from fabric.csv text; ValueError names the bad line."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    table: dict[tuple[str, str], Fabric] = {}
    for number, row in enumerate(csv.DictReader(io.StringIO("\n".join(lines))), start=2):
        try:
            env = dict(pair.split("=", 1) for pair in row["nccl_env"].split(";") if pair)
            if any(not _ENV_NAME.fullmatch(name) for name in env):
                raise ValueError(f"nccl_env {row['nccl_env']!r} has a name that is not a variable")
            if any(v.startswith("@") and v != DEFAULT_ROUTE_DEVICE for v in env.values()):
                raise ValueError(f"nccl_env {row['nccl_env']!r}: the one value found at start-up"
                                 f" is {DEFAULT_ROUTE_DEVICE}")
            if not row["source"].startswith("https://"):
                raise ValueError("source: give the provider's page")
            table[(row["cloud"], row["instance_type"])] = Fabric(
                efa_interfaces=int(row["efa_interfaces"] or 0),
                cluster_placement=row["placement"] == "cluster",
                nic_type=row["nic_type"],
                infiniband=row["infiniband"] == "yes",
                nccl_env=env,
                source=row["source"],
            )
        except (KeyError, ValueError) as error:
            raise ValueError(f"components/fabric.csv: row {number}: {error}") from None
    return table


@functools.cache
def _table() -> dict[tuple[str, str], Fabric]:
    text = resources.files("components").joinpath("fabric.csv").read_text(encoding="utf-8")
    return parse_fabric_csv(text)


def fabric_for(cloud: str, instance_type: str) -> Fabric:
    """The fabric of `instance_type` on `cloud`; NO_FABRIC for types without one."""
    return _table().get((cloud, instance_type), NO_FABRIC)


def group_fabric(cloud: str, instance_types: tuple[str, ...], node_count: int) -> Fabric:
    """The fabric a group of `node_count` nodes of these equivalent types gets: none for one
    node, nor when the types differ in it (one template or scale set model serves them all)."""
    fabrics = [fabric_for(cloud, instance_type) for instance_type in instance_types]
    if node_count < 2 or any(f != fabrics[0] for f in fabrics):
        return NO_FABRIC
    return fabrics[0]
