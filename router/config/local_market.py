"""The org config's local market (spotroute.yaml `local_market:`) → router.contract.local_market."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from router.config.user_files import DATA_LIMIT_BYTES, FileProblem, read_user_text
from router.contract.local_market import (
    LocalBehaviour,
    LocalMarket,
    MarketError,
    MarketRow,
    parse_trace,
    rows_from_mappings,
)
from router.core.errors import BadInput
from router.core.org import ORG_CONFIG_FILE, LocalMarketSettings, OrgConfig


def load_local_market(org: OrgConfig, project_root: Path | None) -> LocalMarket | None:
    """The market the local target offers now; None when spotroute.yaml sets no local_market."""
    settings = org.local_market
    if settings is None:
        return None
    rows: list[MarketRow] = []
    start = settings.start
    try:
        if settings.offers:
            name = f"{ORG_CONFIG_FILE}: local_market.offers"
            rows.extend(rows_from_mappings(settings.offers, name))
        if settings.trace:
            path = Path(settings.trace).expanduser()
            if not path.is_absolute() and project_root is not None:
                path = project_root / path
            try:
                text = read_user_text(path, limit_bytes=DATA_LIMIT_BYTES, what="trace file")
                mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC)
            except FileProblem as exc:
                raise BadInput(
                    f"{ORG_CONFIG_FILE}: local_market.trace: cannot read {path}: {exc.text} "
                    f"(a relative path is relative to {ORG_CONFIG_FILE})"
                ) from None
            except OSError as exc:
                raise BadInput(
                    f"{ORG_CONFIG_FILE}: local_market.trace: cannot read {path} "
                    f"({exc.strerror or exc}) — fix the path (relative to {ORG_CONFIG_FILE})"
                ) from None
            rows.extend(parse_trace(text, str(path.name)))
            start = start or mtime
    except MarketError as exc:
        raise BadInput(str(exc)) from None
    if not rows:
        raise BadInput(
            f"{ORG_CONFIG_FILE}: local_market: give a trace file or offers — see docs/migration.md"
        )
    for region in (*settings.quota, *settings.boot):
        if not any(r.region == region for r in rows):
            raise BadInput(
                f"{ORG_CONFIG_FILE}: local_market: {region} is not a region of the local market "
                "— name one the trace or offers list"
            )
    return LocalMarket(
        tuple(rows), start or datetime.fromtimestamp(0, UTC), local_behaviour(settings)
    )


def local_behaviour(settings: LocalMarketSettings) -> LocalBehaviour:
    """How the local target behaves: the profile's figures (node_startup.csv) and the knobs."""
    from router.config.datafiles import load_startup_figures

    figures = load_startup_figures()[settings.profile or "local"]
    return LocalBehaviour(
        profile=settings.profile or "",
        time_scale=settings.time_scale,
        boot_s=figures.boot_s,
        pull_s_per_gb=figures.pull_s_per_gb,
        image_gb=figures.image_gb,
        notice_s=figures.notice_s,
        quota_gpus=tuple(sorted(settings.quota.items())),
        boot_by_region=tuple(sorted(settings.boot.items())),
    )


def local_clock(org: OrgConfig, project_root: Path | None) -> tuple[float, float | None]:
    """(time_scale, notice lead in real seconds or None) of the project's local market: what
    runs on the market's clock — its zones' outages, its nodes' notice — runs time_scale × faster
    than the router's; (1, None) without a local market."""
    market = load_local_market(org, project_root)
    if market is None:
        return 1.0, None
    behaviour = market.behaviour
    notice = behaviour.real_s(behaviour.notice_s) if behaviour.notice_s else None
    return behaviour.time_scale, notice
