"""The local target: the same four components as the clouds, on this machine, no plugin binaries.

`SpotGpuGroup` starts `node_count` local nodes (components/local_node.py), each a process group in
its own directory as separate machines would be, that play a cloud node's life — booting,
pulling, running the clouds' own start-up script, exited — on the local market's clock. Create
returns while the nodes still boot (as an EC2 instant fleet or a GCE MIG returns before its VMs
run); read reports whether any node is alive; delete stops them as machines stop; a changed
command/env replaces the group. `CheckpointBucket` is a directory with a `file://` URL that
refuses deletion while it holds files (S3's BucketNotEmpty) and is retained on destroy: the
checkpoints are the user's work. `Network` and `JobIdentity` have nothing to create locally and
only export what the program expects. Both stateful parts are Pulumi dynamic providers, run by
the engine through the `pulumi-resource-pulumi-python` shim. The local target has no GPU and no
container runtime: the job's command runs on the node itself and `image` is pulled only in time.

Constructors match components/aws.py:
  make_provider(name, args: ProviderArgs) -> None
  Network(name, args: NetworkArgs, opts=None)
  CheckpointBucket(name, args: CheckpointBucketArgs, opts=None)
  JobIdentity(name, args: JobIdentityArgs, bucket: CheckpointBucket, opts=None, staging=None)
  SpotGpuGroup(name, args: SpotGpuGroupArgs, network, identity, bucket, opts=None)
"""

from __future__ import annotations

import contextlib
import getpass
import os
import secrets
import signal
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
from components.local_node import start_node
from components.local_nodes import (
    check_launch,
    free_port,
    group_alive,
    nodes_of_job,
    process_alive,
    running_dir,
    stop_group,
    stop_node,
)
from components.registry import CloudComponents
from router.contract.local_market import ENV_VAR as MARKET_ENV
from router.contract.local_market import LocalMarket
from router.contract.local_node import (
    LOG_FILE,
    NODE_STARTED_KILL,
    OWNER_ENV,
    SIGNAL_HOOK_ENV,
    group_id,
    launch_dir_of,
    legacy_process_of,
    node_dir_name,
)

# Changing any of these means a different group of nodes: replace, never patch in place.
REPLACE_ON = ("job_name", "command", "env", "secret_env", "checkpoint_url", "region", "node_count")
# Recorded only: the nodes are untouched.
UPDATE_IN_PLACE = ("image", "market", "labels", "max_price_per_hour", "gpu_count")
# What a key means when a stack deployed by an older spotroute lacks it.
_DEFAULTS: dict[str, Any] = {"node_count": 1, "gpu_count": 0}


def _market() -> LocalMarket | None:
    """The local market the router passed to the engine (spotroute.yaml local_market)."""
    spec = os.environ.get(MARKET_ENV)
    return LocalMarket.from_env(spec) if spec else None


def _kill_point_node_started() -> None:
    """Tests only: SIGKILL the route command right after the group's nodes started."""
    if os.environ.get(SIGNAL_HOOK_ENV) != NODE_STARTED_KILL:
        return
    pid, _, ticks = os.environ.get(OWNER_ENV, "").partition(":")
    if pid.isdigit() and ticks.isdigit() and process_alive(int(pid), int(ticks)):
        os.kill(int(pid), signal.SIGKILL)


class LocalProcessProvider(ResourceProvider):
    """Dynamic provider: a group of `node_count` local nodes below props["sandbox_dir"]."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        from filelock import FileLock

        running = running_dir(props["sandbox_dir"])
        running.mkdir(parents=True, exist_ok=True, mode=0o700)
        job, placement = str(props["job_name"]), str(props.get("placement", ""))
        nodes = int(props.get("node_count") or 1)
        market = _market()
        now = datetime.now(UTC)
        # The job's prefix of the bucket: an object store needs none made, a directory does.
        Path(urlparse(props["checkpoint_url"]).path).mkdir(parents=True, exist_ok=True, mode=0o700)
        # One launch at a time decides on capacity (two stacks may go up at once).
        with FileLock(str(running / "launch.lock")):
            # Nodes of this very placement that the engine does not know of: a create cut short
            # by a killed route (the engine kept only a pending operation). The engine is
            # creating the group anew, so those would run untracked beside it: end them first.
            for lost in nodes_of_job(running, job, placement):
                stop_node(lost.pid, lost.start_ticks)
            check_launch(
                running,
                market,
                region=str(props.get("region", "local")),
                kind=str(props.get("market", "on-demand")),
                max_price=float(props.get("max_price_per_hour") or 0.0),
                nodes=nodes,
                gpus_per_node=int(props.get("gpu_count") or 0),
                now=now,
            )
            launch = Path(props["sandbox_dir"]) / f"g-{now:%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"
            port = free_port()  # a group of one too: two placements may run side by side
            started = []
            try:
                for node in range(nodes):
                    started.append(
                        start_node(
                            props,
                            launch,
                            node=node,
                            nodes=nodes,
                            market=market,
                            running=running,
                            group_port=port,
                        )
                    )
            except BaseException:
                for record in started:
                    stop_node(record.pid, record.start_ticks)
                raise
        _kill_point_node_started()
        first = started[0]
        outs = {
            **props,
            "pid": first.pid,
            "start_ticks": first.start_ticks,
            "sandbox": str(props["sandbox_dir"]),
            "launch_dir": str(launch),
            "log_path": str(launch / node_dir_name(0) / LOG_FILE),
            "started_at": now.isoformat(),
        }
        return CreateResult(id_=group_id(str(launch)), outs=outs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        if not group_alive(id_):
            return ReadResult(id_="", outs={})  # gone: a refresh drops it from the state
        return ReadResult(id_=id_, outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        def value(props: dict[str, Any], key: str) -> Any:
            found = props.get(key)
            return _DEFAULTS.get(key) if found is None else found

        changed = [k for k in (*REPLACE_ON, *UPDATE_IN_PLACE) if value(olds, k) != value(news, k)]
        replaces = [k for k in changed if k in REPLACE_ON]
        known = launch_dir_of(_id) is not None or legacy_process_of(_id) is not None
        if known and not group_alive(_id):
            # The state says the job runs but its nodes are gone (killed, or a destroy cut
            # short): start it again rather than report a deployed stack with nothing running.
            replaces = sorted({*replaces, "command"})
            changed = sorted({*changed, "command"})
        return DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**olds, **news})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        stop_group(id_)


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
        """Remove the directory if it is empty; refuse, as S3's DeleteBucket does, if not."""
        path = Path(id_)
        if not path.is_dir():
            return
        held = [p for p in path.rglob("*") if not p.is_dir()]
        if held:
            raise RuntimeError(
                f"BucketNotEmpty: the checkpoint directory {path} is not empty ({len(held)} "
                "file(s), e.g. "
                f"{held[0].relative_to(path)}) — keep it (the component retains it on destroy) "
                "or delete its files first"
            )
        for directory in sorted((d for d in path.rglob("*") if d.is_dir()), reverse=True):
            with contextlib.suppress(OSError):
                directory.rmdir()
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
                "launch_dir": None,
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
    """A private directory (file:// URL); an existing file:// URL is reused as is.

    Retained on destroy (the engine forgets it, the files stay): the checkpoints are the user's
    work, and the directory refuses deletion while it holds any (BucketNotEmpty), as S3 does.
    """

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
    """`node_count` local nodes (components/local_node.py), each its own machine, running the
    job's command through the clouds' start-up script; create returns while they boot."""

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
                "node_count": args.node_count,
                "gpu_count": args.gpu_count,  # per node: the local market's quota counts GPUs
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
