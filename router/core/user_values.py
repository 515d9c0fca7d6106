"""How a user's value is shown inside a one-line message (short, never multi-line)."""

from __future__ import annotations

from collections.abc import Mapping


def kind_of(value: object) -> str:
    if value is None:
        return "empty (null)"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple | set | frozenset):
        return "a list"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"text {show_value(value)}"
    return type(value).__name__


def show_value(value: object) -> str:
    """A short one-line rendering of a user value for messages."""
    if isinstance(value, Mapping | list | tuple | set | frozenset) or value is None:
        return kind_of(value)
    if isinstance(value, bool):
        return str(value).lower()
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…'"
