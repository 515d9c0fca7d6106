"""Stack config rendering (placement + job → spotroute:* keys), reading and diffing stack files."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.config.datafiles import (
    load_catalog,
    load_egress,
    load_interruption_model,
    load_storage_prices,
)
from router.config.stack_files import read_stack_file
from router.contract.stack_config import KEY_NAMES
from router.core.catalog import gcp_accelerator_type
from router.core.errors import BadInput
from router.core.org import OrgConfig
from router.core.placement import Placement
from router.core.planner import plan
from router.core.stackconfig import config_diff, stack_config
from tests.unit.planner_factories import NOW, job, offer

# Every key docs/stack-config.md promises; the program refuses unknown spotroute:* keys.
DOCUMENTED_KEYS = set(KEY_NAMES)


def _placements(*offers: object, **job_overrides: object) -> tuple[Placement, ...]:
    result = plan(
        job(**job_overrides),
        list(offers),
        org=OrgConfig(),
        egress=load_egress(),
        now=NOW,
        interruption=load_interruption_model(),
        storage=load_storage_prices(),
    )
    return result.placements


def test_config_carries_the_chosen_placement_and_the_job_command() -> None:
    ranked = _placements(offer("p4de.24xlarge", zone="us-east-1a", price=12.0))
    config = stack_config(job(labels={"team": "ml"}), ranked[0], ranked)

    assert set(config) <= DOCUMENTED_KEYS
    assert config["cloud"] == "aws" and config["region"] == "us-east-1"
    assert config["zone"] == "us-east-1a"
    assert config["instanceTypes"] == ["p4de.24xlarge"]
    assert config["market"] == "spot" and config["checkpointing"] is True
    assert config["checkpointIntervalS"] == 1800  # job checkpoint.interval, in seconds
    assert config["job"] == {"image": "", "command": ["python", "train.py"], "env": {}}
    assert config["labels"] == {"team": "ml"}
    assert config["pricePerHour"] == 12.0 and config["priceSource"] == "aws-api"


def test_spot_cap_defaults_to_list_price_with_headroom_and_respects_the_job_cap() -> None:
    ranked = _placements(offer(price=10.0))
    assert stack_config(job(), ranked[0])["maxPrice"] == 15.0
    capped = _placements(offer(price=10.0), max_price_per_hour=11.0)
    assert stack_config(job(max_price_per_hour=11.0), capped[0])["maxPrice"] == 11.0


def test_equivalent_types_in_the_same_place_join_the_group_cheapest_first() -> None:
    ranked = _placements(
        offer("p4de.24xlarge", zone="us-east-1a", price=9.0),
        offer("p4de.24xlarge", zone="us-east-1b", price=8.0),
    )
    config = stack_config(job(), ranked[0], ranked)
    # Only types in the chosen zone: another zone is another placement, not an alternative.
    assert config["zone"] == "us-east-1b"
    assert config["instanceTypes"] == ["p4de.24xlarge"]


def test_existing_checkpoint_url_is_reused_and_auto_creates_a_bucket() -> None:
    ranked = _placements(offer())
    reuse = job(checkpoint={"interval_s": 1800, "url": "s3://acme-ckpt/train/"})
    assert stack_config(reuse, ranked[0])["checkpointUrl"] == "s3://acme-ckpt/train/"
    assert stack_config(job(), ranked[0])["checkpointUrl"] == ""


def test_stack_file_round_trip_and_readable_diff(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.train.yaml"
    assert read_stack_file(path) == {}
    path.write_text(
        "encryptionsalt: v1:abc\nconfig:\n  spotroute:cloud: aws\n  spotroute:maxPrice: 15\n"
        "  aws:region: us-east-1\n"
    )
    old = read_stack_file(path)
    assert old == {"cloud": "aws", "maxPrice": 15}
    diff = config_diff(old, {"cloud": "gcp", "maxPrice": 15, "zone": "us-central1-a"})
    assert diff == [
        "~ spotroute:cloud: 'aws' → 'gcp'",
        "+ spotroute:zone: 'us-central1-a'",
    ]
    assert config_diff(old, old) == []


def test_unreadable_stack_file_is_one_line_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.train.yaml"
    path.write_text("config: [unclosed\n")
    with pytest.raises(BadInput) as err:
        read_stack_file(path)
    assert "Pulumi.train.yaml" in err.value.message and "\n" not in err.value.message


def test_gcp_project_is_written_only_for_gcp_placements() -> None:
    aws = _placements(offer("p4de.24xlarge"))
    assert stack_config(job(), aws[0], gcp_project="acme-ml")["gcpProject"] == ""
    gcp = _placements(offer("a2-ultragpu-8g", zone="us-central1-a"))
    assert stack_config(job(), gcp[0], gcp_project="acme-ml")["gcpProject"] == "acme-ml"


def test_azure_storage_account_ids_are_written_only_for_azure_placements() -> None:
    ids = {
        "acmeckpt": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/"
        "storageAccounts/acmeckpt"
    }
    aws = _placements(offer("p4de.24xlarge"))
    assert stack_config(job(), aws[0], azure_storage_accounts=ids)["storageAccountIds"] == {}
    azure = _placements(offer("Standard_ND96amsr_A100_v4"))
    assert stack_config(job(), azure[0], azure_storage_accounts=ids)["storageAccountIds"] == ids


def test_cloud_specific_inputs_are_written_only_for_their_cloud() -> None:
    dirs = ("/home/u/.spotroute/sandbox/train", "/home/u/.spotroute/checkpoints/train")
    aws = stack_config(job(), _placements(offer("p4de.24xlarge"))[0], local_dirs=dirs)
    assert (aws["gcpAcceleratorType"], aws["localSandboxDir"], aws["localCheckpointDir"]) == (
        "",
        "",
        "",
    )
    gcp = _placements(offer("a2-ultragpu-8g", zone="us-central1-a"))[0]
    config = stack_config(job(), gcp, gcp_accelerator_type="nvidia-a100-80gb", local_dirs=dirs)
    assert config["gcpAcceleratorType"] == "nvidia-a100-80gb" and config["localSandboxDir"] == ""


def test_gcp_accelerator_type_comes_from_the_catalog_rows_of_that_gpu() -> None:
    catalog = load_catalog()
    assert gcp_accelerator_type(catalog, "T4") == "nvidia-tesla-t4"
    assert gcp_accelerator_type(catalog, "H100-80GB") == ""


def test_data_urls_name_the_chosen_copy_and_the_staged_ones_with_their_lifetime() -> None:
    corpus = {
        "url": "s3://corpus/tokens/",
        "region": "us-east-1",
        "size_gb": 2000,
        "passes": 3,
        "replicas": [{"url": "gs://mirror/tokens/", "region": "us-central1"}],
    }
    evals = {"url": "s3://eval/v2/", "region": "us-east-1", "size_gb": 10, "access": "copy"}
    (gcp,) = _placements(
        offer("a2-ultragpu-8g", region="us-central1"), data=[corpus, evals], duration_hours=30
    )
    config = stack_config(job(data=[corpus, evals], duration_hours=30), gcp)

    assert config["dataUrls"] == ["gs://mirror/tokens/", "s3://eval/v2/"]  # the replica is nearer
    assert config["dataCopyUrls"] == ["s3://eval/v2/"]
    # 30 h + 10 GB at 1 Gbps (0.02 h) → 2 days, + 1 day of margin.
    assert config["stagingDays"] == 3


def test_nothing_copied_means_no_staging_bucket() -> None:
    data = {"url": "s3://corpus/tokens/", "region": "us-east-1", "size_gb": 2000}
    (aws,) = _placements(offer("p4de.24xlarge", region="us-east-1"), data=data)
    config = stack_config(job(data=data), aws)
    assert (config["dataUrls"], config["dataCopyUrls"], config["stagingDays"]) == (
        ["s3://corpus/tokens/"],
        [],
        0,
    )
