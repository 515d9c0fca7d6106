"""The start-up script every cloud's nodes run: job env and command survive shell quoting intact."""

from __future__ import annotations

import subprocess

import pytest

from components.args import JobCommand
from components.startup import render_startup_script

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
