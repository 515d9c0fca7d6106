"""One local node: a GPU machine's life played by a process — boot, pull, start-up script, exit.

The local target's SpotGpuGroup starts one of these per node (`start_node`), each in its own
directory as separate machines would be. The node process (`main`, run as `python -c … ROOT
NODE_DIR`) plays the phases a cloud node goes through, on the local market's clock:

  booting  — the profile's boot time (router/data/node_startup.csv; 0 without a profile);
  pulling  — `docker pull` of the job's image at the profile's seconds per GB (only with an
             image; the local target has no container runtime, so nothing is pulled);
  running  — the SAME start-up script the clouds render (components/startup.py), with local
             substitutions: no container, no power-off, the log in the node's directory;
  exited   — the script's exit status (the job's), recorded in `node.json`, and the exit record
             a cloud node's script leaves next to the checkpoints (components/node_exit.py),
             with the node's group: the router tells a crash from a preemption by it.

A SIGTERM to the node (a stop, `route preempt`) is passed on to the job — not to the script's
shell, which then records how the job ended — and the node exits with the job. A spot node whose
region the local market withdraws (capacity 0) gets the profile's notice: SIGTERM to the job,
SIGKILL after the lead time, as a cloud reclaims it. Secrets reach the job through the process
environment only (`node_env`), never a file.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from components.local_nodes import (
    group_members,
    index_entry,
    machine_processes,
    mark_reclaimed,
    start_ticks,
    write_record,
    write_text_atomic,
)
from components.node_exit import EXIT_FORMAT, NODE_MARKER
from components.rendezvous import MASTER_PORT, local_rendezvous
from router.contract.local_market import LocalMarket
from router.contract.local_node import (
    BOOTING,
    EXITED,
    LOG_FILE,
    PULLING,
    RECLAIM_FILE,
    RUNNING,
    SCRIPT_FILE,
    SPEC_FILE,
    STATE_FILE,
    NodeRecord,
    group_id,
    node_dir_name,
)

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 20.0  # a node process that has not written its record by then did not start
_TICK_S = 0.05
_MARKET_CHECK_S = 1.0  # real seconds between looks at the local market, at most
# ... and at most this long on its clock: an accelerated market (a rehearsal's, 400×) must not
# run a zone's outage past the node unseen (a backtest trace's tick is 32 s).
MARKET_CHECK_SIM_S = 30.0
# Run as `python -c _BOOT ROOT NODE_DIR`: ROOT (this checkout or the installed package) goes on
# sys.path through argv, so the job's environment stays exactly what node_env() built.
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from components.local_node import main; sys.exit(main(sys.argv[2:]))"
)


def project_dir() -> str:
    """The nearest directory with a Pulumi.yaml above the engine's working directory (`main:`)."""
    here = Path.cwd()
    for directory in (here, *here.parents):
        if (directory / "Pulumi.yaml").is_file():
            return str(directory)
    return str(here)


def node_env(props: dict[str, Any], *, node: int, nodes: int, node_dir: Path) -> dict[str, str]:
    """The environment node `node` of `nodes` gives its start-up script: what a cloud machine
    has before the script exports spotroute's variables and the job's env (the one place a
    local node's environment is built).

    A cloud node's rendezvous identity is its host name, first address and kernel boot id; local
    nodes share one host, so each gets its own: `node-<i>`, the loopback address, and a boot id
    new with every process (a replaced node makes a new group generation, as a new VM does)."""
    checkpoint_dir = Path(urlparse(str(props["checkpoint_url"])).path)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(node_dir),
        "LANG": "C.UTF-8",
        "SPOTROUTE_NODE_ID": node_dir_name(node),
        "SPOTROUTE_NODE_ADDRESS": LOOPBACK,
        "SPOTROUTE_BOOT_ID": secrets.token_hex(8),
        # Secret env reaches the job through its process environment only: never a file.
        **(props.get("secret_env") or {}),
        "SPOTROUTE_CHECKPOINT_DIR": str(checkpoint_dir),
        # Where the checkpoint library says it saved on a notice (its marker), as on a cloud node.
        "SPOTROUTE_NODE_DIR": str(node_dir),
        # For jobs that run code from the project (examples/train/job.yaml): the Pulumi
        # project's directory, and the interpreter the router runs on.
        "SPOTROUTE_PROJECT_DIR": project_dir(),
        "SPOTROUTE_PYTHON": sys.executable,
    }


