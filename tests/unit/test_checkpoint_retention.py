"""Which checkpoints a destroy keeps (issue 21 item 1): the state edit before every destroy and
the migration's choice between keeping and discarding the old or new stack's bucket."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from pulumi.automation import Deployment

from router.core.journal import Journal, copied_elsewhere
from router.engine.retention import apply_fate, checkpoint_bucket_resources, settle_checkpoints

STACK = "urn:pulumi:train.2::spotroute::"


BUCKET = "spotroute:aws:CheckpointBucket"


def aws_state(*, retained: bool, force: bool) -> list[dict[str, Any]]:
    """A placement stack's state as `pulumi stack export` lists it (resources only)."""
    retain = {"retainOnDelete": True} if retained else {}
    bucket_state = {"forceDestroy": force, "bucket": "spotroute-train-2024"}
    return [
        {"urn": f"{STACK}pulumi:pulumi:Stack::spotroute-train.2", "type": "pulumi:pulumi:Stack"},
        {"urn": f"{STACK}{BUCKET}::train", "type": BUCKET, "parent": ""},
        {
            "urn": f"{STACK}{BUCKET}$aws:s3/bucket:Bucket::train-bucket",
            "type": "aws:s3/bucket:Bucket",
            "parent": f"{STACK}{BUCKET}::train",
            "inputs": dict(bucket_state),
            "outputs": dict(bucket_state),
            **retain,
        },
        {
            "urn": f"{STACK}{BUCKET}$aws:s3/bucketVersioning:BucketVersioning::train-versioning",
            "type": "aws:s3/bucketVersioning:BucketVersioning",
            "parent": f"{STACK}{BUCKET}::train",
            **retain,
        },
        # The staging bucket is its own component: always deleted, never touched here.
        {"urn": f"{STACK}{BUCKET}::train-staging", "type": BUCKET, "parent": ""},
        {
            "urn": f"{STACK}{BUCKET}$aws:s3/bucket:Bucket::train-staging-bucket",
            "type": "aws:s3/bucket:Bucket",
            "parent": f"{STACK}{BUCKET}::train-staging",
            "inputs": {"forceDestroy": True},
            "outputs": {"forceDestroy": True},
        },
        {
            "urn": f"{STACK}spotroute:aws:Network$aws:ec2/natGateway:NatGateway::train-nat",
            "type": "aws:ec2/natGateway:NatGateway",
            "parent": f"{STACK}spotroute:aws:Network::train",
        },
    ]


def by_name(state: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["urn"].rsplit("::", 1)[-1]: r for r in state}


def test_the_checkpoint_bucket_is_found_by_its_component_not_by_its_type() -> None:
    found = checkpoint_bucket_resources(aws_state(retained=True, force=False), "train")

    assert [r["urn"].rsplit("::", 1)[-1] for r in found] == ["train-bucket", "train-versioning"]


def test_a_stack_from_before_retention_is_made_to_keep_its_bucket() -> None:
    state = aws_state(retained=False, force=False)

    changed = apply_fate(checkpoint_bucket_resources(state, "train"), keep=True)

    named = by_name(state)
    assert changed == 2
    assert named["train-bucket"]["retainOnDelete"] is True
    assert named["train-versioning"]["retainOnDelete"] is True
    assert named["train-bucket"]["outputs"]["forceDestroy"] is False
    # Neither the staging bucket nor the network is retained: they stop billing.
    assert "retainOnDelete" not in named["train-staging-bucket"]
    assert "retainOnDelete" not in named["train-nat"]


def test_a_state_that_already_keeps_is_not_rewritten() -> None:
    state = aws_state(retained=True, force=False)
    before = copy.deepcopy(state)

    assert apply_fate(checkpoint_bucket_resources(state, "train"), keep=True) == 0
    assert state == before


def test_a_discarded_copy_loses_retention_and_is_emptied_by_the_provider() -> None:
    state = aws_state(retained=True, force=False)

    apply_fate(checkpoint_bucket_resources(state, "train"), keep=False)

    bucket = by_name(state)["train-bucket"]
    assert "retainOnDelete" not in bucket
    # The provider reads force_destroy from the state when it deletes the bucket.
    assert bucket["inputs"]["forceDestroy"] is True and bucket["outputs"]["forceDestroy"] is True


def test_a_discarded_bucket_whose_state_lacks_force_destroy_gets_it() -> None:
    # A state written without the key (the provider's default, false, left implicit): the
    # provider would delete without emptying and AWS answers BucketNotEmpty.
    state = aws_state(retained=True, force=False)
    for part in ("inputs", "outputs"):
        del by_name(state)["train-bucket"][part]["forceDestroy"]

    apply_fate(checkpoint_bucket_resources(state, "train"), keep=False)

    bucket = by_name(state)["train-bucket"]
    assert bucket["inputs"]["forceDestroy"] is True and bucket["outputs"]["forceDestroy"] is True


