"""Every `route …` command an error message or note advises runs as printed: its subcommands
exist, its options are the command's, and (when it has any argument or option) click parses it
with its required arguments — the way a user pastes it.

Found in the source: every backticked `route …` in a string literal or f-string of router/
(docstrings excluded), with f-string fields and the documented placeholders (JOB, JOB_FILE,
DIR, T, …) filled with sample values.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from router.cli.commands import cli

ROUTER = Path(__file__).resolve().parents[2] / "router"
ADVICE = re.compile(r"`route((?: [^`]*)?)`")
# What a user puts in for the placeholders messages print.
SAMPLES = {"JOB": "train", "JOB_FILE": "train.yaml", "DIR": "infra", "T": "p4d.24xlarge",
           "{X}": "x", "SHELL": "bash", "FILE": "x.csv"}


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = node.values
            docstrings.update(id(v) for v in parts)
            yield node.lineno, "".join(
                v.value if isinstance(v, ast.Constant) else "{X}" for v in parts
            )
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docstrings):
            yield node.lineno, node.value


def _advice() -> list[tuple[str, str]]:
    found = []
    for path in sorted(ROUTER.rglob("*.py")):
        for line, text in _strings(ast.parse(path.read_text())):
            for match in ADVICE.finditer(text):
                found.append((f"{path.relative_to(ROUTER.parent)}:{line}", match.group(1).strip()))
    return found


ADVISED = _advice()


def test_the_scan_finds_the_advice_messages_give() -> None:
    commands = {advice for _where, advice in ADVISED}
    assert {"prices refresh", "plan JOB_FILE --write", "plan {X} --explain"} <= commands


@pytest.mark.parametrize(("where", "advice"), ADVISED, ids=[w for w, _a in ADVISED])
def test_advised_command_runs_as_printed(where: str, advice: str) -> None:
    tokens = [SAMPLES.get(t, t.replace("{X}", "x")) for t in advice.split()]
    command: click.Command = cli
    path = ["route"]
    while isinstance(command, click.Group) and tokens and tokens[0] in command.commands:
        path.append(tokens[0])
        command = command.commands[tokens.pop(0)]
    if isinstance(command, click.Group) and tokens and not tokens[0].startswith("-"):
        pytest.fail(f"{where}: `route {advice}`: {' '.join(path)} has no command {tokens[0]!r}")
    options = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    for token in tokens:
        if token.startswith("-") and token.split("=")[0] not in options:
            pytest.fail(f"{where}: `route {advice}`: {' '.join(path)} has no option {token}")
    if tokens:  # more than a command's name: it must parse as a whole, required arguments too
        try:
            command.make_context(" ".join(path), list(tokens), resilient_parsing=False)
        except click.UsageError as exc:
            pytest.fail(f"{where}: `route {advice}` does not parse: {exc.format_message()}")
