"""Loopback fakes of the APIs router.nodes polls, in their real wire formats (AWS: moto's server).

- GCP (`FakeGcpGroups`, plain HTTP), Compute v1 REST:
  - `GET  /compute/v1/projects/{p}/{zones|regions}/{z}/instanceGroupManagers/{name}` → an
    InstanceGroupManager (`targetSize`, `currentActions`, `status.isStable`);
  - `POST …/instanceGroupManagers/{name}/listManagedInstances` → `{"managedInstances": [...]}`
    (`instance` URL, `instanceStatus`, `currentAction`, `id`);
  - `GET  /compute/v1/projects/{p}/zones/{z}/operations?filter=…` → an OperationList whose
    items are system operations `compute.instances.preempted` with `targetLink` = the VM.
- Azure (`FakeAzureScaleSets`, TLS with fake_azure's throwaway CA, bearer token checked):
  - `GET /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute/
    virtualMachineScaleSets/{name}` → a VirtualMachineScaleSet (`sku.capacity`,
    `properties.virtualMachineProfile.priority` / `evictionPolicy`, Flexible orchestration);
  - `GET /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines
    ?$filter='virtualMachineScaleSet/id' eq '…'&$expand=instanceView` → `{"value": [VM]}` with
    `properties.instanceView.statuses` (`ProvisioningState/…`, `PowerState/…`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.adapters.fake_azure import TOKEN, TlsFiles
from tests.adapters.fake_quotas import FakeAzureUsage, _send, _Server

GCE = "https://www.googleapis.com/compute/v1"
_MIG = re.compile(
    r"^/compute/v1/projects/(?P<p>[^/]+)/(?P<kind>zones|regions)/(?P<where>[^/]+)/"
    r"instanceGroupManagers/(?P<name>[^/]+)(?P<list>/listManagedInstances)?$"
)
_OPS = re.compile(r"^/compute/v1/projects/(?P<p>[^/]+)/zones/(?P<zone>[^/]+)/operations$")


@dataclass
class GcpVm:
    zone: str
    name: str
    status: str = "RUNNING"  # instanceStatus
    action: str = "NONE"  # currentAction
    preempted_at: str | None = None  # a compute.instances.preempted operation exists


@dataclass
class FakeGcpGroups(_Server):
    """One project's managed instance groups: (kind, where, name) → (target size, VMs)."""

    project: str = "spotroute-test"
    groups: dict[tuple[str, str, str], tuple[int, list[GcpVm]]] = field(default_factory=dict)
    status: int = 200
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _Server.__init__(self)

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        parts = urlsplit(handler.path)
        with self.lock:
            self.seen.append(f"{handler.command} {parts.path}")
        if self.status != 200:
            self._error(handler, self.status, "Required 'compute.instanceGroupManagers.get'")
            return
        mig, ops = _MIG.match(parts.path), _OPS.match(parts.path)
        if mig is not None and (mig["kind"], mig["where"], mig["name"]) in self.groups:
            size, vms = self.groups[(mig["kind"], mig["where"], mig["name"])]
            if mig["list"]:
                answer: dict[str, Any] = {"managedInstances": [self._managed(v) for v in vms]}
            else:
                answer = self._manager(mig["kind"], mig["where"], mig["name"], size, vms)
        elif ops is not None:
            query = parse_qs(parts.query).get("filter", [""])[0]
            items = [self._preempted(v) for _k, (_s, vms) in self.groups.items() for v in vms
                     if v.zone == ops["zone"] and v.preempted_at
                     and "compute.instances.preempted" in query]  # fmt: skip
            link = f"{GCE}/projects/{ops['p']}/zones/{ops['zone']}/operations"
            answer = {"kind": "compute#operationList", "id": "ops", "items": items,
                      "selfLink": link}  # fmt: skip
        else:
            self._error(handler, 404, f"The resource '{parts.path}' was not found")
            return
        _send(handler, 200, json.dumps(answer).encode(), "application/json")

    def _vm_url(self, vm: GcpVm) -> str:
        return f"{GCE}/projects/{self.project}/zones/{vm.zone}/instances/{vm.name}"

    def _managed(self, vm: GcpVm) -> dict[str, Any]:
        return {"instance": self._vm_url(vm), "id": str(abs(hash(vm.name)) % 10**18),
                "instanceStatus": vm.status, "currentAction": vm.action,
                "version": {"instanceTemplate": f"{GCE}/projects/{self.project}/global/"
                                                "instanceTemplates/t-1"}}  # fmt: skip

    def _manager(
        self, kind: str, where: str, name: str, size: int, vms: list[GcpVm]
    ) -> dict[str, Any]:
        actions = {k: 0 for k in ("abandoning", "creating", "creatingWithoutRetries", "deleting",
                                  "none", "recreating", "refreshing", "restarting", "resuming",
                                  "starting", "stopping", "suspending", "verifying")}  # fmt: skip
        for vm in vms:
            key = vm.action.lower()
            actions[key] = actions.get(key, 0) + 1
        scope = "zone" if kind == "zones" else "region"
        return {"kind": "compute#instanceGroupManager", "id": "77", "name": name,
                scope: f"{GCE}/projects/{self.project}/{kind}/{where}",
                "baseInstanceName": name.replace("group", "node"),
                "targetSize": size, "currentActions": actions,
                "status": {"isStable": all(v.action == "NONE" for v in vms)},
                "selfLink": f"{GCE}/projects/{self.project}/{kind}/{where}/"
                            f"instanceGroupManagers/{name}"}  # fmt: skip

    def _preempted(self, vm: GcpVm) -> dict[str, Any]:
        return {"kind": "compute#operation", "id": "4242", "name": f"systemevent-{vm.name}",
                "zone": f"{GCE}/projects/{self.project}/zones/{vm.zone}",
                "operationType": "compute.instances.preempted", "targetLink": self._vm_url(vm),
                "targetId": "99", "status": "DONE", "statusMessage": "Instance was preempted.",
                "user": "system", "progress": 100, "insertTime": vm.preempted_at,
                "startTime": vm.preempted_at, "endTime": vm.preempted_at,
                "selfLink": f"{GCE}/projects/{self.project}/zones/{vm.zone}/operations/"
                            f"systemevent-{vm.name}"}  # fmt: skip

    @staticmethod
    def _error(handler: BaseHTTPRequestHandler, status: int, message: str) -> None:
        reason = {403: "forbidden", 404: "notFound"}.get(status, "backendError")
        errors = [{"message": message, "domain": "global", "reason": reason}]
        body = {"error": {"code": status, "message": message, "errors": errors}}
        _send(handler, status, json.dumps(body).encode(), "application/json")


