"""Pure: which launch failures mean "try elsewhere", and which places to avoid for a while.

The engine fails a placement with the provider's own error text. Capacity, quota and price
refusals are recognised by the codes the clouds put in those texts (as the Terraform-bridged
and native Pulumi providers surface them), e.g.

  AWS    creating EC2 Fleet: InsufficientInstanceCapacity: There is no Spot capacity available …
         SpotMaxPriceTooLow · MaxSpotInstanceCountExceeded · VcpuLimitExceeded ·
         VpcLimitExceeded · AddressLimitExceeded (a Region's default network quotas) ·
         UnfulfillableCapacity · InsufficientCapacity · Unsupported (type not offered in the
         zone) · InvalidParameterValue for an instance profile IAM has not propagated yet
         (kind "propagation": retried in place, never blocked) — an instant fleet's own errors,
         which components/aws_fleet.py reads (EC2 API error codes,
         https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html)
  GCP    ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS): The zone 'projects/p/zones/us-central1-a'
         does not have enough resources available to fulfill the request. ·
         QUOTA_EXCEEDED / Error 403: Quota 'NVIDIA_A100_GPUS' exceeded. Limit: 0.0 in region …
  Azure  Code="SkuNotAvailable" Message="The requested VM size for resource … is currently not
         available in location 'eastus' …" · OverconstrainedAllocationRequest ·
         AllocationFailed · ZonalAllocationFailed · OperationNotAllowed … exceeding approved
         … Cores quota · QuotaExceeded · PublicIPCountLimitReached
  local  LocalCapacityExhausted · LocalQuotaExceeded · LocalSpotPriceTooLow (the local market,
         components/local_nodes.py)

Everything else (a typo in config, a policy refusal, credentials) is not retried elsewhere:
another region would fail the same way.

Blocking (SkyPilot's EAGER_NEXT_REGION reasoning: shortages cluster): a capacity or price
failure blocks the zone for `zone_block_s`; a second failure in the same region while an
earlier block there is still remembered blocks the whole region for `region_block_s`. Quota is
per region (or account) from the start, so it blocks the region at once.

What a move or a re-placement tries (`launch_order`): the placement decided on; a re-placement
then the others of the same market outside the zone just lost. Another market is decide()'s
call, not the failover's: a re-placement decided onto spot that fails everywhere rolls back,
and the next pass decides — wait for spot, or on-demand — with the refused zones blocked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

# propagation: the account is fine and the place too; the same launch succeeds seconds later.
# group: the place launched, but the group's nodes never formed there (group_not_formed).
FailureKind = Literal["capacity", "quota", "price", "propagation", "group"]
Scope = Literal["zone", "region"]

# What launched, per provider resource type, and so is replaced when a launch is retried after a
# "propagation" refusal (an instant EC2 Fleet is one-shot: it never launches again by itself).
REPLACED_ON_PROPAGATION = ("aws:ec2/fleet:Fleet",)
ZONE_BLOCK_S = 30 * 60.0
REGION_BLOCK_S = 60 * 60.0
# How long an expired block is still remembered as "a repeat" that escalates to the region.
REPEAT_WINDOW_S = 2 * 60 * 60.0


@dataclass(frozen=True, slots=True)
class LaunchFailure:
    """A placement the provider refused for capacity, quota, price or propagation; code as the
    cloud wrote it."""

    kind: FailureKind
    code: str
    cloud: str  # whose code it is: aws | gcp | azure | local
    message: str  # the provider's sentence, one line


# (pattern, code, cloud, kind). Word-bounded codes, in the order a message is most telling.
_CODES: tuple[tuple[str, str, str, FailureKind], ...] = (
    # AWS quota first: an EC2 Fleet lists one error per override, and a message that names a
    # quota and a shortage is a quota (it outlasts the shortage; components/aws_fleet.py).
    (r"MaxSpotInstanceCountExceeded", "MaxSpotInstanceCountExceeded", "aws", "quota"),
    (r"VcpuLimitExceeded", "VcpuLimitExceeded", "aws", "quota"),
    # A fresh account's network quotas per Region (5 VPCs, the default one included; 5 Elastic
    # IPs; 5 internet gateways; 5 NAT gateways per zone): each placement takes one of each, so the
    # 5th placement in a Region is refused (EC2 API error codes, errors-overview.html above;
    # https://docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html).
    (r"VpcLimitExceeded", "VpcLimitExceeded", "aws", "quota"),
    (r"AddressLimitExceeded", "AddressLimitExceeded", "aws", "quota"),
    (r"InternetGatewayLimitExceeded", "InternetGatewayLimitExceeded", "aws", "quota"),
    (r"NatGatewayLimitExceeded", "NatGatewayLimitExceeded", "aws", "quota"),
    # A new instance profile EC2 cannot see yet (IAM is eventually consistent): "Value (…) for
    # parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name".
    (r"InvalidParameterValue: [^;\n]*(?:iamInstanceProfile|IAM Instance Profile)",
     "InvalidParameterValue", "aws", "propagation"),
    (r"InsufficientInstanceCapacity", "InsufficientInstanceCapacity", "aws", "capacity"),
    (r"UnfulfillableCapacity", "UnfulfillableCapacity", "aws", "capacity"),
    (r"(?<![A-Za-z])InsufficientCapacity(?![A-Za-z])", "InsufficientCapacity", "aws", "capacity"),
    # The type is not offered in the zone (or not with this configuration): the zone is out.
    (r"(?<![A-Za-z])Unsupported: ", "Unsupported", "aws", "capacity"),
    (r"SpotMaxPriceTooLow", "SpotMaxPriceTooLow", "aws", "price"),
    (r"ZONE_RESOURCE_POOL_EXHAUSTED(?:_WITH_DETAILS)?", "ZONE_RESOURCE_POOL_EXHAUSTED", "gcp",
     "capacity"),
    (r"does not have enough resources available to fulfill the request",
     "ZONE_RESOURCE_POOL_EXHAUSTED", "gcp", "capacity"),
    (r"QUOTA_EXCEEDED|Quota '[A-Z0-9_]+' exceeded|quotaExceeded", "QUOTA_EXCEEDED", "gcp",
     "quota"),
    (r"SkuNotAvailable", "SkuNotAvailable", "azure", "capacity"),
    (r"OverconstrainedAllocationRequest", "OverconstrainedAllocationRequest", "azure",
     "capacity"),
    (r"OverconstrainedZonalAllocationRequest", "OverconstrainedAllocationRequest", "azure",
     "capacity"),
    (r"ZonalAllocationFailed", "ZonalAllocationFailed", "azure", "capacity"),
    (r"(?<![A-Za-z])AllocationFailed", "AllocationFailed", "azure", "capacity"),
    (r"exceeding approved [A-Za-z0-9 ]*[Cc]ores quota", "QuotaExceeded", "azure", "quota"),
    (r"(?<![A-Za-z_])QuotaExceeded", "QuotaExceeded", "azure", "quota"),
    # Standard public IPs per region (10 by default; each placement's NAT gateway takes one):
    # https://learn.microsoft.com/azure/azure-resource-manager/management/azure-subscription-service-limits#publicip-address
    (r"PublicIPCountLimitReached", "PublicIPCountLimitReached", "azure", "quota"),
    (r"LocalCapacityExhausted", "LocalCapacityExhausted", "local", "capacity"),
    (r"LocalQuotaExceeded", "LocalQuotaExceeded", "local", "quota"),
    (r"LocalSpotPriceTooLow", "LocalSpotPriceTooLow", "local", "price"),
)
_COMPILED = tuple((re.compile(p), code, cloud, kind) for p, code, cloud, kind in _CODES)


def classify_launch_error(text: str) -> LaunchFailure | None:
    """The capacity/quota/price refusal in an engine error's text; None for any other failure."""
    for pattern, code, cloud, kind in _COMPILED:
        match = pattern.search(text)
        if match:
            return LaunchFailure(kind, code, cloud, _sentence(text, match.start()))
    return None


