"""The GCP deployer: the workload identity pool, its providers and the custom role."""

from __future__ import annotations

from typing import Any

import pytest
from harness import ACCOUNT_ID, StateFiller, run_program
from test_bootstrap import (
    FEDERATION_AUDIENCE,
    GCP_ACCOUNT,
    GCP_BUCKET_MEMBER,
    GCP_CUSTOM_ROLE,
    GCP_LIST_ACCOUNTS,
    GCP_PROJECT_MEMBER,
    GCP_PROVIDER,
    GCP_SA_MEMBER,
    GITHUB,
    GITLAB,
    PRIMITIVE_GCP_ROLES,
    PRINCIPAL_ID,
    PROJECT_ID,
    PROJECT_NUMBER,
    TENANT,
    args,
    deploy,
    pool,
    sa_members,
)

from components.bootstrap import (
    GCP_DEPLOYER_PERMISSIONS,
    BootstrapConfigError,
)
from components.bootstrap.gcp_permissions import (
    GCP_GRANT_PERMISSIONS,
    GCP_JOB_BUCKET_MARKER,
    GCP_JOB_BUCKET_PREFIX,
    GCP_NAME_CONDITION_TYPES,
    GCP_NAMED_PERMISSIONS,
)

# Everything the deployer holds: project-wide, grants and name-conditioned.
ALL_GRANTED = {*GCP_DEPLOYER_PERMISSIONS, *GCP_GRANT_PERMISSIONS, *GCP_NAMED_PERMISSIONS}

# --- GCP ------------------------------------------------------------------------------------------

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")


@pytest.mark.parametrize("home", ["oidc:github-main", "aws", "azure", "gcp"])
def test_gcp_deployer_holds_one_custom_role_and_no_primitive_role(home: str) -> None:
    stack = deploy(
        args(
            home=home,
            aws_outbound_federation=home == "aws",
            azure_federation_audience=FEDERATION_AUDIENCE,
        )
    )

    roles = {r.inputs["roleId"]: r.inputs for r in stack.of_type(GCP_CUSTOM_ROLE)}
    assert roles["spotrouteDeployer"]["permissions"] == list(GCP_DEPLOYER_PERMISSIONS)
    assert roles["spotrouteDeployerGrants"]["permissions"] == list(GCP_GRANT_PERMISSIONS)
    assert roles["spotrouteDeployerNamed"]["permissions"] == list(GCP_NAMED_PERMISSIONS)
    for role in roles.values():
        assert not [p for p in role["permissions"] if "*" in p]
        assert role["stage"] == "GA"
    bindings = {b.inputs["role"]: b.inputs for b in stack.of_type(GCP_PROJECT_MEMBER)}
    assert set(bindings) == {
        f"projects/{PROJECT_ID}/roles/spotrouteDeployer",
        f"projects/{PROJECT_ID}/roles/spotrouteDeployerGrants",
        f"projects/{PROJECT_ID}/roles/spotrouteDeployerNamed",
    }
    for binding in bindings.values():
        assert (
            binding["member"]
            == f"serviceAccount:spotroute-deployer@{PROJECT_ID}.iam.gserviceaccount.com"
        )
    granted = {
        r.inputs["role"]
        for r in stack.resources
        if "role" in r.inputs and r.type.startswith("gcp:")
    }
    assert not granted & PRIMITIVE_GCP_ROLES
    assert not [r for r in granted if r.startswith("roles/") and r.endswith(("Admin", "admin"))]


@pytest.mark.parametrize("home", ["oidc:github-main", "aws", "azure"])
def test_every_gcp_provider_admits_exactly_one_identity(home: str) -> None:
    stack = deploy(
        args(
            home=home,
            oidc_issuers=(GITHUB, GITLAB),
            aws_outbound_federation=home == "aws",
            azure_federation_audience=FEDERATION_AUDIENCE,
        )
    )

    providers = stack.of_type(GCP_PROVIDER)
    assert providers
    for provider in providers:
        condition = provider.inputs["attributeCondition"]
        assert condition.count("==") == 1 and "||" not in condition, condition
        assert provider.inputs["attributeMapping"]["google.subject"].startswith("assertion.")
    for member, role in sa_members(stack).items():
        assert role == "roles/iam.workloadIdentityUser"
        assert not member.endswith("/*") and "*" not in member
        assert member.startswith(
            (f"principal://iam.googleapis.com/{pool()}/subject/", "principalSet://")
        ), member


