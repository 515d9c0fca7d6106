"""The local target: the same four components as the clouds, on this machine, no plugin binaries.

`SpotGpuGroup` runs the job's command as a local process in its sandbox directory
(create starts it, read reports whether it is alive, delete stops it gracefully, a changed
command/env replaces it). `CheckpointBucket` is a directory with a `file://` URL. `Network` and
`JobIdentity` have nothing to create locally and only export what the program expects. Both
stateful parts are Pulumi dynamic providers, run by the engine through the
`pulumi-resource-pulumi-python` shim. The local target has no GPU and no container runtime:
the job's command runs directly and `image` is recorded but not pulled.

Constructors match components/aws.py:
  make_provider(name, args: ProviderArgs) -> None
  Network(name, args: NetworkArgs, opts=None)
  CheckpointBucket(name, args: CheckpointBucketArgs, opts=None)
  JobIdentity(name, args: JobIdentityArgs, bucket: CheckpointBucket, opts=None, staging=None)
  SpotGpuGroup(name, args: SpotGpuGroupArgs, network, identity, bucket, opts=None)
"""

from __future__ import annotations

import getpass
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from components.args import (
    CheckpointBucketArgs,
    JobIdentityArgs,
    NetworkArgs,
    ProviderArgs,
    SpotGpuGroupArgs,
    standard_labels,
)
from components.registry import CloudComponents
from components.startup import checkpoint_interval_text
from router.contract.local_market import ENV_VAR as MARKET_ENV
from router.contract.local_market import LocalMarket

STOP_GRACE_S = 10.0  # SIGTERM first so the job can write a last checkpoint, then SIGKILL
# Changing any of these means a different job process: replace, never patch in place.
REPLACE_ON = ("job_name", "command", "env", "secret_env", "checkpoint_url", "region")
# Recorded only: the process is untouched.
UPDATE_IN_PLACE = ("image", "market", "labels", "max_price_per_hour")


def _project_dir() -> str:
    """The nearest directory with a Pulumi.yaml above the engine's working directory (`main:`)."""
    here = Path.cwd()
    for directory in (here, *here.parents):
        if (directory / "Pulumi.yaml").is_file():
            return str(directory)
    return str(here)


# --- processes ----------------------------------------------------------------------------------


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (guards against PID reuse)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):  # zombie or dead: finished, just not reaped yet
        return None
    return int(fields[19])


def process_alive(pid: int, start_ticks: int) -> bool:
    """True while the process started by the local target is running."""
    return pid > 0 and _start_ticks(pid) == start_ticks


def parse_group_id(group_id: str) -> tuple[int, int] | None:
    """(pid, start_ticks) from a local group id `local-process:<pid>:<ticks>`; None otherwise."""
    parts = group_id.split(":")
    if len(parts) != 3 or parts[0] != "local-process":
        return None
    try:
        return int(parts[1]), int(parts[2])
    except ValueError:
        return None


def stop_process(pid: int, start_ticks: int, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the job's process group, SIGKILL after `grace_s` seconds if it is still running."""
    if not process_alive(pid, start_ticks):
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)  # the job is its own session leader: pgid == pid
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not process_alive(pid, start_ticks):
                return
            time.sleep(0.05)


# --- the local market: capacity and spot price, checked at launch like the clouds do ------------


def _running_dir(props: dict[str, Any]) -> Path:
    # Beside the job sandboxes: every local job process of this machine's spotroute home.
    return Path(props["sandbox_dir"]).parent / ".running"


def running_in(directory: Path, region: str, market: str) -> int:
    """Job processes the local target runs now in region/market (dead entries are dropped)."""
    count = 0
    if not directory.is_dir():
        return 0
    for entry in directory.glob("*.json"):
        try:
            info = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        if not process_alive(int(info["pid"]), int(info["start_ticks"])):
            entry.unlink(missing_ok=True)
            continue
        if (info.get("region"), info.get("market")) == (region, market):
            count += 1
    return count


