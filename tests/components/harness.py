"""Run Pulumi programs and components against mocks and capture what they would create.

Cloud-agnostic: every cloud's component tests use it.

    stack = run_program({"jobName": "llm", "cloud": "aws", ...})   # keys without "spotroute:"
    stack.one("aws:ec2/fleet:Fleet").inputs["spotOptions"]             # camelCase wire names
    stack.outputs["checkpointUrl"]

    stack = run_components(lambda: aws_network.Network("net", NetworkArgs(...)))  # one component

Each run gets a fresh event loop and fresh Pulumi runtime settings (reset_options + set_mocks),
so runs don't leak resources, config or stack outputs into each other.

Invokes (data-source calls) are answered from `calls`: token → function(args) → result dict.
DEFAULT_CALLS answers the AWS lookups the AWS components make; pass `calls={token: fn}` for
other clouds' lookups. An invoke nobody answers fails the run, naming the token.

Resource state returned to the program is the inputs plus an id and, for a few types, the
computed outputs components read (DEFAULT_STATES; extend with `states={type: fn}`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc as pulumi_rpc
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.stack import run_pulumi_func

PROJECT = "spotroute"
ACCOUNT_ID = "123456789012"
FAKE_AMI_ID = "ami-0123456789abcdef0"

CallAnswer = Callable[[dict[str, Any]], dict[str, Any]]
StateFiller = Callable[[str, dict[str, Any]], dict[str, Any]]  # (name, inputs) → extra state
# (type, logical name, inputs) → the inputs as the cloud admits them (autonamed names filled in),
# or an exception with the provider's refusal (tests/components/cloud_account.py).
Admit = Callable[[str, str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class CapturedResource:
    """One resource the program registered: type token, logical name, inputs (camelCase keys)."""

    type: str
    name: str
    inputs: dict[str, Any]
    parent_type: str  # "" for children of the stack itself
    parent_name: str
    provider: str  # provider reference "urn::id", "" when the default provider is used
    custom: bool  # False for ComponentResources
    urn: str
    dependencies: tuple[str, ...] = ()  # URNs from depends_on and from inputs
    ignore_changes: tuple[str, ...] = ()  # wire (camelCase) property names
    delete_before_replace: bool = False
    replace_on_changes: tuple[str, ...] = ()  # wire (camelCase) property names
    secret_inputs: tuple[str, ...] = ()  # dotted paths of inputs sent as secrets, e.g. "value"
    retain_on_delete: bool = False  # `pulumi destroy` forgets it instead of deleting it


@dataclass(frozen=True)
class CapturedInvoke:
    token: str
    args: dict[str, Any]
    provider: str


@dataclass
class CapturedStack:
    """Everything a run registered, in registration order, plus resolved stack outputs."""

    resources: list[CapturedResource] = field(default_factory=list)
    invokes: list[CapturedInvoke] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, type_: str) -> list[CapturedResource]:
        """All resources with this type token, e.g. "aws:s3/bucket:Bucket"."""
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str) -> CapturedResource:
        """The single resource of this type; fails the test if there are none or several."""
        found = self.of_type(type_)
        assert len(found) == 1, f"expected one {type_}, found {[r.name for r in found]}"
        return found[0]

    def named(self, name: str) -> CapturedResource:
        """The resource with this logical name (names are unique within spotroute programs)."""
        found = [r for r in self.resources if r.name == name]
        assert len(found) == 1, f"expected one resource named {name}, found {len(found)}"
        return found[0]

    def children_of(self, parent_name: str) -> list[CapturedResource]:
        return [r for r in self.resources if r.parent_name == parent_name]

    def types(self) -> set[str]:
        return {r.type for r in self.resources}

    def custom_resources(self) -> list[CapturedResource]:
        """Cloud resources only (no components, no providers)."""
        return [
            r for r in self.resources if r.custom and not r.type.startswith("pulumi:providers:")
        ]


def _aws_bucket(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    bucket = inputs.get("bucket") or f"{inputs.get('bucketPrefix', name + '-')}mock0001"
    return {"bucket": bucket, "arn": f"arn:aws:s3:::{bucket}"}


def _aws_named_iam(kind: str) -> StateFiller:
    def fill(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        physical = inputs.get("name") or f"{inputs.get('namePrefix', name + '-')}mock0001"
        return {"name": physical, "arn": f"arn:aws:iam::{ACCOUNT_ID}:{kind}/{physical}"}

    return fill


def _aws_instant_fleet(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """An instant fleet that got all its capacity: one instance id per unit of target capacity."""
    count = int(inputs.get("targetCapacitySpecification", {}).get("totalTargetCapacity", 0))
    ids = [f"i-{name[:8]}{n:08x}" for n in range(count)]
    return {"fleetInstanceSets": [{"instanceIds": ids, "instanceType": "mock"}] if ids else []}


DEFAULT_STATES: dict[str, StateFiller] = {
    "aws:ec2/fleet:Fleet": _aws_instant_fleet,
    "aws:s3/bucket:Bucket": _aws_bucket,
    "aws:iam/role:Role": _aws_named_iam("role"),
    "aws:iam/instanceProfile:InstanceProfile": _aws_named_iam("instance-profile"),
    "aws:ec2/launchTemplate:LaunchTemplate": lambda name, inputs: {"latestVersion": 1},
}

DEFAULT_CALLS: dict[str, CallAnswer] = {
    "aws:ssm/getParameter:getParameter": lambda args: {
        "name": args["name"],
        "type": "String",
        "value": FAKE_AMI_ID,
        "insecureValue": FAKE_AMI_ID,
        "version": 1,
        "arn": f"arn:aws:ssm:us-east-1::parameter{args['name']}",
        "id": args["name"],
    },
    "aws:ec2/getAmi:getAmi": lambda args: {"id": FAKE_AMI_ID, "imageId": FAKE_AMI_ID},
    "aws:index/getCallerIdentity:getCallerIdentity": lambda args: {
        "accountId": ACCOUNT_ID,
        "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/test",
        "userId": "AIDATEST",
        "id": ACCOUNT_ID,
    },
    "aws:index/getRegion:getRegion": lambda args: {"name": "us-east-1", "region": "us-east-1"},
}


class RecordingMocks(pulumi_mocks.Mocks):
    """Answers invokes from a table and records every invoke; resource state = inputs + fillers."""

    def __init__(
        self,
        calls: Mapping[str, CallAnswer],
        states: Mapping[str, StateFiller],
        admit: Admit | None = None,
    ):
        self.calls = calls
        self.states = states
        self.admit = admit
        self.invokes: list[CapturedInvoke] = []
        self._lock = threading.Lock()

    def call(self, args: pulumi_mocks.MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
        with self._lock:
            self.invokes.append(CapturedInvoke(args.token, dict(args.args), args.provider or ""))
        answer = self.calls.get(args.token)
        if answer is None:
            raise KeyError(
                f"no mock answer for invoke {args.token} — pass calls={{token: fn}} to the harness"
            )
        # A bare dict means "no check failures" to the mock monitor.
        return answer(dict(args.args))

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        inputs = dict(args.inputs)
        if self.admit is not None:
            inputs = self.admit(args.typ, args.name, inputs)
        state = dict(inputs)
        filler = self.states.get(args.typ)
        if filler is not None:
            state.update(filler(args.name, dict(inputs)))
        # A filler may give the provider's id shape (an ARM id, say) as "__id".
        return str(state.pop("__id", f"{args.name}-id")), state


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """Mock monitor that also keeps each registration's parent and provider."""

    def __init__(self, mocks: RecordingMocks):
        super().__init__(mocks)
        self.registrations: list[CapturedResource] = []
        self._lock = threading.Lock()

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            parent_type, parent_name = _split_urn(request.parent)
            if parent_type == "pulumi:pulumi:Stack":
                parent_type, parent_name = "", ""
            inputs = pulumi_rpc.deserialize_properties(request.object)
            with self._lock:
                self.registrations.append(
                    CapturedResource(
                        type=request.type,
                        name=request.name,
                        inputs=_plain(inputs),
                        parent_type=parent_type,
                        parent_name=parent_name,
                        provider=request.provider,
                        custom=bool(request.custom),
                        urn=response.urn,
                        dependencies=tuple(request.dependencies),
                        ignore_changes=tuple(request.ignoreChanges),
                        delete_before_replace=bool(request.deleteBeforeReplace),
                        replace_on_changes=tuple(request.replaceOnChanges),
                        secret_inputs=tuple(_secret_paths(request.object)),
                        retain_on_delete=bool(request.retainOnDelete),
                    )
                )
        return response