def test_gcp_trusts_each_external_issuer_for_its_subject_and_audience() -> None:
    stack = deploy(args(clouds=("gcp",), oidc_issuers=(GITHUB, GITLAB)))

    by_id = {
        p.inputs["workloadIdentityPoolProviderId"]: p.inputs for p in stack.of_type(GCP_PROVIDER)
    }
    assert set(by_id) == {"oidc-github-main", "oidc-gitlab-prod"}
    github = by_id["oidc-github-main"]
    assert github["attributeCondition"] == 'assertion.sub == "repo:acme/infra:ref:refs/heads/main"'
    assert github["oidc"] == {"issuerUri": GITHUB.url}  # default audience: the provider's name
    assert by_id["oidc-gitlab-prod"]["oidc"]["allowedAudiences"] == ["https://gitlab.example.com"]
    assert set(sa_members(stack)) == {
        f"principal://iam.googleapis.com/{pool()}/subject/{GITHUB.subject}",
        f"principal://iam.googleapis.com/{pool()}/subject/{GITLAB.subject}",
    }
    assert stack.outputs["gcp_workload_identity_providers"] == {
        "oidc:github-main": f"{pool()}/providers/oidc-github-main",
        "oidc:gitlab-prod": f"{pool()}/providers/oidc-gitlab-prod",
    }


def test_gcp_trusts_only_the_aws_deployer_role_when_the_router_runs_in_aws() -> None:
    stack = deploy(args(clouds=("aws", "gcp"), home="aws"))

    provider = next(p.inputs for p in stack.of_type(GCP_PROVIDER) if p.name.endswith("from-aws"))
    role = f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/spotroute-deployer"
    assert provider["aws"] == {"accountId": ACCOUNT_ID}
    assert provider["attributeCondition"] == f'attribute.aws_role == "{role}"'
    assert f"principalSet://iam.googleapis.com/{pool()}/attribute.aws_role/{role}" in sa_members(
        stack
    )


def test_gcp_trusts_only_the_azure_identity_when_the_router_runs_on_azure() -> None:
    stack = deploy(
        args(clouds=("gcp", "azure"), home="azure", azure_federation_audience=FEDERATION_AUDIENCE)
    )

    provider = next(p.inputs for p in stack.of_type(GCP_PROVIDER) if p.name.endswith("from-azure"))
    assert provider["oidc"] == {
        "issuerUri": f"https://sts.windows.net/{TENANT}/",
        "allowedAudiences": [FEDERATION_AUDIENCE],
    }
    assert provider["attributeCondition"] == f'assertion.sub == "{PRINCIPAL_ID}"'
    assert f"principal://iam.googleapis.com/{pool()}/subject/{PRINCIPAL_ID}" in sa_members(stack)


def test_router_service_account_may_impersonate_the_deployer_and_nothing_else() -> None:
    router = f"route-runner@{PROJECT_ID}.iam.gserviceaccount.com"
    stack = deploy(args(home="gcp", router_service_account=router))

    impersonation = {m: r for m, r in sa_members(stack).items() if m.startswith("serviceAccount:")}
    assert impersonation == {f"serviceAccount:{router}": "roles/iam.serviceAccountTokenCreator"}
    target = next(
        r.inputs["serviceAccountId"]
        for r in stack.of_type(GCP_SA_MEMBER)
        if r.inputs["member"] == f"serviceAccount:{router}"
    )
    assert target == (
        f"projects/{PROJECT_ID}/serviceAccounts/spotroute-deployer@{PROJECT_ID}.iam.gserviceaccount.com"
    )
    # The router gets nothing on the project: both project bindings are the deployer's.
    members = {b.inputs["member"] for b in stack.of_type(GCP_PROJECT_MEMBER)}
    assert members == {f"serviceAccount:spotroute-deployer@{PROJECT_ID}.iam.gserviceaccount.com"}


