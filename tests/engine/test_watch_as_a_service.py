"""route watch as a service on the local target: a move the loop makes is logged as JSON lines
(decision, journal steps, passes), counted in the metrics Prometheus scrapes over HTTP and in
the textfile, and SIGTERM ends the service with exit 0."""

from __future__ import annotations

import httpx
import pytest

from tests.engine.engine_cli import Route, wait_for
from tests.engine.market import placement, write_market, write_trainer_job
from tests.service_io import LogLines, samples

JOB = "served"


@pytest.mark.engine
def test_a_move_by_the_watch_service_is_logged_counted_and_scraped(route: Route) -> None:
    market = [("local-a", "spot", 1.0, 2), ("local-b", "spot", 1.5, 2)]
    write_market(route, market)
    job = write_trainer_job(route, JOB, cooldown="0s")
    route.ok("deploy", job.name, "--yes")
    wait_for(lambda: (route.home / "checkpoints" / JOB / JOB / "resumed.json").exists(), 30,
             "the trainer to start")  # fmt: skip
    prom = route.home / "textfile" / "spotroute.prom"
    prom.parent.mkdir()

    proc = route.start("watch", "--interval", "1s", "--log-format", "json",
                       "--metrics-port", "0", "--metrics-file", str(prom))  # fmt: skip
    log = LogLines(proc)
    try:
        url = log.next("start")["metrics_url"]
        stay = log.next("decision", job=JOB)
        assert (stay["action"], stay["reason_code"]) == ("stay", "under-threshold")

        market[1] = ("local-b", "spot", 0.3, 2)
        write_market(route, market)
        moved = log.next("decision", timeout_s=240, job=JOB, action="move")
        after = log.next("pass", timeout_s=60)
        scraped = samples(httpx.get(url, timeout=10).text)
        written = samples(prom.read_text())
    finally:
        events = log.stop()

    assert moved["outcome"] == "done" and moved["reason_code"] == "cheaper"
    saving = moved["decision"]["numbers"]["saving_usd"]
    assert saving > 0 and moved["saved_usd"] == saving
    steps = [e["step"] for e in events if e["event"] == "step" and e["journal"] == moved["journal"]]
    assert steps[0] == "intent" and "old-stack-down" in steps, steps
    assert after["ok"] and after["states"]["running"] == 1
    for got in (scraped, written):  # the scrape and the textfile tell the same story
        moves = ("spotroute_watch_moves_total",
                 (("action", "move"), ("outcome", "done"), ("reason", "cheaper")))  # fmt: skip
        assert got[moves] == 1.0
        assert got[("spotroute_watch_saved_usd_total", ())] == pytest.approx(saving)
        assert got[("spotroute_watch_jobs", (("state", "running"),))] == 1.0
        stays = ("spotroute_watch_decisions_total",
                 (("action", "stay"), ("reason", "under-threshold")))  # fmt: skip
        assert got[stays] >= 1.0
    assert placement(route, JOB)["region"] == "local-b"
    assert events[-1]["event"] == "stop"
