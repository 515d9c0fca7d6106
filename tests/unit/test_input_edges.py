"""Issue 24 items 7-10 and 13: every file read is a regular file of bounded size, integers too
long to print, deadlines out of range, job names that are not job names, `--to local/`, click's
usage errors, and credentials in plain `run.env` — each one line (exit 2), or a warning (exit 0).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from router.config.user_files import FileProblem, read_user_bytes
from router.core.errors import BadInput
from tests.unit.cli_harness import Run, clean_env, isolate, route, route_process, write_job

JOB = """\
name: edges
resources: {accelerators: "T4:1", clouds: [local]}
market: on-demand
duration_hours: 1
checkpoint: {interval: 10m, url: auto}
run: {command: [python, train.py]}
"""


@pytest.fixture(autouse=True)
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate(monkeypatch, tmp_path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The cwd as a spotroute project (isolate() made it tmp_path/work)."""
    work = tmp_path / "work"
    (work / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    return work


def one_error_line(run: Run, code: int = 2) -> str:
    assert run.code == code, (run.out, run.err)
    assert "Traceback" not in run.err and "unexpected" not in run.err, run.err
    assert len(run.err_lines) == 1, run.err_lines
    assert run.err_lines[0].startswith("error: ")
    return run.err_lines[0]


def route_limited(*args: str | Path, cwd: Path, home: Path) -> Run:
    """`route ARGS` capped at 2 GiB: a read without bound fails fast (MemoryError, exit 1)
    instead of taking the machine, and a hang (a FIFO without a writer) fails at 60 s."""
    try:
        return route_process(*args, cwd=cwd, home=home, memory_gib=2, timeout_s=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"route {' '.join(map(str, args))} hung (a FIFO read without a writer?)")


# --- item 7: a regular file of bounded size, or one line ---------------------------------------


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: p.symlink_to("/dev/zero"), "a character device"),
        (lambda p: os.mkfifo(p), "a named pipe (FIFO)"),
    ],
    ids=["dev-zero", "fifo"],
)
def test_a_local_market_trace_that_is_not_a_regular_file_is_one_line_and_read_not_at_all(
    project: Path, home: Path, make: Callable[[Path], None], kind: str
) -> None:
    make(project / "trace.csv")
    (project / "spotroute.yaml").write_text("clouds: [local]\nlocal_market: {trace: trace.csv}\n")
    job = write_job(project / "job.yaml", JOB)

    run = route_limited("plan", job, cwd=project, home=home)

    line = one_error_line(run)
    assert "spotroute.yaml: local_market.trace:" in line
    assert f"is {kind}, not a regular file" in line


def test_a_job_file_that_is_dev_zero_is_one_line(project: Path, home: Path) -> None:
    (project / "job.yaml").symlink_to("/dev/zero")

    line = one_error_line(route_limited("plan", project / "job.yaml", cwd=project, home=home))

    assert "job.yaml: is a character device, not a regular file" in line


def _readers() -> list[tuple[str, Callable[[Path], object]]]:
    from router.config.datafiles import load_egress
    from router.config.job_file import load_job
    from router.config.org_file import load_org_config
    from router.config.stack_files import read_stack_file
    from router.config.traces import read_availability, read_aws_spot_history, read_price_csv
    from router.config.workload import load_workload
    from router.flows.backtest import read_prices
    from router.prices.imports import import_skypilot

    return [
        ("job file", load_job),
        ("spotroute.yaml", load_org_config),
        ("stack file", read_stack_file),
        ("workload", load_workload),
        ("price trace csv", read_price_csv),
        ("spot price history json", read_aws_spot_history),
        ("availability json", read_availability),
        ("backtest --prices", read_prices),
        ("skypilot import", lambda p: import_skypilot(p, cloud="gcp")),
        ("egress table", load_egress.__wrapped__),
    ]


@pytest.mark.parametrize(("what", "reader"), _readers(), ids=[w for w, _ in _readers()])
def test_every_reader_refuses_a_fifo_at_once_in_one_line(
    tmp_path: Path, what: str, reader: Callable[[Path], object]
) -> None:
    fifo = tmp_path / "input.yaml"
    os.mkfifo(fifo)
    raised: list[BaseException] = []

    def read() -> None:
        try:
            reader(fifo)
        except BaseException as exc:  # handed to the test thread
            raised.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():  # blocked opening the FIFO: give it a writer and EOF, then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail(f"the {what} reader blocked on a FIFO")
    assert raised and isinstance(raised[0], BadInput), raised
    message = raised[0].message
    assert "named pipe (FIFO), not a regular file" in message and "\n" not in message