GROUP_NOT_FORMED = "GroupDidNotForm"


def group_not_formed(cloud: str, why: str) -> LaunchFailure:
    """A placement whose nodes launched but never formed their group (the start-up script's
    EXIT_GROUP_NOT_FORMED: storage unwritable to the end of the wait, a peer that never came).
    The place failed, not the job: blocked as a capacity refusal is (the zone, then its region
    on a repeat)."""
    return LaunchFailure("group", GROUP_NOT_FORMED, cloud, why)


def _sentence(text: str, at: int) -> str:
    """The line of `text` holding position `at`, trimmed to something a terminal shows."""
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    line = text[start : end if end >= 0 else len(text)].strip()
    for prefix in ("stderr:", "stdout:", "error:", "*"):
        line = line.removeprefix(prefix).strip()
    return line if len(line) <= 300 else line[:297] + "..."


@dataclass(frozen=True, slots=True)
class Block:
    """A zone (zone set) or a whole region (zone None) not to launch in until `until`."""

    cloud: str
    region: str
    zone: str | None
    until: datetime
    reason: str  # "<code>: <provider sentence>"
    at: datetime  # when the failure happened

    @property
    def scope(self) -> Scope:
        return "region" if self.zone is None else "zone"

    def where(self) -> str:
        return f"{self.cloud}/{self.region}" + (f"/{self.zone}" if self.zone else "")

    def covers(self, cloud: str, region: str, zone: str | None, now: datetime) -> bool:
        """True while this block forbids launching at cloud/region/zone."""
        if now >= self.until or (cloud, region) != (self.cloud, self.region):
            return False
        return self.zone is None or self.zone == (zone or region)

    def to_json(self) -> dict[str, Any]:
        return {
            "cloud": self.cloud,
            "region": self.region,
            "zone": self.zone,
            "until": self.until.isoformat(),
            "at": self.at.isoformat(),
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Block:
        return cls(
            cloud=str(data["cloud"]),
            region=str(data["region"]),
            zone=None if data.get("zone") is None else str(data["zone"]),
            until=datetime.fromisoformat(str(data["until"])),
            at=datetime.fromisoformat(str(data["at"])),
            reason=str(data.get("reason", "")),
        )


def block_after(
    failure: LaunchFailure,
    cloud: str,
    region: str,
    zone: str | None,
    earlier: Sequence[Block],
    now: datetime,
    *,
    zone_block_s: float = ZONE_BLOCK_S,
    region_block_s: float = REGION_BLOCK_S,
    repeat_window_s: float = REPEAT_WINDOW_S,
) -> Block:
    """The block a failure at cloud/region/zone earns, given the blocks recorded before."""
    repeat = any(
        (b.cloud, b.region) == (cloud, region)
        and (now - b.at).total_seconds() < repeat_window_s
        for b in earlier
    )
    reason = f"{failure.code}: {failure.message}"
    if failure.kind == "quota" or repeat:
        return Block(cloud, region, None, now + timedelta(seconds=region_block_s), reason, now)
    # A zone-less placement (Azure regional scale sets, the local target) is its region's only
    # pool: block it as zone "<region>" so other zones of the region stay usable.
    return Block(
        cloud, region, zone or region, now + timedelta(seconds=zone_block_s), reason, now
    )


def blocking(
    blocks: Iterable[Block], cloud: str, region: str, zone: str | None, now: datetime
) -> Block | None:
    """The block that forbids launching at cloud/region/zone now, if any (region blocks first)."""
    found = [b for b in blocks if b.covers(cloud, region, zone, now)]
    found.sort(key=lambda b: (b.zone is not None, b.until))
    return found[0] if found else None


def prune(blocks: Iterable[Block], now: datetime, keep_s: float = REPEAT_WINDOW_S) -> list[Block]:
    """Blocks still active or recent enough to count as a repeat; older ones are forgotten."""
    return [b for b in blocks if b.until > now or (now - b.at).total_seconds() < keep_s]


SITE_KEYS = ("cloud", "region", "zone", "instance_type", "market")
P = TypeVar("P")


def same_site(p: Mapping[str, Any], q: Mapping[str, Any]) -> bool:
    """The same cloud, region, zone, instance type and market (placement records)."""
    return all(p.get(k) == q.get(k) for k in SITE_KEYS)


def same_zone(p: Mapping[str, Any], q: Mapping[str, Any]) -> bool:
    """The same capacity pool's zone (its region when zoneless)."""
    return (p.get("cloud"), p.get("region"), p.get("zone") or p.get("region")) == (
        q.get("cloud"),
        q.get("region"),
        q.get("zone") or q.get("region"),
    )


def launch_order(
    ranked: Sequence[P],
    site: Callable[[P], Mapping[str, Any]],
    decided: Mapping[str, Any],
    *,
    lost: Mapping[str, Any] | None = None,
) -> list[P]:
    """The placements to try, best first: the one decided on; for a re-placement (`lost`: the
    placement it lost) then the others of the decided market outside the lost zone."""
    same = [p for p in ranked if same_site(site(p), decided)]
    if lost is None:
        return same
    market = decided.get("market")
    return same + [
        p
        for p in ranked
        if p not in same and site(p).get("market") == market and not same_zone(site(p), lost)
    ]
