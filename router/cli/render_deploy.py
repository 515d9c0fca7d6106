"""How changing a stack looks: live engine progress (with its notices), the deploy proposal, the
preview summary, failover tries and outcomes, and the migrate / watch lines (`route deploy`,
`preview`, `destroy`, `bootstrap`, `migrate`, `watch`).
"""

from __future__ import annotations

from typing import Any

from router.cli.render import TEXT_CHARS, _console, age, money, safe


class EngineProgress:
    """Live engine progress on stderr: counts by operation, the current resource, elapsed time.

    Engine events arrive on a background thread (Automation API); rich's Live redraws from its own
    thread, so this only updates plain fields under a lock.
    """

    def __init__(self, title: str) -> None:
        import threading
        import time

        from rich.live import Live

        self.title = title
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._clock = time.monotonic
        self.counts: dict[str, int] = {}
        self.current = ""
        self.diagnostics: list[str] = []
        self._live = Live(
            self._render(),
            console=_console(stderr=True),
            refresh_per_second=8,
            transient=True,
            get_renderable=self._render,
        )

    def _render(self) -> Any:
        from rich.text import Text

        with self._lock:
            counts = ", ".join(f"{n} {op}" for op, n in sorted(self.counts.items())) or "starting"
            elapsed = self._clock() - self._started
            return Text(f"{self.title}: {counts}  {self.current}  {elapsed:.0f}s")

    def __call__(self, event: Any) -> None:
        with self._lock:
            if event.prelude_event is not None:  # a new engine operation (preview, then update)
                self.counts = {}
            if event.resource_pre_event is not None:
                meta = event.resource_pre_event.metadata
                self.current = f"{meta.op.value} {meta.urn.rsplit('::', 1)[-1]}"
            elif event.res_outputs_event is not None:
                meta = event.res_outputs_event.metadata
                op = meta.op.value
                # The stack itself is not a resource the user manages (the engine's summary agrees).
                if op not in ("same", "read", "refresh") and meta.type != "pulumi:pulumi:Stack":
                    self.counts[op] = self.counts.get(op, 0) + 1
            elif event.diagnostic_event is not None and event.diagnostic_event.severity == "error":
                self.diagnostics.append(event.diagnostic_event.message.strip())

    def notice(self, line: str) -> None:
        """A one-line notice (a lock cleared, processes stopped) printed above the progress."""
        self._live.console.print(f"[yellow]note[/]: {safe(line, limit=TEXT_CHARS)}")

    def __enter__(self) -> EngineProgress:
        self._live.__enter__()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._live.__exit__(None, None, None)
        if exc_type is not None:  # the error line says what happened
            return
        elapsed = self._clock() - self._started
        counts = ", ".join(f"{n} {op}" for op, n in sorted(self.counts.items())) or "no changes"
        _console(stderr=True).print(f"{self.title}: {counts} in {elapsed:.1f}s")


def proposal(p: Any) -> None:
    """The chosen placement and the stack config change, before the preview."""
    console = _console()
    c = p.chosen
    for o in p.refreshed:
        console.print(
            f"  refreshed {o.cloud}: "
            + (f"[yellow]{safe(o.error)}[/]" if o.error else f"{o.quotes_stored} quotes")
        )
    fresh = f"{c.price_source}, {age(c.price_age_s)} old"
    if c.stale:
        fresh += ", [yellow]stale[/]" + (
            " — deploying anyway (--allow-stale)" if p.allowed_stale else ""
        )
    console.print(
        f"[bold]{safe(p.job.name)}[/] → {c.cloud} {safe(c.region)} {safe(c.zone or '')} "
        f"{safe(c.instance_type)} {c.market} at {money(c.price_per_hour)}/h ({fresh}), "
        f"expected total {money(c.total_cost)}"
    )
    if p.config_diff:
        console.print(f"config changes in {p.stack_file.name}:")
        for line in p.config_diff:
            color = {"+": "green", "-": "red", "~": "yellow"}[line[0]]
            shown = safe(line, limit=TEXT_CHARS)
            console.print(f"  [{color}]{shown}[/]", markup=True, highlight=False)
    else:
        console.print(f"config in {p.stack_file.name} unchanged")


def review_summary(r: Any) -> None:
    console = _console()
    counts = ", ".join(f"{n} to {op}" for op, n in sorted(r.counts.items())) or "no changes"
    console.print(f"preview: {counts}")
    for line in r.config_diff:  # secrets written now (the proposal's diff cannot show them)
        if line.endswith("[secret]"):
            console.print(f"  [yellow]{safe(line)}[/]", markup=True, highlight=False)
    for name, changes in r.by_category.items():
        for c in changes:
            console.print(f"  {c.op:>8} {name:<17} {safe(c.type)} {safe(c.name)}")
    for v in r.policy_violations:
        console.print(f"  [red]policy[/] {safe(v, limit=TEXT_CHARS)}")


def launch_try(t: Any) -> None:
    """One placement tried by the failover: launched, refused (and blocked), or skipped."""
    console = _console()
    p = t.placement
    where = f"{t.where()} {p.market} {money(p.price_per_hour)}/h"
    if t.outcome == "launched":
        console.print(f"try {t.number}: {where}: [green]launched[/]")
    elif t.outcome == "refused":
        until = f"; {t.block.where()} blocked until {t.block.until:%H:%M} UTC" if t.block else ""
        console.print(f"try {t.number}: {where}: [red]refused[/] — {t.reason}{until}")
    else:
        console.print(f"skip {where}: {t.reason}")


def deploy_outcome(o: Any) -> None:
    console = _console()
    if not o.applied:
        console.print(
            "nothing deployed (dry run or declined); stack config left as it was — "
            "`route plan JOB_FILE --write` writes it for review"
        )
        return
    console.print(
        f"[green]deployed[/] {o.job}: "
        + ", ".join(
            f"{k}={safe(v)}"
            for k, v in sorted(o.outputs.items())
            if k in ("groupId", "checkpointUrl", "identity")
        )
    )


# --- migrate / watch ----------------------------------------------------------------------------


def migration_plan(job: str, target: Any, record: dict[str, Any]) -> None:
    console = _console()
    here = " ".join(str(record.get(k)) for k in ("cloud", "region", "market") if record.get(k))
    parts = (target.cloud, target.region, target.zone or "", target.market)
    there = " ".join(x for x in parts if x)
    console.print(
        f"[bold]{job}[/]: {here} {money(float(record.get('price_per_hour') or 0))}/h → "
        f"{there} {money(target.price_per_hour)}/h"
    )


def journal_step(step: str, what: str) -> None:
    _console().print(f"  {step:<22} {what}", highlight=False)


def migration_outcome(journal: Any, timings: dict[str, float]) -> None:
    console = _console()
    total = sum(timings.values())
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in timings.items() if v >= 0.05)
    if journal.outcome == "done":
        console.print(
            f"[green]migrated[/] {journal.job} → {journal.to_stack} in {total:.1f}s ({phases})"
        )
    else:
        console.print(
            f"[red]{journal.outcome}[/] {journal.job}: {journal.rollback_reason or 'stopped'}"
        )


def watch_report(report: Any) -> None:
    console = _console()
    color = {"stay": "dim", "wait": "yellow", "error": "red", "skipped": "dim"}.get(
        report.action, "green"
    )
    tail = f" [{report.outcome}]" if report.outcome else ""
    console.print(
        f"{report.job}: [{color}]{report.action}[/]{tail} — {report.reason}", highlight=False
    )