def test_a_file_larger_than_the_limit_is_refused_before_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "big.csv"
    with big.open("wb") as f:
        f.truncate(3 << 20)  # sparse: nothing to read if the size check comes first

    with pytest.raises(FileProblem, match=r"big\.csv: file is larger than 2 MiB — is this"):
        read_user_bytes(big, limit_bytes=2 << 20, what="trace file")
    assert read_user_bytes(big, limit_bytes=4 << 20) == b"\0" * (3 << 20)


def test_a_proc_file_that_says_size_0_is_still_read_within_the_limit() -> None:
    with pytest.raises(FileProblem, match="larger than 0 MiB"):
        read_user_bytes("/proc/self/environ", limit_bytes=8)
    assert read_user_bytes("/proc/self/stat", limit_bytes=1 << 20).startswith(
        str(os.getpid()).encode()
    )


def _without_file_access_checks_bypass() -> list[str]:
    """A prefix that runs a command without root's DAC override, so a mode-000 folder refuses
    it as it would refuse any user (util-linux setpriv drops the two capabilities)."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


def test_an_import_file_in_an_unreadable_folder_is_one_line_naming_it(
    tmp_path: Path, home: Path
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "vms.csv").write_text("InstanceType,Price\n")
    locked.chmod(0)
    scratch = tmp_path / "user-home"
    scratch.mkdir()
    try:
        done = subprocess.run(
            [*_without_file_access_checks_bypass(), sys.executable, "-m", "router",
             "prices", "import", str(locked / "vms.csv"), "--format", "skypilot"],
            cwd=tmp_path, env=clean_env(home, scratch), capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip
    finally:
        locked.chmod(0o755)

    line = one_error_line(Run(done.returncode, done.stdout, done.stderr))
    assert f"{locked / 'vms.csv'}: permission denied" in line


# --- item 8: integers too long to print, deadlines out of range --------------------------------

HUGE = {
    "hex in an unknown key": "x: !!int 0x" + "f" * 5000,
    "20,000-bit binary": "duration_hours: 0b" + "1" * 20_000,
    "long sexagesimal": "duration_hours: " + ":".join(["59"] * 3000),
    "hex node count": "node_count: 0x" + "f" * 5000,
}


@pytest.mark.parametrize("line", HUGE.values(), ids=list(HUGE))
def test_an_integer_too_long_to_print_is_one_line_naming_its_size(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, line: str
) -> None:
    key = line.partition(":")[0]
    text = "".join(ln + "\n" for ln in JOB.splitlines() if not ln.startswith(key + ":"))
    job = write_job(tmp_path / "job.yaml", text + line + "\n")

    error = one_error_line(route(monkeypatch, capsys, "validate", job))

    assert f"job.yaml: {key}:" in error
    assert "an integer of about" in error or "unknown field 'x'" in error


@pytest.mark.parametrize(
    "deadline", ["'0001-01-01T00:00:00Z'", "9999-12-31T23:00:00-05:00", "1999-12-31T23:59:59Z"]
)
def test_a_deadline_out_of_range_is_refused_at_validate_and_plan(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    deadline: str,
) -> None:  # fmt: skip
    job = write_job(tmp_path / "job.yaml", JOB + f"deadline: {deadline}\n")

    for verb in ("validate", "plan"):
        error = one_error_line(route(monkeypatch, capsys, verb, job))
        assert "job.yaml: deadline:" in error
        assert "is out of range — give a date between 2000 and 2199" in error


def test_a_deadline_at_the_end_of_the_range_plans(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = write_job(tmp_path / "job.yaml", JOB + "deadline: 2199-12-31T23:59:59+12:00\n")

    assert route(monkeypatch, capsys, "plan", job).code == 0


# --- item 9: job names that are not job names --------------------------------------------------


@pytest.mark.parametrize("name", ["../x", "", "a;id", "Upper"])
@pytest.mark.parametrize(
    "verb",
    [("migrate", "{}", "--yes"), ("preempt", "{}"), ("status", "{}"), ("review", "{}"),
     ("watch", "--once", "--job", "{}")],
    ids=["migrate", "preempt", "status", "review", "watch"],
)  # fmt: skip
def test_a_job_argument_that_is_not_a_job_name_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    project: Path,
    verb: tuple[str, ...],
    name: str,
) -> None:
    args = [a.format(name) for a in verb]

    error = one_error_line(route(monkeypatch, capsys, *args))

    assert error.startswith(f"error: JOB: {name!r} is not a job name — use the `name`")


# --- item 10: `--to local/`, click's usage errors ----------------------------------------------


@pytest.mark.parametrize("to", ["local/", "aws//x", "gcp/us central1", "aws/"])
@pytest.mark.parametrize("verb", ["migrate", "deploy", "preview"])
def test_a_target_with_an_empty_or_bad_region_is_refused_not_widened(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    project: Path,
    verb: str,
    to: str,
) -> None:
    arg = "edges" if verb == "migrate" else str(write_job(project / "job.yaml", JOB))
    confirm = () if verb == "preview" else ("--yes",)

    error = one_error_line(route(monkeypatch, capsys, verb, arg, "--to", to, *confirm))

    assert error.startswith(f"error: --to: {to!r} is not CLOUD or CLOUD/REGION")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("plan", "--top", "x", "job.yaml"), "route plan: invalid value for '--top'"),
        (("migrate",), "route migrate: missing argument 'JOB'"),
        (("nosuch",), "route: no such command 'nosuch'"),
        (("deploy", "job.yaml", "--bogus"), "route deploy: no such option '--bogus'"),
        (("watch", "--concurrency", "0"), "route watch: invalid value for '--concurrency'"),
    ],
)
def test_every_click_usage_error_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    says: str,
) -> None:
    error = one_error_line(route(monkeypatch, capsys, *args))

    assert error.startswith(f"error: {says}")
    assert error.endswith(f"— see '{says.split(':')[0]} --help'")


# --- item 13: a credential in plain run.env ----------------------------------------------------

CREDENTIALS = ("AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "DB_PASSWORD", "AZURE_CLIENT_SECRET")


def _job_with_env(tmp_path: Path) -> Path:
    env = ", ".join(f"{n}: x" for n in (*CREDENTIALS, "EPOCHS", "WANDB_API_KEY"))
    text = JOB.replace("run: {command: [python, train.py]}",
                       f"run: {{command: [python, train.py], env: {{{env}}}, "
                       "secrets: [WANDB_API_KEY]}")  # fmt: skip
    return write_job(tmp_path / "job.yaml", text)


def _warned(run: Run) -> list[str]:
    return [line for line in run.err_lines if line.startswith("warning: ")]


def test_a_credential_in_plain_run_env_is_a_warning_at_validate_and_plan(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job = _job_with_env(tmp_path)

    for verb in ("validate", "plan"):
        run = route(monkeypatch, capsys, verb, job)
        assert run.code == 0, run.err
        warned = _warned(run)
        assert [w.split(": ")[2] for w in warned] == [f"run.env.{n}" for n in CREDENTIALS]
        assert all("stored in clear" in w and "run.secrets" in w for w in warned)


def test_deploy_warns_of_a_credential_in_plain_run_env_before_anything_else(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    project: Path,
) -> None:  # fmt: skip
    job = _job_with_env(project)

    # --to aws: the job runs on the local target only, so deploy stops after planning.
    run = route(monkeypatch, capsys, "deploy", job, "--to", "aws", "--yes")

    assert run.code == 1
    assert len(_warned(run)) == len(CREDENTIALS)
    assert run.err_lines[-1].startswith("error: no placement in aws fits job 'edges'")


def test_names_that_are_not_credentials_are_not_warned_of(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    names = ("AWS_ACCESS_KEY_ID", "GOOGLE_APPLICATION_CREDENTIALS", "HF_TOKEN_FILE", "SORT_KEY",
             "TOKENIZERS_PARALLELISM", "PWD")  # fmt: skip
    env = ", ".join(f"{n}: x" for n in names)
    run_line = f"run: {{command: [python, train.py], env: {{{env}}}}}"
    text = JOB.replace("run: {command: [python, train.py]}", run_line)
    job = write_job(tmp_path / "job.yaml", text)

    run = route(monkeypatch, capsys, "validate", job)

    assert run.code == 0 and _warned(run) == []

