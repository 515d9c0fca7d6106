"""Secret env in job.yaml: `run.secrets` and SkyPilot's empty-value convention, validation, the
values read from the deploy's environment, and the stack config that keeps them out of clear."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.config.datafiles import load_egress, load_interruption_model, load_storage_prices
from router.config.job_file import load_job, validate_job_file
from router.contract.stack_config import SECRET_KEYS, serialise
from router.core.errors import BadInput
from router.core.job.problems import secret_values
from router.core.job.schema import job_schema
from router.core.org import OrgConfig
from router.core.planner import plan
from router.core.stackconfig import config_diff, stack_config
from tests.unit.planner_factories import NOW, job, offer

TOKEN = "hf_unit-plaintext-77c1"


def job_file(tmp_path: Path, run: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: train\nresources: {accelerators: T4:1}\nduration_hours: 1\n"
        f"run:\n  command: [python, train.py]\n{run}"
    )
    return path


def test_secrets_list_and_empty_env_entries_are_secret_and_leave_the_plain_env(
    tmp_path: Path,
) -> None:
    path = job_file(
        tmp_path,
        "  env: {EPOCHS: 3, HF_TOKEN: , EMPTY: '', WANDB_API_KEY: abc}\n"
        "  secrets: [WANDB_API_KEY, S3_KEY]\n",
    )
    run = load_job(path).run

    assert run.secrets == ("WANDB_API_KEY", "S3_KEY", "HF_TOKEN", "EMPTY")
    assert run.plain_env == {"EPOCHS": "3"}
    assert run.secrets_from_environment == ("S3_KEY", "HF_TOKEN", "EMPTY")


@pytest.mark.parametrize(
    ("run", "line"),
    [
        (
            "  secrets: [HF-TOKEN]\n",
            "run.secrets: 'HF-TOKEN' is not a valid environment variable name — use letters,"
            " digits and '_', not starting with a digit",
        ),
        (
            "  secrets: SPOTROUTE_JOB_ID\n",
            "run.secrets: SPOTROUTE_JOB_ID is set by spotroute on every node — remove it",
        ),
        (
            "  env: {SPOTROUTE_CHECKPOINT_URL: }\n",
            "run.env.SPOTROUTE_CHECKPOINT_URL: SPOTROUTE_CHECKPOINT_URL is set by spotroute on"
            " every node — remove it",
        ),
        ("  secrets: {HF_TOKEN: x}\n", "run.secrets: expected a list, got a mapping"),
    ],
)
def test_bad_secret_names_are_one_line_naming_the_field(
    tmp_path: Path, run: str, line: str
) -> None:
    problems = validate_job_file(job_file(tmp_path, run))
    assert len(problems) == 1 and problems[0].startswith(f"{tmp_path / 'job.yaml'}: {line}")


def test_validation_needs_no_secret_value_but_deploy_does(tmp_path: Path) -> None:
    path = job_file(tmp_path, "  env: {HF_TOKEN: }\n")
    assert validate_job_file(path) == []

    with pytest.raises(BadInput) as refused:
        secret_values(load_job(path), {}, str(path))
    assert refused.value.exit_code == 2
    assert str(refused.value) == (
        f"{path}: run.secrets: HF_TOKEN has no value in the job file and is not set in the"
        " environment — export HF_TOKEN=... before `route deploy` (it is stored as a secret),"
        " or give it a value in run.env"
    )
    with pytest.raises(BadInput, match="HF_TOKEN has no value in the job file and is empty"):
        secret_values(load_job(path), {"HF_TOKEN": ""}, str(path))
    assert secret_values(load_job(path), {"HF_TOKEN": TOKEN}, str(path)) == {"HF_TOKEN": TOKEN}


def test_a_value_in_the_job_file_wins_over_the_environment(tmp_path: Path) -> None:
    path = job_file(tmp_path, "  env: {KEY: from-file}\n  secrets: [KEY]\n")
    assert secret_values(load_job(path), {"KEY": "from-env"}, str(path)) == {"KEY": "from-file"}


def _placement() -> object:
    result = plan(
        job(),
        [offer()],
        org=OrgConfig(),
        egress=load_egress(),
        now=NOW,
        interruption=load_interruption_model(),
        storage=load_storage_prices(),
    )
    return result.placements[0]


def test_stack_config_keeps_secret_values_in_the_secret_key_only() -> None:
    secret_job = job(run={"command": ["python", "t.py"], "env": {"A": "1", "HF": None}})
    config = stack_config(secret_job, _placement(), secret_env={"HF": TOKEN})  # type: ignore[arg-type]

    assert SECRET_KEYS == ("secretEnv",)
    assert config["secretEnv"] == {"HF": TOKEN} and config["secretEnvNames"] == ["HF"]
    assert config["job"]["env"] == {"A": "1"}
    assert TOKEN not in repr({k: v for k, v in config.items() if k != "secretEnv"})
    assert serialise(config) == config
    # The diff a user sees: the names, never a value (old stack files hold ciphertext only).
    lines = config_diff({"secretEnv": {"secure": "v1:abc"}}, config)
    assert "+ spotroute:secretEnvNames: ['HF']" in lines
    assert TOKEN not in "\n".join(lines) and not [ln for ln in lines if "secretEnv:" in ln]
    with pytest.raises(ValueError, match="secret_env must hold exactly"):
        stack_config(secret_job, _placement())  # type: ignore[arg-type]


def test_schema_documents_secrets_and_empty_env_values() -> None:
    run = job_schema()["$defs"]["Run"]["properties"]
    assert "secrets" in run and "environment of `route deploy`" in run["secrets"]["description"]
    env_values = run["env"]["additionalProperties"]["anyOf"]
    assert {"type": "null"} in env_values
