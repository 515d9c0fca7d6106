"""What every job.yaml section shares: the Strict base model and the validation helpers.

A problem's message is final ("problem — fix"); numbers refuse YAML booleans, durations become
seconds, map values that YAML read as numbers become text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from router.core.durations import DURATION_PATTERN, MAX_DURATION_S, parse_duration_s
from router.core.user_values import show_value


def problem(text: str, **where: str) -> PydanticCustomError:
    """A validation error whose message is final ("problem — fix").

    `where` may hold `field` (report under this sibling field instead) or `key` (report
    under this map key of the field), so the path names what the user should change.
    """
    return PydanticCustomError("spotroute", "{text}", {"text": text, **where})


def not_bool(value: object) -> object:
    """YAML reads yes/no/true as booleans, and Python counts them as 1/0: refuse them."""
    if isinstance(value, bool):
        raise problem(f"expected a number, got {show_value(value)} — write a number such as 8")
    return value


def duration_s(value: object) -> float:
    try:
        return parse_duration_s(value)
    except ValueError as e:
        raise problem(str(e)) from None


def text_values(value: object, what: str) -> object:
    """Coerce number values of a map to strings (YAML reads `cost-center: 4711` as a number)."""
    if not isinstance(value, Mapping):
        return value
    out: dict[object, object] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            raise problem(
                f"{what} {str(key)!r} is {show_value(item)}, which YAML reads as a boolean"
                f" — quote it: '{str(item).lower()}'",
                key=str(key),
            )
        out[key] = str(item) if isinstance(item, int | float) else item
    return out


class Strict(BaseModel):
    """Base for every job.yaml section: unknown keys are errors (typos must not pass silently)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        # job.yaml uses the aliases (parse_job passes by_name=False); Python code the names.
        validate_by_alias=True,
        validate_by_name=True,
        allow_inf_nan=False,
    )


MIN_TIMEOUT_S = 1.0  # a wait of at least a second


def duration_input(minimum: float = 0.0, maximum: float = MAX_DURATION_S) -> Any:
    """What the JSON Schema says a duration may be: seconds from `minimum` to `maximum` (ten
    years), or a duration string (validation turns either into seconds)."""
    return (
        Annotated[float, Field(ge=minimum, le=maximum)]
        | Annotated[str, Field(pattern=DURATION_PATTERN)]
    )


DurationInput = duration_input()
