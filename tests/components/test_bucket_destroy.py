"""What `pulumi destroy` does with a stack's buckets, on every target (issue 21 items 1, 10).

A checkpoint bucket always holds something (the checkpoints, and with versioning their old
versions and delete markers), and neither cloud deletes a bucket that does:

- S3 DeleteBucket: "All objects (including all object versions and delete markers) in the bucket
  must be deleted before the bucket itself can be deleted" — else error code BucketNotEmpty
  (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteBucket.html,
  https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html);
- Cloud Storage buckets.delete "Deletes an empty bucket"
  (https://cloud.google.com/storage/docs/json_api/v1/buckets/delete); the provider refuses a
  bucket "containing objects without force_destroy set to true".

So a kept bucket (the default, spotroute:keepCheckpoints true) is retained on destroy together
with every setting that keeps it private, encrypted and expiring old versions; a discarded one
(keepCheckpoints false, written by the router only onto a stack whose checkpoints are a verified
copy) and every staging bucket are emptied and deleted (force_destroy). Azure deletes a resource
group with everything in it, so retaining is all it needs.
"""

from __future__ import annotations

from typing import Any

import pytest
from harness import CapturedResource, CapturedStack, run_program
from test_component_contract import JOB, TARGETS, stack_config

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

COPY = {
    "aws": "s3://acme-datasets/llm/",
    "gcp": "gs://acme-datasets/llm/",
    "azure": "https://acmedata.blob.core.windows.net/datasets/llm/",
}
ACCOUNT_IDS = {
    "acmedata": "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/data/"
    "providers/Microsoft.Storage/storageAccounts/acmedata"
}
# What a job's network bills by the hour while its stack exists (issue 21 item 4): route watch
# destroys a finished job's stack so these go too.
PER_HOUR_NETWORK = {
    "aws": ("aws:ec2/natGateway:NatGateway", "aws:ec2/eip:Eip"),
    "azure": ("azure-native:network:NatGateway", "azure-native:network:PublicIPAddress"),
}
# The bucket resources whose provider empties them first when force_destroy is set.
FORCE_DESTROY = {"aws": "aws:s3/bucket:Bucket", "gcp": "gcp:storage/bucket:Bucket"}


def deploy(cloud: str, **changes: Any) -> CapturedStack:
    config = {**stack_config(cloud, "spot"), **changes}
    return run_program(config, **TARGETS[cloud].get("mocks", {}))


def bucket_parts(stack: CapturedStack, component: str) -> list[CapturedResource]:
    """The cloud resources one CheckpointBucket component created."""
    return [
        r
        for r in stack.custom_resources()
        if r.parent_type.endswith(":CheckpointBucket") and r.parent_name == component
    ]


@pytest.mark.parametrize("cloud", sorted(TARGETS))
def test_destroying_a_stack_keeps_its_checkpoint_bucket_with_every_setting(cloud: str) -> None:
    stack = deploy(cloud)
    kept = bucket_parts(stack, JOB)

    assert kept, "the program created no checkpoint bucket"
    assert all(r.retain_on_delete for r in kept), [r.name for r in kept if not r.retain_on_delete]
    if cloud in FORCE_DESTROY:
        assert stack.one(FORCE_DESTROY[cloud]).inputs["forceDestroy"] is False
    # Nothing else outlives the stack: the NAT gateway, addresses and nodes stop billing.
    others = [r for r in stack.custom_resources() if r not in kept]
    assert others and not any(r.retain_on_delete for r in others)
    hourly = {kind for kinds in PER_HOUR_NETWORK.values() for kind in kinds}
    assert {r.type for r in others} & hourly == set(PER_HOUR_NETWORK.get(cloud, ()))


@pytest.mark.parametrize("cloud", sorted(TARGETS))
def test_a_discarded_checkpoint_copy_is_deleted_with_its_contents(cloud: str) -> None:
    stack = deploy(cloud, keepCheckpoints=False)
    parts = bucket_parts(stack, JOB)

    assert parts and not any(r.retain_on_delete for r in parts)
    if cloud in FORCE_DESTROY:
        assert stack.one(FORCE_DESTROY[cloud]).inputs["forceDestroy"] is True


