"""The org config's local market (spotroute.yaml `local_market:`) → router.contract.local_market."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from router.config.user_files import DATA_LIMIT_BYTES, FileProblem, read_user_text
from router.contract.local_market import (
    LocalMarket,
    MarketError,
    MarketRow,
    parse_trace,
    rows_from_mappings,
)
from router.core.errors import BadInput
from router.core.org import ORG_CONFIG_FILE, OrgConfig


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
    return LocalMarket(tuple(rows), start or datetime.fromtimestamp(0, UTC))
