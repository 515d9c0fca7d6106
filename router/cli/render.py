"""How prices and plans look: rich tables for people, JSON (docs/cli-json.md) for machines.

Also the pieces every render module uses (the console, `safe`, `money`, `age`, `print_json`);
stack changes render in render_deploy.py, `route status` in render_status.py.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from router.core.offers import Offer, Quote

if TYPE_CHECKING:
    from rich.console import Console

    from router.core.data_access import DataAccess
    from router.core.placement import Placement
    from router.flows.plan import PlanReport
    from router.prices.book import RefreshOutcome
    from router.prices.imports import ImportResult


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    # Piped output keeps whole rows (rich would otherwise squeeze tables into 80 columns).
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 200
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width, emoji=False)


# A single value (a region, a field) is cut at VALUE_CHARS; a sentence spotroute composed around
# such values (a planner reason, a data-access summary, a quota request command) at TEXT_CHARS.
VALUE_CHARS = 200
TEXT_CHARS = 2000


def safe(value: object, *, limit: int = VALUE_CHARS) -> str:
    """A user-supplied value for a rich console: controls escaped, no markup, cut to `limit`."""
    from rich.markup import escape

    from router.core.user_values import printable

    return escape(printable(str(value), limit=limit))


def print_json(data: Any) -> None:
    from router.core.strict_json import dumps

    sys.stdout.write(dumps(data) + "\n")


def notice(line: str) -> None:
    """A one-line notice on stderr (outside an engine progress display)."""
    _console(stderr=True).print(f"[yellow]note[/]: {safe(line, limit=TEXT_CHARS)}")


def warning(line: str) -> None:
    """A one-line warning on stderr: valid input that is unwise; the exit code stays 0."""
    _console(stderr=True).print(f"[yellow]warning[/]: {safe(line, limit=TEXT_CHARS)}")


def reason_text(action: object, reason: object) -> str:
    """A decision's reason for a line that shows its action already: decide() starts most
    reasons with the action ("stay: …", "stay on …"), which would then read twice."""
    text = str(reason or "")
    for lead in (f"{action}: ", f"{action} "):
        if action and text.startswith(lead):
            return text[len(lead) :]
    return text


def money(usd: float) -> str:
    return f"${usd:,.2f}"


def age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.0f}d"


# --- prices -------------------------------------------------------------------------------------


def offer_json(offer: Offer, now: datetime, max_age_s: float) -> dict[str, Any]:
    age_s = offer.age_s(now)
    return {
        "cloud": offer.cloud,
        "region": offer.region,
        "zone": offer.zone,
        "instance_type": offer.instance_type,
        "gpu": offer.gpu,
        "gpu_count": offer.gpu_count,
        "market": offer.market,
        "price_per_hour": offer.price_per_hour,
        "source": offer.source,
        "observed_at": offer.observed_at.isoformat(),
        "age_s": round(age_s),
        "stale": age_s > max_age_s,
        "interruption_bucket": offer.interruption_bucket,
    }


def price_table(offers: Sequence[Offer], now: datetime, max_age_s: float, total: int) -> None:
    from rich.table import Table

    console = _console()
    if not offers:
        console.print(
            "no offers match — widen --gpu/--count/--clouds/--regions, or run "
            "`route prices refresh`"
        )
        return
    table = Table(title=f"{len(offers)} of {total} offers, cheapest first (USD per instance-hour)")
    for name, justify in [
        ("cloud", "left"),
        ("region", "left"),
        ("zone", "left"),
        ("instance type", "left"),
        ("gpu", "left"),
        ("market", "left"),
        ("$/h", "right"),
        ("$/gpu-h", "right"),
        ("interruptions", "left"),
        ("source", "left"),
        ("age", "right"),
    ]:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    stale_rows = 0
    for o in offers:
        age_s = o.age_s(now)
        stale = age_s > max_age_s
        stale_rows += stale
        table.add_row(
            o.cloud,
            safe(o.region),
            safe(o.zone or "-"),
            safe(o.instance_type),
            f"{o.gpu}×{o.gpu_count}",
            o.market,
            f"{o.price_per_hour:,.3f}",
            f"{o.price_per_hour / o.gpu_count:,.3f}",
            safe(o.interruption_bucket or "-"),
            safe(o.source),
            f"[yellow]{age(age_s)} stale[/]" if stale else age(age_s),
        )
    console.print(table)
    if stale_rows:
        console.print(
            f"[yellow]{stale_rows} quotes are older than {age(max_age_s)}[/]: "
            "run `route prices refresh` for live prices"
        )


def refresh_json(outcome: RefreshOutcome) -> dict[str, Any]:
    return {
        "cloud": outcome.cloud,
        "regions": list(outcome.regions),
        "instance_types": outcome.instance_types,
        "quotes_stored": outcome.quotes_stored,
        "elapsed_s": round(outcome.elapsed_s, 3),
        "error": outcome.error,
        "warnings": list(outcome.warnings),
    }


def refresh_line(
    console: Console, label: str, error: str | None, stored: str, *, prefix: str = ""
) -> None:
    """One refresh outcome (prices or quotas): its error in red, else what it stored in green."""
    if error:
        console.print(f"{prefix}[red]{label}[/]: {safe(error)}")
    else:
        console.print(f"{prefix}[green]{label}[/]: {stored}")


def refresh_summary(outcomes: Sequence[RefreshOutcome]) -> None:
    console = _console()
    for o in outcomes:
        refresh_line(
            console,
            o.cloud,
            o.error,
            f"{o.quotes_stored} quotes from {len(o.regions)} regions, {o.instance_types} "
            f"instance types in {o.elapsed_s:.1f}s",
        )
        for warning in o.warnings:
            console.print(f"  [yellow]{o.cloud}[/]: {safe(warning, limit=TEXT_CHARS)}")


def import_json(result: ImportResult) -> dict[str, Any]:
    return {
        "cloud": result.cloud,
        "quotes": len(result.quotes),
        "rows_read": result.rows_read,
        "rows_skipped": result.rows_skipped,
        "skipped_reasons": dict(result.skipped_reasons),
        "notes": list(result.notes),
    }


def import_summary(result: ImportResult) -> None:
    reasons = ", ".join(f"{n} {why}" for why, n in sorted(result.skipped_reasons.items()))
    line = (
        f"imported {len(result.quotes)} quotes ({result.cloud}) from {result.rows_read} rows, "
        f"skipped {result.rows_skipped}"
    )
    console = _console()
    console.print(safe(line + (f": {reasons}" if reasons else ""), limit=TEXT_CHARS))
    for note in result.notes:  # rows spotroute does not plan on, and why
        console.print(f"  [yellow]flagged[/] {safe(note, limit=TEXT_CHARS)}")


def quote_json(quote: Quote, now: datetime) -> dict[str, Any]:
    return {
        "cloud": quote.cloud,
        "region": quote.region,
        "zone": quote.zone,
        "instance_type": quote.instance_type,
        "market": quote.market,
        "price_per_hour": quote.price_per_hour,
        "source": quote.source,
        "observed_at": quote.observed_at.isoformat(),
        "age_s": round(quote.age_s(now)),
    }


def history_table(quotes: Sequence[Quote], now: datetime) -> None:
    from rich.table import Table

    console = _console()
    if not quotes:
        console.print("no cached quotes — run `route prices refresh` or `route prices import`")
        return
    table = Table(title="price history (USD per instance-hour)")
    for name in ("observed", "region", "zone", "market", "$/h", "source"):
        table.add_column(name)
    for q in quotes:
        table.add_row(
            q.observed_at.strftime("%Y-%m-%d %H:%M"),
            safe(q.region),
            safe(q.zone or "-"),
            q.market,
            f"{q.price_per_hour:,.4f}",
            safe(q.source),
        )
    console.print(table)


# --- plan ---------------------------------------------------------------------------------------


def placement_json(p: Placement) -> dict[str, Any]:
    """The `route plan --json` shape of a placement (unrounded USD, seconds)."""
    from router.core.placement import placement_site

    return {
        **placement_site(p),
        "price_per_hour": p.price_per_hour,
        "list_price_per_hour": p.list_price_per_hour,
        "node_count": p.node_count,
        "hours": p.hours,
        "compute_cost": p.compute_cost,
        "egress_cost": p.egress_cost,
        "storage_cost": p.storage_cost,
        "staging_cost": p.staging_cost,
        "interruption_cost": p.interruption_cost,
        "total_cost": p.total_cost,
        "price_source": p.price_source,
        "price_age_s": p.price_age_s,
        "stale": p.stale,
        "interruption_bucket": p.interruption_bucket,
        "interruptions_per_hour": p.interruptions_per_hour,
        "reasons": list(p.reasons),
        "quota": {"status": p.quota_status, "note": p.quota_note},
        "data": [data_access_json(d) for d in p.data],
    }


def data_access_json(access: DataAccess) -> dict[str, Any]:
    """The `data` entry of a placement in `route plan --json` (unrounded USD, hours)."""
    r, d = access.route, access.route.data
    return {
        "url": d.url,
        "size_gb": d.size_gb,
        "passes": d.passes,
        "source": {
            "url": r.source.url,
            "cloud": r.source.cloud,
            "region": r.source.region,
            "replica": r.source_index,
        },
        "access": access.access,
        "chosen_by": access.chosen_by,
        "stream": {"egress_per_pass": r.once.usd, "passes": d.passes, "cost": access.stream_usd},
        "copy": {
            "egress_cost": r.once.usd,
            "storage_cost": r.storage.usd,
            "storage_hours": r.storage_hours,
            "staging_hours": r.staging_hours,
            "staging_overlapped": r.overlapped,
            "staging_cost": access.staging_usd,
            "cost": access.copy_usd,
        },
        "egress_cost": access.egress_usd,
        "storage_cost": access.storage_usd,
        "staging_cost": access.chosen_staging_usd,
        "cost": access.usd,
        "summary": access.summary(),
    }


def data_modes(p: Placement) -> str:
    """'copy', 'stream', or e.g. 'copy+stream' when data sets are read differently."""
    return "+".join(dict.fromkeys(d.access for d in p.data)) or "-"


def _chosen_sources(report: PlanReport) -> tuple[str, ...] | None:
    """The price source kinds `--sources` chose; None when the plan used every kind."""
    from router.prices.book import SOURCE_KINDS

    kinds = report.book.kinds if report.book is not None else SOURCE_KINDS
    return None if set(kinds) >= set(SOURCE_KINDS) else tuple(kinds)


def plan_json(report: PlanReport, *, explain: bool, top: int | None = None) -> dict[str, Any]:
    from router.core.plan_explain import by_filter, no_fit_reason

    placements = report.result.placements
    out: dict[str, Any] = {
        "job": report.job.name,
        "offers_considered": report.offers_considered,
        "placements_total": len(placements),  # placements + rejected = offers considered
        "placements": [
            {**placement_json(p), "checkpoint_interval": _interval_json(report, rank)}
            for rank, p in enumerate(placements[:top])
        ],
        "time_shift": report.time_shift.to_json() if report.time_shift else None,
        "offer_sources": _sources_json(report),
        "no_fit": None
        if placements
        else no_fit_reason(report.job, report.result.rejected, _chosen_sources(report)),
    }
    if explain:
        out["rejected_by_filter"] = by_filter(report.result.rejected)
        out["rejected"] = [
            {
                "cloud": r.offer.cloud,
                "region": r.offer.region,
                "zone": r.offer.zone,
                "instance_type": r.offer.instance_type,
                "market": r.offer.market,
                "price_per_hour": r.offer.price_per_hour,
                "source": r.offer.source,
                "filter": r.filter,
                "reason": r.reason,
            }
            for r in report.result.rejected
        ]
    return out


def _sources_json(report: PlanReport) -> dict[str, Any]:
    book = report.book
    if book is None:
        return {"chosen": [], "by_cloud": {}, "snapshot_mixed": {}}
    return {
        "chosen": list(book.kinds),
        "by_cloud": book.by_cloud,
        "snapshot_mixed": book.snapshot_mixed(),
    }


def sources_line(report: PlanReport) -> str | None:
    """Where fresher sources price a cloud and the bundled snapshot fills the rest: how many."""
    book = report.book
    mixed = book.snapshot_mixed() if book is not None else {}
    if not mixed or book is None:
        return None
    parts = []
    for cloud, n in mixed.items():
        counts = book.by_cloud[cloud]
        fresh = ", ".join(f"{counts[k]} {k}" for k in ("import", "live") if counts.get(k))
        parts.append(f"{cloud} {n} snapshot offers next to {fresh}")
    return (
        "offers from the bundled snapshot where fresher prices cover the cloud: "
        + "; ".join(parts)
        + " — `--sources import,live` plans on the fresher ones only"
    )


def _interval_json(report: PlanReport, rank: int) -> dict[str, Any] | None:
    advice = report.intervals[rank] if rank < len(report.intervals) else None
    return advice.to_json() if advice is not None else None


def interval_line(report: PlanReport, rank: int) -> str | None:
    """`--explain`: the job's checkpoint interval against Young/Daly's at placement `rank`."""
    advice = report.intervals[rank] if rank < len(report.intervals) else None
    if advice is None:
        return None
    job = f"checkpoint interval {age(advice.job_interval_s)} (job.yaml, in effect)"
    if advice.young_s is None or advice.mtbi_s is None:
        return f"{job}; no interruptions expected here: no optimum to suggest"
    save = f"{age(advice.save_s)} save{' (assumed)' if advice.save_s_assumed else ''}"
    return (
        f"{job}; Young/Daly {age(advice.young_s)} / {age(advice.daly_s or 0)} from a {save} and"
        f" 1 interruption per {age(advice.mtbi_s)} ({advice.interruptions_per_hour:.3g}/h)"
    )


_QUOTA_SHOWN = {"ok": "ok", "unknown": "[yellow]unknown[/]", "not needed": "-", "unchecked": "-"}


def plan_table(report: PlanReport, *, explain: bool, top: int | None = None) -> None:
    from rich.table import Table

    from router.core.plan_explain import no_fit_reason

    console = _console()
    job, result = report.job, report.result
    kinds = report.book.kinds if report.book is not None else ()
    chosen = f", sources {','.join(kinds)}" if kinds and len(kinds) < 3 else ""
    if not result.placements:
        why = safe(no_fit_reason(job, result.rejected, _chosen_sources(report)), limit=TEXT_CHARS)
        # With no offer rejected there is nothing for --explain to list.
        more = " — rerun with --explain to see every rejected offer" if result.rejected else ""
        console.print(
            f"[red]no placement fits job '{safe(job.name)}'[/] ({report.offers_considered} "
            f"offers considered{chosen}): {why}{more}"
        )
    else:
        shown = result.placements[:top]
        of = (
            f"{len(shown)} of {len(result.placements)} "
            if len(shown) < len(result.placements)
            else ""
        )
        table = Table(
            title=f"{of}placements for '{job.name}', best first (USD, {job.duration_hours:g} h"
            f" × {job.node_count} node{'s' if job.node_count > 1 else ''}{chosen})"
        )
        with_data = bool(job.data)
        columns = [
            ("#", "right"),
            ("placement", "left"),
            ("instance type", "left"),
            ("market", "left"),
            ("$/h", "right"),
            ("compute", "right"),
            ("egress", "right"),
        ]
        if with_data:
            columns += [("data", "left"), ("storage", "right"), ("staging", "right")]
        columns += [
            ("interruption", "right"),
            ("total", "right"),
            ("price source", "left"),
            ("quota", "left"),
        ]
        for name, justify in columns:
            table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
        for rank, p in enumerate(shown, 1):
            source = f"{p.price_source} {age(p.price_age_s)}"
            cells = [
                str(rank),
                safe(f"{p.cloud} {p.zone or p.region}"),
                safe(p.instance_type),
                p.market,
                f"{p.price_per_hour:,.2f}",
                money(p.compute_cost),
                money(p.egress_cost),
            ]
            if with_data:
                cells += [
                    data_modes(p),
                    money(p.storage_cost),
                    money(p.staging_cost),
                ]
            cells += [
                money(p.interruption_cost),
                f"[bold]{money(p.total_cost)}[/]",
                f"[yellow]{safe(source)} stale[/]" if p.stale else safe(source),
                _QUOTA_SHOWN.get(p.quota_status, p.quota_status),
            ]
            table.add_row(*cells)
        console.print(table)
        best = result.placements[0]
        for reason in best.reasons:
            console.print(f"  #1: {safe(reason, limit=TEXT_CHARS)}")
        if report.time_shift is not None:
            console.print(f"  later start: {safe(report.time_shift.reason, limit=TEXT_CHARS)}")
        if explain and with_data:
            # Per placement: which copy of each data set is read, and how, in dollars.
            for rank, p in enumerate(shown[1:], 2):
                for d in p.data:
                    console.print(
                        f"  #{rank} {p.cloud} {p.zone or p.region}: "
                        f"{safe(d.summary(), limit=TEXT_CHARS)}"
                    )
        if explain:
            for rank, p in enumerate(shown, 1):
                line = interval_line(report, rank - 1)
                if line is not None:
                    console.print(f"  #{rank} {safe(f'{p.cloud} {p.zone or p.region}')}: {line}")
            if any(a is not None and a.save_s_assumed for a in report.intervals):
                console.print(
                    "  save time assumed: set checkpoint.save_time in job.yaml to the save_s "
                    "the checkpoint manifests record"
                )
        if any(p.stale for p in result.placements):
            console.print(
                "[yellow]some prices are stale[/]: run `route prices refresh`, or "
                "`route plan JOB_FILE --require-fresh` to refuse them"
            )
    line = sources_line(report)
    if line is not None:
        console.print(f"[yellow]note[/]: {safe(line, limit=TEXT_CHARS)}")
    if explain and result.rejected:
        table = Table(title=f"{len(result.rejected)} rejected offers")
        for name in (
            "cloud", "region", "zone", "instance type", "market", "$/h", "filter", "reason"
        ):  # fmt: skip
            table.add_column(name)
        for r in result.rejected:
            o = r.offer
            table.add_row(
                o.cloud,
                safe(o.region),
                safe(o.zone or "-"),
                safe(o.instance_type),
                o.market,
                f"{o.price_per_hour:,.2f}",
                r.filter,
                safe(r.reason, limit=TEXT_CHARS),
            )
        console.print(table)
