"""How a user's value is shown inside a one-line message (short, never multi-line)."""

from __future__ import annotations

import re
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
        return f"a number ({show_value(value)})"
    if isinstance(value, str):
        return f"text {show_value(value)}"
    return type(value).__name__


def show_value(value: object) -> str:
    """A short one-line rendering of a user value for messages."""
    if isinstance(value, Mapping | list | tuple | set | frozenset) or value is None:
        return kind_of(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) and value.bit_length() > _SHOWN_INT_BITS:
        return _long_integer(value)
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…'"


# Python refuses to print an integer of more than 4,300 digits (sys.get_int_max_str_digits, a
# guard against quadratic conversion); a user's `0x` + 5,000 hex digits is such an integer. Above
# ~57 digits the value would be cut anyway, so it is described by its size instead.
_SHOWN_INT_BITS = 190


def _long_integer(value: int) -> str:
    digits = int(value.bit_length() * 0.30103) + 1  # log10(2): within one digit, no conversion
    sign = "-" if value < 0 else ""
    return f"{sign}an integer of about {digits:,} digits"


# C0 controls (but tab and newline where allowed), DEL, C1 controls, bidi overrides and line
# separators: what a terminal could act on (retitle, move the cursor) or a reader misread.
_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)
_UNPRINTABLE_LINE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)
MAX_MESSAGE_CHARS = 400


def printable(text: str, *, one_line: bool = True, limit: int | None = None) -> str:
    """`text` safe to print on a terminal: controls shown as \\xNN, cut to `limit` characters.

    The one escape function for everything user-supplied that reaches the terminal (error
    lines, tables, progress): a field name or region holding `\\x1b]0;…\\x07` is shown, not run.
    """
    pattern = _UNPRINTABLE_LINE if one_line else _UNPRINTABLE
    shown = pattern.sub(lambda m: _escape(m.group()), text)
    if limit is not None and len(shown) > limit:
        cut = len(shown) - limit
        shown = f"{shown[: limit - 30]}… ({cut + 30} more characters)"
    return shown


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
