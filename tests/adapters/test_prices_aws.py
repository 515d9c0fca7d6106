"""AWS live prices: botocore Stubber for exact request/response shapes, and a loopback fake
of the EC2 query API, the Price List API and the Spot Advisor file for retries, timeouts and
concurrency (the real boto3 clients serialise, sign, retry and parse)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import boto3
import botocore.retries.standard
import httpx
import pytest
from botocore.stub import Stubber

from router.core.errors import BadInput, CredentialsMissing, OperationFailed, PriceSourceError
from router.core.offers import Quote
from router.prices import aws
from router.prices.request import PriceRequest

NOW = datetime(2025, 3, 14, 12, 0, tzinfo=UTC)
SECRET = "fake-secret-key-never-shown"
EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
ON_DEMAND_FILTERS = [
    {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
    {"Type": "TERM_MATCH", "Field": "marketoption", "Value": "OnDemand"},
    {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
    {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
    {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
    {"Type": "TERM_MATCH", "Field": "licenseModel", "Value": "No License required"},
]


# --- real-shaped payloads ---------------------------------------------------------------


def price_list_item(
    instance_type: str,
    region: str,
    usd_per_hour: str,
    *,
    location_type: str = "AWS Region",
    reserved_usd_per_hour: str = "0.4000000000",
) -> str:
    """One Price List product (FormatVersion aws_v1) as pricing:GetProducts returns it: a JSON
    string with on-demand and reserved terms."""
    sku = "8VCNEHQMSCQS4P39"
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {
                    "instanceType": instance_type,
                    "regionCode": region,
                    "location": "US East (N. Virginia)",
                    "locationType": location_type,
                    "operatingSystem": "Linux",
                    "tenancy": "Shared",
                    "preInstalledSw": "NA",
                    "capacitystatus": "Used",
                    "licenseModel": "No License required",
                    "usagetype": f"BoxUsage:{instance_type}",
                    "operation": "RunInstances",
                    "marketoption": "OnDemand",
                    "servicecode": "AmazonEC2",
                    "vcpu": "4",
                    "memory": "16 GiB",
                    "gpu": "1",
                },
                "sku": sku,
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    f"{sku}.JRTCKXETXF": {
                        "priceDimensions": {
                            f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "endRange": "Inf",
                                "description": f"${usd_per_hour} per On Demand Linux "
                                f"{instance_type} Instance Hour",
                                "appliesTo": [],
                                "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7",
                                "beginRange": "0",
                                "pricePerUnit": {"USD": usd_per_hour},
                            }
                        },
                        "sku": sku,
                        "effectiveDate": "2025-03-01T00:00:00Z",
                        "offerTermCode": "JRTCKXETXF",
                        "termAttributes": {},
                    }
                },
                "Reserved": {
                    f"{sku}.38NPMPTW36": {
                        "priceDimensions": {
                            f"{sku}.38NPMPTW36.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "endRange": "Inf",
                                "description": "Linux/UNIX (Amazon VPC), reserved",
                                "appliesTo": [],
                                "rateCode": f"{sku}.38NPMPTW36.6YS6EN2CT7",
                                "beginRange": "0",
                                "pricePerUnit": {"USD": reserved_usd_per_hour},
                            }
                        },
                        "sku": sku,
                        "effectiveDate": "2025-03-01T00:00:00Z",
                        "offerTermCode": "38NPMPTW36",
                        "termAttributes": {
                            "LeaseContractLength": "3yr",
                            "OfferingClass": "standard",
                            "PurchaseOption": "Partial Upfront",
                        },
                    }
                },
            },
            "version": "20250301000000",
            "publicationDate": "2025-03-01T00:00:00Z",
        }
    )


def advisor_doc() -> dict[str, Any]:
    """Spot Instance Advisor data, shaped like spot-advisor-data.json."""
    return {
        "global_rate": "<10%",
        "instance_types": {
            "g5.xlarge": {"emr": True, "cores": 4, "ram_gb": 16.0},
            "p4d.24xlarge": {"emr": False, "cores": 96, "ram_gb": 1152.0},
        },
        "ranges": [
            {"index": 0, "label": "<5%", "dots": 0, "max": 5},
            {"index": 1, "label": "5-10%", "dots": 1, "max": 11},
            {"index": 2, "label": "10-15%", "dots": 2, "max": 16},
            {"index": 3, "label": "15-20%", "dots": 3, "max": 22},
            {"index": 4, "label": ">20%", "dots": 4, "max": 100},
        ],
        "spot_advisor": {
            "us-east-1": {
                "Linux": {
                    "g5.xlarge": {"s": 70, "r": 1},
                    "p4d.24xlarge": {"s": 61, "r": 4},
                },
                "Windows": {"g5.xlarge": {"s": 48, "r": 0}},
            },
            "eu-west-1": {"Linux": {"g5.xlarge": {"s": 66, "r": 0}}},
        },
    }


def offering(instance_type: str, zone: str) -> dict[str, str]:
    return {"InstanceType": instance_type, "LocationType": "availability-zone", "Location": zone}


def spot_entry(
    zone: str, instance_type: str, price: str, at: datetime, description: str = "Linux/UNIX"
) -> dict[str, Any]:
    return {
        "AvailabilityZone": zone,
        "InstanceType": instance_type,
        "ProductDescription": description,
        "SpotPrice": price,
        "Timestamp": at,
    }


def quote(
    region: str,
    zone: str,
    instance_type: str,
    market: str,
    price: float,
    bucket: str | None = None,
) -> Quote:
    return Quote(
        cloud="aws",
        region=region,
        zone=zone,
        instance_type=instance_type,
        market=market,
        price_per_hour=price,
        source="aws-api",
        observed_at=NOW,
        interruption_bucket=bucket,
    )


# --- AWS environment isolation ----------------------------------------------------------


@pytest.fixture(autouse=True)
def isolated_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No developer credentials, config files or instance metadata leak into a test."""
    import os

    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def backoff_waits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """botocore's own retry backoff, made instant; records each retry it would have slept."""
    waits: list[int] = []

    def no_wait(self: object, context: Any) -> float:
        waits.append(context.attempt_number)
        return 0.0

    monkeypatch.setattr(botocore.retries.standard.ExponentialBackoff, "delay_amount", no_wait)
    return waits


