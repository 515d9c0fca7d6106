"""SkyPilot task YAML, accepted as it is: mapped onto spotroute's job model, field by field.

`route validate/plan/deploy task.yaml` read a SkyPilot task (https://docs.skypilot.co, "SkyPilot
YAML") the same as a job file: `translate` turns its data into job.yaml data and says, one line
each, what it mapped and what it ignored and why. `route validate --explain` prints those lines.

Pure: data in, data out (the catalog is passed in); no files, no clock.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from router.config.datafiles import load_gpus
from router.config.skypilot_storage import SkyPilotProblem, bucket_mounts, data_line, map_mounts
from router.contract.stack_config import JOB_NAME_PATTERN
from router.core.gpus import UnknownGpu
from router.core.job.model import suggested_name

CLOUDS = ("aws", "gcp", "azure")
DEFAULT_DURATION_HOURS = 1.0  # SkyPilot tasks say nothing about how long they run
ASSUMED_CHECKPOINT_INTERVAL = "1h"  # for spot: SkyPilot restarts the task; how often it saves
# SkyPilot's GPU names that differ from spotroute's (its catalog's "A100" is the 40 GB part).
SKYPILOT_GPU_NAMES = {"A100": "A100-40GB", "H100-MEGA": "H100-80GB", "V100-16GB": "V100"}
# Top-level fields that only a SkyPilot task has (a spotroute job has none of them).
SKYPILOT_ONLY = frozenset(
    {"setup", "envs", "num_nodes", "file_mounts", "storage_mounts", "workdir", "secrets",
     "service", "config", "event_callback", "experimental", "inputs", "outputs", "volumes"}
)
SKYPILOT_RESOURCE_KEYS = frozenset(
    {"infra", "cloud", "region", "zone", "accelerators", "accelerator_args", "cpus", "memory",
     "instance_type", "use_spot", "spot_recovery", "job_recovery", "disk_size", "disk_tier",
     "network_tier", "image_id", "ports", "labels", "autostop", "any_of", "ordered",
     "max_hourly_cost", "_docker_login_config", "priority"}
)
__all__ = ["SkyPilotProblem", "Translation", "explain_lines", "is_skypilot_task", "translate"]


class CatalogLookup(Protocol):
    """What the translation needs of router.catalog.Catalog (for `instance_type`)."""

    def get(self, cloud: str, instance_type: str) -> Any: ...


@dataclass(frozen=True)
class Translation:
    """The job.yaml data for a SkyPilot task, and one line per field saying what became of it."""

    job: dict[str, Any]
    mapped: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()


@dataclass
class _Notes:
    mapped: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    def map(self, src: str, dst: str, value: Any) -> None:
        self.mapped.append(f"{src} → {dst}: {_show(value)}")

    def ignore(self, src: str, why: str) -> None:
        self.ignored.append(f"{src}: ignored — {why}")


def is_skypilot_task(data: object) -> bool:
    """True for SkyPilot task data: a SkyPilot-only field, a shell-string `run`, or SkyPilot
    resource fields; never for data with spotroute's required `duration_hours`."""
    if not isinstance(data, Mapping) or "duration_hours" in data:
        return False
    if any(key in data for key in SKYPILOT_ONLY) or isinstance(data.get("run"), str):
        return True
    resources = data.get("resources")
    if not isinstance(resources, Mapping):
        return False
    if set(resources) & (SKYPILOT_RESOURCE_KEYS - {"accelerators"}):
        return True
    accelerators = resources.get("accelerators")
    return isinstance(accelerators, Mapping) and "gpu" not in accelerators


# --- the translation -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    accelerators: tuple[tuple[str, int], ...]
    cloud: str | None
    region: str | None
    zone: str | None
    use_spot: bool


