"""The price book: merging cache over snapshot, filtering, and refreshing per cloud."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from router.config.datafiles import load_catalog
from router.core.errors import CredentialsMissing, PriceSourceError
from router.core.offers import Quote
from router.prices.book import OfferFilter, freshest, known_offers, refresh, select_offers
from router.prices.cache import QuoteCache
from router.prices.request import PriceRequest
from router.prices.source_protocol import Fetched


class FakeSource:
    """A PriceSource answering every request with `answer(request)`."""

    def __init__(self, answer: Callable[[PriceRequest], Fetched]) -> None:
        self.answer = answer

    def fetch(self, request: PriceRequest, *, now: datetime) -> Fetched:
        return self.answer(request)


NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def quote(**kw: object) -> Quote:
    fields: dict[str, object] = {
        "cloud": "aws",
        "region": "us-east-1",
        "zone": "us-east-1a",
        "instance_type": "p4de.24xlarge",
        "market": "spot",
        "price_per_hour": 10.0,
        "source": "aws-api",
        "observed_at": NOW,
    }
    fields.update(kw)
    return Quote(**fields)  # type: ignore[arg-type]


def test_freshest_quote_wins_per_place_type_and_market() -> None:
    old = quote(price_per_hour=9.0, observed_at=NOW - timedelta(hours=2))
    new = quote(price_per_hour=11.0)
    other_market = quote(
        market="on-demand", price_per_hour=40.0, observed_at=NOW - timedelta(days=1)
    )
    kept = freshest([old, new, other_market])
    assert sorted(q.price_per_hour for q in kept) == [11.0, 40.0]


def test_cached_quote_replaces_snapshot_rows_even_when_zones_are_named_differently(
    tmp_path: Path,
) -> None:
    snapshot = [
        quote(
            zone="use1-az4",
            source="snapshot",
            price_per_hour=5.0,
            observed_at=NOW - timedelta(days=500),
        ),
        quote(region="us-west-2", zone="usw2-az1", source="snapshot", price_per_hour=6.0),
    ]
    with QuoteCache(tmp_path / "c.sqlite3") as cache:
        cache.add([quote(zone="us-east-1a", price_per_hour=7.5)])
        offers = known_offers(load_catalog(), snapshot, cache)
    by_region = {o.region: o for o in offers}
    assert by_region["us-east-1"].price_per_hour == 7.5
    assert by_region["us-east-1"].source == "aws-api"
    # Nothing cached for us-west-2: the snapshot still answers there.
    assert by_region["us-west-2"].source == "snapshot"
    assert len(offers) == 2
    # Offers carry the catalog's hardware.
    assert by_region["us-east-1"].gpu == "A100-80GB" and by_region["us-east-1"].gpu_count == 8


def test_select_offers_filters_and_sorts_cheapest_first() -> None:
    catalog = load_catalog()
    quotes = [
        quote(price_per_hour=12.0),
        quote(zone="us-east-1b", price_per_hour=8.0),
        quote(region="eu-west-1", zone="eu-west-1a", price_per_hour=9.0),
        quote(instance_type="p5.48xlarge", price_per_hour=20.0),
        quote(market="on-demand", price_per_hour=30.0),
    ]
    offers = known_offers(catalog, quotes, None)
    rows = select_offers(
        offers, OfferFilter(gpu="A100-80GB", gpu_count=8, markets=("spot",), regions=("us-*",))
    )
    assert [o.price_per_hour for o in rows] == [8.0, 12.0]


class MemoryStore:
    def __init__(self) -> None:
        self.added: list[Quote] = []

    def add(self, quotes: object) -> int:
        batch = list(quotes)  # type: ignore[call-overload]
        self.added.extend(batch)
        return len(batch)

    def latest(self, *, clouds: object = None) -> list[Quote]:
        return list(self.added)


def test_one_clouds_failure_does_not_stop_the_others_and_failures_store_nothing() -> None:
    request = PriceRequest(instance_types=("p4de.24xlarge",), regions=("us-east-1",))

    def aws(_r: PriceRequest) -> Fetched:
        return Fetched([quote(), quote(zone="us-east-1b")])

    def gcp(_r: PriceRequest) -> Fetched:
        raise CredentialsMissing("GCP credentials not found — run gcloud auth")

    def azure(_r: PriceRequest) -> Fetched:
        raise PriceSourceError("Azure Retail Prices API: throttled in eastus after 5 attempts")

    store = MemoryStore()
    outcomes = refresh(
        {"aws": request, "gcp": request, "azure": request},
        store,
        now=NOW,
        sources={"aws": FakeSource(aws), "gcp": FakeSource(gcp), "azure": FakeSource(azure)},
    )
    by_cloud = {o.cloud: o for o in outcomes}
    assert by_cloud["aws"].quotes_stored == 2 and by_cloud["aws"].error is None
    assert by_cloud["gcp"].error == "GCP credentials not found — run gcloud auth"
    assert "throttled" in (by_cloud["azure"].error or "")
    assert len(store.added) == 2


def test_warnings_from_a_source_reach_the_refresh_outcome() -> None:
    request = PriceRequest(instance_types=("p4de.24xlarge",), regions=("us-east-1",))

    def azure(_r: PriceRequest) -> Fetched:
        return Fetched(
            [quote(cloud="azure")], ["availability check skipped: no AZURE_SUBSCRIPTION_ID"]
        )

    store = MemoryStore()
    (outcome,) = refresh({"azure": request}, store, now=NOW, sources={"azure": FakeSource(azure)})
    assert outcome.error is None and outcome.quotes_stored == 1
    assert outcome.warnings == ("availability check skipped: no AZURE_SUBSCRIPTION_ID",)
