"""The glob patterns people write (region allow/deny lists, instance-type families, pool
selectors, `--regions`): fnmatch's syntax, minus what fnmatch silently reads as a pattern that
can never match. `fnmatch` takes an unclosed `[` as a literal `[` and a reversed range (`[z-a]`)
as a class of nothing, so `regions: {allow: ['[']}` used to allow no region at all and the plan
said "no placement fits" instead of naming the typo.
"""

from __future__ import annotations

import fnmatch

from router.core.user_values import show_value

_LITERAL_BRACKET = "use '[[]' to match a literal '['"


def glob_problem(pattern: str) -> str | None:
    """Why `pattern` is not a well-formed glob, as "problem — fix"; None when it is."""
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "]":
            return (
                f"glob {show_value(pattern)} has a ']' (at {i}) that closes no '[' — remove it, or "
                "open the class it ends (e.g. us-east-[12])"
            )
        if c != "[":
            continue
        j = i
        if j < n and pattern[j] == "!":
            j += 1
        if j < n and pattern[j] == "]":  # a ']' first in a class is a member, as in fnmatch
            j += 1
        while j < n and pattern[j] != "]":
            j += 1
        if j >= n:
            return (
                f"glob {show_value(pattern)} has a '[' (at {i}) that is never closed — close the "
                f"class with ']' (e.g. us-east-[12]), or {_LITERAL_BRACKET}"
            )
        members = pattern[i - 1 : j + 1]
        if "(?!)" in fnmatch.translate(members):  # fnmatch's class of nothing: [z-a]
            return (
                f"glob {show_value(pattern)} has a class {members} that matches no character — "
                "write the range low to high, e.g. [a-z]"
            )
        i = j + 1
    return None


def check_globs(patterns: tuple[str, ...] | list[str]) -> None:
    """ValueError ("problem — fix") for the first malformed glob of `patterns`."""
    for pattern in patterns:
        if (problem := glob_problem(pattern)) is not None:
            raise ValueError(problem)
