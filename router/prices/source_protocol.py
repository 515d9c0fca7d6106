"""What a live price source is: the `PriceSource` protocol and the `Fetched` quotes it returns.

The cloud modules (aws.py, gcp.py, azure.py) import these; the registry (sources.py) imports
the cloud modules. Imports point one way: registry → cloud → this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from router.core.offers import Quote
from router.prices.request import PriceRequest


@dataclass(frozen=True)
class Fetched:
    """Quotes from one refresh of one cloud, plus one line per check skipped or done partly."""

    quotes: list[Quote]
    warnings: list[str] = field(default_factory=list)


class PriceSource(Protocol):
    """One cloud's live prices: the quotes (USD per instance-hour) for `request`, seen at `now`."""

    def fetch(self, request: PriceRequest, *, now: datetime) -> Fetched: ...
