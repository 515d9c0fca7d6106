"""Every state `route status` can print is documented in docs/cli.md and docs/cli-json.md.

The states are read from router/flows/job_status.py itself (what `_state` returns, every
`state=` given to a JobStatus and the positional state of a JobStatus built by hand), so a state
added to the code without its line in the docs fails here."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "router" / "flows" / "job_status.py"


def states_in_code() -> set[str]:
    """Every string literal job_status.py can put in a JobStatus's state."""
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "_state":
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and ret.value is not None:
                    for c in ast.walk(ret.value):
                        if isinstance(c, ast.Constant) and isinstance(c.value, str):
                            found.add(c.value)
        if (
            isinstance(node, ast.keyword)
            and node.arg == "state"
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found.add(node.value.value)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "JobStatus"
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
        ):
            found.add(node.args[1].value)
    return found


def status_section(doc: str, heading: str) -> str:
    text = (REPO / "docs" / doc).read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return text[start : end if end > 0 else len(text)]


def test_the_code_scan_finds_the_states_it_should() -> None:
    states = states_in_code()

    # The scan sees each way a state is set: a return of _state, state=, and positionally.
    assert {"running", "deployed", "empty", "crashed", "locked", "unknown"} <= states


def test_every_state_route_status_prints_is_in_docs_cli_md() -> None:
    section = status_section("cli.md", "### `route status")

    missing = [s for s in sorted(states_in_code()) if f"| `{s}` |" not in section]

    assert not missing, f"docs/cli.md `route status` lacks a row for: {missing}"


def test_every_state_is_in_the_json_reference() -> None:
    section = status_section("cli-json.md", "## `route status")
    [row] = [line for line in section.splitlines() if line.startswith("| `state` |")]

    missing = [s for s in sorted(states_in_code()) if f"`{s}`" not in row]

    assert not missing, f"docs/cli-json.md state row lacks: {missing}"
