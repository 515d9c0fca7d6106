"""AWS placement components: Network (in aws_network.py), CheckpointBucket, JobIdentity,
SpotGpuGroup; the pure names and IAM policy documents they apply are in aws_names.py.

The component contract every cloud module (aws.py, gcp.py, azure.py, local.py) follows
(full text with outputs: docs/components.md):

    make_provider(name: str, args: ProviderArgs) -> pulumi.ProviderResource | None
    Network(name, args: NetworkArgs, opts=None)
        outputs: network_id, subnet_id, firewall_id
    CheckpointBucket(name, args: CheckpointBucketArgs, opts=None)
        outputs: bucket_name, url ("s3://bucket/" or "s3://bucket/base/"), arn_or_id
        plain attribute: key_prefix (str, "" or "base/": where the bucket URL points inside it)
    JobIdentity(name, args: JobIdentityArgs, bucket: CheckpointBucket, opts=None, staging=None)
        outputs: identity_id, checkpoint_url (= bucket url + args.checkpoint_prefix)
                 AWS also: instance_profile_name, role_name
    SpotGpuGroup(name, args: SpotGpuGroupArgs, network, identity, bucket, opts=None)
        outputs: group_id, checkpoint_url (= identity.checkpoint_url)

`args.checkpoint_prefix` is relative to the bucket URL; the job may write only below
`bucket url + checkpoint_prefix`, which is the SPOTROUTE_CHECKPOINT_URL its instances get.
Providers come in through `opts` (ResourceOptions(providers=[...])); components never read
config. Invalid Args raise TypeError (wrong type) or ValueError (bad value, naming the field)
at construction, before any resource is registered.
"""

from __future__ import annotations

import base64
import json

import pulumi
import pulumi_aws as aws

from components.args import (
    CheckpointBucketArgs,
    JobIdentityArgs,
    ProviderArgs,
    SpotGpuGroupArgs,
    check_bucket_args,
    check_group_inputs,
    check_identity_inputs,
    secret_env_json,
    standard_labels,
)
from components.aws_fleet import require_full_capacity
from components.aws_names import (
    aws_tags,
    checkpoint_policy_document,
    gpu_image,
    parse_s3_url,
    physical_name_prefix,
    s3_data_locations,
    secret_parameter_name,
    secret_read_policy_document,
    session_manager_policy_document,
)
from components.aws_network import Network
from components.bootstrap.aws_boundary import aws_job_boundary_arn
from components.fabric import Fabric, group_fabric
from components.node_exit import aws_exit_channel
from components.registry import CloudComponents
from components.rendezvous import aws_rendezvous
from components.startup import (
    NO_SECRET_STORE_YET,
    SecretChannel,
    aws_secret_channel,
    render_startup_script,
)

# Override `priority` is honoured only by the prioritized strategies; the planner ranks the
# equivalent types cheapest (and least interrupted) first, so its order must win.
SPOT_ALLOCATION_STRATEGY = "capacity-optimized-prioritized"
ON_DEMAND_ALLOCATION_STRATEGY = "prioritized"
# ModifyFleet accepts changes for fleets of type `maintain` only; an instant fleet is one-shot,
# so every change the provider would send through ModifyFleet must replace the fleet instead
# (docs/components.md, "AWS: provider behaviour relied on").
FLEET_REPLACE_ON_CHANGES = (
    "launchTemplateConfigs",
    "targetCapacitySpecification",
    "excessCapacityTerminationPolicy",
    "context",
)


def make_provider(name: str, args: ProviderArgs) -> pulumi.ProviderResource:
    """Explicit AWS provider pinned to `args.region`, so no ambient aws:region config is needed."""
    return aws.Provider(name, region=args.region)


def _price(price_per_hour: float) -> str:
    """USD per hour as the decimal string the EC2 API takes (no exponent, no trailing zeros)."""
    return f"{price_per_hour:.6f}".rstrip("0").rstrip(".")


