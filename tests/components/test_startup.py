"""The start-up script every cloud's nodes run: job env and command survive shell quoting intact."""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from components.args import JobCommand
from components.rendezvous import GROUP_ENV, aws_rendezvous, gcp_rendezvous
from components.startup import (
    LOG_PATH,
    NO_SECRET_STORE_YET,
    SECRET_FETCH_TRIES,
    SHUTDOWN_GRACE_MIN,
    aws_secret_channel,
    azure_secret_channel,
    gcp_secret_channel,
    render_startup_script,
)

HOSTILE = "x'; touch /tmp/spotroute-pwned; echo '$(id) `id` \"$HOME\" \\ \n ;|&"


def run_exports(script: str, *names: str) -> list[str]:
    """Values bash sees for `names` after running the script's export lines (nothing else)."""
    # Sliced as text, not lines: a quoted value may itself contain newlines.
    exports = script[script.index("export ") : script.index("\nstatus=0\n")]
    printing = "; ".join(f'printf "%s\\0" "${name}"' for name in names)
    result = subprocess.run(
        ["bash", "-c", f"{exports}\n{printing}"], capture_output=True, text=True, check=True
    )
    return result.stdout.split("\0")[:-1]


def test_env_values_reach_the_job_verbatim_even_when_hostile() -> None:
    job = JobCommand(image="ghcr.io/acme/t:1", command=("python", "t.py"), env={"NOTE": HOSTILE})

    script = render_startup_script("llm", "s3://bucket/llm/", job)

    assert run_exports(script, "NOTE", "SPOTROUTE_JOB_ID", "SPOTROUTE_CHECKPOINT_URL") == [
        HOSTILE,
        "llm",
        "s3://bucket/llm/",
    ]


def test_command_words_stay_single_arguments() -> None:
    job = JobCommand(image="", command=("printf", "%s|", "two words", HOSTILE))
    script = render_startup_script("llm", "s3://bucket/llm/", job)
    command = script[script.index("\nprintf ") + 1 : script.index(" || status=$?")]

    result = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        check=True,
    )

    assert result.stdout == f"two words|{HOSTILE}|"


def test_script_is_valid_bash_for_container_and_bare_command_jobs() -> None:
    for job in (
        JobCommand(image="ghcr.io/acme/t:1", command=(), env={"A": "1"}),
        JobCommand(image="", command=("python", "train.py")),
    ):
        script = render_startup_script("llm", "gs://bucket/llm/", job)
        subprocess.run(["bash", "-n"], input=script, text=True, check=True)


def test_container_jobs_get_all_gpus_and_every_env_variable() -> None:
    job = JobCommand(image="ghcr.io/acme/t:1", command=("python", "t.py"), env={"EPOCHS": "3"})

    script = render_startup_script("llm", "s3://bucket/llm/", job)

    run_line = next(line for line in script.splitlines() if line.startswith("docker run"))
    assert "--gpus all" in run_line
    for name in ("SPOTROUTE_JOB_ID", "SPOTROUTE_CHECKPOINT_URL", "EPOCHS"):
        assert f"-e {name} " in run_line


def test_node_powers_off_after_the_job_unless_asked_not_to() -> None:
    job = JobCommand(image="ghcr.io/acme/t:1", command=())

    assert "shutdown -h" in render_startup_script("llm", "s3://b/llm/", job)
    assert "shutdown" not in render_startup_script(
        "llm", "s3://b/llm/", job, shutdown_when_done=False
    )