def _secret_paths(value: Any, path: str = "") -> list[str]:
    """Dotted paths of the values the program sent as secrets (the wire's secret signature)."""
    from google.protobuf import struct_pb2

    if isinstance(value, struct_pb2.Value):
        kind = value.WhichOneof("kind")
        if kind == "struct_value":
            return _secret_paths(value.struct_value, path)
        if kind == "list_value":
            return [p for i, v in enumerate(value.list_value.values)
                    for p in _secret_paths(v, f"{path}[{i}]")]  # fmt: skip
        return []
    if isinstance(value, struct_pb2.Struct):
        sig = value.fields.get(pulumi_rpc._special_sig_key)
        if sig is not None and sig.string_value == pulumi_rpc._special_secret_sig:
            return [path]
        return [p for key, v in value.fields.items()
                for p in _secret_paths(v, f"{path}.{key}" if path else key)]  # fmt: skip
    return []


def _split_urn(urn: str) -> tuple[str, str]:
    if not urn:
        return "", ""
    parts = urn.split("::")
    return parts[-2].split("$")[-1], parts[-1]


def _plain(value: Any) -> Any:
    """Deserialized inputs as plain dicts/lists (the SDK hands back its own mapping types)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def config_value(value: object) -> str:
    """A Python value as Pulumi stores config: strings as-is, everything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def run_components(
    program: Callable[[], object],
    config: Mapping[str, object] | None = None,
    *,
    calls: Mapping[str, CallAnswer] | None = None,
    states: Mapping[str, StateFiller] | None = None,
    stack: str = "test-job",
    admit: Admit | None = None,
) -> CapturedStack:
    """Run `program` under mocks (fresh loop + runtime) and return what it registered.

    `config` keys without a namespace get "spotroute:"; values are stored as Pulumi does
    (strings verbatim, numbers/lists/dicts/bools as JSON). Exceptions from the program or from
    any apply propagate to the caller.
    """
    mocks = RecordingMocks(
        {**DEFAULT_CALLS, **(calls or {})}, {**DEFAULT_STATES, **(states or {})}, admit
    )
    monitor = RecordingMonitor(mocks)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi_settings.reset_options(project=PROJECT, stack=stack, preview=False)
        from router.contract.stack_config import SECRET_KEYS

        values = {
            (key if ":" in key else f"spotroute:{key}"): config_value(value)
            for key, value in (config or {}).items()
        }
        # The contract's secret keys are secrets here too, as the engine passes them.
        pulumi.runtime.set_all_config(
            values, [f"spotroute:{k}" for k in SECRET_KEYS if f"spotroute:{k}" in values]
        )
        pulumi_mocks.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
        root = pulumi_settings.get_root_resource()

        async def run() -> dict[str, Any]:
            def body() -> None:
                program()  # its return value (often the component it built) is not awaited

            await run_pulumi_func(body)
            exported: dict[str, Any] = getattr(root, "outputs", {})
            return {
                name: _plain(await pulumi.Output.from_input(value).future())
                for name, value in exported.items()
            }

        outputs = loop.run_until_complete(run())
        return CapturedStack(
            resources=list(monitor.registrations), invokes=list(mocks.invokes), outputs=outputs
        )
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        asyncio.set_event_loop(None)
        pulumi_settings.reset_options()
        pulumi.runtime.set_all_config({})


def run_program(
    config: Mapping[str, object],
    *,
    calls: Mapping[str, CallAnswer] | None = None,
    states: Mapping[str, StateFiller] | None = None,
    stack: str = "",
    admit: Admit | None = None,
) -> CapturedStack:
    """Run the placement program with this stack config (keys without "spotroute:") as `stack`
    (default: the job's first stack, named after the job)."""
    from components.program import placement_program

    stack = stack or str(config.get("jobName", "test-job")) or "test-job"
    return run_components(
        placement_program, config, calls=calls, states=states, stack=stack, admit=admit
    )
