"""The SQLite quote cache: round trips, newest-per-place, history, concurrency, bad files."""

from __future__ import annotations

import multiprocessing
import sqlite3
import traceback
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from router.core.errors import OperationFailed
from router.core.offers import Quote
from router.prices.cache import QuoteCache

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def quote(
    *,
    cloud: str = "aws",
    region: str = "us-east-1",
    zone: str | None = "use1-az4",
    instance_type: str = "p4d.24xlarge",
    market: str = "spot",
    price_per_hour: float = 9.8304,
    source: str = "aws-api",
    observed_at: datetime = T0,
    interruption_bucket: str | None = None,
) -> Quote:
    return Quote(
        cloud=cloud,
        region=region,
        zone=zone,
        instance_type=instance_type,
        market=market,
        price_per_hour=price_per_hour,
        source=source,
        observed_at=observed_at,
        interruption_bucket=interruption_bucket,
    )


def test_quotes_read_back_equal_to_the_quotes_added_after_reopening(tmp_path: Path) -> None:
    path = tmp_path / "prices.sqlite3"
    added = [
        quote(interruption_bucket="<5%"),
        quote(
            market="on-demand", price_per_hour=32.7726, observed_at=T0 + timedelta(microseconds=7)
        ),
        quote(
            cloud="azure",
            region="eastus",
            zone=None,
            instance_type="Standard_ND96amsr_A100_v4",
            price_per_hour=3.6047,
            source="azure-api",
            observed_at=datetime(2025, 3, 1, 14, 30, tzinfo=timezone(timedelta(hours=2))),
        ),
        quote(
            cloud="gcp",
            region="us-central1",
            zone="us-central1-a",
            instance_type="a2-ultragpu-8g",
            price_per_hour=16.08824,
            source="import:skypilot",
            observed_at=T0 - timedelta(days=3),
        ),
    ]
    with QuoteCache(path) as cache:
        assert cache.add(added) == 4

    with QuoteCache(path) as cache:
        read_back = cache.latest()

    assert sorted(read_back, key=repr) == sorted(added, key=repr)
    assert all(q.observed_at.utcoffset() == timedelta(0) for q in read_back)
    assert {q.zone for q in read_back if q.cloud == "azure"} == {None}


def test_adding_the_same_quotes_again_stores_nothing_new(tmp_path: Path) -> None:
    batch = [quote(instance_type=f"g5.{size}xlarge") for size in (2, 4, 8)]
    with QuoteCache(tmp_path / "prices.sqlite3") as cache:
        assert cache.add(batch) == 3
        assert cache.add(batch) == 0
        assert cache.add([*batch, quote(instance_type="g5.12xlarge")]) == 1
        assert cache.sources() == {"aws-api": (4, T0)}


def test_latest_picks_the_newest_quote_per_place_whichever_source_reported_it(
    tmp_path: Path,
) -> None:
    old_api = quote(price_per_hour=10.0, source="aws-api", observed_at=T0)
    newer_import = quote(
        price_per_hour=11.0, source="import:skypilot", observed_at=T0 + timedelta(hours=1)
    )
    other_zone = quote(zone="use1-az6", price_per_hour=12.0, observed_at=T0 - timedelta(hours=5))
    on_demand = quote(market="on-demand", price_per_hour=32.77, source="snapshot", observed_at=T0)
    with QuoteCache(tmp_path / "prices.sqlite3") as cache:
        cache.add([newer_import, old_api, other_zone, on_demand])
        newest = cache.latest()

    assert sorted(newest, key=repr) == sorted([newer_import, other_zone, on_demand], key=repr)


def test_latest_breaks_a_tie_in_observation_time_in_favour_of_the_quote_added_last(
    tmp_path: Path,
) -> None:
    first = quote(price_per_hour=10.0, source="snapshot")
    second = quote(price_per_hour=10.5, source="aws-api")
    with QuoteCache(tmp_path / "prices.sqlite3") as cache:
        cache.add([first])
        cache.add([second])
        assert cache.latest() == [second]


def test_latest_leaves_out_places_whose_newest_quote_is_older_than_max_age(tmp_path: Path) -> None:
    fresh = quote(zone="use1-az1", observed_at=T0 - timedelta(minutes=30))
    stale = quote(zone="use1-az2", observed_at=T0 - timedelta(hours=7))
    exactly_at_limit = quote(zone="use1-az3", observed_at=T0 - timedelta(hours=6))
    with QuoteCache(tmp_path / "prices.sqlite3") as cache:
        cache.add([fresh, stale, exactly_at_limit])
        recent = cache.latest(max_age_s=6 * 3600, now=T0)
        everything = cache.latest()

    assert sorted(q.zone or "" for q in recent) == ["use1-az1", "use1-az3"]
    assert len(everything) == 3


def test_latest_filters_by_cloud_instance_type_and_market(tmp_path: Path) -> None:
    quotes = [
        quote(),
        quote(market="on-demand"),
        quote(instance_type="p5.48xlarge"),
        quote(
            cloud="gcp", region="us-central1", zone="us-central1-a", instance_type="a2-ultragpu-8g"
        ),
    ]
    with QuoteCache(tmp_path / "prices.sqlite3") as cache:
        cache.add(quotes)
        assert cache.latest(clouds=["gcp"]) == [quotes[3]]
        assert cache.latest(clouds="aws", instance_types=["p4d.24xlarge"], markets=["spot"]) == [
            quotes[0]
        ]
        assert len(cache.latest(markets=["spot"])) == 3
        assert cache.latest(instance_types=[]) == []


