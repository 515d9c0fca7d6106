"""How changing a stack looks: live engine progress (with its notices), the deploy proposal, the
preview summary, failover tries and outcomes, the migrate / watch lines (`route deploy`,
`preview`, `destroy`, `bootstrap`, `migrate`, `watch`), and the stack file `route plan --write`
wrote.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from router.cli.render import TEXT_CHARS, _console, age, money, reason_text, safe

if TYPE_CHECKING:
    from router.config.project import Project
    from router.flows.proposals import ReviewedStack


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
    reason = reason_text(report.action, report.reason)
    console.print(f"{report.job}: [{color}]{report.action}[/]{tail} — {reason}", highlight=False)


# --- plan --write -------------------------------------------------------------------------------


def _shown_path(path: Any, project: Project) -> str:
    try:
        return str(path.relative_to(project.root))
    except ValueError:
        return str(path)


def stack_file_json(reviewed: ReviewedStack | None, project: Project | None) -> dict[str, Any]:
    """`stack_file` of `route plan --write --json`; `path` null when nothing fits."""
    if reviewed is None or project is None:
        return {"path": None, "written": False, "config_diff": [], "secrets_left_to_deploy": []}
    w = reviewed.write
    return {
        "path": _shown_path(w.path, project),
        "written": w.written,
        "config_diff": list(w.config_diff),
        "secrets_left_to_deploy": list(reviewed.proposal.job.run.secrets) if w.secrets_left else [],
    }


def stack_file_lines(reviewed: ReviewedStack, project: Project) -> None:
    """What `route plan --write` wrote, and the next step of the review loop."""
    console = _console()
    w, p = reviewed.write, reviewed.proposal.chosen
    where = safe(f"{p.cloud} {p.zone or p.region} {p.instance_type} {p.market}")
    shown = safe(_shown_path(w.path, project))
    if not w.written:
        console.print(f"{shown} already holds this placement's config ({where}): unchanged")
    else:
        console.print(f"[green]wrote[/] {shown} for review ({where}, {money(p.price_per_hour)}/h)")
        for line in w.config_diff:
            console.print(f"  {safe(line, limit=TEXT_CHARS)}")
    if w.secrets_left:
        names = ", ".join(reviewed.proposal.job.run.secrets)
        console.print(
            f"  secrets not written: {safe(names)} — `route deploy` encrypts them into the file "
            "(only the engine can)"
        )
    if p.stale:
        console.print(
            "  [yellow]priced on a stale quote[/]: `route deploy` refreshes prices first and may "
            "choose another placement; `route prices refresh`, then write again to review that"
        )
    job = safe(reviewed.proposal.job.name)  # review takes the job; it finds the live stack
    console.print(
        f"next: commit {shown}, then `route review {job} --against main` (exit 3 when it widens "
        "a grant); deploy after the merge"
    )