def test_gcp_project_number_is_looked_up_when_not_given() -> None:
    calls = {
        "gcp:organizations/getProject:getProject": lambda a: {
            "projectId": a["projectId"],
            "number": "555",
            "name": a["projectId"],
        }
    }
    stack = deploy(args(clouds=("gcp",), gcp_project_number=""), calls=calls)

    assert stack.outputs["gcp_project_number"] == "555"
    assert stack.outputs["gcp_workload_identity_pool"] == pool("555")


def test_gcs_state_backend_is_granted_on_its_pulumi_prefix_only() -> None:
    stack = deploy(args(clouds=("gcp",), state_bucket="gs://acme-state"))

    grant = stack.one(GCP_BUCKET_MEMBER).inputs
    assert grant["bucket"] == "acme-state"
    assert grant["role"] == "roles/storage.objectUser"
    assert 'objects/.pulumi/")' in grant["condition"]["expression"]


GRANTS_ROLE = f"projects/{PROJECT_ID}/roles/spotrouteDeployerGrants"


def grants_condition(stack: Any) -> str:
    (binding,) = [
        b.inputs for b in stack.of_type(GCP_PROJECT_MEMBER) if b.inputs["role"] == GRANTS_ROLE
    ]
    assert binding["condition"]["title"] == "spotroute buckets only"
    expression: str = binding["condition"]["expression"]
    return expression


JOB_BUCKETS = (
    '(resource.name.startsWith("projects/_/buckets/spotroute-") && '
    'resource.name.extract("projects/_/buckets/spotroute-{job}-ckpt-") != "")'
)
# gcp.SpotGpuGroup's secret env: the job account's secretAccessor on its
# spotroute-<stack>-secret-env; Secret Manager names secrets by project number in conditions.
SECRETS = (
    '(resource.type == "secretmanager.googleapis.com/Secret" && '
    f'resource.name.startsWith("projects/{PROJECT_NUMBER}/secrets/spotroute-") && '
    'resource.name.endsWith("-secret-env"))'
)


def test_gcp_deployer_edits_bucket_iam_policies_only_on_spotroute_job_buckets() -> None:
    stack = deploy(args(clouds=("gcp",)))

    # No project-wide setIamPolicy: it would let the deployer grant itself any bucket.
    assert not set(GCP_GRANT_PERMISSIONS) & set(GCP_DEPLOYER_PERMISSIONS)
    assert GCP_GRANT_PERMISSIONS == (
        "storage.buckets.getIamPolicy",
        "storage.buckets.setIamPolicy",
        "secretmanager.secrets.getIamPolicy",
        "secretmanager.secrets.setIamPolicy",
    )
    # spotroute-<job>-ckpt-<hex> only: a bucket that merely starts with spotroute- is not one.
    assert grants_condition(stack) == (
        f'(resource.type == "storage.googleapis.com/Bucket" && ({JOB_BUCKETS})) || {SECRETS}'
    )


def test_gcp_job_buckets_are_the_only_other_buckets_the_deployer_may_grant_on() -> None:
    stack = deploy(args(clouds=("gcp",), gcp_job_buckets=("acme-datasets", "acme-ckpt")))

    assert grants_condition(stack) == (
        f'(resource.type == "storage.googleapis.com/Bucket" && ({JOB_BUCKETS} || '
        'resource.name == "projects/_/buckets/acme-datasets" || '
        f'resource.name == "projects/_/buckets/acme-ckpt")) || {SECRETS}'
    )


def test_gcp_state_bucket_is_never_grantable_whatever_its_name() -> None:
    stack = deploy(args(clouds=("gcp",), state_bucket="gs://spotroute-team-ckpt-state/stacks"))

    assert grants_condition(stack) == (
        f'(resource.type == "storage.googleapis.com/Bucket" && ({JOB_BUCKETS})'
        ' && resource.name != "projects/_/buckets/spotroute-team-ckpt-state")'
        f" || {SECRETS}"
    )