@pytest.mark.parametrize("cloud", sorted(COPY))
def test_a_staging_bucket_is_always_deleted_with_its_contents(cloud: str) -> None:
    stack = deploy(
        cloud,
        dataUrls=[COPY[cloud]],
        dataCopyUrls=[COPY[cloud]],
        stagingDays=3,
        storageAccountIds=ACCOUNT_IDS if cloud == "azure" else {},
    )
    staging = bucket_parts(stack, f"{JOB}-staging")

    assert staging and not any(r.retain_on_delete for r in staging)
    assert all(r.retain_on_delete for r in bucket_parts(stack, JOB))
    if cloud in FORCE_DESTROY:
        forced = {r.name: r.inputs["forceDestroy"] for r in stack.of_type(FORCE_DESTROY[cloud])}
        assert sorted(forced.values()) == [False, True]


def test_a_reused_bucket_is_never_created_so_never_deleted() -> None:
    stack = deploy("aws", checkpointUrl="s3://acme-checkpoints/teams/ml/", keepCheckpoints=False)

    assert bucket_parts(stack, JOB) == []
    assert stack.of_type("aws:s3/bucket:Bucket") == []


@pytest.mark.parametrize("staged", [False, True])
def test_gcp_buckets_keep_no_soft_deleted_copies(staged: bool) -> None:
    # Soft delete is on by default for 7 days and billed at the storage rate; retention 0 turns
    # it off (https://cloud.google.com/storage/docs/soft-delete,
    # https://cloud.google.com/storage/docs/use-soft-delete#disable).
    changes: dict[str, Any] = (
        {"dataUrls": [COPY["gcp"]], "dataCopyUrls": [COPY["gcp"]], "stagingDays": 3}
        if staged
        else {}
    )
    buckets = deploy("gcp", **changes).of_type("gcp:storage/bucket:Bucket")

    assert len(buckets) == (2 if staged else 1)
    for bucket in buckets:
        assert bucket.inputs["softDeletePolicy"] == {"retentionDurationSeconds": 0}, bucket.name


@pytest.mark.parametrize("staged", [False, True])
def test_azure_checkpoint_accounts_keep_no_soft_deleted_blobs(staged: bool) -> None:
    # With versioning on, a version the lifecycle rule deletes is soft-deleted and kept (billed
    # as active data) for the soft-delete days: twice the intended retention
    # (https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-overview).
    changes: dict[str, Any] = (
        {"dataUrls": [COPY["azure"]], "dataCopyUrls": [COPY["azure"]], "stagingDays": 3,
         "storageAccountIds": ACCOUNT_IDS}
        if staged
        else {}
    )  # fmt: skip
    stack = deploy("azure", **changes)
    services = stack.of_type("azure-native:storage:BlobServiceProperties")
    rules = [r for p in stack.of_type("azure-native:storage:ManagementPolicy")
             for r in p.inputs["policy"]["rules"] if r["name"] == "expire-old-checkpoint-versions"]

    assert len(services) == (2 if staged else 1)
    for service in services:
        assert service.inputs["deleteRetentionPolicy"] == {"enabled": False}, service.name
        assert service.inputs["isVersioningEnabled"] is True  # overwrites stay recoverable
    assert len(rules) == len(services)  # old versions still expire, once
    for rule in rules:
        assert rule["definition"]["actions"]["version"]["delete"]["daysAfterCreationGreaterThan"]


def test_gcp_bucket_name_is_new_for_each_deployment_of_a_stack() -> None:
    # A kept bucket keeps its global name: a stack created again (same job, same stack name)
    # must not ask for it, or the create fails with 409 "you already own it".
    def name(deployment: str) -> str:
        bucket = deploy("gcp", deploymentId=deployment).one("gcp:storage/bucket:Bucket")
        return str(bucket.inputs["name"])

    assert name("1a2b3c4d") == name("1a2b3c4d")
    assert name("1a2b3c4d") != name("5e6f7a8b")
    assert name("1a2b3c4d").startswith(f"spotroute-{JOB}-ckpt-")
    # A stack from before the id existed keeps its bucket: the name is never updated.
    assert "name" in deploy("gcp").one("gcp:storage/bucket:Bucket").ignore_changes
