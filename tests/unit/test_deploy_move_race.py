"""Issue 24 round 2, item 3: a user's deploy and a move of the same job are exclusive.

`route migrate` (and `route watch`) hold the job's lease while they act, not the job lock; a
deploy holds both. Threads run the real `flows.jobs.deploy` and `flows.migrate.migrate_job` on a
file:// backend; the engine itself is replaced at its first call (`Engine.select_or_create`),
which is where a deploy would start changing the stack.
"""

from __future__ import annotations

import os
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from router.config.home import spotroute_home
from router.config.project import Project
from router.core.errors import OperationFailed
from router.core.placement import placement_site
from router.engine.automation import Engine
from router.engine.job_records import JobRecords, holder_id
from router.engine.lock_holders import current_user
from router.engine.records import FileRecords
from router.flows import jobs
from router.flows.live_placement import placement_key
from router.flows.migrate import migrate_job
from router.flows.plan import plan_job
from router.flows.proposals import Proposal, propose
from tests.unit.projects import infra_project

REPO = Path(__file__).resolve().parents[2]
JOB_FILE = REPO / "examples" / "llm-finetune.yaml"
JOB = "llm-finetune"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WAIT_S = 20.0


class EngineReached(Exception):
    """The deploy got past every guard to the engine."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    return infra_project(tmp_path, monkeypatch)


@pytest.fixture
def placed(project: Project) -> Proposal:
    """The job placed at its best site (stack `llm-finetune`); the deploy of it, again."""
    best = plan_job(JOB_FILE, project=project, now=NOW).result.placements[0]
    record = {"job": JOB, **placement_site(best), "stack": JOB, "job_file": str(JOB_FILE)}
    FileRecords(spotroute_home()).put(placement_key(JOB), {**record, "outputs": {}})
    return propose(JOB_FILE, project=project, now=NOW, allow_stale=True,
                   records=FileRecords(spotroute_home()))  # fmt: skip


def _engine_blocks_until(monkeypatch: pytest.MonkeyPatch, inside: threading.Event,
                         leave: threading.Event) -> None:  # fmt: skip
    def select_or_create(_self: Engine, _job: str) -> Any:
        inside.set()
        leave.wait(WAIT_S)
        raise EngineReached

    monkeypatch.setattr(Engine, "select_or_create", select_or_create)


def _deploy(proposal: Proposal, project: Project) -> None:
    jobs.deploy(proposal, project=project, confirm=lambda _r: True)


def _migrate(project: Project, confirm: Any) -> Any:
    holder = holder_id("migrate-test")
    return migrate_job(JOB, project=project, to=None, holder=holder, confirm=confirm)


def test_a_deploy_while_a_move_holds_the_job_is_refused_before_the_engine(
    project: Project, placed: Proposal, monkeypatch: pytest.MonkeyPatch
) -> None:
    deciding, answer = threading.Event(), threading.Event()

    def confirm(_target: Any, _record: Any) -> bool:  # the move chose its target: it holds the job
        deciding.set()
        answer.wait(WAIT_S)
        return False

    monkeypatch.setattr(Engine, "select_or_create", lambda _s, _j: (_ for _ in ()).throw(
        EngineReached()))  # fmt: skip
    mover = threading.Thread(target=_migrate, args=(project, confirm))
    mover.start()
    try:
        assert deciding.wait(WAIT_S), "the migrate never reached its confirmation"
        with pytest.raises(OperationFailed) as err:
            _deploy(placed, project)
        me = f"{current_user()}@{socket.gethostname()}, pid {os.getpid()}"
        assert f"job {JOB} is held by `route migrate` ({me}) since " in err.value.message
        assert "\n" not in err.value.message
    finally:
        answer.set()
        mover.join(WAIT_S)
    with pytest.raises(EngineReached):  # the move is over: the same deploy goes ahead
        _deploy(placed, project)


def test_a_move_while_a_deploy_runs_is_refused_and_the_lease_is_free_after(
    project: Project, placed: Proposal, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside, leave = threading.Event(), threading.Event()
    _engine_blocks_until(monkeypatch, inside, leave)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            _deploy(placed, project)
        except BaseException as exc:  # reported to the test thread
            failures.append(exc)

    deployer = threading.Thread(target=run)
    deployer.start()
    try:
        assert inside.wait(WAIT_S), "the deploy never reached the engine"
        confirmed: list[bool] = []
        with pytest.raises(OperationFailed) as err:
            _migrate(project, lambda _t, _r: confirmed.append(True) or False)
        me = f"{current_user()}@{socket.gethostname()}, pid {os.getpid()}"
        assert f"job {JOB} is held by `route deploy` ({me}) since " in err.value.message
        assert confirmed == []  # refused before it chose (or could start) anything
    finally:
        leave.set()
        deployer.join(WAIT_S)
    assert [type(f) for f in failures] == [EngineReached]
    lease = JobRecords(FileRecords(spotroute_home())).current(JOB)
    assert lease is not None and lease.holder == ""  # the deploy gave the lease back


@pytest.mark.parametrize("trial", range(3))
def test_a_deploy_and_a_move_started_at_the_same_moment_never_both_proceed(
    project: Project, placed: Proposal, monkeypatch: pytest.MonkeyPatch, trial: int
) -> None:
    inside, leave = threading.Event(), threading.Event()
    _engine_blocks_until(monkeypatch, inside, leave)
    start = threading.Barrier(2)
    proceeded: list[str] = []
    refused: list[str] = []

    def deploy() -> None:
        start.wait()
        try:
            _deploy(placed, project)
        except EngineReached:
            pass
        except OperationFailed as exc:
            refused.append(f"deploy: {exc.message}")
            return
        proceeded.append("deploy")

    def migrate() -> None:
        def confirm(_t: Any, _r: Any) -> bool:
            proceeded.append("migrate")
            leave.wait(WAIT_S)  # holds the job as long as the deploy would
            return False

        start.wait()
        try:
            _migrate(project, confirm)
        except OperationFailed as exc:
            refused.append(f"migrate: {exc.message}")

    threads = [threading.Thread(target=f) for f in (deploy, migrate)]
    for t in threads:
        t.start()
    # Wait until both have got as far as they will (inside holding the job, or refused); then
    # let whoever is inside finish.
    pause = threading.Event()
    for _ in range(int(WAIT_S / 0.05)):
        if len(refused) + inside.is_set() + ("migrate" in proceeded) >= 2:
            break
        pause.wait(0.05)
    leave.set()
    for t in threads:
        t.join(WAIT_S)
    assert len(proceeded) == 1 and len(refused) == 1, (proceeded, refused)


def test_a_held_lease_is_renewed_while_a_long_deploy_runs_and_given_back_after(
    tmp_path: Path,
) -> None:
    from router.engine.job_records import holding_lease

    records = JobRecords(FileRecords(tmp_path))
    with holding_lease(records, JOB, "host:1:2:deploy", ttl_s=0.3) as lease:
        assert lease is not None
        threading.Event().wait(0.8)  # past its first expiry: renewed meanwhile
        assert records.acquire(JOB, "host:3:4:watch", 0.3, datetime.now(UTC)) is None
    assert records.acquire(JOB, "host:3:4:watch", 0.3, datetime.now(UTC)) is not None


def test_a_deploy_during_a_journaled_move_names_the_move_and_its_fix(
    project: Project, placed: Proposal, monkeypatch: pytest.MonkeyPatch
) -> None:
    from router.core.journal import Journal

    records = JobRecords(FileRecords(spotroute_home()))
    # A router on another machine holds the lease and has begun the move.
    assert records.acquire(JOB, "build-7:4242:1:ab", 300, datetime.now(UTC)) is not None
    journal = Journal(
        id="m-1", job=JOB, kind="migrate", from_stack=JOB, to_stack=f"{JOB}.2",
        target={}, reason="test", created_at=NOW.isoformat(),
    )  # fmt: skip
    records.write_journal(journal.begin("intent", NOW))
    monkeypatch.setattr(Engine, "select_or_create", lambda _s, _j: (_ for _ in ()).throw(
        EngineReached()))  # fmt: skip
    with pytest.raises(OperationFailed) as err:
        _deploy(placed, project)
    assert f"a move {JOB} → {JOB}.2 is under way" in err.value.message
    records.store.delete(f"jobs/{JOB}/journal")  # the journal closed; the lease not yet given
    with pytest.raises(OperationFailed) as err:  # its router still holds the job
        _deploy(placed, project)
    # a holder id without its command (an older router's): "a router", named as recorded
    assert f"is held by a router ({current_user()}@build-7, pid 4242) since " in err.value.message


def test_a_destroy_while_a_move_holds_the_job_is_refused_and_destroys_nothing(
    project: Project, placed: Proposal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`route destroy` holds the job's lease as a deploy does (issue 24's left-alone race): while
    a move or a watch pass holds it, the destroy is one line naming the holder, before any
    engine call; once the lease is given back the same destroy goes ahead."""
    from router.core.journal import Journal

    store = FileRecords(spotroute_home())
    records = JobRecords(store)
    assert records.acquire(JOB, "build-7:4242:1:ab", 300, datetime.now(UTC)) is not None
    touched: list[str] = []
    monkeypatch.setattr(Engine, "list_stacks", lambda _s: touched.append("list_stacks") or [])
    monkeypatch.setattr(jobs, "recover", lambda *_a, **_k: touched.append("recover"))
    monkeypatch.setattr(jobs, "clear_stale_locks", lambda *_a, **_k: touched.append("locks"))
    with pytest.raises(OperationFailed) as err:
        jobs.destroy_job(JOB, project=project, hold_lease=True)
    assert f"is held by a router ({current_user()}@build-7, pid 4242) since " in err.value.message
    assert " UTC — destroy when it is done" in err.value.message
    assert "\n" not in err.value.message
    assert touched == [] and store.get(placement_key(JOB)) is not None
    journal = Journal(
        id="m-1", job=JOB, kind="migrate", from_stack=JOB, to_stack=f"{JOB}.2",
        target={}, reason="test", created_at=NOW.isoformat(),
    )  # fmt: skip
    records.write_journal(journal.begin("intent", NOW))
    with pytest.raises(OperationFailed) as err:  # a journaled move: named, with its fix
        jobs.destroy_job(JOB, project=project, hold_lease=True)
    assert f"a move {JOB} → {JOB}.2 is under way" in err.value.message
    assert err.value.message.endswith("destroy after that")
    store.delete(f"jobs/{JOB}/journal")
    records.release(JOB, "build-7:4242:1:ab", datetime.now(UTC))
    jobs.destroy_job(JOB, project=project, hold_lease=True)  # no stack left: the record goes
    assert touched == ["recover", "locks", "list_stacks"]
    assert store.get(placement_key(JOB)) is None
    assert records.acquire(JOB, "host:3:4:watch", 30, datetime.now(UTC)) is not None  # given back


def test_route_destroy_during_a_move_is_one_line_and_destroys_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI passes hold_lease: `route destroy JOB --yes` while another router holds the
    job's lease exits 1 with one line naming it, before any engine call."""
    from tests.unit.cli_harness import isolate, route

    home = isolate(monkeypatch, tmp_path)
    (Path.cwd() / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    store = FileRecords(home)
    store.put(placement_key(JOB), {"job": JOB, "stack": JOB, "outputs": {}})
    assert JobRecords(store).acquire(JOB, "build-7:4242:1:ab", 300, datetime.now(UTC))
    monkeypatch.setattr(Engine, "list_stacks", lambda _s: pytest.fail("reached the engine"))
    run = route(monkeypatch, capsys, "destroy", JOB, "--yes")
    assert run.code == 1, run
    assert f"is held by a router ({current_user()}@build-7, pid 4242) since " in run.err
    assert "destroy when it is done" in run.err and len(run.err.strip().splitlines()) == 1
    assert store.get(placement_key(JOB)) is not None
