"""Data sets on the stack, in every cloud, under the Pulumi mocks and the whole policy pack.

The job identity may read exactly the data prefixes the stack config names (spotroute:dataUrls:
the chosen copy of every data set), read-only, and nothing else of those buckets; copy-mode data
(spotroute:dataCopyUrls) gets a staging bucket/container built like the checkpoint bucket, whose
lifecycle deletes the copy after the job (spotroute:stagingDays), and which the job may write
only under data/.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from harness import CapturedStack, run_program
from test_azure import (
    ACCOUNT_IDS,
    AZURE_CALLS,
    AZURE_STATES,
    CONTRIBUTOR,
    READER,
    SELF_DELETE,
    role_guid,
)
from test_gcp import GCP_STATES
from test_policy_pack_over_stacks import PACK_CONFIG, explain, stack_config, stack_resources

from components.program import PlacementConfigError
from policies.rules import evaluate

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# Per cloud: two prefixes of its own storage, and one URL in another cloud (not grantable here).
DATA: dict[str, tuple[str, str, str]] = {
    "aws": ("s3://acme-datasets/llm/", "s3://acme-eval/v2/", "gs://acme-mirror/llm/"),
    "gcp": ("gs://acme-datasets/llm/", "gs://acme-eval/v2/", "s3://acme-datasets/llm/"),
    "azure": (
        "https://acmedata.blob.core.windows.net/datasets/llm/",
        "https://acmedata.blob.core.windows.net/datasets/eval/v2/",
        "s3://acme-datasets/llm/",
    ),
}
MOCKS: dict[str, dict[str, Any]] = {
    "aws": {},
    "gcp": {"states": GCP_STATES},
    "azure": {"calls": AZURE_CALLS, "states": AZURE_STATES},
}
STAGING_DAYS = 3


def deploy(cloud: str, *, copies: tuple[str, ...] = (), **changes: Any) -> CapturedStack:
    config = {
        **stack_config(cloud, "spot", "new-bucket", "no-ssh"),
        "dataUrls": list(DATA[cloud]),
        "dataCopyUrls": list(copies),
        "stagingDays": STAGING_DAYS if copies else 0,
        **changes,
    }
    if cloud == "azure":
        config["storageAccountIds"] = ACCOUNT_IDS
    return run_program(config, **MOCKS[cloud])


# --- what the identity may read, per cloud: (bucket or container, prefix, may write) -----------


def aws_grants(stack: CapturedStack) -> set[tuple[str, str, bool]]:
    policy = json.loads(stack.one("aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    found = set()
    for statement in policy["Statement"]:
        actions = statement["Action"]
        actions = {actions} if isinstance(actions, str) else set(actions)
        if "s3:GetObject" not in actions:
            continue
        bucket, _, prefix = statement["Resource"].removeprefix("arn:aws:s3:::").partition("/")
        found.add((bucket, prefix.removesuffix("*"), bool(actions - {"s3:GetObject"})))
    return found


def gcp_grants(stack: CapturedStack) -> set[tuple[str, str, bool]]:
    found = set()
    for member in stack.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"):
        inputs = member.inputs
        expression = inputs.get("condition", {}).get("expression", "")
        prefix = re.search(r'/objects/([^"]*)"', expression)
        writes = inputs["role"] != "roles/storage.objectViewer"
        found.add((inputs["bucket"], prefix.group(1) if prefix else "", writes))
    return found


def azure_grants(stack: CapturedStack) -> set[tuple[str, str, bool]]:
    found = set()
    for assignment in stack.of_type("azure-native:authorization:RoleAssignment"):
        inputs = assignment.inputs
        # The node's self-delete grant (its VMs, on the job's resource group) is no data grant;
        # anything else, whatever its role, is checked below.
        if role_guid(inputs) == SELF_DELETE and "/storageAccounts/" not in inputs["scope"]:
            assert assignment.name.endswith("-self-delete") and not inputs.get("condition")
            continue
        # A created container's scope is its resource id (the mocks' id has no path).
        container = inputs["scope"].rsplit("/containers/", 1)[-1]
        account = re.search(r"storageAccounts/([^/]+)/", inputs["scope"])
        prefix = re.search(r"StringStartsWith '([^']*)'", inputs.get("condition") or "")
        role = role_guid(inputs)
        assert role in (READER, CONTRIBUTOR)
        where = f"{account.group(1) if account else ''}/{container}"
        found.add((where, prefix.group(1) if prefix else "", role == CONTRIBUTOR))
    return found


GRANTS: dict[str, Callable[[CapturedStack], set[tuple[str, str, bool]]]] = {
    "aws": aws_grants,
    "gcp": gcp_grants,
    "azure": azure_grants,
}


def data_grants(cloud: str, stack: CapturedStack) -> set[tuple[str, str, bool]]:
    """The grants outside the checkpoint and staging buckets the stack itself creates."""
    own = {"llm-finetune/", "data/"}
    return {g for g in GRANTS[cloud](stack) if g[1] not in own}


EXPECTED_READS = {
    "aws": {("acme-datasets", "llm/", False), ("acme-eval", "v2/", False)},
    "gcp": {("acme-datasets", "llm/", False), ("acme-eval", "v2/", False)},
    "azure": {("acmedata/datasets", "llm/", False), ("acmedata/datasets", "eval/v2/", False)},
}


@pytest.mark.parametrize("cloud", sorted(DATA))
def test_identity_reads_exactly_the_given_data_prefixes_and_writes_none(cloud: str) -> None:
    stack = deploy(cloud)

    # Both prefixes of this cloud, read-only; the other cloud's URL adds nothing.
    assert data_grants(cloud, stack) == EXPECTED_READS[cloud]


@pytest.mark.parametrize("cloud", sorted(DATA))
def test_no_data_means_no_data_grant(cloud: str) -> None:
    assert data_grants(cloud, deploy(cloud, dataUrls=[])) == set()


@pytest.mark.parametrize("cloud", sorted(DATA))
def test_copy_mode_gets_a_staging_bucket_the_job_writes_only_under_data(cloud: str) -> None:
    plain, staged = deploy(cloud), deploy(cloud, copies=(DATA[cloud][0],))

    added = GRANTS[cloud](staged) - GRANTS[cloud](plain)
    ((_staging, prefix, writes),) = added
    assert (prefix, writes) == ("data/", True)
    assert data_grants(cloud, staged) == EXPECTED_READS[cloud]  # the source stays read-only
    assert "stagingUrl" not in plain.outputs
    assert staged.outputs["stagingUrl"].endswith("/data/")


@pytest.mark.parametrize("cloud", sorted(DATA))
def test_the_staging_bucket_passes_every_policy_the_checkpoint_bucket_does(cloud: str) -> None:
    stack = deploy(cloud, copies=(DATA[cloud][0],))
    violations = evaluate(stack_resources(stack), PACK_CONFIG)
    assert violations == [], explain(violations)


def test_aws_staging_bucket_expires_the_copy_and_is_deleted_with_the_stack() -> None:
    stack = deploy("aws", copies=(DATA["aws"][0],))
    buckets = {r.name: r.inputs for r in stack.of_type("aws:s3/bucket:Bucket")}
    assert buckets["llm-finetune-staging-bucket"]["forceDestroy"] is True
    assert buckets["llm-finetune-bucket"]["forceDestroy"] is False  # checkpoints are kept
    rules = {
        r.name: r.inputs["rules"]
        for r in stack.of_type("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
    }
    staged = {rule["id"]: rule for rule in rules["llm-finetune-staging-lifecycle"]}
    assert staged["delete-staged-data-after-the-job"]["expiration"]["days"] == STAGING_DAYS
    assert staged["expire-old-checkpoint-versions"]["noncurrentVersionExpiration"] == {
        "noncurrentDays": 1
    }
    assert all("expiration" not in rule for rule in rules["llm-finetune-lifecycle"])


def test_gcp_staging_bucket_deletes_live_objects_after_the_job() -> None:
    stack = deploy("gcp", copies=(DATA["gcp"][0],))
    buckets = {r.name: r.inputs for r in stack.of_type("gcp:storage/bucket:Bucket")}
    staging = buckets["llm-finetune-staging-ckpt"]
    assert staging["forceDestroy"] is True
    assert staging["versioning"] == {"enabled": True}
    assert staging["publicAccessPrevention"] == "enforced"
    assert {"action": {"type": "Delete"}, "condition": {"age": 3, "withState": "LIVE"}} in (
        staging["lifecycleRules"]
    )
    assert buckets["llm-finetune-ckpt"]["forceDestroy"] is False


def test_azure_staging_container_deletes_blobs_after_the_job() -> None:
    stack = deploy("azure", copies=(DATA["azure"][0],))
    policies = {
        r.name: r.inputs["policy"]["rules"]
        for r in stack.of_type("azure-native:storage:ManagementPolicy")
    }
    staged = {rule["name"]: rule for rule in policies["llm-finetune-staging-lifecycle"]}
    delete = staged["delete-staged-data-after-the-job"]["definition"]["actions"]["baseBlob"]
    assert delete == {"delete": {"daysAfterCreationGreaterThan": STAGING_DAYS}}
    assert "delete-staged-data-after-the-job" not in {
        rule["name"] for rule in policies["llm-finetune-lifecycle"]
    }


def test_a_staged_url_the_job_does_not_read_is_refused() -> None:
    with pytest.raises(PlacementConfigError, match=r"spotroute:dataCopyUrls: 's3://other/x/'"):
        deploy("aws", dataCopyUrls=["s3://other/x/"], stagingDays=2)


def test_staged_data_without_a_lifetime_is_refused() -> None:
    with pytest.raises(PlacementConfigError, match=r"spotroute:stagingDays: 0 — staged data needs"):
        deploy("aws", dataCopyUrls=[DATA["aws"][0]], stagingDays=0)
