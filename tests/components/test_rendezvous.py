"""A multi-node group forms through files under its own checkpoint prefix, on every cloud's storage.

The rendered start-up script runs with bash, one process per node, with the job a small python
program that records what it was given: on a directory (the local target), on S3 (moto's server,
through the AWS CLI as the AWS image has it), on Cloud Storage (fake-gcs-server, JSON API, a token
from a metadata server) and on Blob Storage (Azurite over HTTPS with OAuth: it refuses requests
without a valid bearer token, so the IMDS token path is exercised for real).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from components.args import JobCommand
from components.rendezvous import (
    EXIT_GROUP_NOT_FORMED,
    GroupRendezvous,
    aws_rendezvous,
    azure_rendezvous,
    gcp_rendezvous,
    local_rendezvous,
)
from components.startup import LOG_PATH, render_startup_script
from tests.checkpoint.servers import StorageServer, start_gcs, start_s3
from tests.components.rendezvous_servers import AzuriteOAuth, TokenServer, azurite_https

# 60 s: with two test workers and the engine tests beside them, a node script took over 30 s
# to meet its peer (both ended "the group did not form").
FAST = {"poll_s": 0.2, "timeout_s": 60.0}
KEYS = ("NODE_RANK", "NNODES", "MASTER_ADDR", "MASTER_PORT", "SKYPILOT_NODE_RANK",
        "SKYPILOT_NUM_NODES", "SKYPILOT_NODE_IPS", "SPOTROUTE_RDZV_ENDPOINT",
        "SPOTROUTE_GROUP_GENERATION", "SPOTROUTE_NODE_ID")
# The job: records its env as <out>/<node>-<round>.json; `JOB_EXIT_<node>` (comma-separated, one
# per round) is its exit status, and a round listed in `JOB_NOTICE_<node>` first writes the
# library's interruption marker saying this node got the notice; a round listed in
# `JOB_AFTER_NOTICE_<node>` first waits (up to 30 s) for a peer's marker — the checkpoint library
# makes the ranks of a node with no notice exit only once the group has saved for a peer's notice,
# so the marker is there before they exit (each test starts with no marker).
JOB = r"""
import datetime, json, os, sys
node, out, ckpt = os.environ["SPOTROUTE_NODE_ID"], os.environ["RDZV_OUT"], os.environ["RDZV_CKPT"]
done = len([f for f in os.listdir(out) if f.startswith(node + "-")])
with open(os.path.join(out, f"{node}-{done}.json"), "w") as f:
    json.dump({k: os.environ.get(k) for k in json.loads(os.environ["RDZV_KEYS"])}, f)
key = node.replace("-", "_")
if str(done) in os.environ.get("JOB_AFTER_NOTICE_" + key, "").split(","):
    import time
    marker = os.path.join(ckpt, "interruption.json")
    for _ in range(300):
        try:
            with open(marker) as f:
                if node not in json.load(f)["noticed_on"]:
                    break
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
if str(done) in os.environ.get("JOB_NOTICE_" + key, "").split(","):
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    with open(os.path.join(ckpt, "interruption.json"), "w") as f:
        json.dump({"exiting": True, "noticed_on": [node], "written_at": now, "cloud": "aws"}, f)
