"""GCP placement components: Network (in gcp_network.py), CheckpointBucket, JobIdentity,
SpotGpuGroup; the pure names, labels and IAM conditions they apply are in gcp_names.py.

Same contract as components/aws.py (constructors, outputs, errors; full text in
docs/components.md):

    make_provider(name, ProviderArgs(region, gcp_project="")) -> gcp.Provider
    Network(name, args: NetworkArgs, opts=None)
        outputs: network_id, subnet_id, firewall_id
    CheckpointBucket(name, args: CheckpointBucketArgs, opts=None)
        outputs: bucket_name, url ("gs://bucket/" or "gs://bucket/base/"), arn_or_id
        plain attribute: key_prefix (str, "" or "base/")
    JobIdentity(name, args: JobIdentityArgs, bucket: CheckpointBucket, opts=None, staging=None)
        outputs: identity_id (service account email), checkpoint_url
    SpotGpuGroup(name, args: SpotGpuGroupArgs, network, identity, bucket, opts=None)
        outputs: group_id (instance group manager id), checkpoint_url

GCP specifics: nodes get no external IP (Cloud NAT carries image pulls), the job's service
account holds only bucket-level grants conditioned on its prefix, and the group is a managed
instance group that never repairs a stopped node (a finished or preempted node stays stopped;
the router decides what happens next). Physical names that live in a project namespace are
derived from the job name (`gcp_name`); the bucket, whose namespace is global, is autonamed.
"""

from __future__ import annotations

import hashlib
import re

import pulumi
import pulumi_gcp as gcp

from components.args import (
    STAGING_PREFIX,
    CheckpointBucketArgs,
    JobIdentityArgs,
    ProviderArgs,
    SpotGpuGroupArgs,
    check_bucket_args,
    check_group_inputs,
    check_identity_inputs,
    secret_env_json,
)
from components.bootstrap.gcp_permissions import GCP_JOB_BUCKET_PREFIX
from components.fabric import fabric_for, group_fabric
from components.gcp_names import (
    AUTONAME_SUFFIX,
    BASE_INSTANCE_NAME_LIMIT,
    NAME_LIMIT,
    SECRET_ID_LIMIT,
    TEMPLATE_PREFIX_LIMIT,
    gcp_labels,
    gcp_name,
    machine_and_accelerators,
    node_tag,
    parse_gs_url,
    prefix_condition,
    service_account_id,
)
from components.gcp_network import Network
from components.node_exit import gcp_exit_channel
from components.registry import CloudComponents
from components.rendezvous import gcp_rendezvous
from components.startup import (
    NO_SECRET_STORE_YET,
    gcp_secret_channel,
    render_startup_script,
)

# Deep Learning VM base image (Ubuntu 22.04, CUDA 12.8, NVIDIA driver 570, Docker + NVIDIA
# container toolkit): the start-up script installs nothing. A family, so new nodes get the
# latest patched image without an invoke at deploy time.
IMAGE_PROJECT = "deeplearning-platform-release"
IMAGE_FAMILY = "common-cu128-ubuntu-2204-nvidia-570"
GPU_IMAGE = f"projects/{IMAGE_PROJECT}/global/images/family/{IMAGE_FAMILY}"
BOOT_DISK_TYPE = "pd-balanced"
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
CHECKPOINT_ROLE = "roles/storage.objectUser"  # get/create/delete/list objects, no IAM changes
DATA_ROLE = "roles/storage.objectViewer"
# Read a secret's versions, nothing else (no listing, no IAM, no new versions); granted on the
# job's one secret, never on the project.
SECRET_ROLE = "roles/secretmanager.secretAccessor"
# Soft delete off (0; anything else must be 7-90 days): cloud.google.com/storage/docs/soft-delete.
SOFT_DELETE_RETENTION_S = 0


def make_provider(name: str, args: ProviderArgs) -> pulumi.ProviderResource:
    """Explicit GCP provider for the region (and project if given), so no gcp:* config is read."""
    return gcp.Provider(name, region=args.region, project=args.gcp_project or None)


# --- components --------------------------------------------------------------------------------


