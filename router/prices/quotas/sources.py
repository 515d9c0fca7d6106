"""Live quota sources: one class per cloud behind one `QuotaSource` protocol, in one registry.

The same shape as the price sources (router/prices/sources.py): each cloud's module (aws.py,
gcp.py, azure.py) defines a class with `fetch(request, *, now)`; `SOURCES` maps the cloud to a
constructor that imports its module only when called, so the cloud SDKs load only for the
refresh commands, never for `route plan`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from router.core.quotas import QuotaReading
from router.prices.quotas.request import QuotaRequest


class QuotaSource(Protocol):
    """One cloud's quotas: limit and usage of each requested quota per region, read at `now`."""

    def fetch(self, request: QuotaRequest, *, now: datetime) -> list[QuotaReading]: ...


def _aws() -> QuotaSource:
    from router.prices.quotas.aws import AwsQuotas

    return AwsQuotas()


def _gcp() -> QuotaSource:
    from router.prices.quotas.gcp import GcpQuotas

    return GcpQuotas()


def _azure() -> QuotaSource:
    from router.prices.quotas.azure import AzureQuotas

    return AzureQuotas()


# The registry: every cloud with a live quota source, in refresh order.
SOURCES: dict[str, Callable[[], QuotaSource]] = {"aws": _aws, "gcp": _gcp, "azure": _azure}


def quota_source(cloud: str) -> QuotaSource:
    """The live quota source of `cloud` (its SDK is imported now); KeyError if it has none."""
    return SOURCES[cloud]()