codes = os.environ.get("JOB_EXIT_" + key, "0").split(",")
sys.exit(int(codes[min(done, len(codes) - 1)]))
"""


def group_script(url: str, rendezvous: GroupRendezvous, nodes: int = 2) -> str:
    job = JobCommand(image="", command=("python3", "-c", JOB))
    return render_startup_script("llm", url, job, node_count=nodes, rendezvous=rendezvous,
                                 placement="llm-1", shutdown_when_done=False)


class Group:
    """Node processes running one rendered script, each with its own id, address and boot."""

    def __init__(self, tmp_path: Path, script: str, env: dict[str, str], ckpt_dir: Path) -> None:
        self.out = tmp_path / "out"
        self.out.mkdir(exist_ok=True)
        self.tmp, self.env, self.procs = tmp_path, env, {}  # type: ignore[var-annotated]
        self.script = script
        self.ckpt_dir = ckpt_dir
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)

    def start(self, node: str, address: str, boot: str, **job_env: str) -> None:
        log = self.tmp / f"{node}-{boot}.log"
        text = self.script.replace(LOG_PATH, str(log))
        env = {**os.environ, **self.env, "SPOTROUTE_NODE_ID": node,
               "SPOTROUTE_NODE_ADDRESS": address, "SPOTROUTE_BOOT_ID": boot,
               "RDZV_OUT": str(self.out), "RDZV_CKPT": str(self.ckpt_dir),
               "RDZV_KEYS": json.dumps(KEYS), **job_env}
        self.procs[(node, boot)] = (subprocess.Popen(["bash", "-c", text], env=env), log)

    def wait(self, node: str, boot: str, timeout_s: float = 180) -> tuple[int, str]:
        proc, log = self.procs[(node, boot)]
        code = proc.wait(timeout=timeout_s)
        return code, log.read_text() if log.exists() else ""

    def seen(self, node: str, round_: int = 0) -> dict[str, str]:
        """What the node's job got in that round; waits up to 30 s for a job still starting."""
        record = self.out / f"{node}-{round_}.json"
        for _ in range(300):
            if record.exists():
                try:
                    return dict(json.loads(record.read_text()))
                except ValueError:  # the job is writing it
                    pass
            time.sleep(0.1)
        return dict(json.loads(record.read_text()))

    def form(self, *nodes: tuple[str, str, str]) -> None:
        """Start (node, address, boot) each, and wait for every script to end with status 0."""
        try:
            for node in nodes:
                self.start(*node)
            for node, _, boot in nodes:
                code, log = self.wait(node, boot)
                assert code == 0, log
        finally:
            self.stop()

    def stop(self) -> None:
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def local_group(tmp_path: Path) -> Iterator[tuple[Group, Path]]:
    ckpt = tmp_path / "ckpt"
    group = Group(tmp_path, group_script(f"file://{ckpt}/",
                                         replace(local_rendezvous(), reform_rounds=1, **FAST)),
                  {}, ckpt)
    yield group, ckpt
    group.stop()


def test_a_late_node_is_waited_for_and_both_get_ranks_peers_and_the_master(
    local_group: tuple[Group, Path],
) -> None:
    group, _ = local_group
    group.start("node-b", "10.0.0.2", "boot-b")
    time.sleep(2.0)  # node a boots late
    group.start("node-a", "10.0.0.1", "boot-a")

    assert group.wait("node-a", "boot-a")[0] == 0
    code, log = group.wait("node-b", "boot-b")
    assert code == 0, log
    a, b = group.seen("node-a"), group.seen("node-b")
    assert "1 of 2 nodes here (node-b 10.0.0.2); waiting" in log
    assert (a["NODE_RANK"], b["NODE_RANK"]) == ("0", "1")  # ranked by node id
    assert a["SKYPILOT_NODE_RANK"] == "0" and b["SKYPILOT_NODE_RANK"] == "1"
    for seen in (a, b):
        assert (seen["NNODES"], seen["SKYPILOT_NUM_NODES"]) == ("2", "2")
        assert (seen["MASTER_ADDR"], seen["MASTER_PORT"]) == ("10.0.0.1", "29500")
        assert seen["SPOTROUTE_RDZV_ENDPOINT"] == "10.0.0.1:29500"
        assert seen["SKYPILOT_NODE_IPS"] == "10.0.0.1\n10.0.0.2"  # rank order, one per line
    assert a["SPOTROUTE_GROUP_GENERATION"] == b["SPOTROUTE_GROUP_GENERATION"]


