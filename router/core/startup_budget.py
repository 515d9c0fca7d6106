"""How long a new placement may take to come up: budgets counted from the cloud's own phases.

`pulumi up` returns while a cloud's nodes are still provisioning (an EC2 instant fleet returns
pending instances, a GCE MIG does not wait for its VMs), so a migration waits in two phases,
each with its own budget (docs/migration.md):

  1. nodes running — from `up` returning until the node poller says every node runs:
     budget_factor × boot;
  2. job restored — from then until the job's resume record: budget_factor × (image pull
     + secret fetch + the job's own restore_overhead).

The expected figures per cloud are router/data/node_startup.csv (with their sources); the
factor and fixed timeouts come from spotroute.yaml `startup:`, a job's own from `migration:`.
A budget never goes below the floors (the router's own polling and a process start).

Pure: figures in, budgets out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from router.core.csv_rows import csv_rows
from router.core.errors import BadInput

COLUMNS = ("cloud", "boot_s", "pull_s_per_gb", "image_gb", "secrets_s", "notice_s")
DEFAULT_BUDGET_FACTOR = 2.0
MIN_NODES_S = 30.0  # real seconds: a node process, or a cloud API answering the first poll
MIN_RESTORE_S = 120.0  # real seconds: start the job's interpreter, import its libraries


@dataclass(frozen=True, slots=True)
class StartupFigures:
    """What one cloud's nodes take (seconds), from router/data/node_startup.csv."""

    cloud: str
    boot_s: float
    pull_s_per_gb: float
    image_gb: float  # assumed when a job names an image but not its size
    secrets_s: float
    notice_s: float  # spot notice lead time


@dataclass(frozen=True, slots=True)
class StartupBudget:
    """The two waits of a new placement, in the target's seconds (simulated on an accelerated
    local target: `time_scale` of them per real second)."""

    cloud: str
    nodes_s: float  # from `up` returning until every node runs
    restore_s: float  # from every node running until the job says it restored
    parts: tuple[tuple[str, float], ...]  # what the budgets are made of: (name, seconds)
    time_scale: float = 1.0
    nodes_basis: str = ""  # how nodes_s was reached, for messages: "2 × boot 150 s (aws)"
    restore_basis: str = ""

    def real_nodes_s(self) -> float:
        return max(MIN_NODES_S, self.nodes_s / self.time_scale)

    def real_restore_s(self) -> float:
        return max(MIN_RESTORE_S, self.restore_s / self.time_scale)

    def said(self, real_s: float) -> str:
        """`300 s` — on the target's clock, with the real seconds when it is accelerated."""
        if self.time_scale == 1:
            return f"{real_s:.0f} s"
        scale = self.time_scale
        return f"{real_s * scale:.0f} s ({real_s:.0f} s real at time scale {scale:g})"

    def to_json(self) -> dict[str, Any]:
        return {
            "cloud": self.cloud,
            "nodes_s": self.nodes_s,
            "restore_s": self.restore_s,
            "parts": dict(self.parts),
            "time_scale": self.time_scale,
            "nodes_basis": self.nodes_basis,
            "restore_basis": self.restore_basis,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StartupBudget:
        return cls(
            cloud=str(data.get("cloud", "")),
            nodes_s=float(data["nodes_s"]),
            restore_s=float(data["restore_s"]),
            parts=tuple((str(k), float(v)) for k, v in dict(data.get("parts") or {}).items()),
            time_scale=float(data.get("time_scale", 1.0)),
            nodes_basis=str(data.get("nodes_basis", "")),
            restore_basis=str(data.get("restore_basis", "")),
        )


def startup_budget(
    figures: StartupFigures,
    *,
    image: str,
    image_gb: float | None,
    secrets: bool,
    restore_overhead_s: float,
    factor: float = DEFAULT_BUDGET_FACTOR,
    nodes_timeout_s: float | None = None,
    restore_timeout_s: float | None = None,
    time_scale: float = 1.0,
) -> StartupBudget:
    """The budgets of a placement on `figures`' cloud for a job (its image, secrets, restore).

    A fixed timeout (a job's `migration.nodes_timeout` / `restore_timeout`, or the org's)
    replaces the computed budget of its phase.
    """
    boot = figures.boot_s
    pull = figures.pull_s_per_gb * (figures.image_gb if image_gb is None else image_gb)
    pull = pull if image else 0.0
    fetch = figures.secrets_s if secrets else 0.0
    parts = (("boot", boot), ("pull", pull), ("secrets", fetch), ("restore", restore_overhead_s))
    where = f"({figures.cloud})"
    if nodes_timeout_s is None:
        nodes_s, nodes_basis = factor * boot, f"{factor:g} × boot {boot:.0f} s {where}"
    else:
        nodes_s, nodes_basis = nodes_timeout_s, "the nodes_timeout set"
    if restore_timeout_s is None:
        restore_s = factor * (pull + fetch + restore_overhead_s)
        restore_basis = (
            f"{factor:g} × (pull {pull:.0f} s + secrets {fetch:.0f} s + restore "
            f"{restore_overhead_s:.0f} s) {where}"
        )
    else:
        restore_s, restore_basis = restore_timeout_s, "the restore_timeout set"
    return StartupBudget(
        figures.cloud, nodes_s, restore_s, parts, time_scale, nodes_basis, restore_basis
    )


def parse_startup_csv(text: str, name: str) -> dict[str, StartupFigures]:
    """cloud → its figures; BadInput naming the line of a bad row."""
    found: dict[str, StartupFigures] = {}
    for number, row in csv_rows(text, name, COLUMNS):
        try:
            values = [float(row[c]) for c in COLUMNS[1:]]
        except ValueError:
            raise BadInput(f"{name} line {number}: a figure is not a number — fix it") from None
        if any(v < 0 for v in values):
            raise BadInput(f"{name} line {number}: figures are seconds (or GB) ≥ 0")
        found[row["cloud"]] = StartupFigures(row["cloud"], *values)
    return found
