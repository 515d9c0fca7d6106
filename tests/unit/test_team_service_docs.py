"""docs/team.md's systemd unit and container entry point stay true: the unit passes
`systemd-analyze verify`, and the `route watch` command lines of both parse with the real CLI."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from router.cli.jobs_commands import watch

REPO = Path(__file__).resolve().parents[2]
TEAM = (REPO / "docs" / "team.md").read_text(encoding="utf-8")
UNIT_NAME = "spotroute-watch.service"


def block(first_line: str) -> str:
    """The fenced block of docs/team.md that starts with first_line."""
    start = TEAM.index(first_line)
    return TEAM[start : TEAM.index("```", start)]


UNIT = block(f"# /etc/systemd/system/{UNIT_NAME}")
CONTAINERFILE = block("# Containerfile:")


def watch_args(command: list[str]) -> list[str]:
    """The arguments after `route watch` in a command line."""
    assert Path(command[0]).name == "route" and command[1] == "watch", command
    return command[2:]


def parses(args: list[str]) -> click.Context:
    """The watch command's context for args: unknown flags or bad values raise."""
    return watch.make_context("watch", list(args))


def exec_start(unit: str) -> list[str]:
    [line] = re.findall(r"^ExecStart=(.+)$", unit, flags=re.MULTILINE)
    return shlex.split(line)


def test_the_units_route_watch_command_parses_with_the_cli() -> None:
    ctx = parses(watch_args(exec_start(UNIT)))

    assert ctx.params["log_format"] == "json"
    assert ctx.params["metrics_port"] == 9477
    assert ctx.params["metrics_host"] == "127.0.0.1"  # a unit on a host keeps the default
    assert str(ctx.params["metrics_file"]).endswith(".prom")


def test_the_unit_holds_no_credentials_and_stops_route_alone() -> None:
    settings = dict(
        line.split("=", 1) for line in UNIT.splitlines() if "=" in line and line[0] != "#"
    )

    assert settings["KillMode"] == "mixed" and settings["KillSignal"] == "SIGTERM"
    assert settings["Restart"] == "on-failure"
    assert "PASSPHRASE=" not in UNIT and "PGPASSWORD" not in UNIT
    assert not re.search(r"(?i)(secret|password|token|key)\s*=", UNIT.replace("LoadCredential", ""))
    assert "Environment=PULUMI_CONFIG_PASSPHRASE_FILE=%d/passphrase" in UNIT


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_analyze_verify_accepts_the_unit_and_would_flag_a_typo(tmp_path: Path) -> None:
    route = Path(sys.executable).parent / "route"
    assert route.exists(), "the route entry point of this virtualenv"

    def verify(unit: str) -> str:
        path = tmp_path / UNIT_NAME
        path.write_text(unit.replace("/opt/spotroute/bin/route", str(route)))
        run = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True,
                             text=True, timeout=60, check=False)  # fmt: skip
        return (run.stdout + run.stderr).strip()

    assert verify(UNIT) == ""
    # The check can fail: systemd-analyze names a misspelled setting (and exits 0 regardless).
    assert "Unknown key" in verify(UNIT.replace("KillMode=", "KilMode="))


def test_the_containers_entry_point_and_command_parse_with_the_cli() -> None:
    entry = json.loads(re.findall(r"^ENTRYPOINT (.+)$", CONTAINERFILE, flags=re.MULTILINE)[0])
    cmd = json.loads(re.findall(r"^CMD (.+)$", CONTAINERFILE, flags=re.MULTILINE)[0])

    ctx = parses(watch_args([*entry, *cmd]))

    assert ctx.params["metrics_host"] == "0.0.0.0"  # the container's own loopback is no use
    assert ctx.params["log_format"] == "json"
    assert "STOPSIGNAL SIGTERM" in CONTAINERFILE
    assert re.search(r"^USER (?!root)\w+", CONTAINERFILE, flags=re.MULTILINE)
