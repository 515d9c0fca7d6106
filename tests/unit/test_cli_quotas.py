"""`route quotas` and quota-aware `route plan`, as a user runs them: real `route` processes, a
fake AWS account behind AWS_ENDPOINT_URL (Service Quotas + CloudWatch wire format), private home.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.prices.quotas.cache import QuotaCache, default_path
from router.prices.quotas.learn import is_quota_error, parse_quota_error, record_quota_failure
from tests.adapters.fake_quotas import AwsQuota, FakeAwsQuotas
from tests.unit.cli_harness import REPO, Run, clean_env, write_job

SPOT_A100_JOB = """\
name: quota-check
resources:
  accelerators: A100-80GB:8
  clouds: [aws]
  regions:
    allow: [us-east-1, us-west-2]
market: spot
duration_hours: 24
checkpoint:
  interval: 30m
  restore_overhead: 10m
run:
  image: ghcr.io/acme/trainer:1.0
  command: [python, train.py]
"""
REQUEST_US_EAST_1 = (
    "aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "
    "L-7212CCBC --desired-value 96 --region us-east-1"
)


def is_a100_spot_in(rejection: dict[str, object], region: str) -> bool:
    return (rejection["region"], rejection["instance_type"], rejection["market"]) == (
        region,
        "p4de.24xlarge",
        "spot",
    )


@pytest.fixture
def account() -> Iterator[FakeAwsQuotas]:
    """A new AWS account: no P spot quota in us-east-1, 96 vCPUs of it in us-west-2."""
    fake = FakeAwsQuotas()
    fake.quotas = {
        ("us-east-1", "L-7212CCBC"): AwsQuota(0),
        ("us-west-2", "L-7212CCBC"): AwsQuota(96),
        ("us-east-1", "L-417A185B"): AwsQuota(0, applied=False),
        ("us-west-2", "L-417A185B"): AwsQuota(0, applied=False),
    }
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "spotroute-home"


def route(
    home: Path,
    *args: str | Path,
    fake: FakeAwsQuotas | None = None,
    python_flags: tuple[str, ...] = (),
) -> Run:
    scratch = home.parent / "user-home"
    scratch.mkdir(exist_ok=True)
    extra = {}
    if fake is not None:
        extra = {
            "AWS_ENDPOINT_URL": fake.url,
            "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
            "AWS_SECRET_ACCESS_KEY": "fake-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
    done = subprocess.run(
        [sys.executable, *python_flags, "-m", "router", *(str(a) for a in args)],
        cwd=home.parent,
        env=clean_env(home, scratch, extra),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def refresh(home: Path, fake: FakeAwsQuotas) -> Run:
    run = route(
        home, "quotas", "refresh", "--clouds", "aws", "--regions", "us-east-1,us-west-2",
        fake=fake,
    )  # fmt: skip
    assert run.code == 0, run.out + run.err
    return run


def test_plan_ranks_the_region_with_quota_first_and_explains_the_rejected_one(
    home: Path, tmp_path: Path, account: FakeAwsQuotas
) -> None:
    job = write_job(tmp_path / "job.yaml", SPOT_A100_JOB)
    refreshed = refresh(home, account)
    assert "aws quotas: 4 readings" in refreshed.out

    run = route(home, "plan", job, "--explain", "--json")

    assert run.code == 0, run.err
    plan = run.json()
    first = plan["placements"][0]
    assert (first["region"], first["instance_type"], first["market"]) == (
        "us-west-2",
        "p4de.24xlarge",
        "spot",
    )
    assert first["quota"] == {"status": "ok", "note": ""}
    assert {p["region"] for p in plan["placements"]} == {"us-west-2"}
    east = [r for r in plan["rejected"] if is_a100_spot_in(r, "us-east-1")]
    assert east, plan["rejected"]
    for rejection in east:
        reason = rejection["reason"]
        assert reason.startswith(
            'quota L-7212CCBC "All P4, P3 and P2 Spot Instance Requests" in us-east-1: '
            "96 vCPUs needed, 0 free (limit 0, 0 in use"
        ), reason
        assert REQUEST_US_EAST_1 in reason
        assert "https://us-east-1.console.aws.amazon.com/servicequotas/" in reason

    table = route(home, "plan", job, "--explain")
    assert table.code == 0, table.err
    rows = [line for line in table.out.splitlines() if "p4de.24xlarge" in line]
    assert "usw2-az" in rows[0]  # ranked first in the table too
    assert "L-7212CCBC" in table.out and "request-service-quota-increase" in table.out


def test_plan_reads_quotas_from_the_cache_without_importing_a_cloud_sdk(
    home: Path, tmp_path: Path, account: FakeAwsQuotas
) -> None:
    job = write_job(tmp_path / "job.yaml", SPOT_A100_JOB)
    refresh(home, account)

    run = route(home, "plan", job, "--json", python_flags=("-X", "importtime"))

    assert run.code == 0
    assert run.json()["placements"][0]["quota"]["status"] == "ok"
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in run.err.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "router.prices.quotas.cache" in modules
    assert not [m for m in modules if m.split(".")[0] in ("boto3", "botocore", "google", "azure")]


def test_quotas_table_and_json_show_limit_usage_and_free(
    home: Path, account: FakeAwsQuotas
) -> None:
    account.usage = {("us-west-2", "P/Spot"): 32.0}
    refresh(home, account)

    listed = route(home, "quotas", "--json")
    shown = route(home, "quotas", "--regions", "us-west-2")

    assert listed.code == 0, listed.err
    rows = {(q["region"], q["quota"]): q for q in listed.json()["quotas"]}
    west = rows[("us-west-2", "L-7212CCBC")]
    assert (west["limit"], west["usage"], west["free"], west["unit"]) == (96, 32, 64, "vcpus")
    assert west["source"] == "aws-service-quotas"
    assert "--desired-value 97" in west["request"]
    assert listed.json()["launch_failures"] == []
    assert shown.code == 0
    assert "L-7212CCBC" in shown.out and "us-east-1" not in shown.out


def test_quota_never_read_marks_placements_unknown_and_rejects_nothing(
    home: Path, tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job.yaml", SPOT_A100_JOB)

    run = route(home, "plan", job, "--json", "--explain")

    plan = run.json()
    assert run.code == 0
    assert {p["quota"]["status"] for p in plan["placements"]} == {"unknown"}
    assert "route quotas refresh" in plan["placements"][0]["quota"]["note"]
    assert not [r for r in plan["rejected"] if "quota" in r["reason"]]
    assert any("quota unknown" in reason for reason in plan["placements"][0]["reasons"])


def test_refresh_without_credentials_fails_in_one_line_per_cloud(home: Path) -> None:
    run = route(home, "quotas", "refresh", "--clouds", "aws", "--timeout", "2")

    assert run.code == 1
    lines = [line for line in (run.out + run.err).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "aws quotas" in lines[0] and "credentials" in lines[0]
    assert "Traceback" not in run.err


def test_failed_launch_is_learned_and_the_next_plan_rejects_that_region(
    home: Path, tmp_path: Path, account: FakeAwsQuotas
) -> None:
    job = write_job(tmp_path / "job.yaml", SPOT_A100_JOB)
    refresh(home, account)

    # The failover path: us-west-2 refused the launch although the last read said 96 free.
    failures = record_quota_failure(
        cloud="aws",
        region="us-west-2",
        instance_type="p4de.24xlarge",
        market="spot",
        message="MaxSpotInstanceCountExceeded: Max spot instance count exceeded",
        now=datetime.now(UTC),
        cache_path=default_path(home),
    )
    run = route(home, "plan", job, "--json", "--explain")

    assert [f.quota for f in failures] == ["L-7212CCBC"]
    assert run.code == 1  # nothing left to place
    west = [r for r in run.json()["rejected"] if is_a100_spot_in(r, "us-west-2")]
    assert west
    assert all(
        "a launch of p4de.24xlarge (spot, 96 vCPUs) failed on it" in r["reason"]
        and "MaxSpotInstanceCountExceeded" in r["reason"]
        for r in west
    )
    listed = route(home, "quotas", "--json").json()
    assert [f["quota"] for f in listed["launch_failures"]] == ["L-7212CCBC"]

    # Once the quota is read again, the fresh numbers decide.
    refresh(home, account)
    again = route(home, "plan", job, "--json")
    assert again.code == 0
    assert again.json()["placements"][0]["region"] == "us-west-2"


def test_quota_named_in_gcp_and_azure_launch_errors() -> None:
    gcp = "Quota 'PREEMPTIBLE_NVIDIA_A100_80GB_GPUS' exceeded.  Limit: 0.0 in region us-central1."
    azure = (
        "Operation could not be completed as it results in exceeding approved "
        "StandardNCADSA100v4Family Cores quota. Additional details - Deployment Model: Resource "
        "Manager, Location: eastus, Current Limit: 0, Current Usage: 0"
    )
    spot = (
        "Operation results in exceeding quota limits of Core. Maximum allowed: 0, Current in use: "
        "0, Additional requested: 24. (LowPriorityCores)"
    )

    assert parse_quota_error("gcp", gcp) == "PREEMPTIBLE_NVIDIA_A100_80GB_GPUS"
    assert parse_quota_error("azure", azure) == "standardNCADSA100v4Family"
    assert parse_quota_error("azure", spot) == "lowPriorityCores"
    assert parse_quota_error("aws", "MaxSpotInstanceCountExceeded") is None
    assert is_quota_error("aws", "MaxSpotInstanceCountExceeded: Max spot instance count exceeded")
    assert is_quota_error("aws", "VcpuLimitExceeded: You have requested more vCPU capacity")
    assert not is_quota_error("aws", "InsufficientInstanceCapacity: no p4de capacity in use1-az6")
    assert is_quota_error("gcp", gcp) and is_quota_error("azure", spot)
    assert not is_quota_error("gcp", "ZONE_RESOURCE_POOL_EXHAUSTED: does not have enough resources")


def test_prices_refresh_also_reads_quotas(home: Path) -> None:
    run = route(home, "prices", "refresh", "--clouds", "aws", "--timeout", "2", "--json")

    [outcome] = run.json()
    assert outcome["quota_readings_stored"] == 0
    assert "credentials" in outcome["quota_error"]
    assert not default_path(home).exists() or QuotaCache(default_path(home)).latest() == []


def test_quotas_help_points_at_the_docs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "router", "quotas", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert "docs/quotas.md" in done.stdout


def test_a_refresh_error_is_shown_as_written_not_read_as_markup(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from router.cli.render_quotas import refresh_summary
    from router.prices.quotas.book import QuotaRefreshOutcome

    outcome = QuotaRefreshOutcome(
        cloud="gcp",
        regions=("us-central1",),
        quotas=1,
        readings_stored=0,
        elapsed_s=0.1,
        error="GCP regions.get failed for [bold]us-central1[/bold] — retry later",
    )
    refresh_summary([outcome])
    assert "[bold]us-central1[/bold]" in capsys.readouterr().out