def credentials_session() -> boto3.Session:
    return boto3.Session(
        aws_access_key_id="AKIAFAKEFAKEFAKEFAKE",
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
    )


# --- botocore Stubber on real clients ---------------------------------------------------


class StubbedSession(boto3.Session):
    """A real session whose clients answer from Stubbers queued per (service, region)."""

    def __init__(self, script: dict[tuple[str, str], list[tuple[str, Any, Any]]]) -> None:
        super().__init__(
            aws_access_key_id="AKIAFAKEFAKEFAKEFAKE",
            aws_secret_access_key=SECRET,
            region_name="us-east-1",
        )
        self.script = script
        self.stubbers: list[Stubber] = []
        self.clients: list[tuple[str, str | None]] = []

    def client(self, service_name: str, region_name: str | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        client = super().client(service_name, region_name=region_name, **kwargs)
        stubber = Stubber(client)
        for method, response, expected in self.script.get((service_name, region_name or ""), []):
            if isinstance(response, ClientFault):
                stubber.add_client_error(
                    method,
                    service_error_code=response.code,
                    service_message=response.message,
                    http_status_code=response.status,
                    expected_params=expected,
                )
            else:
                stubber.add_response(method, response, expected)
        stubber.activate()
        self.stubbers.append(stubber)
        self.clients.append((service_name, region_name))
        return client

    def assert_all_answers_used(self) -> None:
        for stubber in self.stubbers:
            stubber.assert_no_pending_responses()


class ClientFault:
    def __init__(self, code: str, message: str, status: int) -> None:
        self.code, self.message, self.status = code, message, status


def offerings_call(
    types: list[str],
    offerings: list[dict[str, str]],
    *,
    token: str | None = None,
    next_token: str | None = None,
) -> tuple[str, Any, Any]:
    expected: dict[str, Any] = {
        "LocationType": "availability-zone",
        "Filters": [{"Name": "instance-type", "Values": types}],
    }
    if token:
        expected["NextToken"] = token
    response: dict[str, Any] = {"InstanceTypeOfferings": offerings}
    if next_token:
        response["NextToken"] = next_token
    return ("describe_instance_type_offerings", response, expected)


def spot_call(
    types: list[str],
    history: list[dict[str, Any]],
    *,
    token: str | None = None,
    next_token: str = "",
) -> tuple[str, Any, Any]:
    expected: dict[str, Any] = {
        "StartTime": NOW,
        "InstanceTypes": types,
        "ProductDescriptions": ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
    }
    if token:
        expected["NextToken"] = token
    # The real API ends a listing with an empty NextToken.
    return (
        "describe_spot_price_history",
        {"SpotPriceHistory": history, "NextToken": next_token},
        expected,
    )


def pricing_call(
    instance_type: str,
    region: str,
    items: list[str],
    *,
    token: str | None = None,
    next_token: str | None = None,
) -> tuple[str, Any, Any]:
    expected: dict[str, Any] = {
        "ServiceCode": "AmazonEC2",
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "instanceType", "Value": instance_type},
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            *ON_DEMAND_FILTERS,
        ],
        "FormatVersion": "aws_v1",
    }
    if token:
        expected["NextToken"] = token
    response: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": items}
    if next_token:
        response["NextToken"] = next_token
    return ("get_products", response, expected)


def request(
    types: tuple[str, ...] = ("g5.xlarge",),
    regions: tuple[str, ...] = ("us-east-1",),
    **kwargs: Any,
) -> PriceRequest:
    return PriceRequest(instance_types=types, regions=regions, **kwargs)


def test_spot_and_on_demand_quotes_for_each_offered_zone() -> None:
    session = StubbedSession(
        {
            ("ec2", "us-east-1"): [
                offerings_call(
                    ["g5.xlarge", "p4d.24xlarge"],
                    [
                        offering("g5.xlarge", "us-east-1a"),
                        offering("g5.xlarge", "us-east-1b"),
                        offering("p4d.24xlarge", "us-east-1b"),
                    ],
                ),
                spot_call(
                    ["g5.xlarge", "p4d.24xlarge"],
                    [
                        spot_entry("us-east-1a", "g5.xlarge", "0.412300", NOW - timedelta(hours=2)),
                        spot_entry("us-east-1b", "g5.xlarge", "0.398100", NOW - timedelta(hours=5)),
                        spot_entry("us-east-1b", "p4d.24xlarge", "11.572500", NOW),
                    ],
                ),
            ],
            ("pricing", "us-east-1"): [
                pricing_call(
                    "g5.xlarge",
                    "us-east-1",
                    [price_list_item("g5.xlarge", "us-east-1", "1.0060000000")],
                ),
                pricing_call(
                    "p4d.24xlarge",
                    "us-east-1",
                    [price_list_item("p4d.24xlarge", "us-east-1", "32.7726000000")],
                ),
            ],
        }
    )

    quotes = aws.fetch_quotes(
        request(("g5.xlarge", "p4d.24xlarge")), now=NOW, session=session, fetch_advisor=False
    )

    assert quotes == [
        quote("us-east-1", "us-east-1a", "g5.xlarge", "on-demand", 1.006),
        quote("us-east-1", "us-east-1a", "g5.xlarge", "spot", 0.4123),
        quote("us-east-1", "us-east-1b", "g5.xlarge", "on-demand", 1.006),
        quote("us-east-1", "us-east-1b", "g5.xlarge", "spot", 0.3981),
        quote("us-east-1", "us-east-1b", "p4d.24xlarge", "on-demand", 32.7726),
        quote("us-east-1", "us-east-1b", "p4d.24xlarge", "spot", 11.5725),
    ]
    session.assert_all_answers_used()


