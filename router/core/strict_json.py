"""The one JSON writer: strict JSON (no NaN/Infinity), nothing a terminal would act on.

Every JSON spotroute prints or writes goes through `dumps`, so `--json` output and the files in
SPOTROUTE_HOME always parse with a strict parser (`json.loads(..., parse_constant=...)` that
refuses NaN). Control characters are escaped by the json module; DEL and the C1 controls (which
some terminals read as escape sequences) and the Unicode line separators are escaped here.
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime
from typing import Any

_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029]")


def _default(value: object) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return sorted(value, key=str) if isinstance(value, set | frozenset) else list(value)
    return str(value)


def dumps(data: Any, *, indent: int | None = 2) -> str:
    """`data` as strict JSON text; a NaN or infinity raises ValueError (a bug upstream)."""
    text = json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False, default=_default)
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def loads_strict(text: str) -> Any:
    """Parse JSON, refusing NaN and Infinity (what `dumps` never writes)."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)
