"""AWS components under Pulumi mocks: what a `pulumi up` of an AWS placement would create."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from harness import FAKE_AMI_ID, CapturedStack, run_components, run_program

from components import aws as aws_components
from components import aws_network
from components.args import (
    CheckpointBucketArgs,
    JobIdentityArgs,
    NetworkArgs,
)

FLEET = "aws:ec2/fleet:Fleet"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
EXISTING_BUCKET_URL = "s3://acme-checkpoints/teams/ml/"
WRITE_ACTIONS = {"s3:PutObject", "s3:DeleteObject"}
# Every AWS resource type the components create, split by whether AWS lets it carry tags. A new
# resource type fails test_every_resource_type_is_classified_for_tagging until it is listed here.
TAGGABLE = {
    "aws:ec2/vpc:Vpc",
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
    "aws:ec2/subnet:Subnet",
    "aws:ec2/internetGateway:InternetGateway",
    "aws:ec2/eip:Eip",
    "aws:ec2/natGateway:NatGateway",
    "aws:ec2/routeTable:RouteTable",
    "aws:ec2/vpcEndpoint:VpcEndpoint",
    SECURITY_GROUP,
    "aws:s3/bucket:Bucket",
    "aws:iam/role:Role",
    "aws:iam/instanceProfile:InstanceProfile",
    TEMPLATE,
    FLEET,
    "aws:ec2/placementGroup:PlacementGroup",
}
UNTAGGABLE = {
    "aws:ec2/routeTableAssociation:RouteTableAssociation",
    "aws:s3/bucketVersioning:BucketVersioning",
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls",
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
    "aws:s3/bucketPolicy:BucketPolicy",
    ROLE_POLICY,
}


def placement(config: dict[str, Any], **changes: Any) -> CapturedStack:
    return run_program({**config, **changes})


def policy_statements(stack: CapturedStack) -> list[dict[str, Any]]:
    document = json.loads(stack.one(ROLE_POLICY).inputs["policy"])
    statements: list[dict[str, Any]] = document["Statement"]
    return statements


def actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def resources(statement: dict[str, Any]) -> list[str]:
    resource = statement["Resource"]
    return [resource] if isinstance(resource, str) else list(resource)


def user_data(stack: CapturedStack) -> str:
    return base64.b64decode(stack.one(TEMPLATE).inputs["userData"]).decode()


def checkpoint_prefix_arn(stack: CapturedStack) -> str:
    """arn:aws:s3:::bucket/key-prefix/ of the job's checkpoint location, from the stack output."""
    url: str = stack.outputs["checkpointUrl"]
    return "arn:aws:s3:::" + url.removeprefix("s3://")


# --- market -----------------------------------------------------------------------------------


@pytest.mark.parametrize("existing_url", ["", EXISTING_BUCKET_URL])
def test_spot_placement_requests_spot_capacity_capped_at_max_price(
    aws_config: dict[str, Any], existing_url: str
) -> None:
    stack = placement(aws_config, market="spot", checkpointUrl=existing_url)
    fleet = stack.one(FLEET).inputs

    assert fleet["type"] == "instant"
    assert fleet["targetCapacitySpecification"]["defaultTargetCapacityType"] == "spot"
    assert fleet["targetCapacitySpecification"]["totalTargetCapacity"] == 2
    spot = fleet["spotOptions"]
    assert spot["instanceInterruptionBehavior"] == "terminate"
    # The planner's order (override priority) counts only under a prioritized strategy.
    assert spot["allocationStrategy"] == "capacity-optimized-prioritized"
    assert spot["minTargetCapacity"] == 2  # both nodes or none
    assert spot["maxTotalPrice"] == "40"  # 2 nodes x 20 USD/h
    overrides = fleet["launchTemplateConfigs"][0]["overrides"]
    assert {o["maxPrice"] for o in overrides} == {"20"}
    assert "onDemandOptions" not in fleet
    assert stack.outputs["market"] == "spot"
    assert stack.outputs["maxPrice"] == 20.0