class CheckpointBucket(pulumi.ComponentResource):
    """Versioned, encrypted, private S3 bucket for checkpoints, or an existing one by URL."""

    bucket_name: pulumi.Output[str]
    url: pulumi.Output[str]
    arn_or_id: pulumi.Output[str]
    key_prefix: str

    def __init__(
        self, name: str, args: CheckpointBucketArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        check_bucket_args("aws.CheckpointBucket", args)
        _check_expire_days(args)
        existing = parse_s3_url(args.existing_url, "existing_url") if args.existing_url else None
        super().__init__("spotroute:aws:CheckpointBucket", name, None, opts)

        if existing is not None:
            # Reused bucket: its settings belong to whoever owns it; nothing is created.
            bucket_name, self.key_prefix = existing
            self.bucket_name = pulumi.Output.from_input(bucket_name)
            self.url = pulumi.Output.from_input(f"s3://{bucket_name}/{self.key_prefix}")
            self.arn_or_id = pulumi.Output.from_input(f"arn:aws:s3:::{bucket_name}")
        else:
            self.key_prefix = ""
            self._create(name, args)

        self.register_outputs(
            {"bucket_name": self.bucket_name, "url": self.url, "arn_or_id": self.arn_or_id}
        )

    def _create(self, name: str, args: CheckpointBucketArgs) -> None:
        job, labels = args.job_name, args.labels
        staging = args.expire_days > 0
        # DeleteBucket refuses a bucket that holds any object version or delete marker
        # (BucketNotEmpty), and a checkpoint bucket always does. Kept: bucket and every setting
        # stay when the stack is destroyed (the user's checkpoints, still private, encrypted and
        # expiring old versions). Not kept (a staged copy of data, or a checkpoint copy the router
        # discards): force_destroy empties it first.
        keep = args.keep_on_destroy and not staging
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=keep)
        bucket = aws.s3.Bucket(
            f"{name}-bucket",
            bucket_prefix=physical_name_prefix(job, 37),
            force_destroy=not keep,
            tags=aws_tags(job, labels, "staging" if staging else "checkpoints"),
            opts=child,
        )
        versioning = aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                status="Enabled"
            ),
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-sse",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms"
                    ),
                    # One KMS data key per bucket instead of per object: checkpoints are many PUTs.
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        public_block = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-old-checkpoint-versions",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=args.noncurrent_version_days
                    ),
                    # Preempted uploads leave parts behind that are billed until aborted.
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=1
                    ),
                ),
                *(
                    [
                        aws.s3.BucketLifecycleConfigurationRuleArgs(
                            id="delete-staged-data-after-the-job",
                            status="Enabled",
                            filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                            expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(
                                days=args.expire_days
                            ),
                        )
                    ]
                    if staging
                    else []
                ),
            ],
            opts=_after(child, versioning),
        )
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=bucket.id,
            policy=bucket.arn.apply(
                lambda arn: json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Sid": "DenyInsecureTransport",
                                "Effect": "Deny",
                                "Principal": "*",
                                "Action": "s3:*",
                                "Resource": [arn, f"{arn}/*"],
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        ],
                    }
                )
            ),
            # S3 refuses bucket policies while the public access block is being applied.
            opts=_after(child, public_block),
        )
        self.bucket_name = bucket.bucket
        self.url = bucket.bucket.apply(lambda b: f"s3://{b}/")
        self.arn_or_id = bucket.arn