def translate(
    data: Mapping[str, Any], *, default_name: str, catalog: CatalogLookup | None = None
) -> Translation:
    """job.yaml data for a SkyPilot task; raises SkyPilotProblem for what cannot be placed."""
    notes = _Notes()
    job: dict[str, Any] = {}

    raw_name = data.get("name")
    name = str(raw_name) if raw_name not in (None, "") else default_name
    if not re.fullmatch(JOB_NAME_PATTERN, name):
        name = suggested_name(name)
    if name == "bootstrap":
        name = "bootstrap-task"
    job["name"] = name
    notes.map("name" if raw_name else "(file name)", "name", name)

    resources = data.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise SkyPilotProblem("resources", "expected a mapping of resource fields")
    candidates = _candidates(resources, notes, catalog)
    job["resources"] = _resources(resources, candidates, notes)

    spot = {c.use_spot for c in candidates}
    market = "spot" if spot == {True} else "on-demand" if spot == {False} else "auto"
    job["market"] = market
    notes.map("resources.use_spot", "market", market)

    if resources.get("max_hourly_cost") is not None:
        job["max_price_per_hour"] = resources["max_hourly_cost"]
        notes.map("resources.max_hourly_cost", "max_price_per_hour", resources["max_hourly_cost"])

    job["duration_hours"] = DEFAULT_DURATION_HOURS
    notes.ignored.append(
        f"(duration): SkyPilot tasks do not say how long they run — planned as "
        f"{DEFAULT_DURATION_HOURS:g} h (interruption costs scale with it)"
    )

    num_nodes = data.get("num_nodes", 1)
    job["node_count"] = num_nodes
    if "num_nodes" in data:
        notes.map("num_nodes", "node_count", num_nodes)

    mounts = bucket_mounts(data, _envs(data), tuple(job["resources"]["clouds"]), notes)
    storage = map_mounts(mounts, notes)
    checkpoint_url = storage.checkpoint_url if storage.checkpoint_url != "auto" else None
    if market != "on-demand":
        job["checkpoint"] = {
            "interval": ASSUMED_CHECKPOINT_INTERVAL,
            "url": checkpoint_url or "auto",
        }
        notes.ignored.append(
            f"(checkpointing): SkyPilot restarts a spot task from scratch or from its own saves — "
            f"assumed it saves every {ASSUMED_CHECKPOINT_INTERVAL} (restore 10m) to "
            f"{checkpoint_url or 'a bucket the stack creates'}, for the interruption cost"
        )
    elif storage.checkpoint_url:
        job["checkpoint"] = {
            "interval": ASSUMED_CHECKPOINT_INTERVAL, "url": storage.checkpoint_url
        }  # fmt: skip
    if storage.data:
        first = storage.data[0]
        regions = {c.region for c in candidates}
        region = regions.pop() if len(regions) == 1 and None not in regions else "unknown"
        job["data"] = {"url": first.url, "region": region, "size_gb": 0}
        data_line(first, notes)
        notes.ignored.append(
            "(data size): SkyPilot does not say how large the mounted data is — egress is priced "
            "at 0 GB; add the size to a spotroute job file to price moving it"
        )
        for extra in storage.data[1:]:
            notes.ignore(f"{extra.where} ({extra.url})", "spotroute prices one data location")

    job["run"] = _run(data, resources, notes)
    job["labels"] = _labels(resources, notes)

    for key in data:
        if key in ("name", "resources", "num_nodes", "file_mounts", "storage_mounts", "setup",
                   "run", "envs", "secrets"):
            continue
        notes.ignore(str(key), _IGNORED_TOP.get(str(key), "not a field spotroute maps"))
    return Translation(job, tuple(dict.fromkeys(notes.mapped)), tuple(dict.fromkeys(notes.ignored)))


_IGNORED_TOP = {
    "workdir": "spotroute does not copy a directory from this machine — bake the code into "
    "resources.image_id: docker:… or fetch it in setup",
    "service": "SkyServe services are not training jobs; only the task part is placed",
    "config": "SkyPilot's own advanced settings",
    "event_callback": "SkyPilot's own hook",
    "experimental": "SkyPilot's own experimental settings",
    "volumes": "spotroute does not create volumes",
}
_IGNORED_RESOURCES = {
    "disk_size": "the stack gives instances each cloud's default boot disk",
    "disk_tier": "the stack gives instances each cloud's default boot disk",
    "network_tier": "spotroute does not choose network tiers",
    "ports": "the stack opens no inbound ports (SSH from the org's CIDR only); "
    "see `route review` for what it exposes",
    "autostop": "the job's stack stays until `route destroy`",
    "job_recovery": "`route watch` decides recovery and migration",
    "spot_recovery": "`route watch` decides recovery and migration",
    "accelerator_args": "TPU settings; spotroute places GPUs only",
    "priority": "SkyPilot's own scheduling",
    "_docker_login_config": "registry credentials stay out of the stack config",
}