@pytest.mark.parametrize("existing_url", ["", EXISTING_BUCKET_URL])
def test_on_demand_placement_has_no_spot_options_anywhere(
    aws_config: dict[str, Any], existing_url: str
) -> None:
    stack = placement(aws_config, market="on-demand", checkpointUrl=existing_url)
    fleet = stack.one(FLEET).inputs

    assert "spotOptions" not in fleet
    assert fleet["targetCapacitySpecification"]["defaultTargetCapacityType"] == "on-demand"
    assert fleet["onDemandOptions"]["allocationStrategy"] == "prioritized"
    assert fleet["onDemandOptions"]["maxTotalPrice"] == "40"
    assert all("maxPrice" not in o for o in fleet["launchTemplateConfigs"][0]["overrides"])
    assert "instanceMarketOptions" not in stack.one(TEMPLATE).inputs


def test_fleet_overrides_list_every_instance_type_in_the_placement_zone(
    aws_config: dict[str, Any],
) -> None:
    stack = placement(aws_config, nodeCount=1)  # a group on EFA: tests/components/test_fabric.py
    subnet = stack.named("llm-finetune-subnet")
    config = stack.one(FLEET).inputs["launchTemplateConfigs"][0]
    overrides = config["overrides"]

    assert [o["instanceType"] for o in overrides] == ["p4de.24xlarge", "p4d.24xlarge"]
    assert {o["subnetId"] for o in overrides} == {f"{subnet.name}-id"}
    assert subnet.inputs["availabilityZone"] == "us-east-1a"
    assert config["launchTemplateSpecification"]["launchTemplateId"] == (
        f"{stack.one(TEMPLATE).name}-id"
    )


def test_redeploying_never_runs_two_fleets_of_one_job_or_follows_a_new_ami(
    aws_config: dict[str, Any],
) -> None:
    stack = placement(aws_config)
    fleet = stack.one(FLEET)

    assert fleet.delete_before_replace is True
    # ModifyFleet refuses instant fleets: what it would carry must replace the fleet instead.
    assert {
        "launchTemplateConfigs",
        "targetCapacitySpecification",
        "excessCapacityTerminationPolicy",
        "context",
    } <= set(fleet.replace_on_changes)
    assert fleet.inputs["type"] == "instant"
    assert stack.one(TEMPLATE).ignore_changes == ("imageId",)
    # Nodes boot into the job: the role's policy must be attached before they launch.
    assert stack.one(ROLE_POLICY).urn in fleet.dependencies


def test_destroying_the_stack_terminates_instances_but_keeps_checkpoints(
    aws_config: dict[str, Any],
) -> None:
    stack = placement(aws_config)

    assert stack.one(FLEET).inputs["terminateInstances"] is True
    assert stack.one("aws:s3/bucket:Bucket").inputs["forceDestroy"] is False


# --- network ----------------------------------------------------------------------------------


def test_security_group_admits_only_the_jobs_own_nodes(aws_config: dict[str, Any]) -> None:
    stack = placement(aws_config, nodeCount=4)
    group = stack.one(SECURITY_GROUP).inputs

    (rule,) = group["ingress"]
    assert rule["self"] is True  # NCCL between the group's nodes, all protocols
    assert (rule["protocol"], rule["fromPort"], rule["toPort"]) == ("-1", 0, 0)
    assert "cidrBlocks" not in rule and "ipv6CidrBlocks" not in rule
    out_self, out_world = group["egress"]
    assert out_self["self"] is True and "cidrBlocks" not in out_self  # EFA: tests/components/
    assert (out_self["protocol"], out_self["fromPort"], out_self["toPort"]) == ("-1", 0, 0)
    assert out_world["cidrBlocks"] == ["0.0.0.0/0"] and not out_world.get("self")  # test_fabric.py
    default_group = stack.one("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup").inputs
    assert default_group.get("ingress", []) == [] and default_group.get("egress", []) == []


