"""GCP Network component: the job's VPC, private subnet, Cloud NAT and firewall rules (one of
the four placement components; components/gcp.py registers them).
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from components.args import NetworkArgs, require_type
from components.gcp_names import gcp_name, node_tag

SUBNET_CIDR = "10.42.0.0/20"
# Google's IAP TCP-forwarding range: the only source a keyless (`gcloud compute ssh
# --tunnel-through-iap`) shell comes from (cloud.google.com/iap/docs/using-tcp-forwarding).
IAP_SOURCE_RANGE = "35.235.240.0/20"


class Network(pulumi.ComponentResource):
    """VPC with one private subnet and Cloud NAT; nothing may connect in unless asked."""

    network_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    firewall_id: pulumi.Output[str]
    resource_group_name: pulumi.Output[str] | None = None  # GCP has no resource groups

    def __init__(
        self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        require_type(args, NetworkArgs, "gcp.Network")
        super().__init__("spotroute:gcp:Network", name, None, opts)
        # Names are fixed per stack, so a replacement must delete the old resource first.
        child = pulumi.ResourceOptions(parent=self, delete_before_replace=True)
        # The names' owner: the job, or this stack where a move's stacks must not share names.
        job, owner = args.job_name, args.name_owner or args.job_name

        network = gcp.compute.Network(
            f"{name}-vpc",
            name=gcp_name(owner, "vpc"),
            description=f"spotroute job {job}",
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            opts=child,
        )
        subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name=gcp_name(owner, "subnet"),
            network=network.id,
            region=args.region,
            ip_cidr_range=SUBNET_CIDR,
            # Checkpoints and data in Cloud Storage are reached without external addresses.
            private_ip_google_access=True,
            opts=child,
        )
        # Nodes have no external IP; NAT lets them pull images (~$0.045/h per gateway + data).
        router = gcp.compute.Router(
            f"{name}-router",
            name=gcp_name(owner, "router"),
            network=network.id,
            region=args.region,
            opts=child,
        )
        gcp.compute.RouterNat(
            f"{name}-nat",
            name=gcp_name(owner, "nat"),
            router=router.name,
            region=args.region,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[
                gcp.compute.RouterNatSubnetworkArgs(
                    name=subnet.id, source_ip_ranges_to_nats=["ALL_IP_RANGES"]
                )
            ],
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=child,
        )
        # GCP already denies ingress implicitly; the explicit rule makes that visible in reviews
        # and gives the component a firewall to export. The allows below win by priority.
        deny = gcp.compute.Firewall(
            f"{name}-deny-ingress",
            name=gcp_name(owner, "deny-ingress"),
            network=network.id,
            description=f"spotroute job {job}: no inbound traffic but the job's own and IAP's",
            direction="INGRESS",
            priority=65534,
            source_ranges=["0.0.0.0/0"],
            denies=[gcp.compute.FirewallDenyArgs(protocol="all")],
            opts=child,
        )
        tag = node_tag(owner)
        # A custom VPC has no allow-internal rule: NCCL and the rendezvous between the job's own
        # nodes (and only those: source and target are the job's node tag) need one.
        gcp.compute.Firewall(
            f"{name}-internal",
            name=gcp_name(owner, "internal"),
            network=network.id,
            description=f"spotroute job {job}: its nodes talk to each other",
            direction="INGRESS",
            priority=1000,
            source_tags=[tag],
            target_tags=[tag],
            allows=[gcp.compute.FirewallAllowArgs(protocol="all")],
            opts=child,
        )
        if args.remote_access:
            gcp.compute.Firewall(
                f"{name}-iap-ssh",
                name=gcp_name(owner, "iap-ssh"),
                network=network.id,
                description="SSH through IAP TCP forwarding only (spotroute:remoteAccess)",
                direction="INGRESS",
                priority=1000,
                source_ranges=[IAP_SOURCE_RANGE],
                target_tags=[tag],
                allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
                opts=child,
            )

        self.network_id = network.id
        self.subnet_id = subnet.id
        self.firewall_id = deny.id
        self.register_outputs(
            {"network_id": network.id, "subnet_id": subnet.id, "firewall_id": deny.id}
        )
