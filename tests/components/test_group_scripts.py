"""A 2-node placement on each cloud, rendered by the placement program under the Pulumi mocks: the
start-up script every node boots with (AWS user data, GCP `startup-script` metadata, Azure custom
data) gives each node its rank, the node count and the group's rendezvous location.

Each script is read back from the mocked resource, its rendezvous settings checked against the
stack (checkpoint URL, stack name, node count, the cloud's storage API and identity), and its
rendezvous lines run with bash — two node processes, each with its own host name, address and
boot id, against that cloud's storage emulator (moto through the AWS CLI, fake-gcs-server with a
metadata token, Azurite with OAuth) — then once more after one node was replaced. Only the
storage and metadata base URLs of the settings are pointed at the emulators (and the poll made
faster); everything else runs as rendered.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import ssl
import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_aws import placement as aws_placement
from test_aws import user_data
from test_azure import CLIENT_ID, custom_data
from test_azure import azure_config as azure_config  # a fixture
from test_azure import placement as azure_placement
from test_gcp import gcp_config as gcp_config  # a fixture
from test_gcp import placement as gcp_placement
from test_gcp import startup_script

from components.rendezvous import MASTER_PORT
from tests.checkpoint.fresh_grant import FreshGrantProxy
from tests.checkpoint.servers import start_gcs, start_s3
from tests.components.rendezvous_servers import TokenServer, azurite_https

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:pulumi_gcp.*")

GROUP_KEYS = ("NODE_RANK", "NNODES", "MASTER_ADDR", "MASTER_PORT", "SKYPILOT_NODE_RANK",
              "SKYPILOT_NUM_NODES", "SKYPILOT_NODE_IPS", "SPOTROUTE_NODE_RANK",
              "SPOTROUTE_NODE_COUNT", "SPOTROUTE_RDZV_ENDPOINT", "SPOTROUTE_GROUP_GENERATION",
              "SPOTROUTE_NODE_ID", "SPOTROUTE_NODE_ADDRESS")  # fmt: skip
# `hostname` of a node: its name, or with -I its addresses (the first is the private one).
FAKE_HOSTNAME = """#!/bin/sh
if [ "$1" = "-I" ]; then echo "$FAKE_ADDRESS "; else echo "$FAKE_HOSTNAME"; fi
"""


@dataclass(frozen=True)
class Rendered:
    """One cloud's rendered start-up script and the stack it came from."""

    cloud: str
    script: str
    checkpoint_url: str


def rendered(cloud: str, config: dict[str, Any]) -> Rendered:
    """The placement program under the mocks with nodeCount=2; the node start-up script."""
    run, read = {
        "aws": (aws_placement, user_data),
        "gcp": (gcp_placement, startup_script),
        "azure": (azure_placement, custom_data),
    }[cloud]
    stack = run(config, nodeCount=2)
    return Rendered(cloud, read(stack), stack.outputs["checkpointUrl"])


def settings_of(script: str) -> dict[str, Any]:
    (line,) = [x for x in script.splitlines() if x.startswith("spotroute_rdzv_settings=")]
    (word,) = shlex.split(line.split("=", 1)[1])
    settings: dict[str, Any] = json.loads(word)
    return settings


def rendezvous_part(script: str, **emulator: Any) -> str:
    """The script's group-size exports and rendezvous lines as rendered, the settings' base URLs
    replaced by `emulator`."""
    lines = script.splitlines()
    size_exports = ("export SKYPILOT_NUM_NODES=", "export SPOTROUTE_NODE_COUNT=")
    sizes = [x for x in lines if x.startswith(size_exports)]
    first = lines.index('export SPOTROUTE_NODE_ID="${SPOTROUTE_NODE_ID:-$(hostname)}"')
    last = lines.index("spotroute_peer_lost() {") + 2
    assert lines[last] == "}"
    part = lines[first : last + 1]
    at = next(i for i, x in enumerate(part) if x.startswith("spotroute_rdzv_settings="))
    changed = {**settings_of(script), **emulator}
    part[at] = "spotroute_rdzv_settings=" + shlex.quote(json.dumps(changed, sort_keys=True))
    return "\n".join([*sizes, *part])


