"""`route rehearse`'s bad input: one line naming the option and the fix, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli_harness import EXAMPLES, isolate, route

WORKLOAD = str(EXAMPLES / "backtest-real-v100.yaml")


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate(monkeypatch, tmp_path)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--interval", "soon"), "--interval: bad duration 'soon'"),
        (("--job", "job-999"), "--job: 'job-999' is not a job of workload real-v100-4zones"),
        (("--job", "job-029", "--days", "1"), "--job: job-029 arrives after the trace ends"),
        (("--speed", "5000"), "--speed"),
        (("--chart", "spend.svg"), "--chart: spend.svg must end in .png or .html"),
        (("--watchers", "0"), "--watchers"),
        (("--watchers", "9"), "--watchers"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    args: tuple[str, ...], says: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    run = route(monkeypatch, capsys, "rehearse", WORKLOAD, *args)
    assert run.code == 2, (run.out, run.err)
    assert "Traceback" not in run.err and len(run.err_lines) == 1, run.err_lines
    assert says in run.err_lines[0]


def test_a_directory_in_use_is_refused_and_left_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    run = route(monkeypatch, capsys, "rehearse", WORKLOAD, "--jobs", "1", "--dir", str(used))
    assert run.code == 2 and "--dir: " in run.err and "not empty" in run.err
    assert [p.name for p in used.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("given", ["absent", "empty"])
def test_a_speed_at_which_a_job_file_is_refused_is_said_before_anything_runs(
    given: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """At 3600× the workload's 30-minute checkpoint interval is half a second, below what a job
    file may say (1 s): one line naming --speed, exit 2, the directory as it was — not a
    rehearsal that stops at the job's arrival."""
    where = tmp_path / "rehearsal"
    if given == "empty":
        where.mkdir()
    run = route(monkeypatch, capsys, "rehearse", WORKLOAD, "--jobs", "1", "--speed", "3600",
                "--dir", str(where))  # fmt: skip
    assert run.code == 2, (run.out, run.err)
    assert len(run.err_lines) == 1 and "Traceback" not in run.err
    assert "--speed: at 3600× workload job job-" in run.err_lines[0]
    assert "checkpoint.interval" in run.err_lines[0] and "use a lower --speed" in run.err_lines[0]
    assert (list(where.iterdir()) == []) if given == "empty" else not where.exists()
