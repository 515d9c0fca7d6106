"""The local market: a trace of prices and capacity per local region, over time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from router.config.local_market import load_local_market
from router.config.org_file import parse_org_config
from router.contract.local_market import LocalMarket, MarketError, parse_trace
from router.core.errors import BadInput
from router.core.job.model import Job
from router.core.job.problems import parse_job
from router.prices.local import local_offers

START = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
TRACE = """\
# a small market
at,region,market,price_per_hour,capacity
0s,local-a,spot,0.90,2
0s,local-a,on-demand,2.50,4
0s,local-b,spot,1.20,2
2h,local-b,spot,0.40,2   # local-b gets cheaper
2026-12-01T13:00:00Z,local-a,spot,0.95,0
"""


def test_each_region_has_the_values_of_its_latest_row() -> None:
    market = LocalMarket(parse_trace(TRACE, "t.csv"), START)
    at_start = market.at(START)
    assert at_start[("local-b", "spot")].price_per_hour == 1.20
    assert market.at(START + timedelta(hours=2))[("local-b", "spot")].price_per_hour == 0.40
    late = market.at(START + timedelta(hours=3))
    assert late[("local-a", "spot")].capacity == 0
    assert market.at(START - timedelta(seconds=1)) == {}
    assert LocalMarket.from_env(market.to_env()) == market


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("at,region,market,price\n", "t.csv:1: header lacks price_per_hour, capacity"),
        ("at,region,market,price_per_hour,capacity\n0s,eu-1,spot,1,1\n", "t.csv:2: region"),
        ("at,region,market,price_per_hour,capacity\n0s,local-a,cheap,1,1\n", "t.csv:2: market"),
        ("at,region,market,price_per_hour,capacity\n0s,local-a,spot,-1,1\n", "price_per_hour"),
        ("at,region,market,price_per_hour,capacity\nsoon,local-a,spot,1,1\n", "t.csv:2: at"),
        ("at,region,market,price_per_hour,capacity\n0s,local-a,spot,1,many\n", "capacity"),
    ],
)
def test_bad_traces_name_file_line_and_column(text: str, message: str) -> None:
    with pytest.raises(MarketError, match=message):
        parse_trace(text, "t.csv")


def _job() -> Job:
    return parse_job(
        {
            "name": "m",
            "resources": {"accelerators": "T4:1", "clouds": ["local"]},
            "market": "spot",
            "duration_hours": 1,
            "checkpoint": {"interval": "1m"},
            "run": {"command": ["/bin/true"]},
        },
        "m.yaml",
    )


def test_local_offers_follow_the_trace_and_the_org_config(tmp_path: Path) -> None:
    (tmp_path / "market.csv").write_text(TRACE)
    org = parse_org_config(f"local_market: {{trace: market.csv, start: '{START.isoformat()}'}}")
    market = load_local_market(org, tmp_path)
    assert market is not None
    offers = local_offers(_job(), START + timedelta(hours=2), market)
    by_place = {(o.region, o.market): o.price_per_hour for o in offers}
    assert by_place == {
        ("local-a", "on-demand"): 2.50,
        ("local-a", "spot"): 0.90,
        ("local-b", "spot"): 0.40,
    }
    inline = parse_org_config(
        "local_market:\n  offers:\n    - {region: local-c, market: spot, price_per_hour: 0.3,"
        " capacity: 1}\n"
    )
    market = load_local_market(inline, tmp_path)
    assert market is not None and market.regions() == ("local-c",)


def test_a_local_region_smaller_than_the_group_is_rejected_with_its_reason(
    tmp_path: Path,
) -> None:
    from router.config.datafiles import load_egress, load_interruption_model
    from router.core.org import OrgConfig
    from router.core.planner import plan

    trace = (
        "at,region,market,price_per_hour,capacity\n"
        "0s,local-a,spot,0.20,1\n"  # the cheapest, but one node process at a time
        "0s,local-b,spot,0.90,2\n"
        "0s,local-c,spot,0.50,0\n"  # full now: tried and refused at launch, as on a cloud
    )
    market = LocalMarket(parse_trace(trace, "t.csv"), START)
    group = _job().model_copy(update={"node_count": 2})
    offers = local_offers(group, START, market)
    assert {o.region: o.capacity for o in offers} == {"local-a": 1, "local-b": 2, "local-c": 0}

    def regions(job: Job) -> tuple[list[str], dict[str, tuple[str, str]]]:
        result = plan(job, local_offers(job, START, market), org=OrgConfig(),
                      egress=load_egress(), now=START, interruption=load_interruption_model())
        return ([p.region for p in result.placements],
                {r.offer.region: (r.filter, r.reason) for r in result.rejected})

    placed, rejected = regions(group)
    assert placed == ["local-c", "local-b"]
    assert rejected == {"local-a": ("capacity", "local-a runs 1 instance(s) at once and the group"
                                    " needs 2 in one place — lower node_count or raise the"
                                    " region's capacity (local_market in spotroute.yaml)")}
    # One node fits everywhere; without a market the local target's capacity is not known.
    assert regions(_job()) == (["local-a", "local-c", "local-b"], {})
    assert all(o.capacity is None for o in local_offers(group, START, None))


def test_a_missing_trace_file_is_one_line_naming_the_key(tmp_path: Path) -> None:
    org = parse_org_config("local_market: {trace: nowhere.csv}")
    with pytest.raises(BadInput, match=r"local_market\.trace: cannot read .*nowhere\.csv"):
        load_local_market(org, tmp_path)


def test_a_zone_taken_away_is_not_offered_until_its_next_row() -> None:
    """A rehearsal's market announces a zone's outage (capacity `-`): no offer, no launch, and
    the nodes there are reclaimed — the zone is not a candidate, as in the backtest."""
    from components.local_nodes import check_launch

    trace = TRACE + "1h,local-b,spot,-,-\n90m,local-b,spot,1.10,2\n"
    market = LocalMarket(parse_trace(trace, "t.csv"), START)
    assert ("local-b", "spot") not in market.at(START + timedelta(hours=1))
    assert market.at(START + timedelta(minutes=90))[("local-b", "spot")].price_per_hour == 1.10
    assert LocalMarket.from_env(market.to_env()) == market
    job = parse_job(
        {"name": "j", "resources": {"accelerators": "T4:1", "clouds": ["local"]},
         "market": "spot", "duration_hours": 1, "checkpoint": {"interval": "10m"},
         "run": {"command": ["true"]}}, "job.yaml",
    )  # fmt: skip
    regions = {o.region for o in local_offers(job, START + timedelta(hours=1), market)}
    assert regions == {"local-a"}
    with pytest.raises(RuntimeError, match="LocalCapacityExhausted"):
        check_launch(Path("/nonexistent"), market, region="local-b", kind="spot", max_price=0,
                     nodes=1, gpus_per_node=0, now=START + timedelta(hours=1))  # fmt: skip


def test_a_long_trace_is_looked_up_as_the_rows_say() -> None:
    """at() bisects each place's rows: the same answer as the latest row at or before now."""
    rows = [f"{i * 30}s,local-a,spot,{1 + i % 7},{i % 3}" for i in range(2000)]
    market = LocalMarket(parse_trace("at,region,market,price_per_hour,capacity\n"
                                     + "\n".join(rows), "t.csv"), START)  # fmt: skip
    for second in (0, 29, 30, 31, 29_999, 59_970, 10**6):
        i = min(1999, second // 30)
        row = market.at(START + timedelta(seconds=second))[("local-a", "spot")]
        assert (row.price_per_hour, row.capacity) == (1 + i % 7, i % 3)