def _after(opts: pulumi.ResourceOptions, resource: pulumi.Resource) -> pulumi.ResourceOptions:
    """`opts` plus a dependency on `resource`."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[resource]))


def _check_expire_days(args: CheckpointBucketArgs) -> None:
    if args.expire_days < 0:
        raise ValueError(f"expire_days: {args.expire_days} — use 0 (keep) or a number of days")
    if args.expire_days and args.existing_url:
        raise ValueError("expire_days: a staging bucket is created, not reused — drop existing_url")


class JobIdentity(pulumi.ComponentResource):
    """IAM role + instance profile that may touch only the job's checkpoint prefix, read data."""

    identity_id: pulumi.Output[str]
    instance_profile_name: pulumi.Output[str]
    role_name: pulumi.Output[str]
    checkpoint_url: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: JobIdentityArgs,
        bucket: CheckpointBucket,
        opts: pulumi.ResourceOptions | None = None,
        staging: CheckpointBucket | None = None,
    ) -> None:
        relative_prefix, key_prefix = check_identity_inputs(
            "aws.JobIdentity", args, bucket, staging, CheckpointBucket
        )
        # Fails here, before registering anything, if the prefix would grant the whole bucket.
        checkpoint_policy_document("validate", key_prefix)
        # Non-S3 data (gs://, https://) cannot be granted by an AWS role: the job brings its own
        # credentials for it, so nothing is added here.
        data = s3_data_locations(args.data_urls)
        super().__init__("spotroute:aws:JobIdentity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        job, labels = args.job_name, args.labels

        # The bootstrap's job boundary caps the role whatever its inline policy says; the
        # deployer may create job roles only with it (bootstrap/aws_permissions.py).
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        role = aws.iam.Role(
            f"{name}-role",
            name_prefix=physical_name_prefix(job, 38),
            permissions_boundary=account.account_id.apply(aws_job_boundary_arn),
            description=f"spotroute job {job}: checkpoints under {key_prefix}",
            assume_role_policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "ec2.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                }
            ),
            tags=aws_tags(job, labels, "role"),
            opts=child,
        )
        aws.iam.RolePolicy(
            f"{name}-checkpoints",
            role=role.id,
            policy=pulumi.Output.all(
                bucket.bucket_name,
                staging.bucket_name if staging is not None else "",
            ).apply(
                lambda names: json.dumps(
                    checkpoint_policy_document(names[0], key_prefix, data, names[1])
                )
            ),
            opts=child,
        )
        if args.remote_access:
            aws.iam.RolePolicy(
                f"{name}-session-manager",
                role=role.id,
                policy=json.dumps(session_manager_policy_document()),
                opts=child,
            )
        profile = aws.iam.InstanceProfile(
            f"{name}-profile",
            name_prefix=physical_name_prefix(job, 38),
            role=role.name,
            tags=aws_tags(job, labels, "profile"),
            opts=child,
        )

        self.identity_id = role.arn
        self.role_name = role.name  # AWS only: for grants made next to what they grant
        self.instance_profile_name = profile.name
        self.checkpoint_url = bucket.url.apply(lambda url: url + relative_prefix)
        self.register_outputs(
            {
                "identity_id": self.identity_id,
                "instance_profile_name": self.instance_profile_name,
                "checkpoint_url": self.checkpoint_url,
            }
        )


