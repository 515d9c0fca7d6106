"""Secret env through the real CLI and engine on the local target: the value reaches the job's
process and nothing else — not the stack file, the state, the diff, the review or any log.

One test on purpose: every engine call costs seconds, and each step starts from the previous one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from tests.engine.engine_cli import Result, Route, group_pid, no_traceback, wait_for

JOB = "secrets"
HF_TOKEN = "hf_QX7-plaintext-1b2c3d"  # from the environment of `route deploy`
INLINE = "inline-plaintext-9f8e7d"  # given in the job file, listed in run.secrets
ROTATED = "hf_QX7-rotated-4e5f6a"
PLAINTEXTS = (HF_TOKEN, INLINE, ROTATED)
# The job proves it got the values without writing them anywhere: their SHA-256.
COMMAND = (
    'd="$SPOTROUTE_CHECKPOINT_DIR"; '
    'printf %s "$HF_TOKEN" | sha256sum | cut -c1-64 > "$d/hf.sha"; '
    'printf %s "$INLINE_KEY" | sha256sum | cut -c1-64 > "$d/inline.sha"; '
    "while true; do sleep 1; done"
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_job(route: Route) -> Path:
    doc = {
        "name": JOB,
        "resources": {"accelerators": "T4:1", "clouds": ["local"]},
        "market": "on-demand",
        "duration_hours": 0.1,
        "checkpoint": {"interval": "1m", "url": "auto"},
        "run": {
            "command": ["/bin/sh", "-c", COMMAND],
            # SkyPilot's convention: no value = take it from my environment at deploy time.
            "env": {"EPOCHS": "1", "HF_TOKEN": None, "INLINE_KEY": INLINE},
            "secrets": ["INLINE_KEY"],
        },
        "labels": {"team": "ml-platform", "cost-center": "4711"},
    }
    path = route.project / f"{JOB}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def leaks(route: Route, outputs: list[Result], exports: list[str]) -> list[str]:
    """Where any plaintext appears: a file under the home or project, or a command's output."""
    found = []
    for root in (route.home, route.project):
        for path in root.rglob("*"):
            if not path.is_file() or path.name == f"{JOB}.yaml":  # the job file holds INLINE
                continue
            data = path.read_bytes()
            found += [f"{path}: {p}" for p in PLAINTEXTS if p.encode() in data]
    for result in outputs:
        text = result.stdout + result.stderr
        found += [f"route {' '.join(result.args)}: {p}" for p in PLAINTEXTS if p in text]
    for i, text in enumerate(exports):
        found += [f"pulumi stack export #{i}: {p}" for p in PLAINTEXTS if p in text]
    return found


def hashes(checkpoint_dir: Path) -> tuple[str, str]:
    wait_for(lambda: (checkpoint_dir / "inline.sha").exists(), 30, "the job to start")
    wait_for(lambda: (checkpoint_dir / "inline.sha").read_text().strip(), 10, "its hashes")
    return (
        (checkpoint_dir / "hf.sha").read_text().strip(),
        (checkpoint_dir / "inline.sha").read_text().strip(),
    )


@pytest.mark.engine
def test_secret_env_reaches_the_job_and_is_only_ciphertext_everywhere_else(route: Route) -> None:
    job_file = write_job(route)
    outputs: list[Result] = []

    # --- validating and planning need no secret; deploying without it is one clean line, exit 2
    route.env.pop("HF_TOKEN", None)
    outputs.append(route.ok("validate", job_file.name))
    refused = route("deploy", job_file.name, "--yes")
    no_traceback(refused)
    assert refused.returncode == 2, refused
    assert refused.error_lines() == [
        f"error: {job_file.name}: run.secrets: HF_TOKEN has no value in the job file and is not"
        " set in the environment — export HF_TOKEN=... before `route deploy` (it is stored as a"
        " secret), or give it a value in run.env"
    ], refused
    assert not route.stack_file(JOB).exists(), "nothing written for a refused deploy"

    # --- deploy: the job gets both values through its process environment
    route.env["HF_TOKEN"] = HF_TOKEN
    first = route.ok("deploy", job_file.name, "--yes", "--json")
    outputs.append(first)
    deployed = first.json()
    checkpoint_dir = Path(urlparse(deployed["outputs"]["checkpointUrl"]).path)
    assert hashes(checkpoint_dir) == (sha(HF_TOKEN), sha(INLINE))

    # --- the reviewed stack file: names in clear, values only as ciphertext
    config = route.stack_config(JOB)
    assert config["secretEnvNames"] == ["HF_TOKEN", "INLINE_KEY"]
    assert set(config["secretEnv"]) == {"secure"}
    assert config["secretEnv"]["secure"].startswith("v1:")
    assert config["job"]["env"] == {"EPOCHS": "1"}
    assert "+ spotroute:secretEnvNames: ['HF_TOKEN', 'INLINE_KEY']" in deployed["config_diff"]
    assert not [line for line in deployed["config_diff"] if "secretEnv:" in line]
    stack_bytes = route.stack_file(JOB).read_bytes()

    # --- the state holds it encrypted: present with --show-secrets, absent without
    state = route.pulumi("stack", "export", "--stack", JOB).stdout
    assert '"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270"' in state
    shown = route.pulumi("stack", "export", "--stack", JOB, "--show-secrets").stdout
    assert HF_TOKEN in shown and INLINE in shown, "the secret is in the state, encrypted"

    # --- an unchanged redeploy changes nothing, not even the ciphertext in the reviewed file
    again = route.ok("deploy", job_file.name, "--yes", "--json")
    outputs.append(again)
    assert again.json()["changes"] == {} and again.json()["config_diff"] == []
    assert route.stack_file(JOB).read_bytes() == stack_bytes

    # --- preview, review and status print no value
    outputs.append(route.ok("preview", job_file.name, "--review", "markdown"))
    review = route("review", JOB, "--no-diff", "--format", "json")
    no_traceback(review)
    assert review.returncode == 0, review
    outputs.append(review)
    outputs.append(route.ok("status", "--json"))

    # --- a rotated secret restarts the job with the new value; the diff says only [secret]
    route.env["HF_TOKEN"] = ROTATED
    old_pid = group_pid(deployed["outputs"])
    (checkpoint_dir / "inline.sha").unlink()
    planned = route.ok("preview", job_file.name, "--review", "markdown")
    outputs.append(planned)
    assert "~ spotroute:secretEnv: [secret]" in planned.stdout, planned
    rotated = route.ok("deploy", job_file.name, "--yes")
    outputs.append(rotated)
    assert "~ spotroute:secretEnv: [secret]" in rotated.stdout, rotated
    assert "replace" in rotated.stdout and "LocalProcess" in rotated.stdout, rotated
    status = route.ok("status", "--json").json()
    outputs.append(route.ok("status", "--json"))
    assert status, status
    assert hashes(checkpoint_dir) == (sha(ROTATED), sha(INLINE))
    assert route.job_leaders() != [old_pid]

    # --- nowhere in clear: every file under the home and project, every output, the state
    exports = [route.pulumi("stack", "export", "--stack", JOB).stdout]
    assert leaks(route, outputs, [state, *exports]) == []

    outputs.append(route.ok("destroy", JOB, "--yes"))
    assert route.job_pids() == []
    assert leaks(route, outputs, []) == []
