"""Every `spotroute:*` stack-config key: its type, default, and how its raw value is parsed.

The one definition of the contract between the router and the placement program
(docs/stack-config.md is checked against `KEYS` by a test):

- the router builds the values and passes them through `serialise()`, which refuses a missing or
  unknown key, so it writes exactly these keys;
- the program (components/program.py) reads each raw config string with `parse_value()` (or all
  of them with `parse()`), which applies the key's type and default and raises
  `StackConfigError(key, problem)` on a bad value.

Raw values are what `pulumi.Config.get` returns: strings as they are, everything else as JSON
(structured YAML in the stack file). Standard library only: components import this module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from router.contract.clouds import CLOUDS

NAMESPACE = "spotroute"
# Markets the program deploys; reserved capacity is consumed as on-demand instances.
MARKETS: tuple[str, ...] = ("spot", "on-demand")
DEFAULT_BOOT_DISK_GB = 200
# The one job-name rule (job.yaml `name`, spotroute:jobName). The name is the stack name, the
# value of the spotroute-job label and the prefix of every cloud resource name: RFC 1035-style
# (GCP resource names, label values), and at most 40 characters so derived names such as
# `<job>-ckpt-<suffix>` or AWS name prefixes (37-38 characters) keep the whole job name.
JOB_NAME_MAX = 40
JOB_NAME_PATTERN = r"^[a-z](?:[a-z0-9-]{0,38}[a-z0-9])?$"
JOB_NAME_RULE = (
    "lowercase letters, digits and dashes, starting with a letter, "
    f"at most {JOB_NAME_MAX} characters"
)
# The start-up script's exit status when its group did not form (components/rendezvous.py): the
# storage stayed unwritable to the end of the wait, or a peer never came. The router reads it from
# the node's exit record as an infrastructure failure — re-place and block the zone — not a crash
# (router/core/node_exit.py). 69 is sysexits.h's EX_UNAVAILABLE ("a service is unavailable").
EXIT_GROUP_NOT_FORMED = 69
# What a group's rendezvous exports on each node (components/rendezvous.py; one node too).
GROUP_ENV: tuple[str, ...] = (
    "SPOTROUTE_NODE_ID",
    "SPOTROUTE_NODE_ADDRESS",
    "SPOTROUTE_NODE_RANK",
    "SPOTROUTE_GROUP_GENERATION",
    "SPOTROUTE_RDZV_ENDPOINT",
    "NODE_RANK",
    "NNODES",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SKYPILOT_NODE_RANK",
    "SKYPILOT_NODE_IPS",
)
# Set by spotroute itself on every node (startup script, local target): a job env entry with one
# of these names is refused at validate time, the same rule the components enforce.
RESERVED_ENV: tuple[str, ...] = (
    "SPOTROUTE_JOB_ID",
    "SPOTROUTE_CHECKPOINT_URL",
    "SPOTROUTE_CHECKPOINT_DIR",
    "SPOTROUTE_NODE_COUNT",
    "SPOTROUTE_CHECKPOINT_INTERVAL",
    "SPOTROUTE_NOTICE_SOURCE",
    "SPOTROUTE_PLACEMENT_ID",
    "SPOTROUTE_NODE_DIR",
    "SKYPILOT_NUM_NODES",
    *GROUP_ENV,
)
# Keys of the `spotroute:job` object.
JOB_KEYS: tuple[str, ...] = ("image", "command", "env")

Kind = Literal["string", "number", "integer", "boolean", "list of strings", "object", "map"]
MISSING = "missing — the router writes it; see docs/stack-config.md"


class StackConfigError(ValueError):
    """A raw `spotroute:<key>` value is missing or of the wrong type; `problem` says how."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{NAMESPACE}:{key}: {problem}")
        self.key = key
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Key:
    """One `spotroute:*` key. `default` is the value when unset (required keys have none)."""

    name: str
    kind: Kind
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    low: int | None = None  # inclusive range of an integer key
    high: int | None = None
    # Written by the router for the record (what the placement cost); the program ignores it.
    recorded: bool = False
    # Written as a Pulumi secret (`secure:` ciphertext in the stack file, encrypted in the state);
    # the program reads it with Config.get_secret_object, so it stays a secret Output.
    secret: bool = False

    @property
    def doc_type(self) -> str:
        """The type as docs/stack-config.md's table writes it."""
        if self.choices:
            return " \\| ".join(f"`{choice}`" for choice in self.choices)
        return f"{self.kind}, secret" if self.secret else self.kind