class Nodes:
    """Node processes running a script's rendezvous, each with its own name, address and boot."""

    def __init__(self, tmp_path: Path, part: str, env: dict[str, str]) -> None:
        self.tmp, self.env = tmp_path, env
        self.bin = tmp_path / "bin"
        self.bin.mkdir(exist_ok=True)
        (self.bin / "hostname").write_text(FAKE_HOSTNAME)
        (self.bin / "hostname").chmod(0o755)
        dump = ("import json, os, sys; json.dump({k: os.environ.get(k) for k in "
                f"{list(GROUP_KEYS)!r}}}, open(sys.argv[1], 'w'))")  # fmt: skip
        self.script = (f"set -euo pipefail\n{part}\nspotroute_rendezvous\n"
                       f'python3 -c {shlex.quote(dump)} "$OUT"\n')  # fmt: skip

    def form(self, *nodes: tuple[str, str, str]) -> dict[str, dict[str, str]]:
        """Run (name, address, boot) together; what each node's job would get, by name."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPOTROUTE_")}
        procs = []
        for name, address, boot in nodes:
            out = self.tmp / f"{name}-{boot}.json"
            node_env = {**env, **self.env, "PATH": f"{self.bin}:{env['PATH']}",
                        "FAKE_HOSTNAME": name, "FAKE_ADDRESS": address,
                        "SPOTROUTE_BOOT_ID": boot, "OUT": str(out)}  # fmt: skip
            procs.append((name, out, subprocess.Popen(
                ["bash", "-c", self.script], env=node_env, stderr=subprocess.PIPE, text=True)))
        seen = {}
        for name, out, proc in procs:
            _, log = proc.communicate(timeout=90)
            assert proc.returncode == 0, log
            seen[name] = json.loads(out.read_text())
        return seen


Emulator = Callable[[Rendered, Path], AbstractContextManager[tuple[dict[str, Any], dict[str, str]]]]


@contextmanager
def s3_emulator(r: Rendered, tmp: Path) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
    # The AWS image runs these lines with the AWS CLI: without it the test would prove nothing.
    assert shutil.which("aws"), "the AWS CLI must be on PATH (pip install awscli), as in the image"
    server = start_s3()
    try:
        bucket = r.checkpoint_url.removeprefix("s3://").split("/")[0]
        subprocess.run(["aws", "s3", "mb", f"s3://{bucket}"], env={**os.environ, **server.env},
                       check=True, capture_output=True)  # fmt: skip
        # The AWS CLI reads the endpoint from the environment; the settings keep the region.
        yield {}, server.env
    finally:
        server.stop()


@contextmanager
def gcs_emulator(r: Rendered, tmp: Path) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
    server = start_gcs()
    try:
        with TokenServer() as tokens:
            import fsspec.core

            fs, _ = fsspec.core.url_to_fs(r.checkpoint_url, **server.storage_options)
            fs.mkdir(r.checkpoint_url.removeprefix("gs://").split("/")[0])
            yield {"storage": server.storage_options["endpoint_url"],
                   "metadata": tokens.endpoint}, {}  # fmt: skip
    finally:
        server.stop()


@contextmanager
def blob_emulator(r: Rendered, tmp: Path) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
    with TokenServer() as tokens, azurite_https(tmp / "azurite") as azurite:
        container = r.checkpoint_url.split("/")[3]
        azurite.create_container(container, tokens.azure_token())
        yield ({"storage": azurite.endpoint, "metadata": tokens.endpoint},
               {"SSL_CERT_FILE": str(azurite.cert)})  # fmt: skip


# Node names as each cloud gives them, and a replacement's:
# - AWS: the host name is the IP name, ip-<private IPv4 with dashes> (EC2 instance hostnames,
#   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-naming.html), so a
#   replacement instance has a new name with its new address.
# - GCP: a MIG names a VM <baseInstanceName>-<4 random characters> (instanceGroupManagers,
#   baseInstanceName: https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers);
#   recreating a VM deletes and creates it again under the same name
#   (https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/recreateInstances):
#   the same name with a new address and boot.
# - Azure: a scale set's VMs are named from osProfile.computerNamePrefix; a VM created to replace an
#   evicted one (eviction policy Delete) is a new VM with a new name.
CLOUDS: dict[str, tuple[str, Emulator, tuple[str, str], tuple[str, str], tuple[str, str]]] = {
    "aws": ("s3", s3_emulator, ("ip-10-0-0-5", "10.0.0.5"), ("ip-10-0-0-9", "10.0.0.9"),
            ("ip-10-0-0-14", "10.0.0.14")),
    "gcp": ("gcs", gcs_emulator, ("llm-finetune-node-1x2k", "10.128.0.4"),
            ("llm-finetune-node-9zq7", "10.128.0.2"), ("llm-finetune-node-9zq7", "10.128.0.11")),
    "azure": ("azure", blob_emulator, ("llm-finetune0K2P1Q", "10.42.0.5"),
              ("llm-finetune7X3B4C", "10.42.0.4"), ("llm-finetuneZ9Y8W7", "10.42.0.6")),
}  # fmt: skip


@pytest.fixture
def configs(
    aws_config: dict[str, Any],
    gcp_config: dict[str, Any],
    azure_config: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    return {"aws": aws_config, "gcp": gcp_config, "azure": azure_config}


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_every_node_of_a_two_node_placement_gets_its_rank_the_count_and_the_rendezvous(
    cloud: str, configs: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    store, emulator, first, second, replacement = CLOUDS[cloud]
    r = rendered(cloud, configs[cloud])
    script = r.script

    # The count is known at boot; rank, peers and master come from the rendezvous, so no rank
    # is fixed in the script, and the container gets each variable by name.
    assert "export SPOTROUTE_NODE_COUNT=2\n" in script and "export SKYPILOT_NUM_NODES=2\n" in script
    assert "SKYPILOT_NODE_RANK=" not in script
    (docker_run,) = [x for x in script.splitlines() if x.strip().startswith("docker run ")]
    for name in ("NODE_RANK", "NNODES", "MASTER_ADDR", "MASTER_PORT", "SKYPILOT_NODE_RANK",
                 "SKYPILOT_NODE_IPS", "SKYPILOT_NUM_NODES", "SPOTROUTE_RDZV_ENDPOINT"):
        assert f" -e {name} " in docker_run, name
    assert script.index("  spotroute_rendezvous || ") < script.index(docker_run)
    settings = settings_of(script)
    assert (settings["store"], settings["url"], settings["nodes"]) == (store, r.checkpoint_url, 2)
    assert (settings["placement"], settings["port"]) == ("llm-finetune", MASTER_PORT)
    assert settings["storage"] == settings["metadata"] == ""  # the cloud's own endpoints
    assert settings["reform_rounds"] == 0  # every cloud re-places a group (docs/components.md)
    assert settings["region"] == ("us-east-1" if cloud == "aws" else "")
    assert settings["client_id"] == (CLIENT_ID if cloud == "azure" else "")

    with emulator(r, tmp_path) as (endpoints, env):
        fast = {"poll_s": 0.2, "timeout_s": 30.0, **endpoints}
        nodes = Nodes(tmp_path, rendezvous_part(script, **fast), env)
        a, b = (first, second) if first[0] < second[0] else (second, first)
        seen = nodes.form((*first, "boot-1"), (*second, "boot-2"))

        for rank, (name, address) in enumerate((a, b)):
            got = seen[name]
            assert (got["SPOTROUTE_NODE_ID"], got["SPOTROUTE_NODE_ADDRESS"]) == (name, address)
            assert got["NODE_RANK"] == got["SKYPILOT_NODE_RANK"] == str(rank)
            assert got["NNODES"] == got["SKYPILOT_NUM_NODES"] == "2"
            assert (got["MASTER_ADDR"], got["MASTER_PORT"]) == (a[1], str(MASTER_PORT))
            assert got["SPOTROUTE_RDZV_ENDPOINT"] == f"{a[1]}:{MASTER_PORT}"
            assert got["SKYPILOT_NODE_IPS"] == f"{a[1]}\n{b[1]}"
        generation = seen[a[0]]["SPOTROUTE_GROUP_GENERATION"]
        assert seen[b[0]]["SPOTROUTE_GROUP_GENERATION"] == generation

        # The second node is lost and replaced (new address and boot; a new name where the cloud
        # gives one). Its old entry still lies under the prefix; the first node joins again.
        again = nodes.form((*first, "boot-1"), (*replacement, "boot-3"))

        low, high = sorted((first, replacement))
        assert set(again) == {first[0], replacement[0]}
        for rank, (name, _) in enumerate((low, high)):
            assert again[name]["NODE_RANK"] == str(rank)
            assert again[name]["SKYPILOT_NODE_IPS"] == f"{low[1]}\n{high[1]}"
            assert again[name]["MASTER_ADDR"] == low[1]
        new_generation = again[first[0]]["SPOTROUTE_GROUP_GENERATION"]
        assert again[replacement[0]]["SPOTROUTE_GROUP_GENERATION"] == new_generation
        assert new_generation != generation


REFUSE_S = 3.0  # the storage refuses the new grant this long; the rendezvous waits up to 30 s


def behind_fresh_grant(cloud: str, endpoints: dict[str, Any],
                       env: dict[str, str]) -> tuple[FreshGrantProxy, dict[str, Any],
                                                     dict[str, str]]:
    """A proxy refusing REFUSE_S in front of the cloud's emulator; the endpoints through it."""
    if cloud == "aws":
        proxy = FreshGrantProxy(env["AWS_ENDPOINT_URL"], "s3", REFUSE_S)
        return proxy, endpoints, {**env, "AWS_ENDPOINT_URL": proxy.endpoint}
    if cloud == "gcp":
        proxy = FreshGrantProxy(endpoints["storage"], "gcs", REFUSE_S)
    else:
        cert = Path(env["SSL_CERT_FILE"])
        proxy = FreshGrantProxy(endpoints["storage"], "azure", REFUSE_S, cert=cert,
                                key=cert.parent / "key.pem",
                                upstream_context=ssl.create_default_context(cafile=str(cert)))
    return proxy, {**endpoints, "storage": proxy.endpoint}, env