def check_market(running: Path, region: str, market: str, max_price: float, now: datetime) -> None:
    """Refuse a launch the local market cannot take, with a cloud-style error code.

    Codes (router.core.failover knows them): LocalCapacityExhausted — the region offers no such
    market now or all of its capacity runs; LocalSpotPriceTooLow — the spot price is above the
    job's cap (spotroute:maxPrice), as AWS's SpotMaxPriceTooLow.
    """
    spec = os.environ.get(MARKET_ENV)
    if not spec:
        return
    row = LocalMarket.from_env(spec).at(now).get((region, market))
    if row is None or row.capacity <= 0:
        raise RuntimeError(
            f"LocalCapacityExhausted: local region {region} has no {market} capacity now; "
            "try another region or market"
        )
    used = running_in(running, region, market)
    if used >= row.capacity:
        raise RuntimeError(
            f"LocalCapacityExhausted: local region {region} has no {market} capacity left "
            f"({used} of {row.capacity} in use); try another region or market"
        )
    if market == "spot" and 0 < max_price < row.price_per_hour:
        raise RuntimeError(
            f"LocalSpotPriceTooLow: your spot price cap ${max_price:g}/h is below the current "
            f"spot price ${row.price_per_hour:g}/h in local region {region}"
        )


def _register(pid: int, ticks: int, props: dict[str, Any]) -> None:
    directory = _running_dir(props)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    record = {
        "pid": pid,
        "start_ticks": ticks,
        "region": props.get("region", "local"),
        "market": props.get("market", "on-demand"),
        "job": props["job_name"],
        "placement": props.get("placement", ""),
    }
    (directory / f"{pid}-{ticks}.json").write_text(json.dumps(record))


class LocalProcessProvider(ResourceProvider):
    """Dynamic provider: a job process in its sandbox directory (props["sandbox_dir"])."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        from filelock import FileLock

        lock_dir = _running_dir(props)
        lock_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        # One launch at a time decides on capacity (two stacks may go up at once).
        with FileLock(str(lock_dir / "launch.lock")):
            check_market(
                lock_dir,
                str(props.get("region", "local")),
                str(props.get("market", "on-demand")),
                float(props.get("max_price_per_hour") or 0.0),
                datetime.now(UTC),
            )
            result = self._start(props)
            outs = result.outs or {}
            _register(int(outs["pid"]), int(outs["start_ticks"]), props)
        return result

    def _start(self, props: dict[str, Any]) -> CreateResult:
        sandbox = Path(props["sandbox_dir"])
        sandbox.mkdir(parents=True, exist_ok=True, mode=0o700)
        log_path = sandbox / "job.log"
        checkpoint_dir = Path(urlparse(props["checkpoint_url"]).path)
        checkpoint_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(sandbox),
            "LANG": "C.UTF-8",
            **props.get("env", {}),
            # Secret env reaches the job through its process environment only: never a file.
            **(props.get("secret_env") or {}),
            "SPOTROUTE_JOB_ID": props["job_name"],
            "SPOTROUTE_CHECKPOINT_URL": props["checkpoint_url"],
            "SPOTROUTE_CHECKPOINT_DIR": str(checkpoint_dir),
            # Which placement (stack) runs this process: the job says it in its resume record.
            "SPOTROUTE_PLACEMENT_ID": str(props.get("placement", "")),
            # Read by router.checkpoint: the local target stops a job with SIGTERM.
            "SPOTROUTE_NOTICE_SOURCE": "local",
            # The job's checkpoint.interval (seconds), when it gives one.
            **(
                {"SPOTROUTE_CHECKPOINT_INTERVAL": checkpoint_interval_text(interval)}
                if (interval := float(props.get("checkpoint_interval_s") or 0))
                else {}
            ),
            # For jobs that run code from the project (examples/train/job.yaml): the Pulumi
            # project's directory, and the interpreter the router runs on.
            "SPOTROUTE_PROJECT_DIR": _project_dir(),
            "SPOTROUTE_PYTHON": sys.executable,
        }
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                list(props["command"]),
                cwd=sandbox,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # survives the provider process; stoppable as a group
                close_fds=True,
            )
        ticks = _start_ticks(proc.pid)
        if ticks is None:
            raise RuntimeError(f"job command exited at once; see {log_path}")
        outs = {
            **props,
            "pid": proc.pid,
            "start_ticks": ticks,
            "sandbox": str(sandbox),
            "log_path": str(log_path),
            "started_at": datetime.now(UTC).isoformat(),
        }
        return CreateResult(id_=f"local-process:{proc.pid}:{ticks}", outs=outs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        ids = parse_group_id(id_)
        if ids is None or not process_alive(*ids):
            return ReadResult(id_="", outs={})  # gone: a refresh drops it from the state
        return ReadResult(id_=id_, outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in (*REPLACE_ON, *UPDATE_IN_PLACE) if olds.get(k) != news.get(k)]
        replaces = [k for k in changed if k in REPLACE_ON]
        ids = parse_group_id(_id)
        if ids is not None and not process_alive(*ids):
            # The state says the job runs but its process is gone (killed, or a destroy cut
            # short): start it again rather than report a deployed stack with nothing running.
            replaces = sorted({*replaces, "command"})
            changed = sorted({*changed, "command"})
        return DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**olds, **news})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        ids = parse_group_id(id_)
        if ids is not None:
            stop_process(*ids)
            if props.get("sandbox_dir"):
                (_running_dir(props) / f"{ids[0]}-{ids[1]}.json").unlink(missing_ok=True)


class LocalDirectoryProvider(ResourceProvider):
    """Dynamic provider: a checkpoint directory (props["directory"], mode 0700)."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        path = Path(props["directory"])
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return CreateResult(
            id_=str(path), outs={**props, "path": str(path), "url": f"file://{path}/"}
        )

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_ if Path(id_).is_dir() else "", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = ["job_name"] if olds.get("job_name") != news.get("job_name") else []
        return DiffResult(changes=bool(replaces), replaces=replaces)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        # Checkpoints are the job's work: empty directories go, any file (and its parents) stays.
        path = Path(id_)
        if not path.is_dir():
            return
        for directory in sorted((d for d in path.rglob("*") if d.is_dir()), reverse=True):
            if not any(directory.iterdir()):
                directory.rmdir()
        if not any(path.iterdir()):
            path.rmdir()


