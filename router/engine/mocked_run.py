"""Run a spotroute Pulumi program under Pulumi's mocks: what it would create, without the engine.

No provider plugin, no credential, no backend: the program registers its resources with a mock
monitor that answers with the inputs (plus the few computed outputs the components read), and
this records every registration. `route review` uses it to render what a stack grants.

Also a script, run as `python mocked_run.py` with a JSON request on stdin, so a git ref's own
copy of components/ can be rendered: this file imports nothing of router (the code root given
in the request goes first on sys.path; its `components` package is the one that runs).
    request: {"code_root": DIR, "program": "placement" | "bootstrap", "stack": NAME,
              "config": {"spotroute:key": "value as Pulumi stores it", ...}}  (or a list)
    answer:  {"resources": [{"type", "name", "parent", "inputs"}, ...]} or {"error": "..."}
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Mapping
from typing import Any

PROJECT = "spotroute"
ACCOUNT_ID = "123456789012"
MOCK_IMAGE = "ami-0123456789abcdef0"
MOCK_SUBSCRIPTION = "00000000-0000-4000-8000-000000000000"
MOCK_TENANT = "00000000-0000-4000-8000-000000000001"
MOCK_PRINCIPAL = "00000000-0000-4000-8000-000000000002"

# The data-source calls spotroute's components make, answered with placeholders.
CALLS: dict[str, Any] = {
    "aws:ssm/getParameter:getParameter": lambda a: {
        "name": a["name"], "type": "String", "value": MOCK_IMAGE, "insecureValue": MOCK_IMAGE,
        "version": 1, "arn": f"arn:aws:ssm:us-east-1::parameter{a['name']}", "id": a["name"],
    },
    "aws:ec2/getAmi:getAmi": lambda a: {"id": MOCK_IMAGE, "imageId": MOCK_IMAGE},
    "aws:index/getCallerIdentity:getCallerIdentity": lambda a: {
        "accountId": ACCOUNT_ID, "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/review",
        "userId": "AIDAREVIEW", "id": ACCOUNT_ID,
    },
    "aws:index/getRegion:getRegion": lambda a: {"name": "us-east-1", "region": "us-east-1"},
    "azure-native:authorization:getClientConfig": lambda a: {
        "subscriptionId": MOCK_SUBSCRIPTION, "tenantId": MOCK_TENANT,
        "clientId": MOCK_PRINCIPAL, "objectId": MOCK_PRINCIPAL,
    },
    # The GCP bootstrap's check that its project is spotroute's alone: none to see here.
    "gcp:serviceaccount/getS:getS": lambda a: {"accounts": []},
    "gcp:organizations/getProject:getProject": lambda a: {
        "projectId": a.get("projectId") or "review-project", "number": "123456789012",
        "name": "review-project", "id": a.get("projectId") or "review-project",
    },
}


def _state(type_: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs plus the computed outputs the components read (names, ARNs, principal ids)."""
    state = dict(inputs)
    short = type_.rsplit(":", 1)[-1]
    if type_.startswith("aws:"):
        physical = inputs.get("name") or inputs.get("bucket") or f"{name}-mock"
        kind = {"Role": "role", "InstanceProfile": "instance-profile", "Policy": "policy"}.get(
            short, short.lower()
        )
        state.setdefault("name", physical)
        if short == "Bucket":
            state.setdefault("bucket", physical)
            state.setdefault("arn", f"arn:aws:s3:::{physical}")
        elif short == "OpenIdConnectProvider":
            url = str(inputs.get("url", "")).removeprefix("https://")
            state.setdefault("arn", f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{url}")
        else:
            state.setdefault("arn", f"arn:aws:iam::{ACCOUNT_ID}:{kind}/{physical}")
        if short == "LaunchTemplate":
            state.setdefault("latestVersion", 1)
    elif type_.startswith("gcp:"):
        if short == "Account":
            state["email"] = (
                f"{inputs.get('accountId', name)}@{inputs.get('project', 'review-project')}"
                ".iam.gserviceaccount.com"
            )
            state.setdefault("uniqueId", "100000000000000000001")
        state.setdefault("name", inputs.get("name") or f"{name}-mock")
    elif type_.startswith("azure-native:"):
        own_name = {
            "ResourceGroup": "resourceGroupName", "StorageAccount": "accountName",
            "VirtualNetwork": "virtualNetworkName",
            "NetworkSecurityGroup": "networkSecurityGroupName",
            "UserAssignedIdentity": "resourceName",
        }.get(short, "")
        state.setdefault("name", inputs.get(own_name) or f"{name}mock")
        if short == "UserAssignedIdentity":
            state.update(principalId=MOCK_PRINCIPAL, clientId=MOCK_PRINCIPAL)
        identity = inputs.get("identity")
        if short == "VirtualMachineScaleSet" and isinstance(identity, Mapping):
            state["identity"] = {
                "type": identity.get("type"),
                "userAssignedIdentities": {
                    i: {} for i in identity.get("userAssignedIdentities") or []
                },
            }
    if short == "OutboundIdentity" or "issuer" in short.lower():
        state.setdefault("issuerIdentifier", "https://issuer.review.invalid")
    return state


def run_under_mocks(
    program: Any, config: Mapping[str, str], stack: str
) -> list[dict[str, Any]]:
    """Every resource `program` registers with this config (keys with namespace, values as
    Pulumi stores them): type, name, parent type and inputs (camelCase)."""
    import pulumi
    from pulumi.runtime import mocks as pulumi_mocks
    from pulumi.runtime import rpc as pulumi_rpc
    from pulumi.runtime import settings as pulumi_settings
    from pulumi.runtime.stack import run_pulumi_func

    registered: list[dict[str, Any]] = []
    lock = threading.Lock()

    class Mocks(pulumi_mocks.Mocks):
        def call(self, args: Any) -> Any:  # a bare dict: no check failures
            answer = CALLS.get(args.token)
            if answer is None:
                raise KeyError(f"no placeholder answer for data source {args.token}")
            result: dict[str, Any] = answer(dict(args.args))
            return result

        def new_resource(self, args: Any) -> tuple[str, dict[str, Any]]:
            return f"{args.name}-id", _state(args.typ, args.name, dict(args.inputs))

    class Monitor(pulumi_mocks.MockMonitor):
        def RegisterResource(self, request: Any) -> Any:
            response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
            if request.type != "pulumi:pulumi:Stack":
                parent = request.parent.split("::")[-2].split("$")[-1] if request.parent else ""
                inputs = _plain(pulumi_rpc.deserialize_properties(request.object))
                with lock:
                    registered.append(
                        {"type": request.type, "name": request.name,
                         "parent": "" if parent == "pulumi:pulumi:Stack" else parent,
                         "custom": bool(request.custom), "inputs": inputs}
                    )
            return response

    mocks = Mocks()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi_settings.reset_options(project=PROJECT, stack=stack, preview=True)
        pulumi.runtime.set_all_config(dict(config))
        pulumi_mocks.set_mocks(mocks, project=PROJECT, stack=stack, preview=True,
                               monitor=Monitor(mocks))
        loop.run_until_complete(run_pulumi_func(program))
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        asyncio.set_event_loop(None)
        pulumi_settings.reset_options()
        pulumi.runtime.set_all_config({})
    return registered


def _plain(value: Any) -> Any:
    # The same as router.core.review's, on purpose: this runner imports nothing of router, so that
    # the revision under review (code_root, put first on sys.path) supplies every spotroute module.
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)  # unknowns of a preview, secrets: as their placeholder text


def _answer(request: Mapping[str, Any]) -> dict[str, Any]:
    try:
        if request["program"] == "bootstrap":
            from components.bootstrap import bootstrap_inline_program as program
        else:
            from components.program import placement_program as program
        return {"resources": run_under_mocks(program, request["config"], request["stack"])}
    except Exception as exc:  # the program refused the config, or a mock was missing
        text = " ".join(str(exc).split()) or type(exc).__name__
        return {"error": f"{type(exc).__name__}: {text}"}


def main() -> None:
    """One request (or a list of requests with one code_root) on stdin → answer(s) on stdout."""
    request = json.load(sys.stdin)
    requests = request if isinstance(request, list) else [request]
    sys.path.insert(0, requests[0]["code_root"] if requests else ".")
    answers = [_answer(r) for r in requests]
    json.dump(answers if isinstance(request, list) else answers[0], sys.stdout)


if __name__ == "__main__":
    main()
