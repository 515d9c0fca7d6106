"""The pure quota check (router.core.quotas), the quota data files, and the quota cache."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from router.config.datafiles import load_catalog, load_quota_definitions, load_type_quotas
from router.core.errors import BadInput, OperationFailed
from router.core.quotas import (
    LaunchFailure,
    QuotaBook,
    QuotaReading,
    parse_groups,
    parse_quota_definitions,
    parse_type_quotas,
)
from router.prices.quotas.cache import QuotaCache

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def reading(
    region: str, quota: str, limit: float, usage: float = 0, *, cloud: str = "aws", age_h: float = 1
) -> QuotaReading:
    return QuotaReading(
        cloud=cloud,
        region=region,
        quota=quota,
        limit=limit,
        usage=usage,
        source="test",
        observed_at=NOW - timedelta(hours=age_h),
    )


def book(*readings: QuotaReading, failures: tuple[LaunchFailure, ...] = ()) -> QuotaBook:
    return QuotaBook(load_quota_definitions(), load_type_quotas(), readings, failures, now=NOW)


# --- the check ------------------------------------------------------------------------------


def test_enough_free_quota_passes() -> None:
    verdict = book(reading("us-west-2", "L-7212CCBC", 96)).check(
        "aws", "us-west-2", "p4de.24xlarge", "spot", 1
    )

    assert verdict.status == "ok"


def test_short_quota_names_quota_numbers_and_request_command() -> None:
    verdict = book(reading("us-west-2", "L-7212CCBC", 192, 128)).check(
        "aws", "us-west-2", "p4de.24xlarge", "spot", 1
    )

    assert verdict.status == "short"
    assert verdict.note.startswith(
        'quota L-7212CCBC "All P4, P3 and P2 Spot Instance Requests" in us-west-2: 96 vCPUs '
        "needed, 64 free (limit 192, 128 in use, read 1.0 h ago) — request more: "
    )
    # Desired value = what is in use + what this job needs.
    assert "--desired-value 224 --region us-west-2" in verdict.note


def test_need_counts_every_node() -> None:
    quotas = book(reading("us-west-2", "L-7212CCBC", 96))

    assert quotas.check("aws", "us-west-2", "p4de.24xlarge", "spot", 1).status == "ok"
    two = quotas.check("aws", "us-west-2", "p4de.24xlarge", "spot", 2)
    assert two.status == "short" and "192 vCPUs needed" in two.note


def test_spot_and_on_demand_draw_on_different_quotas() -> None:
    quotas = book(reading("us-east-1", "L-7212CCBC", 0), reading("us-east-1", "L-417A185B", 96))

    assert quotas.check("aws", "us-east-1", "p4de.24xlarge", "on-demand", 1).status == "ok"
    assert quotas.check("aws", "us-east-1", "p4de.24xlarge", "spot", 1).status == "short"


def test_quota_never_read_is_unknown_and_says_how_to_read_it() -> None:
    verdict = book().check("aws", "us-east-1", "p4de.24xlarge", "spot", 1)

    assert verdict.status == "unknown"
    assert "L-7212CCBC in us-east-1" in verdict.note and "route quotas refresh" in verdict.note


def test_type_without_mapping_is_unknown_not_rejected() -> None:
    verdict = book().check("aws", "us-east-1", "x9.mystery", "spot", 1)

    assert verdict.status == "unknown" and "no quota is mapped" in verdict.note


def test_gcp_spot_uses_preemptible_quota_when_granted_else_the_regular_one() -> None:
    metric, preemptible = "NVIDIA_A100_80GB_GPUS", "PREEMPTIBLE_NVIDIA_A100_80GB_GPUS"
    regular_only = book(
        reading("us-central1", preemptible, 0, cloud="gcp"),
        reading("us-central1", metric, 8, cloud="gcp"),
    )
    preemptible_full = book(
        reading("us-central1", preemptible, 8, 8, cloud="gcp"),
        reading("us-central1", metric, 16, cloud="gcp"),
    )

    assert regular_only.check("gcp", "us-central1", "a2-ultragpu-8g", "spot", 1).status == "ok"
    full = preemptible_full.check("gcp", "us-central1", "a2-ultragpu-8g", "spot", 1)
    assert full.status == "short" and preemptible in full.note and "8 GPUs needed" in full.note


def test_every_quota_of_a_launch_must_fit() -> None:
    # a2-ultragpu-8g on demand: 8 A100-80GB GPUs and 96 A2 vCPUs.
    quotas = book(
        reading("us-central1", "NVIDIA_A100_80GB_GPUS", 8, cloud="gcp"),
        reading("us-central1", "A2_CPUS", 64, cloud="gcp"),
    )

    verdict = quotas.check("gcp", "us-central1", "a2-ultragpu-8g", "on-demand", 1)

    assert verdict.status == "short" and "A2_CPUS" in verdict.note


def test_azure_spot_counts_only_against_the_low_priority_total() -> None:
    quotas = book(
        reading("eastus", "lowPriorityCores", 100, cloud="azure"),
        reading("eastus", "standardNDAMSv4_A100Family", 0, cloud="azure"),
    )

    assert quotas.check("azure", "eastus", "Standard_ND96amsr_A100_v4", "spot", 1).status == "ok"
    od = quotas.check("azure", "eastus", "Standard_ND96amsr_A100_v4", "on-demand", 1)
    assert od.status == "short" and "az quota update" in od.note


def test_local_and_reserved_capacity_need_no_quota() -> None:
    assert book().check("local", "local", "local-a100x8", "spot", 1).status == "not needed"
    assert book().check("aws", "us-east-1", "p4de.24xlarge", "reserved", 1).status == "not needed"


def failure(region: str, *, needed: float = 96, age_h: float = 0.5) -> LaunchFailure:
    return LaunchFailure(
        cloud="aws",
        region=region,
        quota="L-7212CCBC",
        instance_type="p4de.24xlarge",
        market="spot",
        needed=needed,
        message="MaxSpotInstanceCountExceeded",
        observed_at=NOW - timedelta(hours=age_h),
    )


def test_launch_failure_after_the_last_read_rejects() -> None:
    quotas = book(reading("us-west-2", "L-7212CCBC", 96, age_h=2), failures=(failure("us-west-2"),))

    verdict = quotas.check("aws", "us-west-2", "p4de.24xlarge", "spot", 1)

    assert verdict.status == "short"
    assert "a launch of p4de.24xlarge (spot, 96 vCPUs) failed on it 0.5 h ago" in verdict.note


def test_launch_failure_is_superseded_by_a_newer_read() -> None:
    quotas = book(
        reading("us-west-2", "L-7212CCBC", 192, age_h=0.1),
        failures=(failure("us-west-2", age_h=0.5),),
    )

    assert quotas.check("aws", "us-west-2", "p4de.24xlarge", "spot", 1).status == "ok"


def test_launch_failure_rejects_only_needs_at_least_as_large() -> None:
    quotas = book(failures=(failure("us-west-2", needed=192),))

    # p3.2xlarge spot (8 vCPUs) draws on the same quota but asks for far less: not rejected.
    assert quotas.check("aws", "us-west-2", "p3.2xlarge", "spot", 1).status == "unknown"
    assert quotas.check("aws", "us-west-2", "p4de.24xlarge", "spot", 2).status == "short"


# --- the data files -------------------------------------------------------------------------


def test_every_catalog_type_names_its_quotas_for_both_markets() -> None:
    mapped = {(t.cloud, t.instance_type): t for t in load_type_quotas()}

    for it in load_catalog():
        quotas = mapped[(it.cloud, it.instance_type)]
        assert quotas.on_demand and quotas.spot, it.instance_type


def test_every_quota_has_a_source_and_a_way_to_request_more() -> None:
    for d in load_quota_definitions():
        assert d.source.startswith("https://"), d.quota
        assert d.request_url.startswith("https://"), d.quota
        assert d.how_to_request("us-east-1", 8)


def test_groups_syntax() -> None:
    assert parse_groups("A;B|C") == (("A",), ("B", "C"))
    assert parse_groups("") == ()


def test_unknown_quota_in_the_catalog_is_bad_input_naming_the_line() -> None:
    header = "cloud,instance_type,vcpus,gpu_count,quota_on_demand,quota_spot\n"
    with pytest.raises(BadInput) as caught:
        parse_type_quotas(header + "aws,p9.large,8,1,L-NOPE,L-7212CCBC\n", load_quota_definitions())

    assert "line 2" in caught.value.message and "L-NOPE" in caught.value.message


def test_bad_unit_in_quotas_csv_is_bad_input() -> None:
    text = "cloud,quota,name,unit,request_cli,request_url,source\naws,L-1,x,cores,,https://a,https://b\n"
    with pytest.raises(BadInput, match="unit 'cores'"):
        parse_quota_definitions(text)


# --- the cache ------------------------------------------------------------------------------


def test_cache_keeps_history_and_returns_the_newest_reading(tmp_path: Path) -> None:
    path = tmp_path / "quotas.sqlite3"
    with QuotaCache(path) as cache:
        cache.add([reading("us-east-1", "L-7212CCBC", 0, age_h=5)])
        cache.add([reading("us-east-1", "L-7212CCBC", 96, age_h=1)])
        cache.add([reading("us-east-1", "L-7212CCBC", 96, age_h=1)])  # same again: no-op
        cache.add_failures([failure("us-east-1")])
    with QuotaCache(path) as cache:
        [latest] = cache.latest(["aws"])
        assert latest.limit == 96
        assert cache.latest(["gcp"]) == []
        assert [f.region for f in cache.failures()] == ["us-east-1"]


def test_cache_refuses_a_file_that_is_not_a_quota_cache(tmp_path: Path) -> None:
    path = tmp_path / "quotas.sqlite3"
    path.write_text("not sqlite")

    with pytest.raises(OperationFailed, match="not a SQLite database"):
        QuotaCache(path)