def test_only_requested_types_and_regions_are_queried() -> None:
    # Stubber checks every request's parameters; the client list shows which regions were asked.
    session = StubbedSession(
        {
            ("ec2", "eu-west-1"): [
                offerings_call(["g5.xlarge"], [offering("g5.xlarge", "eu-west-1a")]),
                spot_call(["g5.xlarge"], [spot_entry("eu-west-1a", "g5.xlarge", "0.45", NOW)]),
            ],
            ("ec2", "us-west-2"): [
                offerings_call(["g5.xlarge"], [offering("g5.xlarge", "us-west-2b")]),
                spot_call(["g5.xlarge"], [spot_entry("us-west-2b", "g5.xlarge", "0.39", NOW)]),
            ],
        }
    )

    quotes = aws.fetch_quotes(
        request(regions=("us-west-2", "eu-west-1"), markets=("spot",)),
        now=NOW,
        session=session,
        fetch_advisor=False,
    )

    assert sorted(session.clients) == [("ec2", "eu-west-1"), ("ec2", "us-west-2")]
    assert {(q.region, q.instance_type) for q in quotes} == {
        ("eu-west-1", "g5.xlarge"),
        ("us-west-2", "g5.xlarge"),
    }
    session.assert_all_answers_used()


def test_latest_price_wins_when_both_linux_product_descriptions_answer() -> None:
    session = StubbedSession(
        {
            ("ec2", "us-east-1"): [
                offerings_call(
                    ["g5.xlarge"],
                    [offering("g5.xlarge", "us-east-1a"), offering("g5.xlarge", "us-east-1c")],
                ),
                spot_call(
                    ["g5.xlarge"],
                    [
                        spot_entry("us-east-1a", "g5.xlarge", "0.50", NOW - timedelta(days=3)),
                        spot_entry(
                            "us-east-1a",
                            "g5.xlarge",
                            "0.42",
                            NOW - timedelta(minutes=9),
                            "Linux/UNIX (Amazon VPC)",
                        ),
                        spot_entry("us-east-1c", "g5.xlarge", "0.47", NOW - timedelta(hours=1)),
                        spot_entry(
                            "us-east-1c",
                            "g5.xlarge",
                            "0.44",
                            NOW - timedelta(hours=6),
                            "Linux/UNIX (Amazon VPC)",
                        ),
                    ],
                ),
            ],
        }
    )

    quotes = aws.fetch_quotes(
        request(markets=("spot",)), now=NOW, session=session, fetch_advisor=False
    )

    assert [(q.zone, q.price_per_hour) for q in quotes] == [
        ("us-east-1a", 0.42),
        ("us-east-1c", 0.47),
    ]


def test_pagination_follows_next_token_for_offerings_spot_history_and_price_list() -> None:
    types = ["g5.xlarge"]
    session = StubbedSession(
        {
            ("ec2", "us-east-1"): [
                offerings_call(types, [offering("g5.xlarge", "us-east-1a")], next_token="off-2"),
                offerings_call(types, [offering("g5.xlarge", "us-east-1d")], token="off-2"),
                spot_call(
                    types, [spot_entry("us-east-1a", "g5.xlarge", "0.41", NOW)], next_token="spot-2"
                ),
                spot_call(
                    types, [spot_entry("us-east-1d", "g5.xlarge", "0.43", NOW)], token="spot-2"
                ),
            ],
            ("pricing", "us-east-1"): [
                # A first page with only a Local Zone product: the region price is on page 2.
                pricing_call(
                    "g5.xlarge",
                    "us-east-1",
                    [
                        price_list_item(
                            "g5.xlarge", "us-east-1", "1.2070000000", location_type="AWS Local Zone"
                        )
                    ],
                    next_token="price-2",
                ),
                pricing_call(
                    "g5.xlarge",
                    "us-east-1",
                    [price_list_item("g5.xlarge", "us-east-1", "1.0060000000")],
                    token="price-2",
                ),
            ],
        }
    )

    quotes = aws.fetch_quotes(request(), now=NOW, session=session, fetch_advisor=False)

    assert [(q.zone, q.market, q.price_per_hour) for q in quotes] == [
        ("us-east-1a", "on-demand", 1.006),
        ("us-east-1a", "spot", 0.41),
        ("us-east-1d", "on-demand", 1.006),
        ("us-east-1d", "spot", 0.43),
    ]
    session.assert_all_answers_used()


def test_zones_without_an_offering_get_no_quotes_even_if_a_spot_price_exists() -> None:
    session = StubbedSession(
        {
            ("ec2", "us-east-1"): [
                offerings_call(["g5.xlarge"], [offering("g5.xlarge", "us-east-1b")]),
                spot_call(
                    ["g5.xlarge"],
                    [
                        spot_entry("us-east-1a", "g5.xlarge", "0.30", NOW),
                        spot_entry("us-east-1b", "g5.xlarge", "0.41", NOW),
                    ],
                ),
            ],
            ("pricing", "us-east-1"): [
                pricing_call(
                    "g5.xlarge",
                    "us-east-1",
                    [price_list_item("g5.xlarge", "us-east-1", "1.0060000000")],
                ),
            ],
        }
    )

    quotes = aws.fetch_quotes(request(), now=NOW, session=session, fetch_advisor=False)

    assert {q.zone for q in quotes} == {"us-east-1b"}


