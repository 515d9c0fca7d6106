"""Issue 24 items 1, 4, 5 without the engine: a moved job's one live placement is what deploy,
preview and unlock act on; locks a killed route left on the job's stacks are cleared."""

from __future__ import annotations

import json
import socket
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from router.config.home import spotroute_home
from router.config.project import Project
from router.core.errors import BadInput, OperationFailed
from router.core.journal import Journal
from router.core.placement import placement_site
from router.engine.automation import Engine
from router.engine.job_records import JobRecords
from router.engine.records import FileRecords
from router.flows import jobs, launch
from router.flows.live_placement import placement_key
from router.flows.plan import plan_job
from router.flows.proposals import propose
from tests.unit.projects import infra_project

REPO = Path(__file__).resolve().parents[2]
JOB_FILE = REPO / "examples" / "llm-finetune.yaml"
JOB = "llm-finetune"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    return infra_project(tmp_path, monkeypatch)


def _records() -> FileRecords:
    return FileRecords(spotroute_home())  # the default backend's record store


def _moved_here(site: dict[str, Any], stack: str = f"{JOB}.2") -> None:
    """The placement record `route migrate` leaves: the job lives in `stack` at `site`."""
    _records().put(placement_key(JOB), {"job": JOB, **site, "stack": stack, "outputs": {}})


def test_a_moved_job_is_proposed_in_its_live_stack_where_it_runs(project: Project) -> None:
    ranked = propose(JOB_FILE, project=project, now=NOW, allow_stale=True, records=_records())
    assert ranked.stack_name == JOB  # never placed: its first stack, named as the job
    placements = plan_job(JOB_FILE, project=project, now=NOW).result.placements
    here = placements[1]  # not the cheapest: a plan alone would place it elsewhere
    _moved_here(placement_site(here))
    proposal = propose(JOB_FILE, project=project, now=NOW, allow_stale=True, records=_records())
    assert proposal.stack_name == f"{JOB}.2"
    assert proposal.stack_file == project.root / "stacks" / f"Pulumi.{JOB}.2.yaml"
    assert placement_site(proposal.chosen) == placement_site(here)


def test_a_deploy_that_would_move_the_job_is_refused_pointing_at_migrate(
    project: Project,
) -> None:
    _moved_here({"cloud": "aws", "region": "mars-1", "zone": None,
                 "instance_type": "p9.huge", "market": "spot"})  # fmt: skip
    with pytest.raises(OperationFailed) as err:
        propose(JOB_FILE, project=project, now=NOW, allow_stale=True, records=_records())
    message = err.value.message
    assert f"runs at aws/mars-1 (p9.huge, spot) (stack {JOB}.2)" in message
    assert f"`route migrate {JOB} --to " in message and "\n" not in message


def _open_journal() -> None:
    journal = Journal(
        id="m-1", job=JOB, kind="migrate", from_stack=JOB, to_stack=f"{JOB}.2",
        target={}, reason="test", created_at=NOW.isoformat(),
    )  # fmt: skip
    JobRecords(_records()).write_journal(journal.begin("intent", NOW))


def test_no_deploy_or_preview_while_a_move_of_the_job_is_open(project: Project) -> None:
    _moved_here({"cloud": "local", "region": "local-a"}, stack=JOB)
    _open_journal()
    with pytest.raises(OperationFailed) as err:
        propose(JOB_FILE, project=project, now=NOW, allow_stale=True, records=_records())
    assert f"a move {JOB} → {JOB}.2 is under way" in err.value.message
    assert f"`route migrate {JOB}` or `route watch --once` finishes it" in err.value.message


