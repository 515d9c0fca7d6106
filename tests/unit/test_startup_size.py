"""`route plan` and `route deploy` refuse a job whose node start-up script its cloud would refuse
for its size (EC2 user data 16 KB before base64, a GCE metadata value 256 KB, Azure custom data
64 KB: components/provider_rules/<cloud>.toml), in one line naming the field that grew, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli_harness import isolate, route, write_job

JOB = """\
name: big-env
resources:
  accelerators: A100-80GB:8
  clouds: [{cloud}]
market: on-demand
duration_hours: 10
run:
  image: ghcr.io/acme/trainer:1.4
  command: [python, train.py]
  env:
    CONFIG_JSON: "{value}"
"""


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate(monkeypatch, tmp_path)


@pytest.mark.parametrize(
    ("cloud", "size", "limit"),
    [
        ("aws", 17_000, "EC2 user data allows 16384"),
        ("gcp", 263_000, "startup-script) allows 262144"),
        ("azure", 66_000, "Azure custom data allows 65535"),
    ],
)
def test_plan_refuses_a_job_whose_start_up_script_its_cloud_would_refuse(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    cloud: str,
    size: int,
    limit: str,
) -> None:
    job = write_job(tmp_path / "job.yaml", JOB.format(cloud=cloud, value="x" * size))

    run = route(monkeypatch, capsys, "plan", job)

    assert run.code == 2
    assert len(run.err_lines) == 1
    line = run.err_lines[0]
    assert line.startswith(f"error: {job}: run.env: the start-up script would be ")
    assert limit in line
    assert "Traceback" not in run.err


def test_plan_accepts_the_same_env_where_the_cloud_takes_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 17 KB is too much for EC2 user data, well within a GCE metadata value.
    job = write_job(tmp_path / "job.yaml", JOB.format(cloud="gcp", value="x" * 17_000))

    run = route(monkeypatch, capsys, "plan", job)

    assert run.code == 0, run.err
