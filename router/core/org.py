"""spotroute.yaml (next to Pulumi.yaml): what an organisation allows, owns and has negotiated.

Reference: docs/org-config.md. The file is committed to git, so it holds hints only, never
secrets: keys that look like secrets are refused. A missing file means the defaults.
"""

from __future__ import annotations

import fnmatch
import math
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from router.contract.clouds import CLOUDS, Cloud, PublicCloud
from router.core.durations import MAX_DURATION_S, parse_duration_s
from router.core.errors import BadInput
from router.core.globs import check_globs
from router.core.job.model import MAX_PRICE_PER_HOUR, MIN_PRICE_PER_HOUR

ORG_CONFIG_FILE = "spotroute.yaml"
DEFAULT_MAX_QUOTE_AGE_S = 86_400.0  # a day: spot prices move slowly, interruption data daily
# The sane ranges of spotroute.yaml's numbers (docs/org-config.md); prices as job.yaml's.
MAX_RESERVED_INSTANCES = 100_000
MIN_JOB_COST, MAX_JOB_COST = 0.01, 1e9  # USD
MAX_GPUS_PER_REGION = 1_000_000
MIN_TIME_SCALE, MAX_TIME_SCALE = 0.001, 3_600.0  # simulated seconds per real second
SECRET_KEY_GLOBS = ("*secret*", "*password*", "*passwd*", "*key*", "*token*")
KNOWN_CREDENTIAL_HINTS = (
    "aws_profile",
    "aws_region",
    "gcp_project",
    "azure_subscription_id",
    "azure_tenant_id",
    # written by `route bootstrap` (its org_config_snippet output)
    "router_home",
    "aws_role_arn",
    "gcp_service_account",
    "gcp_workload_identity_provider",
    "azure_client_id",
    "azure_federation_audience",
)