def test_nodes_have_no_public_address_and_reach_out_through_a_nat_gateway(
    aws_config: dict[str, Any],
) -> None:
    stack = placement(aws_config, nodeCount=1)  # EFA groups: tests/components/test_fabric.py
    nodes = stack.named("llm-finetune-subnet")
    public = stack.named("llm-finetune-public")
    nat = stack.one("aws:ec2/natGateway:NatGateway")
    tables = {r.name: r for r in stack.of_type("aws:ec2/routeTable:RouteTable")}
    associations = {
        a.inputs["subnetId"]: a.inputs["routeTableId"]
        for a in stack.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation")
    }

    assert nodes.inputs["mapPublicIpOnLaunch"] is False
    assert nat.inputs["subnetId"] == f"{public.name}-id"
    (node_route,) = tables["llm-finetune-routes"].inputs["routes"]
    assert node_route == {"cidrBlock": "0.0.0.0/0", "natGatewayId": f"{nat.name}-id"}
    assert associations[f"{nodes.name}-id"] == "llm-finetune-routes-id"
    (public_route,) = tables["llm-finetune-public-routes"].inputs["routes"]
    assert public_route["gatewayId"] == (
        f"{stack.one('aws:ec2/internetGateway:InternetGateway').name}-id"
    )
    endpoint = stack.one("aws:ec2/vpcEndpoint:VpcEndpoint").inputs
    assert endpoint["serviceName"] == "com.amazonaws.us-east-1.s3"
    assert endpoint["vpcEndpointType"] == "Gateway"
    overrides = stack.one(FLEET).inputs["launchTemplateConfigs"][0]["overrides"]
    assert {o["subnetId"] for o in overrides} == {f"{nodes.name}-id"}


def test_remote_access_is_session_manager_on_the_role_and_opens_no_port(
    aws_config: dict[str, Any],
) -> None:
    closed = placement(aws_config)
    stack = placement(aws_config, remoteAccess=True)

    policies = {r.name: r for r in stack.of_type(ROLE_POLICY)}
    session = json.loads(policies["llm-finetune-session-manager"].inputs["policy"])
    register, channels = session["Statement"]
    assert register["Action"] == "ssm:UpdateInstanceInformation"
    assert register["Resource"] == "arn:aws:ec2:*:*:instance/*"
    assert set(channels["Action"]) == {
        "ssmmessages:CreateControlChannel",
        "ssmmessages:CreateDataChannel",
        "ssmmessages:OpenControlChannel",
        "ssmmessages:OpenDataChannel",
    }
    assert "llm-finetune-session-manager" not in {r.name for r in closed.of_type(ROLE_POLICY)}
    assert (
        stack.one(SECURITY_GROUP).inputs["ingress"] == closed.one(SECURITY_GROUP).inputs["ingress"]
    )


# --- checkpoint bucket ------------------------------------------------------------------------


def test_created_bucket_is_versioned_encrypted_private_and_owner_enforced(
    aws_config: dict[str, Any],
) -> None:
    stack = placement(aws_config)

    versioning = stack.one("aws:s3/bucketVersioning:BucketVersioning").inputs
    assert versioning["versioningConfiguration"]["status"] == "Enabled"
    sse = stack.one(
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    ).inputs
    assert sse["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    block = stack.one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    assert all(
        block[flag] is True
        for flag in (
            "blockPublicAcls",
            "blockPublicPolicy",
            "ignorePublicAcls",
            "restrictPublicBuckets",
        )
    )
    ownership = stack.one("aws:s3/bucketOwnershipControls:BucketOwnershipControls").inputs
    assert ownership["rule"]["objectOwnership"] == "BucketOwnerEnforced"
    (rule,) = stack.one("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration").inputs[
        "rules"
    ]
    assert rule["status"] == "Enabled"
    assert rule["noncurrentVersionExpiration"]["noncurrentDays"] == 7
    tls = json.loads(stack.one("aws:s3/bucketPolicy:BucketPolicy").inputs["policy"])
    assert tls["Statement"][0]["Effect"] == "Deny"
    assert tls["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_created_bucket_checkpoint_url_is_the_job_prefix_of_the_new_bucket(
    aws_config: dict[str, Any],
) -> None:
    stack = placement(aws_config)
    bucket_name = stack.one("aws:s3/bucket:Bucket").inputs["bucketPrefix"] + "mock0001"

    assert stack.outputs["checkpointUrl"] == f"s3://{bucket_name}/llm-finetune/"


def test_existing_bucket_is_reused_and_nothing_is_created_in_s3(
    aws_config: dict[str, Any],
) -> None:
    stack = placement(aws_config, checkpointUrl=EXISTING_BUCKET_URL)

    assert not [r for r in stack.resources if r.type.startswith("aws:s3/")]
    assert stack.outputs["checkpointUrl"] == "s3://acme-checkpoints/teams/ml/llm-finetune/"