def node_script(
    props: dict[str, Any], *, nodes: int, node_dir: Path, group_port: int = MASTER_PORT
) -> str:
    """The clouds' start-up script for this job, rendered for a local node; a group meets
    through the checkpoint directory and its master listens on `group_port` (one per group:
    the groups of a hand-over run side by side on this one host)."""
    from components.args import JobCommand
    from components.startup import render_startup_script

    job = JobCommand(
        image="",  # no container runtime here: the command runs on the node itself
        command=tuple(str(c) for c in props["command"]),
        env={str(k): str(v) for k, v in dict(props.get("env") or {}).items()},
        checkpoint_interval_s=float(props.get("checkpoint_interval_s") or 0),
    )
    return render_startup_script(
        str(props["job_name"]),
        str(props["checkpoint_url"]),
        job,
        shutdown_when_done=False,  # the local node records the exit instead of powering off
        node_count=nodes,
        notice_source="local",  # router.checkpoint: the local target stops a job with SIGTERM
        placement=str(props.get("placement", "")),
        rendezvous=replace(local_rendezvous(), port=group_port),
        log_path=str(node_dir / LOG_FILE),
        workdir=str(node_dir),
    )


def start_node(
    props: dict[str, Any],
    launch_dir: Path,
    *,
    node: int,
    nodes: int,
    market: LocalMarket | None,
    running: Path,
    group_port: int = MASTER_PORT,
) -> NodeRecord:
    """Start node `node` of a group launched into `launch_dir`; its first record (booting)."""
    node_dir = launch_dir / node_dir_name(node)
    node_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    behaviour = market.behaviour if market is not None else None
    region = str(props.get("region", "local"))
    pull_gb = behaviour.image_gb if behaviour is not None and props.get("image") else 0.0
    spec = {
        "job": str(props["job_name"]),
        "placement": str(props.get("placement", "")),
        "node": node,
        "nodes": nodes,
        "region": region,
        "market": str(props.get("market", "on-demand")),
        "gpus": int(props.get("gpu_count") or 0),
        # Real seconds each phase lasts (the local market's clock runs time_scale × faster).
        "boot_s": behaviour.real_s(behaviour.boot_in(region)) if behaviour else 0.0,
        "pull_s": behaviour.real_s(behaviour.pull_s_per_gb * pull_gb) if behaviour else 0.0,
        "pull_gb": pull_gb,
        "notice_s": behaviour.real_s(behaviour.notice_s) if behaviour else 0.0,
        "market_spec": market.to_env() if market is not None else "",
        "running_dir": str(running),
    }
    write_text_atomic(node_dir / SPEC_FILE, json.dumps(spec))
    script = node_dir / SCRIPT_FILE
    write_text_atomic(
        script, node_script(props, nodes=nodes, node_dir=node_dir, group_port=group_port)
    )
    script.chmod(0o700)
    root = str(Path(__file__).resolve().parent.parent)
    with open(node_dir / "node.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, root, str(node_dir)],
            cwd=node_dir,
            env=node_env(props, node=node, nodes=nodes, node_dir=node_dir),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives the provider; stoppable as a group (a machine)
            close_fds=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            record = NodeRecord.from_text((node_dir / STATE_FILE).read_text())
            if record.pid == proc.pid:
                return record
        if proc.poll() is not None:
            break
        time.sleep(_TICK_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"local node {node} did not start; see {node_dir / 'node.log'}")


# --- the node process ---------------------------------------------------------------------------


class _Node:
    """The node's own life: phases, the job's shell, signals, the market's reclaim."""

    def __init__(self, node_dir: Path, spec: dict[str, Any]) -> None:
        self.dir = node_dir
        self.spec = spec
        self.running = Path(spec["running_dir"])
        self.stopping = False
        self.shell: subprocess.Popen[bytes] | None = None
        pid = os.getpid()
        self.record = NodeRecord(
            job=spec["job"],
            placement=spec["placement"],
            node=int(spec["node"]),
            nodes=int(spec["nodes"]),
            pid=pid,
            start_ticks=start_ticks(pid) or 0,
            phase=BOOTING,
            region=spec["region"],
            market=spec["market"],
            gpus=int(spec["gpus"]),
            node_dir=str(node_dir),
        )
        self.market = LocalMarket.from_env(spec["market_spec"]) if spec["market_spec"] else None
        self.reclaim_at: float | None = None  # monotonic time the job is killed after a notice
        scale = self.market.behaviour.time_scale if self.market is not None else 1.0
        self.check_every_s = min(_MARKET_CHECK_S, MARKET_CHECK_SIM_S / scale)

    def enter(self, phase: str, **changes: Any) -> None:
        self.record = self.record.at(phase, datetime.now(UTC).isoformat(), **changes)
        write_record(self.record, self.running)

    def on_term(self, _signum: int, _frame: object) -> None:
        self.stopping = True
        if self.shell is not None:
            self.signal_job(signal.SIGTERM)

    def signal_job(self, sig: int) -> None:
        """`sig` to the job: every process of this node but the node and the script's shell."""
        spared = {os.getpid(), self.shell.pid if self.shell is not None else -1}
        # SIGKILL is the machine going: it takes what the job started in sessions of its own
        # too (torchrun's workers); a notice goes to the job, which passes it on.
        kill = sig == signal.SIGKILL
        for pid in machine_processes(os.getpgrp()) if kill else group_members(os.getpgrp()):
            if pid not in spared:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)

    def wait(self, seconds: float) -> bool:
        """Let `seconds` pass; False when the node was stopped meanwhile."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self.stopping:
            time.sleep(min(_TICK_S, max(0.0, deadline - time.monotonic())))
        return not self.stopping

    def withdrawn(self) -> bool:
        """The local market took this spot node's region away (no row, or capacity 0)."""
        if self.market is None or self.record.market != "spot":
            return False
        row = self.market.at(datetime.now(UTC)).get((self.record.region, "spot"))
        return row is None or row.capacity <= 0

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self.on_term)
        self.enter(BOOTING, detail=f"boot {self.spec['boot_s']:.1f} s")
        if not self.wait(float(self.spec["boot_s"])):
            return self.exit(143, "stopped while booting")
        if self.spec["pull_s"] > 0:
            self.enter(PULLING, detail=f"image {self.spec['pull_gb']:g} GB")
            if not self.wait(float(self.spec["pull_s"])):
                return self.exit(143, "stopped while pulling the image")
        self.enter(RUNNING, detail="start-up script")
        self.shell = subprocess.Popen(
            ["/bin/bash", str(self.dir / SCRIPT_FILE)], cwd=self.dir, stdin=subprocess.DEVNULL
        )
        if self.stopping:  # a SIGTERM between the phase change and the shell's start
            self.signal_job(signal.SIGTERM)
        checked = 0.0
        while self.shell.poll() is None:
            now = time.monotonic()
            if self.reclaim_at is None and now - checked >= self.check_every_s:
                checked = now
                if self.withdrawn():
                    self.reclaim("local market: spot capacity withdrawn")
            if self.reclaim_at is not None and now >= self.reclaim_at:
                self.signal_job(signal.SIGKILL)
            time.sleep(_TICK_S)
        code = self.shell.returncode
        return self.exit(128 - code if code < 0 else code, "")

    def reclaim(self, why: str) -> None:
        notice_s = float(self.spec["notice_s"])
        mark_reclaimed(self.dir, why, datetime.now(UTC), notice_s)
        self.reclaim_at = time.monotonic() + notice_s
        self.signal_job(signal.SIGTERM)

    def exit(self, status: int, detail: str) -> int:
        reclaimed = (self.dir / RECLAIM_FILE).is_file()
        if self.shell is not None:  # the start-up script ran: it leaves its exit record
            self.exit_record(status)
        self.enter(EXITED, exit_status=status, reclaimed=reclaimed, detail=detail)
        index_entry(self.running, self.record).unlink(missing_ok=True)
        return status if 0 <= status < 256 else 1


    def exit_record(self, status: int) -> None:
        """`exit-<launch>-<node>.json` in the job's checkpoint directory, as a cloud node's EXIT
        trap writes it (components/node_exit.py), plus the group: this host's nodes share a
        name space, and a job failing at once exits before its placement is recorded."""
        directory = os.environ.get("SPOTROUTE_CHECKPOINT_DIR")
        if not directory:
            return
        launch = self.dir.parent
        marker = self.dir / NODE_MARKER
        record = {
            "format": EXIT_FORMAT,
            "node": self.dir.name,
            "status": status,
            "interruption_marker": marker.is_file() and marker.stat().st_size > 0,
            "job": self.record.job,
            "placement": self.record.placement,
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "group": group_id(str(launch)),
        }
        with contextlib.suppress(OSError):  # as on a cloud: a record not written is never fatal
            write_text_atomic(
                Path(directory) / f"exit-{launch.name}-{self.dir.name}.json", json.dumps(record)
            )


def main(argv: list[str]) -> int:
    """The node process: `python -c … ROOT NODE_DIR`."""
    node_dir = Path(argv[0])
    spec = json.loads((node_dir / SPEC_FILE).read_text())
    return _Node(node_dir, spec).run()