def _candidates(
    resources: Mapping[str, Any], notes: _Notes, catalog: CatalogLookup | None
) -> list[_Candidate]:
    """Every resource candidate: the base, or the base merged with each any_of/ordered entry."""
    alternatives = None
    for key in ("any_of", "ordered"):
        if key in resources:
            entries = resources[key]
            if not isinstance(entries, list) or not entries:
                raise SkyPilotProblem(f"resources.{key}", "expected a list of resource mappings")
            alternatives = [(f"resources.{key}[{i}]", e) for i, e in enumerate(entries)]
            if key == "ordered":
                notes.ignore(
                    "resources.ordered (order)",
                    "spotroute ranks the candidates by total cost, not by their order",
                )
    base = {k: v for k, v in resources.items() if k not in ("any_of", "ordered")}
    merged = (
        [(where, {**base, **(e if isinstance(e, Mapping) else {})}) for where, e in alternatives]
        if alternatives
        else [("resources", base)]
    )
    out: list[_Candidate] = []
    for where, spec in merged:
        cloud, region, zone = _location(spec, where)
        if cloud is not None and cloud not in CLOUDS:
            notes.ignore(f"{where} ({cloud})", "spotroute places on aws, gcp and azure only")
            continue
        accelerators = _accelerators(spec.get("accelerators"), where, notes)
        if not accelerators and spec.get("instance_type"):
            accelerators = _from_instance_type(spec, cloud, where, catalog, notes)
        if not accelerators:
            if spec.get("accelerators"):
                continue  # every accelerator was unknown: said already
            raise SkyPilotProblem(
                f"{where}.accelerators",
                "no accelerators — spotroute places GPU jobs; add e.g. accelerators: A100-80GB:8",
            )
        use_spot = spec.get("use_spot", False)
        if not isinstance(use_spot, bool):
            raise SkyPilotProblem(f"{where}.use_spot", f"expected true or false, got {use_spot!r}")
        out.append(_Candidate(tuple(accelerators), cloud, region, zone, use_spot))
    if not out:
        raise SkyPilotProblem(
            "resources", "no candidate spotroute can place (GPUs on aws, gcp or azure)"
        )
    return out


def _location(spec: Mapping[str, Any], where: str) -> tuple[str | None, str | None, str | None]:
    """(cloud, region, zone) from `infra: cloud/region/zone` or the older cloud/region/zone."""
    infra = spec.get("infra")
    if infra is not None:
        parts = [p if p not in ("", "*") else None for p in str(infra).strip().split("/")]
        parts += [None] * (3 - len(parts))
        cloud, region, zone = parts[0], parts[1], parts[2]
    else:
        cloud, region, zone = spec.get("cloud"), spec.get("region"), spec.get("zone")
    cloud = str(cloud).strip().lower() if cloud else None
    if cloud in ("kubernetes", "k8s"):
        cloud = "kubernetes"
    return cloud, str(region) if region else None, str(zone) if zone else None


def _accelerators(value: Any, where: str, notes: _Notes) -> list[tuple[str, int]]:
    """SkyPilot's three forms: "H100:8", a list (ordered), a set/dict {A100:1, V100:1} or
    {A100-80GB: 8}; GPU names mapped to spotroute's (unknown ones are dropped and said)."""
    if value is None:
        return []
    items: list[tuple[str, Any]] = []
    if isinstance(value, str):
        items = [_split_accelerator(value)]
    elif isinstance(value, Mapping):
        for key, count in value.items():
            name, inline = _split_accelerator(str(key))
            items.append((name, count if count is not None else inline))
    elif isinstance(value, list):
        items = [_split_accelerator(str(v)) for v in value]
        if len(value) > 1:
            notes.ignore(
                f"{where}.accelerators (list order)",
                "spotroute ranks the listed accelerators by total cost, not by their order",
            )
    else:
        raise SkyPilotProblem(f"{where}.accelerators", f"cannot read {value!r}")
    out = []
    for name, count in items:
        try:
            n = int(count)
        except (TypeError, ValueError):
            raise SkyPilotProblem(
                f"{where}.accelerators", f"{name}: count {count!r} is not a whole number"
            ) from None
        gpu = SKYPILOT_GPU_NAMES.get(name.upper(), name)
        try:
            canonical = load_gpus().canonical(gpu)
        except UnknownGpu:
            notes.ignore(
                f"{where}.accelerators {name}:{n}",
                "not a GPU spotroute prices (TPUs and older GPUs are not in its catalog)",
            )
            continue
        if canonical.lower() != name.lower():
            notes.map(f"accelerators {name}", "resources.accelerators", canonical)
        if (canonical, n) not in out:
            out.append((canonical, n))
    return out


