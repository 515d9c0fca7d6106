"""Issue 32 item 8: a malformed glob is bad input — one line naming the field, exit 2 — wherever
globs are read: spotroute.yaml (regions, discount families), job.yaml (resources.regions), the
backtest's availability selectors (workload and `--availability`) and `--regions`.

fnmatch never refuses a pattern: an unclosed `[` is a literal `[`, `[z-a]` a class of nothing, so
`regions: {allow: ['[']}` allowed no region and `route plan` said "no placement fits" (exit 1).
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from router.core.globs import glob_problem
from tests.unit.cli_harness import Run, isolate, route, write_job

MALFORMED = ["[", "us-[", "us-east-[12", "[]", "[!]", "[z-a]", "us-east-1]", "a]b[c"]
WELL_FORMED = ["us-*", "eu*", "*central*", "us-east-[12]", "[[]", "[]]", "[!a]x", "aws:us-*",
               "?", "p4*", "a2-*", "", "us-east-1", "[a-z][0-9]"]  # fmt: skip

JOB = """\
name: globs
resources: {accelerators: "T4:1", clouds: [local]REGIONS}
market: on-demand
duration_hours: 1
run: {command: [python, train.py]}
"""


@pytest.mark.parametrize("pattern", MALFORMED)
def test_a_malformed_glob_is_named_with_its_fix(pattern: str) -> None:
    why = glob_problem(pattern)
    assert why is not None and repr(pattern) in why and " — " in why
    # … where fnmatch would have matched nothing a region could be called.
    assert not any(fnmatch.fnmatchcase(r, pattern) for r in ("us-east-1", "us-east-2", "a"))


@pytest.mark.parametrize("pattern", WELL_FORMED)
def test_a_well_formed_glob_passes(pattern: str) -> None:
    assert glob_problem(pattern) is None


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate(monkeypatch, tmp_path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    return work


def _one_line(run: Run) -> str:
    assert run.code == 2, (run.code, run.out, run.err)
    assert "Traceback" not in run.err and "no placement" not in run.err, run.err
    assert len(run.err_lines) == 1, run.err_lines
    return run.err_lines[0]


@pytest.mark.parametrize(
    ("org", "field"),
    [
        ("regions: {allow: ['[']}", "spotroute.yaml: regions.allow"),
        ("regions: {deny: ['us-[z-a]*']}", "spotroute.yaml: regions.deny"),
        ("discounts: [{cloud: aws, family: 'p4[', percent: 10}]",
         "spotroute.yaml: discounts[0].family"),
    ],
)  # fmt: skip
def test_a_malformed_glob_in_spotroute_yaml_is_one_line_naming_the_field(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    project: Path,
    org: str,
    field: str,
) -> None:
    (project / "spotroute.yaml").write_text(org + "\n")
    job = write_job(project / "job.yaml", JOB.replace("REGIONS", ""))

    line = _one_line(route(monkeypatch, capsys, "plan", job))

    assert line.startswith(f"error: {field}: glob "), line


@pytest.mark.parametrize(
    ("regions", "field"),
    [(", regions: {allow: ['[']}", "resources.regions.allow"),
     (", regions: ['us-*', 'eu-[']", "resources.regions"),  # the list shorthand: allow
     (", regions: {deny: '[z-a]'}", "resources.regions.deny")],
)  # fmt: skip
def test_a_malformed_glob_in_job_yaml_is_one_line_naming_the_field(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    project: Path,
    regions: str,
    field: str,
) -> None:
    job = write_job(project / "job.yaml", JOB.replace("REGIONS", regions))

    for verb in ("validate", "plan"):
        line = _one_line(route(monkeypatch, capsys, verb, job))
        assert line.startswith(f"error: {job}: {field}: glob "), line


@pytest.mark.parametrize(
    "args",
    [("prices", "--regions", "us-*,eu-["), ("prices", "refresh", "--regions", "["),
     ("quotas", "--regions", "us-east-1]"), ("quotas", "refresh", "--regions", "[z-a]")],
)  # fmt: skip
def test_a_malformed_regions_flag_is_one_line_naming_the_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    line = _one_line(route(monkeypatch, capsys, *args))

    assert line.startswith("error: --regions: glob "), line


WORKLOAD = """\
name: globs
start: 2026-11-01T00:00:00Z
days: 1
jobs:
  list:
    - {name: a, arrival: 0h, duration: 2h, gpus: A100-80GB:8}
"""


def test_a_malformed_availability_selector_is_one_line_on_the_command_line_and_in_a_workload(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    workload = tmp_path / "work" / "workload.yaml"
    workload.write_text(WORKLOAD)

    prices = Path(__file__).resolve().parents[1] / "data" / "traces" / "prices.csv"
    flag = _one_line(route(monkeypatch, capsys, "backtest", workload, "--prices", prices,
                           "--availability", "aws/us-east-[1=cbl.json"))  # fmt: skip
    assert flag.startswith("error: --availability aws/us-east-[1=cbl.json: the selector's glob ")

    workload.write_text(WORKLOAD + "traces: {availability: ['aws/[z-a]*=cbl.json']}\n")
    field = _one_line(route(monkeypatch, capsys, "backtest", workload))
    assert field.startswith(f"error: {workload}: traces.availability[0]: the selector's glob ")
