"""Helpers of the engine tests: the `route` CLI in a throwaway project, job processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
ENGINE_TIMEOUT_S = 240.0  # one CLI call; a healthy local deploy takes ~10-20 s on 2 cores
# Variables that would point the engine at the developer's real backend or secrets.
LEAKY_ENV = (
    "PULUMI_BACKEND_URL",
    "PULUMI_CONFIG_PASSPHRASE",
    "PULUMI_CONFIG_PASSPHRASE_FILE",
    "PULUMI_ACCESS_TOKEN",
    "SPOTROUTE_HOME",
)
# Counts steps into its checkpoint directory once a second, forever.
FOREVER = (
    'i=0; while true; do i=$((i+1)); echo $i > "$SPOTROUTE_CHECKPOINT_DIR/step"; sleep 1; done'
)


@dataclass(frozen=True)
class Result:
    """One finished `route` run."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        try:
            return json.loads(self.stdout)
        except ValueError:
            raise AssertionError(f"route printed no JSON:\n{self}") from None

    def error_lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.startswith("error:")]

    def __str__(self) -> str:
        return (
            f"route {' '.join(self.args)} -> exit {self.returncode}\n"
            f"--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"
        )


def job_yaml(
    name: str,
    command: str = FOREVER,
    env: dict[str, str] | None = None,
    max_price_per_hour: float | None = None,
) -> str:
    """A local-target job that runs `command` under /bin/sh until stopped."""
    doc: dict[str, Any] = {
        "name": name,
        "resources": {"accelerators": "T4:1", "clouds": ["local"]},
        "market": "on-demand",
        "duration_hours": 0.1,
        "checkpoint": {"interval": "1m", "url": "auto"},
        "run": {"command": ["/bin/sh", "-c", command], "env": dict(env or {})},
        "labels": {"team": "ml-platform", "cost-center": "4711"},
    }
    if max_price_per_hour is not None:
        doc["max_price_per_hour"] = max_price_per_hour
    return yaml.safe_dump(doc, sort_keys=False)


