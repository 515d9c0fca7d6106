"""job.yaml's `migration:` section: when a running job may move, and how long it waits for spot.

Its numbers are read by `route watch` and `route backtest` alike (router.core.decide's rules,
docs/migration.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from router.core.durations import MAX_SPOT_WAIT_S, parse_spot_wait_s
from router.core.job.validation import (
    MIN_TIMEOUT_S,
    DurationInput,
    Strict,
    duration_input,
    duration_s,
    not_bool,
    problem,
)

# migration.spot_wait's default, seconds: how much later than its work alone takes a job
# without a deadline may finish, waiting out spot outages (docs/migration.md, docs/backtest.md).
SPOT_WAIT_DEFAULT_S = 12 * 3600.0


class Migration(Strict):
    """When a running job may move to a cheaper placement."""

    min_savings_pct: float = Field(
        default=20.0, ge=0, le=100, description="migrate only if it saves at least this % of cost"
    )
    cooldown_s: float = Field(
        default=3600.0,
        ge=0,
        validation_alias="cooldown",
        description="least time between two migrations: 2h, or seconds",
    )
    spot_wait_s: float = Field(
        default=SPOT_WAIT_DEFAULT_S,
        ge=0,
        allow_inf_nan=True,  # `forever` is math.inf; NaN is refused by parse_spot_wait_s
        validation_alias="spot_wait",
        description="a job without a deadline may finish this much later than its work takes,"
        " waiting out spot outages instead of buying on-demand, then on-demand: 6h; 0 = never"
        " idle; forever = spot only, never on-demand; default 12h (docs/migration.md)",
    )
    nodes_timeout_s: float | None = Field(
        default=None,
        ge=MIN_TIMEOUT_S,
        validation_alias="nodes_timeout",
        description="how long a new placement's nodes may take to run (from `pulumi up`"
        " returning): 15m; default twice the cloud's boot time (docs/migration.md)",
    )
    restore_timeout_s: float | None = Field(
        default=None,
        ge=MIN_TIMEOUT_S,
        validation_alias="restore_timeout",
        description="how long the job may take to restore once its nodes run: 30m; default"
        " twice image pull + secret fetch + checkpoint.restore_overhead",
    )

    @field_validator(
        "nodes_timeout_s",
        "restore_timeout_s",
        mode="before",
        json_schema_input_type=duration_input(MIN_TIMEOUT_S) | None,
    )
    @classmethod
    def _timeouts(cls, value: object) -> object:
        return None if value is None else duration_s(value)

    @field_validator("min_savings_pct", mode="before")
    @classmethod
    def _pct_not_bool(cls, value: object) -> object:
        return not_bool(value)

    @field_validator("cooldown_s", mode="before", json_schema_input_type=DurationInput)
    @classmethod
    def _cooldown(cls, value: object) -> object:
        return duration_s(value)

    @field_validator(
        "spot_wait_s",
        mode="before",
        json_schema_input_type=duration_input(0.0, MAX_SPOT_WAIT_S) | Literal["forever"],
    )
    @classmethod
    def _spot_wait(cls, value: object) -> object:
        try:
            return parse_spot_wait_s(value)
        except ValueError as e:
            raise problem(str(e)) from None
