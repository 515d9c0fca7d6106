"""Helpers of the local-market engine tests: a trace, the example trainer, its checkpoints."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.engine.engine_cli import REPO, Result, Route, no_traceback

TRAIN = REPO / "examples" / "local-market" / "train.py"
PYTHON = sys.executable


def expected_w(step: int) -> int:
    """The trainer's parameter after `step` uninterrupted steps (examples/local-market/train.py)."""
    w = 1
    for i in range(step):
        w = (w * 31 + i) % 1000003
    return w


def write_market(route: Route, rows: list[tuple[str, str, float, int]]) -> None:
    """spotroute.yaml with a local market priced by trace.csv: (region, market, $/h, capacity)."""
    (route.project / "spotroute.yaml").write_text(
        "clouds: [local]\nlocal_market:\n  trace: trace.csv\n"
    )
    lines = ["at,region,market,price_per_hour,capacity"]
    lines += [f"0s,{r},{m},{p},{c}" for r, m, p, c in rows]
    (route.project / "trace.csv").write_text("\n".join(lines) + "\n")


def write_trainer_job(
    route: Route, name: str, *, steps: int = 0, step_s: float = 0.05, every: int = 4,
    cooldown: str = "10m", min_savings_pct: float = 20,
) -> Path:  # fmt: skip
    """A spot job running the example trainer from the project directory."""
    shutil.copy(TRAIN, route.project / "train.py")
    doc: dict[str, Any] = {
        "name": name,
        "resources": {"accelerators": "A100-80GB:8", "clouds": ["local"]},
        "market": "spot",
        "duration_hours": 4,
        "checkpoint": {"interval": "2s", "restore_overhead": "30s", "url": "auto"},
        "migration": {"min_savings_pct": min_savings_pct, "cooldown": cooldown},
        "run": {
            "command": ["/bin/sh", "-c", f'exec {PYTHON} "$SPOTROUTE_PROJECT_DIR/train.py"'],
            "env": {"STEPS": str(steps), "STEP_S": str(step_s), "CHECKPOINT_EVERY": str(every)},
        },
    }
    path = route.project / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def placement(route: Route, job: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((route.home / "placements" / f"{job}.json").read_text())
    return data


def checkpoints(route: Route, job: str) -> Path:
    return route.home / "checkpoints" / job / job


def latest_state(route: Route, job: str) -> tuple[int, int]:
    """(step, w) of the newest complete checkpoint."""
    from router.config.checkpoints import latest_checkpoint

    info = latest_checkpoint(checkpoints(route, job))
    assert info is not None, "no complete checkpoint"
    state = json.loads((Path(info.path) / "state.json").read_text())
    return info.step, int(state["w"])


def has_checkpoint(route: Route, job: str) -> bool:
    """Whether the job has written a complete checkpoint yet."""
    try:
        latest_state(route, job)
    except AssertionError:
        return False
    return True


def job_stacks(route: Route, job: str) -> list[str]:
    return [s for s in route.stacks_in_backend() if s == job]


def backend_stacks(route: Route) -> list[str]:
    """Stack names in the backend, dots kept (`job.2`)."""
    root = route.home / "state" / ".pulumi" / "stacks"
    if not root.is_dir():
        return []
    names = []
    for p in root.rglob("*"):
        if p.name.endswith(".json"):
            names.append(p.name[: -len(".json")])
        elif p.name.endswith(".json.gz"):
            names.append(p.name[: -len(".json.gz")])
    return sorted(names)


def open_journal(route: Route, job: str) -> dict[str, Any] | None:
    """The job's open journal, read through the record store of the default backend."""
    from router.engine.records import FileRecords

    return FileRecords(route.home).get(f"jobs/{job}/journal")


def two_watchers_at_once(route: Route) -> tuple[list[Result], list[str]]:
    """`route watch --once --json` twice at the same moment; (results, every job's action)."""
    started = [route.start("watch", "--once", "--json") for _ in range(2)]
    results = []
    for proc in started:
        out, err = proc.communicate(timeout=240)
        results.append(Result(("watch", "--once"), proc.returncode, out, err))
    for r in results:
        assert r.returncode == 0, r
        no_traceback(r)
    actions = [report["action"] for r in results for report in r.json()]
    assert actions.count("move") == 1, actions
    assert set(actions) <= {"move", "stay", "skipped"}, actions
    return results, actions
