"""The start-up script every cloud's nodes run: job env and command survive shell quoting intact."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from components.args import JobCommand
from components.startup import LOG_PATH, SHUTDOWN_GRACE_MIN, render_startup_script

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
    multi = render_startup_script("llm", "s3://b/", job, node_count=4)

    assert run_exports(multi, "SPOTROUTE_NODE_COUNT", "SKYPILOT_NUM_NODES") == ["4", "4"]
    assert "SKYPILOT_NODE_RANK" not in multi
    assert run_exports(single, "SKYPILOT_NODE_RANK") == ["0"]
    assert "-e SKYPILOT_NODE_IPS" in single


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
