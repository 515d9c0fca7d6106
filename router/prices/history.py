"""Spot price history pulled live, for `route prices history --gpu G --count N --days D`.

AWS: ec2 DescribeSpotPriceHistory (paginated; AWS keeps 90 days), Linux/UNIX prices of the
given instance types in each region, written in the shape `aws ec2 describe-spot-price-history`
prints, so `route backtest --prices FILE` reads it unchanged (router/config/traces.py).
GCP and Azure publish no spot price history API: their history is the price cache's own
(`route prices refresh` over time) or a dated series of SkyPilot catalogs. boto3 is imported
here only, lazily.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from router.core.errors import BadInput, OperationFailed

MAX_DAYS = 90  # how far back DescribeSpotPriceHistory answers
LINUX = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
NO_HISTORY_API = {
    "gcp": "GCP publishes no spot price history API — use the price cache's history "
    "(`route prices history --cloud gcp --instance-type T`) or dated SkyPilot catalogs",
    "azure": "Azure publishes no spot price history API — use the price cache's history "
    "(`route prices history --cloud azure --instance-type T`) or dated SkyPilot catalogs",
}


def aws_spot_history(
    *,
    regions: Sequence[str],
    instance_types: Sequence[str],
    start: datetime,
    end: datetime,
    session: Any = None,
    endpoint_url: str | None = None,
) -> list[dict[str, str]]:
    """Every Linux/UNIX spot price of the types in the regions between start and end, oldest first.

    Rows are DescribeSpotPriceHistory items (AvailabilityZone, InstanceType, ProductDescription,
    SpotPrice in USD per instance-hour, Timestamp as ISO 8601 UTC). AWS also returns the price in
    force at `start`, which may be older.
    """
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    session = session or boto3.Session()
    config = Config(retries={"max_attempts": 5, "mode": "standard"}, connect_timeout=10)
    rows: list[dict[str, str]] = []
    for region in regions:
        client = session.client("ec2", region_name=region, config=config, endpoint_url=endpoint_url)
        pages = client.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=list(instance_types),
            ProductDescriptions=list(LINUX),
            StartTime=start,
            EndTime=end,
        )
        try:
            for page in pages:
                for item in page.get("SpotPriceHistory", []):
                    rows.append(_row(item))
        except NoCredentialsError:
            raise OperationFailed(
                "no AWS credentials — run `aws configure sso` or set AWS_PROFILE "
                "(DescribeSpotPriceHistory needs ec2:DescribeSpotPriceHistory)"
            ) from None
        except ClientError as exc:
            err = exc.response.get("Error", {})
            raise OperationFailed(
                f"AWS DescribeSpotPriceHistory in {region} failed: {err.get('Code', '?')} — "
                f"{str(err.get('Message', '')).splitlines()[0] if err.get('Message') else ''}"
            ) from None
        except BotoCoreError as exc:
            raise OperationFailed(
                f"AWS DescribeSpotPriceHistory in {region} failed ({type(exc).__name__}) — "
                "check network access to AWS and that the region exists"
            ) from None
    rows.sort(key=lambda r: (r["Timestamp"], r["AvailabilityZone"], r["InstanceType"]))
    return rows


def _row(item: dict[str, Any]) -> dict[str, str]:
    at = item["Timestamp"]
    if isinstance(at, datetime):
        at = (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC)
        stamp = at.isoformat().replace("+00:00", "Z")
    else:
        stamp = str(at)
    return {
        "AvailabilityZone": str(item["AvailabilityZone"]),
        "InstanceType": str(item["InstanceType"]),
        "ProductDescription": str(item.get("ProductDescription", "Linux/UNIX")),
        "SpotPrice": str(item["SpotPrice"]),
        "Timestamp": stamp,
    }


def check_days(days: float) -> float:
    """The history window in days, within what AWS keeps; BadInput otherwise."""
    if not 0 < days <= MAX_DAYS:
        raise BadInput(f"--days: {days:g} — AWS keeps {MAX_DAYS} days of spot prices, use 1–90")
    return days


def write_history(path: Path, rows: Sequence[dict[str, str]]) -> Path:
    """Write rows as `aws ec2 describe-spot-price-history` prints them (atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"SpotPriceHistory": list(rows)}, indent=2) + "\n")
    os.replace(tmp, path)
    return path
