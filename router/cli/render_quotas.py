"""How quota results look: a rich table for people, JSON (docs/cli-json.md) for machines."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from router.cli.render import _console, age, refresh_line
from router.core.quotas import UNITS, LaunchFailure

if TYPE_CHECKING:
    from router.flows.quotas import QuotaRow, QuotaTable
    from router.prices.quotas.book import QuotaRefreshOutcome


def _age_s(moment: datetime, now: datetime) -> float:
    return max(0.0, (now - moment).total_seconds())


def quota_row_json(row: QuotaRow, now: datetime) -> dict[str, Any]:
    r, d = row.reading, row.definition
    return {
        "cloud": r.cloud,
        "region": r.region,
        "quota": r.quota,
        "name": d.name if d is not None else r.name,
        "unit": d.unit if d is not None else r.unit,
        "limit": r.limit,
        "usage": r.usage,
        "free": r.free,
        "source": r.source,
        "observed_at": r.observed_at.isoformat(),
        "age_s": round(_age_s(r.observed_at, now)),
        "request": d.how_to_request(r.region, r.limit + 1) if d is not None else None,
    }


def failure_json(f: LaunchFailure, now: datetime) -> dict[str, Any]:
    return {
        "cloud": f.cloud,
        "region": f.region,
        "quota": f.quota,
        "instance_type": f.instance_type,
        "market": f.market,
        "needed": f.needed,
        "message": f.message,
        "observed_at": f.observed_at.isoformat(),
        "age_s": round(_age_s(f.observed_at, now)),
    }


def quotas_json(table: QuotaTable) -> dict[str, Any]:
    return {
        "quotas": [quota_row_json(row, table.now) for row in table.rows],
        "launch_failures": [failure_json(f, table.now) for f in table.failures],
    }


def quota_table(table: QuotaTable) -> None:
    from rich.table import Table

    console = _console()
    if not table.rows and not table.failures:
        console.print(
            "no quotas known — run `route quotas refresh` (until then quotas are unknown and "
            "never reject a placement)"
        )
        return
    if table.rows:
        out = Table(title=f"{len(table.rows)} quotas (limit and usage as last read)")
        for name, justify in [
            ("cloud", "left"),
            ("region", "left"),
            ("quota", "left"),
            ("name", "left"),
            ("limit", "right"),
            ("used", "right"),
            ("free", "right"),
            ("unit", "left"),
            ("age", "right"),
        ]:
            out.add_column(name, justify=justify)  # type: ignore[arg-type]
        for row in table.rows:
            r, d = row.reading, row.definition
            unit = d.unit if d is not None else r.unit
            free = f"{r.free:g}"
            out.add_row(
                r.cloud,
                r.region,
                r.quota,
                d.name if d is not None else r.name,
                f"{r.limit:g}",
                f"{r.usage:g}",
                f"[red]{free}[/]" if r.free <= 0 else free,
                UNITS.get(unit, unit),
                age(_age_s(r.observed_at, table.now)),
            )
        console.print(out)
    for f in table.failures:
        console.print(
            f"[yellow]launch failed[/] {f.cloud} {f.region} {f.instance_type} ({f.market}) on "
            f"{f.quota}, {age(_age_s(f.observed_at, table.now))} ago: {f.message or '-'}"
        )


def refresh_json(outcome: QuotaRefreshOutcome) -> dict[str, Any]:
    return {
        "cloud": outcome.cloud,
        "regions": list(outcome.regions),
        "quotas": outcome.quotas,
        "readings_stored": outcome.readings_stored,
        "elapsed_s": round(outcome.elapsed_s, 3),
        "error": outcome.error,
    }


def refresh_summary(outcomes: Sequence[QuotaRefreshOutcome], *, prefix: str = "") -> None:
    console = _console()
    for o in outcomes:
        refresh_line(
            console,
            f"{o.cloud} quotas",
            o.error,
            f"{o.readings_stored} readings of {o.quotas} quotas in {len(o.regions)} regions in "
            f"{o.elapsed_s:.1f}s",
            prefix=prefix,
        )
