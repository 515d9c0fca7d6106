"""no-inbound-from-internet: no firewall rule accepts traffic from 0.0.0.0/0, ::/0 or '*'."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from policies.rules.model import (
    UNKNOWN,
    Settings,
    as_list,
    as_number,
    as_strings,
    cannot_read,
    is_true,
    prop_at,
)
from policies.rules.resource_types import (
    AWS_INGRESS_RULE,
    AWS_NETWORK_ACL_RULE,
    AWS_NETWORK_ACLS,
    AWS_SECURITY_GROUP_RULE,
    AWS_SECURITY_GROUPS,
    AZURE_INTERNET_SOURCES,
    AZURE_NSG,
    AZURE_SECURITY_RULE,
    GCP_FIREWALL,
    GCP_FIREWALL_POLICY_RULES,
)

# --- no-inbound-from-internet --------------------------------------------------------------------


# A set of sources reaching at least this share of an address family counts as "the internet":
# a /8's worth. Ranges are reasoned about as ranges, so 0.0.0.0/1 + 128.0.0.0/1 is 100 %.
WIDE_SHARE = 1 / 256
_NOT_INTERNET = {
    4: [
        ipaddress.ip_network(n)
        for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "127.0.0.0/8")
    ],
    6: [ipaddress.ip_network(n) for n in ("fc00::/7", "fe80::/10")],
}


# An address written without a prefix length that can only mean "anywhere": 0.0.0.0 and :: are
# the unspecified address (RFC 4291 2.5.2, RFC 1122 3.2.1.3), never a real source. Azure reads
# a prefix as a single address or a CIDR (SecurityRule.sourceAddressPrefix: "CIDR or source IP
# range. Asterisk '*' can also be used to match all source IPs",
# https://learn.microsoft.com/en-us/rest/api/virtualnetwork/security-rules/create-or-update);
# the NSG overview lists 0.0.0.0/0 as "all addresses"
# (https://learn.microsoft.com/en-us/azure/virtual-network/network-security-groups-overview), and
# Checkov's NSG checks (CKV_AZURE_9/10) count a bare 0.0.0.0 as the internet too. Refused as
# ambiguous either way: a rule meant for one host names that host.
_UNSPECIFIED = {"0.0.0.0": "0.0.0.0/0", "::": "::/0"}


# Azure accepts a service tag where an address goes ("VirtualNetwork", "AzureLoadBalancer",
# "Storage.EastUS": https://learn.microsoft.com/en-us/azure/virtual-network/service-tags-overview);
# the ones that mean the internet are AZURE_INTERNET_SOURCES. Other clouds take addresses only.
_SERVICE_TAG = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z0-9]+)*")
_CIDR_FIX = "write it as a CIDR such as 10.0.0.0/16 (no leading zeros), or remove the rule"


def _readable(text: str, *, service_tags: bool) -> bool:
    """Whether a source is something this rule can judge: an address or CIDR Python's
    ipaddress reads, an internet alias, or (Azure) a service tag."""
    if text.lower() in AZURE_INTERNET_SOURCES or text in _UNSPECIFIED or text.startswith("0/"):
        return True
    if service_tags and _SERVICE_TAG.fullmatch(text):
        return True
    try:
        ipaddress.ip_network(text, strict=False)
    except ValueError:
        return False
    return True


def _unreadable(sources: list[str], where: str, *, service_tags: bool = False) -> list[str]:
    """A violation per source the rule cannot read: `000.000.000.000/0` may well be the internet
    to the cloud, so it fails closed instead of passing unjudged."""
    return [
        cannot_read(f"{where} source", source, _CIDR_FIX)
        for source in sources
        if not _readable(source.strip(), service_tags=service_tags)
    ]


def _is_internet(source: str) -> bool:
    """0.0.0.0/0, ::/0 (any /0), or Azure's "*", "Internet", "Any"."""
    return bool(_wide_sources([source]))


