"""Shell completion (click's) for job names, clouds and regions; cheap, no engine, no network.

Job names come from the project's reviewed stack files (stacks/Pulumi.<job>.yaml, and
`Pulumi.<job>.2.yaml` after a move, offered as `<job>`), clouds from
the stack-config contract, regions from the bundled price snapshot. Enable it with
`eval "$(route completion bash)"` (or zsh, fish).
"""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import click

from router.contract.clouds import CLOUDS

if TYPE_CHECKING:  # the CLI imports this module at start-up: keep it light
    from click.shell_completion import CompletionItem

SHELLS = ("bash", "zsh", "fish")


@cache
def regions_by_cloud() -> dict[str, tuple[str, ...]]:
    """The regions of each cloud in the bundled price snapshot, sorted."""
    from router.config.datafiles import DATA_DIR

    found: dict[str, set[str]] = {}
    with (DATA_DIR / "snapshot.csv").open(encoding="utf-8") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        for row in rows:
            found.setdefault(row["cloud"], set()).add(row["region"])
    return {cloud: tuple(sorted(regions)) for cloud, regions in found.items()}


def _project_root(ctx: click.Context) -> Path | None:
    from router.config.project import find_project

    root = ctx.find_root()
    override = (root.params or {}).get("project_dir")
    try:
        project = find_project(override=override)
    except Exception:  # a bad --project-dir while typing: no suggestions, no error
        return None
    return project.root if project else None


def complete_job_names(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Jobs with a stack file in the project (and `bootstrap` where it has one); a moved job's
    file (`Pulumi.<job>.2.yaml`) is offered as its job, the name every JOB argument takes."""
    from click.shell_completion import CompletionItem

    from router.core.journal import job_of_stack

    root = _project_root(ctx)
    if root is None:
        return []
    names = sorted(
        {
            job_of_stack(p.name.removeprefix("Pulumi.").removesuffix(".yaml"))
            for p in (root / "stacks").glob("Pulumi.*.yaml")
        }
    )
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def complete_clouds(
    _ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Clouds, also after a comma: `--clouds aws,g` → `aws,gcp`."""
    from click.shell_completion import CompletionItem

    head, _, last = incomplete.rpartition(",")
    done = set(head.split(",")) if head else set()
    prefix = f"{head}," if head else ""
    return [
        CompletionItem(prefix + c) for c in CLOUDS if c.startswith(last) and c not in done
    ]


def complete_regions(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Regions of the clouds chosen so far on the command line (all clouds otherwise)."""
    from click.shell_completion import CompletionItem

    chosen = [
        c for value in (ctx.params.get("clouds") or ()) for c in str(value).split(",") if c
    ] or list(regions_by_cloud())
    head, _, last = incomplete.rpartition(",")
    prefix = f"{head}," if head else ""
    regions = sorted({r for c in chosen for r in regions_by_cloud().get(c, ())})
    return [CompletionItem(prefix + r) for r in regions if r.startswith(last)]


def complete_target(
    _ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """`--to CLOUD` or `--to CLOUD/REGION`."""
    from click.shell_completion import CompletionItem

    cloud, slash, region = incomplete.partition("/")
    if not slash:
        return [CompletionItem(c, type="plain") for c in CLOUDS if c.startswith(cloud)]
    return [
        CompletionItem(f"{cloud}/{r}")
        for r in regions_by_cloud().get(cloud, ())
        if r.startswith(region)
    ]


def completion_script(cli: click.Command, shell: str, prog_name: str = "route") -> str:
    """The script that enables completion in `shell` (what `route completion SHELL` prints)."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    if cls is None:  # click knows bash, zsh, fish
        raise click.BadParameter(f"'{shell}' — use one of {', '.join(SHELLS)}")
    complete_var = f"_{prog_name.replace('-', '_').upper()}_COMPLETE"
    return cls(cli, {}, prog_name, complete_var).source()