def test_history_lists_one_types_quotes_oldest_first_within_inclusive_bounds(
    tmp_path: Path,
) -> None:
    hourly = [
        quote(price_per_hour=9.0 + hour / 10, observed_at=T0 + timedelta(hours=hour))
        for hour in range(6)
    ]
    noise = [
        quote(instance_type="p5.48xlarge", observed_at=T0 + timedelta(hours=2)),
        quote(region="us-west-2", zone="usw2-az1", observed_at=T0 + timedelta(hours=3)),
        quote(market="on-demand", observed_at=T0 + timedelta(hours=4)),
    ]
    with QuoteCache(tmp_path / "prices.sqlite3") as cache:
        cache.add(list(reversed(hourly)) + noise)
        window = cache.history(
            cloud="aws",
            instance_type="p4d.24xlarge",
            region="us-east-1",
            market="spot",
            since=T0 + timedelta(hours=1),
            until=T0 + timedelta(hours=4),
        )
        all_regions_and_markets = cache.history(cloud="aws", instance_type="p4d.24xlarge")

    assert window == hourly[1:5]
    assert len(all_regions_and_markets) == 8
    times = [q.observed_at for q in all_regions_and_markets]
    assert times == sorted(times)


def test_sources_reports_count_and_newest_observation_per_source(tmp_path: Path) -> None:
    with QuoteCache(tmp_path / "prices.sqlite3") as cache:
        cache.add(
            [
                quote(source="aws-api", observed_at=T0),
                quote(source="aws-api", zone="use1-az6", observed_at=T0 + timedelta(hours=2)),
                quote(source="import:skypilot", observed_at=T0 - timedelta(days=1)),
            ]
        )
        assert cache.sources() == {
            "aws-api": (2, T0 + timedelta(hours=2)),
            "import:skypilot": (1, T0 - timedelta(days=1)),
        }


def _add_quotes_in_another_process(path: str, worker: int, barrier: Any, results: Any) -> None:
    """Runs in a spawned process: opens the cache at the same moment as its siblings."""
    try:
        quotes = [
            quote(
                zone=f"use1-az{worker}",
                instance_type=f"type-{i}",
                price_per_hour=1 + i / 1000,
                source=f"worker-{worker}",
                observed_at=T0 + timedelta(seconds=i),
            )
            for i in range(500)
        ]
        barrier.wait(timeout=60)
        with QuoteCache(Path(path)) as cache:
            # Small batches make many short write transactions that contend for the lock.
            inserted = sum(cache.add(quotes[start : start + 25]) for start in range(0, 500, 25))
        results.put((worker, inserted, None))
    except BaseException:
        results.put((worker, 0, traceback.format_exc()))


def test_four_processes_adding_at_once_all_land_without_lock_errors(tmp_path: Path) -> None:
    path = tmp_path / "prices.sqlite3"
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    results = context.Queue()
    workers = [
        context.Process(
            target=_add_quotes_in_another_process, args=(str(path), n, barrier, results)
        )
        for n in range(1, 5)
    ]
    for process in workers:
        process.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for process in workers:
        process.join(timeout=60)

    assert [error for _, _, error in outcomes if error] == []
    assert sorted((worker, inserted) for worker, inserted, _ in outcomes) == [
        (n, 500) for n in range(1, 5)
    ]
    assert [process.exitcode for process in workers] == [0, 0, 0, 0]
    with QuoteCache(path) as cache:
        assert len(cache.latest()) == 2000
        assert cache.sources() == {
            f"worker-{n}": (500, T0 + timedelta(seconds=499)) for n in range(1, 5)
        }


def test_a_file_that_is_not_sqlite_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "prices.sqlite3"
    original = b"instance,price\np4d.24xlarge,32.77\n"
    path.write_bytes(original)

    with pytest.raises(OperationFailed) as raised:
        QuoteCache(path)

    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prices.sqlite3"]
    assert str(path) in raised.value.message
    assert "move it away; spotroute will rebuild the cache" in raised.value.message
    assert "\n" not in raised.value.message


def test_a_corrupted_cache_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "prices.sqlite3"
    with QuoteCache(path) as cache:
        cache.add([quote()])
    damaged = bytearray(path.read_bytes())
    damaged[100 : len(damaged)] = b"\xde\xad\xbe\xef" * ((len(damaged) - 100) // 4)
    path.write_bytes(bytes(damaged))

    with pytest.raises(OperationFailed) as raised, QuoteCache(path) as cache:
        cache.latest()

    assert path.read_bytes() == bytes(damaged)
    assert str(path) in raised.value.message
    assert "move it away; spotroute will rebuild the cache" in raised.value.message


def test_another_sqlite_database_at_the_cache_path_is_refused_and_left_untouched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "prices.sqlite3"
    with sqlite3.connect(path) as other:
        other.execute("CREATE TABLE notes (body TEXT)")
        other.execute("INSERT INTO notes VALUES ('keep me')")
    other.close()
    original = path.read_bytes()

    with pytest.raises(OperationFailed) as raised:
        QuoteCache(path)

    assert path.read_bytes() == original
    assert "not a spotroute price cache" in raised.value.message


def test_a_cache_written_by_a_newer_schema_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "prices.sqlite3"
    with QuoteCache(path) as cache:
        cache.add([quote()])
    newer = sqlite3.connect(path)
    newer.execute("PRAGMA user_version=99")
    newer.close()
    original = path.read_bytes()

    with pytest.raises(OperationFailed) as raised:
        QuoteCache(path)

    assert "newer spotroute" in raised.value.message
    assert "v99" in raised.value.message
    assert "upgrade spotroute" in raised.value.message
    assert path.read_bytes() == original


def test_a_directory_at_the_cache_path_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "prices.sqlite3"
    path.mkdir()

    with pytest.raises(OperationFailed) as raised:
        QuoteCache(path)

    assert "is a directory" in raised.value.message