def test_existing_bucket_url_outside_s3_is_refused_at_construction() -> None:
    args = CheckpointBucketArgs(
        job_name="llm", region="us-east-1", existing_url="gs://somewhere/else/"
    )

    with pytest.raises(ValueError, match="existing_url"):
        run_components(lambda: aws_components.CheckpointBucket("llm", args))


# --- identity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("existing_url", ["", EXISTING_BUCKET_URL])
def test_job_role_writes_only_under_its_checkpoint_prefix(
    aws_config: dict[str, Any], existing_url: str
) -> None:
    stack = placement(aws_config, checkpointUrl=existing_url)
    prefix_arn = checkpoint_prefix_arn(stack)
    statements = policy_statements(stack)

    assert all(s["Effect"] == "Allow" for s in statements)
    for statement in statements:
        for resource in resources(statement):
            assert resource != "*" and not resource.endswith(":::*")
        if actions(statement) & WRITE_ACTIONS:
            assert resources(statement) == [prefix_arn + "*"]
    write_statements = [s for s in statements if actions(s) & WRITE_ACTIONS]
    assert len(write_statements) == 1
    assert actions(write_statements[0]) == {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}


def test_job_role_lists_only_its_prefix_and_reads_only_its_data(
    aws_config: dict[str, Any],
) -> None:
    stack = placement(aws_config, checkpointUrl=EXISTING_BUCKET_URL)
    statements = {s["Sid"]: s for s in policy_statements(stack)}

    assert statements["CheckpointList"]["Resource"] == "arn:aws:s3:::acme-checkpoints"
    assert statements["CheckpointList"]["Condition"] == {
        "StringLike": {"s3:prefix": ["teams/ml/llm-finetune/*"]}
    }
    assert actions(statements["DataRead"]) == {"s3:GetObject"}
    assert statements["DataRead"]["Resource"] == "arn:aws:s3:::acme-datasets/llm/*"
    assert statements["DataList"]["Condition"] == {"StringLike": {"s3:prefix": ["llm/*"]}}
    assert set(statements) == {"CheckpointObjects", "CheckpointList", "DataRead", "DataList"}


def test_data_outside_s3_adds_no_grant(aws_config: dict[str, Any]) -> None:
    stack = placement(aws_config, dataUrls=["gs://acme-datasets/llm/"])

    assert {s["Sid"] for s in policy_statements(stack)} == {"CheckpointObjects", "CheckpointList"}


def test_job_role_can_be_assumed_only_by_ec2(aws_config: dict[str, Any]) -> None:
    stack = placement(aws_config)
    trust = json.loads(stack.one("aws:iam/role:Role").inputs["assumeRolePolicy"])

    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "ec2.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"
    assert stack.outputs["identity"].startswith("arn:aws:iam::")


def test_identity_refuses_a_prefix_that_would_grant_the_whole_bucket() -> None:
    def build() -> None:
        bucket = aws_components.CheckpointBucket(
            "llm", CheckpointBucketArgs(job_name="llm", region="us-east-1")
        )
        aws_components.JobIdentity(
            "llm",
            JobIdentityArgs(job_name="llm", region="us-east-1", checkpoint_prefix="/"),
            bucket,
        )

    with pytest.raises(ValueError, match="checkpoint_prefix"):
        run_components(build)


# --- nodes ------------------------------------------------------------------------------------


def test_user_data_runs_the_job_container_with_job_id_and_checkpoint_url(
    aws_config: dict[str, Any],
) -> None:
    stack = placement(aws_config, checkpointUrl=EXISTING_BUCKET_URL)
    script = user_data(stack)

    assert "export SPOTROUTE_JOB_ID=llm-finetune\n" in script
    assert (
        "export SPOTROUTE_CHECKPOINT_URL=s3://acme-checkpoints/teams/ml/llm-finetune/\n" in script
    )
    assert "export EPOCHS=3\n" in script
    assert "docker run --rm --gpus all" in script
    assert "ghcr.io/acme/trainer:1.4 python train.py --resume" in script


