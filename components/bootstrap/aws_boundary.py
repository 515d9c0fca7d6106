"""The permissions boundary every AWS job role carries: the most a job may ever do.

The deployer may create and edit job roles only with it (aws_permissions.aws_deployer_policy),
so whatever inline policy a job role is given, the boundary caps it: S3 objects of spotroute's
own buckets in this account and of the buckets the bootstrap lists (`awsJobBuckets`), the secret
env parameters, the Session Manager agent — from EC2 instances only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from components.aws_names import SECRET_PARAMETER_PATH

AWS_JOB_BOUNDARY_NAME = "spotroute-job-boundary"
# Job buckets, roles and profiles are named by aws_names.physical_name_prefix: "spotroute-<job>-".
AWS_JOB_NAME_PREFIX = "spotroute-"
# At most what aws_names.checkpoint_policy_document grants a job: its checkpoints and its data,
# which that policy narrows to the job's prefixes.
AWS_JOB_BOUNDARY_S3_ACTIONS = (
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:ListBucket",
)
# With remoteAccess, aws.JobIdentity gives the job role what the SSM agent needs for Session
# Manager shells (aws_names.session_manager_policy_document); the boundary must leave room for it,
# or the agent cannot register and the node is unreachable. Instance registration is on instances;
# the channel actions have no resource types (Resource "*" only).
AWS_JOB_BOUNDARY_SESSION_ACTIONS = (
    "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
)
# `awsJobBuckets` entries: a bucket name, or `<bucket>@<account id>` for a bucket of another
# account (a data lake's). Dots are refused: no job bucket needs them, and they break TLS.
AWS_JOB_BUCKET = re.compile(r"(?P<bucket>[a-z0-9][a-z0-9-]{1,61}[a-z0-9])(@(?P<account>\d{12}))?")
FROM_INSTANCES = {"Null": {"ec2:SourceInstanceARN": "false"}}


def aws_job_boundary_arn(account_id: str) -> str:
    """ARN of the managed policy every spotroute job role must have as its permissions boundary."""
    return f"arn:aws:iam::{account_id}:policy/{AWS_JOB_BOUNDARY_NAME}"


def parse_job_buckets(entries: Sequence[str], account_id: str) -> dict[str, list[str]]:
    """`awsJobBuckets` entries grouped by the account that owns them (default: this one)."""
    accounts: dict[str, list[str]] = {}
    for entry in entries:
        match = AWS_JOB_BUCKET.fullmatch(entry)
        if match is None:
            raise ValueError(
                f"aws_job_buckets: {entry!r} — list S3 bucket names, or <bucket>@<account id> "
                "for another account's bucket"
            )
        accounts.setdefault(match["account"] or account_id, []).append(match["bucket"])
    return accounts


def _buckets(names: Sequence[str]) -> list[str]:
    return [arn for name in names for arn in (f"arn:aws:s3:::{name}", f"arn:aws:s3:::{name}/*")]


def aws_job_boundary_policy(
    account_id: str, job_buckets: Sequence[str] = (), state_bucket: str = ""
) -> dict[str, Any]:
    """The job roles' permissions boundary: S3 objects and listings of spotroute's buckets in
    `account_id` and of `job_buckets`, the secret env, the Session Manager agent's actions —
    from EC2 instances only; never the state bucket.

    The boundary caps every role the deployer creates. It holds only for requests signed with an
    EC2 instance's role credentials (ec2:SourceInstanceARN is present exactly then, as in AWS's
    data-perimeter examples), so a job role that someone made trust an outside account is worth
    nothing outside an instance. Bucket names are global: `s3:ResourceAccount` pins each bucket
    to the account that owns it, so a bucket of the same name in someone else's account (say a
    `spotroute-…` one made to receive a copy) is out of reach.
    """
    s3 = list(AWS_JOB_BOUNDARY_S3_ACTIONS)
    statements: list[dict[str, Any]] = [
        {
            "Sid": "OwnBucketsFromInstances",
            "Effect": "Allow",
            "Action": s3,
            "Resource": _buckets([f"{AWS_JOB_NAME_PREFIX}*"]),
            "Condition": {"StringEquals": {"s3:ResourceAccount": account_id}, **FROM_INSTANCES},
        }
    ]
    for owner, names in sorted(parse_job_buckets(job_buckets, account_id).items()):
        statements.append(
            {
                # Data and reused checkpoint buckets the bootstrap lists, each in its own account.
                "Sid": f"ListedBucketsOf{owner}FromInstances",
                "Effect": "Allow",
                "Action": s3,
                "Resource": _buckets(names),
                "Condition": {"StringEquals": {"s3:ResourceAccount": owner}, **FROM_INSTANCES},
            }
        )
    statements += [
        {
            # aws.SpotGpuGroup's secret env: one SecureString parameter per stack under
            # /spotroute/, read by the node at boot (the role's own policy names the one ARN).
            "Sid": "SecretEnvFromInstances",
            "Effect": "Allow",
            "Action": ["ssm:GetParameter"],
            "Resource": f"arn:aws:ssm:*:*:parameter{SECRET_PARAMETER_PATH}/*",
            "Condition": FROM_INSTANCES,
        },
        {
            "Sid": "SessionManagerFromInstances",
            "Effect": "Allow",
            "Action": list(AWS_JOB_BOUNDARY_SESSION_ACTIONS[:1]),
            "Resource": "arn:aws:ec2:*:*:instance/*",
            "Condition": FROM_INSTANCES,
        },
        {
            "Sid": "SessionChannelsFromInstances",
            "Effect": "Allow",
            "Action": list(AWS_JOB_BOUNDARY_SESSION_ACTIONS[1:]),
            "Resource": "*",
            "Condition": FROM_INSTANCES,
        },
    ]
    if state_bucket:
        # Whatever its name: every stack's state (and its secrets' ciphertext) lives there.
        statements.append(
            {
                "Sid": "NeverTheStateBucket",
                "Effect": "Deny",
                "Action": s3,
                "Resource": _buckets([state_bucket]),
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}
