"""What every `route` command shares: the clock, comma-separated options, the project, --json.

Tests set the clock by patching `now` here; commands call it as `options.now()` for that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def now() -> datetime:
    return datetime.now(UTC)


def split_csv(values: tuple[str, ...]) -> tuple[str, ...]:
    """`--clouds aws,gcp --clouds azure` → ("aws", "gcp", "azure")."""
    return tuple(part.strip() for value in values for part in value.split(",") if part.strip())


def region_globs(values: tuple[str, ...], flag: str = "--regions") -> tuple[str, ...]:
    """`--regions 'us-*,eu*'` → ("us-*", "eu*"); a malformed glob is bad input naming the flag."""
    from router.core.errors import BadInput
    from router.core.globs import glob_problem

    globs = split_csv(values)
    for pattern in globs:
        if (why := glob_problem(pattern)) is not None:
            raise BadInput(f"{flag}: {why}")
    return globs


def ctx_project(ctx: click.Context, required: bool = False) -> Any:
    from router.config.project import find_project, require_project

    override = ctx.obj.get("project_dir")
    return require_project(override=override) if required else find_project(override=override)


def json_option(f: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print JSON (schema in docs/cli-json.md)."
    )(f)
