"""The pure exposure model: IAM statements in full, and which changes widen access."""

from __future__ import annotations

import json
from typing import Any

from router.core.exposure import diff, exposure, review_markdown, statement_lines

POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": "arn:aws:s3:::ckpt/job/*"},
        {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::ckpt",
         "Condition": {"StringLike": {"s3:prefix": ["job/*"]}}},
    ],
}


def _stack(policy: dict[str, Any], block: bool = True, cidrs: tuple[str, ...] = ()) -> list[Any]:
    return [
        {"type": "aws:iam/rolePolicy:RolePolicy", "name": "job-ckpt", "custom": True,
         "inputs": {"policy": json.dumps(policy), "role": "job-role"}},
        {"type": "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "name": "job-pab",
         "custom": True, "inputs": {"blockPublicPolicy": block, "bucket": "ckpt"}},
        {"type": "aws:ec2/securityGroup:SecurityGroup", "name": "job-sg", "custom": True,
         "inputs": {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22,
                                 "cidrBlocks": [c]} for c in cidrs]}},
        {"type": "spotroute:aws:JobIdentity", "name": "job", "custom": False, "inputs": {}},
    ]


def test_a_policy_document_is_one_line_per_action_and_resource_with_its_condition() -> None:
    assert statement_lines(POLICY) == [
        "Allow s3:GetObject on arn:aws:s3:::ckpt/job/*",
        "Allow s3:PutObject on arn:aws:s3:::ckpt/job/*",
        'Allow s3:ListBucket on arn:aws:s3:::ckpt if {"StringLike": {"s3:prefix": ["job/*"]}}',
    ]


def test_an_added_action_an_opened_port_and_a_removed_block_widen() -> None:
    wider = {**POLICY, "Statement": [*POLICY["Statement"],
                                     {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    d = diff(exposure(_stack(POLICY)),
             exposure(_stack(wider, block=False, cidrs=("0.0.0.0/0",))))
    widened = sorted(ln.text for ln in d.widened)
    assert widened == sorted([
        "policy: Allow s3:* on *",
        "blockPublicPolicy: true",
        'ingress: {"cidrBlocks": ["0.0.0.0/0"], "fromPort": 22, "protocol": "tcp", "toPort": 22}',
    ])
    assert [ln.text for ln in d.narrowed] == ["blockPublicPolicy: false"]


def test_a_removed_grant_narrows_and_nothing_widens() -> None:
    narrower = {**POLICY, "Statement": POLICY["Statement"][:1]}
    d = diff(exposure(_stack(POLICY)), exposure(_stack(narrower)))
    assert d.widened == ()
    assert [ln.text for ln in d.narrowed] == [
        'policy: Allow s3:ListBucket on arn:aws:s3:::ckpt if {"StringLike": {"s3:prefix": '
        '["job/*"]}}'
    ]


def test_markdown_leads_with_what_widened_then_lists_everything() -> None:
    before, after = exposure(_stack(POLICY)), exposure(_stack(POLICY, cidrs=("10.0.0.0/8",)))
    text = review_markdown("job", "main", after, diff(before, after))
    assert text.splitlines()[:3] == [
        "## spotroute review: `job` against `main`", "",
        "**1 widened, 0 narrowed** — needs a reviewer's approval",
    ]
    assert "+ [network ingress and egress] SecurityGroup job-sg: ingress:" in text
    assert "#### IAM roles and policies (1)" in text
    assert "JobIdentity" not in text, "component wrappers are not resources"
