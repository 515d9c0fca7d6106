"""Live price sources: one class per cloud behind one `PriceSource` protocol, in one registry.

Each cloud's module (aws.py, gcp.py, azure.py) defines a class with `fetch(request, *, now)`;
`SOURCES` maps the cloud to a constructor that imports its module only when called, so the
cloud SDKs load only for `route prices refresh`. Adding a cloud = one module + one entry here.
"""

from __future__ import annotations

from collections.abc import Callable

from router.prices.source_protocol import PriceSource


def _aws() -> PriceSource:
    from router.prices.aws import AwsPrices

    return AwsPrices()


def _gcp() -> PriceSource:
    from router.prices.gcp import GcpPrices

    return GcpPrices()


def _azure() -> PriceSource:
    from router.prices.azure import AzurePrices

    return AzurePrices()


# The registry: every cloud with a live price source, in refresh order.
SOURCES: dict[str, Callable[[], PriceSource]] = {"aws": _aws, "gcp": _gcp, "azure": _azure}


def price_source(cloud: str) -> PriceSource:
    """The live price source of `cloud` (its SDK is imported now); KeyError if it has none."""
    return SOURCES[cloud]()
