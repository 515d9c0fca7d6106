"""What a user sees when something is wrong: one `error:` line, the right exit code, no traceback.

Exit codes (docs/cli-json.md): 0 ok, 1 the operation failed, 2 bad input. `--debug` shows the
traceback. The process tests start `python -m router` for real; the rest call the console entry
point in-process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli_harness import EXAMPLES, Run, isolate, route, route_process, write_job

LLM_FINETUNE = EXAMPLES / "llm-finetune.yaml"


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate(monkeypatch, tmp_path)


def job_with(tmp_path: Path, old: str, new: str) -> Path:
    text = LLM_FINETUNE.read_text()
    assert old in text
    return write_job(tmp_path / "job.yaml", text.replace(old, new))


def assert_one_error_line(run: Run, code: int = 2) -> str:
    assert run.code == code, (run.out, run.err)
    assert "Traceback" not in run.err
    assert len(run.err_lines) == 1, run.err_lines
    line = run.err_lines[0]
    assert line.startswith("error: ")
    return line


# --- real processes -----------------------------------------------------------------------------


def test_malformed_yaml_job_is_one_error_line_naming_the_line(home: Path, tmp_path: Path) -> None:
    job = write_job(tmp_path / "job.yaml", "name: x\nresources: [unclosed\n")

    run = route_process("plan", job, cwd=tmp_path, home=home)

    line = assert_one_error_line(run)
    assert str(job) in line
    assert "line " in line
    assert run.out == ""


def test_unknown_gpu_in_the_job_lists_the_known_ones(home: Path, tmp_path: Path) -> None:
    job = job_with(tmp_path, "A100-80GB:8", "B200:8")

    run = route_process("plan", job, "--json", cwd=tmp_path, home=home)

    line = assert_one_error_line(run)
    assert "resources.accelerators" in line
    assert "'B200'" in line
    assert "A100-80GB" in line
    assert run.out == ""


def test_a_directory_instead_of_a_job_file_is_one_error_line(home: Path, tmp_path: Path) -> None:
    run = route_process("plan", tmp_path, cwd=tmp_path, home=home)

    line = assert_one_error_line(run)
    assert "is a directory" in line


def test_debug_shows_the_traceback_and_still_the_error_line(home: Path, tmp_path: Path) -> None:
    job = write_job(tmp_path / "job.yaml", "name: x\nresources: [unclosed\n")

    run = route_process("--debug", "plan", job, cwd=tmp_path, home=home)

    assert run.code == 2
    assert "Traceback (most recent call last)" in run.err
    assert run.err_lines[-1].startswith("error: ")


def test_usage_error_exits_2_without_a_traceback(home: Path, tmp_path: Path) -> None:
    run = route_process("plan", LLM_FINETUNE, "--top", "0", cwd=tmp_path, home=home)

    assert run.code == 2
    assert "--top" in run.err
    assert "Traceback" not in run.err


# --- in-process ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("A100-80GB:8", "A100:8", "'A100' is ambiguous"),
        ("market: spot", "market: cheap", "market"),
        ("duration_hours: 24", "duration_hours: -1", "duration_hours"),
        ("min_savings_pct: 20", "min_saving_pct: 20", "did you mean 'min_savings_pct'"),
    ],
)
def test_a_job_mistake_is_named_with_its_field(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    old: str,
    new: str,
    field: str,
) -> None:
    job = job_with(tmp_path, old, new)

    line = assert_one_error_line(route(monkeypatch, capsys, "plan", job))

    assert line.startswith(f"error: {job}: ")
    assert field in line


def test_a_missing_job_file_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = assert_one_error_line(route(monkeypatch, capsys, "plan", tmp_path / "nope.yaml"))

    assert "not found" in line


def test_an_empty_job_file_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = write_job(tmp_path / "empty.yaml", "")

    assert_one_error_line(route(monkeypatch, capsys, "plan", job))


def test_a_job_that_is_not_a_mapping_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = write_job(tmp_path / "list.yaml", "- name: x\n- name: y\n")

    assert_one_error_line(route(monkeypatch, capsys, "plan", job))


def test_a_job_that_fits_nothing_exits_1_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = job_with(tmp_path, "max_price_per_hour: 40", "max_price_per_hour: 0.5")

    run = route(monkeypatch, capsys, "plan", job, "--explain")

    assert run.code == 1
    assert "no placement fits job 'llm-finetune'" in run.out
    assert "exceeds max_price_per_hour" in run.out


def test_deploy_outside_a_project_says_how_to_make_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = assert_one_error_line(route(monkeypatch, capsys, "deploy", LLM_FINETUNE, "--yes"))

    assert "Pulumi.yaml" in line
    assert "route init" in line


def test_status_outside_a_project_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_one_error_line(route(monkeypatch, capsys, "status"))


def test_deploy_to_an_unknown_cloud_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    project = tmp_path / "infra"
    assert route(monkeypatch, capsys, "init", project).code == 0

    run = route(
        monkeypatch,
        capsys,
        "--project-dir",
        project,
        "deploy",
        LLM_FINETUNE,
        "--to",
        "oracle/us-ashburn-1",
        "--dry-run",
    )

    assert run.code == 2
    assert "--to" in run.err
    assert "aws/us-east-1" in run.err


def test_unknown_command_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "plna", LLM_FINETUNE)

    assert run.code == 2
    assert "plna" in run.err
    assert "Traceback" not in run.err


def test_spotroute_home_that_is_a_file_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    occupied = tmp_path / "not-a-dir"
    occupied.write_text("x")
    monkeypatch.setenv("SPOTROUTE_HOME", str(occupied))

    line = assert_one_error_line(route(monkeypatch, capsys, "plan", LLM_FINETUNE), code=2)

    assert "SPOTROUTE_HOME" in line


def test_a_corrupt_price_cache_is_one_error_line_that_says_the_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "prices.sqlite3").write_bytes(b"this is not sqlite at all" * 100)

    run = route(monkeypatch, capsys, "prices", "--gpu", "T4")

    line = assert_one_error_line(run, code=1)
    assert "prices.sqlite3" in line
    assert "move it away" in line
