"""Launch failover: the providers' real refusal texts are recognised, zones then regions blocked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from router.core.failover import Block, block_after, blocking, classify_launch_error, prune

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)

# As the engine prints them: the Pulumi diagnostic around the provider's own error.
PAYLOADS = [
    (
        "aws",
        "  aws:ec2:Fleet (train-fleet):\n    error:  sdk-v2/provider2.go:572: sdk.helper_schema: "
        "creating EC2 Fleet: InsufficientInstanceCapacity: There is no Spot capacity available "
        "that matches your request.: provider=aws@7.3.0",
        "InsufficientInstanceCapacity",
        "capacity",
    ),
    (
        "aws",
        "error: creating EC2 Fleet: InsufficientInstanceCapacity: We currently do not have "
        "sufficient p4d.24xlarge capacity in the Availability Zone you requested (us-east-1a). "
        "Our system will be working on provisioning additional capacity. You can currently get "
        "p4d.24xlarge capacity by not specifying an Availability Zone in your request or "
        "choosing us-east-1b, us-east-1c.",
        "InsufficientInstanceCapacity",
        "capacity",
    ),
    (
        "aws",
        "error: creating EC2 Fleet: SpotMaxPriceTooLow: Your Spot request price of 1.2 is lower "
        "than the minimum required Spot request fulfillment price of 9.8312.",
        "SpotMaxPriceTooLow",
        "price",
    ),
    (
        "aws",
        "error: creating EC2 Fleet: MaxSpotInstanceCountExceeded: Max spot instance count "
        "exceeded",
        "MaxSpotInstanceCountExceeded",
        "quota",
    ),
    (
        "aws",
        "error: creating EC2 Fleet: VcpuLimitExceeded: You have requested more vCPU capacity "
        "than your current vCPU limit of 0 allows for the instance bucket that the specified "
        "instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to "
        "request an adjustment to this limit.",
        "VcpuLimitExceeded",
        "quota",
    ),
    # A fresh account's Region quotas (EC2 API error codes:
    # https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html): the 5th
    # placement in a Region finds its VPC and Elastic IP quotas spent.
    (
        "aws",
        "error: creating EC2 VPC: operation error EC2: CreateVpc, https response error "
        "StatusCode: 400, RequestID: 1c2d, api error VpcLimitExceeded: The maximum number of "
        "VPCs has been reached.",
        "VpcLimitExceeded",
        "quota",
    ),
    (
        "aws",
        "error: creating EC2 EIP: operation error EC2: AllocateAddress, https response error "
        "StatusCode: 400, RequestID: 9f3e, api error AddressLimitExceeded: The maximum number "
        "of addresses has been reached.",
        "AddressLimitExceeded",
        "quota",
    ),
    (
        "azure",
        'error: Code="PublicIPCountLimitReached" Message="Cannot create more than 10 public IP '
        'addresses for this subscription in this region."',
        "PublicIPCountLimitReached",
        "quota",
    ),
    (
        "aws",
        "error: creating EC2 Fleet: UnfulfillableCapacity: At this time there isn't enough "
        "spare capacity to fulfill your request for Spot Instances.",
        "UnfulfillableCapacity",
        "capacity",
    ),
    # A short instant fleet as components/aws_fleet.py names it from the fleet's own Errors
    # (EC2 API error codes, https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
    # errors-overview.html): a quota on one override and a shortage on another is a quota.
    (
        "aws",
        "  pulumi:pulumi:Stack (spotroute-train):\n    error: RunError: VcpuLimitExceeded: You "
        "have requested more vCPU capacity than your current vCPU limit of 0 allows (p5.48xlarge,"
        " spot) — EC2 Fleet fleet-0abc launched 0 of 1 instances; InsufficientInstanceCapacity: "
        "There is no Spot capacity available that matches your request (p4d.24xlarge, spot); "
        "destroy the stack or let the router try the next placement",
        "VcpuLimitExceeded",
        "quota",
    ),
    (
        "aws",
        "error: RunError: Unsupported: Your requested instance type (p5.48xlarge) is not "
        "supported in your requested Availability Zone (us-east-1e) (p5.48xlarge, spot) — EC2 "
        "Fleet fleet-0abc launched 0 of 1 instances; destroy the stack or let the router try the "
        "next placement",
        "Unsupported",
        "capacity",
    ),
    # A new instance profile IAM has not propagated to EC2 yet: retried in place, not elsewhere.
    (
        "aws",
        "error: RunError: InvalidParameterValue: Value (train-20261201) for parameter "
        "iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name (p4d.24xlarge, "
        "spot) — EC2 Fleet fleet-0abc launched 0 of 1 instances; destroy the stack or let the "
        "router try the next placement",
        "InvalidParameterValue",
        "propagation",
    ),
    (
        "gcp",
        "  gcp:compute:InstanceGroupManager (train-group):\n    error: 1 error occurred:\n"
        "\t* Error waiting for Creating InstanceGroupManager: ZONE_RESOURCE_POOL_EXHAUSTED: The "
        "zone 'projects/ml-prod/zones/us-central1-a' does not have enough resources available "
        "to fulfill the request.  Try a different zone, or try again later.",
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "capacity",
    ),
    (
        "gcp",
        "error: code: ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS message: The zone "
        "'projects/p/zones/us-central1-b' does not have enough resources available to fulfill "
        "the request.",
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "capacity",
    ),
    (
        "gcp",
        "error: googleapi: Error 403: Quota 'NVIDIA_A100_80GB_GPUS' exceeded.  Limit: 0.0 in "
        "region us-central1., quotaExceeded",
        "QUOTA_EXCEEDED",
        "quota",
    ),
    (
        "gcp",
        "error: Error waiting for instance to create: QUOTA_EXCEEDED: Quota 'GPUS_ALL_REGIONS' "
        "exceeded.  Limit: 1.0 globally.",
        "QUOTA_EXCEEDED",
        "quota",
    ),
    (
        "azure",
        "  azure-native:compute:VirtualMachineScaleSet (train-vmss):\n    error: Status=409 "
        'Code="SkuNotAvailable" Message="The requested VM size for resource \'Following SKUs '
        "have failed for Capacity Restrictions: Standard_NC24ads_A100_v4' is currently not "
        "available in location 'eastus'. Please try another size or deploy to a different "
        'location or different zone. See https://aka.ms/azureskunotavailable for details."',
        "SkuNotAvailable",
        "capacity",
    ),
    (
        "azure",
        'error: Code="OverconstrainedAllocationRequest" Message="Allocation failed. VM(s) with '
        "the following constraints cannot be allocated, because the condition is too "
        "restrictive. Please remove some constraints and try again. Constraints applied are: "
        '- VM Size"',
        "OverconstrainedAllocationRequest",
        "capacity",
    ),
    (
        "azure",
        'error: Code="OperationNotAllowed" Message="Operation could not be completed as it '
        "results in exceeding approved Low Priority Cores quota. Additional details - "
        "Deployment Model: Resource Manager, Location: eastus, Current Limit: 0, Current "
        'Usage: 0, Additional Required: 24, (Minimum) New Limit Required: 24."',
        "QuotaExceeded",
        "quota",
    ),
    (
        "local",
        "error: Exception: LocalCapacityExhausted: local region local-a has no spot capacity "
        "left (2 of 2 in use); try another region or market",
        "LocalCapacityExhausted",
        "capacity",
    ),
    (
        "local",
        "error: Exception: LocalQuotaExceeded: local region local-a GPU quota 8: 8 in use, 8 more"
        " asked; request more quota (local_market.quota) or use another region",
        "LocalQuotaExceeded",
        "quota",
    ),
]


@pytest.mark.parametrize(("cloud", "text", "code", "kind"), PAYLOADS)
def test_provider_refusals_are_recognised_with_their_code_and_kind(
    cloud: str, text: str, code: str, kind: str
) -> None:
    failure = classify_launch_error(text)
    assert failure is not None, text
    assert (failure.cloud, failure.code, failure.kind) == (cloud, code, kind)
    assert "\n" not in failure.message and failure.message


@pytest.mark.parametrize(
    "text",
    [
        "error: stacks/Pulumi.x.yaml: spotroute:market: 'spot' needs a job that checkpoints",
        "error: creating EC2 Fleet: UnauthorizedOperation: You are not authorized to perform "
        "this operation.",
        "error: googleapi: Error 400: Invalid value for field 'resource.machineType'",
        "error: [mandatory] price-within-budget: $9.80/h above the cap",
        # Other InvalidParameterValue errors are configuration, the same everywhere.
        "error: RunError: InvalidParameterValue: Value (ami-0abc) for parameter imageId is "
        "invalid (p4d.24xlarge, spot) — EC2 Fleet fleet-0abc launched 0 of 1 instances",
        "error: UnsupportedOperation: The instance type is not supported for this operation",
    ],
)
def test_other_failures_are_not_retried_elsewhere(text: str) -> None:
    assert classify_launch_error(text) is None


def test_capacity_blocks_the_zone_then_a_repeat_blocks_the_region() -> None:
    failure = classify_launch_error("InsufficientInstanceCapacity: none")
    assert failure is not None
    first = block_after(failure, "aws", "us-east-1", "us-east-1a", [], NOW)
    assert first.scope == "zone" and first.zone == "us-east-1a"
    assert blocking([first], "aws", "us-east-1", "us-east-1a", NOW) == first
    assert blocking([first], "aws", "us-east-1", "us-east-1b", NOW) is None
    second = block_after(failure, "aws", "us-east-1", "us-east-1b", [first], NOW)
    assert second.scope == "region"
    assert blocking([first, second], "aws", "us-east-1", "us-east-1c", NOW) == second
    assert blocking([first, second], "aws", "us-west-2", "us-west-2a", NOW) is None
    later = NOW + timedelta(seconds=second.until.timestamp() - NOW.timestamp() + 1)
    assert blocking([first, second], "aws", "us-east-1", "us-east-1c", later) is None


def test_quota_blocks_the_region_at_once_and_old_blocks_are_forgotten() -> None:
    failure = classify_launch_error("VcpuLimitExceeded: limit 0")
    assert failure is not None
    block = block_after(failure, "aws", "eu-west-1", "eu-west-1a", [], NOW)
    assert block.scope == "region"
    assert Block.from_json(block.to_json()) == block
    assert prune([block], NOW + timedelta(days=1)) == []


def test_zoneless_placement_blocks_only_itself() -> None:
    failure = classify_launch_error("LocalCapacityExhausted: full")
    assert failure is not None
    block = block_after(failure, "local", "local-a", None, [], NOW)
    assert blocking([block], "local", "local-a", None, NOW) == block
    assert blocking([block], "local", "local-b", None, NOW) is None


# --- a launch refused while IAM propagates a new instance profile ---------------------------


class _Stack:
    """A stack whose `up` fails like the engine until `fail` runs out, recording its calls."""

    def __init__(self, fail: int, text: str) -> None:
        self.fail, self.text = fail, text
        self.calls: list[dict[str, object]] = []

    def up(self, **kwargs: object) -> str:
        from pulumi.automation import CommandError
        from pulumi.automation._cmd import CommandResult

        self.calls.append(dict(kwargs))
        if self.fail:
            self.fail -= 1
            raise CommandError(CommandResult(stdout="", stderr=self.text, code=255))
        return "up"

    def export_stack(self) -> object:
        from types import SimpleNamespace

        return SimpleNamespace(deployment={"resources": [
            {"urn": "urn:pulumi:train::spotroute::pulumi:pulumi:Stack::spotroute-train",
             "type": "pulumi:pulumi:Stack"},
            {"urn": "urn:pulumi:train::spotroute::spotroute:aws:SpotGpuGroup$aws:ec2/"
                    "fleet:Fleet::train-fleet", "type": "aws:ec2/fleet:Fleet"},
        ]})  # fmt: skip


PROPAGATING = PAYLOADS[[p[2] for p in PAYLOADS].index("InvalidParameterValue")][1]


def test_launch_refused_for_an_unpropagated_profile_is_retried_with_the_fleet_replaced() -> None:
    from router.flows.jobs import PROPAGATION_WAITS_S, up_through_propagation

    stack, waits = _Stack(2, PROPAGATING), list[float]()

    assert up_through_propagation(stack, lambda: False, sleep=waits.append, on_event=None) == "up"
    assert waits == list(PROPAGATION_WAITS_S[:2])
    assert [c.get("replace") for c in stack.calls] == [None] + [[
        "urn:pulumi:train::spotroute::spotroute:aws:SpotGpuGroup$aws:ec2/fleet:Fleet::train-fleet"
    ]] * 2  # fmt: skip


def test_propagation_retries_end_and_other_refusals_are_not_retried() -> None:
    from pulumi.automation import CommandError

    from router.flows.jobs import PROPAGATION_WAITS_S, up_through_propagation

    stuck = _Stack(99, PROPAGATING)
    with pytest.raises(CommandError):
        up_through_propagation(stuck, lambda: False, sleep=lambda _s: None)
    assert len(stuck.calls) == len(PROPAGATION_WAITS_S) + 1
    short = _Stack(1, PAYLOADS[0][1])  # InsufficientInstanceCapacity: failover's, not ours
    with pytest.raises(CommandError):
        up_through_propagation(short, lambda: False, sleep=lambda _s: None)
    assert len(short.calls) == 1


def test_a_re_placement_fails_over_within_the_market_decided_never_into_the_lost_zone() -> None:
    """A rehearsal (route rehearse) saw a re-placement decided onto spot launch on on-demand at
    3× the price when its zone ran out meanwhile: decide() had chosen spot (its job could wait),
    the failover took the next ranked placement. Another market is decide()'s call."""
    from router.core.failover import launch_order

    def site(zone: str, market: str = "spot") -> dict[str, str]:
        return {"cloud": "aws", "region": "us-east-1", "zone": zone,
                "instance_type": "p3.2xlarge", "market": market}  # fmt: skip

    ranked = [site("us-east-1f"), site("us-east-1a"), site("", "on-demand"),
              site("us-east-1c"), site("us-east-1d")]  # fmt: skip
    decided, lost = site("us-east-1f"), site("us-east-1c")
    tried = launch_order(ranked, lambda p: p, decided, lost=lost)
    assert [p["zone"] for p in tried] == ["us-east-1f", "us-east-1a", "us-east-1d"]
    # a move tries the placement decided on only
    assert launch_order(ranked, lambda p: p, decided) == [decided]
    on_demand = launch_order(ranked, lambda p: p, site("", "on-demand"), lost=lost)
    assert on_demand == [site("", "on-demand")]
