"""Pure AWS rules the components apply: zone ids, physical names and tags, S3 URLs, the job
role's IAM policy documents (checkpoints, data, Session Manager, secret env) and the instant
fleet's capacity check, the GPU images (AMI parameter, root device). No resources here;
components/aws.py and aws_network.py use them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from components.args import (
    STAGING_PREFIX,
    parse_bucket_url,
    standard_labels,
)

ZONE_ID = re.compile(r"[a-z]{2,4}[0-9]-az[0-9]+")
# Session Manager's own minimum for the instance role (AWS Systems Manager User Guide, "Create a
# custom IAM instance profile for Session Manager"): register the node and open channels.
# Where the jobs' secret env parameters live (one per placement stack, secret_parameter_name).
SECRET_PARAMETER_PATH = "/spotroute"
SESSION_CHANNEL_ACTIONS = (
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
)


def is_zone_id(zone: str) -> bool:
    """True for an AZ ID like `use1-az4` (as opposed to a zone name like `us-east-1a`)."""
    return bool(ZONE_ID.fullmatch(zone))


def aws_tags(job_name: str, labels: dict[str, str], part: str) -> dict[str, str]:
    return {**standard_labels(job_name, labels), "Name": f"{job_name}-{part}"}


def physical_name_prefix(job_name: str, limit: int) -> str:
    """Physical-name prefix that fits AWS's `name_prefix` limit (chars) and ends with a dash."""
    return f"spotroute-{job_name}"[: limit - 1].rstrip("-") + "-"


def parse_s3_url(url: str, field: str) -> tuple[str, str]:
    """(bucket, prefix) of a s3:// URL; the prefix is "" or ends with "/"."""
    return parse_bucket_url(url, "s3", field)


def checkpoint_policy_document(
    bucket: str,
    key_prefix: str,
    data: Sequence[tuple[str, str]] = (),
    staging_bucket: str = "",
) -> dict[str, Any]:
    """IAM policy: read/write/delete under bucket/key_prefix (and the staging bucket's data/)
    only; read-only on exactly each (data bucket, prefix)."""
    if not key_prefix or key_prefix == "/" or any(c in key_prefix for c in "*?"):
        raise ValueError(
            f"checkpoint_prefix: {key_prefix!r} would grant the whole bucket — use e.g. 'job-name/'"
        )
    statements = _read_write("Checkpoint", bucket, key_prefix)
    if staging_bucket:
        statements += _read_write("Staging", staging_bucket, STAGING_PREFIX)
    for i, (data_bucket, data_prefix) in enumerate(data):
        sid = "Data" if i == 0 else f"Data{i}"
        statements.append(
            {
                "Sid": f"{sid}Read",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{data_bucket}/{data_prefix}*",
            }
        )
        data_list: dict[str, Any] = {
            "Sid": f"{sid}List",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": f"arn:aws:s3:::{data_bucket}",
        }
        if data_prefix:
            data_list["Condition"] = {"StringLike": {"s3:prefix": [f"{data_prefix}*"]}}
        statements.append(data_list)
    return {"Version": "2012-10-17", "Statement": statements}


def _read_write(sid: str, bucket: str, prefix: str) -> list[dict[str, Any]]:
    return [
        {
            "Sid": f"{sid}Objects",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            "Resource": f"arn:aws:s3:::{bucket}/{prefix}*",
        },
        {
            "Sid": f"{sid}List",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": f"arn:aws:s3:::{bucket}",
            "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}},
        },
    ]


def s3_data_locations(urls: Sequence[str]) -> list[tuple[str, str]]:
    """(bucket, prefix) of each s3:// URL; data in other clouds cannot be granted by a role."""
    return [parse_s3_url(url, "data_urls") for url in urls if url.startswith("s3://")]


def session_manager_policy_document() -> dict[str, Any]:
    """IAM policy: just what the SSM agent needs for Session Manager shells (no Run Command)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "RegisterInstance",
                "Effect": "Allow",
                "Action": "ssm:UpdateInstanceInformation",
                "Resource": "arn:aws:ec2:*:*:instance/*",
            },
            {
                "Sid": "SessionChannels",
                "Effect": "Allow",
                "Action": list(SESSION_CHANNEL_ACTIONS),
                # These actions have no resource types: AWS accepts them only on "*".
                "Resource": "*",
            },
        ],
    }


def secret_parameter_name(stack: str) -> str:
    """The SSM parameter holding one placement's secret env (SecureString, JSON object)."""
    return f"{SECRET_PARAMETER_PATH}/{stack}/secret-env"


def secret_read_policy_document(parameter_arn: str) -> dict[str, Any]:
    """IAM policy: read (and decrypt) exactly one SSM parameter, the job's secret env.

    The parameter is encrypted with the account's AWS managed key aws/ssm, whose key policy lets
    any principal of the account decrypt through SSM: no kms:Decrypt grant is needed.
    """
    if "*" in parameter_arn or ":parameter/" not in parameter_arn:
        raise ValueError(f"secret parameter: {parameter_arn!r} is not one parameter's ARN")
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "SecretEnvRead",
                "Effect": "Allow",
                "Action": "ssm:GetParameter",
                "Resource": parameter_arn,
            }
        ],
    }


def launched_instances(fleet_instance_sets: Any) -> int:
    """Instances an instant fleet reports launched (its `fleet_instance_sets` output)."""
    total = 0
    for instance_set in fleet_instance_sets or []:
        ids = instance_set.get("instance_ids") if isinstance(instance_set, dict) else None
        if ids is None and isinstance(instance_set, dict):
            ids = instance_set.get("instanceIds")
        total += len(ids or [])
    return total


# Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04): NVIDIA driver, Docker and the
# NVIDIA container toolkit preinstalled, so the start-up script installs nothing.
GPU_AMI_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
)
ROOT_DEVICE_NAME = "/dev/sda1"  # root device of the Ubuntu DLAMIs
# Its open kernel modules drive Turing and later only, so V100 (Volta: p3, p3dn) boots the
# Deep Learning Base Proprietary Nvidia Driver AMI (Amazon Linux 2): NVIDIA's proprietary R570
# driver (Volta supported), Docker and the container toolkit; the DLAMI release notes list P3 and
# P3dn among its supported instances (version 71.6, driver 570.195.03). The parameter name is the
# DLAMI name less "deep", "learning" and "ami" (DLAMI guide, "Finding the ID of a DLAMI").
# Amazon Linux's root device is /dev/xvda. router/data/images.csv keeps the same record.
VOLTA_AMI_PARAMETER = (
    "/aws/service/deeplearning/ami/x86_64/base-proprietary-nvidia-driver-amazon-linux-2/latest/"
    "ami-id"
)
GPU_IMAGES: dict[str, tuple[str, str]] = {"V100": (VOLTA_AMI_PARAMETER, "/dev/xvda")}


def gpu_image(gpu: str) -> tuple[str, str]:
    """(SSM parameter of the AMI, its root device name) for nodes with this GPU."""
    return GPU_IMAGES.get(gpu, (GPU_AMI_PARAMETER, ROOT_DEVICE_NAME))
