"""How `route status` looks: the jobs table and one job's decisions and journals (--history)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from router.cli.render import TEXT_CHARS, _console, age, money, reason_text, safe


def _decision_cell(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    reason = reason_text(d.get("action"), d.get("reason"))
    return f"{d.get('action')}: {reason[:70]}{'…' if len(reason) > 70 else ''}"


def status_table(statuses: Sequence[Any], now: datetime) -> None:
    from rich.table import Table

    console = _console()
    if not statuses:
        console.print("no jobs deployed — `route deploy JOB_FILE`")
        return
    table = Table(title="jobs")
    for name, justify in [
        ("job", "left"),
        ("state", "left"),
        ("placement", "left"),
        ("market", "left"),
        ("$/h then", "right"),
        ("best $/h now", "right"),
        ("up since", "left"),
        ("cost so far", "right"),
        ("last decision", "left"),
    ]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for s in statuses:
        place = " ".join(x for x in (s.cloud, s.region, s.zone, s.instance_type) if x) or "-"
        table.add_row(
            s.job,
            s.state,
            place,
            s.market or "-",
            money(s.price_per_hour) if s.price_per_hour is not None else "-",
            money(s.best_price_now) if s.best_price_now is not None else "-",
            f"{s.up_since:%Y-%m-%d %H:%M} ({age((now - s.up_since).total_seconds())})"
            if s.up_since
            else "-",
            money(s.cost_so_far) if s.cost_so_far is not None else "-",
            _decision_cell(s.last_decision),
        )
    console.print(table)
    for s in statuses:
        if s.locked_by:
            console.print(
                f"[yellow]{s.job}[/] is locked by {safe(s.locked_by)} — if that command died, "
                f"run `route unlock {s.job}`"
            )
        if s.problem:
            console.print(f"[red]{s.job}[/]: {safe(s.problem, limit=TEXT_CHARS)}")
        if s.torn_down:
            t = s.torn_down
            when = f"at {str(t['at'])[:16].replace('T', ' ')} UTC" if t.get("at") else "now"
            kept = f"; checkpoints kept at {safe(t['checkpoints'])}" if t.get("checkpoints") else ""
            console.print(
                f"[red]{s.job}[/] crashed ({safe(str(t.get('why') or ''), limit=TEXT_CHARS)}): "
                f"route watch tore its placement down {when} so nothing bills{kept} — fix the "
                f"job, then `route deploy` it again (`route destroy {s.job}` forgets it)"
            )


def history(data: dict[str, Any]) -> None:
    from rich.table import Table

    console = _console()
    decisions = data.get("decisions") or []
    if not decisions:
        console.print(f"no decisions recorded for {data['job']} yet — `route watch --once`")
    else:
        table = Table(title=f"{data['job']}: decisions, oldest first")
        for name in ("at", "by", "action", "reason"):
            table.add_column(name)
        for d in decisions:
            at = str(d.get("at", ""))[:19].replace("T", " ")
            action = d.get("action", "")
            table.add_row(
                at, str(d.get("by", "")), str(action), reason_text(action, d.get("reason"))
            )
        console.print(table)
    for j in data.get("journals") or []:
        steps = ", ".join(
            name for name, r in (j.get("steps") or {}).items() if r.get("state") == "done"
        )
        console.print(
            f"journal {j['id']} ({j['kind']} {j['from_stack']} → {j['to_stack']}): "
            f"{j['outcome']}; steps done: {steps}"
        )