class _Section(BaseModel):
    """Every section refuses unknown keys: a typo in a budget must not pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RegionRules(_Section):
    """Glob patterns over region names (or "cloud:region"); deny wins. Empty allow = all."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    @field_validator("allow", "deny")
    @classmethod
    def _well_formed(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        check_globs(value)  # '[' never closed is a typo, not a pattern that matches nothing
        return value


class Reservation(_Section):
    """Capacity the organisation already pays for; its marginal cost is 0 unless stated."""

    cloud: PublicCloud
    region: str = Field(min_length=1)
    zone: str | None = None
    instance_type: str = Field(min_length=1)
    count: int = Field(ge=1, le=MAX_RESERVED_INSTANCES)
    # effective USD per instance-hour, already paid
    price_per_hour: float = Field(ge=0, le=MAX_PRICE_PER_HOUR)
    # USD per instance-hour
    marginal_price_per_hour: float | None = Field(default=None, ge=0, le=MAX_PRICE_PER_HOUR)

    @property
    def marginal_cost_per_hour(self) -> float:
        """USD per instance-hour a job adds by running here (0 for capacity already paid)."""
        return self.marginal_price_per_hour if self.marginal_price_per_hour is not None else 0.0


class Discount(_Section):
    """A negotiated percentage off list price for a cloud, optionally one family and market."""

    cloud: PublicCloud
    family: str = Field(default="*", min_length=1)  # instance-type glob: "p4*", "a2-*"
    market: Literal["spot", "on-demand", "reserved"] | None = None  # None = every market
    # 0-100, checked below with its own message (the schema says so too)
    percent: float = Field(json_schema_extra={"minimum": 0, "maximum": 100})

    @field_validator("family")
    @classmethod
    def _family_glob(cls, value: str) -> str:
        check_globs([value])
        return value

    @field_validator("percent")
    @classmethod
    def _percent_in_range(cls, value: float) -> float:
        if not 0 <= value <= 100 or math.isnan(value):
            raise ValueError(
                "must be between 0 and 100 — a discount is the percentage off list price"
            )
        return value

    def applies_to(self, cloud: str, instance_type: str, market: str) -> bool:
        """True when this discount covers the instance type in that cloud and market."""
        return (
            cloud == self.cloud
            and (self.market is None or self.market == market)
            and fnmatch.fnmatchcase(instance_type, self.family)
        )

    @property
    def label(self) -> str:
        """How a placement's reasons name it: "discount 10% (aws p4*)"."""
        market = f" {self.market}" if self.market else ""
        return f"discount {self.percent:g}% ({self.cloud} {self.family}{market})"


class Budgets(_Section):
    """Ceilings every plan respects: USD per instance-hour and USD per job."""

    max_price_per_hour: float | None = Field(
        default=None, ge=MIN_PRICE_PER_HOUR, le=MAX_PRICE_PER_HOUR
    )
    max_job_cost: float | None = Field(default=None, ge=MIN_JOB_COST, le=MAX_JOB_COST)


def _seconds(value: Any) -> Any:
    """A duration field: "24h" reads better than 86400 in a reviewed file; numbers are seconds."""
    if isinstance(value, str):
        try:
            return parse_duration_s(value)
        except ValueError:
            raise ValueError(
                f"{value!r} is not a duration — use seconds or e.g. 90m, 24h, 1h30m, 2d"
            ) from None
    return value


class LocalMarketSettings(_Section):
    """The local target as a small market (docs/migration.md): a trace file or inline offers,
    and how it behaves like a cloud (docs/components.md, Local)."""

    trace: str | None = None  # CSV path, relative to spotroute.yaml
    start: datetime | None = None  # when the trace's offsets count from; default: file mtime
    # Inline rows, the trace's columns: {region, market, price_per_hour, capacity[, at]}.
    offers: tuple[dict[str, str | float | int], ...] = ()
    # The cloud whose node boot, image pull and notice lead time the local nodes play
    # (router/data/node_startup.csv); None = a plain process that starts at once.
    profile: PublicCloud | None = None
    # Simulated seconds per real second, for the trace, the nodes and the router's waits.
    time_scale: float = Field(default=1.0, ge=MIN_TIME_SCALE, le=MAX_TIME_SCALE)
    # region → GPUs that may run at once
    quota: dict[str, int] = Field(default_factory=dict, json_schema_extra={
        "additionalProperties": {"type": "integer", "minimum": 0, "maximum": MAX_GPUS_PER_REGION}
    })  # fmt: skip
    # region → boot time (a slow region), seconds
    boot: dict[str, float] = Field(default_factory=dict, json_schema_extra={
        "additionalProperties": {"type": "number", "minimum": 0, "maximum": MAX_DURATION_S}
    })  # fmt: skip

    @field_validator("quota")
    @classmethod
    def _quota(cls, value: dict[str, int]) -> dict[str, int]:
        for region, gpus in value.items():
            if not 0 <= gpus <= MAX_GPUS_PER_REGION:
                raise ValueError(
                    f"{region}: {gpus} — use a number of GPUs from 0 to {MAX_GPUS_PER_REGION:,}"
                )
        return value

    @field_validator("boot", mode="before")
    @classmethod
    def _boot(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: _seconds(v) for k, v in value.items()}
        return value

    @field_validator("boot")
    @classmethod
    def _boot_finite(cls, value: dict[str, float]) -> dict[str, float]:
        for region, seconds in value.items():
            if not math.isfinite(seconds) or not 0 <= seconds <= MAX_DURATION_S:
                raise ValueError(f"{region}: use a duration from 0 to ten years, e.g. 2m")
        return value


class StartupSettings(_Section):
    """How long a new placement may take to come up (docs/migration.md, waits)."""

    # Each phase may take this many times the cloud's expected figure (node_startup.csv).
    budget_factor: float = Field(default=2.0, ge=1, le=100)
    # fixed: `up` → nodes running
    nodes_timeout: float | None = Field(default=None, ge=1, le=MAX_DURATION_S)
    # fixed: nodes running → resumed
    restore_timeout: float | None = Field(default=None, ge=1, le=MAX_DURATION_S)

    @field_validator("nodes_timeout", "restore_timeout", mode="before")
    @classmethod
    def _durations(cls, value: Any) -> Any:
        return _seconds(value)


class OrgConfig(_Section):
    """The parsed spotroute.yaml; `OrgConfig()` is what a project without the file gets."""

    clouds: tuple[Cloud, ...] = CLOUDS
    regions: RegionRules = RegionRules()
    reservations: tuple[Reservation, ...] = ()
    discounts: tuple[Discount, ...] = ()
    budgets: Budgets = Budgets()
    backend_url: str | None = None
    # Pulumi secrets provider for new stacks: awskms://, gcpkms://, azurekeyvault://,
    # hashivault:// (teammates then share cloud permissions, not a passphrase); None = passphrase.
    secrets_provider: str | None = None
    max_quote_age_s: float = Field(default=DEFAULT_MAX_QUOTE_AGE_S, ge=1, le=MAX_DURATION_S)
    # Plans refuse quotes older than max_quote_age_s (as `--require-fresh` does).
    require_fresh: bool = False
    # Deploys to a cloud on stale prices without `--allow-stale` (default: refused).
    allow_stale_deploy: bool = False
    credentials: dict[str, str] = Field(default_factory=dict)
    # Existing Azure storage the jobs may reuse or read: account name → resource id. Needed
    # because a blob URL does not say which subscription and resource group hold the account.
    azure_storage_accounts: dict[str, str] = Field(default_factory=dict)
    local_market: LocalMarketSettings | None = None
    startup: StartupSettings = StartupSettings()

    @field_validator("azure_storage_accounts")
    @classmethod
    def _resource_ids(cls, value: dict[str, str]) -> dict[str, str]:
        for account, resource_id in value.items():
            if not resource_id.startswith("/subscriptions/"):
                raise ValueError(
                    f"{account}: {resource_id!r} is not a resource id — use /subscriptions/<id>/"
                    f"resourceGroups/<group>/providers/Microsoft.Storage/storageAccounts/{account}"
                )
        return value

    @field_validator("max_quote_age_s", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return _seconds(value)

    @field_validator("credentials")
    @classmethod
    def _no_secrets(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            lowered = key.lower()
            if any(fnmatch.fnmatchcase(lowered, glob) for glob in SECRET_KEY_GLOBS):
                # The value is never echoed: it may be the secret itself.
                raise ValueError(
                    f"{key!r} looks like a secret — spotroute.yaml is committed to git and "
                    f"holds hints only ({', '.join(KNOWN_CREDENTIAL_HINTS)}); keep secrets in "
                    "your cloud CLI's credential store or environment"
                )
        return value

    @field_validator("backend_url")
    @classmethod
    def _no_password_in_url(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).password:
            raise ValueError(
                "contains a password — put the URL with credentials in PULUMI_BACKEND_URL "
                "(environment), not in spotroute.yaml"
            )
        return value

    def discount_for(self, cloud: str, instance_type: str, market: str) -> Discount | None:
        """The largest discount covering this instance type and market (discounts never stack)."""
        best: Discount | None = None
        for discount in self.discounts:
            if discount.applies_to(cloud, instance_type, market) and (
                best is None or discount.percent > best.percent
            ):
                best = discount
        return best


def org_config_from_data(raw: object, *, name: str = ORG_CONFIG_FILE) -> OrgConfig:
    """Validate parsed spotroute.yaml data (None = empty file); the first problem is BadInput."""
    if raw is None:
        return OrgConfig()
    if not isinstance(raw, dict):
        raise BadInput(
            f"{name}: must be a mapping of settings (clouds, regions, reservations, discounts, "
            "budgets, backend_url, max_quote_age_s, credentials) — see docs/org-config.md"
        )
    try:
        return OrgConfig.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(_one_line(name, exc)) from None


def _one_line(name: str, exc: ValidationError) -> str:
    errors = exc.errors(include_input=False, include_url=False)
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{name}: {_field_path(first['loc'])}: {_message(first)}{more}"


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "(top level)"


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key — check the spelling (docs/org-config.md lists every key)"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")