class LocalProcess(pulumi.dynamic.Resource, module="spotroute", name="LocalProcess"):
    pid: pulumi.Output[int]
    log_path: pulumi.Output[str]
    sandbox: pulumi.Output[str]

    def __init__(
        self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__(
            LocalProcessProvider(),
            name,
            {
                **props,
                "pid": None,
                "start_ticks": None,
                "log_path": None,
                "sandbox": None,
                "started_at": None,
            },
            opts,
        )


class LocalDirectory(pulumi.dynamic.Resource, module="spotroute", name="LocalDirectory"):
    url: pulumi.Output[str]
    path: pulumi.Output[str]

    def __init__(
        self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__(LocalDirectoryProvider(), name, {**props, "url": None, "path": None}, opts)


# --- components -----------------------------------------------------------------------------------


def make_provider(name: str, args: ProviderArgs) -> None:
    """The local target needs no provider: dynamic resources bring their own."""
    return None


def _absolute(directory: str, field: str) -> str:
    """`directory` if absolute; ValueError naming the Args field otherwise (the router sets it)."""
    if not Path(directory).is_absolute():
        raise ValueError(
            f"{field}: {directory!r} is not an absolute directory — the router writes one "
            "under SPOTROUTE_HOME"
        )
    return directory


class Network(pulumi.ComponentResource):
    """Nothing to create locally: the job process shares this machine's network, no inbound."""

    resource_group_name: pulumi.Output[str] | None = None

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("spotroute:local:Network", name, None, opts)
        self.network_id = pulumi.Output.from_input("local")
        self.subnet_id = pulumi.Output.from_input("local")
        self.firewall_id = pulumi.Output.from_input("local")
        self.register_outputs(
            {
                "network_id": self.network_id,
                "subnet_id": self.subnet_id,
                "firewall_id": self.firewall_id,
            }
        )


class CheckpointBucket(pulumi.ComponentResource):
    """A private directory (file:// URL); an existing file:// URL is reused as is."""

    def __init__(
        self, name: str, args: CheckpointBucketArgs, opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("spotroute:local:CheckpointBucket", name, None, opts)
        if args.existing_url:
            if not args.existing_url.startswith("file://"):
                raise ValueError(
                    f"existing_url: the local target needs a file:// URL, got {args.existing_url!r}"
                )
            url = args.existing_url if args.existing_url.endswith("/") else args.existing_url + "/"
            self.url = pulumi.Output.from_input(url)
            self.bucket_name = pulumi.Output.from_input(urlparse(url).path)
        else:
            directory = LocalDirectory(
                f"{name}-dir",
                {
                    "job_name": args.job_name,
                    "directory": _absolute(args.local_directory, "local_directory"),
                    "labels": standard_labels(args.job_name, args.labels),
                },
                # Kept on destroy like a cloud's checkpoint bucket (it holds the user's work, and
                # every placement of the job shares it); the provider's delete never runs then.
                pulumi.ResourceOptions(parent=self, retain_on_delete=args.keep_on_destroy),
            )
            self.url = directory.url
            self.bucket_name = directory.path
        self.arn_or_id = self.bucket_name
        self.register_outputs({"bucket_name": self.bucket_name, "url": self.url})


class JobIdentity(pulumi.ComponentResource):
    """The job runs as the deploying user; there is no separate identity to create."""

    def __init__(
        self,
        name: str,
        args: JobIdentityArgs,
        bucket: CheckpointBucket,
        opts: pulumi.ResourceOptions | None = None,
        staging: CheckpointBucket | None = None,  # never given: the local target stages nothing
    ):
        super().__init__("spotroute:local:JobIdentity", name, None, opts)
        self.identity_id = pulumi.Output.from_input(f"local-user:{getpass.getuser()}")
        # Same shape as the clouds: the job writes only below bucket URL + checkpoint prefix.
        self.checkpoint_url = pulumi.Output.concat(bucket.url, args.checkpoint_prefix)
        self.register_outputs(
            {"identity_id": self.identity_id, "checkpoint_url": self.checkpoint_url}
        )


class SpotGpuGroup(pulumi.ComponentResource):
    """The job's command as one local process (node_count is recorded; one process runs)."""

    def __init__(
        self,
        name: str,
        args: SpotGpuGroupArgs,
        network: Network,
        identity: JobIdentity,
        bucket: CheckpointBucket,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("spotroute:local:SpotGpuGroup", name, None, opts)
        process = LocalProcess(
            f"{name}-process",
            {
                "job_name": args.job_name,
                "sandbox_dir": _absolute(args.local_sandbox, "local_sandbox"),
                "command": list(args.job.command),
                "env": dict(args.job.env),
                # A secret Output: encrypted in the state, `[secret]` in every diff.
                "secret_env": pulumi.Output.secret(args.job.secret_env)
                if args.job.secret_names
                else {},
                "checkpoint_interval_s": args.job.checkpoint_interval_s,
                "image": args.job.image,
                "checkpoint_url": identity.checkpoint_url,
                "market": args.market,
                "region": args.region,
                "placement": pulumi.get_stack(),
                "max_price_per_hour": args.max_price_per_hour,  # read by the budget policy
                "labels": standard_labels(args.job_name, args.labels),
            },
            # The provider copies its inputs into its outputs: keep that copy secret too.
            pulumi.ResourceOptions(parent=self, additional_secret_outputs=["secret_env"]),
        )
        self.group_id = process.id
        self.checkpoint_url = identity.checkpoint_url
        self.log_path = process.log_path
        self.register_outputs(
            {
                "group_id": self.group_id,
                "checkpoint_url": self.checkpoint_url,
                "log_path": self.log_path,
            }
        )


COMPONENTS = CloudComponents(
    "local", make_provider, Network, CheckpointBucket, JobIdentity, SpotGpuGroup
)
