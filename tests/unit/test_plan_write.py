"""`route plan JOB_FILE --write`: the reviewed stack file, written without engine, provider
plugins or credentials — the config `route deploy` would write (the same `proposal_for`)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from router.config.project import Project
from router.config.stack_files import read_stack_file, write_stack_file
from router.flows.proposals import propose
from tests.unit.cli_harness import EXAMPLES, FIXED_NOW, clean_env, isolate, route

TASKS = Path(__file__).resolve().parents[1] / "data" / "skypilot_tasks"


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A spotroute project as the working directory (the CLI's pinned clock, private home)."""
    isolate(monkeypatch, tmp_path)
    Path("Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    return Path.cwd()


def test_plan_write_writes_the_stack_config_deploy_would_propose(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = EXAMPLES / "llm-finetune.yaml"
    run = route(monkeypatch, capsys, "plan", job, "--write")
    assert run.code == 0, run
    written = read_stack_file(project / "stacks" / "Pulumi.llm-finetune.yaml")
    deploy = propose(job, project=Project(project), now=FIXED_NOW, allow_stale=True)
    assert written == deploy.config
    assert "wrote stacks/Pulumi.llm-finetune.yaml for review" in run.out
    assert "next: commit stacks/Pulumi.llm-finetune.yaml, then `route review llm-finetune " \
           "--against main`" in run.out


def test_writing_again_with_nothing_changed_leaves_the_file_as_it_was(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = EXAMPLES / "llm-finetune.yaml"
    assert route(monkeypatch, capsys, "plan", job, "--write").code == 0
    path = project / "stacks" / "Pulumi.llm-finetune.yaml"
    before = path.stat().st_mtime_ns, path.read_bytes()
    run = route(monkeypatch, capsys, "plan", job, "--write", "--json")
    assert run.code == 0, run
    assert run.json()["stack_file"] == {"path": "stacks/Pulumi.llm-finetune.yaml",
                                        "written": False, "config_diff": [],
                                        "secrets_left_to_deploy": []}
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before


def test_secrets_are_named_but_never_written_and_what_deploy_encrypted_is_kept(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)  # plan --write never needs the value
    stacks = project / "stacks"
    stacks.mkdir()
    path = stacks / "Pulumi.lora-checkpoint-bucket.yaml"
    # What a deploy left: the salt, the secret's ciphertext, another namespace's key.
    path.write_text(yaml.safe_dump({
        "encryptionsalt": "v1:abc=:v1:def:ghi==",
        "config": {"spotroute:secretEnv": {"secure": "v1:cipher"}, "aws:region": "us-east-1",
                   "spotroute:cloud": "gcp"}}))
    run = route(monkeypatch, capsys, "plan", TASKS / "lora_checkpoint_bucket.yaml", "--write",
                "--json")
    assert run.code == 0, run
    report = run.json()["stack_file"]
    assert report["secrets_left_to_deploy"] == ["HF_TOKEN"]
    assert "~ spotroute:cloud: 'gcp' → " in "\n".join(report["config_diff"])
    doc = yaml.safe_load(path.read_text())
    assert list(doc) == ["encryptionsalt", "config"]
    assert doc["config"]["spotroute:secretEnv"] == {"secure": "v1:cipher"}
    assert doc["config"]["aws:region"] == "us-east-1"
    assert doc["config"]["spotroute:secretEnvNames"] == ["HF_TOKEN"]
    assert "HF_TOKEN" not in str(doc["config"]["spotroute:job"]["env"])


def test_plan_write_needs_a_project_and_says_how_to_get_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    isolate(monkeypatch, tmp_path)
    run = route(monkeypatch, capsys, "plan", EXAMPLES / "llm-finetune.yaml", "--write")
    assert run.code == 2, run
    assert run.err_lines[0].startswith("error: no Pulumi.yaml in ")
    assert "`route init DIR`" in run.err_lines[0]
    assert not list(tmp_path.rglob("Pulumi.llm-finetune.yaml"))


def test_plan_write_of_a_job_nothing_fits_writes_nothing_and_exits_1(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = project / "too-cheap.yaml"
    doc = yaml.safe_load((EXAMPLES / "llm-finetune.yaml").read_text())
    doc["max_price_per_hour"] = 0.01
    job.write_text(yaml.safe_dump(doc))
    run = route(monkeypatch, capsys, "plan", job, "--write", "--json")
    assert run.code == 1, run
    assert run.json()["stack_file"]["path"] is None
    assert not (project / "stacks").exists()


def test_plan_write_runs_without_the_pulumi_cli_credentials_or_the_pulumi_sdk(
    tmp_path: Path,
) -> None:
    work = tmp_path / "infra"
    work.mkdir()
    (work / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    scratch = tmp_path / "user"
    scratch.mkdir()
    env = clean_env(tmp_path / "home", scratch)
    env["PATH"] = "/usr/bin:/bin"  # no pulumi binary, no provider plugin
    code = (
        "import sys\nfrom router.cli import main\ncode = 0\n"
        f"sys.argv = ['route', 'plan', {str(EXAMPLES / 'llm-finetune.yaml')!r}, '--write']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "print('pulumi loaded:', any(m == 'pulumi' or m.startswith('pulumi.') "
        "for m in sys.modules), 'exit', code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert "pulumi loaded: False exit 0" in done.stdout, done.stdout + done.stderr
    assert (work / "stacks" / "Pulumi.llm-finetune.yaml").is_file()
    assert shutil.which("pulumi", path=env["PATH"]) is None


def test_the_writer_lays_out_yaml_as_the_pulumi_cli_does(tmp_path: Path) -> None:
    # Recorded from `pulumi config set-all --json` (v3.274.1) for these values: keys sorted at
    # every level, sequences indented under their key, "" double-quoted, whole floats as
    # integers, multi-line strings as literal blocks. tests/engine/test_review_loop.py compares
    # with the CLI itself.
    path = tmp_path / "Pulumi.x.yaml"
    write_stack_file(path, {"zone": "", "maxPrice": 40.0, "pricePerHour": 2.99167,
                            "instanceTypes": ["p4de.24xlarge"], "remoteAccess": False,
                            "job": {"image": "", "command": ["sh", "-c", "a\nb\n"], "env": {}}})
    assert path.read_text() == (
        "config:\n"
        "  spotroute:instanceTypes:\n"
        "    - p4de.24xlarge\n"
        "  spotroute:job:\n"
        "    command:\n"
        "      - sh\n"
        "      - -c\n"
        "      - |\n"
        "        a\n"
        "        b\n"
        "    env: {}\n"
        '    image: ""\n'
        "  spotroute:maxPrice: 40\n"
        "  spotroute:pricePerHour: 2.99167\n"
        "  spotroute:remoteAccess: false\n"
        '  spotroute:zone: ""\n'
    )


# Recorded from `pulumi config set-all --json` (v3.274.1): the CLI reads stack files as YAML 1.2
# (go-yaml v3), so it double-quotes every string that would read back as a number there — some
# of which PyYAML (YAML 1.1) leaves plain; a string that is no number stays plain.
NUMBER_LIKE = {"a": ("220447e0", '"220447e0"'), "b": ("0x1f", '"0x1f"'), "c": ("1_000", '"1_000"'),
               "d": ("12345678", '"12345678"'), "e": ("1e5", '"1e5"'), "f": ("0o17", '"0o17"'),
               "g": ("0b101", '"0b101"'), "h": (".5", '".5"'), "i": ("+1", '"+1"'),
               "j": ("a3e5f0c1", "a3e5f0c1"), "k": ("12e", "12e"), "l": ("1.5e+3", '"1.5e+3"'),
               "m": ("0e1", '"0e1"'), "n": ("1.", '"1."'), "o": ("-.5e-2", '"-.5e-2"')}  # fmt: skip


def test_a_string_a_yaml_1_2_reader_takes_for_a_number_is_quoted_as_the_cli_quotes_it(
    tmp_path: Path,
) -> None:
    # A deployment id of "220447e0" written plain was read by the CLI as the number 220447
    # (tests/engine/test_review_loop_engine.py met it, the id being random).
    path = tmp_path / "Pulumi.x.yaml"
    write_stack_file(path, {k: value for k, (value, _) in NUMBER_LIKE.items()})
    assert path.read_text() == "config:\n" + "".join(
        f"  spotroute:{k}: {shown}\n" for k, (_, shown) in NUMBER_LIKE.items()
    )
    assert read_stack_file(path) == {k: value for k, (value, _) in NUMBER_LIKE.items()}


def test_review_without_a_stack_file_advises_plan_write(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = route(monkeypatch, capsys, "review", "llm-finetune")
    assert run.code == 2, run
    assert run.err_lines == [
        "error: JOB: no stacks/Pulumi.llm-finetune.yaml — review reads the job's reviewed stack "
        "file; write it with `route plan JOB_FILE --write` (JOB_FILE: the job's .yaml)"
    ]


# --- a failed `route deploy --dry-run` leads to `route plan JOB_FILE --write` -------------------

T4_JOB = """\
name: t4-job
resources: {accelerators: "T4:1", clouds: [aws]}
market: on-demand
duration_hours: 2
run: {command: [python, x.py]}
"""


def _advised_command(line: str) -> list[str]:
    """The `route …` command a message leads with, as the user would paste it."""
    command = line.split("`", 2)[1]
    assert command.startswith("route ")
    return command.split()[1:]


def test_a_dry_run_refused_on_a_stale_price_leads_to_plan_write_which_works_as_printed(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import router.flows.proposals as proposals
    from router.prices.book import RefreshOutcome

    # A job author's machine: no credentials, so the refresh of the stale snapshot fails.
    failed = "AWS credentials not found — run `aws configure sso` / set AWS_PROFILE " + "x" * 200
    monkeypatch.setattr(proposals, "refresh_for_deploy", lambda clouds, gpu: [
        RefreshOutcome(c, (), 0, 0, 0.1, failed) for c in clouds])  # fmt: skip
    Path("t4.yaml").write_text(T4_JOB)

    run = route(monkeypatch, capsys, "deploy", "t4.yaml", "--dry-run")

    assert run.code == 1, run
    (line,) = run.err_lines
    assert line.startswith("error: dry run failed (`route plan t4.yaml --write` writes the stack "
                           "file for review without the engine, provider plugins or credentials)"
                           ": job t4-job: the best price, aws "), line
    # The message's own advice comes before the long refresh error, so the cut keeps it.
    assert "; run `route prices refresh` with credentials, or pass --allow-stale" in line
    assert not (project / "stacks" / "Pulumi.t4-job.yaml").exists()

    written = route(monkeypatch, capsys, *_advised_command(line))

    assert written.code == 0, written
    assert read_stack_file(project / "stacks" / "Pulumi.t4-job.yaml")["cloud"] == "aws"


def test_a_dry_run_the_engine_fails_says_so_after_the_plan_write_advice(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import router.flows.launch as launch
    from router.engine.automation import EngineFailed

    plugin = ("Could not automatically download and install resource plugin "
              "'pulumi-resource-aws' at version v7.51.1, install the plugin using `pulumi "
              "plugin install resource aws v7.51.1`: " + "y" * 400)  # fmt: skip

    def engine_without_plugin(*_args: object, **_kwargs: object) -> None:
        raise EngineFailed(f"job t4-job: {plugin}", plugin)

    monkeypatch.setattr(launch, "deploy", engine_without_plugin)
    Path("t4.yaml").write_text(T4_JOB)

    run = route(monkeypatch, capsys, "deploy", "t4.yaml", "--dry-run", "--allow-stale")

    assert run.code == 1, run
    line = run.err_lines[-1]
    assert line.startswith("error: dry run failed (`route plan t4.yaml --write` writes"), line
    assert ": job t4-job: Could not automatically download and install resource plugin" in line
    assert _advised_command(line) == ["plan", "t4.yaml", "--write"]


def test_a_failure_of_a_real_deploy_is_not_given_the_dry_run_advice(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import router.flows.launch as launch
    from router.engine.automation import EngineFailed

    def engine_fails(*_args: object, **_kwargs: object) -> None:
        raise EngineFailed("job t4-job: the engine failed", "the engine failed")

    monkeypatch.setattr(launch, "deploy", engine_fails)
    Path("t4.yaml").write_text(T4_JOB)

    run = route(monkeypatch, capsys, "deploy", "t4.yaml", "--yes", "--allow-stale")

    assert run.code == 1 and run.err_lines[-1] == "error: job t4-job: the engine failed", run
