"""The hand-over files of `route migrate` (docs/benchmarks.md): their cost to the job and router.

    python bench/handover_bench.py [--backends file,s3,gcs,azure] [--rounds 5]

Per backend (S3 = moto's server, GCS = fake-gcs-server, Azure = Azurite, all on 127.0.0.1), a
job training a small torch model with router.checkpoint in a thread (0.01 s per step):
  step      the loop's time per step while no request stands (the library's request poll
            included), against the same loop with the poll pushed out of reach
  answer    router.config.checkpoints.request_save → the answered checkpoint seen by the router's
            `answered()` (the library's poll interval, a synchronous save, the router's listing)
  let go    withdraw_request → the job's next step (the library's hold re-reads every 0.2 s on a
            disk, every 1 s on an object store)
The library's default poll is used (0.2 s on a disk, 5 s on an object store), so `answer` on an
object store includes on average half of that interval.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from router.checkpoint import Checkpointer, Notice  # noqa: E402
from router.config import checkpoints as router_files  # noqa: E402
from tests.checkpoint.training import build, train_step  # noqa: E402

STEP_S = 0.01


class Job:
    """A training loop in a thread; `steps` counts the steps it finished."""

    def __init__(self, url: str, options: dict[str, Any], poll_s: float | None) -> None:
        self.ckpt = Checkpointer(url, interval_s=None, handle_sigterm=False, notice_sources=[],
                                 storage_options=options, placement="train",
                                 request_poll_s=poll_s, asynchronous=False)  # fmt: skip
        self.steps = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        model, optimizer, scheduler = build(seed=1)
        start = self.ckpt.restore(model=model, optimizer=optimizer, scheduler=scheduler)
        try:
            for step in range(start.step, 10**9):
                train_step(model, optimizer, scheduler)
                self.ckpt.maybe_save(step + 1)
                self.steps += 1
                time.sleep(STEP_S)
        except SystemExit:
            pass

    def stop(self) -> None:
        self.ckpt.watcher.record(Notice(cloud="local", kind="sigterm",
                                        notice_time=datetime.now(UTC)))  # fmt: skip
        self.thread.join(30)
        self.ckpt.close()


def step_time(job: Job, seconds: float = 2.0) -> float:
    wait(lambda: job.steps > 5)  # restored and past the first steps (imports, first save)
    before, started = job.steps, time.perf_counter()
    time.sleep(seconds)
    return (time.perf_counter() - started) / max(1, job.steps - before)


def wait(predicate: Any, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.01)
    return value


def bench(url: str, options: dict[str, Any], rounds: int) -> dict[str, float]:
    scheme = url.split("://", 1)[0]
    store = router_files.checkpoint_store(url, {scheme: options})
    quiet = Job(f"{url}/quiet", options, poll_s=1e9)
    base = step_time(quiet)
    quiet.stop()
    job = Job(url, options, poll_s=None)
    wait(lambda: router_files.resumed(store))
    polled = step_time(job)
    answers, releases = [], []
    for i in range(rounds):
        started = time.perf_counter()
        router_files.request_save(store, f"m-{i}", "train", datetime.now(UTC))
        wait(lambda i=i: router_files.answered(store, f"m-{i}"))
        answers.append(time.perf_counter() - started)
        held = job.steps
        started = time.perf_counter()
        router_files.withdraw_request(store, f"m-{i}")
        wait(lambda held=held: job.steps > held)
        releases.append(time.perf_counter() - started)
    job.stop()
    return {
        "step_ms": polled * 1e3,
        "step_quiet_ms": base * 1e3,
        "answer_s": statistics.median(answers),
        "let_go_s": statistics.median(releases),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="file,s3,gcs,azure")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import tempfile

    from tests.checkpoint.servers import STARTERS

    print(f"{'backend':8} {'step ms':>8} {'(no poll)':>9} {'answer s':>9} {'let go s':>9}")
    for kind in args.backends.split(","):
        server = None
        if kind == "file":
            url, options = f"file://{tempfile.mkdtemp(prefix='handover-')}", {}
        else:
            server = STARTERS[kind]()
            url, options = f"{server.url}/bench", dict(server.storage_options)
        try:
            r = bench(url, options, args.rounds)
        finally:
            if server is not None:
                server.stop()
        print(f"{kind:8} {r['step_ms']:8.2f} {r['step_quiet_ms']:9.2f} {r['answer_s']:9.2f} "
              f"{r['let_go_s']:9.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