def test_gcp_state_bucket_listed_as_a_job_bucket_is_refused() -> None:
    with pytest.raises(ValueError, match=r"job_buckets: 'acme-state' is the state bucket"):
        deploy(
            args(clouds=("gcp",), state_bucket="gs://acme-state", gcp_job_buckets=("acme-state",))
        )


@pytest.mark.parametrize("bucket", ['acme") || true || ("', "gs://acme", "Acme", "a"])
def test_a_gcp_job_bucket_that_is_not_a_bucket_name_is_refused(bucket: str) -> None:
    with pytest.raises(ValueError, match=r"gcp_job_buckets: .* is not a Cloud Storage bucket"):
        args(clouds=("gcp",), gcp_job_buckets=(bucket,))


NAMED_ROLE = f"projects/{PROJECT_ID}/roles/spotrouteDeployerNamed"


def named_condition(stack: Any) -> str:
    (binding,) = [
        b.inputs for b in stack.of_type(GCP_PROJECT_MEMBER) if b.inputs["role"] == NAMED_ROLE
    ]
    expression: str = binding["condition"]["expression"]
    return expression


def test_gcp_deployer_changes_only_resources_named_spotroute() -> None:
    stack = deploy(args(clouds=("gcp",)))

    # Reading every secret, deleting or reconfiguring any bucket, editing any firewall or VM:
    # none of that is project-wide any more.
    project_wide = set(GCP_DEPLOYER_PERMISSIONS)
    assert not set(GCP_NAMED_PERMISSIONS) & project_wide
    for permission in ("secretmanager.versions.access", "storage.buckets.update",
                       "storage.buckets.delete", "compute.firewalls.update",
                       "compute.instances.setMetadata", "compute.instances.setServiceAccount"):
        assert permission in GCP_NAMED_PERMISSIONS and permission not in project_wide
    # Resource names as IAM Conditions see them (cloud.google.com/iam/docs/
    # conditions-resource-attributes): buckets and their objects, global firewalls, zonal VMs,
    # secrets by project number.
    assert named_condition(stack) == (
        '((resource.type == "storage.googleapis.com/Bucket" || '
        f'resource.type == "storage.googleapis.com/Object") && {JOB_BUCKETS})'
        ' || (resource.type == "compute.googleapis.com/Firewall" && resource.name.startsWith('
        f'"projects/{PROJECT_ID}/global/firewalls/spotroute-"))'
        ' || (resource.type == "compute.googleapis.com/InstanceTemplate" && resource.name'
        f'.startsWith("projects/{PROJECT_ID}/global/instanceTemplates/spotroute-"))'
        ' || (resource.type == "compute.googleapis.com/Disk" && resource.name.extract('
        f'"projects/{PROJECT_ID}/zones/{{zone}}/disks/spotroute-") != "")'
        ' || (resource.type == "compute.googleapis.com/Instance" && resource.name.extract('
        f'"projects/{PROJECT_ID}/zones/{{zone}}/instances/spotroute-") != "")'
        ' || ((resource.type == "secretmanager.googleapis.com/Secret" || '
        'resource.type == "secretmanager.googleapis.com/SecretVersion") && '
        f'resource.name.startsWith("projects/{PROJECT_NUMBER}/secrets/spotroute-"))'
    )  # fmt: skip