KEYS: tuple[Key, ...] = (
    Key("jobName", "string", required=True),
    Key("cloud", "string", required=True, choices=CLOUDS),
    Key("region", "string", required=True),
    Key("zone", "string", default=""),
    Key("instanceTypes", "list of strings", required=True),
    Key("market", "string", required=True, choices=MARKETS),
    Key("maxPrice", "number", required=True),
    Key("nodeCount", "integer", default=1, low=1, high=64),
    Key("gpu", "string", required=True),
    Key("gpuCount", "integer", required=True, low=1, high=64),
    Key("bootDiskGb", "integer", default=DEFAULT_BOOT_DISK_GB, low=20, high=16384),
    Key("job", "object", required=True),
    Key("checkpointing", "boolean", default=False),
    Key("checkpointUrl", "string", default=""),
    # What `pulumi destroy` does with a checkpoint bucket the stack created: true = keep it and
    # its objects (retain_on_delete; the user's work), false = delete it with its contents. The
    # router writes false only onto a stack whose checkpoints are a verified copy of what the job
    # has elsewhere (a migration's old stack, a rolled-back new one), just before destroying it.
    Key("keepCheckpoints", "boolean", default=True),
    # Random hex the router writes when it creates the stack file and keeps while the file
    # exists: GCP and Azure salt the created bucket's / storage account's (global, fixed) name
    # with it, so a stack created again after a destroy that kept its bucket gets a new one.
    Key("deploymentId", "string", default=""),
    # Whose the project-scoped physical names are (GCP: network, subnet, router, NAT, firewalls,
    # group, service account, secret): "stack" = this placement stack's, so a move's new stack
    # (<job>.2) never takes its old one's names; "job" = the job's, every stack of it the same
    # names (stacks written before per-stack names: they keep theirs). A job's first stack gets
    # the same names either way. The router writes "stack" into a new stack file and keeps the
    # value while the file exists.
    Key("nameScope", "string", default="job", choices=("job", "stack")),
    # The job's checkpoint.interval in seconds (SPOTROUTE_CHECKPOINT_INTERVAL); 0 = unset.
    Key("checkpointIntervalS", "number", default=0),
    # Data sets (job.yaml data): the chosen copy of each, and the ones staged next to the GPUs.
    Key("dataUrls", "list of strings", default=()),
    Key("dataCopyUrls", "list of strings", default=()),
    Key("stagingDays", "integer", default=0, low=0, high=3650),
    # Keyless shell access (AWS SSM Session Manager, GCP IAP); replaced sshCidrs, which opened
    # rules to nodes without public addresses.
    Key("remoteAccess", "boolean", default=False),
    Key("labels", "map", default={}),
    # Secret env (job.yaml run.secrets, and env entries left empty): the names in clear, so the
    # program and reviewers see which variables the job gets; the values only as a Pulumi secret.
    Key("secretEnvNames", "list of strings", default=()),
    Key("secretEnv", "map", default={}, secret=True),
    Key("storageAccountIds", "map", default={}),
    Key("gcpProject", "string", default=""),
    # Inputs the components would otherwise look up in router data or SPOTROUTE_HOME themselves.
    Key("gcpAcceleratorType", "string", default=""),
    Key("localSandboxDir", "string", default=""),
    Key("localCheckpointDir", "string", default=""),
    Key("pricePerHour", "number", recorded=True),
    Key("priceSource", "string", recorded=True),
)
KEY_NAMES: tuple[str, ...] = tuple(key.name for key in KEYS)
SECRET_KEYS: tuple[str, ...] = tuple(key.name for key in KEYS if key.secret)
# How a secret value is shown anywhere spotroute prints config (diffs, reviews, logs).
MASKED = "[secret]"
_BY_NAME: dict[str, Key] = {key.name: key for key in KEYS}


def key(name: str) -> Key:
    """The key called `name` (without the namespace); KeyError if there is none."""
    return _BY_NAME[name]


def serialise(values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` as written to the stack; ValueError if a contract key is missing or unknown."""
    missing = [name for name in KEY_NAMES if name not in values]
    unknown = sorted(set(values) - set(KEY_NAMES))
    if missing or unknown:
        raise ValueError(
            f"stack config does not match the contract: missing {missing}, unknown {unknown}"
        )
    return dict(values)


def parse(get: Callable[[str], str | None]) -> dict[str, Any]:
    """Every plain key the program reads (recorded and secret ones excluded), from `get(name)`."""
    return {k.name: parse_value(k, get(k.name)) for k in KEYS if not (k.recorded or k.secret)}


def parse_secret_env(names: tuple[str, ...], value: Any) -> dict[str, str]:
    """The decrypted spotroute:secretEnv map, checked against spotroute:secretEnvNames."""
    env = _mapping(key("secretEnv"), {} if value is None else value)
    if sorted(env) != sorted(names) or not all(isinstance(v, str) for v in env.values()):
        raise StackConfigError(
            "secretEnv",
            "does not hold a text value for exactly the names in spotroute:secretEnvNames"
            " — deploy with `route deploy`, which writes both",
        )
    return env


def parse_value(k: Key, raw: str | None) -> Any:
    """The typed value of `k` from its raw config string (None = unset); StackConfigError."""
    if raw is None and k.required:
        raise StackConfigError(k.name, MISSING)
    if k.kind == "string":
        value = k.default if raw is None else raw.strip()
        if k.choices and value not in k.choices:
            raise StackConfigError(
                k.name, f"{value!r} is not valid — use one of {', '.join(k.choices)}"
            )
        return value
    data = _json(k, raw)
    return _CHECKS[k.kind](k, data)


def _json(k: Key, raw: str | None) -> Any:
    if raw is None:
        return k.default
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise StackConfigError(k.name, f"{raw!r} is not valid YAML/JSON data ({exc.msg})") from exc


def _number(k: Key, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise StackConfigError(k.name, f"{value!r} is not a number")
    return float(value)


def _integer(k: Key, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise StackConfigError(k.name, f"{value!r} is not a whole number")
    low = k.low if k.low is not None else value
    high = k.high if k.high is not None else value
    if not low <= value <= high:
        raise StackConfigError(k.name, f"{value} is out of range — use {low}..{high}")
    return value


def _boolean(k: Key, value: Any) -> bool:
    if not isinstance(value, bool):
        raise StackConfigError(k.name, f"{value!r} is not true or false")
    return value


def _strings(k: Key, value: Any) -> tuple[str, ...]:
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise StackConfigError(k.name, f"{value!r} is not a list of non-empty strings")
    return tuple(value)


def _mapping(k: Key, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StackConfigError(k.name, f"{value!r} is not a map")
    return dict(value)


_CHECKS: dict[str, Callable[[Key, Any], Any]] = {
    "number": _number,
    "integer": _integer,
    "boolean": _boolean,
    "list of strings": _strings,
    "object": _mapping,
    "map": _mapping,
}