@pytest.mark.parametrize("nodes", [1, 2])
@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_a_group_forms_while_its_fresh_grant_is_still_refused(
    cloud: str, nodes: int, configs: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    # A group of one runs the same rendezvous, so its job too starts only once the grant works.
    _, emulator, first, second, _ = CLOUDS[cloud]
    stack = {"aws": aws_placement, "gcp": gcp_placement, "azure": azure_placement}[cloud](
        configs[cloud], nodeCount=nodes)
    read = {"aws": user_data, "gcp": startup_script, "azure": custom_data}[cloud]
    r = Rendered(cloud, read(stack), stack.outputs["checkpointUrl"])
    assert settings_of(r.script)["nodes"] == nodes

    with emulator(r, tmp_path) as (endpoints, env):
        proxy, endpoints, env = behind_fresh_grant(cloud, endpoints, env)
        with proxy:
            fast = {"poll_s": 0.2, "timeout_s": 30.0, **endpoints}
            group = Nodes(tmp_path, rendezvous_part(r.script, **fast), env)
            members = [(*first, "boot-1"), (*second, "boot-2")][:nodes]
            seen = group.form(*members)

    assert proxy.refused > 0 and proxy.forwarded > 0  # refused first, then through
    low = min(first, second) if nodes == 2 else first
    for name, address, _ in members:
        assert seen[name]["NNODES"] == str(nodes)
        assert seen[name]["MASTER_ADDR"] == low[1]
        assert seen[name]["NODE_RANK"] == ("0" if (name, address) == low else "1")
