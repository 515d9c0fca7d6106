"""What every rule shares: UNKNOWN, readers of props, StackResource, Violation, Rule."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PACK_NAME = "spotroute"
ENFORCEMENT_LEVELS = ("advisory", "mandatory", "remediate", "disabled")
DEFAULT_ENFORCEMENT = "mandatory"


class _Unknown:
    """A value the engine cannot know yet (preview of a resource whose inputs depend on outputs).

    One instance only, so copies of props (deepcopy, pickle) still compare `is UNKNOWN`.
    """

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


# --- small readers (props are plain data or UNKNOWN) ---------------------------------------------


def prop_at(value: Any, *path: str) -> Any:
    """Nested lookup: None when a key is missing, UNKNOWN when an enclosing value is unknown."""
    for key in path:
        if value is UNKNOWN:
            return UNKNOWN
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def as_list(value: Any) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return []


def as_strings(value: Any) -> list[str]:
    """A string or a list of strings as a list (unknown and non-string items dropped)."""
    if isinstance(value, str):
        return [value]
    return [item for item in as_list(value) if isinstance(item, str)]


def is_true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def is_false(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.lower() == "false")


def as_number(value: Any) -> float | None:
    """USD amounts arrive as numbers or decimal strings ("12.5"); None if absent or not a number."""
    if isinstance(value, bool) or value is None or value is UNKNOWN:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and value.strip():
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def present(value: Any) -> bool:
    """A value was given (not absent, empty or unknown until `up`): a rule must read it."""
    return value is not None and value is not UNKNOWN and value != ""


def shown(value: Any, limit: int = 80) -> str:
    """A resource's value inside a one-line message: repr, one line, cut at `limit`."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cannot_read(what: str, value: Any, fix: str) -> str:
    """The violation of a value a rule cannot read. Rules fail closed: a value they cannot
    read might be the very thing they refuse, so it is refused, naming the value."""
    return f"cannot read {what} {shown(value)}, so it is refused — {fix}"


def money(amount: float) -> str:
    return f"${amount:.4f}".rstrip("0").rstrip(".")


def cloud_of(resource_type: str) -> str:
    return resource_type.split(":", 1)[0]


# --- settings ------------------------------------------------------------------------------------

Settings = Mapping[str, Any]
ResourceCheck = Callable[[str, Mapping[str, Any], Settings], list[str]]


@dataclass(frozen=True)
class StackResource:
    """One resource as a stack rule sees it (from `StackValidationArgs` or the mocks harness)."""

    type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    parent_urn: str = ""
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Violation:
    """One finding: which policy, the one-line message, the resource URN ("" = the stack)."""

    policy: str
    message: str
    urn: str = ""
    enforcement_level: str = DEFAULT_ENFORCEMENT


StackCheck = Callable[[Sequence[StackResource], Settings], list[tuple[str, str]]]


@dataclass(frozen=True)
class Rule:
    """A policy: name, description, JSON-schema config properties (with defaults) and its check."""

    name: str
    description: str
    schema: Mapping[str, Mapping[str, Any]]
    resource_check: ResourceCheck | None = None
    stack_check: StackCheck | None = None
    requires_any: tuple[str, ...] = ()  # the rule applies once one of these settings is set

    def settings(self, config: Mapping[str, Any] | None) -> dict[str, Any]:
        """Schema defaults overlaid with the configured values (enforcementLevel dropped)."""
        merged = {key: spec["default"] for key, spec in self.schema.items() if "default" in spec}
        merged.update({k: v for k, v in (config or {}).items() if k != "enforcementLevel"})
        return merged


# --- AWS policy documents (bucket policies and identity policies) ------------------------------


def policy_document(value: Any) -> Any:
    """An IAM/bucket policy document as a mapping; UNKNOWN if unknown; None if not a document."""
    if value is UNKNOWN:
        return UNKNOWN
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value.strip():
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, Mapping) else None
    return None


def statements(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    statement = document.get("Statement")
    items = [statement] if isinstance(statement, Mapping) else as_list(statement)
    return [s for s in items if isinstance(s, Mapping)]


def statement_label(statement: Mapping[str, Any], index: int) -> str:
    sid = statement.get("Sid")
    return f"statement {sid!r}" if isinstance(sid, str) and sid else f"statement #{index + 1}"
