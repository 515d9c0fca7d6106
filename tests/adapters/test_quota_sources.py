"""The quota sources through the real boto3, google-cloud-compute and azure-mgmt-compute clients,
against loopback fakes of Service Quotas + CloudWatch, Compute regions.get and Compute usages."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

from router.core.errors import CredentialsMissing, OperationFailed
from router.core.quotas import QuotaReading
from router.prices.quotas import aws, azure, gcp
from router.prices.quotas.request import QuotaRequest
from tests.adapters.fake_azure import FakeCredential, TlsFiles, make_tls
from tests.adapters.fake_quotas import AwsQuota, FakeAwsQuotas, FakeAzureUsage, FakeGcpRegions

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
SUB = "00000000-0000-0000-0000-000000000001"


def table(readings: list[QuotaReading]) -> dict[tuple[str, str], tuple[float, float]]:
    return {(r.region, r.quota): (r.limit, r.usage) for r in readings}


# --- AWS ----------------------------------------------------------------------------------------


@pytest.fixture
def fake_aws() -> Iterator[FakeAwsQuotas]:
    server = FakeAwsQuotas().start()
    yield server
    server.stop()


def aws_session() -> boto3.Session:
    return boto3.Session(
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="fake-secret",
        region_name="us-east-1",
    )


def aws_request(*codes: str, regions: tuple[str, ...] = ("us-east-1", "us-west-2")) -> QuotaRequest:
    return QuotaRequest(quotas=codes, regions=regions, timeout_s=5.0, max_attempts=2)


def test_aws_limits_come_from_service_quotas_and_usage_from_cloudwatch(
    fake_aws: FakeAwsQuotas,
) -> None:
    fake_aws.quotas = {
        ("us-east-1", "L-7212CCBC"): AwsQuota(0),
        ("us-west-2", "L-7212CCBC"): AwsQuota(96),
        ("us-east-1", "L-417A185B"): AwsQuota(384),
        ("us-west-2", "L-417A185B"): AwsQuota(128, applied=False),  # only the AWS default
    }
    fake_aws.usage = {("us-east-1", "P/OnDemand"): 96.0}

    readings = aws.fetch_quotas(
        aws_request("L-7212CCBC", "L-417A185B"),
        now=NOW,
        session=aws_session(),
        endpoint_url=fake_aws.url,
    )

    assert table(readings) == {
        ("us-east-1", "L-417A185B"): (384, 96),
        ("us-east-1", "L-7212CCBC"): (0, 0),
        ("us-west-2", "L-417A185B"): (128, 0),  # no datapoints: nothing in use
        ("us-west-2", "L-7212CCBC"): (96, 0),
    }
    assert {r.name for r in readings} >= {"All P4, P3 and P2 Spot Instance Requests"}
    assert all(r.unit == "vcpus" and r.source == aws.SOURCE for r in readings)
    # One GetMetricData per region for all its quotas; the default only where none is applied.
    operations = sorted(op for _, op in fake_aws.calls)
    assert operations.count("GetMetricData") == 2
    assert ("us-west-2", "GetAWSDefaultServiceQuota") in fake_aws.calls


def test_aws_quota_unknown_in_a_region_is_left_out_not_zero(fake_aws: FakeAwsQuotas) -> None:
    fake_aws.quotas = {("us-west-2", "L-C4BD4855"): AwsQuota(192)}

    readings = aws.fetch_quotas(
        aws_request("L-C4BD4855"), now=NOW, session=aws_session(), endpoint_url=fake_aws.url
    )

    assert table(readings) == {("us-west-2", "L-C4BD4855"): (192, 0)}


def test_aws_denied_quota_read_names_the_iam_action(fake_aws: FakeAwsQuotas) -> None:
    fake_aws.deny = {"GetServiceQuota"}

    with pytest.raises(OperationFailed) as caught:
        aws.fetch_quotas(
            aws_request("L-7212CCBC"), now=NOW, session=aws_session(), endpoint_url=fake_aws.url
        )

    assert "servicequotas:GetServiceQuota" in caught.value.message
    assert "us-east-1" in caught.value.message


def test_aws_denied_usage_read_names_the_cloudwatch_action(fake_aws: FakeAwsQuotas) -> None:
    fake_aws.quotas = {("us-east-1", "L-7212CCBC"): AwsQuota(8)}
    fake_aws.deny = {"GetMetricData"}

    with pytest.raises(OperationFailed) as caught:
        aws.fetch_quotas(
            aws_request("L-7212CCBC", regions=("us-east-1",)),
            now=NOW,
            session=aws_session(),
            endpoint_url=fake_aws.url,
        )

    assert "cloudwatch:GetMetricData" in caught.value.message


def test_aws_without_credentials_is_credentials_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")

    with pytest.raises(CredentialsMissing) as caught:
        aws.fetch_quotas(aws_request("L-7212CCBC"), now=NOW, session=boto3.Session())

    assert "quotas stay unknown" in caught.value.message


# --- GCP ----------------------------------------------------------------------------------------


@pytest.fixture
def fake_gcp() -> Iterator[FakeGcpRegions]:
    server = FakeGcpRegions().start()
    yield server
    server.stop()


def gcp_client(fake: FakeGcpRegions) -> compute_v1.RegionsClient:
    return compute_v1.RegionsClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=fake.endpoint),
    )


def test_gcp_reads_gpu_and_cpu_metrics_of_each_region(fake_gcp: FakeGcpRegions) -> None:
    fake_gcp.quotas = {
        "us-central1": {
            "NVIDIA_A100_80GB_GPUS": (16, 8),
            "PREEMPTIBLE_NVIDIA_A100_80GB_GPUS": (0, 0),
            "A2_CPUS": (192, 96),
            "SSD_TOTAL_GB": (10000, 0),  # not asked for: not stored
        },
        "europe-west4": {"NVIDIA_A100_80GB_GPUS": (8, 0)},
    }
    request = QuotaRequest(
        quotas=("NVIDIA_A100_80GB_GPUS", "PREEMPTIBLE_NVIDIA_A100_80GB_GPUS", "A2_CPUS"),
        regions=("us-central1", "europe-west4"),
        timeout_s=5.0,
    )

    readings = gcp.fetch_quotas(
        request, now=NOW, regions_client=gcp_client(fake_gcp), project="spotroute-test"
    )

    assert table(readings) == {
        ("europe-west4", "NVIDIA_A100_80GB_GPUS"): (8, 0),
        ("us-central1", "A2_CPUS"): (192, 96),
        ("us-central1", "NVIDIA_A100_80GB_GPUS"): (16, 8),
        ("us-central1", "PREEMPTIBLE_NVIDIA_A100_80GB_GPUS"): (0, 0),
    }
    units = {r.quota: r.unit for r in readings}
    assert units["A2_CPUS"] == "vcpus" and units["NVIDIA_A100_80GB_GPUS"] == "gpus"
    assert "/compute/v1/projects/spotroute-test/regions/us-central1" in fake_gcp.seen


def test_gcp_retries_a_busy_region_with_backoff(fake_gcp: FakeGcpRegions) -> None:
    fake_gcp.quotas = {"us-central1": {"NVIDIA_L4_GPUS": (8, 0)}}
    fake_gcp.fail_next = [503, 429]
    waits: list[float] = []

    readings = gcp.fetch_quotas(
        QuotaRequest(quotas=("NVIDIA_L4_GPUS",), regions=("us-central1",), max_attempts=3),
        now=NOW,
        regions_client=gcp_client(fake_gcp),
        project="spotroute-test",
        sleep=waits.append,
    )

    assert table(readings) == {("us-central1", "NVIDIA_L4_GPUS"): (8, 0)}
    assert len(waits) == 2 and len(fake_gcp.seen) == 3


def test_gcp_forbidden_names_the_permission(fake_gcp: FakeGcpRegions) -> None:
    fake_gcp.status = 403

    with pytest.raises(OperationFailed) as caught:
        gcp.fetch_quotas(
            QuotaRequest(quotas=("CPUS",), regions=("us-central1",), max_attempts=1),
            now=NOW,
            regions_client=gcp_client(fake_gcp),
            project="spotroute-test",
        )

    assert "compute.regions.get" in caught.value.message


# --- Azure --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("quota-tls"))


@pytest.fixture
def fake_azure(tls: TlsFiles) -> Iterator[FakeAzureUsage]:
    server = FakeAzureUsage(tls_files=tls).start()
    yield server
    server.stop()


def azure_client(fake: FakeAzureUsage) -> object:
    from azure.mgmt.compute import ComputeManagementClient

    assert fake.tls is not None
    return ComputeManagementClient(
        credential=FakeCredential(),
        subscription_id=SUB,
        base_url=fake.url,
        connection_verify=str(fake.tls.ca_path),
    )


def test_azure_reads_family_total_and_spot_vcpus_across_pages(fake_azure: FakeAzureUsage) -> None:
    fake_azure.usages = {
        "eastus": {
            "cores": (350, 24),
            "StandardNCADSA100v4Family": (96, 24),  # Azure's own casing differs from ours
            "lowPriorityCores": (100, 0),
            "standardDSv5Family": (100, 0),  # not a GPU family we ask for
        }
    }
    request = QuotaRequest(
        quotas=("cores", "lowPriorityCores", "standardNCADSA100v4Family"),
        regions=("eastus",),
        timeout_s=5.0,
    )

    readings = azure.fetch_quotas(request, now=NOW, compute_client=azure_client(fake_azure))  # type: ignore[arg-type]

    assert table(readings) == {
        ("eastus", "cores"): (350, 24),
        ("eastus", "lowPriorityCores"): (100, 0),
        ("eastus", "standardNCADSA100v4Family"): (96, 24),
    }


def test_azure_forbidden_names_the_permission(fake_azure: FakeAzureUsage) -> None:
    fake_azure.status = 403

    with pytest.raises(OperationFailed) as caught:
        azure.fetch_quotas(
            QuotaRequest(quotas=("cores",), regions=("eastus",), max_attempts=1),
            now=NOW,
            compute_client=azure_client(fake_azure),  # type: ignore[arg-type]
        )

    assert "Microsoft.Compute/locations/usages/read" in caught.value.message


def test_azure_without_subscription_says_how_to_set_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)

    with pytest.raises(CredentialsMissing) as caught:
        azure.fetch_quotas(QuotaRequest(quotas=("cores",), regions=("eastus",)), now=NOW)

    assert "AZURE_SUBSCRIPTION_ID" in caught.value.message


def test_every_public_cloud_has_a_quota_source_with_the_price_sources_shape() -> None:
    from router.contract.clouds import PUBLIC_CLOUDS
    from router.prices.quotas.sources import SOURCES, quota_source

    assert tuple(SOURCES) == PUBLIC_CLOUDS
    for cloud in PUBLIC_CLOUDS:
        assert callable(quota_source(cloud).fetch)
