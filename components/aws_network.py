"""AWS Network component: the job's VPC, private node subnet, NAT gateway and security group
(one of the four placement components; components/aws.py registers them).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from components.args import (
    NetworkArgs,
    require_type,
)
from components.aws_names import aws_tags, is_zone_id

VPC_CIDR = "10.42.0.0/16"
SUBNET_CIDR = "10.42.0.0/20"  # the nodes: private addresses only
PUBLIC_SUBNET_CIDR = "10.42.16.0/28"  # holds only the NAT gateway

# Every protocol and port (EC2: protocol -1 with ports 0-0).
ALL_TRAFFIC: dict[str, Any] = {"protocol": "-1", "from_port": 0, "to_port": 0}


class Network(pulumi.ComponentResource):
    """VPC with a private node subnet behind a NAT gateway; only the job's own nodes connect in."""

    network_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    firewall_id: pulumi.Output[str]
    resource_group_name: pulumi.Output[str] | None = None  # AWS has no resource groups

    def __init__(
        self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        require_type(args, NetworkArgs, "aws.Network")
        super().__init__("spotroute:aws:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        job, labels = args.job_name, args.labels

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=VPC_CIDR,
            enable_dns_support=True,
            enable_dns_hostnames=True,
            tags=aws_tags(job, labels, "vpc"),
            opts=child,
        )
        # A new VPC's default security group lets its members reach each other; empty it.
        aws.ec2.DefaultSecurityGroup(
            f"{name}-default-sg",
            vpc_id=vpc.id,
            ingress=[],
            egress=[],
            tags=aws_tags(job, labels, "default-sg"),
            opts=child,
        )
        # Zone names (us-east-1a) map to different physical zones per account; zone IDs
        # (use1-az4, what price catalogs record) do not. Both are accepted.
        zone_name = None if is_zone_id(args.zone) else args.zone or None
        zone_id = args.zone if is_zone_id(args.zone) else None
        subnet = aws.ec2.Subnet(
            f"{name}-subnet",
            vpc_id=vpc.id,
            cidr_block=SUBNET_CIDR,
            availability_zone=zone_name,
            availability_zone_id=zone_id,
            # Nodes get no public address: nothing on the internet can even try to connect.
            map_public_ip_on_launch=False,
            tags=aws_tags(job, labels, "subnet"),
            opts=child,
        )
        public_subnet = aws.ec2.Subnet(
            f"{name}-public",
            vpc_id=vpc.id,
            cidr_block=PUBLIC_SUBNET_CIDR,
            availability_zone=zone_name,
            availability_zone_id=zone_id,
            map_public_ip_on_launch=False,
            tags=aws_tags(job, labels, "public"),
            opts=child,
        )
        gateway = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags=aws_tags(job, labels, "igw"), opts=child
        )
        public_routes = aws.ec2.RouteTable(
            f"{name}-public-routes",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)],
            tags=aws_tags(job, labels, "public-routes"),
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-public-routes-subnet",
            subnet_id=public_subnet.id,
            route_table_id=public_routes.id,
            opts=child,
        )
        # Outbound for private nodes (image pulls, SSM): ~$0.045/h plus $0.045/GB processed.
        nat_address = aws.ec2.Eip(
            f"{name}-nat-ip", domain="vpc", tags=aws_tags(job, labels, "nat-ip"), opts=child
        )
        nat = aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=nat_address.id,
            subnet_id=public_subnet.id,
            connectivity_type="public",
            tags=aws_tags(job, labels, "nat"),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]),
        )
        routes = aws.ec2.RouteTable(
            f"{name}-routes",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
            tags=aws_tags(job, labels, "routes"),
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-routes-subnet", subnet_id=subnet.id, route_table_id=routes.id, opts=child
        )
        # Checkpoint traffic to S3 stays on the AWS network; gateway endpoints cost nothing.
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[routes.id],
            tags=aws_tags(job, labels, "s3"),
            opts=child,
        )
        # Session Manager needs no inbound rule (the agent dials out), so the only ingress is the
        # group to itself: NCCL and the rendezvous between a multi-node job's nodes. EFA traffic
        # matches only rules that name the security group, in both directions: without the
        # group's own outbound rule NCCL over EFA fails even with egress to 0.0.0.0/0 (EC2 user
        # guide, "Prepare an EFA-enabled security group":
        # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html#efa-start-security).
        firewall = aws.ec2.SecurityGroup(
            f"{name}-sg",
            description=f"spotroute job {job}: inbound from its own nodes only, all outbound",
            vpc_id=vpc.id,
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(
                    description="the job's own nodes (NCCL, rendezvous)", **ALL_TRAFFIC, self=True
                )
            ],
            egress=[
                aws.ec2.SecurityGroupEgressArgs(
                    description="the job's own nodes (EFA needs the group named outbound too)",
                    **ALL_TRAFFIC,
                    self=True,
                ),
                aws.ec2.SecurityGroupEgressArgs(
                    description="image pulls, checkpoints, data",
                    **ALL_TRAFFIC,
                    cidr_blocks=["0.0.0.0/0"],
                ),
            ],
            tags=aws_tags(job, labels, "sg"),
            opts=child,
        )

        self.network_id = vpc.id
        self.subnet_id = subnet.id
        self.firewall_id = firewall.id
        self.register_outputs(
            {"network_id": vpc.id, "subnet_id": subnet.id, "firewall_id": firewall.id}
        )