def test_route_deploy_launches_into_the_live_stack_only_at_its_site(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = plan_job(JOB_FILE, project=project, now=NOW)
    ranked = list(report.result.placements)
    _moved_here(placement_site(ranked[2]), stack=f"{JOB}.3")
    deployed: list[Any] = []

    def fake_deploy(proposal: Any, **_kw: Any) -> Any:
        deployed.append(proposal)
        return SimpleNamespace(applied=True)

    monkeypatch.setattr(launch, "deploy", fake_deploy)
    monkeypatch.setattr(launch, "engine_for", lambda _p: SimpleNamespace(records=_records))
    launch.launch(report.job, report.org, ranked, project=project, confirm=lambda _r: True)
    [proposal] = deployed
    assert proposal.stack_name == f"{JOB}.3"
    assert placement_site(proposal.chosen) == placement_site(ranked[2])


# --- stale locks (items 4 and 5) -----------------------------------------------------------


def _write_lock(state: Path, stack: str, pid: int, host: str) -> Path:
    path = state / ".pulumi" / "locks" / "organization" / "spotroute" / stack / f"{stack}-1.json"
    path.parent.mkdir(parents=True)
    stamp = "2026-12-01T11:07:02.623634871Z"
    path.write_text(
        json.dumps({"pid": pid, "username": "ann", "hostname": host, "timestamp": stamp})
    )
    return path


class _Engine(Engine):
    """The real engine's lock handling over a file:// state; its stack list given."""

    stacks: tuple[str, ...] = ()
    unlocked: list[str]

    def list_stacks(self) -> list[Any]:
        return [SimpleNamespace(name=n, resource_count=1) for n in self.stacks]

    def unlock(self, job: str) -> list[Any]:
        self.unlocked.append(job)
        return []


def _engine(project: Project, stacks: tuple[str, ...]) -> _Engine:
    from router.engine.automation import choose_backend

    home = spotroute_home()
    engine = _Engine(project, home, choose_backend(home, None, None))
    engine.stacks, engine.unlocked = stacks, []
    return engine


def test_a_lock_left_on_a_deleted_stack_of_the_job_is_cleared_with_one_line(
    project: Project,
) -> None:
    engine = _engine(project, stacks=(f"{JOB}.2", "other"))
    state = spotroute_home() / "state"
    # On another host: only the stack being gone proves this lock holds nothing.
    gone = _write_lock(state, JOB, 4242, "someone-elses-laptop")
    live = _write_lock(state, f"{JOB}.2", 4243, "someone-elses-laptop")
    others = _write_lock(state, "other", 4244, "someone-elses-laptop")
    said: list[str] = []
    assert jobs.clear_stale_locks(engine, JOB, said.append) == [
        "ann@someone-elses-laptop (pid 4242) since 2026-12-01 11:07:02 UTC"
    ]
    assert not gone.exists() and live.exists() and others.exists()
    assert said == [
        f"cleared the lock on stack {JOB} of job {JOB} held by ann@someone-elses-laptop "
        "(pid 4242) since 2026-12-01 11:07:02 UTC: that stack was deleted"
    ]
    assert jobs.clear_stale_locks(engine, JOB, said.append) == []  # nothing left to say


def test_a_dead_holders_lock_on_any_stack_of_the_job_is_cleared(project: Project) -> None:
    engine = _engine(project, stacks=(f"{JOB}.2",))
    done = subprocess.Popen(["true"])
    done.wait()
    lock = _write_lock(spotroute_home() / "state", f"{JOB}.2", done.pid, socket.gethostname())
    said: list[str] = []
    jobs.clear_stale_locks(engine, JOB, said.append)
    assert not lock.exists() and said[0].endswith(": that process is gone")


def test_route_unlock_takes_the_job_or_a_stack_of_it_and_unlocks_where_it_lives(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(project, stacks=(f"{JOB}.2",))
    monkeypatch.setattr(jobs, "engine_for", lambda _p: engine)
    _moved_here({"cloud": "local", "region": "local-b"})
    gone = _write_lock(spotroute_home() / "state", JOB, 4242, "someone-elses-laptop")
    said: list[str] = []
    held = jobs.unlock_job(JOB, project=project, notify=said.append)
    assert engine.unlocked == [f"{JOB}.2"]  # the stack it lives in, not its first one
    assert not gone.exists() and len(said) == 1
    assert held == ["ann@someone-elses-laptop (pid 4242) since 2026-12-01 11:07:02 UTC"]
    jobs.unlock_job(f"{JOB}.2", project=project)  # a stack's name is read as its job's
    assert engine.unlocked == [f"{JOB}.2", f"{JOB}.2"]
    with pytest.raises(BadInput):
        jobs.unlock_job("../x", project=project)


def test_a_redeploy_of_a_moved_stack_keeps_the_env_its_move_gave_the_job(project: Project) -> None:
    """Dropped, the hand-over id and restore step alone would replace the running process."""
    from router.config.job_file import load_job
    from router.flows.live_placement import with_move_env

    stack_file = project.stack_config_path(f"{JOB}.2")
    stack_file.parent.mkdir(parents=True, exist_ok=True)
    stack_file.write_text(
        "config:\n  spotroute:job:\n    command: [python, train.py]\n    env:\n"
        "      SPOTROUTE_HANDOVER_ID: m-1\n      SPOTROUTE_RESTORE_STEP: '40'\n"
        "      SOMETHING_ELSE: old\n"
    )
    job = load_job(JOB_FILE)
    kept = with_move_env(job, project, f"{JOB}.2")
    assert kept.run.env == {**job.run.env, "SPOTROUTE_HANDOVER_ID": "m-1",
                            "SPOTROUTE_RESTORE_STEP": "40"}  # fmt: skip
    assert with_move_env(job, project, JOB) is job  # a first stack: nothing to keep