class CheckpointBucket(pulumi.ComponentResource):
    """Versioned, private Cloud Storage bucket for checkpoints, or an existing one by URL."""

    bucket_name: pulumi.Output[str]
    url: pulumi.Output[str]
    arn_or_id: pulumi.Output[str]
    key_prefix: str

    def __init__(
        self, name: str, args: CheckpointBucketArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        check_bucket_args("gcp.CheckpointBucket", args, staging="bucket")
        existing = parse_gs_url(args.existing_url, "existing_url") if args.existing_url else None
        if existing is None:
            _check_bucket_name(name)
        super().__init__("spotroute:gcp:CheckpointBucket", name, None, opts)

        if existing is not None:
            # Reused bucket: its settings belong to whoever owns it; nothing is created.
            bucket_name, self.key_prefix = existing
            self.bucket_name = pulumi.Output.from_input(bucket_name)
            self.url = pulumi.Output.from_input(f"gs://{bucket_name}/{self.key_prefix}")
            self.arn_or_id = pulumi.Output.from_input(f"projects/_/buckets/{bucket_name}")
        else:
            self.key_prefix = ""
            self._create(name, args)

        self.register_outputs(
            {"bucket_name": self.bucket_name, "url": self.url, "arn_or_id": self.arn_or_id}
        )

    def _create(self, name: str, args: CheckpointBucketArgs) -> None:
        # Bucket names are global and the deployer's grants condition admits spotroute-... only
        # (bootstrap/gcp_permissions.py gcp_grant_condition): spotroute-<job>-ckpt-<8 hex of the
        # organization, project and stack>, which keeps two teams' "llm" jobs apart. A bucket
        # created before (autonamed <job>-ckpt-xxxxxxx) keeps its name: no replacement.
        keep = args.keep_on_destroy and not args.expire_days
        bucket = gcp.storage.Bucket(
            f"{name}-ckpt",
            name=_bucket_name(name, args.name_salt),
            location=args.region.upper(),
            storage_class="STANDARD",
            # IAM conditions (the job's prefix grant) need uniform bucket-level access.
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=gcp.storage.BucketVersioningArgs(enabled=True),
            lifecycle_rules=[
                gcp.storage.BucketLifecycleRuleArgs(
                    action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                    condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                        days_since_noncurrent_time=args.noncurrent_version_days,
                        with_state="ARCHIVED",
                    ),
                ),
                # Preempted uploads leave parts behind that are billed until aborted.
                gcp.storage.BucketLifecycleRuleArgs(
                    action=gcp.storage.BucketLifecycleRuleActionArgs(
                        type="AbortIncompleteMultipartUpload"
                    ),
                    condition=gcp.storage.BucketLifecycleRuleConditionArgs(age=1),
                ),
                *(
                    [
                        # A staged copy of data: deleted after the job (age counts from upload).
                        gcp.storage.BucketLifecycleRuleArgs(
                            action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                            condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                                age=args.expire_days, with_state="LIVE"
                            ),
                        )
                    ]
                    if args.expire_days
                    else []
                ),
            ],
            # Cloud Storage keeps every object it deletes for 7 more days by default (soft
            # delete, billed at the storage rate): each pruned checkpoint would bill a week past
            # the noncurrent-version rule above, which already keeps old versions recoverable.
            soft_delete_policy=gcp.storage.BucketSoftDeletePolicyArgs(
                retention_duration_seconds=SOFT_DELETE_RETENTION_S
            ),
            # Cloud Storage deletes only empty buckets (buckets.delete), and a checkpoint bucket
            # never is. Kept: the bucket stays when the stack is destroyed (the user's
            # checkpoints). Not kept (a staged copy of data, or a checkpoint copy the router
            # discards): force_destroy deletes every object version first.
            force_destroy=not keep,
            labels=gcp_labels(args.job_name, args.labels),
            opts=pulumi.ResourceOptions(
                parent=self, ignore_changes=["name"], retain_on_delete=keep
            ),
        )
        self.bucket_name = bucket.name
        self.url = bucket.name.apply(lambda b: f"gs://{b}/")
        self.arn_or_id = bucket.name.apply(lambda b: f"projects/_/buckets/{b}")


def _bucket_name(name: str, salt: str) -> str:
    """`spotroute-<name>-ckpt-<8 hex>`: the hex from the Pulumi organization, project, stack and
    the stack's deployment id (a kept bucket's name is never taken again)."""
    where = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}/{name}"
    where += f"/{salt}" if salt else ""
    digest = hashlib.sha256(where.encode()).hexdigest()[:AUTONAME_SUFFIX]
    return f"{GCP_JOB_BUCKET_PREFIX}{name}-ckpt-{digest}"