def test_nodes_use_imdsv2_an_encrypted_gp3_boot_disk_and_the_job_profile(
    aws_config: dict[str, Any],
) -> None:
    stack = placement(aws_config, nodeCount=1)  # EFA groups: tests/components/test_fabric.py
    template = stack.one(TEMPLATE).inputs

    assert template["metadataOptions"]["httpTokens"] == "required"
    (disk,) = template["blockDeviceMappings"]
    assert disk["ebs"] == {
        "volumeSize": 200,
        "volumeType": "gp3",
        "encrypted": "true",
        "deleteOnTermination": "true",
    }
    profile = stack.one("aws:iam/instanceProfile:InstanceProfile")
    assert template["iamInstanceProfile"]["name"] == profile.inputs["namePrefix"] + "mock0001"
    assert template["vpcSecurityGroupIds"] == [f"{stack.one(SECURITY_GROUP).name}-id"]
    assert template["imageId"] == FAKE_AMI_ID


def test_gpu_image_is_looked_up_in_the_placement_region(aws_config: dict[str, Any]) -> None:
    stack = placement(aws_config, region="eu-west-1", zone="eu-west-1b")
    provider = stack.one("pulumi:providers:aws")
    (lookup,) = [i for i in stack.invokes if i.token == "aws:ssm/getParameter:getParameter"]

    assert provider.inputs["region"] == "eu-west-1"
    # Besides the image: the account id, for the job role's boundary ARN.
    assert {i.token for i in stack.invokes} == {
        lookup.token,
        "aws:index/getCallerIdentity:getCallerIdentity",
    }
    assert all(i.provider.startswith(provider.urn + "::") for i in stack.invokes)
    assert "deeplearning" in lookup.args["name"]
    assert lookup.provider.startswith(provider.urn + "::")



@pytest.mark.parametrize(
    ("gpu", "instance_types", "parameter", "root"),
    [
        # Open kernel modules: Turing and later (NVIDIA/open-gpu-kernel-modules README).
        ("A100-80GB", ["p4de.24xlarge"], "base-oss-nvidia-driver-gpu-ubuntu-22.04", "/dev/sda1"),
        # Volta needs the proprietary driver: DLAMI "Base Proprietary Nvidia Driver AMI (Amazon
        # Linux 2)" lists P3 and P3dn (docs.aws.amazon.com/dlami/latest/devguide/
        # aws-deep-learning-ami-base-aml2-2026-01-02.html); Amazon Linux boots from /dev/xvda.
        ("V100", ["p3.2xlarge", "p3dn.24xlarge"],
         "base-proprietary-nvidia-driver-amazon-linux-2", "/dev/xvda"),
    ],
)  # fmt: skip
def test_nodes_boot_an_image_whose_driver_runs_their_gpu(
    aws_config: dict[str, Any], gpu: str, instance_types: list[str], parameter: str, root: str
) -> None:
    stack = placement(aws_config, gpu=gpu, gpuCount=1, instanceTypes=instance_types)
    (lookup,) = [i for i in stack.invokes if i.token == "aws:ssm/getParameter:getParameter"]
    (disk,) = stack.one(TEMPLATE).inputs["blockDeviceMappings"]

    assert lookup.args["name"] == f"/aws/service/deeplearning/ami/x86_64/{parameter}/latest/ami-id"
    assert disk["deviceName"] == root


# --- every resource ---------------------------------------------------------------------------


def test_every_resource_type_is_classified_for_tagging(aws_config: dict[str, Any]) -> None:
    stack = placement(aws_config, remoteAccess=True)

    assert {r.type for r in stack.custom_resources()} == TAGGABLE | UNTAGGABLE


def test_every_taggable_type_is_tagged_and_the_launch_template_tags_what_it_launches(
    aws_config: dict[str, Any],
) -> None:
    stack = placement(aws_config)
    wanted = {"spotroute-job": "llm-finetune", "team": "ml-platform", "managed-by": "spotroute"}

    taggable = [r for r in stack.custom_resources() if r.type in TAGGABLE]
    assert len(taggable) >= len(TAGGABLE)
    for resource in taggable:
        assert wanted.items() <= resource.inputs["tags"].items(), resource.name
    for spec in stack.one(TEMPLATE).inputs["tagSpecifications"]:
        assert wanted.items() <= spec["tags"].items(), spec["resourceType"]
    launched = {s["resourceType"] for s in stack.one(TEMPLATE).inputs["tagSpecifications"]}
    assert {"instance", "volume"} <= launched


