"""A job's s3:// bucket that the AWS job boundary denies (not spotroute-*, not in the bootstrap's
awsJobBuckets) is a one-line warning at validate, plan and deploy, naming the bucket and the key.

The boundary (components/bootstrap/aws_boundary.py) allows S3 object access on this account's
`spotroute-*` buckets and the listed ones only; the job would deploy and then get AccessDenied on
its nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.bootstrap.aws_boundary import AWS_JOB_NAME_PREFIX
from router.config.job_file import load_job
from router.core.aws_job_reach import OWN_BUCKET_PREFIX, UnlistedBucket, unlisted_buckets
from tests.unit.cli_harness import Run, isolate, route, write_job

JOB = """\
name: reach
resources: {{accelerators: "T4:1", clouds: {clouds}}}
market: on-demand
duration_hours: 1
checkpoint: {{interval: 10m, url: "{checkpoint}"}}
data: {data}
run: {{command: [python, train.py]}}
"""
DATA = ('[{url: "s3://listed-data/corpus/", region: us-east-1, size_gb: 10}, '
        '{url: "gs://somewhere/x", region: us-central1, size_gb: 1}]')
BOOTSTRAP = """\
config:
  spotroute-bootstrap:clouds: [{clouds}]
  spotroute-bootstrap:home: aws
  spotroute-bootstrap:awsJobBuckets: [listed-data, other-acct@123456789012]
"""


def job_text(
    checkpoint: str = "s3://acme-ckpt/train/", clouds: str = "[aws]", data: str = DATA
) -> str:
    return JOB.format(checkpoint=checkpoint, clouds=clouds, data=data)


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate(monkeypatch, tmp_path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The cwd as a spotroute project whose bootstrap selects aws."""
    work = tmp_path / "work"
    (work / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    (work / "stacks").mkdir()
    (work / "stacks" / "Pulumi.bootstrap.yaml").write_text(BOOTSTRAP.format(clouds="aws, gcp"))
    return work


def warned(run: Run) -> list[str]:
    return [line for line in run.err_lines if line.startswith("warning: ")]


def test_own_prefix_is_the_boundarys() -> None:
    assert OWN_BUCKET_PREFIX == AWS_JOB_NAME_PREFIX


def test_only_unlisted_buckets_outside_spotroute_are_found(tmp_path: Path) -> None:
    data = ('[{url: "s3://listed-data/c/", region: us-east-1, size_gb: 1, replicas: '
            '[{url: "s3://mirror/c/", region: us-west-2}]}, '
            '{url: "s3://other-acct/d/", region: us-east-1, size_gb: 1}, '
            '{url: "s3://spotroute-reach-ckpt-1/d/", region: us-east-1, size_gb: 1}]')  # fmt: skip
    job = load_job(write_job(tmp_path / "j.yaml", job_text(data=data)))

    found = unlisted_buckets(job, ["listed-data", "other-acct@123456789012"])

    assert found == [
        UnlistedBucket("checkpoint.url", "acme-ckpt"),
        UnlistedBucket("data[0].replicas[0].url", "mirror"),
    ]


def test_a_job_that_cannot_run_on_aws_is_not_bound_by_the_aws_boundary(tmp_path: Path) -> None:
    job = load_job(write_job(tmp_path / "j.yaml", job_text(clouds="[gcp]")))

    assert unlisted_buckets(job, []) == []


@pytest.mark.parametrize("verb", ["validate", "plan"])
def test_validate_and_plan_warn_of_a_checkpoint_bucket_the_boundary_denies(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], project: Path, verb: str
) -> None:
    job = write_job(project / "job.yaml", job_text())

    run = route(monkeypatch, capsys, verb, job)

    assert run.code == 0, run.err
    [line] = warned(run)
    assert line.startswith(f"warning: {job}: checkpoint.url: s3 bucket 'acme-ckpt' is not in ")
    assert "spotroute-bootstrap:awsJobBuckets (stacks/Pulumi.bootstrap.yaml)" in line
    assert line.endswith("and run `route bootstrap`")


def test_deploy_warns_before_anything_else(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], project: Path
) -> None:
    job = write_job(project / "job.yaml", job_text())

    # --to azure: the job runs on aws only, so deploy stops after planning.
    run = route(monkeypatch, capsys, "deploy", job, "--to", "azure", "--yes")

    assert run.code == 1
    assert [w.split(": ")[2] for w in warned(run)] == ["checkpoint.url"]


@pytest.mark.parametrize(
    ("bootstrap", "checkpoint"),
    [
        (None, "s3://acme-ckpt/train/"),  # no bootstrap here: no boundary to compare with
        (BOOTSTRAP.format(clouds="gcp"), "s3://acme-ckpt/train/"),  # no AWS deployer
        (BOOTSTRAP.format(clouds="aws"), "s3://listed-data/ckpt/"),  # listed
        (BOOTSTRAP.format(clouds="aws"), "auto"),  # spotroute's own bucket
        ("config: [not, a, mapping", "s3://acme-ckpt/train/"),  # route bootstrap reports it
    ],
)
def test_no_warning_where_the_boundary_allows_or_is_unknown(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    project: Path,
    bootstrap: str | None,
    checkpoint: str,
) -> None:
    stack_file = project / "stacks" / "Pulumi.bootstrap.yaml"
    if bootstrap is None:
        stack_file.unlink()
    else:
        stack_file.write_text(bootstrap)
    job = write_job(project / "job.yaml", job_text(checkpoint=checkpoint))

    run = route(monkeypatch, capsys, "validate", job)

    assert run.code == 0 and warned(run) == [], run.err
