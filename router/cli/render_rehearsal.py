"""`route rehearse`'s output: job by job and in total, realised beside predicted, the named
causes of each difference, the guarantees and the targets (JSON shape: docs/cli-json.md).
rich is imported inside the functions."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router.flows.rehearse_result import RehearsalReport


class Progress:
    """One line on stderr: the market's clock and the jobs finished."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._task: Any = None

    def update(self, now: datetime, finished: int, jobs: int) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import Progress as Bar

            self._bar = Bar(console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("rehearsing", total=jobs)
        what = f"rehearsing: market clock {now:%Y-%m-%d %H:%M}"
        self._bar.update(self._task, completed=finished, description=what)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _mark(ok: bool) -> str:
    return "yes" if ok else "NO"


def _kept(value: bool | None) -> str:
    return "-" if value is None else ("kept" if value else "missed")


def rehearsal_tables(report: RehearsalReport) -> None:
    """The per-job table, the totals, the causes, the guarantees and the targets."""
    from rich.table import Table

    from router.cli.render_backtest import _console

    v, log = report.verdict, report.log
    console = _console()
    table = Table(
        title=f"Rehearsal of {report.workload} at {report.speed:g}×"
        + (" with chaos" if report.chaos else "")
        + (f", {report.watchers} watchers" if report.watchers > 1 else "")
        + f": {report.trace_start:%Y-%m-%d %H:%M} → {report.trace_end:%Y-%m-%d %H:%M} "
        f"(realised | predicted)"
    )
    columns = (
        "job",
        "realised $",
        "predicted $",
        "diff",
        "placements",
        "moves",
        "preemptions",
        "restores",
        "work lost h",
        "deadline",
        "finished",
    )
    for name in columns:
        table.add_column(name, justify="left" if name == "job" else "right")
    for j in v.jobs:
        r, p = j.ran, j.predicted
        table.add_row(
            j.ran.job,
            f"{r.cost:,.2f}",
            f"{p.cost:,.2f}",
            f"{j.cost_diff_pct:+.1f} %",
            f"{len(r.stints)} | {len(j.predicted_stints)}",
            f"{r.moves} | {p.migrations}",
            f"{r.preemptions}"
            + (f"+{r.chaos_preemptions}" if r.chaos_preemptions else "")
            + f" | {p.interruptions}",
            str(r.restores),
            f"{r.work_lost_h:.2f} | {p.recomputed_h:.2f}",
            f"{_kept(r.deadline_kept)} | {_kept(j.predicted_deadline_kept)}",
            f"{_mark(r.finished and r.digest_ok)} | {_mark(p.finished)}",
        )
    table.add_row(
        "total",
        f"{v.realised:,.2f}",
        f"{v.predicted:,.2f}",
        f"{v.diff_pct:+.1f} %",
        *("",) * (len(columns) - 4),
    )
    console.print(table)
    for j in v.jobs:
        for cause in j.causes:
            console.print(f"{j.ran.job}: {cause}")
    g = v.guarantees
    console.print(
        f"guarantees ({g.samples} samples): checkpoints never went back: "
        f"{_mark(not g.checkpoint_regressions)}; never two placements training: "
        f"{_mark(not g.two_training)}; two placements only inside a move: "
        f"{_mark(not g.two_placements)}; nothing left over: {_mark(not g.leftovers)}"
    )
    for line in (*g.checkpoint_regressions, *g.two_training, *g.two_placements, *g.leftovers):
        console.print(f"  {line}")
    console.print(
        f"targets: cost within {v.tolerance_pct:g} %: {_mark(v.cost_met)} "
        f"({v.diff_pct:+.1f} %); same deadline outcomes: {_mark(v.deadlines_met)}; same "
        f"preemptions per job: {_mark(v.preemptions_met)}; every difference named: "
        f"{_mark(v.causes_named)}; every job finished with all its work: "
        f"{_mark(v.all_finished)}"
    )
    m = report.measured
    restarts = list(m.restore_s.values())
    paid = sum(restarts) / len(restarts) / 60 if restarts else 0.0
    console.print(
        f"measured (simulated), on average: a move's or re-placement's launch took "
        f"{m.launch_s / 60:.1f} min from the decision until its new stack was up, a restart paid "
        f"{paid:.1f} min and a hand-over {m.handover_s / 60:.1f} min; a job was decided on again "
        f"{m.decision_period_s / 60:.1f} min later (all fed to the prediction)"
    )
    console.print(
        f"ran {log.wall_s / 60:.1f} min wall time, {log.ended_by}; watcher started "
        f"{log.watcher_runs}×, killed {len(log.watcher_kills)}×; "
        f"{len(log.chaos_preemptions)} preemption(s) without notice"
    )
    console.print(
        f"route backtest of the same jobs as the workload is written (its clouds, egress and "
        f"phase times): ${report.backtest_as_written:,.2f}"
    )
    for note in v.notes:
        console.print(f"note: {note}")
    console.print(f"kept in {report.directory}")