def _wide_sources(sources: list[str]) -> list[str]:
    """The sources that together expose a large share of the internet, described for a message.

    Azure's "*"/"Internet"/"Any" count on their own; CIDRs are collapsed per address family and
    flagged when they cover WIDE_SHARE or more of it, however they are split.
    """
    out: list[str] = []
    networks: dict[int, list[ipaddress.IPv4Network | ipaddress.IPv6Network]] = {4: [], 6: []}
    for source in sources:
        text = source.strip()
        if text.lower() in AZURE_INTERNET_SOURCES:
            out.append(text)
            continue
        if text in _UNSPECIFIED or text.startswith("0/"):
            out.append(f"{text} (read as {_UNSPECIFIED.get(text, '0.0.0.0/0')})")
            continue
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            continue
        networks[network.version].append(network)
    for version, found in networks.items():
        if not found:
            continue
        collapsed = list(ipaddress.collapse_addresses(found))  # type: ignore[type-var]
        # Private and reserved space is not the internet: a VPC's 10.0.0.0/8 is fine.
        share = sum(
            2.0**-n.prefixlen
            - sum(
                2.0 ** -max(n.prefixlen, p.prefixlen)
                for p in _NOT_INTERNET[version]
                if n.overlaps(p)
            )
            for n in collapsed
        )
        if share < WIDE_SHARE:
            continue
        if len(found) == 1 and found[0].prefixlen == 0:
            out.append(str(found[0]))
        else:
            listed = ", ".join(str(n) for n in found[:4]) + (", …" if len(found) > 4 else "")
            out.append(f"{listed} ({share:.1%} of IPv{version})")
    return out


_PROTOCOL_NAMES = {"6": "tcp", "17": "udp", "1": "icmp"}  # the EC2 API's protocol numbers


def _ports(rule: Mapping[str, Any]) -> str:
    """ "tcp 22", "tcp 8000-8100" or "all traffic" (ports arrive as floats from the engine)."""
    protocol = rule.get("protocol")
    protocol = _PROTOCOL_NAMES.get(str(protocol).removesuffix(".0"), protocol)
    low, high = (as_number(rule.get(key)) for key in ("fromPort", "toPort"))
    if protocol in ("-1", "all", -1, -1.0) or protocol is None:
        return "all traffic"
    if low is None:
        return str(protocol)
    if high is None or low == high:
        return f"{protocol} {low:g}"
    return f"{protocol} {low:g}-{high:g}"


def internet_ingress_violations(
    resource_type: str, props: Mapping[str, Any], settings: Settings
) -> list[str]:
    """Nothing may accept connections from the whole internet (0.0.0.0/0, ::/0, "*")."""
    fix = (
        "restrict the source to the job's own nodes or the cloud's broker "
        "(spotroute:remoteAccess), or remove the rule"
    )
    problems: list[str] = []
    if resource_type in AWS_SECURITY_GROUPS:
        for rule in as_list(props.get("ingress")):
            sources = as_strings(prop_at(rule, "cidrBlocks")) + as_strings(
                prop_at(rule, "ipv6CidrBlocks")
            )
            for source in _wide_sources(sources):
                problems.append(f"ingress ({_ports(rule)}) is open to {source} — {fix}")
            problems += _unreadable(sources, f"ingress ({_ports(rule)})")
    elif resource_type == AWS_SECURITY_GROUP_RULE:
        if props.get("type") == "ingress":
            sources = as_strings(props.get("cidrBlocks")) + as_strings(props.get("ipv6CidrBlocks"))
            for source in _wide_sources(sources):
                problems.append(f"ingress rule ({_ports(props)}) is open to {source} — {fix}")
            problems += _unreadable(sources, f"ingress rule ({_ports(props)})")
    elif resource_type == AWS_INGRESS_RULE:
        rule = {
            "protocol": props.get("ipProtocol"),
            "fromPort": props.get("fromPort"),
            "toPort": props.get("toPort"),
        }
        sources = as_strings(props.get("cidrIpv4")) + as_strings(props.get("cidrIpv6"))
        for source in _wide_sources(sources):
            problems.append(f"ingress rule ({_ports(rule)}) is open to {source} — {fix}")
        problems += _unreadable(sources, f"ingress rule ({_ports(rule)})")
    elif resource_type in AWS_NETWORK_ACLS or resource_type == AWS_NETWORK_ACL_RULE:
        problems.extend(_network_acl_violations(resource_type, props))
    elif resource_type == GCP_FIREWALL:
        direction = str(props.get("direction") or "INGRESS").upper()
        if (
            direction == "INGRESS"
            and not is_true(props.get("disabled"))
            and as_list(props.get("allows"))
        ):
            ranges = props.get("sourceRanges")
            if ranges is not UNKNOWN:
                sources = as_strings(ranges)
                unscoped = (
                    not sources
                    and not as_list(props.get("sourceTags"))
                    and not as_list(props.get("sourceServiceAccounts"))
                )
                if unscoped:
                    problems.append(
                        "allow rule has no source, which GCP treats as 0.0.0.0/0 — set "
                        "sourceRanges to your CIDRs or remove the rule"
                    )
                for source in _wide_sources(sources):
                    problems.append(f"allow rule is open to {source} — {fix}")
                problems += _unreadable(sources, "allow rule")
    elif resource_type in GCP_FIREWALL_POLICY_RULES:
        ingress = str(props.get("direction", "")).upper() == "INGRESS"
        if ingress and str(props.get("action", "")).lower() == "allow":
            sources = as_strings(prop_at(props, "match", "srcIpRanges"))
            for source in _wide_sources(sources):
                problems.append(f"allow rule is open to {source} — {fix}")
            problems += _unreadable(sources, "allow rule")
    elif resource_type in (AZURE_NSG, AZURE_SECURITY_RULE):
        rules = as_list(props.get("securityRules")) if resource_type == AZURE_NSG else [props]
        for rule in rules:
            if not isinstance(rule, Mapping):
                continue
            inbound = str(rule.get("direction", "")).lower() == "inbound"
            allow = str(rule.get("access", "")).lower() == "allow"
            sources = as_strings(rule.get("sourceAddressPrefix")) + as_strings(
                rule.get("sourceAddressPrefixes")
            )
            if inbound and allow:
                name = rule.get("name") or "inbound rule"
                for source in _wide_sources(sources):
                    problems.append(
                        f"security rule {name!r} allows inbound from {source!r} — {fix}"
                    )
                problems += _unreadable(sources, f"security rule {name!r}", service_tags=True)
    return problems


