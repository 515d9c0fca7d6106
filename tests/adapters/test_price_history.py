"""`route prices history --gpu G --count N --days D`: AWS spot history through boto3, live.

Against moto's EC2 server on 127.0.0.1 (real boto3, real wire format) and, for pagination,
botocore's Stubber answering two pages joined by NextToken.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from router.prices.history import aws_spot_history
from tests.backend_servers import S3_ENV
from tests.unit.test_traces_and_commands import SMALL, invoke

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def aws_on_moto(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{moto_endpoint}")
    return moto_endpoint


def test_history_pulled_from_ec2_is_a_trace_the_backtest_replays(
    aws_on_moto: str, tmp_path: Path
) -> None:
    out = tmp_path / "history.json"
    code, stdout, err = invoke("prices", "history", "--gpu", "A100", "--count", "8",
                               "--days", "30", "--region", "us-east-1", "--region", "us-west-2",
                               "--out", str(out), "--json")  # fmt: skip
    assert code == 0, err
    summary = json.loads(stdout)
    # "A100" is a family here: both 8-GPU A100 types of the catalog
    assert summary["instance_types"] == ["p4d.24xlarge", "p4de.24xlarge"]
    rows = json.loads(out.read_text())["SpotPriceHistory"]
    assert summary["prices"] == len(rows) > 0
    zones = {r["AvailabilityZone"] for r in rows}
    assert {z[:-1] for z in zones} <= {"us-east-1", "us-west-2"} and summary["zones"] == len(zones)
    assert {r["InstanceType"] for r in rows} <= {"p4d.24xlarge", "p4de.24xlarge"}
    assert all(r["ProductDescription"].startswith("Linux/UNIX") for r in rows)

    code, stdout, err = invoke("backtest", str(SMALL), "--prices", str(out), "--json")
    assert code == 0, err
    assert f"{out} ({len(rows)} prices)" in json.loads(stdout)["sources"]


class _Session:
    """A boto3 session whose ec2 client is the stubbed one (one region)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def client(self, service: str, **_kwargs: Any) -> Any:
        assert service == "ec2"
        return self._client


def test_every_page_of_the_history_is_read() -> None:
    client = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="k",
                          aws_secret_access_key="s")  # fmt: skip
    stub = Stubber(client)

    def item(zone: str, price: str, hours_ago: int) -> dict[str, Any]:
        return {"AvailabilityZone": zone, "InstanceType": "p4de.24xlarge",
                "ProductDescription": "Linux/UNIX", "SpotPrice": price,
                "Timestamp": NOW - timedelta(hours=hours_ago)}  # fmt: skip

    start = NOW - timedelta(days=2)
    want = {"InstanceTypes": ["p4de.24xlarge"], "ProductDescriptions": ["Linux/UNIX",
            "Linux/UNIX (Amazon VPC)"], "StartTime": start, "EndTime": NOW}  # fmt: skip
    stub.add_response("describe_spot_price_history",
                      {"SpotPriceHistory": [item("us-east-1a", "12.5", 1)], "NextToken": "p2"},
                      want)  # fmt: skip
    stub.add_response("describe_spot_price_history",
                      {"SpotPriceHistory": [item("us-east-1b", "13.1", 30)], "NextToken": ""},
                      {**want, "NextToken": "p2"})  # fmt: skip
    with stub:
        rows = aws_spot_history(regions=["us-east-1"], instance_types=["p4de.24xlarge"],
                                start=start, end=NOW, session=_Session(client))  # fmt: skip
    stub.assert_no_pending_responses()
    assert [(r["AvailabilityZone"], r["SpotPrice"]) for r in rows] == [
        ("us-east-1b", "13.1"), ("us-east-1a", "12.5")]  # oldest first  # fmt: skip
    assert rows[1]["Timestamp"] == "2026-11-30T23:00:00Z"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--cloud", "gcp"), "GCP publishes no spot price history API"),
        (("--cloud", "azure"), "Azure publishes no spot price history API"),
        (("--days", "120"), "--days: 120 — AWS keeps 90 days"),
        (("--count", "3"), "no aws instance type in the catalog carries 3×"),
        (("--gpu", "Z9"), "--gpu: 'Z9' is not a known GPU"),
    ],
)
def test_bad_history_requests_are_one_line_exit_2(args: tuple[str, ...], message: str) -> None:
    base = {"--gpu": "A100", "--days": "30", "--count": "8"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    code, _, err = invoke("prices", "history", *[x for kv in base.items() for x in kv])
    assert code == 2 and message in err and "\n" not in err.strip(), err


def test_no_aws_credentials_is_one_line(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:  # fmt: skip
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{moto_endpoint}")
    code, _, err = invoke("prices", "history", "--gpu", "A100-80GB", "--days", "7",
                          "--region", "us-east-1", "--out", str(tmp_path / "h.json"))  # fmt: skip
    assert code == 1 and "no AWS credentials" in err, err