def test_type_offered_nowhere_in_a_region_skips_the_price_apis() -> None:
    session = StubbedSession({("ec2", "ap-south-1"): [offerings_call(["p5.48xlarge"], [])]})

    quotes = aws.fetch_quotes(
        request(("p5.48xlarge",), ("ap-south-1",)), now=NOW, session=session, fetch_advisor=False
    )

    assert quotes == []
    session.assert_all_answers_used()


def test_spot_only_request_never_asks_the_price_list_api() -> None:
    session = StubbedSession(
        {
            ("ec2", "us-east-1"): [
                offerings_call(["g5.xlarge"], [offering("g5.xlarge", "us-east-1a")]),
                spot_call(["g5.xlarge"], [spot_entry("us-east-1a", "g5.xlarge", "0.41", NOW)]),
            ],
        }
    )

    quotes = aws.fetch_quotes(
        request(markets=("spot",)), now=NOW, session=session, fetch_advisor=False
    )

    assert [q.market for q in quotes] == ["spot"]
    assert ("pricing", "us-east-1") not in session.clients


def test_on_demand_only_request_never_asks_spot_history() -> None:
    session = StubbedSession(
        {
            ("ec2", "us-east-1"): [
                offerings_call(["g5.xlarge"], [offering("g5.xlarge", "us-east-1a")]),
            ],
            ("pricing", "us-east-1"): [
                pricing_call(
                    "g5.xlarge",
                    "us-east-1",
                    [price_list_item("g5.xlarge", "us-east-1", "1.0060000000")],
                ),
            ],
        }
    )

    quotes = aws.fetch_quotes(
        request(markets=("on-demand",)), now=NOW, session=session, fetch_advisor=False
    )

    assert [(q.market, q.price_per_hour) for q in quotes] == [("on-demand", 1.006)]
    session.assert_all_answers_used()


def test_on_demand_price_comes_from_on_demand_terms_not_reserved() -> None:
    item = price_list_item(
        "p4d.24xlarge", "us-east-1", "32.7726000000", reserved_usd_per_hour="11.5700000000"
    )

    assert aws.parse_price_list_item(item) == ("p4d.24xlarge", 32.7726)


def test_local_zone_and_unpriced_products_give_no_on_demand_price() -> None:
    local_zone = price_list_item("g5.xlarge", "us-east-1", "1.2", location_type="AWS Local Zone")
    unpriced = price_list_item("g5.xlarge", "us-east-1", "0.0000000000")

    assert aws.parse_price_list_item(local_zone) is None
    assert aws.parse_price_list_item(unpriced) is None


def test_capacity_block_rows_are_never_an_on_demand_price() -> None:
    block = json.loads(price_list_item("p5.48xlarge", "us-east-1", "31.4640000000"))
    block["product"]["attributes"]["marketoption"] = "CapacityBlock"

    assert aws.parse_price_list_item(json.dumps(block)) is None
    assert ("marketoption", "OnDemand") in aws.ON_DEMAND_FILTERS


def test_one_product_without_instance_type_is_skipped_with_a_warning() -> None:
    odd = json.loads(price_list_item("g5.xlarge", "us-east-1", "9.99"))
    del odd["product"]["attributes"]["instanceType"]
    session = StubbedSession(
        {
            ("ec2", "us-east-1"): [
                offerings_call(["g5.xlarge"], [offering("g5.xlarge", "us-east-1a")]),
            ],
            ("pricing", "us-east-1"): [
                pricing_call(
                    "g5.xlarge",
                    "us-east-1",
                    [json.dumps(odd), price_list_item("g5.xlarge", "us-east-1", "1.006")],
                ),
            ],
        }
    )
    warnings: list[str] = []

    quotes = aws.fetch_quotes(
        request(markets=("on-demand",)),
        now=NOW,
        session=session,
        fetch_advisor=False,
        warnings=warnings,
    )

    assert [(q.zone, q.market, q.price_per_hour) for q in quotes] == [
        ("us-east-1a", "on-demand", 1.006)
    ]
    assert len(warnings) == 1 and "us-east-1 g5.xlarge: skipped a product" in warnings[0]
    assert "instanceType" in warnings[0]


def test_malformed_price_list_raises_one_line_price_source_error() -> None:
    broken = json.loads(price_list_item("g5.xlarge", "us-east-1", "1.006"))
    term = next(iter(broken["terms"]["OnDemand"].values()))
    next(iter(term["priceDimensions"].values()))["pricePerUnit"] = {"USD": "call us"}
    session = StubbedSession(
        {
            ("ec2", "us-east-1"): [
                offerings_call(["g5.xlarge"], [offering("g5.xlarge", "us-east-1a")]),
            ],
            ("pricing", "us-east-1"): [
                pricing_call("g5.xlarge", "us-east-1", [json.dumps(broken)]),
            ],
        }
    )

    with pytest.raises(PriceSourceError) as caught:
        aws.fetch_quotes(
            request(markets=("on-demand",)), now=NOW, session=session, fetch_advisor=False
        )

    message = caught.value.message
    assert "pricing:GetProducts" in message and "us-east-1" in message
    assert "malformed" in message and "\n" not in message


def test_price_list_that_is_not_json_raises_price_source_error() -> None:
    session = StubbedSession(
        {
            ("ec2", "us-east-1"): [
                offerings_call(["g5.xlarge"], [offering("g5.xlarge", "us-east-1a")]),
            ],
            ("pricing", "us-east-1"): [
                pricing_call("g5.xlarge", "us-east-1", ['{"product": {"attributes": ']),
            ],
        }
    )

    with pytest.raises(PriceSourceError, match=r"pricing:GetProducts in us-east-1.*malformed"):
        aws.fetch_quotes(
            request(markets=("on-demand",)), now=NOW, session=session, fetch_advisor=False
        )