# --- components on their own (wrong Args, unknown market: test_component_contract.py) ---------


def test_network_component_builds_on_its_own_without_a_program() -> None:
    stack = run_components(
        lambda: aws_network.Network(
            "solo", NetworkArgs(job_name="solo", region="us-east-1", zone="us-east-1c")
        )
    )

    subnet = stack.named("solo-subnet")
    assert subnet.inputs["availabilityZone"] == "us-east-1c"
    assert subnet.parent_type == "spotroute:aws:Network"
    assert stack.named("solo-vpc").inputs["tags"]["spotroute-job"] == "solo"


def test_subnet_accepts_zone_ids_from_price_catalogs_and_zone_names_from_the_api(
    aws_config: dict[str, Any],
) -> None:
    by_id = placement(aws_config, region="us-east-1", zone="use1-az4").named("llm-finetune-subnet")
    by_name = placement(aws_config, region="us-east-1", zone="us-east-1a").named(
        "llm-finetune-subnet"
    )

    assert by_id.inputs.get("availabilityZoneId") == "use1-az4"
    assert "availabilityZone" not in by_id.inputs
    assert by_name.inputs.get("availabilityZone") == "us-east-1a"
    assert "availabilityZoneId" not in by_name.inputs


def test_fleet_overrides_carry_the_planners_order_as_priority(aws_config: dict[str, Any]) -> None:
    stack = placement(aws_config)
    overrides = stack.one(FLEET).inputs["launchTemplateConfigs"][0]["overrides"]

    assert [(o["instanceType"], o["priority"]) for o in overrides] == [
        ("p4de.24xlarge", 0),
        ("p4d.24xlarge", 1),
    ]


def _fleet_error(code: str, message: str, instance_type: str) -> dict[str, Any]:
    """One entry of an instant fleet's `Errors` as DescribeFleets returns it (EC2 API reference,
    DescribeFleetError: LaunchTemplateAndOverrides, Lifecycle, ErrorCode, ErrorMessage)."""
    return {
        "LaunchTemplateAndOverrides": {
            "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-0abc", "Version": "1"},
            "Overrides": {"InstanceType": instance_type, "SubnetId": "subnet-0abc",
                          "AvailabilityZone": "us-east-1a", "Priority": 0.0},
        },
        "Lifecycle": "spot",
        "ErrorCode": code,
        "ErrorMessage": message,
    }  # fmt: skip


# Codes and messages as EC2 writes them (EC2 API error codes,
# https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html).
VCPU = ("VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit "
        "of 0 allows for the instance bucket that the specified instance type belongs to.")
NO_CAPACITY = ("InsufficientInstanceCapacity", "There is no Spot capacity available that matches "
               "your request.")
SPOT_COUNT = ("MaxSpotInstanceCountExceeded", "Max spot instance count exceeded")
UNSUPPORTED = ("Unsupported", "Your requested instance type (p4de.24xlarge) is not supported in "
               "your requested Availability Zone (us-east-1a).")
PROFILE = ("InvalidParameterValue", "Value (llm-finetune-20261201) for parameter "
           "iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name")


@pytest.mark.parametrize(
    ("errors", "code", "kind"),
    [
        ([NO_CAPACITY, NO_CAPACITY], "InsufficientInstanceCapacity", "capacity"),
        # One override short of quota, one of capacity: the quota is what blocks the region.
        ([NO_CAPACITY, VCPU], "VcpuLimitExceeded", "quota"),
        ([SPOT_COUNT, SPOT_COUNT], "MaxSpotInstanceCountExceeded", "quota"),
        ([UNSUPPORTED, UNSUPPORTED], "Unsupported", "capacity"),
        ([UNSUPPORTED, NO_CAPACITY], "InsufficientInstanceCapacity", "capacity"),
        ([PROFILE, PROFILE], "InvalidParameterValue", "propagation"),
    ],
)
def test_a_short_fleet_fails_the_deploy_with_the_fleets_own_error_codes(
    aws_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
    errors: list[tuple[str, str]], code: str, kind: str,
) -> None:
    from components import aws_fleet
    from router.core.failover import classify_launch_error

    asked: list[tuple[str, str]] = []

    def read(fleet_id: str, region: str) -> list[dict[str, Any]]:
        asked.append((fleet_id, region))
        types = ["p4de.24xlarge", "p4d.24xlarge"]
        return [_fleet_error(c, m, t) for (c, m), t in zip(errors, types, strict=True)]

    monkeypatch.setattr(aws_fleet, "read_fleet_errors", read)
    with pytest.raises(Exception) as raised:
        run_program({**aws_config, "nodeCount": 2},
                    states={FLEET: lambda name, inputs: {"fleetInstanceSets": []}})

    text = str(raised.value)
    assert asked == [(f"{aws_config['jobName']}-fleet-id", "us-east-1")]
    assert f"{code}: " in text.split(" — ")[0], "the telling code leads"
    assert "launched 0 of 2 instances" in text
    for error_code, _message in errors:
        assert error_code in text, "every distinct error is named"
    failure = classify_launch_error(text)
    assert failure is not None and (failure.code, failure.kind) == (code, kind)


