"""Azure Network component: the job's resource group, VNet, subnet behind an NSG and a NAT
gateway (one of the four placement components; components/azure.py registers them).
"""

from __future__ import annotations

import pulumi
from pulumi_azure_native import (
    network,
    resources,
)

from components.args import (
    NetworkArgs,
    require_type,
)
from components.azure_names import (
    azure_tags,
    physical_name,
)

VNET_CIDR = "10.42.0.0/16"
SUBNET_CIDR = "10.42.0.0/20"
# Outbound for nodes without public IPs (image pulls): Standard NAT gateway, ~$0.045/h + data.
NAT_IDLE_TIMEOUT_MIN = 4


class Network(pulumi.ComponentResource):
    """Job resource group, VNet, subnet behind an NSG and a NAT gateway.

    Only the job's own nodes connect in; the NAT gateway carries outbound.
    """

    network_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    firewall_id: pulumi.Output[str]
    resource_group_name: pulumi.Output[str]

    def __init__(
        self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        require_type(args, NetworkArgs, "azure.Network")
        if args.remote_access:
            raise ValueError(
                "remote_access: Azure has no keyless shell spotroute can open without inbound "
                "rules (Azure Bastion needs its own subnet, public IP and host) — see "
                "docs/components.md, Azure: Reaching a node"
            )
        super().__init__("spotroute:azure:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        job, tags = args.job_name, azure_tags(args.job_name, args.labels)

        group = resources.ResourceGroup(f"{name}-rg", location=args.region, tags=tags, opts=child)
        vnet = network.VirtualNetwork(
            f"{name}-vnet",
            resource_group_name=group.name,
            virtual_network_name=physical_name(job, "vnet", 64),
            location=args.region,
            address_space=network.AddressSpaceArgs(address_prefixes=[VNET_CIDR]),
            tags=tags,
            opts=child,
        )
        rules = [
            # NCCL and the rendezvous between the job's own nodes: the subnet holds only them.
            network.SecurityRuleArgs(
                name="allow-nodes-inbound",
                description="spotroute: the job's nodes talk to each other",
                priority=100,
                direction="Inbound",
                access="Allow",
                protocol="*",
                source_address_prefix=SUBNET_CIDR,
                source_port_range="*",
                destination_address_prefix=SUBNET_CIDR,
                destination_port_range="*",
            ),
            # The default AllowVnetInBound would also admit peered networks and gateways.
            network.SecurityRuleArgs(
                name="deny-vnet-inbound",
                description="spotroute: nothing else in the virtual network connects in",
                priority=4000,
                direction="Inbound",
                access="Deny",
                protocol="*",
                source_address_prefix="VirtualNetwork",
                source_port_range="*",
                destination_address_prefix="*",
                destination_port_range="*",
            ),
        ]
        # Azure's default rules already end in DenyAllInBound; this explicit rule keeps "nothing
        # from the internet" visible in reviews.
        rules.append(
            network.SecurityRuleArgs(
                name="deny-internet-inbound",
                description="spotroute: nothing from the internet connects in",
                priority=4096,
                direction="Inbound",
                access="Deny",
                protocol="*",
                source_address_prefix="Internet",
                source_port_range="*",
                destination_address_prefix="*",
                destination_port_range="*",
            )
        )
        firewall = network.NetworkSecurityGroup(
            f"{name}-nsg",
            resource_group_name=group.name,
            network_security_group_name=physical_name(job, "nsg", 80),
            location=args.region,
            security_rules=rules,
            tags=tags,
            opts=child,
        )
        # Flexible scale sets get no default outbound access, so nodes without public IPs need
        # explicit outbound: a NAT gateway (outbound only, it admits no inbound connection).
        nat_address = network.PublicIPAddress(
            f"{name}-nat-ip",
            resource_group_name=group.name,
            location=args.region,
            sku=network.PublicIPAddressSkuArgs(name="Standard", tier="Regional"),
            public_ip_allocation_method="Static",
            public_ip_address_version="IPv4",
            tags=tags,
            opts=child,
        )
        nat = network.NatGateway(
            f"{name}-nat",
            resource_group_name=group.name,
            location=args.region,
            sku=network.NatGatewaySkuArgs(name="Standard"),
            idle_timeout_in_minutes=NAT_IDLE_TIMEOUT_MIN,
            public_ip_addresses=[network.SubResourceArgs(id=nat_address.id)],
            tags=tags,
            opts=child,
        )
        subnet = network.Subnet(
            f"{name}-subnet",
            resource_group_name=group.name,
            virtual_network_name=vnet.name,
            subnet_name="nodes",
            address_prefix=SUBNET_CIDR,
            network_security_group=network.NetworkSecurityGroupArgs(id=firewall.id),
            nat_gateway=network.SubResourceArgs(id=nat.id),
            # A private subnet: outbound only through the NAT gateway, never implicit.
            default_outbound_access=False,
            # Checkpoint traffic to Storage stays on the Azure backbone; service endpoints are free.
            service_endpoints=[
                network.ServiceEndpointPropertiesFormatArgs(service="Microsoft.Storage")
            ],
            opts=child,
        )

        self.network_id = vnet.id
        self.subnet_id = subnet.id
        self.firewall_id = firewall.id
        self.resource_group_name = group.name
        self.register_outputs(
            {
                "network_id": vnet.id,
                "subnet_id": subnet.id,
                "firewall_id": firewall.id,
                "resource_group_name": group.name,
            }
        )