def _split_accelerator(text: str) -> tuple[str, Any]:
    name, sep, count = text.strip().rpartition(":")
    return (name.strip(), count.strip()) if sep else (text.strip(), 1)


def _from_instance_type(
    spec: Mapping[str, Any],
    cloud: str | None,
    where: str,
    catalog: CatalogLookup | None,
    notes: _Notes,
) -> list[tuple[str, int]]:
    instance_type = str(spec["instance_type"])
    for c in [cloud] if cloud else list(CLOUDS):
        it = catalog.get(c, instance_type) if catalog is not None and c else None
        if it is not None:
            notes.map(
                f"{where}.instance_type {instance_type}",
                "resources.accelerators",
                f"{it.gpu}:{it.gpu_count} (spotroute may pick an equivalent type)",
            )
            return [(it.gpu, it.gpu_count)]
    raise SkyPilotProblem(
        f"{where}.instance_type",
        f"{instance_type} is not a GPU instance type spotroute knows — name the accelerators",
    )


def _resources(
    resources: Mapping[str, Any], candidates: Sequence[_Candidate], notes: _Notes
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    accelerators = list(dict.fromkeys(a for c in candidates for a in c.accelerators))
    out["accelerators"] = [f"{gpu}:{count}" for gpu, count in accelerators]
    notes.map("resources.accelerators", "resources.accelerators", out["accelerators"])

    clouds = CLOUDS if any(c.cloud is None for c in candidates) else tuple(
        dict.fromkeys(c.cloud for c in candidates if c.cloud)
    )
    out["clouds"] = list(clouds)
    notes.map("resources.infra/cloud", "resources.clouds", out["clouds"])
    if all(c.region for c in candidates):
        out["regions"] = list(dict.fromkeys(c.region for c in candidates if c.region))
        notes.map("resources.infra/region", "resources.regions", out["regions"])
    zones = [c.zone for c in candidates if c.zone]
    if zones:
        notes.ignore(
            "resources zone " + ", ".join(dict.fromkeys(zones)),
            "spotroute keeps the region and picks the zone from current offers",
        )
    # Region names differ between clouds, so only accelerator × location pairs can be lost.
    locations = {(c.cloud, c.region) for c in candidates}
    combos = {(a, (c.cloud, c.region)) for c in candidates for a in c.accelerators}
    if len(set(itertools.product(accelerators, locations))) > len(combos):
        notes.ignore(
            "resources.any_of/ordered (pairing)",
            "spotroute considers every listed accelerator in every listed cloud and region; "
            "it does not keep 'this GPU only there'",
        )

    for key, label in (("cpus", "min_vcpus"), ("memory", "min_memory_gb")):
        if key in resources:
            amount, exact = _at_least(resources[key], key)
            out[label] = amount if key == "memory" else int(amount)
            notes.map(f"resources.{key}", f"resources.{label}", out[label])
            if exact:
                notes.ignore(
                    f"resources.{key} (exact)", f"read as at least {out[label]:g}"
                )
    if resources.get("instance_type") and not any("instance_type" in m for m in notes.mapped):
        notes.ignore(
            "resources.instance_type",
            "spotroute picks instance types from the accelerators across clouds",
        )
    for key, why in _IGNORED_RESOURCES.items():
        if key in resources:
            notes.ignore(f"resources.{key}", why)
    return out


def _at_least(value: Any, key: str) -> tuple[float, bool]:
    text = str(value).strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(\+?)\s*([kmgtp]b)?", text, re.IGNORECASE)
    if not match:
        raise SkyPilotProblem(f"resources.{key}", f"cannot read {value!r} — write e.g. 8+ or 32")
    amount = float(match.group(1))
    unit = (match.group(3) or "gb").lower()
    amount *= {"kb": 2**-20, "mb": 2**-10, "gb": 1.0, "tb": 2**10, "pb": 2**20}[unit]
    return amount, not match.group(2)


def _envs(data: Mapping[str, Any]) -> dict[str, str | None]:
    """The task's envs as SkyPilot reads them (values as text; None = given at launch)."""
    envs = data.get("envs") or {}
    if not isinstance(envs, Mapping):
        raise SkyPilotProblem("envs", "expected a mapping of NAME: value")
    return {
        str(k): None if v is None else str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in envs.items()
    }


def _run(data: Mapping[str, Any], resources: Mapping[str, Any], notes: _Notes) -> dict[str, Any]:
    run, setup = data.get("run"), data.get("setup")
    if run is None or (isinstance(run, str) and not run.strip()):
        raise SkyPilotProblem(
            "run", "the task runs nothing — spotroute deploys jobs; add run: <shell commands>"
        )
    if not isinstance(run, str) or (setup is not None and not isinstance(setup, str)):
        raise SkyPilotProblem("run", "setup and run must be shell strings")
    script = f"{setup.rstrip()}\n{run}" if setup else run
    out: dict[str, Any] = {"command": ["/bin/bash", "-c", script]}
    notes.map("setup + run" if setup else "run", "run.command", "/bin/bash -c <script>")
    if setup:
        notes.ignored.append(
            "setup: SkyPilot runs it once per cluster — spotroute runs it before `run` each time "
            "the job starts"
        )
    image = resources.get("image_id")
    if isinstance(image, str) and image.startswith("docker:"):
        out["image"] = image.removeprefix("docker:")
        notes.map("resources.image_id", "run.image", out["image"])
    elif image is not None:
        notes.ignore(
            "resources.image_id",
            "a machine image belongs to one cloud and region; spotroute boots each cloud's GPU "
            "image (use image_id: docker:… to choose the software)",
        )
    envs = data.get("envs") or {}
    if not isinstance(envs, Mapping):
        raise SkyPilotProblem("envs", "expected a mapping of NAME: value")
    env: dict[str, str | None] = {}
    from_environment = []
    for key, value in envs.items():
        if value is None:
            # SkyPilot asks for it with --env; spotroute reads it from the deploy's environment.
            from_environment.append(str(key))
            env[str(key)] = None
            continue
        env[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    secrets = data.get("secrets") or {}
    if not isinstance(secrets, Mapping):
        raise SkyPilotProblem("secrets", "expected a mapping of NAME: value")
    for key, value in secrets.items():
        if value is not None:
            env[str(key)] = str(value)
    if env:
        out["env"] = env
        notes.map("envs", "run.env", sorted(k for k in env if k not in secrets))
    if from_environment:
        notes.map(
            "envs (no value)", "run.secrets, read from the environment of `route deploy`",
            sorted(from_environment),
        )  # fmt: skip
    if secrets:
        out["secrets"] = sorted(str(k) for k in secrets)
        notes.map("secrets", "run.secrets (stored and delivered as secrets)", out["secrets"])
    return out


def _labels(resources: Mapping[str, Any], notes: _Notes) -> dict[str, str]:
    labels = resources.get("labels") or {}
    out = {}
    if isinstance(labels, Mapping):
        for key, value in labels.items():
            k, v = str(key), str(value)
            if re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", k) and re.fullmatch(r"[a-z0-9_-]{0,63}", v):
                out[k] = v
            else:
                notes.ignore(f"resources.labels.{k}", "not portable across clouds (GCP rules)")
    if out:
        notes.map("resources.labels", "labels", out)
    return out


def _show(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "(none)"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def explain_lines(t: Translation) -> Iterable[str]:
    """What `route validate --explain` prints: the mapping, then what was ignored and why."""
    yield "SkyPilot task mapped onto a spotroute job:"
    for line in t.mapped:
        yield f"  {line}"
    if t.ignored:
        yield "Not mapped:"
        for line in t.ignored:
            yield f"  {line}"
