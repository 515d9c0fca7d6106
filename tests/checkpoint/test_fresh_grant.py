"""A node's job meets its checkpoint storage only once the identity's new grant is in force.

The node's start-up script runs the rendezvous before the job, a group of one too, and the
rendezvous writes and lists under the job's own prefix until the storage lets it. Here the
storage is moto (S3, through the AWS CLI as the AWS image has it) or fake-gcs-server (the JSON
API with a metadata token) behind a proxy that refuses the new grant for its first seconds
(fresh_grant.py); the job is the checkpoint library restoring and saving a model. Without the
rendezvous the same job meets the refusal and fails: that was a single node's boot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fresh_grant import FreshGrantProxy
from servers import start_gcs, start_s3

from components.args import JobCommand
from components.rendezvous import GroupRendezvous, aws_rendezvous, gcp_rendezvous
from components.startup import render_startup_script
from router.checkpoint.storage import open_location
from tests.components.rendezvous_servers import TokenServer

ROOT = Path(__file__).resolve().parents[2]
REFUSE_S = 6.0  # longer than the job needs to import torch and reach the storage
JOB = """
import torch
from router.checkpoint import Checkpointer
model = torch.nn.Linear(4, 2)
with Checkpointer.from_env() as checkpoints:
    resume = checkpoints.restore(model=model)
    checkpoints.save(resume.step + 1, blocking=True, model=model)
print("spotroute-test: saved step", resume.step + 1)
"""


Granted = tuple[str, dict[str, str], GroupRendezvous, FreshGrantProxy, dict[str, Any]]


@contextmanager
def fresh_grant(kind: str, tmp_path: Path, refuse_s: float = REFUSE_S) -> Iterator[Granted]:
    """(checkpoint URL, node env, rendezvous, proxy, storage options past the proxy)."""
    url_of = f"fresh-{tmp_path.name}/"
    if kind == "s3":
        assert shutil.which("aws"), "the AWS CLI must be on PATH, as in the AWS image"
        server = start_s3()
        try:
            with FreshGrantProxy(server.env["AWS_ENDPOINT_URL"], "s3", refuse_s) as proxy:
                options = {
                    **server.storage_options,
                    "client_kwargs": {"endpoint_url": proxy.endpoint, "region_name": "us-west-2"},
                }
                env = {
                    **server.env,
                    "AWS_ENDPOINT_URL": proxy.endpoint,
                    "SPOTROUTE_CHECKPOINT_STORAGE_OPTIONS": json.dumps(options),
                }
                yield (
                    f"{server.url}/{url_of}",
                    env,
                    aws_rendezvous("us-west-2"),
                    proxy,
                    server.storage_options,
                )
        finally:
            server.stop()
        return
    server = start_gcs()
    try:
        with (
            TokenServer() as tokens,
            FreshGrantProxy(server.storage_options["endpoint_url"], "gcs", refuse_s) as proxy,
        ):
            options = {"endpoint_url": proxy.endpoint, "token": "anon"}
            env = {"SPOTROUTE_CHECKPOINT_STORAGE_OPTIONS": json.dumps(options)}
            rendezvous = replace(
                gcp_rendezvous(), storage_endpoint=proxy.endpoint, metadata_endpoint=tokens.endpoint
            )
            yield f"{server.url}/{url_of}", env, rendezvous, proxy, server.storage_options
    finally:
        server.stop()


def run_node(
    tmp_path: Path, url: str, env: dict[str, str], rendezvous: GroupRendezvous | None
) -> tuple[int, str]:
    job = JobCommand(image="", command=(sys.executable, "-c", JOB))
    fast = None if rendezvous is None else replace(rendezvous, poll_s=0.5, timeout_s=60.0)
    log = tmp_path / "node.log"
    script = render_startup_script(
        "llm",
        url,
        job,
        shutdown_when_done=False,
        rendezvous=fast,
        placement="llm-1",
        log_path=str(log),
        workdir=str(tmp_path),
    )
    node = {
        **os.environ,
        **env,
        "SPOTROUTE_NODE_ID": "node-0",
        "SPOTROUTE_NODE_ADDRESS": "10.0.0.5",
        "SPOTROUTE_BOOT_ID": "boot-0",
        "SPOTROUTE_NOTICE_SOURCE": "none",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    done = subprocess.run(["bash", "-c", script], env=node, timeout=180)
    return done.returncode, log.read_text()


@pytest.mark.parametrize("kind", ["s3", "gcs"])
def test_a_single_nodes_job_saves_once_its_fresh_grant_is_in_force(
    kind: str, tmp_path: Path
) -> None:
    with fresh_grant(kind, tmp_path) as (url, env, rendezvous, proxy, direct):
        code, log = run_node(tmp_path, url, env, rendezvous)
        refused = proxy.refused
        saved = open_location(url, direct).steps()  # read past the proxy

    assert code == 0, log
    assert refused > 0, "the storage never refused: the test proved nothing"
    assert "trying again until the deadline" in log  # the rendezvous met the refusal, not the job
    assert "spotroute-test: saved step 1" in log
    assert saved == [1]


@pytest.mark.parametrize("kind", ["s3"])
def test_without_the_rendezvous_the_job_meets_the_refusal(kind: str, tmp_path: Path) -> None:
    # Refused for longer than the job takes to start, however loaded the machine.
    with fresh_grant(kind, tmp_path, refuse_s=120.0) as (url, env, _, proxy, _):
        code, log = run_node(tmp_path, url, env, None)

    assert code != 0 and proxy.refused > 0
    assert "AccessDenied" in log or "Access Denied" in log or "403" in log, log[-2000:]