def test_denied_action_names_the_iam_action_to_grant() -> None:
    session = StubbedSession(
        {
            ("ec2", "us-east-1"): [
                offerings_call(["g5.xlarge"], [offering("g5.xlarge", "us-east-1a")]),
                (
                    "describe_spot_price_history",
                    ClientFault(
                        "UnauthorizedOperation",
                        "You are not authorized to perform this operation.",
                        403,
                    ),
                    None,
                ),
            ],
        }
    )

    with pytest.raises(OperationFailed) as caught:
        aws.fetch_quotes(request(markets=("spot",)), now=NOW, session=session, fetch_advisor=False)

    assert not isinstance(caught.value, PriceSourceError | CredentialsMissing)
    assert "ec2:DescribeSpotPriceHistory" in caught.value.message
    assert "IAM" in caught.value.message
    assert SECRET not in caught.value.message


def test_expired_credentials_are_reported_as_credentials_missing() -> None:
    session = StubbedSession(
        {
            ("ec2", "us-east-1"): [
                (
                    "describe_instance_type_offerings",
                    ClientFault("RequestExpired", "Request has expired.", 400),
                    None,
                ),
            ],
        }
    )

    with pytest.raises(CredentialsMissing, match="aws sso login"):
        aws.fetch_quotes(request(), now=NOW, session=session, fetch_advisor=False)


def test_region_not_enabled_for_the_account_says_so() -> None:
    session = StubbedSession(
        {
            ("ec2", "me-central-1"): [
                (
                    "describe_instance_type_offerings",
                    ClientFault("OptInRequired", "You are not subscribed to this service.", 401),
                    None,
                ),
            ],
        }
    )

    with pytest.raises(OperationFailed, match="me-central-1 is not enabled"):
        aws.fetch_quotes(
            request(regions=("me-central-1",)), now=NOW, session=session, fetch_advisor=False
        )


def test_missing_credentials_raise_credentials_missing_before_any_call(
    fake_aws: FakeAws,
) -> None:
    with pytest.raises(CredentialsMissing) as caught:
        aws.fetch_quotes(request(), now=NOW, endpoint_url=fake_aws.url, fetch_advisor=False)

    assert caught.value.message == aws.NO_CREDENTIALS
    assert "aws configure sso" in caught.value.message
    assert fake_aws.requests == []


def test_session_without_credentials_raises_credentials_missing(fake_aws: FakeAws) -> None:
    with pytest.raises(CredentialsMissing, match="AWS credentials not found"):
        aws.fetch_quotes(
            request(),
            now=NOW,
            session=boto3.Session(region_name="us-east-1"),
            endpoint_url=fake_aws.url,
            fetch_advisor=False,
        )
    assert fake_aws.requests == []


def test_unknown_aws_profile_raises_credentials_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "gpu-research")

    with pytest.raises(CredentialsMissing, match="'gpu-research' not found"):
        aws.fetch_quotes(request(), now=NOW, fetch_advisor=False)


