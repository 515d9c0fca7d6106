"""GCP components under Pulumi mocks: what a `pulumi up` of a GCP placement would create."""

from __future__ import annotations

import re
from typing import Any

import pytest
from harness import CapturedStack, run_components, run_program

from components import gcp as gcp_components
from components import gcp_names, gcp_network
from components.args import (
    CheckpointBucketArgs,
    JobCommand,
    JobIdentityArgs,
    NetworkArgs,
    ProviderArgs,
    SpotGpuGroupArgs,
)

TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
ZONAL_GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
REGIONAL_GROUP = "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager"
FIREWALL = "gcp:compute/firewall:Firewall"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
ACCOUNT = "gcp:serviceaccount/account:Account"
PROJECT = "acme-ml"
EXISTING_BUCKET_URL = "gs://acme-checkpoints/teams/ml/"
PRIMITIVE_ROLES = {"roles/owner", "roles/editor", "roles/viewer"}
# RFC 1035 names every project-scoped GCP resource must have.
RFC1035 = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
SERVICE_ACCOUNT_ID = re.compile(r"[a-z][-a-z0-9]{4,28}[a-z0-9]")
GCP_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")


def _autonamed_bucket(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    bucket = inputs.get("name") or f"{name}-mock001"
    return {"name": bucket, "url": f"gs://{bucket}"}


def _service_account(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    email = f"{inputs['accountId']}@{PROJECT}.iam.gserviceaccount.com"
    return {"email": email, "member": f"serviceAccount:{email}"}


# Computed outputs the GCP components read: the autonamed bucket's name, the account's email.
GCP_STATES = {BUCKET: _autonamed_bucket, ACCOUNT: _service_account}

# pulumi_gcp warns about its own deprecated aliases when its modules load; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")


@pytest.fixture
def gcp_config(aws_config: dict[str, Any]) -> dict[str, Any]:
    """A complete, valid `spotroute:*` config for a GCP spot placement (keys without namespace):
    conftest's AWS one with GCP's region, zone, machine type, data, labels and price source."""
    return {
        **aws_config,
        "cloud": "gcp",
        "region": "us-central1",
        "zone": "us-central1-a",
        "instanceTypes": ["a2-ultragpu-8g"],
        "dataUrls": ["gs://acme-datasets/llm/"],
        "labels": {"team": "ml-platform", "cost-center": "4711", "owner": "Jane.Doe@ACME"},
        "priceSource": "gcp-api",
    }


def placement(config: dict[str, Any], **changes: Any) -> CapturedStack:
    return run_program({**config, **changes}, states=GCP_STATES)


def components(program: Any) -> CapturedStack:
    return run_components(program, states=GCP_STATES)


def startup_script(stack: CapturedStack) -> str:
    script: str = stack.one(TEMPLATE).inputs["metadata"]["startup-script"]
    return script


def members(stack: CapturedStack) -> list[dict[str, Any]]:
    return [r.inputs for r in stack.of_type(BUCKET_MEMBER)]


def group_args(**changes: Any) -> SpotGpuGroupArgs:
    values: dict[str, Any] = {
        "job_name": "llm",
        "region": "us-central1",
        "zone": "us-central1-a",
        "instance_types": ("n1-standard-8+T4:1",),
        "market": "spot",
        "max_price_per_hour": 1.0,
        "node_count": 1,
        "gpu": "T4",
        "gpu_count": 1,
        "accelerator_type": "nvidia-tesla-t4",
        "boot_disk_gb": 100,
        "job": JobCommand(image="ghcr.io/acme/t:1", command=("python", "t.py")),
    }
    return SpotGpuGroupArgs(**{**values, **changes})


def build_group(args: SpotGpuGroupArgs) -> None:
    """All four components for `args`, as the program would build them."""
    network = gcp_network.Network(
        "llm", NetworkArgs(job_name=args.job_name, region=args.region, zone=args.zone)
    )
    bucket = gcp_components.CheckpointBucket(
        "llm", CheckpointBucketArgs(job_name=args.job_name, region=args.region)
    )
    identity = gcp_components.JobIdentity(
        "llm",
        JobIdentityArgs(job_name=args.job_name, region=args.region, checkpoint_prefix="llm/"),
        bucket,
    )
    gcp_components.SpotGpuGroup("llm", args, network, identity, bucket)


# --- market -----------------------------------------------------------------------------------


@pytest.mark.parametrize("existing_url", ["", EXISTING_BUCKET_URL])
def test_spot_placement_asks_for_spot_vms_that_stop_when_preempted(
    gcp_config: dict[str, Any], existing_url: str
) -> None:
    stack = placement(gcp_config, market="spot", checkpointUrl=existing_url)
    scheduling = stack.one(TEMPLATE).inputs["scheduling"]

    assert scheduling["provisioningModel"] == "SPOT"
    assert scheduling["preemptible"] is True
    assert scheduling["automaticRestart"] is False
    assert scheduling["onHostMaintenance"] == "TERMINATE"
    assert scheduling["instanceTerminationAction"] == "STOP"
    assert "maxRunDuration" not in scheduling
    assert stack.outputs["market"] == "spot"


@pytest.mark.parametrize("existing_url", ["", EXISTING_BUCKET_URL])
def test_on_demand_placement_has_no_spot_scheduling_anywhere(
    gcp_config: dict[str, Any], existing_url: str
) -> None:
    stack = placement(gcp_config, market="on-demand", checkpointUrl=existing_url)
    scheduling = stack.one(TEMPLATE).inputs["scheduling"]

    assert scheduling["provisioningModel"] == "STANDARD"
    assert scheduling["preemptible"] is False
    assert scheduling["onHostMaintenance"] == "TERMINATE"  # GPUs cannot live-migrate
    assert "instanceTerminationAction" not in scheduling
    assert "maxRunDuration" not in scheduling


def test_zonal_group_runs_node_count_vms_of_the_template_and_never_repairs_them(
    gcp_config: dict[str, Any],
) -> None:
    stack = placement(gcp_config)
    group = stack.one(ZONAL_GROUP)

    assert group.inputs["zone"] == "us-central1-a"
    assert group.inputs["targetSize"] == 2
    assert [v["instanceTemplate"] for v in group.inputs["versions"]] == [
        f"{stack.one(TEMPLATE).name}-id"
    ]
    # A finished job powers its node off; repairing it would start the job again.
    assert group.inputs["instanceLifecyclePolicy"]["defaultActionOnFailure"] == "DO_NOTHING"
    assert group.inputs["waitForInstances"] is False
    assert RFC1035.fullmatch(group.inputs["baseInstanceName"])
    assert stack.outputs["groupId"] == f"{group.name}-id"
    assert not stack.of_type(REGIONAL_GROUP)


def test_placement_without_zone_gets_a_regional_group_kept_in_one_zone(
    gcp_config: dict[str, Any],
) -> None:
    stack = placement(gcp_config, zone="")
    group = stack.one(REGIONAL_GROUP).inputs

    assert group["region"] == "us-central1"
    assert group["distributionPolicyTargetShape"] == "ANY_SINGLE_ZONE"
    assert group["updatePolicy"]["instanceRedistributionType"] == "NONE"
    assert group["targetSize"] == 2
    assert group["instanceLifecyclePolicy"]["defaultActionOnFailure"] == "DO_NOTHING"
    assert not stack.of_type(ZONAL_GROUP)


# --- network ----------------------------------------------------------------------------------


def test_firewall_admits_only_the_jobs_own_nodes_by_default(gcp_config: dict[str, Any]) -> None:
    stack = placement(gcp_config, nodeCount=4)
    rules = {r.name: r.inputs for r in stack.of_type(FIREWALL)}
    tag = stack.one(TEMPLATE).inputs["tags"]

    deny = rules["llm-finetune-deny-ingress"]
    assert deny["direction"] == "INGRESS"
    assert deny["denies"] == [{"protocol": "all"}]
    network = stack.one("gcp:compute/network:Network")
    assert deny["network"] == f"{network.name}-id"
    internal = rules["llm-finetune-internal"]
    assert internal["allows"] == [{"protocol": "all"}]
    assert internal["sourceTags"] == internal["targetTags"] == tag
    assert tag == ["spotroute-llm-finetune-node"]
    assert "sourceRanges" not in internal
    assert internal["priority"] < deny["priority"]
    assert set(rules) == {"llm-finetune-deny-ingress", "llm-finetune-internal"}


def test_remote_access_opens_ssh_to_the_nodes_from_iap_only(gcp_config: dict[str, Any]) -> None:
    stack = placement(gcp_config, remoteAccess=True)
    iap = stack.named("llm-finetune-iap-ssh").inputs

    assert iap["sourceRanges"] == ["35.235.240.0/20"]
    assert iap["allows"] == [{"protocol": "tcp", "ports": ["22"]}]
    assert iap["targetTags"] == ["spotroute-llm-finetune-node"]
    assert stack.one(TEMPLATE).inputs["metadata"]["enable-oslogin"] == "TRUE"


def test_private_nodes_reach_storage_directly_and_the_internet_through_nat(
    gcp_config: dict[str, Any],
) -> None:
    stack = placement(gcp_config)
    network = stack.one("gcp:compute/network:Network").inputs
    subnet = stack.one("gcp:compute/subnetwork:Subnetwork")
    nat = stack.one("gcp:compute/routerNat:RouterNat").inputs

    assert network["autoCreateSubnetworks"] is False
    assert subnet.inputs["region"] == "us-central1"
    assert subnet.inputs["privateIpGoogleAccess"] is True
    assert nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
    assert [s["name"] for s in nat["subnetworks"]] == [f"{subnet.name}-id"]
    assert nat["router"] == stack.one("gcp:compute/router:Router").inputs["name"]


def test_nodes_have_no_external_ip(gcp_config: dict[str, Any]) -> None:
    stack = placement(gcp_config)
    (interface,) = stack.one(TEMPLATE).inputs["networkInterfaces"]

    assert "accessConfigs" not in interface or interface["accessConfigs"] == []
    assert "ipv6AccessConfigs" not in interface
    assert interface["subnetwork"] == f"{stack.one('gcp:compute/subnetwork:Subnetwork').name}-id"


# --- checkpoint bucket ------------------------------------------------------------------------


def test_created_bucket_is_private_uniform_versioned_and_expires_old_versions(
    gcp_config: dict[str, Any],
) -> None:
    bucket = placement(gcp_config).one(BUCKET).inputs

    assert bucket["location"] == "US-CENTRAL1"
    assert bucket["uniformBucketLevelAccess"] is True
    assert bucket["publicAccessPrevention"] == "enforced"
    assert bucket["versioning"] == {"enabled": True}
    assert bucket["forceDestroy"] is False
    expire = [r for r in bucket["lifecycleRules"] if r["action"]["type"] == "Delete"]
    assert [r["condition"] for r in expire] == [
        {"daysSinceNoncurrentTime": 7, "withState": "ARCHIVED"}
    ]
    # Bucket names are global: spotroute-<job>-ckpt-<8 hex of organization, project, stack>,
    # under the deployer's spotroute-... grants condition.
    assert re.fullmatch(r"spotroute-llm-finetune-ckpt-[0-9a-f]{8}", bucket["name"])


def test_created_bucket_checkpoint_url_is_the_job_prefix_of_the_new_bucket(
    gcp_config: dict[str, Any],
) -> None:
    stack = placement(gcp_config)
    bucket_name = stack.one(BUCKET).inputs["name"]

    assert stack.outputs["checkpointUrl"] == f"gs://{bucket_name}/llm-finetune/"


def test_existing_bucket_is_reused_and_nothing_is_created_in_storage(
    gcp_config: dict[str, Any],
) -> None:
    stack = placement(gcp_config, checkpointUrl=EXISTING_BUCKET_URL)

    assert not stack.of_type(BUCKET)
    assert stack.outputs["checkpointUrl"] == "gs://acme-checkpoints/teams/ml/llm-finetune/"


def test_existing_bucket_url_outside_cloud_storage_is_refused_at_construction() -> None:
    args = CheckpointBucketArgs(
        job_name="llm", region="us-central1", existing_url="s3://somewhere/else/"
    )

    with pytest.raises(ValueError, match="existing_url"):
        components(lambda: gcp_components.CheckpointBucket("llm", args))


def test_job_name_too_long_for_a_bucket_name_is_refused_unless_a_bucket_is_given() -> None:
    long_name = "a" * 51

    with pytest.raises(ValueError, match="checkpointUrl"):
        components(
            lambda: gcp_components.CheckpointBucket(
                long_name, CheckpointBucketArgs(job_name=long_name, region="us-central1")
            )
        )
    stack = components(
        lambda: gcp_components.CheckpointBucket(
            long_name,
            CheckpointBucketArgs(
                job_name=long_name, region="us-central1", existing_url=EXISTING_BUCKET_URL
            ),
        )
    )
    assert not stack.of_type(BUCKET)


# --- identity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("existing_url", ["", EXISTING_BUCKET_URL])
def test_job_account_writes_only_under_its_checkpoint_prefix(
    gcp_config: dict[str, Any], existing_url: str
) -> None:
    stack = placement(gcp_config, checkpointUrl=existing_url)
    bucket, _, prefix = stack.outputs["checkpointUrl"].removeprefix("gs://").partition("/")
    (grant,) = [m for m in members(stack) if m["bucket"] == bucket]

    assert grant["role"] == "roles/storage.objectUser"
    expression = grant["condition"]["expression"]
    assert f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}")' in expression
    assert (
        f'api.getAttribute("storage.googleapis.com/objectListPrefix", "").startsWith("{prefix}")'
        in expression
    )
    assert grant["member"] == f"serviceAccount:{stack.outputs['identity']}"


def test_job_account_gets_no_primitive_and_no_project_level_roles(
    gcp_config: dict[str, Any],
) -> None:
    stack = placement(gcp_config)

    assert {m["role"] for m in members(stack)} == {
        "roles/storage.objectUser",
        "roles/storage.objectViewer",
    }
    assert not {m["role"] for m in members(stack)} & PRIMITIVE_ROLES
    iam_types = {r.type for r in stack.custom_resources() if "iam" in r.type.lower()}
    assert iam_types == {BUCKET_MEMBER}


def test_job_account_reads_only_its_data_prefix(gcp_config: dict[str, Any]) -> None:
    stack = placement(gcp_config)
    (data,) = [m for m in members(stack) if m["bucket"] == "acme-datasets"]

    assert data["role"] == "roles/storage.objectViewer"
    assert data["condition"]["expression"].startswith(
        'resource.name.startsWith("projects/_/buckets/acme-datasets/objects/llm/")'
    )


def test_data_bucket_without_prefix_is_readable_whole(gcp_config: dict[str, Any]) -> None:
    stack = placement(gcp_config, dataUrls=["gs://acme-datasets"])
    (data,) = [m for m in members(stack) if m["bucket"] == "acme-datasets"]

    assert data["role"] == "roles/storage.objectViewer"
    assert "condition" not in data


def test_data_outside_cloud_storage_adds_no_grant(gcp_config: dict[str, Any]) -> None:
    stack = placement(gcp_config, dataUrls=["s3://acme-datasets/llm/"])

    assert [m["role"] for m in members(stack)] == ["roles/storage.objectUser"]


def test_nodes_run_as_the_job_account_with_the_cloud_platform_scope(
    gcp_config: dict[str, Any],
) -> None:
    stack = placement(gcp_config)
    account = stack.one(ACCOUNT).inputs["accountId"]
    service_account = stack.one(TEMPLATE).inputs["serviceAccount"]

    assert stack.outputs["identity"] == f"{account}@{PROJECT}.iam.gserviceaccount.com"
    assert service_account["email"] == stack.outputs["identity"]
    assert service_account["scopes"] == ["https://www.googleapis.com/auth/cloud-platform"]


@pytest.mark.parametrize(
    "job_name",
    ["a", "ab", "llm-finetune", "x" * 27, "x" * 28, "a" * 63, "llm--x-", "Team_Run.7", "7up"],
)
def test_service_account_id_is_valid_for_any_job_name(job_name: str) -> None:
    account = gcp_names.service_account_id(job_name)

    assert SERVICE_ACCOUNT_ID.fullmatch(account), account


def test_long_job_names_get_distinct_service_account_ids() -> None:
    base = "llm-finetune-experiment-number-"

    assert gcp_names.service_account_id(base + "1") != gcp_names.service_account_id(base + "2")
    assert gcp_names.service_account_id("llm") == "sr-llm"


def test_identity_refuses_a_prefix_that_would_grant_the_whole_bucket() -> None:
    def build() -> None:
        bucket = gcp_components.CheckpointBucket(
            "llm", CheckpointBucketArgs(job_name="llm", region="us-central1")
        )
        gcp_components.JobIdentity(
            "llm",
            JobIdentityArgs(job_name="llm", region="us-central1", checkpoint_prefix="/"),
            bucket,
        )

    with pytest.raises(ValueError, match="checkpoint_prefix"):
        components(build)


# --- nodes ------------------------------------------------------------------------------------


def test_startup_script_runs_the_job_container_with_job_id_and_checkpoint_url(
    gcp_config: dict[str, Any],
) -> None:
    stack = placement(gcp_config, checkpointUrl=EXISTING_BUCKET_URL)
    script = startup_script(stack)

    assert "export SPOTROUTE_JOB_ID=llm-finetune\n" in script
    assert (
        "export SPOTROUTE_CHECKPOINT_URL=gs://acme-checkpoints/teams/ml/llm-finetune/\n" in script
    )
    assert "export EPOCHS=3\n" in script
    assert "ghcr.io/acme/trainer:1.4 python train.py --resume" in script


def test_nodes_accept_only_os_login_and_boot_the_gpu_image(gcp_config: dict[str, Any]) -> None:
    template = placement(gcp_config).one(TEMPLATE).inputs

    assert template["metadata"]["block-project-ssh-keys"] == "TRUE"
    assert template["metadata"]["enable-oslogin"] == "TRUE"
    (disk,) = template["disks"]
    assert disk["boot"] is True and disk["autoDelete"] is True
    assert disk["sourceImage"].startswith("projects/deeplearning-platform-release/")
    assert "/family/" in disk["sourceImage"]
    assert (disk["diskSizeGb"], disk["diskType"]) == (200, "pd-balanced")
    shielded = template["shieldedInstanceConfig"]
    assert shielded["enableVtpm"] is True and shielded["enableIntegrityMonitoring"] is True


def test_n1_machine_gets_its_gpus_attached_as_guest_accelerators(
    gcp_config: dict[str, Any],
) -> None:
    stack = placement(
        gcp_config,
        instanceTypes=["n1-standard-8+T4:1"],
        gpu="T4",
        gpuCount=1,
        nodeCount=1,
        gcpAcceleratorType="nvidia-tesla-t4",
    )
    template = stack.one(TEMPLATE).inputs

    assert template["machineType"] == "n1-standard-8"
    assert template["guestAccelerators"] == [{"type": "nvidia-tesla-t4", "count": 1}]


def test_n1_gpus_without_the_routers_accelerator_type_are_refused() -> None:
    # The router writes spotroute:gcpAcceleratorType from router/data/instances.csv; without it
    # the component cannot name the GPU to GCP and says where the name comes from.
    with pytest.raises(ValueError, match=r"no V100 GPUs to N1 machines in router/data"):
        gcp_names.machine_and_accelerators("n1-standard-8+V100:1", "V100", 1, "")


def test_accelerator_optimized_machine_brings_its_own_gpus(gcp_config: dict[str, Any]) -> None:
    template = placement(gcp_config, instanceTypes=["a2-ultragpu-8g"]).one(TEMPLATE).inputs

    assert template["machineType"] == "a2-ultragpu-8g"
    assert "guestAccelerators" not in template or template["guestAccelerators"] == []


def test_group_uses_the_first_of_the_equivalent_machine_types(gcp_config: dict[str, Any]) -> None:
    stack = placement(gcp_config, instanceTypes=["a2-ultragpu-8g", "a3-highgpu-8g"])

    assert stack.one(TEMPLATE).inputs["machineType"] == "a2-ultragpu-8g"


@pytest.mark.parametrize(
    ("instance_type", "gpu", "count", "accelerator"),
    [
        ("n1-standard-8", "T4", 1, "nvidia-tesla-t4"),  # N1 has no GPUs of its own
        ("n1-standard-8+T4:2", "T4", 1, "nvidia-tesla-t4"),  # names 2 GPUs, the group asks for 1
        # H100 does not attach to N1: the catalog has no accelerator type, the router writes "".
        ("n1-standard-8+H100-80GB:1", "H100-80GB", 1, ""),
        ("g2-standard-8+L4:1", "L4", 1, ""),  # only N1 attaches GPUs
    ],
)
def test_instance_type_that_cannot_carry_the_gpus_fails_at_construction(
    instance_type: str, gpu: str, count: int, accelerator: str
) -> None:
    args = group_args(
        instance_types=(instance_type,), gpu=gpu, gpu_count=count, accelerator_type=accelerator
    )

    with pytest.raises(ValueError, match="instance_types"):
        components(lambda: build_group(args))


# --- labels and names -------------------------------------------------------------------------


def test_labels_are_sanitized_to_gcp_rules() -> None:
    labels = gcp_names.gcp_labels(
        "llm", {"team": "ML Platform", "owner": "Jane.Doe@ACME", "note": "x" * 80}
    )

    assert labels["team"] == "ml_platform"
    assert labels["owner"] == "jane_doe_acme"
    assert labels["note"] == "x" * 63
    assert labels["spotroute-job"] == "llm" and labels["managed-by"] == "spotroute"
    assert all(GCP_LABEL_VALUE.fullmatch(v) for v in labels.values())


def test_template_disk_and_bucket_carry_the_sanitized_labels(gcp_config: dict[str, Any]) -> None:
    stack = placement(gcp_config)
    wanted = {
        "spotroute-job": "llm-finetune",
        "team": "ml-platform",
        "managed-by": "spotroute",
        "cost-center": "4711",
        "owner": "jane_doe_acme",
    }
    template = stack.one(TEMPLATE).inputs

    assert wanted.items() <= template["labels"].items()
    assert wanted.items() <= template["disks"][0]["labels"].items()
    assert wanted.items() <= stack.one(BUCKET).inputs["labels"].items()


@pytest.mark.parametrize("job_name", ["llm", "a" * 63, "Team_Run.7", "7up"])
def test_resource_names_are_valid_rfc1035_names(job_name: str) -> None:
    for part in ("vpc", "subnet", "deny-ingress", "group"):
        assert RFC1035.fullmatch(gcp_names.gcp_name(job_name, part)), (job_name, part)


def test_every_project_scoped_name_starts_with_spotroute(gcp_config: dict[str, Any]) -> None:
    # The deployer may edit or delete firewalls, VMs, secrets and buckets named spotroute-…
    # only (bootstrap/gcp_permissions.py gcp_named_condition): every name must carry the prefix.
    stack = placement(gcp_config, remoteAccess=True)
    named = {
        r.name: str(r.inputs.get("name") or r.inputs.get("namePrefix") or "")
        for r in stack.custom_resources()
        if r.inputs.get("name") or r.inputs.get("namePrefix")
    }

    assert len(named) >= 10, named
    assert all(name.startswith("spotroute-") for name in named.values()), named
    assert stack.one(TEMPLATE).inputs["tags"] == ["spotroute-llm-finetune-node"]
    group = stack.one("gcp:compute/instanceGroupManager:InstanceGroupManager").inputs
    assert group["baseInstanceName"] == "spotroute-llm-finetune-node"


def test_long_job_names_get_distinct_resource_names() -> None:
    first, second = ("x" * 62) + "1", ("x" * 62) + "2"

    assert gcp_names.gcp_name(first, "vpc") != gcp_names.gcp_name(second, "vpc")
    assert len(gcp_names.gcp_name(first, "deny-ingress")) <= 63


# --- every resource ---------------------------------------------------------------------------


def test_physical_names_are_rfc1035_and_nothing_is_looked_up_at_deploy_time(
    gcp_config: dict[str, Any],
) -> None:
    # Parent, name prefix and provider of every resource: test_component_contract.py.
    stack = placement(gcp_config, remoteAccess=True)

    assert stack.one("pulumi:providers:gcp").inputs["region"] == "us-central1"
    for resource in stack.custom_resources():
        if "name" in resource.inputs and resource.type != BUCKET_MEMBER:
            assert RFC1035.fullmatch(resource.inputs["name"]), resource.name
    assert not stack.invokes  # the image is a family path: nothing to look up at deploy time
    prefix = stack.one(TEMPLATE).inputs["namePrefix"]
    assert prefix.endswith("-") and len(prefix) <= 37


def test_provider_takes_the_project_only_when_given() -> None:
    def build() -> None:
        gcp_components.make_provider(
            "with-project", ProviderArgs(region="europe-west4", gcp_project=PROJECT)
        )
        gcp_components.make_provider("ambient", ProviderArgs(region="europe-west4"))

    stack = components(build)

    assert stack.named("with-project").inputs["project"] == PROJECT
    assert "project" not in stack.named("ambient").inputs
    assert stack.named("ambient").inputs["region"] == "europe-west4"


# --- construction-time errors -----------------------------------------------------------------


def test_component_given_the_wrong_args_class_fails_before_creating_anything() -> None:
    args = CheckpointBucketArgs(job_name="llm", region="us-central1")

    with pytest.raises(TypeError, match="NetworkArgs"):
        components(lambda: gcp_network.Network("llm", args))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"market": "reserved"}, "market"),
        ({"zone": "europe-west4-a"}, "zone"),
        ({"node_count": 0}, "node_count"),
    ],
)
def test_group_with_bad_args_fails_at_construction(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        components(lambda: build_group(group_args(**changes)))


def test_group_builds_on_its_own_without_a_program() -> None:
    stack = components(lambda: build_group(group_args()))

    group = stack.one(ZONAL_GROUP)
    assert group.parent_type == "spotroute:gcp:SpotGpuGroup"
    assert group.inputs["targetSize"] == 1
    assert stack.one(TEMPLATE).inputs["labels"]["spotroute-job"] == "llm"


def test_program_pins_the_gcp_provider_to_the_configured_project() -> None:
    config = {
        "jobName": "gjob",
        "cloud": "gcp",
        "region": "us-central1",
        "zone": "us-central1-a",
        "instanceTypes": ["a2-ultragpu-8g"],
        "market": "on-demand",
        "maxPrice": 45.0,
        "gpu": "A100-80GB",
        "gpuCount": 8,
        "gcpProject": "acme-ml",
        "job": {"image": "", "command": ["python", "train.py"], "env": {}},
        "labels": {"team": "ml"},
    }
    provider = run_program(config).one("pulumi:providers:gcp")
    assert provider.inputs["project"] == "acme-ml"
    assert provider.inputs["region"] == "us-central1"


def test_nodes_write_their_exit_record_with_their_own_identity(
    gcp_config: dict[str, Any],
) -> None:
    # How route watch tells a crash from a preemption (components/node_exit.py).
    from components.node_exit import gcp_exit_channel

    script = startup_script(placement(gcp_config))
    assert gcp_exit_channel().command in script
    assert 'spotroute_exit_record "$code"' in script and "export SPOTROUTE_NODE_DIR=" in script


def test_nodes_watch_gcp_preemption_notices(gcp_config: dict[str, Any]) -> None:
    # router.checkpoint reads SPOTROUTE_NOTICE_SOURCE to know which metadata service to poll.
    assert "export SPOTROUTE_NOTICE_SOURCE=gcp" in startup_script(placement(gcp_config))


def test_nodes_know_their_placement_for_the_hand_over(
    gcp_config: dict[str, Any],
) -> None:
    # The job answers only save requests addressed to its stack (docs/migration.md).
    script = startup_script(placement({**gcp_config, "jobName": "moved-job-2"}))
    assert "export SPOTROUTE_PLACEMENT_ID=moved-job-2" in script
