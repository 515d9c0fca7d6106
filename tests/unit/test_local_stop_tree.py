"""A local node stopped as a machine stops takes everything it started with it, also what runs
in a session of its own — torchrun starts each worker with `start_new_session=True`
(torch/distributed/elastic/multiprocessing/subprocess_handler), so SIGKILL to the node's process
group alone left the workers of a 2-node job running after `route preempt`'s grace ran out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from components.local_nodes import process_alive, start_ticks, stop_nodes

# A node whose job ignores the notice and started a worker in a session of its own.
NODE = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
worker = subprocess.Popen([sys.executable, "-c",
                           "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                           "time.sleep(300)"], start_new_session=True)
open(sys.argv[1], "w").write(str(worker.pid))
time.sleep(300)
"""


def _gone(pid: int, ticks: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while process_alive(pid, ticks):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_worker_in_its_own_session_goes_with_its_node(tmp_path: Path) -> None:
    out = tmp_path / "worker.pid"
    worker, worker_ticks = 0, None
    node = subprocess.Popen([sys.executable, "-c", NODE, str(out)], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not out.exists() or not out.read_text():
            assert time.monotonic() < deadline, "the node did not start its worker"
            time.sleep(0.05)
        worker = int(out.read_text())
        worker_ticks = start_ticks(worker)
        node_ticks = start_ticks(node.pid)
        assert worker_ticks is not None and node_ticks is not None

        _gone_after_s, killed = stop_nodes([(node.pid, node_ticks)], grace_s=0.5)

        assert killed  # neither ignored notice kept it past the grace
        assert node.wait(timeout=5) == -9
        assert _gone(worker, worker_ticks), "the worker outlived its node"
    finally:
        node.kill()
        node.wait()
        if out.exists() and out.read_text() and process_alive(worker, worker_ticks or 0):
            os.kill(worker, signal.SIGKILL)
