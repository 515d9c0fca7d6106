"""docs/architecture.md's module table names every router module, and only those that exist."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
# Package markers hold a docstring only; cli/__init__.py holds the entry point and is listed.
UNLISTED = {"__init__.py", "__main__.py"}


def documented_modules() -> set[str]:
    return set(module_rows())


def module_rows() -> list[str]:
    """Every module the table names, once per row that names it."""
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("## Modules (router/)") : text.index("## Components and policies")]
    found: list[str] = []
    for line in table.splitlines():
        first_cell = line.split("|")[1] if line.startswith("|") else ""
        folder = ""
        for name in re.findall(r"`([\w/]+\.py)`", first_cell):
            if "/" in name:
                folder = name.rsplit("/", 1)[0]
                found.append(name)
            else:
                found.append(f"{folder}/{name}")
    return found


def router_modules() -> set[str]:
    router = REPO / "router"
    return {
        str(path.relative_to(router))
        for path in router.rglob("*.py")
        if path.name not in UNLISTED or str(path.relative_to(router)) == "cli/__init__.py"
    }


def test_the_module_table_matches_the_folders_one_to_one() -> None:
    assert documented_modules() == router_modules()


def test_each_module_has_one_row() -> None:
    rows = module_rows()
    assert sorted({m for m in rows if rows.count(m) > 1}) == []