@pytest.mark.parametrize(
    ("job", "message"),
    [
        (JobCommand(image="", command=()), "nothing to start"),
        (JobCommand(image="i", command=(), env={"BAD-NAME": "1"}), "BAD-NAME"),
        (JobCommand(image="i", command=(), env={"SPOTROUTE_JOB_ID": "x"}), "SPOTROUTE_JOB_ID"),
    ],
)
def test_unrunnable_jobs_are_refused(job: JobCommand, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_startup_script("llm", "s3://b/llm/", job)


def run_script_without_docker(tmp_path: Path, script: str) -> tuple[int, str]:
    """Run the script as an unprivileged user on a host with no docker; log and `shutdown` faked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fake = bin_dir / "shutdown"
    fake.write_text(f'#!/bin/sh\necho "shutdown $*" >> {calls}\n')
    fake.chmod(0o755)
    for tool in ("hostname", "cut", "sleep"):  # the only host tools the script reaches for
        real = shutil.which(tool)
        if real:
            (bin_dir / tool).symlink_to(real)
    log = tmp_path / "job.log"
    script = script.replace(LOG_PATH, str(log))
    result = subprocess.run(
        ["/bin/bash", "-c", script], env={"PATH": str(bin_dir)}, capture_output=True, text=True
    )
    return result.returncode, (calls.read_text() if calls.exists() else "") + log.read_text()


def test_node_powers_off_even_when_the_script_fails_before_the_job(tmp_path: Path) -> None:
    job = JobCommand(image="ghcr.io/acme/t:1", command=("python", "t.py"))

    code, output = run_script_without_docker(tmp_path, render_startup_script("llm", "s3://b/", job))

    assert code == 1
    assert "docker is not installed" in output
    assert f"shutdown -h +{SHUTDOWN_GRACE_MIN}" in output
    assert "job exited with status 1" in output


def test_cloud_specific_finish_lines_run_from_the_exit_trap(tmp_path: Path) -> None:
    job = JobCommand(image="", command=("false",))
    script = render_startup_script(
        "llm", "s3://b/", job, finish=('echo "deleting this VM after status $code"',)
    )

    code, output = run_script_without_docker(tmp_path, script)

    assert code == 1
    assert "deleting this VM after status 1" in output


def test_containers_share_host_ipc_so_dataloaders_and_nccl_get_shared_memory() -> None:
    job = JobCommand(image="ghcr.io/acme/t:1", command=("python", "t.py"))

    run_line = next(
        line
        for line in render_startup_script("llm", "s3://b/", job).splitlines()
        if line.startswith("docker run")
    )

    assert "--ipc=host" in run_line


def test_nodes_get_the_group_size_and_a_single_node_its_rank_and_address() -> None:
    job = JobCommand(image="ghcr.io/acme/t:1", command=())

    single = render_startup_script("llm", "s3://b/", job)
    multi = render_startup_script("llm", "s3://b/", job, node_count=4,
                                  rendezvous=aws_rendezvous("us-east-1"))

    assert run_exports(multi, "SPOTROUTE_NODE_COUNT", "SKYPILOT_NUM_NODES") == ["4", "4"]
    assert run_exports(single, "SPOTROUTE_NODE_COUNT", "SKYPILOT_NUM_NODES") == ["1", "1"]
    # A group's rank, peers and master come from its rendezvous (tests/components/
    # test_rendezvous.py runs it) and reach the container by name; a group of one's too.
    for script in (single, multi):
        run_line = next(line.strip() for line in script.splitlines()
                        if line.strip().startswith("docker run"))
        for name in GROUP_ENV:
            assert f"-e {name} " in run_line


def test_a_single_node_is_a_group_of_one_rank_0_with_itself_as_master(tmp_path: Path) -> None:
    # examples/distributed at node_count 1 ran `torchrun --nnodes "$NNODES" --node-rank
    # "$NODE_RANK"` with both empty (issue 32, item 9). Any node count gets every group variable.
    dump = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))"
    out = tmp_path / "env.json"
    job = JobCommand(image="", command=("python3", "-c", dump, str(out)))
    script = render_startup_script("llm", "s3://b/llm/", job, shutdown_when_done=False,
                                   log_path=str(tmp_path / "log"), workdir=str(tmp_path))
    node = {"SPOTROUTE_NODE_ID": "ip-10-0-0-5", "SPOTROUTE_NODE_ADDRESS": "10.0.0.5"}
    env = {k: v for k, v in os.environ.items() if k not in GROUP_ENV}

    subprocess.run(["bash", "-c", script], env={**env, **node}, check=True)

    seen = json.loads(out.read_text())
    assert {name: seen.get(name) for name in GROUP_ENV} == {
        "SPOTROUTE_NODE_ID": "ip-10-0-0-5", "SPOTROUTE_NODE_ADDRESS": "10.0.0.5",
        "SPOTROUTE_NODE_RANK": "0", "SPOTROUTE_GROUP_GENERATION": "ip-10-0-0-5",
        "SPOTROUTE_RDZV_ENDPOINT": "10.0.0.5:29500", "NODE_RANK": "0", "NNODES": "1",
        "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29500", "SKYPILOT_NODE_RANK": "0",
        "SKYPILOT_NODE_IPS": "10.0.0.5"}  # fmt: skip


def test_a_group_without_a_rendezvous_is_refused_and_its_variables_are_reserved() -> None:
    job = JobCommand(image="ghcr.io/acme/t:1", command=())
    with pytest.raises(ValueError, match="node_count: 2 nodes need a rendezvous"):
        render_startup_script("llm", "s3://b/", job, node_count=2)
    for name in ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "NNODES", "SPOTROUTE_NODE_ID"):
        with pytest.raises(ValueError, match=f"job.env: {name} is set by spotroute"):
            render_startup_script("llm", "s3://b/", JobCommand(image="i", command=(),
                                                               env={name: "1"}))


def test_a_rendezvous_cannot_use_another_clouds_storage() -> None:
    job = JobCommand(image="i", command=())
    with pytest.raises(ValueError, match="a gcs rendezvous cannot use checkpoint URL 's3://b/'"):
        render_startup_script("llm", "s3://b/", job, node_count=2, rendezvous=gcp_rendezvous(),
                              placement="llm")


def test_checkpoint_interval_reaches_the_job_in_seconds_and_is_reserved() -> None:
    job = JobCommand(image="", command=("python", "t.py"), checkpoint_interval_s=1800)

    script = render_startup_script("llm", "s3://bucket/llm/", job)

    assert run_exports(script, "SPOTROUTE_CHECKPOINT_INTERVAL") == ["1800"]
    unset = render_startup_script("llm", "s3://b/", JobCommand(image="", command=("t",)))
    assert "SPOTROUTE_CHECKPOINT_INTERVAL" not in unset
    with pytest.raises(ValueError, match="SPOTROUTE_CHECKPOINT_INTERVAL is set by spotroute"):
        render_startup_script(
            "llm",
            "s3://b/",
            JobCommand(image="", command=("t",), env={"SPOTROUTE_CHECKPOINT_INTERVAL": "1h"}),
        )


# --- secret env --------------------------------------------------------------------------------


def fake_node(tmp_path: Path, store: str) -> tuple[Path, Path]:
    """A node with a fake `aws` CLI (prints `store`, records its arguments) and a fake `docker`
    that records, for each `-e NAME` it is given, the value the container would see."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "store.json").write_text(store)
    seen = tmp_path / "container-env"
    aws = bin_dir / "aws"
    aws.write_text(f'#!/bin/bash\necho "$*" >> {tmp_path}/aws-args\ncat {tmp_path}/store.json\n')
    docker = bin_dir / "docker"
    docker.write_text(
        "#!/bin/bash\n"
        '[ "$1" = pull ] && exit 0\n'
        'while [ $# -gt 0 ]; do if [ "$1" = -e ]; then shift; '
        f'printf "%s=%s\\0" "$1" "${{!1}}" >> {seen}; fi; shift; done\n'
    )
    shutdown = bin_dir / "shutdown"
    shutdown.write_text("#!/bin/sh\n")
    for fake in (aws, docker, shutdown):
        fake.chmod(0o755)
    for tool in ("hostname", "cut", "cat", "bash"):
        real = shutil.which(tool)
        if real:
            (bin_dir / tool).symlink_to(real)
    (bin_dir / "sleep").symlink_to(shutil.which("true") or "/bin/true")  # retries without waiting
    (bin_dir / "python3").symlink_to(Path(sys.executable).resolve())
    return bin_dir, seen


def run_node(tmp_path: Path, script: str, bin_dir: Path) -> tuple[int, str]:
    log = tmp_path / "job.log"
    result = subprocess.run(
        ["/bin/bash", "-c", script.replace(LOG_PATH, str(log))],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
    )
    return result.returncode, log.read_text() + result.stdout + result.stderr


SECRET_JOB = JobCommand(
    image="ghcr.io/acme/t:1", command=("python", "t.py"), env={"EPOCHS": "3"},
    secret_names=("HF_TOKEN", "OTHER"),
)  # fmt: skip


def test_secret_env_is_read_at_boot_and_reaches_the_container_by_name_only(
    tmp_path: Path,
) -> None:
    store = json.dumps({"HF_TOKEN": HOSTILE, "OTHER": "plain-secret", "UNLISTED": "x"})
    bin_dir, seen = fake_node(tmp_path, store)
    channel = aws_secret_channel("/spotroute/llm/secret-env:3", "us-east-1")
    script = render_startup_script(
        "llm", "s3://b/", SECRET_JOB, shutdown_when_done=False, secrets=channel
    )

    code, output = run_node(tmp_path, script, bin_dir)

    assert code == 0, output
    env = dict(item.split("=", 1) for item in seen.read_text().split("\0")[:-1])
    assert env["HF_TOKEN"] == HOSTILE and env["OTHER"] == "plain-secret"
    assert env["EPOCHS"] == "3" and "UNLISTED" not in env
    assert (tmp_path / "aws-args").read_text().split() == [
        "ssm", "get-parameter", "--with-decryption", "--output", "text", "--query",
        "Parameter.Value", "--region", "us-east-1", "--name", "/spotroute/llm/secret-env:3",
    ]  # fmt: skip
    for text in (script, output):
        assert "plain-secret" not in text and "touch /tmp/spotroute-pwned" not in text
    assert not Path("/tmp/spotroute-pwned").exists()


def test_a_node_that_cannot_read_its_secrets_stops_before_the_job(tmp_path: Path) -> None:
    bin_dir, seen = fake_node(tmp_path, json.dumps({"HF_TOKEN": "only-one"}))
    script = render_startup_script(
        "llm", "s3://b/", SECRET_JOB, secrets=aws_secret_channel("/p", "us-east-1")
    )

    code, output = run_node(tmp_path, script, bin_dir)

    assert code == 1
    assert "the secret store holds no value for OTHER" in output
    assert "could not read the job secrets from SSM parameter /p" in output
    assert (tmp_path / "aws-args").read_text().count("get-parameter") == SECRET_FETCH_TRIES
    assert "only-one" not in output and not seen.exists(), "the job never started"


def test_a_job_with_secrets_needs_a_channel_and_free_names() -> None:
    with pytest.raises(ValueError, match="no secret store"):
        render_startup_script("llm", "s3://b/", SECRET_JOB)
    for bad in ("SPOTROUTE_JOB_ID", "EPOCHS", "1X"):
        job = JobCommand(image="", command=("t",), env={"EPOCHS": "3"}, secret_names=(bad,))
        with pytest.raises(ValueError, match="not a free variable name"):
            render_startup_script("llm", "s3://b/", job, secrets=NO_SECRET_STORE_YET)


class _Reply:
    def __init__(self, body: object) -> None:
        self.body = json.dumps(body).encode()

    def read(self, *_args: object) -> bytes:
        return self.body


def run_fetch(channel_command: str, answers: dict[str, object]) -> tuple[str, list[Any]]:
    """Run a channel's python3 program with urlopen answering `answers` (URL → JSON body)."""
    argv = shlex.split(channel_command)
    assert argv[:2] == ["python3", "-c"]
    requests: list[Any] = []

    def urlopen(request: Any, timeout: float) -> _Reply:
        requests.append(request)
        return _Reply(answers[request.full_url])

    out = io.StringIO()
    with (
        mock.patch("urllib.request.urlopen", urlopen),
        mock.patch.object(sys, "argv", ["-c", *argv[3:]]),
        mock.patch.object(sys, "stdout", out),
    ):
        exec(compile(argv[2], "<channel>", "exec"), {"__name__": "__main__"})
    return out.getvalue(), requests


def test_gcp_channel_reads_the_version_with_the_metadata_token() -> None:
    version = "projects/123/secrets/llm-secret-env/versions/4"
    store = json.dumps({"HF_TOKEN": HOSTILE})
    token_url = (
        "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
    )
    access_url = f"https://secretmanager.googleapis.com/v1/{version}:access"
    printed, requests = run_fetch(
        gcp_secret_channel(version).command,
        {
            token_url: {"access_token": "ya29.tok", "expires_in": 3599, "token_type": "Bearer"},
            access_url: {
                "name": version,
                "payload": {"data": base64.b64encode(store.encode()).decode()},
            },
        },
    )
    assert json.loads(printed) == {"HF_TOKEN": HOSTILE}
    assert requests[0].get_header("Metadata-flavor") == "Google"
    assert requests[1].get_header("Authorization") == "Bearer ya29.tok"


def test_azure_channel_reads_the_secret_with_the_managed_identity() -> None:
    url = "https://srllm0a1b2c3d.vault.azure.net/secrets/secret-env"
    client_id = "22222222-2222-4222-8222-222222222222"
    token_url = (
        "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01"
        f"&resource=https%3A%2F%2Fvault.azure.net&client_id={client_id}"
    )
    printed, requests = run_fetch(
        azure_secret_channel(url, client_id).command,
        {
            token_url: {"access_token": "eyJ.tok", "resource": "https://vault.azure.net"},
            f"{url}?api-version=7.4": {"value": json.dumps({"HF_TOKEN": HOSTILE}), "id": url},
        },
    )
    assert json.loads(printed) == {"HF_TOKEN": HOSTILE}
    assert requests[0].get_header("Metadata") == "true"
    assert requests[1].get_header("Authorization") == "Bearer eyJ.tok"


FAKE_TORCHRUN = """#!/bin/sh
printf '%s\\n' "$@" > "$(dirname "$0")/args-$SPOTROUTE_NODE_ID"
"""


def _documented_group_command() -> list[str]:
    """The `run:` block docs/components.md gives for torchrun in a group (issue 29)."""
    import yaml

    text = (Path(__file__).resolve().parents[2] / "docs" / "components.md").read_text()
    after = text[text.index("**`run.command` runs without a shell.**"):]
    block = after[after.index("```yaml\n") + len("```yaml\n"):]
    run: dict[str, list[str]] = yaml.safe_load(block[: block.index("```")])["run"]
    return run["command"]


@pytest.mark.parametrize("nodes", [1, 2])
def test_the_documented_group_command_gets_its_variables_expanded(
    tmp_path: Path, nodes: int
) -> None:
    from components.local_node import node_env, node_script
    from components.local_nodes import free_port

    command = _documented_group_command()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "torchrun").write_text(FAKE_TORCHRUN)
    (bin_dir / "torchrun").chmod(0o755)
    port = free_port()
    props = {"job_name": "dist", "checkpoint_url": f"file://{tmp_path}/ckpt/",
             "command": command, "env": {}, "placement": "dist"}  # fmt: skip
    procs = []
    for node in range(nodes):
        node_dir = tmp_path / f"node-{node}"
        node_dir.mkdir()
        env = node_env(props, node=node, nodes=nodes, node_dir=node_dir)
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
        script = node_script(props, nodes=nodes, node_dir=node_dir, group_port=port)
        procs.append(subprocess.Popen(["bash", "-c", script], env=env))
    assert [proc.wait(timeout=60) for proc in procs] == [0] * nodes

    for node in range(nodes):
        args = (bin_dir / f"args-node-{node}").read_text().splitlines()
        assert args == [f"--nnodes={nodes}", f"--node-rank={node}", "--master-addr=127.0.0.1",
                        f"--master-port={port}", "--nproc-per-node=8", "train.py"]
    # The same words without the shell: the variables would arrive as literal text.
    assert "$NNODES" in command[-1] and command[:2] == ["bash", "-c"]