def _check_bucket_name(name: str) -> None:
    """Fail before registering anything if the bucket `spotroute-<name>-ckpt-<hex>` is invalid."""
    longest = NAME_LIMIT - len(GCP_JOB_BUCKET_PREFIX) - len("-ckpt-") - AUTONAME_SUFFIX
    if len(name) > longest:
        raise ValueError(
            f"job_name: {name!r} is {len(name)} characters; a created Cloud Storage bucket allows "
            f"{longest} — shorten the job name or set spotroute:checkpointUrl to a gs:// bucket"
        )
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name) or "goog" in name:
        raise ValueError(
            f"job_name: {name!r} cannot start a Cloud Storage bucket name (lowercase letters, "
            "digits, - and _, no 'goog') — rename the job or set spotroute:checkpointUrl"
        )


class JobIdentity(pulumi.ComponentResource):
    """Service account that may touch only the job's checkpoint prefix (and read its data)."""

    identity_id: pulumi.Output[str]
    checkpoint_url: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: JobIdentityArgs,
        bucket: CheckpointBucket,
        opts: pulumi.ResourceOptions | None = None,
        staging: CheckpointBucket | None = None,
    ) -> None:
        relative_prefix, object_prefix = check_identity_inputs(
            "gcp.JobIdentity", args, bucket, staging, CheckpointBucket
        )
        # Fails here, before registering anything, if the prefix would grant the whole bucket.
        prefix_condition("validate", object_prefix)
        data = [parse_gs_url(url, "data_urls") for url in args.data_urls if url.startswith("gs://")]
        # Data outside Cloud Storage (s3://, https://) cannot be granted by a GCP service account:
        # the job brings its own credentials for it, so nothing is added here.
        super().__init__("spotroute:gcp:JobIdentity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        job = args.job_name

        account = gcp.serviceaccount.Account(
            f"{name}-sa",
            account_id=service_account_id(job),
            display_name=f"spotroute job {job}"[:100],
            description=f"spotroute job {job}: checkpoints under {object_prefix}"[:256],
            # The id is fixed per job, so a replacement must delete the old account first.
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        member = account.email.apply(lambda email: f"serviceAccount:{email}")
        gcp.storage.BucketIAMMember(
            f"{name}-checkpoints",
            bucket=bucket.bucket_name,
            role=CHECKPOINT_ROLE,
            member=member,
            condition=gcp.storage.BucketIAMMemberConditionArgs(
                title=f"spotroute {job} checkpoints"[:100],
                description=bucket.bucket_name.apply(lambda b: f"gs://{b}/{object_prefix}"),
                expression=bucket.bucket_name.apply(lambda b: prefix_condition(b, object_prefix)),
            ),
            opts=child,
        )
        if staging is not None:
            gcp.storage.BucketIAMMember(
                f"{name}-staging",
                bucket=staging.bucket_name,
                role=CHECKPOINT_ROLE,
                member=member,
                condition=gcp.storage.BucketIAMMemberConditionArgs(
                    title=f"spotroute {job} staged data"[:100],
                    description=staging.bucket_name.apply(lambda b: f"gs://{b}/{STAGING_PREFIX}"),
                    expression=staging.bucket_name.apply(
                        lambda b: prefix_condition(b, STAGING_PREFIX)
                    ),
                ),
                opts=child,
            )
        for i, (data_bucket, data_prefix) in enumerate(data):
            gcp.storage.BucketIAMMember(
                f"{name}-data" if i == 0 else f"{name}-data-{i}",
                bucket=data_bucket,
                role=DATA_ROLE,
                member=member,
                condition=gcp.storage.BucketIAMMemberConditionArgs(
                    # The title is part of the binding's identity: one per data prefix.
                    title=(f"spotroute {job} data" + (f" {i}" if i else ""))[:100],
                    description=f"read gs://{data_bucket}/{data_prefix}",
                    expression=prefix_condition(data_bucket, data_prefix),
                )
                if data_prefix
                else None,
                opts=child,
            )

        self.identity_id = account.email
        self.checkpoint_url = bucket.url.apply(lambda url: url + relative_prefix)
        self.register_outputs(
            {"identity_id": self.identity_id, "checkpoint_url": self.checkpoint_url}
        )


class SpotGpuGroup(pulumi.ComponentResource):
    """Instance template + managed instance group of node_count GPU VMs (spot or standard)."""

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
            "gcp.SpotGpuGroup",
            args,
            ((network, Network), (identity, JobIdentity), (bucket, CheckpointBucket)),
            "GCP machine types",
        )
        _check_group_args(args)
        # GCP takes one machine shape per group: the planner's cheapest, listed first.
        machine_type, accelerators = machine_and_accelerators(
            args.instance_types[0], args.gpu, args.gpu_count, args.accelerator_type
        )
        super().__init__("spotroute:gcp:SpotGpuGroup", name, None, opts)
        job = args.job_name
        labels = gcp_labels(job, args.labels)

        secrets = self._secret_store(name, args, identity, labels)
        fabric = group_fabric("gcp", args.instance_types[:1], args.node_count)
        startup_script = pulumi.Output.all(
            identity.checkpoint_url, secrets[0] if secrets else ""
        ).apply(
            lambda values: render_startup_script(
                job,
                values[0],
                args.job,
                node_count=args.node_count,
                notice_source="gcp",
                placement=pulumi.get_stack(),
                secrets=gcp_secret_channel(values[1]) if secrets else None,
                rendezvous=gcp_rendezvous(),
                fabric_env=fabric.nccl_env,
                exit_record=gcp_exit_channel(),
            )
        )
        template = gcp.compute.InstanceTemplate(
            f"{name}-template",
            # Templates are immutable: every change makes a new one next to the old.
            name_prefix=gcp_name(job, "", TEMPLATE_PREFIX_LIMIT),
            description=f"spotroute job {job}: {args.gpu_count}x {args.gpu} ({args.market})",
            machine_type=machine_type,
            guest_accelerators=accelerators or None,
            disks=[
                gcp.compute.InstanceTemplateDiskArgs(
                    boot=True,
                    auto_delete=True,
                    source_image=GPU_IMAGE,
                    disk_size_gb=args.boot_disk_gb,
                    disk_type=BOOT_DISK_TYPE,
                    labels=labels,
                )
            ],
            # No access config: no external IP. Outbound goes through the network's Cloud NAT.
            network_interfaces=[
                gcp.compute.InstanceTemplateNetworkInterfaceArgs(
                    subnetwork=network.subnet_id,
                    # A3 machine types run only on gVNIC (components/fabric.csv); other types
                    # keep the default (VIRTIO_NET).
                    nic_type=fabric_for("gcp", machine_type).nic_type or None,
                )
            ],
            service_account=gcp.compute.InstanceTemplateServiceAccountArgs(
                email=identity.identity_id, scopes=SCOPES
            ),
            scheduling=_scheduling(args.market),
            # Secure Boot stays off: the image's NVIDIA kernel modules are not signed for it.
            shielded_instance_config=gcp.compute.InstanceTemplateShieldedInstanceConfigArgs(
                enable_secure_boot=False, enable_vtpm=True, enable_integrity_monitoring=True
            ),
            metadata={
                "startup-script": startup_script,
                "block-project-ssh-keys": "TRUE",
                # GCP spot VMs take no bid; recorded so the policy pack can check the budget.
                "spotroute-max-price": f"{args.max_price_per_hour:g}",
                "enable-oslogin": "TRUE",
            },
            labels=labels,
            tags=[node_tag(job)],
            opts=pulumi.ResourceOptions(parent=self),
        )

        group_options = pulumi.ResourceOptions(
            parent=self,
            # Nodes start the job at boot: their service account, grants and NAT must exist first.
            depends_on=[identity, network, *(secrets[1] if secrets else [])],
            # A new template replaces the whole group (like AWS's one-shot fleet): a multi-node job
            # never runs half old, half new, and the group's fixed name is freed first.
            replace_on_changes=["versions"],
            delete_before_replace=True,
        )
        versions = [gcp.compute.InstanceGroupManagerVersionArgs(instance_template=template.id)]
        # A node that stops (job finished, or preempted) stays stopped: repairing it would rerun a
        # finished job forever. The router restarts or moves the job.
        on_failure = "DO_NOTHING"
        if args.zone:
            group: gcp.compute.InstanceGroupManager | gcp.compute.RegionInstanceGroupManager = (
                gcp.compute.InstanceGroupManager(
                    f"{name}-group",
                    name=gcp_name(job, "group"),
                    description=f"spotroute job {job}",
                    zone=args.zone,
                    base_instance_name=gcp_name(job, "node", BASE_INSTANCE_NAME_LIMIT),
                    versions=versions,
                    target_size=args.node_count,
                    instance_lifecycle_policy=gcp.compute.InstanceGroupManagerInstanceLifecyclePolicyArgs(
                        default_action_on_failure=on_failure
                    ),
                    update_policy=gcp.compute.InstanceGroupManagerUpdatePolicyArgs(
                        type="OPPORTUNISTIC", minimal_action="REPLACE"
                    ),
                    # Spot capacity may take hours; `pulumi up` returns and the router watches.
                    wait_for_instances=False,
                    opts=group_options,
                )
            )
        else:
            group = gcp.compute.RegionInstanceGroupManager(
                f"{name}-group",
                name=gcp_name(job, "group"),
                description=f"spotroute job {job}",
                region=args.region,
                # All nodes in whichever zone has the capacity: NCCL across zones is slow and
                # cross-zone traffic is billed.
                distribution_policy_target_shape="ANY_SINGLE_ZONE",
                base_instance_name=gcp_name(job, "node", BASE_INSTANCE_NAME_LIMIT),
                versions=[
                    gcp.compute.RegionInstanceGroupManagerVersionArgs(instance_template=template.id)
                ],
                target_size=args.node_count,
                instance_lifecycle_policy=gcp.compute.RegionInstanceGroupManagerInstanceLifecyclePolicyArgs(
                    default_action_on_failure=on_failure
                ),
                update_policy=gcp.compute.RegionInstanceGroupManagerUpdatePolicyArgs(
                    type="OPPORTUNISTIC",
                    minimal_action="REPLACE",
                    # ANY_SINGLE_ZONE needs proactive redistribution off.
                    instance_redistribution_type="NONE",
                ),
                wait_for_instances=False,
                opts=group_options,
            )

        self.group_id = group.id
        self.checkpoint_url = identity.checkpoint_url
        self.register_outputs({"group_id": group.id, "checkpoint_url": self.checkpoint_url})

    def _secret_store(
        self, name: str, args: SpotGpuGroupArgs, identity: JobIdentity, labels: dict[str, str]
    ) -> tuple[pulumi.Output[str], list[pulumi.Resource]] | None:
        """The job's secret env in Secret Manager (kept in the job's region), readable by the
        job's service account alone; returns (the version's resource name, what nodes need)."""
        if not args.job.secret_names:
            return None
        child = pulumi.ResourceOptions(parent=self)
        secret = gcp.secretmanager.Secret(
            f"{name}-secret-env",
            secret_id=gcp_name(pulumi.get_stack(), "secret-env", SECRET_ID_LIMIT),
            replication=gcp.secretmanager.SecretReplicationArgs(
                user_managed=gcp.secretmanager.SecretReplicationUserManagedArgs(
                    replicas=[
                        gcp.secretmanager.SecretReplicationUserManagedReplicaArgs(
                            location=args.region
                        )
                    ]
                )
            ),
            labels=labels,
            opts=child,
        )
        version = gcp.secretmanager.SecretVersion(
            f"{name}-secret-env-version",
            secret=secret.id,
            secret_data=secret_env_json(args.job.secret_env),
            opts=child,
        )
        grant = gcp.secretmanager.SecretIamMember(
            f"{name}-secret-read",
            secret_id=secret.id,
            role=SECRET_ROLE,
            member=identity.identity_id.apply(lambda email: f"serviceAccount:{email}"),
            opts=child,
        )
        return version.name, [version, grant]


def _scheduling(market: str) -> gcp.compute.InstanceTemplateSchedulingArgs:
    """Spot VMs stop when preempted; both markets stop for host maintenance (GPUs can't migrate)."""
    if market == "spot":
        return gcp.compute.InstanceTemplateSchedulingArgs(
            provisioning_model="SPOT",
            preemptible=True,
            automatic_restart=False,
            on_host_maintenance="TERMINATE",
            # STOP keeps the boot disk (and pulled image) so a restart resumes quickly.
            instance_termination_action="STOP",
        )
    return gcp.compute.InstanceTemplateSchedulingArgs(
        provisioning_model="STANDARD",
        preemptible=False,
        # After host maintenance the VM boots again and the start-up script resumes the job.
        automatic_restart=True,
        on_host_maintenance="TERMINATE",
    )


def _check_group_args(args: SpotGpuGroupArgs) -> None:
    if args.zone and not args.zone.startswith(f"{args.region}-"):
        raise ValueError(
            f"zone: {args.zone!r} is not in region {args.region!r} — use e.g. {args.region}-a"
        )
    # Renders (and so validates env names, reserved keys, empty commands) before registering.
    render_startup_script(args.job_name, "gs://validate/", args.job, secrets=NO_SECRET_STORE_YET)


COMPONENTS = CloudComponents(
    "gcp", make_provider, Network, CheckpointBucket, JobIdentity, SpotGpuGroup
)
