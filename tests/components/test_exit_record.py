"""The node's exit record (components/node_exit.py): the start-up script, run for real on a fake
node, writes what the job's exit looked like next to the checkpoints, whatever ended it."""

from __future__ import annotations

import io
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from components.args import JobCommand
from components.node_exit import (
    NODE_DIR,
    aws_exit_channel,
    azure_exit_channel,
    gcp_exit_channel,
)
from components.startup import LOG_PATH, render_startup_script

JOB = JobCommand(image="ghcr.io/acme/t:1", command=("torchrun", "train.py"))


def fake_node(tmp_path: Path, *, docker: str | None, aws_fails: bool = False) -> Path:
    """A host with fake `aws` (stores stdin under uploads/ by the object URL's name), `docker`
    (runs `docker` as the job's shell lines), `shutdown` (records), and a fixed hostname."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "uploads").mkdir()
    tools = {
        "aws": f'echo "$*" >> {tmp_path}/aws-args\n'
               + ("exit 1\n" if aws_fails else
                  f'cat > {tmp_path}/uploads/$(basename "${{@: -1}}")\n'),
        "shutdown": f'echo "shutdown $*" >> {tmp_path}/calls\n',
        "hostname": 'if [ "${1:-}" = -I ]; then echo "10.42.0.5 "; else echo node-a1; fi\n',
        "sleep": "",
    }
    if docker is not None:
        tools["docker"] = '[ "$1" = pull ] && exit 0\n' + docker
    for name, body in tools.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)
    for tool in ("bash", "cat", "cut", "date", "tr", "rm", "mkdir", "basename"):
        real = shutil.which(tool)
        if real:
            (bin_dir / tool).symlink_to(real)
    return bin_dir


def run(tmp_path: Path, bin_dir: Path, script: str) -> tuple[int, str]:
    log = tmp_path / "job.log"
    script = script.replace(LOG_PATH, str(log)).replace(NODE_DIR, str(tmp_path / "node"))
    done = subprocess.run(["/bin/bash", "-c", script], env={"PATH": str(bin_dir)},
                          capture_output=True, text=True)  # fmt: skip
    return done.returncode, log.read_text() + done.stdout + done.stderr


def script(placement: str = "llm") -> str:
    return render_startup_script("llm", "s3://ckpt/llm/", JOB, placement=placement,
                                 exit_record=aws_exit_channel("us-east-1"))  # fmt: skip


def record(tmp_path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((tmp_path / "uploads" / "exit-node-a1.json").read_text())
    return data


def test_a_job_that_crashes_leaves_its_status_and_no_marker(tmp_path: Path) -> None:
    bin_dir = fake_node(tmp_path, docker="exit 3\n")

    code, output = run(tmp_path, bin_dir, script())

    assert code == 3, output
    got = record(tmp_path)
    assert (got["status"], got["interruption_marker"]) == (3, False)
    assert (got["format"], got["node"], got["placement"], got["job"]) == (
        "spotroute-exit/1", "node-a1", "llm", "llm")
    assert got["time"].endswith("Z")
    assert (tmp_path / "aws-args").read_text().split()[-1] == "s3://ckpt/llm/exit-node-a1.json"
    assert "shutdown -h +5" in (tmp_path / "calls").read_text(), "the node still powers off"


def test_every_boot_records_the_node_before_its_job_runs(tmp_path: Path) -> None:
    # GCE runs a VM's start-up script at every boot ("Startup scripts … run … every time the VM
    # boots", https://cloud.google.com/compute/docs/instances/startup-scripts/linux), so an
    # on-demand VM restarted after host maintenance resumes the job; its boot record says so.
    bin_dir = fake_node(tmp_path, docker=(
        f'[ -s {tmp_path}/uploads/boot-node-a1.json ] || exit 9\nexit 0\n'))  # fmt: skip

    code, output = run(tmp_path, bin_dir, script("llm.2"))

    assert code == 0, output
    boot = json.loads((tmp_path / "uploads" / "boot-node-a1.json").read_text())
    assert (boot["format"], boot["node"], boot["placement"], boot["job"]) == (
        "spotroute-boot/1", "node-a1", "llm.2", "llm")
    assert boot["time"] <= record(tmp_path)["time"]
    calls = (tmp_path / "aws-args").read_text().splitlines()
    assert calls[0].split()[-1] == "s3://ckpt/llm/boot-node-a1.json"


def test_a_boot_record_that_cannot_be_written_never_stops_the_job(tmp_path: Path) -> None:
    bin_dir = fake_node(tmp_path, docker="exit 0\n", aws_fails=True)

    code, output = run(tmp_path, bin_dir, script())

    assert code == 0 and "could not write the boot record to S3" in output


def test_torchrun_reporting_a_saved_workers_75_as_1_is_told_by_the_librarys_marker(
    tmp_path: Path,
) -> None:
    # What router.checkpoint does on a notice under torchrun: the workers save, local rank 0
    # writes SPOTROUTE_NODE_DIR/interruption.json, they exit 75, torchrun exits 1.
    bin_dir = fake_node(tmp_path, docker=(
        'while [ $# -gt 0 ]; do [ "$1" = -v ] && dir="${2%%:*}"; shift; done\n'
        'echo \'{"kind": "terminate", "exit_code": 75}\' > "$dir/interruption.json"\n'
        "exit 1\n"
    ))  # fmt: skip

    code, output = run(tmp_path, bin_dir, script())

    assert code == 1, output
    assert (record(tmp_path)["status"], record(tmp_path)["interruption_marker"]) == (1, True)


def test_a_node_whose_script_fails_before_the_job_still_records_it(tmp_path: Path) -> None:
    bin_dir = fake_node(tmp_path, docker=None)  # docker missing: `set -e` stops the script

    code, output = run(tmp_path, bin_dir, script())

    assert code == 1 and "docker is not installed" in output
    assert (record(tmp_path)["status"], record(tmp_path)["interruption_marker"]) == (1, False)
    assert "shutdown -h +5" in (tmp_path / "calls").read_text()


def test_a_marker_from_an_earlier_boot_is_not_taken_for_this_one(tmp_path: Path) -> None:
    (tmp_path / "node").mkdir()
    (tmp_path / "node" / "interruption.json").write_text('{"kind": "terminate"}')
    bin_dir = fake_node(tmp_path, docker="exit 2\n")

    run(tmp_path, bin_dir, script())

    assert record(tmp_path)["interruption_marker"] is False


def test_an_exit_record_that_cannot_be_written_never_keeps_the_node_up(tmp_path: Path) -> None:
    bin_dir = fake_node(tmp_path, docker="exit 0\n", aws_fails=True)

    code, output = run(tmp_path, bin_dir, script())

    assert code == 0
    assert "could not write the exit record to S3" in output
    assert "shutdown -h +5" in (tmp_path / "calls").read_text()


def test_the_container_sees_the_node_dir_and_the_name_is_reserved() -> None:
    text = script()
    run_line = next(line for line in text.splitlines() if line.startswith("docker run"))
    assert f"-v {NODE_DIR}:{NODE_DIR}" in run_line and "-e SPOTROUTE_NODE_DIR" in run_line
    job = JobCommand(image="", command=("t",), env={"SPOTROUTE_NODE_DIR": "/tmp/x"})
    with pytest.raises(ValueError, match="SPOTROUTE_NODE_DIR is set by spotroute"):
        render_startup_script("llm", "s3://b/", job)


# --- the GCP and Azure writers: python3's standard library and the node's own token --------


class _Reply:
    def __init__(self, body: object) -> None:
        self.body = json.dumps(body).encode()

    def read(self, *_args: object) -> bytes:
        return self.body


def run_writer(command: str, url: str, answers: dict[str, object], stdin: str) -> list[Any]:
    """Run a channel's python3 program on `url` with urlopen answering `answers` by URL."""
    argv = [*shlex.split(command), url]
    assert argv[:2] == ["python3", "-c"]
    requests: list[Any] = []

    def urlopen(request: Any, timeout: float) -> _Reply:
        requests.append(request)
        return _Reply(answers.get(request.full_url, {}))

    stdin_buffer = io.TextIOWrapper(io.BytesIO(stdin.encode()))
    with (
        mock.patch("urllib.request.urlopen", urlopen),
        mock.patch.object(sys, "argv", ["-c", *argv[3:]]),
        mock.patch.object(sys, "stdin", stdin_buffer),
    ):
        exec(compile(argv[2], "<writer>", "exec"), {"__name__": "__main__"})
    return requests