def test_credentials_from_the_environment_are_used_and_never_echoed(
    fake_aws: FakeAws, monkeypatch: pytest.MonkeyPatch, backoff_waits: list[int]
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKEFAKEFAKEFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    fake_aws.faults["DescribeInstanceTypeOfferings"] = ["AuthFailure"]

    with pytest.raises(OperationFailed) as caught:
        aws.fetch_quotes(request(), now=NOW, endpoint_url=fake_aws.url, fetch_advisor=False)

    assert "ec2:DescribeInstanceTypeOfferings" in caught.value.message
    assert SECRET not in str(caught.value) and "AKIAFAKE" not in str(caught.value)
    # The request was signed with the environment's key.
    assert fake_aws.requests[0].access_key == "AKIAFAKEFAKEFAKEFAKE"


def test_empty_region_list_is_bad_input() -> None:
    with pytest.raises(BadInput, match="no regions"):
        aws.fetch_quotes(request(regions=()), now=NOW, session=credentials_session())


# --- loopback fake of the AWS wire protocols --------------------------------------------


class Seen:
    def __init__(self, action: str, region: str, access_key: str, params: dict[str, Any]) -> None:
        self.action, self.region, self.access_key, self.params = action, region, access_key, params


class FakeAws:
    """EC2 query API, Price List JSON API and the Spot Advisor file on 127.0.0.1.

    The region of each call comes from its SigV4 credential scope, as on the real endpoint.
    `faults[action]` is consumed one per call: an error code, or "hang" (never answer).
    """

    def __init__(self) -> None:
        self.offerings: dict[str, list[tuple[str, str]]] = {}
        self.spot: dict[str, list[tuple[str, str, str, str, str]]] = {}
        self.price_lists: dict[tuple[str, str], list[str]] = {}
        self.faults: dict[str, list[str]] = {}
        self.advisor: tuple[int, bytes] = (404, b"")
        self.advisor_hangs = False
        self.advisor_gets = 0
        self.barrier: threading.Barrier | None = None
        self.requests: list[Seen] = []
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.url = ""

    def add_region(
        self,
        region: str,
        zones: dict[str, list[str]],
        spot: dict[tuple[str, str], str],
        on_demand: dict[str, str],
    ) -> None:
        self.offerings[region] = [(t, z) for t, zs in zones.items() for z in zs]
        self.spot[region] = [
            (z, t, "Linux/UNIX", price, "2025-03-14T11:00:00.000Z")
            for (z, t), price in spot.items()
        ]
        for instance_type, usd in on_demand.items():
            self.price_lists[(region, instance_type)] = [
                price_list_item(instance_type, region, usd)
            ]

    def fault(self, action: str) -> str | None:
        with self.lock:
            queue = self.faults.get(action)
            return queue.pop(0) if queue else None

    def answer(self, headers: Any, body: bytes) -> tuple[int, str, bytes] | None:
        scope = re.search(r"Credential=([^/]+)/\d{8}/([^/]+)/", headers.get("Authorization", ""))
        access_key, region = (scope.group(1), scope.group(2)) if scope else ("", "")
        target = headers.get("X-Amz-Target", "")
        if target:
            action = target.split(".")[-1]
            params: dict[str, Any] = json.loads(body)
        else:
            params = {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
            action = params.get("Action", "")
        with self.lock:
            self.requests.append(Seen(action, region, access_key, params))
        fault = self.fault(action)
        if fault == "hang":
            self.release.wait(10)
            return None
        if fault:
            return self.error(fault, json_protocol=bool(target))
        if action == "DescribeInstanceTypeOfferings":
            if self.barrier is not None:
                self.barrier.wait(timeout=10)  # every region must be in flight at once
            return self.offerings_xml(region, params)
        if action == "DescribeSpotPriceHistory":
            return self.spot_xml(region, params)
        if action == "GetProducts":
            return self.products_json(params)
        return 400, "text/plain", b"unknown action"

    @staticmethod
    def listed(params: dict[str, Any], prefix: str) -> set[str]:
        return {v for k, v in params.items() if re.fullmatch(re.escape(prefix) + r"\.\d+", k)}

    def offerings_xml(self, region: str, params: dict[str, Any]) -> tuple[int, str, bytes]:
        wanted = self.listed(params, "Filter.1.Value")
        items = "".join(
            f"<item><instanceType>{t}</instanceType><locationType>availability-zone"
            f"</locationType><location>{z}</location></item>"
            for t, z in self.offerings.get(region, [])
            if t in wanted
        )
        xml = (
            f'<DescribeInstanceTypeOfferingsResponse xmlns="{EC2_NS}"><requestId>r-1</requestId>'
            f"<instanceTypeOfferingSet>{items}</instanceTypeOfferingSet>"
            "</DescribeInstanceTypeOfferingsResponse>"
        )
        return 200, "text/xml", xml.encode()

    def spot_xml(self, region: str, params: dict[str, Any]) -> tuple[int, str, bytes]:
        wanted = self.listed(params, "InstanceType")
        descriptions = self.listed(params, "ProductDescription")
        items = "".join(
            f"<item><instanceType>{t}</instanceType><productDescription>{d}</productDescription>"
            f"<spotPrice>{p}</spotPrice><timestamp>{at}</timestamp>"
            f"<availabilityZone>{z}</availabilityZone></item>"
            for z, t, d, p, at in self.spot.get(region, [])
            if t in wanted and d in descriptions
        )
        xml = (
            f'<DescribeSpotPriceHistoryResponse xmlns="{EC2_NS}"><requestId>r-2</requestId>'
            f"<spotPriceHistorySet>{items}</spotPriceHistorySet><nextToken/>"
            "</DescribeSpotPriceHistoryResponse>"
        )
        return 200, "text/xml", xml.encode()

    def products_json(self, params: dict[str, Any]) -> tuple[int, str, bytes]:
        fields = {f["Field"]: f["Value"] for f in params["Filters"]}
        items = self.price_lists.get((fields["regionCode"], fields["instanceType"]), [])
        body = json.dumps({"FormatVersion": "aws_v1", "PriceList": items}).encode()
        return 200, "application/x-amz-json-1.1", body

    @staticmethod
    def error(code: str, *, json_protocol: bool) -> tuple[int, str, bytes]:
        status = {
            "RequestLimitExceeded": 503,
            "AuthFailure": 401,
            "ThrottlingException": 400,
            "InternalError": 500,
        }.get(code, 403)
        if json_protocol:
            body = json.dumps({"__type": code, "message": "Rate exceeded"}).encode()
            return status, "application/x-amz-json-1.1", body
        xml = (
            f"<Response><Errors><Error><Code>{code}</Code><Message>{code} from fake</Message>"
            "</Error></Errors><RequestID>r-err</RequestID></Response>"
        )
        return status, "text/xml", xml.encode()


@pytest.fixture
def fake_aws() -> Iterator[FakeAws]:
    fake = FakeAws()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.reply(fake.answer(self.headers, body))

        def do_GET(self) -> None:
            with fake.lock:
                fake.advisor_gets += 1
            if fake.advisor_hangs:
                fake.release.wait(10)
                return
            status, payload = fake.advisor
            self.reply((status, "application/json", payload))

        def reply(self, answer: tuple[int, str, bytes] | None) -> None:
            if answer is None:
                return
            status, content_type, payload = answer
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        fake.release.set()
        server.shutdown()
        server.server_close()


def us_east(fake: FakeAws) -> None:
    fake.add_region(
        "us-east-1",
        {"g5.xlarge": ["us-east-1a", "us-east-1b"]},
        {("us-east-1a", "g5.xlarge"): "0.412300", ("us-east-1b", "g5.xlarge"): "0.398100"},
        {"g5.xlarge": "1.0060000000"},
    )


def test_throttled_first_answer_is_retried_and_succeeds(
    fake_aws: FakeAws, backoff_waits: list[int]
) -> None:
    us_east(fake_aws)
    fake_aws.faults["DescribeSpotPriceHistory"] = ["RequestLimitExceeded"]
    fake_aws.faults["GetProducts"] = ["ThrottlingException"]

    quotes = aws.fetch_quotes(
        request(),
        now=NOW,
        session=credentials_session(),
        endpoint_url=fake_aws.url,
        fetch_advisor=False,
    )

    assert [(q.zone, q.market, q.price_per_hour) for q in quotes] == [
        ("us-east-1a", "on-demand", 1.006),
        ("us-east-1a", "spot", 0.4123),
        ("us-east-1b", "on-demand", 1.006),
        ("us-east-1b", "spot", 0.3981),
    ]
    actions = [seen.action for seen in fake_aws.requests]
    assert actions.count("DescribeSpotPriceHistory") == 2
    assert actions.count("GetProducts") == 2
    assert len(backoff_waits) == 2


def test_persistent_throttling_raises_one_line_price_source_error(
    fake_aws: FakeAws, backoff_waits: list[int]
) -> None:
    us_east(fake_aws)
    fake_aws.faults["DescribeSpotPriceHistory"] = ["RequestLimitExceeded"] * 10

    with pytest.raises(PriceSourceError) as caught:
        aws.fetch_quotes(
            request(max_attempts=3),
            now=NOW,
            session=credentials_session(),
            endpoint_url=fake_aws.url,
            fetch_advisor=False,
        )

    message = caught.value.message
    assert "ec2:DescribeSpotPriceHistory in us-east-1" in message
    assert "throttled (RequestLimitExceeded) after 3 attempts" in message
    assert "\n" not in message
    assert [s.action for s in fake_aws.requests].count("DescribeSpotPriceHistory") == 3


def test_server_errors_are_retried_then_reported(
    fake_aws: FakeAws, backoff_waits: list[int]
) -> None:
    us_east(fake_aws)
    fake_aws.faults["DescribeInstanceTypeOfferings"] = ["InternalError"] * 2

    with pytest.raises(PriceSourceError, match=r"InternalError, HTTP 500\) after 2 attempts"):
        aws.fetch_quotes(
            request(max_attempts=2),
            now=NOW,
            session=credentials_session(),
            endpoint_url=fake_aws.url,
            fetch_advisor=False,
        )
    assert len(fake_aws.requests) == 2


def test_read_timeout_raises_price_source_error_naming_api_and_region(
    fake_aws: FakeAws, backoff_waits: list[int]
) -> None:
    us_east(fake_aws)
    fake_aws.faults["DescribeInstanceTypeOfferings"] = ["hang", "hang"]

    with pytest.raises(PriceSourceError) as caught:
        aws.fetch_quotes(
            request(timeout_s=0.3, max_attempts=2),
            now=NOW,
            session=credentials_session(),
            endpoint_url=fake_aws.url,
            fetch_advisor=False,
        )

    assert "ec2:DescribeInstanceTypeOfferings in us-east-1 timed out" in caught.value.message
    # A timed-out call is retried like a throttled one.
    assert len(fake_aws.requests) == 2


def test_unreachable_endpoint_raises_price_source_error(backoff_waits: list[int]) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]

    with pytest.raises(PriceSourceError, match="could not connect"):
        aws.fetch_quotes(
            request(max_attempts=1, timeout_s=1.0),
            now=NOW,
            session=credentials_session(),
            endpoint_url=f"http://127.0.0.1:{closed_port}",
            fetch_advisor=False,
        )


def test_regions_queried_in_parallel_give_sorted_deterministic_output(
    fake_aws: FakeAws,
) -> None:
    regions = ("us-west-2", "eu-west-1", "us-east-1", "ap-northeast-1")
    for i, region in enumerate(regions):
        fake_aws.add_region(
            region,
            {"g5.xlarge": [f"{region}b", f"{region}a"], "g6.xlarge": [f"{region}c"]},
            {
                (f"{region}a", "g5.xlarge"): f"0.4{i}",
                (f"{region}b", "g5.xlarge"): f"0.5{i}",
                (f"{region}c", "g6.xlarge"): f"0.3{i}",
            },
            {"g5.xlarge": f"1.00{i}", "g6.xlarge": f"0.80{i}"},
        )
    # The barrier only opens when all four regions ask at the same time: a sequential
    # implementation would break it and get HTTP errors.
    fake_aws.barrier = threading.Barrier(len(regions))
    ask = request(("g6.xlarge", "g5.xlarge"), regions, max_workers=4, max_attempts=1)

    first = aws.fetch_quotes(
        ask, now=NOW, session=credentials_session(), endpoint_url=fake_aws.url, fetch_advisor=False
    )
    fake_aws.barrier = None
    second = aws.fetch_quotes(
        ask, now=NOW, session=credentials_session(), endpoint_url=fake_aws.url, fetch_advisor=False
    )

    assert first == second
    assert len(first) == 4 * 3 * 2
    keys = [(q.region, q.zone or "", q.instance_type, q.market) for q in first]
    assert keys == sorted(keys)
    assert {(q.region, q.observed_at) for q in first} == {(r, NOW) for r in regions}


def test_error_in_one_region_fails_the_refresh_with_that_region_named(
    fake_aws: FakeAws, backoff_waits: list[int]
) -> None:
    us_east(fake_aws)
    fake_aws.add_region(
        "eu-west-1",
        {"g5.xlarge": ["eu-west-1a"]},
        {("eu-west-1a", "g5.xlarge"): "0.45"},
        {"g5.xlarge": "1.1"},
    )
    fake_aws.faults["DescribeSpotPriceHistory"] = ["RequestLimitExceeded"] * 20

    with pytest.raises(PriceSourceError, match=r"in (us-east-1|eu-west-1) still throttled"):
        aws.fetch_quotes(
            request(regions=("us-east-1", "eu-west-1"), max_attempts=2),
            now=NOW,
            session=credentials_session(),
            endpoint_url=fake_aws.url,
            fetch_advisor=False,
        )


# --- Spot Instance Advisor --------------------------------------------------------------


def test_spot_advisor_maps_region_and_linux_type_to_bucket_label() -> None:
    assert aws.parse_spot_advisor(advisor_doc()) == {
        ("us-east-1", "g5.xlarge"): "5-10%",
        ("us-east-1", "p4d.24xlarge"): ">20%",
        ("eu-west-1", "g5.xlarge"): "<5%",
    }


def test_spot_advisor_with_unknown_bucket_index_is_rejected() -> None:
    doc = advisor_doc()
    doc["spot_advisor"]["us-east-1"]["Linux"]["g5.xlarge"]["r"] = 7

    with pytest.raises(PriceSourceError, match=r"malformed.*g5\.xlarge\.r is 7"):
        aws.parse_spot_advisor(doc)


def test_spot_advisor_without_its_main_section_is_rejected() -> None:
    with pytest.raises(PriceSourceError, match="missing 'spot_advisor'"):
        aws.parse_spot_advisor({"ranges": advisor_doc()["ranges"]})


def test_fetch_spot_advisor_reads_the_published_json(fake_aws: FakeAws) -> None:
    fake_aws.advisor = (200, json.dumps(advisor_doc()).encode())

    buckets = aws.fetch_spot_advisor(f"{fake_aws.url}/spot-advisor-data.json", timeout_s=2.0)

    assert buckets[("us-east-1", "p4d.24xlarge")] == ">20%"


def test_fetch_spot_advisor_uses_a_given_client(fake_aws: FakeAws) -> None:
    fake_aws.advisor = (200, json.dumps(advisor_doc()).encode())

    with httpx.Client() as client:
        buckets = aws.fetch_spot_advisor(
            f"{fake_aws.url}/spot-advisor-data.json", timeout_s=2.0, client=client
        )
        assert not client.is_closed

    assert len(buckets) == 3


def test_fetch_spot_advisor_http_error_is_a_price_source_error(fake_aws: FakeAws) -> None:
    fake_aws.advisor = (503, b"Slow Down")

    with pytest.raises(PriceSourceError, match="HTTP 503"):
        aws.fetch_spot_advisor(f"{fake_aws.url}/spot-advisor-data.json", timeout_s=2.0)


def test_fetch_spot_advisor_times_out_against_a_silent_server(fake_aws: FakeAws) -> None:
    fake_aws.advisor_hangs = True

    with pytest.raises(PriceSourceError, match=r"timed out after 0\.2 s"):
        aws.fetch_spot_advisor(f"{fake_aws.url}/spot-advisor-data.json", timeout_s=0.2)


def test_spot_quotes_carry_the_advisor_bucket(fake_aws: FakeAws) -> None:
    us_east(fake_aws)
    fake_aws.advisor = (200, json.dumps(advisor_doc()).encode())

    quotes = aws.fetch_quotes(
        request(),
        now=NOW,
        session=credentials_session(),
        endpoint_url=fake_aws.url,
        advisor_url=f"{fake_aws.url}/spot-advisor-data.json",
    )

    assert {(q.market, q.interruption_bucket) for q in quotes} == {
        ("spot", "5-10%"),
        ("on-demand", None),
    }
    assert fake_aws.advisor_gets == 1


def test_advisor_failure_keeps_the_prices_and_leaves_buckets_unknown(fake_aws: FakeAws) -> None:
    us_east(fake_aws)
    fake_aws.advisor = (200, b"<html>not json</html>")

    quotes = aws.fetch_quotes(
        request(),
        now=NOW,
        session=credentials_session(),
        endpoint_url=fake_aws.url,
        advisor_url=f"{fake_aws.url}/spot-advisor-data.json",
    )

    assert len(quotes) == 4
    assert {q.interruption_bucket for q in quotes} == {None}


def test_given_buckets_are_used_without_fetching_the_advisor(fake_aws: FakeAws) -> None:
    us_east(fake_aws)
    fake_aws.advisor = (200, json.dumps(advisor_doc()).encode())

    quotes = aws.fetch_quotes(
        request(markets=("spot",)),
        now=NOW,
        session=credentials_session(),
        endpoint_url=fake_aws.url,
        interruption_buckets={("us-east-1", "g5.xlarge"): "15-20%"},
        advisor_url=f"{fake_aws.url}/spot-advisor-data.json",
    )

    assert [q.interruption_bucket for q in quotes] == ["15-20%", "15-20%"]
    assert fake_aws.advisor_gets == 0


def test_failing_credential_process_is_reported_as_credentials_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake_aws: FakeAws
) -> None:
    config = tmp_path / "aws-config"
    config.write_text("[profile gpu]\ncredential_process = /bin/false\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "gpu")

    with pytest.raises(CredentialsMissing) as caught:
        aws.fetch_quotes(request(), now=NOW, endpoint_url=fake_aws.url, fetch_advisor=False)

    assert "CredentialRetrievalError" in caught.value.message
    assert "/bin/false" not in caught.value.message
    assert fake_aws.requests == []


def test_sso_profile_without_a_login_asks_for_aws_sso_login(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake_aws: FakeAws
) -> None:
    config = tmp_path / "aws-config"
    config.write_text(
        "[profile research]\n"
        "sso_start_url = https://research.awsapps.example/start\n"
        "sso_region = us-east-1\n"
        "sso_account_id = 111122223333\n"
        "sso_role_name = PriceReader\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "research")
    monkeypatch.setenv("HOME", str(tmp_path))  # empty ~/.aws/sso/cache: never logged in

    with pytest.raises(CredentialsMissing, match="aws sso login"):
        aws.fetch_quotes(request(), now=NOW, endpoint_url=fake_aws.url, fetch_advisor=False)

    assert fake_aws.requests == []
