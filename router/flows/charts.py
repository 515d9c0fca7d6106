"""Charts for `route backtest --chart` and `route report --out`: a PNG, or a self-contained HTML
page (the PNG inlined as base64 next to the numbers as a table). matplotlib is imported here
only, lazily (the `charts` extra)."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from router.core.errors import BadInput, OperationFailed

if TYPE_CHECKING:
    from router.flows.backtest import BacktestReport
    from router.flows.report import SpendReport

COLORS = {
    "on-demand": "#7f7f7f",
    "spot-fallback": "#ff7f0e",
    "spot-once": "#9467bd",
    "migrate": "#1f77b4",
    "deadline-aware": "#2ca02c",
    "greedy-deadline": "#8c564b",
    "skypilot-eager": "#17becf",
    "skypilot-failover": "#bcbd22",
    "skypilot-eager+od": "#e377c2",
    "optimum": "#d62728",
}


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise OperationFailed(
            "charts need matplotlib — pip install 'spotroute[charts]' (or matplotlib)"
        ) from None
    return plt


def _kind(path: Path) -> str:
    kind = path.suffix.lower()
    if kind not in (".png", ".html"):
        raise BadInput(f"{path}: chart must be a .png or .html file")
    return kind


def backtest_chart(report: BacktestReport, path: Path) -> Path:
    """Cost per GPU-hour by policy (with savings) and cumulative spend over the window."""
    kind = _kind(path)
    plt = _pyplot()
    r = report.result
    fig, (bars, lines) = plt.subplots(
        1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [1, 1.3]}
    )
    names = [p.name for p in r.policies]
    values = [p.cost_per_gpu_hour for p in r.policies]
    colors = [COLORS.get(n, "#333333") for n in names]
    drawn = bars.barh(range(len(names)), values, color=colors)
    bars.set_yticks(range(len(names)), [p.label for p in r.policies])
    bars.invert_yaxis()
    bars.set_xlabel("USD per GPU-hour")
    bars.set_title("Cost per GPU-hour (savings vs single-cloud on-demand)")
    for bar, p in zip(drawn, r.policies, strict=True):
        text = f" ${p.cost_per_gpu_hour:.2f}"
        saved = r.savings_pct(p.name)
        if p.name != r.baseline and saved is not None:
            text += f"  −{saved:.0f} %"
        if p.deadline_misses:
            text += f"  ({p.deadline_misses} late)"
        bars.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, _plain(text), va="center")
    bars.set_xlim(0, max(values) * 1.45 if values else 1)

    step_h = r.step_s / 3600.0
    steps = report.trace.steps
    for p in r.policies:
        daily = [0.0] * (steps + 1)
        for run in p.runs:
            for start, end, _pool, usd in run.segments:
                share = usd / max(1, end - start)
                for s in range(start, min(end, steps)):
                    daily[s + 1] += share
            for s, usd in run.extras:
                daily[min(s, steps - 1) + 1] += usd
        total, series = 0.0, []
        for usd in daily:
            total += usd
            series.append(total / 1000)
        lines.plot(
            [s * step_h / 24 for s in range(steps + 1)],
            series,
            label=_plain(f"{p.label}: ${p.total_cost:,.0f}"),
            color=COLORS.get(p.name, "#333333"),
            linestyle="--" if p.name == r.optimum else "-",
        )
    lines.set_xlabel("day")
    lines.set_ylabel("cumulative spend, thousand USD")
    jobs = f"{r.jobs} jobs" if not r.unplaceable else f"{r.jobs_ran} of {r.jobs} jobs ran"
    lines.set_title(f"{r.workload}: {jobs}, {r.start:%Y-%m-%d} → {r.end:%Y-%m-%d}")
    lines.legend(loc="upper left", fontsize=8)
    lines.grid(alpha=0.3)
    fig.tight_layout()
    png = _png(plt, fig)
    if kind == ".png":
        path.write_bytes(png)
        return path
    headers = ["policy", "total $", "$/GPU-h", "savings", "gap to optimum", "interruptions",
               "migrations", "recomputed h", "deadline misses"]  # fmt: skip
    rows = [
        [
            p.label,
            f"{p.total_cost:,.0f}",
            f"{p.cost_per_gpu_hour:.2f}",
            "n/a" if r.savings_pct(p.name) is None else f"{r.savings_pct(p.name):.1f} %",
            f"{r.gap_to_optimum_pct(p.name):.1f} %",
            str(p.interruptions),
            str(p.migrations),
            f"{p.recomputed_h:.1f}",
            str(p.deadline_misses),
        ]
        for p in r.policies
    ]
    notes = [f"prices: {s}" for s in report.sources]
    if not r.baseline_ran:
        missing = r.baseline_unfinished
        notes.insert(0, f"the baseline could not run {len(missing)} jobs ({', '.join(missing[:5])})"
                     " — no savings against it")
    subset = r.could_not_run()
    if subset is not None:
        notes.insert(0, subset)
    path.write_text(_html(f"Backtest: {r.workload}", png, headers, rows, notes), encoding="utf-8")
    return path


def report_chart(report: SpendReport, path: Path) -> Path:
    """Daily realised spend against the on-demand baseline, and spend by job."""
    kind = _kind(path)
    plt = _pyplot()
    fig, (days, jobs) = plt.subplots(1, 2, figsize=(14, 5.5))
    labels = [d.day.isoformat() for d in report.by_day]
    spent = [d.cost for d in report.by_day]
    base = [d.baseline for d in report.by_day]
    xs = range(len(labels))
    days.bar(xs, base, color="#c7c7c7", label="on-demand baseline")
    days.bar(xs, spent, color="#1f77b4", width=0.6, label="realised")
    days.set_xticks(xs, labels, rotation=45, ha="right", fontsize=8)
    days.set_ylabel("USD")
    days.set_title(
        _plain(
            f"Realised ${report.total_cost:,.2f} vs on-demand ${report.total_baseline:,.2f} "
            f"(saved {report.savings_pct:.0f} %)"
        )
    )
    days.legend()
    names = [j.job for j in report.by_job]
    jobs.barh(names, [j.baseline for j in report.by_job], color="#c7c7c7", label="on-demand")
    jobs.barh(names, [j.cost for j in report.by_job], color="#1f77b4", height=0.5, label="realised")
    jobs.invert_yaxis()
    jobs.set_xlabel("USD")
    jobs.set_title("By job (summed across recoveries and migrations)")
    jobs.legend()
    fig.tight_layout()
    png = _png(plt, fig)
    if kind == ".png":
        path.write_bytes(png)
        return path
    headers = ["job", "placements", "hours", "realised $", "on-demand $", "saved",
               "hand-over overlap s", "overlap $"]  # fmt: skip
    rows = [
        [
            j.job,
            str(j.placements),
            f"{j.hours:.2f}",
            f"{j.cost:,.2f}",
            f"{j.baseline:,.2f}",
            f"{j.savings_pct:.1f} %",
            f"{j.overlap_s:.0f}",
            f"{j.overlap_cost:,.2f}",
        ]
        for j in report.by_job
    ]
    notes = [f"{c.cloud}: ${c.cost:,.2f} (on-demand ${c.baseline:,.2f})" for c in report.by_cloud]
    notes += list(report.notes)
    path.write_text(_html("spotroute report", png, headers, rows, notes), encoding="utf-8")
    return path


def _plain(text: str) -> str:
    """Dollar signs as text: matplotlib reads a pair of them as mathematics."""
    return text.replace("$", r"\$")


def _png(plt: Any, fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _html(
    title: str,
    png: bytes,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    notes: Sequence[str],
) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    data = base64.b64encode(png).decode("ascii")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{esc(title)}</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
        "table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}"
        "td:first-child,th:first-child{text-align:left}img{max-width:100%}"
        f"</style></head><body><h1>{esc(title)}</h1>"
        f"<img alt='chart' src='data:image/png;base64,{data}'>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        f"<ul>{items}</ul></body></html>\n"
    )