_VMSS = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/"
    r"virtualMachineScaleSets/(?P<name>[^/]+)$"
)
_VMS = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/"
    r"virtualMachines$"
)


@dataclass
class AzureVm:
    name: str
    power: str = "PowerState/running"


@dataclass
class FakeAzureScaleSets(_Server):
    """Scale sets of one resource group: name → (capacity, priority, VMs)."""

    tls_files: TlsFiles | None = None
    subscription: str = "00000000-0000-0000-0000-000000000001"
    group: str = "spotroute-train-rg"
    scale_sets: dict[str, tuple[int, str, list[AzureVm]]] = field(default_factory=dict)
    status: int = 200
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _Server.__init__(self)
        self.tls = self.tls_files

    def vmss_id(self, name: str) -> str:
        return (f"/subscriptions/{self.subscription}/resourceGroups/{self.group}/providers/"
                f"Microsoft.Compute/virtualMachineScaleSets/{name}")  # fmt: skip

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        parts = urlsplit(handler.path)
        query = parse_qs(parts.query)
        with self.lock:
            self.seen.append(handler.path)
        if handler.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._error(handler, 401, "AuthenticationFailed")
            return
        if self.status != 200:
            self._error(handler, self.status, "AuthorizationFailed")
            return
        vmss, vms = _VMSS.match(parts.path), _VMS.match(parts.path)
        if vmss is not None and vmss["name"] in self.scale_sets:
            capacity, priority, _vms = self.scale_sets[vmss["name"]]
            answer: dict[str, Any] = self._scale_set(vmss["name"], capacity, priority)
        elif vms is not None:
            wanted = query.get("$filter", [""])[0]
            match = re.fullmatch(r"'virtualMachineScaleSet/id' eq '(?P<id>[^']+)'", wanted)
            if match is None:
                self._error(handler, 400, "InvalidParameter")
                return
            name = match["id"].rsplit("/", 1)[-1]
            _cap, priority, listed = self.scale_sets.get(name, (0, "Regular", []))
            expand = query.get("$expand", [""])[0] == "instanceView"
            answer = {"value": [self._vm(name, vm, priority, expand) for vm in listed]}
        else:
            self._error(handler, 404, "ResourceNotFound")
            return
        _send(handler, 200, json.dumps(answer).encode(), "application/json")

    def _scale_set(self, name: str, capacity: int, priority: str) -> dict[str, Any]:
        profile: dict[str, Any] = {"priority": priority}
        if priority == "Spot":
            profile |= {"evictionPolicy": "Delete", "billingProfile": {"maxPrice": 1.2}}
        return {"name": name, "id": self.vmss_id(name), "location": "eastus",
                "type": "Microsoft.Compute/virtualMachineScaleSets",
                "sku": {"name": "Standard_NC24ads_A100_v4", "tier": "Standard",
                        "capacity": capacity},
                "properties": {"orchestrationMode": "Flexible", "provisioningState": "Succeeded",
                               "platformFaultDomainCount": 1, "uniqueId": "5c1f",
                               "virtualMachineProfile": profile}}  # fmt: skip

    def _vm(self, vmss: str, vm: AzureVm, priority: str, expand: bool) -> dict[str, Any]:
        props: dict[str, Any] = {
            "vmId": f"0000-{vm.name}", "priority": priority, "provisioningState": "Succeeded",
            "virtualMachineScaleSet": {"id": self.vmss_id(vmss)},
            "hardwareProfile": {"vmSize": "Standard_NC24ads_A100_v4"},
        }  # fmt: skip
        if priority == "Spot":
            props["evictionPolicy"] = "Delete"
        if expand:
            props["instanceView"] = {"statuses": [
                {"code": "ProvisioningState/succeeded", "level": "Info",
                 "displayStatus": "Provisioning succeeded", "time": "2026-12-01T09:00:00Z"},
                {"code": vm.power, "level": "Info", "displayStatus": vm.power.split("/")[-1]},
            ]}  # fmt: skip
        return {"name": vm.name, "location": "eastus", "type": "Microsoft.Compute/virtualMachines",
                "id": f"/subscriptions/{self.subscription}/resourceGroups/{self.group}/providers/"
                      f"Microsoft.Compute/virtualMachines/{vm.name}",
                "properties": props}  # fmt: skip

    _error = staticmethod(FakeAzureUsage._error)  # ARM's {"error": {"code", "message"}}