# Network ACLs are stateless: a private subnet's return traffic (replies through the NAT gateway)
# arrives from the internet on ephemeral ports, so AWS's own custom-ACL examples allow inbound
# 1024-65535 from 0.0.0.0/0 ("Ephemeral ports": NAT gateways use 1024-65535,
# https://docs.aws.amazon.com/vpc/latest/userguide/nacl-ephemeral-ports.html). What an ACL must
# not allow from the internet is everything, or the server ports below 1024 (CIS AWS Foundations
# 5.1: no ACL ingress from 0.0.0.0/0 to remote administration ports; rules and their fields:
# https://docs.aws.amazon.com/vpc/latest/userguide/nacl-rules.html). Protocol numbers as the
# EC2 API takes them: -1 all, 6 tcp, 17 udp.
EPHEMERAL_LOW_PORT = 1024
_ALL_PROTOCOLS = ("-1", "all")
_PORT_PROTOCOLS = ("tcp", "6", "udp", "17")


def _network_acl_violations(resource_type: str, props: Mapping[str, Any]) -> list[str]:
    rules: list[Mapping[str, Any]]
    if resource_type == AWS_NETWORK_ACL_RULE:
        if is_true(props.get("egress")):
            return []
        rules = [{**props, "action": props.get("ruleAction"), "ruleNo": props.get("ruleNumber")}]
    else:
        rules = [r for r in as_list(props.get("ingress")) if isinstance(r, Mapping)]
    problems = []
    for rule in rules:
        if str(rule.get("action", "")).lower() != "allow" or not _reaches_server_ports(rule):
            continue
        sources = as_strings(rule.get("cidrBlock")) + as_strings(rule.get("ipv6CidrBlock"))
        number = as_number(rule.get("ruleNo"))
        name = f"network ACL rule {number:g}" if number is not None else "network ACL rule"
        for source in _wide_sources(sources):
            problems.append(
                f"{name} allows inbound {_ports(rule)} from {source} — allow only the return "
                f"ports {EPHEMERAL_LOW_PORT}-65535 from the internet (security groups filter the "
                "rest), or restrict the source"
            )
        problems += _unreadable(sources, name)
    return problems


# ICMP and ICMPv6 carry no ports (the EC2 API's protocol numbers 1 and 58, or their names).
_PORTLESS_PROTOCOLS = ("icmp", "1", "icmpv6", "58")


def _reaches_server_ports(rule: Mapping[str, Any]) -> bool:
    """All protocols, TCP/UDP ports below the ephemeral range, or a protocol the rule cannot
    tell is port-free: only ICMP and ICMPv6 are let through (a protocol it cannot read fails
    closed, as SCTP's ports would)."""
    if rule.get("protocol") is UNKNOWN:
        return False  # judged again during `up`, with the final value
    protocol = str(rule.get("protocol", "-1")).lower().removesuffix(".0")
    if protocol in _PORTLESS_PROTOCOLS:
        return False
    if protocol in _ALL_PROTOCOLS or protocol not in _PORT_PROTOCOLS:
        return True
    low = as_number(rule.get("fromPort"))
    return low is None or low < EPHEMERAL_LOW_PORT
