"""Shell completion: verbs, job names from the project's stack files, clouds, regions, --to."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.shell_completion import ShellComplete

from router.cli.commands import cli
from tests.unit.cli_harness import isolate, route


def complete(line: str) -> list[str]:
    """What the shell offers after `route LINE` (the last word is the one being typed)."""
    words = line.split(" ")
    completer = ShellComplete(cli, {}, "route", "_ROUTE_COMPLETE")
    return [item.value for item in completer.get_completions(words[:-1], words[-1])]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = Path.cwd()
    (root / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    (root / "stacks").mkdir()
    for job in ("llm-finetune", "eval", "bootstrap"):
        (root / "stacks" / f"Pulumi.{job}.yaml").write_text("config: {}\n")
    return root


def test_verbs_complete(project: Path) -> None:
    assert complete("de") == ["deploy", "destroy"]
    assert "review" in complete("") and "completion" in complete("")


def test_job_names_come_from_the_projects_stack_files(project: Path) -> None:
    assert complete("status ") == ["bootstrap", "eval", "llm-finetune"]
    assert complete("destroy ll") == ["llm-finetune"]
    assert complete("review e") == ["eval"]


def test_clouds_complete_after_commas_and_regions_follow_the_chosen_clouds(project: Path) -> None:
    assert complete("prices --clouds aws,") == ["aws,gcp", "aws,azure", "aws,local"]
    assert complete("prices --clouds gcp --regions europe-west4") == ["europe-west4"]
    assert "us-east-1" not in complete("prices --clouds gcp --regions us")


def test_to_completes_clouds_then_their_regions(project: Path) -> None:
    assert complete("deploy job.yaml --to a") == ["aws", "azure"]
    assert complete("deploy job.yaml --to aws/us-east-") == ["aws/us-east-1", "aws/us-east-2"]


def test_completion_prints_a_script_for_each_shell(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path)
    for shell, marker in (("bash", "complete -o nosort -F"), ("zsh", "#compdef route"),
                          ("fish", "complete --no-files --command route")):
        run = route(monkeypatch, capsys, "completion", shell)
        assert run.code == 0 and marker in run.out, (shell, run.out[:200])
        assert "_ROUTE_COMPLETE" in run.out