def test_gcp_writer_uploads_with_the_service_accounts_metadata_token() -> None:
    token_url = (
        "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
    )
    requests = run_writer(
        gcp_exit_channel().command, "gs://acme-ckpt/teams/ml/llm/exit-node-a1.json",
        {token_url: {"access_token": "ya29.tok", "expires_in": 3599}}, '{"status": 1}',
    )  # fmt: skip
    token, upload = requests
    assert token.get_header("Metadata-flavor") == "Google"
    # Cloud Storage JSON API simple upload (https://cloud.google.com/storage/docs/
    # uploading-objects#uploading-an-object): POST …/upload/storage/v1/b/BUCKET/o?uploadType=media
    assert upload.full_url == ("https://storage.googleapis.com/upload/storage/v1/b/acme-ckpt/o"
                               "?uploadType=media&name=teams%2Fml%2Fllm%2Fexit-node-a1.json")
    assert upload.get_method() == "POST" and upload.data == b'{"status": 1}'
    assert upload.get_header("Authorization") == "Bearer ya29.tok"


def test_azure_writer_puts_the_blob_with_the_job_identitys_token() -> None:
    client_id = "22222222-2222-4222-8222-222222222222"
    blob = "https://srllm0a1b2c3d.blob.core.windows.net/checkpoints/llm/exit-node-a1.json"
    token_url = (
        "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01"
        f"&resource=https%3A%2F%2Fstorage.azure.com%2F&client_id={client_id}"
    )
    requests = run_writer(azure_exit_channel(client_id).command, blob,
                          {token_url: {"access_token": "eyJ.tok"}}, '{"status": 75}')
    token, put = requests
    assert token.get_header("Metadata") == "true"
    # Put Blob (https://learn.microsoft.com/rest/api/storageservices/put-blob): a block blob,
    # with an Entra ID bearer token and an x-ms-version that accepts it.
    assert (put.full_url, put.get_method(), put.data) == (blob, "PUT", b'{"status": 75}')
    assert put.get_header("X-ms-blob-type") == "BlockBlob"
    assert put.get_header("Authorization") == "Bearer eyJ.tok"
