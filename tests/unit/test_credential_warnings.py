"""Issue 32 item 7: a credential in plain `run.env` is pointed out by its name or its value.

The token-shaped values below are built from pieces, in the formats the vendors document (cited
in router/core/job/credentials.py), so that no real-looking secret sits in the repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from router.core.job.credentials import credential_reason, credential_shape
from tests.unit.cli_harness import route

FILLER = "a1B2c3D4e5F6g7H8i9J0" * 5  # letters and digits, long enough for every shape

# (what it is, value) — each in a documented credential format.
SHAPED = [
    ("postgres URL with a password", "postgres://admin:pw@db.internal:5432/app"),
    ("redis URL with a password", "redis://:hunter22@cache:6379/0"),
    ("AWS key id (AWS's documented example)", "AKIA" + "IOSFODNN7EXAMPLE"),
    ("AWS temporary key id", "ASIA" + "Y34FZKBOKMUTVV7A"),
    ("GitHub classic PAT", "ghp_" + FILLER[:36]),
    ("GitHub fine-grained PAT", "github_pat_" + FILLER[:22] + "_" + FILLER[:59]),
    ("GitLab PAT", "glpat-" + FILLER[:20]),
    ("Slack bot token", "xoxb-" + "123456789012-" + FILLER[:24]),
    ("Slack user token", "xoxp-" + "123456789012-" + FILLER[:24]),
    ("Slack app token", "xapp-1-" + FILLER[:30]),
    ("Slack webhook", "https://hooks.slack.com/services/T0000/B0000/" + FILLER[:24]),
    ("OpenAI project key", "sk-proj-" + FILLER[:48]),
    ("Anthropic key", "sk-ant-api03-" + FILLER[:80]),
    ("Stripe live key", "sk_live_" + FILLER[:24]),
    ("Google API key", "AIza" + FILLER[:35]),
    ("Hugging Face token", "hf_" + FILLER[:34]),
    ("npm token", "npm_" + FILLER[:36]),
    ("PEM private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END"),
    ("PKCS#8 private key", "-----BEGIN PRIVATE KEY-----MIIEvQ…"),
    ("service-account JSON", json.dumps({"type": "service_account", "private_key": "x"})),
    ("Azure connection string",
     "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + FILLER[:44] + "=="),
    ("Azure SAS URL", "https://acct.blob.core.windows.net/c?sv=2022&sp=r&sig=" + FILLER[:40]),
    ("JWT", "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + FILLER[:43]),
]  # fmt: skip

# Ordinary values jobs put in their environment: none of them is a credential.
BENIGN = [
    "s3://acme-datasets/llm-corpus/", "https://example.com:8443/path?x=1",
    "postgres://db.internal:5432/app", "postgres://admin@db.internal/app",
    "postgres://app:${DB_PASSWORD}@db/app", "redis://redis:6379/0",
    "mongodb://mongo:27017/?replicaSet=rs0", "user@example.com", "git@github.com:org/repo.git",
    "ssh://git@github.com/org/repo", "sk-learn", "scikit-learn==1.5.2", "skip-connections",
    "3e-4", "AKIA", "ghp", "AIza", "xoxo", "gpt-4o-mini", "meta-llama/Llama-3.1-8B",
    "/home/ubuntu/.ssh/id_ed25519", "true", "0.0.0.0:8080", "http://localhost:6006",
    "--lr 3e-4 --batch-size 32", "https://huggingface.co/datasets/acme/corpus",
    "hooks.slack.com", "-----BEGIN CERTIFICATE-----MIIB", "eyJ", "us-east-1", "A100-80GB:8",
    "INFO", "offline", "https://example.com:8443?notify=ops@example.com",
    "550e8400-e29b-41d4-a716-446655440000",
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "abcdefghijklmnopqrstuvwxyz0123456789", "ghcr.io/acme/llm-trainer:1.4",
]  # fmt: skip

# Named like a credential by a common convention (the issue's list and the old ones).
CREDENTIAL_NAMES = ["MYSQL_PWD", "SSH_KEY", "KAGGLE_KEY", "SLACK_WEBHOOK", "SLACK_WEBHOOK_URL",
                    "GOOGLE_APPLICATION_CREDENTIALS_JSON", "GITHUB_PAT", "DB_PASSWORD",
                    "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "AZURE_CLIENT_SECRET"]  # fmt: skip
ORDINARY_NAMES = ["AWS_ACCESS_KEY_ID", "GOOGLE_APPLICATION_CREDENTIALS", "HF_TOKEN_FILE",
                  "SORT_KEY", "TOKENIZERS_PARALLELISM", "PWD", "OLDPWD", "EPOCHS",
                  "WANDB_PROJECT", "DATABASE_URL", "NCCL_DEBUG"]  # fmt: skip


@pytest.mark.parametrize(("what", "value"), SHAPED, ids=[w for w, _ in SHAPED])
def test_a_credential_shaped_value_is_recognised_whatever_its_name(what: str, value: str) -> None:
    assert credential_shape(value) is not None, what
    reason = credential_reason("SETTING", value)
    assert reason is not None and reason.startswith("its value has the shape of")
    assert value not in reason


@pytest.mark.parametrize("value", BENIGN)
def test_an_ordinary_value_is_not_taken_for_a_credential(value: str) -> None:
    assert credential_shape(value) is None
    assert credential_reason("SETTING", value) is None


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_a_common_credential_name_is_recognised(name: str) -> None:
    assert credential_reason(name, "x") == "its name says so"


@pytest.mark.parametrize("name", ORDINARY_NAMES)
def test_an_ordinary_name_with_an_ordinary_value_is_not(name: str) -> None:
    assert credential_reason(name, "x") is None


def test_a_key_named_by_its_path_is_not_a_key_in_clear() -> None:
    assert credential_reason("SSH_KEY", "~/.ssh/id_ed25519") is None
    assert credential_reason("GOOGLE_APPLICATION_CREDENTIALS", "/secrets/sa.json") is None
    # … but the key file's content under that name is.
    content = json.dumps({"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----"})
    assert credential_reason("GOOGLE_APPLICATION_CREDENTIALS", content) is not None


ISSUE_ENV = {
    "MYSQL_PWD": "s3cr3t-mysql",
    "DATABASE_URL": "postgres://admin:pw-in-url@db.internal/app",
    "SSH_KEY": "not-a-path-ssh-key-material",
    "KAGGLE_KEY": "0123456789abcdef0123456789abcdef",
    "SLACK_WEBHOOK": "https://hooks.slack.com/services/T0000/B0000/" + FILLER[:24],
    "GOOGLE_APPLICATION_CREDENTIALS_JSON": '{"type": "service_account", "private_key": "k"}',
    "DEPLOY_ID": "AKIA" + "IOSFODNN7EXAMPLE",
    "EPOCHS": "3",
    "WANDB_PROJECT": "llm-finetune",
}


def test_route_validate_warns_of_each_without_echoing_a_value(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        json.dumps(
            {
                "name": "creds",
                "resources": {"accelerators": "T4:1", "clouds": ["local"]},
                "duration_hours": 1,
                "run": {"command": ["python", "train.py"], "env": ISSUE_ENV},
            }
        ),
        encoding="utf-8",
    )

    run = route(monkeypatch, capsys, "validate", job)

    assert run.code == 0, run.err
    warned = [line for line in run.err_lines if line.startswith("warning: ")]
    fields = [w.split(": ")[2] for w in warned]
    assert sorted(fields) == sorted(f"run.env.{n}" for n in ISSUE_ENV if n not in
                                    ("EPOCHS", "WANDB_PROJECT"))  # fmt: skip
    assert all("stored in clear" in w and "run.secrets" in w for w in warned)
    # The job file's path is in each line; the temporary folder's name may hold a value ("3").
    shown = (run.err + run.out).replace(str(job), "<job.yaml>")
    for name, value in ISSUE_ENV.items():
        assert value not in shown, name
    assert "pw-in-url" not in run.err
