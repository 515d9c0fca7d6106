"""Whether destroying a placement stack keeps its checkpoint bucket, written into its state.

The program marks a created checkpoint bucket and every resource of it `retain_on_delete`, and
its bucket without `force_destroy` (spotroute:keepCheckpoints, default true): a destroy forgets
them and the checkpoints stay. The router may want the other fate for one stack it is about to
destroy — a migration's old stack whose checkpoint was copied elsewhere, a rolled-back new one,
a failed first try — and a stack made before the flag existed has neither. So before each
destroy it makes the state say what it wants, without running the program (which may no longer
run: a failed launch, a newer spotroute): `pulumi stack export`, set `retainOnDelete` and the
bucket's `forceDestroy` on the CheckpointBucket component's resources, `pulumi stack import`
(Pulumi's documented way to edit state). The AWS and GCP providers read `force_destroy` from
the state when they delete, and empty the bucket first.

A local checkpoint directory is shared by every placement of the job: it is always kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Components whose resources these rules cover (spotroute:<cloud>:CheckpointBucket).
BUCKET_COMPONENT_SUFFIX = ":CheckpointBucket"
# Bucket types whose provider empties the bucket on delete when the state says force_destroy.
FORCE_DESTROY_TYPES = frozenset({"aws:s3/bucket:Bucket", "gcp:storage/bucket:Bucket"})
# Never discarded: the local target's directory holds every placement's checkpoints.
ALWAYS_KEPT_TYPES = frozenset({"pulumi-python:dynamic/spotroute:LocalDirectory"})


def _name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def checkpoint_bucket_resources(
    resources: Iterable[dict[str, Any]], job: str
) -> list[dict[str, Any]]:
    """The state entries the job's checkpoint bucket component created (not its staging bucket,
    the component named `<job>-staging`, which is always deleted: `staging_bucket_resources`)."""
    return _component_resources(resources, job)


def staging_bucket_resources(
    resources: Iterable[dict[str, Any]], job: str
) -> list[dict[str, Any]]:
    """The state entries of the job's staging bucket component (`<job>-staging`)."""
    return _component_resources(resources, f"{job}-staging")


def _component_resources(resources: Iterable[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    entries = list(resources)
    roots = {
        str(r["urn"])
        for r in entries
        if str(r.get("type", "")).endswith(BUCKET_COMPONENT_SUFFIX)
        and _name(str(r["urn"])) == name
    }
    inside = set(roots)
    grew = True
    while grew:  # descendants at any depth, in whatever order the state lists them
        grew = False
        for r in entries:
            if str(r["urn"]) not in inside and str(r.get("parent") or "") in inside:
                inside.add(str(r["urn"]))
                grew = True
    return [r for r in entries if str(r["urn"]) in inside - roots]


def apply_fate(resources: Iterable[dict[str, Any]], keep: bool) -> int:
    """Make each entry retained (keep) or deleted with its contents (not keep); how many changed.

    Entries of ALWAYS_KEPT_TYPES stay retained whatever `keep` says.
    """
    changed = 0
    for r in resources:
        kind = str(r.get("type", ""))
        retain = keep or kind in ALWAYS_KEPT_TYPES
        if bool(r.get("retainOnDelete")) != retain:
            if retain:
                r["retainOnDelete"] = True
            else:
                r.pop("retainOnDelete", None)
            changed += 1
        if kind in FORCE_DESTROY_TYPES:
            for part in ("inputs", "outputs"):
                values = r.get(part)
                # An absent forceDestroy is the provider's default, false: a bucket to discard
                # needs it written, or DeleteBucket meets its objects (BucketNotEmpty).
                if isinstance(values, dict) and bool(values.get("forceDestroy")) is retain:
                    values["forceDestroy"] = not retain
                    changed += 1
    return changed


def settle_checkpoints(stack: Any, job: str, keep: bool) -> int:
    """Write the fate of the job's checkpoint bucket into `stack`'s state; changes made (0: the
    state already said so, and nothing was imported). `stack` is an automation Stack."""
    deployment = stack.export_stack()
    resources = (deployment.deployment or {}).get("resources") or []
    changed = apply_fate(checkpoint_bucket_resources(resources, job), keep)
    # The staging bucket is deleted whatever the checkpoints' fate; a stack from before it was
    # created with force_destroy says otherwise in its state, and its destroy would stop there.
    changed += apply_fate(staging_bucket_resources(resources, job), keep=False)
    if changed:
        stack.import_stack(deployment)
    return changed
