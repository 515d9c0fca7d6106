"""Which of a job's s3:// buckets the AWS job boundary leaves out of its nodes' reach.

The bootstrap's boundary (components/bootstrap/aws_boundary.py, docs/security.md "The job
boundary") caps every AWS job role at this account's `spotroute-*` buckets and the buckets listed
in the bootstrap config's `awsJobBuckets`. A job whose checkpoint or data bucket is neither plans
and deploys fine, then every read or write on its nodes is AccessDenied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from router.core.job.model import Job

# spotroute's own bucket names start so (components/bootstrap/aws_boundary.AWS_JOB_NAME_PREFIX).
OWN_BUCKET_PREFIX = "spotroute-"


@dataclass(frozen=True)
class UnlistedBucket:
    field: str  # the job.yaml field whose URL names it, e.g. checkpoint.url
    bucket: str


def s3_bucket(url: str) -> str | None:
    """The bucket of an s3:// URL; None for any other URL."""
    parts = urlsplit(url.strip())
    return (parts.netloc or None) if parts.scheme == "s3" else None


def listed_bucket_names(entries: Sequence[str]) -> frozenset[str]:
    """`awsJobBuckets` entries (`<bucket>` or `<bucket>@<account id>`) → bucket names."""
    return frozenset(e.split("@", 1)[0] for e in entries)


def unlisted_buckets(job: Job, aws_job_buckets: Sequence[str]) -> list[UnlistedBucket]:
    """The job's s3:// checkpoint and data buckets an AWS placement's boundary would deny.

    Empty when the job cannot be placed on AWS: the boundary binds only AWS job roles.
    """
    if "aws" not in job.resources.clouds:
        return []
    listed = listed_bucket_names(aws_job_buckets)
    urls: list[tuple[str, str]] = []
    if job.checkpoint is not None:
        urls.append(("checkpoint.url", job.checkpoint.url))
    for i, d in enumerate(job.data):
        where = "data" if len(job.data) == 1 else f"data[{i}]"
        urls.append((f"{where}.url", d.url))
        urls.extend((f"{where}.replicas[{j}].url", r.url) for j, r in enumerate(d.replicas))
    found: list[UnlistedBucket] = []
    for field, url in urls:
        bucket = s3_bucket(url)
        if bucket and not bucket.startswith(OWN_BUCKET_PREFIX) and bucket not in listed:
            found.append(UnlistedBucket(field, bucket))
    return found
