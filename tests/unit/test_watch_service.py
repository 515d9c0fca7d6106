"""route watch as a service: Prometheus metrics scraped over HTTP and written as a textfile,
JSON log lines, bad flags — on a pass over placement records set up directly (no engine)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from router.config.project import Project
from router.core.errors import OperationFailed
from router.engine.job_records import JobRecords, holder_id
from router.flows.jobs import engine_for
from router.flows.watch import JobReport, Watcher
from router.flows.watch_events import JOB_STATES, REASON_CODES, JsonLog, PassReport, price_ages
from router.flows.watch_metrics import WatchMetrics
from tests.service_io import LogLines, Samples, samples
from tests.unit.cli_harness import REPO, clean_env

TRACE = "at,region,market,price_per_hour,capacity\n0s,local-a,spot,1.00,8\n0s,local-b,spot,1.00,8\n"
JOBS = ("steady", "done", "orphan", "held")


def _job_yaml(name: str) -> str:
    return (
        f"name: {name}\nresources: {{accelerators: 'T4:1', clouds: [local]}}\nmarket: spot\n"
        "duration_hours: 4\ncheckpoint: {interval: 30m, restore_overhead: 10m}\n"
        "run: {command: [/bin/sleep, '600']}\n"
    )


def _checkpoint(directory: Path, at: datetime) -> None:
    d = directory / "step-000000000004"
    d.mkdir(parents=True)
    blob = b'{"w": 1}'
    (d / "state.json").write_bytes(blob)
    (d / "manifest.json").write_text(json.dumps({
        "format": "spotroute-checkpoint/1", "step": 4, "time": at.isoformat(), "world_size": 1,
        "job_id": "", "mode": "files", "extra": {},
        "files": [{"path": "state.json", "size": len(blob), "crc32": f"{zlib.crc32(blob):08x}"}],
    }))  # fmt: skip


def _group(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return f"local-process:{pid}:{stat[stat.rindex(')') + 2 :].split()[19]}"


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Project]:
    """Four jobs on the local market: one running (stays), one finished, one whose job file is
    gone (an error), one whose lease a live watcher holds (skipped)."""
    project, home = tmp_path / "project", tmp_path / "home"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text(
        "name: spotroute\nruntime: python\nstackConfigDir: stacks\n"
    )
    (project / "spotroute.yaml").write_text(
        "clouds: [local]\nlocal_market: {trace: trace.csv, start: '2026-01-01T00:00:00Z'}\n"
    )
    (project / "trace.csv").write_text(TRACE)
    monkeypatch.setenv("SPOTROUTE_HOME", str(home))
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "test")
    now = datetime.now(UTC)
    sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
    (home / "placements").mkdir(parents=True)
    for name in JOBS:
        job_file = project / f"{name}.yaml"
        if name != "orphan":
            job_file.write_text(_job_yaml(name))
        ckpt = home / "checkpoints" / name
        _checkpoint(ckpt, now)
        if name == "done":
            (ckpt / "finished.json").write_text('{"step": 4}')
        group = _group(sleeper.pid) if name != "done" else "local-process:999999:1"
        record = {"job": name, "cloud": "local", "region": "local-a", "zone": None,
                  "instance_type": "local-process", "market": "spot", "gpu": "T4",
                  "gpu_count": 1, "node_count": 1, "price_per_hour": 1.0, "stack": name,
                  "deployed_at": (now - timedelta(hours=1)).isoformat(),
                  "submitted_at": (now - timedelta(hours=1)).isoformat(), "run_h_before": 0.0,
                  "job_file": str(job_file),
                  "outputs": {"groupId": group, "checkpointUrl": f"file://{ckpt}/"}}  # fmt: skip
        (home / "placements" / f"{name}.json").write_text(json.dumps(record))
    p = Project(project)
    records = JobRecords(engine_for(p).records())
    # Another watcher, alive (this test process), holds the lease of "held" for an hour.
    assert records.acquire("held", holder_id("other"), 3600, now) is not None
    yield p
    sleeper.kill()
    sleeper.wait()


def scrape(url: str) -> Samples:
    """GET /metrics like Prometheus does; every sample by (name, labels)."""
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(response.text)


def test_a_pass_is_scraped_over_http_with_jobs_by_state_decisions_and_price_ages(
    service: Project,
) -> None:
    metrics = WatchMetrics(holder="h:1:2:n", interval_s=60.0, version="test")
    url = metrics.serve("127.0.0.1", 0)
    lines: list[str] = []

    class Lines:
        def write(self, text: str) -> None:
            lines.append(text)

        def flush(self) -> None:
            pass

    log = JsonLog(Lines())  # type: ignore[arg-type]
    from router.flows.watch_events import job_event, pass_events

    def report(r: JobReport) -> None:
        metrics.job_done(r)
        log.emit(job_event(r, datetime.now(UTC)))

    def passed(done: PassReport) -> None:
        metrics.pass_done(done)
        for event in pass_events(done, datetime.now(UTC)):
            log.emit(event)

    watcher = Watcher(service, concurrency=2, on_report=report, on_pass=passed)
    try:
        before = time.time()
        reports = watcher.once(list(JOBS))
        got = scrape(url)
        refused = httpx.post(url, content=b"x", timeout=10).status_code
    finally:
        metrics.close()

    assert {r.job: r.action for r in reports} == {
        "steady": "stay", "done": "finished", "orphan": "error", "held": "skipped",
    }  # fmt: skip
    jobs = {dict(k[1])["state"]: v for k, v in got.items() if k[0] == "spotroute_watch_jobs"}
    assert jobs == {s: 0.0 for s in JOB_STATES} | {
        "running": 1.0, "finished": 1.0, "error": 1.0, "skipped": 1.0,
    }  # fmt: skip
    decisions = {
        (dict(k[1])["action"], dict(k[1])["reason"]): v
        for k, v in got.items()
        if k[0] == "spotroute_watch_decisions_total"
    }
    assert decisions == {
        ("stay", "under-threshold"): 1.0, ("finished", "finished"): 1.0,
        ("error", "error"): 1.0, ("skipped", "lease-held"): 1.0,
    }  # fmt: skip
    assert got[("spotroute_watch_passes_total", (("result", "ok"),))] == 1.0
    assert got[("spotroute_watch_passes_total", (("result", "failed"),))] == 0.0
    assert before <= got[("spotroute_watch_last_success_timestamp_seconds", ())] <= time.time()
    assert got[("spotroute_watch_interval_seconds", ())] == 60.0
    assert got[("spotroute_watch_saved_usd_total", ())] == 0.0
    # The local market quotes its trace's prices as of now: the steady job compared those.
    ages = {k: v for k, v in got.items() if k[0] == "spotroute_watch_price_age_seconds"}
    assert ages == {("spotroute_watch_price_age_seconds", (("source", "local market"),)): 0.0}
    assert got[("spotroute_watch_info", (("holder", "h:1:2:n"), ("version", "test")))] == 1.0
    assert got[("process_open_fds", ())] > 0  # the served registry adds the process's own
    assert refused == 405  # the endpoint reads, nothing it accepts writes

    events = [json.loads(line) for line in lines]
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in lines)
    by_job = {e["job"]: e for e in events if e["event"] in ("decision", "error") and e["job"]}
    assert by_job["steady"]["reason_code"] == "under-threshold"
    assert by_job["steady"]["state"] == "running"
    assert by_job["steady"]["decision"]["numbers"]["saving_usd"] <= 0
    assert by_job["orphan"]["event"] == "error" and by_job["orphan"]["level"] == "error"
    assert "job file" in by_job["orphan"]["reason"]
    assert by_job["held"]["reason_code"] == "lease-held"
    [done] = [e for e in events if e["event"] == "pass"]
    assert done["ok"] is True and done["jobs"] == 4 and done["errors"] == 1
    assert done["states"]["running"] == 1 and sum(done["states"].values()) == 4


@dataclass(frozen=True)
class Priced:
    price_source: str
    price_age_s: float


def test_price_ages_are_the_oldest_price_compared_per_source_over_the_pass() -> None:
    metrics = WatchMetrics(holder="h", interval_s=60.0, version="test")
    a = JobReport("a", "stay", "s", price_ages_s=price_ages(
        [Priced("aws-api", 600.0), Priced("aws-api", 7200.0), Priced("snapshot", 5e7)]))
    b = JobReport("b", "stay", "s", price_ages_s=price_ages([Priced("aws-api", 9000.0)]))
    for r in (a, b):
        metrics.job_done(r)
    metrics.pass_done(PassReport(datetime.now(UTC), 1.0, (a, b)))
    later = JobReport("a", "stay", "s", price_ages_s={"gcp-api": 60.0})
    from prometheus_client import generate_latest

    first = samples(generate_latest(metrics.registry).decode())
    metrics.job_done(later)
    metrics.pass_done(PassReport(datetime.now(UTC), 1.0, (later,)))
    second = samples(generate_latest(metrics.registry).decode())

    def ages(got: Samples) -> dict[str, float]:
        return {dict(k[1])["source"]: v for k, v in got.items()
                if k[0] == "spotroute_watch_price_age_seconds"}  # fmt: skip

    assert ages(first) == {"aws-api": 9000.0, "snapshot": 5e7}
    assert ages(second) == {"gcp-api": 60.0}  # sources no job compared any more are dropped


def test_a_pass_that_fails_as_a_whole_is_counted_and_the_loop_goes_on(
    service: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed: list[int] = []

    def jobs(self: Watcher) -> list[str]:
        listed.append(1)
        if len(listed) == 1:  # the backend is unreachable for one pass
            raise OperationFailed("backend s3://acme-state: unreachable — check the network")
        return ["steady"]

    monkeypatch.setattr(Watcher, "jobs", jobs)
    metrics = WatchMetrics(holder="h", interval_s=0.0, version="test")
    passes: list[PassReport] = []

    def passed(done: PassReport) -> None:
        passes.append(done)
        metrics.pass_done(done)

    watcher = Watcher(service, interval_s=0.0, on_pass=passed,
                      stop_requested=lambda: len(passes) >= 2)  # fmt: skip
    watcher.loop()
    from prometheus_client import generate_latest

    got = samples(generate_latest(metrics.registry).decode())
    assert [(d.ok, d.error) for d in passes] == [
        (False, "backend s3://acme-state: unreachable — check the network"), (True, None),
    ]  # fmt: skip
    assert [r.action for r in passes[1].reports] == ["stay"]
    assert got[("spotroute_watch_passes_total", (("result", "failed"),))] == 1.0
    assert got[("spotroute_watch_passes_total", (("result", "ok"),))] == 1.0


def _move(saving: float, outcome: str) -> JobReport:
    decision = {"action": "move", "numbers": {"saving_usd": saving, "threshold_usd": 1.0}}
    return JobReport("j", "move", f"move: … saves ${saving:.2f}", decision, "m-1", outcome)


def test_dollars_saved_count_only_moves_that_finished() -> None:
    metrics = WatchMetrics(holder="h", interval_s=60.0, version="test")
    reports = (_move(2.5, "done"), _move(9.0, "rolled-back"), _move(1.25, "done"))
    for r in reports:
        metrics.job_done(r)
    metrics.pass_done(PassReport(datetime.now(UTC), 1.0, reports))
    from prometheus_client import generate_latest

    got = samples(generate_latest(metrics.registry).decode())

    assert got[("spotroute_watch_saved_usd_total", ())] == 3.75
    moves = {dict(k[1])["outcome"]: v for k, v in got.items()
             if k[0] == "spotroute_watch_moves_total"}  # fmt: skip
    assert moves == {"done": 2.0, "rolled-back": 1.0}
    assert got[("spotroute_watch_jobs", (("state", "running"),))] == 3.0


def test_a_failed_pass_keeps_the_last_success_time_and_the_job_states() -> None:
    metrics = WatchMetrics(holder="h", interval_s=60.0, version="test")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    metrics.pass_done(PassReport(start, 2.0, (JobReport("j", "stay", "stay: …"),)))
    metrics.pass_done(PassReport(start + timedelta(minutes=1), 0.5, error="backend unreachable"))
    from prometheus_client import generate_latest

    got = samples(generate_latest(metrics.registry).decode())

    assert got[("spotroute_watch_last_success_timestamp_seconds", ())] == start.timestamp() + 2
    assert got[("spotroute_watch_last_pass_timestamp_seconds", ())] == start.timestamp() + 60.5
    assert got[("spotroute_watch_passes_total", (("result", "failed"),))] == 1.0
    assert got[("spotroute_watch_jobs", (("state", "running"),))] == 1.0


def test_the_textfile_is_replaced_whole_never_written_in_place(tmp_path: Path) -> None:
    metrics = WatchMetrics(holder="h", interval_s=60.0, version="test")
    path = tmp_path / "spotroute.prom"
    metrics.write_textfile(path)
    first = path.read_text()
    reader = path.open()  # node-exporter reading while the watcher writes the next one
    inode = path.stat().st_ino

    metrics.pass_done(PassReport(datetime.now(UTC), 1.0, (JobReport("j", "stay", "s"),)))
    metrics.write_textfile(path)

    assert reader.read() == first  # the file being read was never touched: a rename replaced it
    reader.close()
    assert path.stat().st_ino != inode
    assert samples(path.read_text())[("spotroute_watch_jobs", (("state", "running"),))] == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spotroute.prom"]  # no temp left


def test_many_writes_never_show_a_reader_half_a_file(tmp_path: Path) -> None:
    metrics = WatchMetrics(holder="h", interval_s=60.0, version="test")
    path = tmp_path / "spotroute.prom"
    metrics.write_textfile(path)
    seen: list[str] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.append(path.read_text())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(200):
            stay = JobReport("j", "stay", "s")
            metrics.pass_done(PassReport(datetime.now(UTC), i / 100, (stay,)))
            metrics.write_textfile(path)
    finally:
        stop.set()
        reader.join()

    full = len(path.read_text().splitlines())
    assert seen and all(len(text.splitlines()) == full for text in seen)


# --- the real process ---------------------------------------------------------------------------


def _start(project: Project, *args: str) -> subprocess.Popen[str]:
    home = Path(os.environ["SPOTROUTE_HOME"])
    env = clean_env(home, home.parent / "user-home", {"PULUMI_CONFIG_PASSPHRASE": "test"})
    return subprocess.Popen(
        [sys.executable, "-m", "router", "watch", *args], cwd=project.root, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_route_watch_serves_metrics_logs_json_lines_and_stops_on_sigterm(
    service: Project, tmp_path: Path
) -> None:
    prom = tmp_path / "textfile" / "spotroute.prom"
    prom.parent.mkdir()
    jobs = [a for name in JOBS for a in ("--job", name)]
    proc = _start(service, *jobs, "--interval", "1s", "--log-format", "json",
                  "--metrics-port", "0", "--metrics-file", str(prom))  # fmt: skip
    log = LogLines(proc)
    try:
        start = log.next("start")
        assert start["metrics_url"].startswith("http://127.0.0.1:")
        assert start["jobs"] == list(JOBS) and start["interval_s"] == 1.0
        first = log.next("pass")
        assert first["ok"] and first["states"]["error"] == 1
        log.next("pass")  # a second pass: the loop goes on after a job's error
        got = scrape(start["metrics_url"])
        assert got[("spotroute_watch_passes_total", (("result", "ok"),))] >= 2
        assert got[("spotroute_watch_jobs", (("state", "running"),))] == 1.0
        written = samples(prom.read_text())
        assert written[("spotroute_watch_jobs", (("state", "finished"),))] == 1.0
        assert not any(name.startswith("process_") for name, _ in written)  # ours only
    finally:
        events = log.stop()
    assert events[-1]["event"] == "stop" and events[-1]["passes"] >= 2
    with pytest.raises(httpx.TransportError):  # the server went with the process
        httpx.get(start["metrics_url"], timeout=2)


def test_a_metrics_port_in_use_fails_in_one_line_before_any_pass(service: Project) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _start(service, "--once", "--job", "steady", "--metrics-port", str(port))
        out, err = proc.communicate(timeout=60)

    assert proc.returncode == 1
    assert err.strip().splitlines() == [
        f"error: --metrics-host 127.0.0.1 --metrics-port {port}: the port is in use — choose "
        "another --metrics-port or stop what listens there"
    ]
    assert out == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--metrics-file", "{tmp}/metrics.txt"),
         "error: --metrics-file {tmp}/metrics.txt: node-exporter's textfile collector reads "
         "only *.prom files — name it metrics.prom"),
        (("--metrics-file", "{tmp}/nowhere/m.prom"),
         "error: --metrics-file {tmp}/nowhere/m.prom: no directory {tmp}/nowhere — create it "
         "first"),
        (("--metrics-port", "0", "--metrics-host", "192.0.2.1"),
         "error: --metrics-host 192.0.2.1 --metrics-port 0: 192.0.2.1 is not an address of this "
         "machine — use 127.0.0.1 or an address an interface has"),
    ],
)  # fmt: skip
def test_bad_metrics_flags_are_bad_input_in_one_line(
    service: Project, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    proc = _start(service, "--once", *(a.format(tmp=tmp_path) for a in args))
    _out, err = proc.communicate(timeout=60)

    assert proc.returncode == 2
    assert err.strip().splitlines() == [message.format(tmp=tmp_path)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--json", "--log-format", "json"), "--json and --log-format json both write to stdout"),
        (("--metrics-host", "0.0.0.0"), "--metrics-host needs --metrics-port"),
    ],
)
def test_flags_that_contradict_each_other_are_usage_errors(
    service: Project, args: tuple[str, ...], message: str
) -> None:
    proc = _start(service, "--once", *args)
    _out, err = proc.communicate(timeout=60)

    assert proc.returncode == 2
    assert message in err and "Traceback" not in err


def test_route_help_and_watch_help_do_not_import_prometheus_client(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(home, tmp_path)
    for args in (["--help"], ["watch", "--help"]):
        run = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "router", *args], cwd=REPO, env=env,
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        imported = {ln.rsplit("|", 1)[1].strip() for ln in run.stderr.splitlines() if "|" in ln}
        assert "prometheus_client" not in imported
        assert "router.cli.commands" in imported


def test_cli_json_doc_names_every_log_field_and_metric_the_watcher_writes(
    service: Project, tmp_path: Path
) -> None:
    doc = (REPO / "docs" / "cli-json.md").read_text()
    prom = tmp_path / "spotroute.prom"
    proc = _start(service, "--once", *(a for n in JOBS for a in ("--job", n)), "--log-format",
                  "json", "--metrics-port", "0", "--metrics-file", str(prom))  # fmt: skip
    events = LogLines(proc).rest()
    from router.flows.watch_events import step_event

    events.append(step_event("j", "m-1", "intent", "migrate j", datetime.now(UTC)))
    fields = {key for e in events for key in e} | {e["event"] for e in events}
    families = {name.removesuffix("_total") for name, _labels in samples(prom.read_text())}
    families = {re.sub(r"_(bucket|count|sum|created)$", "", n) for n in families}

    assert proc.returncode == 1  # one job errored in this --once pass
    assert {e["event"] for e in events} == {"start", "decision", "error", "pass", "stop", "step"}
    assert sorted(f for f in fields if f"`{f}`" not in doc) == []
    assert sorted(f for f in families if f"`{f}" not in doc) == []
    assert sorted(code for code in REASON_CODES if f"`{code}`" not in doc) == []


def test_text_mode_says_where_the_metrics_are_and_keeps_its_report_lines(
    service: Project,
) -> None:
    proc = _start(service, "--once", "--job", "steady", "--job", "done", "--metrics-port", "0")
    out, err = proc.communicate(timeout=90)

    assert proc.returncode == 0, err
    assert re.fullmatch(r"route watch: metrics at http://127\.0\.0\.1:\d+/metrics\n", err)
    assert [line.split(" — ")[0] for line in out.splitlines()] in (
        ["steady: stay", "done: finished"], ["done: finished", "steady: stay"],
    )  # fmt: skip
