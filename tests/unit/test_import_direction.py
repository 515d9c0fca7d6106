"""Imports point one way: cli → flows → (engine | prices) → config → core → contract.

An AST check over router/, components/ and policies/ (every import, also those inside functions
and under TYPE_CHECKING). It fails when

- a router module imports a layer above its own, or a sibling layer of the same rank
  (prices ↔ engine); nothing but `router/__main__.py` imports the CLI;
- a module sits in no layer (new code goes into one of the folders; docs/architecture.md);
- router.core or router.contract imports an I/O or SDK module (yaml, sqlite3, subprocess,
  socket, os, pathlib, time, httpx, pulumi, boto3, google, azure, …);
- router.core or router.contract reads the clock (`datetime.now()`: `now` is an argument);
- router.contract imports anything heavier than the standard library;
- router.checkpoint imports anything else of router;
- components/ or policies/ import router anything but router.contract;
- a module a per-cloud registry imports (a cloud's module) imports the registry back: the cloud
  modules take the shapes they share from the protocol module beside the registry.

A failure reads, e.g. (from test_the_check_reports_an_upward_import_and_a_forbidden_module):

    router/core/planner.py:1: router.core imports yaml — core does no I/O (no files, YAML,
    SQLite, sockets, subprocesses, clock, SDKs); load it in router.config and pass it in
    router/core/planner.py:3: router.core imports router.flows.plan — core may import only
    router.contract, router.core
    router/core/planner.py:7: reads the clock — the core takes `now` as an argument
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Rank of each router layer: a module may import its own layer and lower ranks only.
LAYERS: dict[str, int] = {
    "router.contract": 0,
    "router.core": 1,
    "router.config": 2,
    "router.prices": 3,
    "router.engine": 3,
    "router.nodes": 3,
    "router.flows": 4,
    "router.cli": 5,
    "router.__main__": 6,
}
STANDALONE = ("router.checkpoint",)  # imports nothing else of router
ROOT_MODULES = ("router",)  # router/__init__.py: the version only
PURE_FORBIDDEN = (
    *("yaml", "sqlite3", "subprocess", "socket", "os", "pathlib", "time", "shutil", "tempfile"),
    *("httpx", "requests", "urllib.request", "http", "filelock", "fsspec", "threading"),
    *("pulumi", "pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_policy"),
    *("boto3", "botocore", "google", "azure", "click", "rich"),
)
CONTRACT_FORBIDDEN = (*PURE_FORBIDDEN, "pydantic", "pydantic_core")
# Per-cloud registries → the module beside each that holds the shapes the cloud modules share.
REGISTRIES: dict[str, str] = {
    "router.prices.sources": "router.prices.source_protocol",
    "router.prices.quotas.sources": "router.prices.quotas.request",
    "router.nodes.sources": "router.nodes.node_state",
}
# Known exceptions, each with the reason and who removes it. Keep this list short.
ALLOWED: dict[tuple[str, str], str] = {
    # The Young/Daly formulas the training library checkpoints by, shown per placement by
    # `route plan --explain`: one copy of them (math and re only; the package loads lazily).
    ("router.flows.plan", "router.checkpoint.interval"): "checkpoint interval formulas",
    # The checksums the router checks a job's checkpoints with (route watch, route migrate's
    # copy): the library's own, so both sides know the same algorithms (json and zlib only;
    # xxhash and google-crc32c imported when used).
    ("router.config.checkpoints", "router.checkpoint.manifest"): "manifest checksum algorithms",
    # components → router: H-components removed components/gcp.py → router.catalog and
    # components/local.py → router.home (the router now writes gcpAcceleratorType and the local
    # directories into the stack config). Add nothing here: use router.contract.
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, importer: str) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in the tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = importer.split(".")[: -node.level]
                base = ".".join([*package, base] if base else package)
            if base == "router":  # `from router import cli` imports router.cli
                for alias in node.names:
                    yield node.lineno, f"router.{alias.name}"
            else:
                yield node.lineno, base


def layer_of(module: str) -> str | None:
    for layer in sorted(LAYERS, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def _within(module: str, prefixes: tuple[str, ...] | list[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def problems_of(importer: str, source: str, shown: str) -> list[str]:
    """One line per import of `importer` (module name) that breaks the direction rules."""
    found = []
    tree = ast.parse(source)
    own_layer = layer_of(importer)
    for line, target in imported_modules(tree, importer):
        where = f"{shown}:{line}: {importer.rsplit('.', 1)[0] if own_layer else importer}"
        if (importer, target.split(".")[0]) in ALLOWED or (importer, target) in ALLOWED:
            continue
        top = importer.split(".")[0]
        if top in ("components", "policies"):
            if target.startswith("router") and not _within(target, ["router.contract"]):
                found.append(
                    f"{shown}:{line}: {top} imports {target} — {top} may import only "
                    "router.contract"
                )
            continue
        if _within(importer, STANDALONE):
            if target.startswith("router.") and not _within(target, list(STANDALONE)):
                found.append(f"{where} imports {target} — router.checkpoint is standalone")
            continue
        if own_layer is None:
            continue
        rank = LAYERS[own_layer]
        name = own_layer.removeprefix("router.")
        where = f"{shown}:{line}: {own_layer}"
        if target.startswith("router.") or target == "router":
            target_layer = layer_of(target)
            allowed = sorted(
                (layer for layer, r in LAYERS.items() if r < rank or layer == own_layer),
                key=lambda layer: LAYERS[layer],
            )
            if target_layer is None and target != "router":
                found.append(f"{where} imports {target}, which is in no layer")
            elif target_layer is not None and target_layer not in allowed:
                found.append(
                    f"{where} imports {target} — {name} may import only "
                    f"{', '.join(a for a in allowed if not a.endswith('__main__'))}"
                )
            continue
        forbidden = CONTRACT_FORBIDDEN if own_layer == "router.contract" else PURE_FORBIDDEN
        if rank <= 1 and _within(target, list(forbidden)):
            found.append(
                f"{where} imports {target} — {name} does no I/O (no files, YAML, SQLite, "
                "sockets, subprocesses, clock, SDKs); load it in router.config and pass it in"
            )
    return found


def clock_reads(source: str) -> Iterator[int]:
    """Lines that read the clock (`datetime.now()`, `date.today()`, `utcnow()`)."""
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("now", "utcnow", "today")
        ):
            yield node.lineno


def check(sources: Mapping[str, tuple[str, str]]) -> list[str]:
    """Every problem in `sources` (module name → (shown path, source text))."""
    found = []
    for importer, (shown, source) in sorted(sources.items()):
        top = importer.split(".")[0]
        placed = layer_of(importer) is not None or _within(importer, STANDALONE)
        if top == "router" and importer not in ROOT_MODULES and not placed:
            found.append(
                f"{shown}: {importer} is in no layer — put it in one of "
                f"{', '.join(LAYERS)} (docs/architecture.md)"
            )
        found.extend(problems_of(importer, source, shown))
        if _within(importer, ["router.core", "router.contract"]):
            found.extend(
                f"{shown}:{line}: reads the clock — the core takes `now` as an argument"
                for line in clock_reads(source)
            )
    found.extend(registry_cycles(sources))
    return found


def registry_cycles(sources: Mapping[str, tuple[str, str]]) -> list[str]:
    """Cloud modules that import the registry that imports them."""
    found = []
    for registry, protocol in REGISTRIES.items():
        if registry not in sources:
            continue
        tree = ast.parse(sources[registry][1])
        registered = {t for _, t in imported_modules(tree, registry)} | {
            f"{node.module}.{alias.name}"  # `from router.nodes import aws`
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            for alias in node.names
        }
        for importer in sorted(registered & sources.keys()):
            shown, source = sources[importer]
            found.extend(
                f"{shown}:{line}: {importer} imports {registry}, the registry that imports it — "
                f"take the shared shapes from {protocol}"
                for line, target in imported_modules(ast.parse(source), importer)
                if target == registry
            )
    return found


def repository_sources() -> dict[str, tuple[str, str]]:
    sources = {}
    for package in ("router", "components", "policies"):
        for path in sorted((REPO / package).rglob("*.py")):
            shown = str(path.relative_to(REPO))
            sources[module_name(path, REPO)] = (shown, path.read_text(encoding="utf-8"))
    return sources


def test_imports_point_one_way_across_the_repository() -> None:
    assert check(repository_sources()) == []


def test_the_check_reports_an_upward_import_and_a_forbidden_module() -> None:
    bad_core = "\n".join(
        [
            "import yaml",
            "",
            "from router.flows.plan import plan_job",
            "from router.contract import clouds",
            "",
            "def age(then):",
            "    return datetime.now(UTC) - then",
        ]
    )
    problems = check({"router.core.planner": ("router/core/planner.py", bad_core)})
    assert problems == [
        "router/core/planner.py:1: router.core imports yaml — core does no I/O (no files, YAML, "
        "SQLite, sockets, subprocesses, clock, SDKs); load it in router.config and pass it in",
        "router/core/planner.py:3: router.core imports router.flows.plan — core may import only "
        "router.contract, router.core",
        "router/core/planner.py:7: reads the clock — the core takes `now` as an argument",
    ]


def test_the_check_reports_sideways_imports_and_components_reaching_past_the_contract() -> None:
    sources = {
        "router.flows.jobs": ("router/flows/jobs.py", "from router.cli import render\n"),
        "router.prices.book": ("router/prices/book.py", "from router.engine import automation\n"),
        "components.gcp": (
            "components/gcp.py",
            "def f():\n    from router.core.catalog import C\n",
        ),
        "components.program": ("components/program.py", "from router.contract import clouds\n"),
        "router.migrate": ("router/migrate.py", ""),
    }
    problems = check(sources)
    assert any("router/flows/jobs.py:1: router.flows imports router.cli —" in p for p in problems)
    assert any(
        "router/prices/book.py:1: router.prices imports router.engine —" in p for p in problems
    )
    assert (
        "components/gcp.py:2: components imports router.core.catalog — components may import "
        "only router.contract"
    ) in problems
    assert not any(p.startswith("components/program.py") for p in problems)
    assert any(p.startswith("router/migrate.py: router.migrate is in no layer") for p in problems)


def test_a_cloud_module_importing_its_registry_is_reported() -> None:
    sources = {
        "router.nodes.sources": (
            "router/nodes/sources.py",
            "def _aws():\n    from router.nodes import aws\n\n\ndef _gcp():\n"
            "    from router.nodes import gcp\n",
        ),
        "router.nodes.aws": (
            "router/nodes/aws.py",
            "from router.nodes.sources import NodeState\n",
        ),
        "router.nodes.gcp": ("router/nodes/gcp.py", "from router.nodes.node_state import Node\n"),
    }
    assert check(sources) == [
        "router/nodes/aws.py:1: router.nodes.aws imports router.nodes.sources, the registry that "
        "imports it — take the shared shapes from router.nodes.node_state"
    ]