class Route:
    """Runs the real `route` CLI in one throwaway project with its own SPOTROUTE_HOME."""

    def __init__(self, project: Path, home: Path, pulumi_home: Path) -> None:
        self.project = project
        self.home = home
        self.timings: list[tuple[str, float]] = []  # (command, seconds), for slow-test triage
        self.env = {k: v for k, v in os.environ.items() if k not in LEAKY_ENV}
        self.env.update(
            {
                "SPOTROUTE_HOME": str(home),
                "PULUMI_HOME": str(pulumi_home),
                "PULUMI_SKIP_UPDATE_CHECK": "true",
                # This checkout's code, whatever spotroute the virtualenv has installed.
                "PYTHONPATH": os.pathsep.join(
                    p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
                ),
                "NO_COLOR": "1",
                "COLUMNS": "200",
            }
        )

    # --- running the CLI ---------------------------------------------------------------------

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "router", *args]

    def __call__(self, *args: str, timeout_s: float = ENGINE_TIMEOUT_S) -> Result:
        started = time.monotonic()
        proc = subprocess.run(
            self.command(*args),
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        self.timings.append((" ".join(args[:2]), time.monotonic() - started))
        return Result(tuple(args), proc.returncode, proc.stdout, proc.stderr)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """Start `route ARGS` without waiting (its own process group, so signals reach it alone)."""
        return subprocess.Popen(
            self.command(*args),
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def ok(self, *args: str) -> Result:
        result = self(*args)
        assert result.returncode == 0, str(result)
        return result

    def pulumi(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The pulumi CLI on this project's backend (for facts `route` does not print)."""
        env = {
            **self.env,
            "PULUMI_BACKEND_URL": f"file://{self.home / 'state'}",
            "PULUMI_CONFIG_PASSPHRASE_FILE": str(self.home / "passphrase"),
            "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
        }
        return subprocess.run(
            ["pulumi", *args, "--non-interactive"],
            cwd=self.project,
            env=env,
            capture_output=True,
            text=True,
            timeout=ENGINE_TIMEOUT_S,
            check=True,
        )

    # --- files ---------------------------------------------------------------------------------

    def write_job(self, name: str, **kwargs: Any) -> Path:
        path = self.project / f"{name}.yaml"
        path.write_text(job_yaml(name, **kwargs))
        return path

    def stack_file(self, job: str) -> Path:
        return self.project / "stacks" / f"Pulumi.{job}.yaml"

    def stack_config(self, job: str) -> dict[str, Any]:
        """The `spotroute:*` keys of stacks/Pulumi.<job>.yaml, namespace stripped."""
        doc = yaml.safe_load(self.stack_file(job).read_text()) or {}
        return {
            k.removeprefix("spotroute:"): v
            for k, v in (doc.get("config") or {}).items()
            if k.startswith("spotroute:")
        }

    def checkpoint_dir(self, job: str) -> Path:
        return self.home / "checkpoints" / job

    def update_history(self, job: str) -> list[dict[str, Any]]:
        """The engine's own record of the job's updates, newest first."""
        out = self.pulumi("stack", "history", "--json", "--stack", job).stdout
        history: list[dict[str, Any]] = json.loads(out)
        return history

    # --- job processes ------------------------------------------------------------------------

    def job_pids(self) -> list[int]:
        """Live processes the local target started for this home (they run in its sandbox)."""
        sandbox = str(self.home / "sandbox") + os.sep
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cwd = os.readlink(entry / "cwd")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if (cwd + os.sep).startswith(sandbox) and state not in ("Z", "X"):
                pids.append(int(entry.name))
        return sorted(pids)

    def job_leaders(self) -> list[int]:
        """The job processes themselves (session leaders), not their children (e.g. `sleep`)."""
        return [pid for pid in self.job_pids() if _session(pid) == pid]

    def recorded_pids(self) -> list[int]:
        pids = []
        for record in (self.home / "placements").glob("*.json"):
            try:
                outputs = json.loads(record.read_text())["outputs"]
                pids += group_pids(outputs)
            except (OSError, ValueError, KeyError, TypeError, AssertionError):
                continue
        return pids

    def stacks_in_backend(self) -> list[str]:
        root = self.home / "state" / ".pulumi" / "stacks"
        if not root.is_dir():
            return []
        # <project>/<stack>.json (or .json.gz); removed stacks leave only .bak files behind
        return sorted(
            p.name.split(".")[0] for p in root.rglob("*") if p.name.endswith((".json", ".json.gz"))
        )

    def cleanup(self) -> None:
        """Destroy what a test left deployed, then kill any job process still running."""
        jobs = set(self.stacks_in_backend())
        for job in sorted(jobs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                self("destroy", job, "--yes", timeout_s=120)
        for pid in {*self.recorded_pids(), *self.job_leaders()}:
            if alive(pid) and _session(pid) == pid:
                _kill_group(pid)
        for pid in self.job_pids():
            _kill(pid)


def _session(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[3])  # stat field 6 (session id); fields start at field 3


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str, step_s: float = 0.1) -> Any:
    """Poll until `predicate()` is truthy; fail naming `what` after `timeout_s` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(step_s)


def group_pids(outputs: dict[str, Any]) -> list[int]:
    """The node process ids of a local-target groupId `local-group:<launch dir>`, node 0 first
    (each node records itself in <launch dir>/node-<i>/node.json)."""
    group = str(outputs["groupId"])
    assert group.startswith("local-group:"), group
    launch = Path(group.removeprefix("local-group:"))
    nodes = sorted(launch.glob("node-*"), key=lambda d: int(d.name.split("-")[1]))
    return [int(json.loads((d / "node.json").read_text())["pid"]) for d in nodes]


def group_pid(outputs: dict[str, Any]) -> int:
    """The first node's process id of a local-target group (the only one of a 1-node job)."""
    return group_pids(outputs)[0]


def only_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line, got {len(lines)}:\n{text}"
    return lines[0]


def no_traceback(result: Result | Sequence[str]) -> None:
    text = result.stderr if isinstance(result, Result) else "\n".join(result)
    assert "Traceback (most recent call last)" not in text, text