def test_every_permission_on_a_type_iam_conditions_name_is_held_under_the_name_condition() -> None:
    # https://cloud.google.com/iam/docs/conditions-resource-attributes lists the Compute Engine
    # resource types whose names conditions recognise; a permission on one of them project-wide
    # reaches every such resource of the project (another team's firewall rule, template — its
    # start-up script — or disk). Only a list is checked on the project itself.
    stack = deploy(args(clouds=("gcp",)))
    condition = named_condition(stack)

    for permission in (*GCP_DEPLOYER_PERMISSIONS, *GCP_NAMED_PERMISSIONS):
        service, collection, verb = permission.split(".")
        kind = GCP_NAME_CONDITION_TYPES.get(collection) if service == "compute" else None
        if kind is None or verb == "list":
            continue
        assert permission in GCP_NAMED_PERMISSIONS, f"{permission} is project-wide"
        assert f'resource.type == "{kind}"' in condition, kind
    for permission in ("compute.firewalls.create", "compute.instanceTemplates.delete",
                       "compute.instanceTemplates.get", "compute.disks.delete",
                       "compute.instances.create"):
        assert permission not in GCP_DEPLOYER_PERMISSIONS
    # What stays project-wide: checked on a network, subnetwork, router or group (no such type
    # in Google's list), or on the project (creating a bucket or secret, listing VMs).
    assert "compute.networks.updatePolicy" in GCP_DEPLOYER_PERMISSIONS
    assert {p.split(".")[1] for p in GCP_DEPLOYER_PERMISSIONS if p.startswith("compute.")} == {
        "networks", "subnetworks", "routers", "instanceGroupManagers", "instanceGroups",
        "instances", "globalOperations", "regionOperations", "zoneOperations", "regions",
        "zones", "projects", "machineTypes", "acceleratorTypes"}  # fmt: skip


def test_gcp_deployer_never_empties_or_deletes_the_state_bucket() -> None:
    stack = deploy(args(clouds=("gcp",), state_bucket="gs://spotroute-team-ckpt-state/stacks"))

    storage = named_condition(stack).split(" || (resource.type == \"compute", 1)[0]
    assert storage.endswith(
        ' && resource.name != "projects/_/buckets/spotroute-team-ckpt-state"'
        ' && !resource.name.startsWith("projects/_/buckets/spotroute-team-ckpt-state/"))'
    ), storage


def test_gcp_deployer_may_still_act_as_any_service_account_of_the_project() -> None:
    # The documented residual risk (docs/security.md): IAM Conditions cannot name service
    # accounts, so actAs stays in the project-wide role; a dedicated project contains it.
    assert "iam.serviceAccounts.actAs" in GCP_DEPLOYER_PERMISSIONS
    assert "iam.serviceAccounts.setIamPolicy" not in GCP_DEPLOYER_PERMISSIONS


def test_gcp_placement_checkpoint_buckets_fall_under_the_grants_condition(
    aws_config: dict[str, Any],
) -> None:
    config = {**aws_config, "cloud": "gcp", "region": "us-central1", "zone": "us-central1-a"}
    config["instanceTypes"] = ["a2-ultragpu-8g"]
    placement = run_program(config, states={"gcp:storage/bucket:Bucket": _autonamed_bucket})

    assert placement.of_type(GCP_BUCKET_MEMBER)
    for grant in placement.of_type(GCP_BUCKET_MEMBER):
        # What the grants condition asks: spotroute-<job>-ckpt-..., a job part before -ckpt-.
        bucket = grant.inputs["bucket"]
        job, marker, _ = bucket.removeprefix(GCP_JOB_BUCKET_PREFIX).partition(GCP_JOB_BUCKET_MARKER)
        assert bucket.startswith(GCP_JOB_BUCKET_PREFIX) and job and marker, bucket