class SpotGpuGroup(pulumi.ComponentResource):
    """Launch template + one-shot EC2 Fleet (type instant) of node_count GPU instances."""

    group_id: pulumi.Output[str]
    checkpoint_url: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: SpotGpuGroupArgs,
        network: Network,
        identity: JobIdentity,
        bucket: CheckpointBucket,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        check_group_inputs(
            "aws.SpotGpuGroup",
            args,
            ((network, Network), (identity, JobIdentity), (bucket, CheckpointBucket)),
            "EC2 instance types",
        )
        _check_group_args(args)
        super().__init__("spotroute:aws:SpotGpuGroup", name, None, opts)
        job, labels = args.job_name, args.labels
        tags = standard_labels(job, labels)
        spot = args.market == "spot"

        ami_parameter, root_device = gpu_image(args.gpu)
        ami = aws.ssm.get_parameter_output(
            name=ami_parameter, opts=pulumi.InvokeOutputOptions(parent=self)
        )
        channel, secret_grants = self._secret_store(name, args, identity)
        fabric = group_fabric("aws", args.instance_types, args.node_count)
        user_data = pulumi.Output.all(identity.checkpoint_url, channel).apply(
            lambda values: base64.b64encode(
                render_startup_script(
                    job,
                    values[0],
                    args.job,
                    node_count=args.node_count,
                    notice_source="aws",
                    placement=pulumi.get_stack(),
                    secrets=values[1],
                    rendezvous=aws_rendezvous(args.region),
                    fabric=fabric.docker_options(),
                    fabric_env=fabric.nccl_env,
                    exit_record=aws_exit_channel(args.region),
                ).encode()
            ).decode()
        )
        # A group on EFA: all nodes in one cluster placement group (lowest latency between
        # them), every EFA device of the type attached. The template then names the subnet and
        # security group per interface and the fleet overrides name no subnet: with one there,
        # EC2 Fleet ignores the template's interfaces (aws/karpenter-provider-aws#3819).
        placement_group = (
            aws.ec2.PlacementGroup(
                f"{name}-placement",
                strategy="cluster",
                tags=aws_tags(job, labels, "placement"),
                opts=pulumi.ResourceOptions(parent=self),
            )
            if fabric.cluster_placement
            else None
        )
        efa = fabric.efa_interfaces > 0
        template = aws.ec2.LaunchTemplate(
            f"{name}-template",
            description=f"spotroute job {job}: {args.gpu_count}x {args.gpu}",
            image_id=ami.insecure_value,
            # Market options live on the fleet: EC2 Fleet owns spot vs on-demand per request.
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(
                name=identity.instance_profile_name
            ),
            vpc_security_group_ids=None if efa else [network.firewall_id],
            network_interfaces=efa_interfaces(fabric, network.subnet_id, network.firewall_id)
            if efa
            else None,
            placement=aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group.name)
            if placement_group is not None
            else None,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",  # IMDSv2 only
                http_put_response_hop_limit=1,
                instance_metadata_tags="disabled",
            ),
            block_device_mappings=[
                aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                    device_name=root_device,
                    ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                        volume_size=args.boot_disk_gb,
                        volume_type="gp3",
                        encrypted="true",
                        delete_on_termination="true",
                    ),
                )
            ],
            # The start-up script powers the node off after the job; terminate so EBS stops billing.
            instance_initiated_shutdown_behavior="terminate",
            user_data=user_data,
            update_default_version=True,
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(
                    resource_type=kind, tags=aws_tags(job, labels, "node")
                )
                for kind in ("instance", "volume", "network-interface")
            ],
            tags=aws_tags(job, labels, "template"),
            # AWS republishes the AMI about monthly; following it would replace running nodes on
            # any later `up`. A stack keeps the image it started with; a new placement gets the
            # current one.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["image_id"]),
        )

        price = _price(args.max_price_per_hour)
        total_price = _price(args.max_price_per_hour * args.node_count)
        fleet = aws.ec2.Fleet(
            f"{name}-fleet",
            type="instant",
            terminate_instances=True,  # `pulumi destroy` must stop the spend
            launch_template_configs=[
                aws.ec2.FleetLaunchTemplateConfigArgs(
                    launch_template_specification=aws.ec2.FleetLaunchTemplateConfigLaunchTemplateSpecificationArgs(
                        launch_template_id=template.id,
                        version=template.latest_version.apply(str),
                    ),
                    overrides=[
                        aws.ec2.FleetLaunchTemplateConfigOverrideArgs(
                            instance_type=instance_type,
                            subnet_id=None if efa else network.subnet_id,
                            priority=float(rank),  # cheapest first, as the planner ranked them
                            max_price=price if spot else None,
                        )
                        for rank, instance_type in enumerate(args.instance_types)
                    ],
                )
            ],
            target_capacity_specification=aws.ec2.FleetTargetCapacitySpecificationArgs(
                default_target_capacity_type=args.market,
                total_target_capacity=args.node_count,
                spot_target_capacity=args.node_count if spot else None,
                on_demand_target_capacity=None if spot else args.node_count,
            ),
            # All-or-nothing, one type, one zone: a half-launched multi-node job only costs money.
            spot_options=aws.ec2.FleetSpotOptionsArgs(
                allocation_strategy=SPOT_ALLOCATION_STRATEGY,
                instance_interruption_behavior="terminate",
                max_total_price=total_price,
                min_target_capacity=args.node_count,
                single_instance_type=True,
                single_availability_zone=True,
            )
            if spot
            else None,
            on_demand_options=None
            if spot
            else aws.ec2.FleetOnDemandOptionsArgs(
                allocation_strategy=ON_DEMAND_ALLOCATION_STRATEGY,
                max_total_price=total_price,
                min_target_capacity=args.node_count,
                single_instance_type=True,
                single_availability_zone=True,
            ),
            tags={**tags, "Name": f"{job}-fleet"},
            opts=pulumi.ResourceOptions(
                parent=self,
                # Nodes start the job at boot: their role, policy and profile must exist first.
                depends_on=[identity, network, *secret_grants],
                # Two fleets of one job at once would double the GPU bill and race on checkpoints.
                delete_before_replace=True,
                replace_on_changes=list(FLEET_REPLACE_ON_CHANGES),
            ),
        )

        node_count, region = args.node_count, args.region
        self.group_id = pulumi.Output.all(fleet.id, fleet.fleet_instance_sets).apply(
            lambda values: require_full_capacity(values[0], values[1], node_count, region)
        )
        self.checkpoint_url = identity.checkpoint_url
        self.register_outputs({"group_id": self.group_id, "checkpoint_url": self.checkpoint_url})

    def _secret_store(
        self, name: str, args: SpotGpuGroupArgs, identity: JobIdentity
    ) -> tuple[pulumi.Output[SecretChannel] | None, list[pulumi.Resource]]:
        """The job's secret env as an SSM SecureString parameter its role alone may read."""
        if not args.job.secret_names:
            return None, []
        child = pulumi.ResourceOptions(parent=self)
        parameter_name = secret_parameter_name(pulumi.get_stack())
        parameter = aws.ssm.Parameter(
            f"{name}-secret-env",
            name=parameter_name,
            type="SecureString",  # encrypted with the AWS managed key aws/ssm
            tier="Intelligent-Tiering",  # Standard (free) unless the env is over 4 KB
            value=secret_env_json(args.job.secret_env),
            description=f"spotroute job {args.job_name}: secret env "
            + ", ".join(args.job.secret_names),
            tags=aws_tags(args.job_name, args.labels, "secret-env"),
            opts=child,
        )
        grant = aws.iam.RolePolicy(
            f"{name}-secret-read",
            role=identity.role_name,
            policy=parameter.arn.apply(lambda arn: json.dumps(secret_read_policy_document(arn))),
            opts=child,
        )
        # Pinned to the parameter's version: a changed secret changes the user data, so the fleet
        # is replaced and the job restarts with the new value (as on GCP and the local target).
        channel = parameter.version.apply(
            lambda version: aws_secret_channel(f"{parameter_name}:{version}", args.region)
        )
        return channel, [parameter, grant]