def test_a_kept_bucket_whose_state_lacks_force_destroy_is_left_as_it_is() -> None:
    state = aws_state(retained=True, force=False)
    for part in ("inputs", "outputs"):
        del by_name(state)["train-bucket"][part]["forceDestroy"]
    before = copy.deepcopy(state)

    assert apply_fate(checkpoint_bucket_resources(state, "train"), keep=True) == 0
    assert state == before


class ExportedStack:
    """The two calls of an automation Stack that settle_checkpoints makes, on a state in memory."""

    def __init__(self, resources: list[dict[str, Any]]) -> None:
        self.resources = resources
        self.imported: list[dict[str, Any]] = []

    def export_stack(self) -> Deployment:
        return Deployment(version=3, deployment={"resources": self.resources})

    def import_stack(self, state: Deployment) -> None:
        self.imported = list((state.deployment or {})["resources"])


@pytest.mark.parametrize("keep", [True, False])
def test_a_staging_bucket_from_before_force_destroy_is_emptied_by_every_destroy(keep: bool) -> None:
    # The staging component always deleted its bucket by name only: a stack made before the
    # bucket had force_destroy keeps false in its state, and the provider reads the state.
    state = aws_state(retained=True, force=False)
    staging = by_name(state)["train-staging-bucket"]
    staging["inputs"]["forceDestroy"] = staging["outputs"]["forceDestroy"] = False
    stack = ExportedStack(state)

    assert settle_checkpoints(stack, "train", keep=keep) >= 2

    written = by_name(stack.imported)["train-staging-bucket"]
    assert written["inputs"]["forceDestroy"] is True and written["outputs"]["forceDestroy"] is True
    assert "retainOnDelete" not in written
    assert bool(by_name(stack.imported)["train-bucket"].get("retainOnDelete")) is keep


def test_the_local_checkpoint_directory_is_kept_even_when_a_copy_is_discarded() -> None:
    local = "spotroute:local:CheckpointBucket"
    directory = {
        "urn": f"{STACK}{local}$pulumi-python:dynamic/spotroute:LocalDirectory::train-dir",
        "type": "pulumi-python:dynamic/spotroute:LocalDirectory",
        "parent": f"{STACK}{local}::train",
        "retainOnDelete": True,
    }
    state = [{"urn": f"{STACK}{local}::train", "type": local}, directory]

    assert apply_fate(checkpoint_bucket_resources(state, "train"), keep=False) == 0
    assert directory["retainOnDelete"] is True


def journal(copied: dict[str, Any], old: str, new: str) -> Journal:
    j = Journal(id="m-1", job="train", kind="migrate", from_stack="train", to_stack="train.2",
                target={}, reason="", created_at="2026-01-01T00:00:00+00:00")  # fmt: skip
    at = datetime(2026, 1, 1, tzinfo=UTC)
    j = j.finish("intent", at, {"checkpoint_url": old})
    j = j.finish("new-stack-up", at, {"outputs": {"checkpointUrl": new}})
    return j.finish("checkpoint-copied", at, copied)


@pytest.mark.parametrize(
    ("copied", "old", "new", "discard"),
    [
        # Copied and verified into another bucket: the old bucket is a duplicate.
        ({"step": 40, "files": 3}, "s3://spotroute-train-a/train/", "gs://spotroute-t-ckpt/train/",
         True),
        ({"step": 40, "already_there": True}, "s3://b-old/train/", "s3://b-new/train/", True),
        # Same storage: nothing was copied, the old bucket is where the job's checkpoints are.
        ({"skipped": "the new placement uses the same checkpoint storage"},
         "s3://acme/ckpt/train/", "s3://acme/ckpt/train/", False),
        # Nothing complete to copy: the new job started over; keep what there was.
        ({"skipped": "no complete checkpoint"}, "s3://b-old/train/", "s3://b-new/train/", False),
        # Another prefix of the same bucket is not "elsewhere".
        ({"step": 40}, "s3://acme/old/train/", "s3://acme/new/train/", False),
        ({"step": 40}, "https://acct.blob.core.windows.net/checkpoints/train/",
         "https://acct.blob.core.windows.net/other/train/", False),
    ],
)  # fmt: skip
def test_a_migrations_old_bucket_is_discarded_only_when_its_checkpoint_lives_elsewhere(
    copied: dict[str, Any], old: str, new: str, discard: bool
) -> None:
    assert copied_elsewhere(journal(copied, old, new)) is discard