def _autonamed_bucket(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    # Pulumi autonames from the resource name unless `name` is given.
    return {"name": inputs.get("name") or f"{name}-mock001"}


GCP_NEEDS: dict[str, set[str]] = {
    "gcp:compute/network:Network": {"compute.networks.create", "compute.networks.delete"},
    # The secret env (a job with run.secrets): the secret, its version, the job's accessor grant.
    "gcp:secretmanager/secret:Secret": {
        "secretmanager.secrets.create",
        "secretmanager.secrets.delete",
    },
    "gcp:secretmanager/secretVersion:SecretVersion": {"secretmanager.versions.add"},
    "gcp:secretmanager/secretIamMember:SecretIamMember": {
        "secretmanager.secrets.getIamPolicy",
        "secretmanager.secrets.setIamPolicy",
    },
    "gcp:compute/subnetwork:Subnetwork": {
        "compute.subnetworks.create",
        "compute.subnetworks.delete",
        "compute.subnetworks.use",
    },
    "gcp:compute/router:Router": {"compute.routers.create", "compute.routers.delete"},
    "gcp:compute/routerNat:RouterNat": {"compute.routers.update"},
    "gcp:compute/firewall:Firewall": {
        "compute.firewalls.create",
        "compute.firewalls.delete",
        "compute.networks.updatePolicy",
    },
    # force_destroy (staging buckets, discarded copies) lists and deletes every object first.
    "gcp:storage/bucket:Bucket": {
        "storage.buckets.create",
        "storage.buckets.delete",
        "storage.objects.list",
        "storage.objects.delete",
    },
    "gcp:storage/bucketIAMMember:BucketIAMMember": {
        "storage.buckets.getIamPolicy",
        "storage.buckets.setIamPolicy",
    },
    "gcp:serviceaccount/account:Account": {
        "iam.serviceAccounts.create",
        "iam.serviceAccounts.delete",
    },
    "gcp:compute/instanceTemplate:InstanceTemplate": {
        "compute.instanceTemplates.create",
        "compute.instanceTemplates.delete",
        "iam.serviceAccounts.actAs",
    },
    "gcp:compute/instanceGroupManager:InstanceGroupManager": {
        "compute.instanceGroupManagers.create",
        "compute.instanceGroupManagers.delete",
        "compute.instanceTemplates.useReadOnly",
        "compute.instances.create",
    },
    "gcp:compute/regionInstanceGroupManager:RegionInstanceGroupManager": {
        "compute.instanceGroupManagers.create",
        "compute.instanceGroupManagers.delete",
        "compute.instanceTemplates.useReadOnly",
        "compute.instances.create",
    },
}


# Permissions besides GCP_NEEDS' create/delete/use ones, each for a reason.
GCP_UPKEEP = {
    # The provider reads back and updates what it created.
    *(
        f"compute.{kind}.{verb}"
        for kind in ("networks", "subnetworks", "routers", "firewalls")
        for verb in ("get", "update")
    ),
    # Subnets, routers and firewalls are created inside the network.
    "compute.networks.use",
    "compute.instanceTemplates.get",
    "compute.instanceGroupManagers.get",
    "compute.instanceGroupManagers.update",
    "compute.instanceGroups.create",
    "compute.instanceGroups.get",
    "compute.instanceGroups.delete",
    "compute.instanceGroups.update",
    "storage.buckets.get",
    "storage.buckets.update",
    "iam.serviceAccounts.get",
    "iam.serviceAccounts.update",
    # A managed group creates, labels and restarts its VMs and boot disks in the caller's name.
    "compute.instances.get",
    "compute.instances.list",
    "compute.instances.delete",
    "compute.instances.start",
    "compute.instances.stop",
    "compute.instances.setMetadata",
    "compute.instances.setLabels",
    "compute.instances.setServiceAccount",
    "compute.disks.create",
    "compute.disks.get",
    "compute.disks.delete",
    "compute.disks.setLabels",
    # Operations and location lookups; price and quota refresh (router/prices).
    "compute.globalOperations.get",
    "compute.regionOperations.get",
    "compute.zoneOperations.get",
    "compute.regions.get",
    "compute.zones.get",
    "compute.projects.get",
    "resourcemanager.projects.get",
    "compute.machineTypes.list",
    "compute.acceleratorTypes.list",
    # The secret env's secret and versions: read back, updated, versions enabled/disabled/destroyed.
    "secretmanager.secrets.get",
    "secretmanager.secrets.update",
    "secretmanager.versions.get",
    "secretmanager.versions.access",
    "secretmanager.versions.enable",
    "secretmanager.versions.disable",
    "secretmanager.versions.destroy",
}


def test_every_gcp_deployer_permission_is_justified() -> None:
    needed = {p for permissions in GCP_NEEDS.values() for p in permissions}

    granted = ALL_GRANTED
    assert granted == needed | GCP_UPKEEP


@pytest.mark.parametrize("zone", ["us-central1-a", ""])
def test_gcp_deployer_may_manage_everything_a_gcp_placement_creates(
    aws_config: dict[str, Any], zone: str
) -> None:
    config = {
        **aws_config,
        "cloud": "gcp",
        "region": "us-central1",
        "zone": zone,
        "instanceTypes": ["a2-ultragpu-8g"],
        "dataUrls": ["gs://acme-datasets/llm/"],
    }
    states: dict[str, StateFiller] = {
        "gcp:storage/bucket:Bucket": lambda name, inputs: {"name": f"{name}-mock001"},
        GCP_ACCOUNT: lambda name, inputs: {
            "email": f"{inputs['accountId']}@{PROJECT_ID}.iam.gserviceaccount.com"
        },
    }
    placement = run_program(config, states=states)

    created = {r.type for r in placement.custom_resources()}
    assert created <= set(GCP_NEEDS), f"unlisted types: {created - set(GCP_NEEDS)}"
    for type_ in created:
        assert GCP_NEEDS[type_] <= ALL_GRANTED, type_


# --- a project of spotroute's own (the default) ---------------------------------------------------

DEFAULT_COMPUTE = f"{PROJECT_NUMBER}-compute@developer.gserviceaccount.com"


def listing(*accounts: tuple[str, bool]) -> dict[str, Any]:
    """What projects.serviceAccounts.list answers, as the provider's getS data source has it."""
    return {GCP_LIST_ACCOUNTS: lambda args: {"accounts": [
        {"email": email, "disabled": disabled, "accountId": email.split("@")[0]}
        for email, disabled in accounts]}}  # fmt: skip


def test_the_bootstrap_refuses_a_project_that_is_not_spotroutes_alone() -> None:
    # The deployer may act as every service account of its project (actAs cannot be narrowed:
    # docs/security.md): a project with an enabled account of someone else's — the default
    # Compute Engine account, often an Editor, included — is refused unless declared shared.
    others = listing((f"spotroute-deployer@{PROJECT_ID}.iam.gserviceaccount.com", False),
                     (DEFAULT_COMPUTE, False),
                     (f"ci-deployer@{PROJECT_ID}.iam.gserviceaccount.com", False))

    with pytest.raises(BootstrapConfigError, match=(
        rf"^stacks/Pulumi\.bootstrap\.yaml: spotroute-bootstrap:gcpProjectId: project {PROJECT_ID}"
        rf" is not spotroute's alone: the deployer could run VMs as {DEFAULT_COMPUTE} \(\+1 more\)"
        r".* set spotroute-bootstrap:gcpProjectShared: true to accept it")):
        deploy(args(clouds=("gcp",)), calls=others)

    shared = deploy(args(clouds=("gcp",), gcp_project_shared=True), calls=others)
    assert shared.outputs["gcp_project_dedicated"] is False


def test_a_project_with_only_spotroutes_and_disabled_accounts_is_dedicated() -> None:
    calls = listing((f"spotroute-deployer@{PROJECT_ID}.iam.gserviceaccount.com", False),
                    (f"sr-2-llm@{PROJECT_ID}.iam.gserviceaccount.com", False),
                    (DEFAULT_COMPUTE, True))  # disabled, as docs/security.md asks

    stack = deploy(args(clouds=("gcp",)), calls=calls)

    assert stack.outputs["gcp_project_dedicated"] is True


def test_a_new_project_whose_accounts_cannot_be_listed_yet_passes_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A fresh project has the IAM API off until the bootstrap enables it: nothing to list yet,
    # which is the dedicated project the docs ask for.
    def api_off(args: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        # The invoke fails as the provider reports it (the SDK raises it to the caller).
        return {}, [("project", "googleapi: Error 403: Identity and Access Management (IAM) API "
                                "has not been used in project 212 before or it is disabled.")]

    stack = deploy(args(clouds=("gcp",)), calls={GCP_LIST_ACCOUNTS: api_off})

    assert stack.outputs["gcp_project_dedicated"] is True
    assert "could not list the service accounts of project acme-ml" in caplog.text