def efa_interfaces(
    fabric: Fabric, subnet_id: pulumi.Input[str], security_group_id: pulumi.Input[str]
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
    """The primary ENA interface, then one EFA-only interface per network card.

    AWS's layout for instances with several network cards: the primary (card 0, device 0) an ENA
    interface, card 0 device 1 EFA-only, each further card device 0 EFA-only
    (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html).
    """

    def interface(card: int, device: int, kind: str) -> aws.ec2.LaunchTemplateNetworkInterfaceArgs:
        return aws.ec2.LaunchTemplateNetworkInterfaceArgs(
            network_card_index=card,
            device_index=device,
            interface_type=kind,
            subnet_id=subnet_id,
            security_groups=[security_group_id],
            delete_on_termination="true",
        )

    return [
        interface(0, 0, "interface"),
        interface(0, 1, "efa-only"),
        *(interface(card, 0, "efa-only") for card in range(1, fabric.efa_interfaces)),
    ]


def _check_group_args(args: SpotGpuGroupArgs) -> None:
    # Renders (and so validates env names, reserved keys, empty commands) before registering.
    render_startup_script(args.job_name, "s3://validate/", args.job, secrets=NO_SECRET_STORE_YET)


COMPONENTS = CloudComponents(
    "aws", make_provider, Network, CheckpointBucket, JobIdentity, SpotGpuGroup
)