def test_a_node_alone_gives_up_after_the_timeout_with_the_reason(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    rendezvous = replace(local_rendezvous(), **{**FAST, "timeout_s": 2.0})
    group = Group(tmp_path, group_script(f"file://{ckpt}/", rendezvous), {}, ckpt)
    group.start("node-a", "10.0.0.1", "boot-a")

    code, log = group.wait("node-a", "boot-a")

    # Its own status, which the router reads as an infrastructure failure, not a crash.
    assert code == EXIT_GROUP_NOT_FORMED == 69
    assert "the group did not form within 2 s: 1 of 2 nodes here (node-a 10.0.0.1)" in log
    assert not (tmp_path / "out" / "node-a-0.json").exists()  # the job never started
    entry = json.loads((ckpt / "rendezvous" / "llm-1" / "node-a.json").read_text())
    assert (entry["address"], entry["boot"]) == ("10.0.0.1", "boot-a")


def test_a_node_stopped_while_it_waits_reports_the_signal_not_a_group_that_did_not_form(
    tmp_path: Path,
) -> None:
    ckpt = tmp_path / "ckpt"
    group = Group(tmp_path, group_script(f"file://{ckpt}/", replace(local_rendezvous(), **FAST)),
                  {}, ckpt)
    group.start("node-a", "10.0.0.1", "boot-a")
    proc, _ = group.procs[("node-a", "boot-a")]
    entry = ckpt / "rendezvous" / "llm-1" / "node-a.json"
    for _ in range(300):  # the rendezvous program waits for node b
        if entry.exists():
            break
        time.sleep(0.1)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    for child in children:  # the node going away: its processes get SIGTERM
        os.kill(int(child), signal.SIGTERM)

    code, log = group.wait("node-a", "boot-a")

    assert code == 128 + signal.SIGTERM, log
    assert "did not form" not in log


def test_a_group_of_one_forms_at_once_with_itself_as_master(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    group = Group(tmp_path, group_script(f"file://{ckpt}/", replace(local_rendezvous(), **FAST),
                                         nodes=1), {}, ckpt)
    started = time.monotonic()
    group.form(("node-0", "10.0.0.1", "boot-0"))

    seen = group.seen("node-0")
    assert (seen["NODE_RANK"], seen["NNODES"], seen["SKYPILOT_NUM_NODES"]) == ("0", "1", "1")
    assert (seen["MASTER_ADDR"], seen["SPOTROUTE_RDZV_ENDPOINT"]) == ("10.0.0.1",
                                                                     "10.0.0.1:29500")
    assert seen["SKYPILOT_NODE_IPS"] == "10.0.0.1" and seen["SPOTROUTE_GROUP_GENERATION"]
    assert time.monotonic() - started < 10  # no poll to wait out: one node proposes, agrees


def test_writes_refused_at_first_are_tried_again_and_the_group_forms(tmp_path: Path) -> None:
    # A new grant refused for its first minutes (GCP IAM: "typically 2 minutes, potentially 7
    # minutes or longer"), a 5xx: here nothing can be written under the prefix for 2 s (a file
    # stands where its directory goes; file modes would not stop a test run as root).
    ckpt = tmp_path / "ckpt"
    blocker = ckpt / "rendezvous"
    ckpt.mkdir()
    blocker.write_text("not a directory")
    group = Group(tmp_path, group_script(f"file://{ckpt}/", replace(local_rendezvous(), **FAST)),
                  {}, ckpt)
    try:
        group.start("node-a", "10.0.0.1", "boot-a")
        group.start("node-b", "10.0.0.2", "boot-b")
        time.sleep(2.0)
        assert all(proc.poll() is None for proc, _ in group.procs.values())  # still trying
    finally:
        blocker.unlink()

    code_a, log_a = group.wait("node-a", "boot-a")
    code_b, log_b = group.wait("node-b", "boot-b")

    assert (code_a, code_b) == (0, 0), log_a + log_b
    assert log_a.count("cannot write or list") == 1  # said once, tried again at every poll
    assert "; trying again until the deadline" in log_a
    assert {group.seen("node-a")["NODE_RANK"], group.seen("node-b")["NODE_RANK"]} == {"0", "1"}


def test_after_a_peers_notice_the_survivor_forms_the_group_again_with_its_replacement(
    local_group: tuple[Group, Path],
) -> None:
    group, _ = local_group
    # Round 0: b gets the notice; the library saved the group and every rank exited (torchrun
    # makes that 1). b's script ends (its node goes away); a's waits for b's replacement.
    group.start("node-a", "10.0.0.1", "boot-a", JOB_EXIT_node_a="1,0", JOB_AFTER_NOTICE_node_a="0")
    group.start("node-b", "10.0.0.2", "boot-b", JOB_EXIT_node_b="1", JOB_NOTICE_node_b="0")
    code_b, log_b = group.wait("node-b", "boot-b")
    assert code_b == 1, log_b
    assert "forming the group again" not in log_b  # its own notice: this node goes away
    first = group.seen("node-a", 0)
    time.sleep(1.0)
    group.start("node-b", "10.0.0.7", "boot-b2")  # the replacement: same name, new address

    code_a, log_a = group.wait("node-a", "boot-a")

    assert code_a == 0, log_a
    assert "a peer node was preempted (status 1); forming the group again" in log_a
    again = group.seen("node-a", 1)
    assert again["SKYPILOT_NODE_IPS"] == "10.0.0.1\n10.0.0.7"
    assert again["SPOTROUTE_GROUP_GENERATION"] != first["SPOTROUTE_GROUP_GENERATION"]
    assert group.seen("node-b", 1)["SPOTROUTE_GROUP_GENERATION"] == again[
        "SPOTROUTE_GROUP_GENERATION"]
    assert group.wait("node-b", "boot-b2")[0] == 0


def test_a_replacement_with_a_new_name_takes_the_lost_nodes_place(
    local_group: tuple[Group, Path],
) -> None:
    group, _ = local_group
    group.start("node-a", "10.0.0.1", "boot-a", JOB_EXIT_node_a="1,0", JOB_AFTER_NOTICE_node_a="0")
    group.start("node-b", "10.0.0.2", "boot-b", JOB_EXIT_node_b="1", JOB_NOTICE_node_b="0")
    code_b, log_b = group.wait("node-b", "boot-b")
    assert code_b == 1 and "formed generation" in log_b, log_b
    group.start("node-c", "10.0.0.3", "boot-c")  # e.g. a new VM of an Azure scale set

    code_a, log_a = group.wait("node-a", "boot-a")
    code_c, log_c = group.wait("node-c", "boot-c")

    assert (code_a, code_c) == (0, 0), log_a + log_c + "\n-- node-b:\n" + log_b
    assert "node-b" not in log_c  # b's entry is older than c's wait: b is gone
    seen = group.seen("node-c")
    assert (seen["NODE_RANK"], seen["SKYPILOT_NODE_IPS"]) == ("1", "10.0.0.1\n10.0.0.3")


def test_a_crash_or_an_old_marker_ends_the_script_instead_of_forming_the_group_again(
    local_group: tuple[Group, Path],
) -> None:
    group, ckpt = local_group
    # A marker from an earlier preemption of the job, naming b: it says nothing about this round.
    (ckpt / "interruption.json").write_text(json.dumps({
        "exiting": True, "noticed_on": ["node-b"], "written_at": "2026-01-01T00:00:00+00:00"}))
    group.start("node-a", "10.0.0.1", "boot-a", JOB_EXIT_node_a="1")
    group.start("node-b", "10.0.0.2", "boot-b", JOB_EXIT_node_b="3")

    code_a, log_a = group.wait("node-a", "boot-a")
    code_b, log_b = group.wait("node-b", "boot-b")

    assert (code_a, code_b) == (1, 3)
    assert "forming the group again" not in log_a + log_b
    assert not (group.out / "node-a-1.json").exists()


@pytest.fixture(scope="module")
def s3() -> Iterator[StorageServer]:
    server = start_s3()
    yield server
    server.stop()


def test_nodes_form_the_group_through_s3_with_the_aws_cli(s3: StorageServer,
                                                        tmp_path: Path) -> None:
    # The AWS image runs these lines with the AWS CLI: without it the test would prove nothing.
    assert shutil.which("aws"), "the AWS CLI must be on PATH (pip install awscli), as in the image"
    url = f"{s3.url}/llm/"
    group = Group(tmp_path, group_script(url, replace(aws_rendezvous("us-west-2"), **FAST)),
                  s3.env, tmp_path / "ckpt")
    group.form(("ip-10-0-0-5", "10.0.0.5", "b1"), ("ip-10-0-0-9", "10.0.0.9", "b2"))

    assert group.seen("ip-10-0-0-9")["SKYPILOT_NODE_IPS"] == "10.0.0.5\n10.0.0.9"
    import fsspec.core

    fs, root = fsspec.core.url_to_fs(url, **s3.storage_options)
    listing = fs.ls(f"{root.rstrip('/')}/rendezvous/llm-1", refresh=True)
    names = sorted(p.rsplit("/", 1)[-1] for p in listing)
    assert names == ["ip-10-0-0-5.json", "ip-10-0-0-9.json"]


@pytest.fixture(scope="module")
def tokens() -> Iterator[TokenServer]:
    with TokenServer() as server:
        yield server


def test_nodes_form_the_group_through_cloud_storage_with_the_metadata_token(
    tokens: TokenServer, tmp_path: Path,
) -> None:
    gcs = start_gcs()
    try:
        rendezvous = replace(gcp_rendezvous(), storage_endpoint=gcs.storage_options["endpoint_url"],
                             metadata_endpoint=tokens.endpoint, **FAST)
        group = Group(tmp_path, group_script(f"{gcs.url}/llm/", rendezvous), {}, tmp_path / "c")
        group.form(("llm-node-1x2k", "10.128.0.4", "b1"), ("llm-node-9zq7", "10.128.0.2", "b2"))
        assert group.seen("llm-node-9zq7")["MASTER_ADDR"] == "10.128.0.4"
        # https://cloud.google.com/compute/docs/access/authenticate-workloads#applications
        # (the token of the VM's service account, asked with Metadata-Flavor: Google).
        assert ("/computeMetadata/v1/instance/service-accounts/default/token", "Google") in {
            (path, flavor) for path, flavor, _ in tokens.requests}
        import fsspec.core

        fs, root = fsspec.core.url_to_fs(f"{gcs.url}/llm/", **gcs.storage_options)
        assert len(fs.ls(f"{root.rstrip('/')}/rendezvous/llm-1", refresh=True)) == 2
    finally:
        gcs.stop()


def test_nodes_form_the_group_through_blob_storage_with_the_managed_identity(
    tokens: TokenServer, tmp_path: Path,
) -> None:
    with azurite_https(tmp_path / "azurite") as azurite:
        with pytest.raises(urllib.error.HTTPError):  # OAuth is on: no valid token, no access
            azurite.create_container("ckpt", "not-a-token")
        azurite.create_container("ckpt", tokens.azure_token())
        rendezvous = replace(azure_rendezvous("client-1234"), storage_endpoint=azurite.endpoint,
                             metadata_endpoint=tokens.endpoint, **FAST)
        url = f"https://{AzuriteOAuth.ACCOUNT}.blob.core.windows.net/ckpt/llm/"
        env = {"SSL_CERT_FILE": str(azurite.cert)}
        group = Group(tmp_path, group_script(url, rendezvous), env, tmp_path / "c")
        group.form(("llm00000A", "10.1.0.5", "b1"), ("llm00000B", "10.1.0.4", "b2"))
        assert group.seen("llm00000B")["SKYPILOT_NODE_IPS"] == "10.1.0.5\n10.1.0.4"
        assert azurite.blob_names("ckpt", "llm/rendezvous/llm-1/", tokens.azure_token()) == [
            "llm/rendezvous/llm-1/llm00000A.json", "llm/rendezvous/llm-1/llm00000B.json"]
        # https://learn.microsoft.com/entra/identity/managed-identities-azure-resources/
        # how-to-use-vm-token#get-a-token-using-http (Metadata: true, resource, client_id).
        asked = [(path, query) for path, _, query in tokens.requests
                 if path == "/metadata/identity/oauth2/token"]
        assert asked and all("resource=https%3A%2F%2Fstorage.azure.com%2F" in q
                             and "client_id=client-1234" in q for _, q in asked)
