"""`route preempt JOB --node N`: only node N of a local group is reclaimed (marked, signalled,
gone), the others run on; a node the group does not have is one line, exit 2, nothing touched.
Real processes stand for the nodes; the placement record is the engine's own (local backend)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.local_nodes import process_alive, start_ticks
from router.config.project import Project
from router.contract.local_node import RECLAIM_FILE, RUNNING, STATE_FILE, NodeRecord, group_id
from router.flows.jobs import engine_for
from router.flows.live_placement import placement_key
from tests.unit.cli_harness import isolate, route

JOB = "pair"


@pytest.fixture
def project(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    isolate(monkeypatch, tmp_path)
    work = tmp_path / "work"
    (work / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    return work


@pytest.fixture
def group(project: Path, tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """A deployed two-node local group whose nodes are `sleep` processes."""
    launch = tmp_path / "sandbox" / "g-1"
    procs = []
    for node in range(2):
        proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
        procs.append(proc)
        node_dir = launch / f"node-{node}"
        node_dir.mkdir(parents=True)
        record = NodeRecord(JOB, JOB, node, 2, proc.pid, start_ticks(proc.pid), RUNNING,
                            "local-a", "spot", 0, str(node_dir))  # fmt: skip
        (node_dir / STATE_FILE).write_text(record.to_text())
    engine_for(Project(project)).records().put(
        placement_key(JOB),
        {"stack": JOB, "cloud": "local", "region": "local-a", "market": "spot",
         "outputs": {"groupId": group_id(str(launch))}},
    )  # fmt: skip
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def test_only_the_named_node_is_reclaimed(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    group: list[subprocess.Popen[bytes]],
) -> None:
    run = route(monkeypatch, capsys, "preempt", JOB, "--node", "1", "--grace", "5s", "--json")

    assert run.code == 0, run.err
    out = run.json()
    assert (out["nodes"], out["node"], out["pid"]) == (1, 1, group[1].pid)
    assert group[1].wait(timeout=10) == -15  # the notice: SIGTERM
    assert group[0].poll() is None  # its peer runs on
    node_dirs = sorted(Path(p) for p in _node_dirs())
    assert [(d / RECLAIM_FILE).exists() for d in node_dirs] == [False, True]
    decision = route(monkeypatch, capsys, "status", JOB, "--history", "--json")
    assert "local preemption of node 1" in decision.out


def _node_dirs() -> list[str]:
    return [str(p) for p in Path.cwd().parent.glob("sandbox/g-1/node-*")]


@pytest.mark.parametrize("node", ["2", "-1"])
def test_a_node_the_group_does_not_have_is_one_line_and_touches_nothing(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    group: list[subprocess.Popen[bytes]],
    node: str,
) -> None:
    run = route(monkeypatch, capsys, "preempt", JOB, "--node", node)

    assert run.code == 2, (run.out, run.err)
    assert len(run.err_lines) == 1 and "Traceback" not in run.err, run.err
    assert run.err_lines[0].startswith("error: --node: "), run.err_lines
    assert all(proc.poll() is None for proc in group)
    assert all(process_alive(p.pid, start_ticks(p.pid)) for p in group)
    assert not any((Path(d) / RECLAIM_FILE).exists() for d in _node_dirs())