@pytest.mark.parametrize("launched", [0, 1])
def test_a_short_fleet_whose_errors_cannot_be_read_says_so_and_assumes_capacity(
    aws_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch, launched: int
) -> None:
    from components import aws_fleet

    def denied(fleet_id: str, region: str) -> list[dict[str, Any]]:
        raise PermissionError("ec2:DescribeFleets denied")

    def short_fleet(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        ids = [f"i-{n:017x}" for n in range(launched)]
        return {"fleetInstanceSets": [{"instanceIds": ids}] if ids else []}

    monkeypatch.setattr(aws_fleet, "read_fleet_errors", denied)
    with pytest.raises(Exception, match=r"InsufficientInstanceCapacity: .* launched .* could not "
                                        r"be read \(PermissionError"):
        run_program({**aws_config, "nodeCount": 2}, states={FLEET: short_fleet})


def test_fleet_errors_are_read_from_describe_fleets_in_ec2s_own_shape() -> None:
    import boto3
    from botocore.stub import Stubber

    from components.aws_fleet import read_fleet_errors

    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x",
                       aws_secret_access_key="x")  # fmt: skip
    # Stubber checks the answer against botocore's EC2 model: FleetData.Errors is what
    # DescribeFleets returns for an instant fleet (EC2 API reference, FleetData).
    stub = Stubber(ec2)
    errors = [_fleet_error(*VCPU, "p5.48xlarge")]
    stub.add_response(
        "describe_fleets",
        {"Fleets": [{"FleetId": "fleet-0abc", "Type": "instant", "FleetState": "active",
                     "Errors": errors, "Instances": []}]},
        {"FleetIds": ["fleet-0abc"]},
    )  # fmt: skip
    with stub:
        assert read_fleet_errors("fleet-0abc", "us-east-1", ec2=ec2) == errors


def test_nodes_learn_the_group_size(aws_config: dict[str, Any]) -> None:
    stack = placement(aws_config, nodeCount=4)
    user_data = base64.b64decode(stack.one(TEMPLATE).inputs["userData"]).decode()

    assert "export SPOTROUTE_NODE_COUNT=4" in user_data
    assert "--ipc=host" in user_data


def test_nodes_write_their_exit_record_with_their_own_identity(
    aws_config: dict[str, Any],
) -> None:
    # How route watch tells a crash from a preemption (components/node_exit.py).
    from components.node_exit import aws_exit_channel

    script = user_data(placement(aws_config))
    assert aws_exit_channel("us-east-1").command in script
    assert 'spotroute_exit_record "$code"' in script and "export SPOTROUTE_NODE_DIR=" in script


def test_nodes_watch_aws_preemption_notices(aws_config: dict[str, Any]) -> None:
    # router.checkpoint reads SPOTROUTE_NOTICE_SOURCE to know which metadata service to poll.
    assert "export SPOTROUTE_NOTICE_SOURCE=aws" in user_data(placement(aws_config))


def test_nodes_know_their_placement_for_the_hand_over(
    aws_config: dict[str, Any],
) -> None:
    # The job answers only save requests addressed to its stack (docs/migration.md).
    script = user_data(placement({**aws_config, "jobName": "moved-job-2"}))
    assert "export SPOTROUTE_PLACEMENT_ID=moved-job-2" in script
