"""Running `route` the way a user does, for the CLI tests: in-process or as a real process.

- `invoke` runs the click group through CliRunner (fast; errors surface as exceptions).
- `route` runs the console entry point `router.cli:main` in-process with a patched argv, so
  the one-line error wrapper and exit codes are exercised without starting Python.
- `route_process` starts `python -m router` for what only a real process shows: exit status,
  the "no traceback" guarantee, and which modules start-up imports.

The tests pin the CLI clock to FIXED_NOW (a month after the bundled snapshot's 2025-05-01) so
ages and the stale flag never depend on today's date.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from router.cli import commands as cli_module
from router.cli import options
from router.engine.automation import tools_bin_dir

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SKYPILOT_GCP_SAMPLE = REPO / "tests" / "data" / "skypilot" / "gcp" / "vms.csv"
FIXED_NOW = datetime(2025, 6, 1, tzinfo=UTC)
SNAPSHOT_OBSERVED_AT = datetime(2025, 5, 1, tzinfo=UTC)

# Environment variables through which a cloud SDK could find credentials or a metadata server.
_CLOUD_ENV_PREFIXES = (
    "AWS_",
    "GOOGLE_",
    "GCLOUD_",
    "CLOUDSDK_",
    "AZURE_",
    "GCE_",
    "MSI_",
    "IDENTITY_",
)


@dataclass(frozen=True)
class Run:
    """What a user sees from one `route` command."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A private SPOTROUTE_HOME, no project above the cwd, and the pinned clock; returns home."""
    home = tmp_path / "spotroute-home"
    monkeypatch.setenv("SPOTROUTE_HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(options, "now", lambda: FIXED_NOW)
    return home


def invoke(*args: str | Path) -> Run:
    """Run `route ARGS` through click's CliRunner; expects success paths (exceptions propagate)."""
    result = CliRunner().invoke(cli_module.cli, [str(a) for a in args], catch_exceptions=False)
    return Run(result.exit_code, result.stdout, result.stderr)


def route(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str | Path
) -> Run:
    """Run the `route` console entry point in-process: exit code, stdout and stderr."""
    capsys.readouterr()  # drop anything printed before
    monkeypatch.setattr(sys, "argv", ["route", *(str(a) for a in args)])
    code = 0
    try:
        cli_module.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return Run(code, out, err)


def clean_env(home: Path, scratch: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A user environment with no cloud credentials at all and metadata servers unreachable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CLOUD_ENV_PREFIXES)}
    env.update(
        {
            "SPOTROUTE_HOME": str(home),
            "PYTHONPATH": str(REPO),
            "HOME": str(scratch),  # no ~/.aws, ~/.config/gcloud, ~/.azure
            "AWS_CONFIG_FILE": str(scratch / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(scratch / "no-aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
            "NO_GCE_CHECK": "True",
            "GCE_METADATA_HOST": "127.0.0.1:1",
            "GCE_METADATA_IP": "127.0.0.1:1",
            "CLOUDSDK_CONFIG": str(scratch / "gcloud"),
            "AZURE_CONFIG_DIR": str(scratch / "azure"),
            "COLUMNS": "200",
            # HOME moves, so name the Pulumi CLI that scripts/ensure-pulumi.sh built under the real
            # one: a test that reaches the engine finds it without PATH (as `make test` has it).
            "SPOTROUTE_TOOLS_DIR": str(tools_bin_dir().parent),
        }
    )
    env.pop("PYTHONSTARTUP", None)
    env.update(extra or {})
    return env


def route_process(
    *args: str | Path,
    cwd: Path,
    home: Path,
    python_flags: tuple[str, ...] = (),
    memory_gib: int | None = None,
    timeout_s: float = 120,
) -> Run:
    """Run `python -m router ARGS` as its own process with no cloud credentials; `memory_gib`
    caps its address space (a read without bound then fails fast instead of taking the box)."""
    scratch = home.parent / "user-home"
    scratch.mkdir(exist_ok=True)

    def cap_memory() -> None:
        import resource

        if memory_gib is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_gib << 30, memory_gib << 30))

    done = subprocess.run(
        [sys.executable, *python_flags, "-m", "router", *(str(a) for a in args)],
        cwd=cwd,
        env=clean_env(home, scratch),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        preexec_fn=cap_memory,
    )
    return Run(done.returncode, done.stdout, done.stderr)


SKYPILOT_GCP_HEADER = (
    "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,"
    "AvailabilityZone,Price,SpotPrice"
)


def gcp_a2_ultragpu_8g_csv(
    path: Path, *, region: str, zone: str, host: tuple[float, float], gpus: tuple[float, float]
) -> Path:
    """A SkyPilot GCP vms.csv pricing a2-ultragpu-8g in one zone: host row + 8×A100-80GB row.

    `host` and `gpus` are (on-demand, spot) USD per hour, as SkyPilot lists them separately.
    """
    gpu_info = "\"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 81920}}]}\""
    lines = [
        SKYPILOT_GCP_HEADER,
        f"a2-ultragpu-8g,96.0,1360.0,,,,{region},{zone},{host[0]},{host[1]}",
        f",,,A100-80GB,8,{gpu_info},{region},{zone},{gpus[0]},{gpus[1]}",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_job(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


SPOT_A100_JOB_WITH_DATA_IN_US_EAST_1 = """\
name: egress-check
resources:
  accelerators: A100-80GB:8
  clouds: [aws, gcp]
market: spot
duration_hours: 24
checkpoint:
  interval: 30m
  restore_overhead: 10m
data:
  url: s3://acme-datasets/corpus/
  region: us-east-1
  size_gb: 2000
run:
  image: ghcr.io/acme/trainer:1.0
  command: [python, train.py]
"""
