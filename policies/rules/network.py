"""no-inbound-from-internet: no firewall rule accepts traffic from 0.0.0.0/0, ::/0 or '*'."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

from policies.rules.model import (
    UNKNOWN,
    Settings,
    as_list,
    as_number,
    as_strings,
    is_true,
    prop_at,
)
from policies.rules.resource_types import (
    AWS_INGRESS_RULE,
    AWS_SECURITY_GROUP_RULE,
    AWS_SECURITY_GROUPS,
    AZURE_INTERNET_SOURCES,
    AZURE_NSG,
    AZURE_SECURITY_RULE,
    GCP_FIREWALL,
    GCP_FIREWALL_POLICY_RULES,
)

# --- no-inbound-from-internet --------------------------------------------------------------------


def _is_internet(source: str) -> bool:
    """0.0.0.0/0, ::/0 (any /0), or Azure's "*", "Internet", "Any"."""
    text = source.strip()
    if text.lower() in AZURE_INTERNET_SOURCES:
        return True
    try:
        return ipaddress.ip_network(text, strict=False).prefixlen == 0
    except ValueError:
        return False


def _ports(rule: Mapping[str, Any]) -> str:
    """ "tcp 22", "tcp 8000-8100" or "all traffic" (ports arrive as floats from the engine)."""
    protocol = rule.get("protocol")
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
            for source in filter(_is_internet, sources):
                problems.append(f"ingress ({_ports(rule)}) is open to {source} — {fix}")
    elif resource_type == AWS_SECURITY_GROUP_RULE:
        if props.get("type") == "ingress":
            sources = as_strings(props.get("cidrBlocks")) + as_strings(props.get("ipv6CidrBlocks"))
            for source in filter(_is_internet, sources):
                problems.append(f"ingress rule ({_ports(props)}) is open to {source} — {fix}")
    elif resource_type == AWS_INGRESS_RULE:
        rule = {
            "protocol": props.get("ipProtocol"),
            "fromPort": props.get("fromPort"),
            "toPort": props.get("toPort"),
        }
        sources = as_strings(props.get("cidrIpv4")) + as_strings(props.get("cidrIpv6"))
        for source in filter(_is_internet, sources):
            problems.append(f"ingress rule ({_ports(rule)}) is open to {source} — {fix}")
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
                for source in filter(_is_internet, sources):
                    problems.append(f"allow rule is open to {source} — {fix}")
    elif resource_type in GCP_FIREWALL_POLICY_RULES:
        if str(props.get("direction", "")).upper() == "INGRESS" and props.get("action") == "allow":
            for source in filter(_is_internet, as_strings(prop_at(props, "match", "srcIpRanges"))):
                problems.append(f"allow rule is open to {source} — {fix}")
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
                for source in filter(_is_internet, sources):
                    problems.append(
                        f"security rule {name!r} allows inbound from {source!r} — {fix}"
                    )
    return problems
