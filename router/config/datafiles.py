"""spotroute's own data files (router/data/*.csv): one way to read each, parsed once.

Convention: `load_<table>(path=None)` reads the bundled file (named `router/data/<file>` in
messages) or `path` (named by its path), hands the text to the pure parser in `router.core`, and
caches the result per path. Package data is read by path: importlib.resources costs start-up
time on every `route` call.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from router.config.user_files import DATA_LIMIT_BYTES, FileProblem, read_user_text
from router.core.catalog import Catalog, parse_catalog, parse_image_limits, with_image_limits
from router.core.egress import EgressTable, parse_egress_csv
from router.core.errors import BadInput
from router.core.gpus import GpuTable, parse_gpu_table, use_gpu_table
from router.core.interruption import InterruptionModel, parse_interruption_csv
from router.core.quotas import (
    QuotaDefinition,
    TypeQuotas,
    parse_quota_definitions,
    parse_type_quotas,
)
from router.core.startup_budget import StartupFigures, parse_startup_csv
from router.core.storage_prices import StoragePrices, parse_storage_csv

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def read_data_file(file_name: str, path: Path | None, what: str) -> tuple[str, str]:
    """(text, name for messages) of router/data/`file_name` or of `path`; BadInput if unreadable."""
    if path is None:
        return DATA_DIR.joinpath(file_name).read_text("utf-8"), f"router/data/{file_name}"
    try:
        return read_user_text(path, limit_bytes=DATA_LIMIT_BYTES, what=what), str(path)
    except FileProblem as exc:
        raise BadInput(f"{path}: cannot read {what}: {exc.text}") from None


@lru_cache(maxsize=1)
def load_gpus() -> GpuTable:
    """Canonical GPU names, memory and aliases (gpus.csv), also handed to router.core.gpus.

    Call it before validating a job or looking up a GPU name: the core reads no files.
    """
    text, name = read_data_file("gpus.csv", None, "the GPU table")
    try:
        table = parse_gpu_table(text)
    except (KeyError, ValueError) as exc:
        raise BadInput(f"{name}: {exc} — fix the row") from exc
    use_gpu_table(table)
    return table


@lru_cache(maxsize=8)
def load_catalog(path: Path | None = None) -> Catalog:
    """The GPU instance catalog (instances.csv) less what the images cannot run (images.csv)."""
    load_gpus()  # rows name canonical GPUs
    catalog = parse_catalog(*read_data_file("instances.csv", path, "the instance catalog"))
    limits = parse_image_limits(*read_data_file("images.csv", None, "the image limits"))
    return with_image_limits(catalog, limits)


@lru_cache(maxsize=8)
def load_egress(path: Path | None = None) -> EgressTable:
    """Data-transfer list prices (egress.csv)."""
    text, name = read_data_file("egress.csv", path, "egress prices")
    return parse_egress_csv(text, name=name)


@lru_cache(maxsize=8)
def load_interruption_model(path: Path | None = None) -> InterruptionModel:
    """Spot interruption buckets and per-cloud defaults (interruption.csv)."""
    text, name = read_data_file("interruption.csv", path, "interruption data")
    return parse_interruption_csv(text, name=name)


@lru_cache(maxsize=1)
def load_quota_definitions() -> tuple[QuotaDefinition, ...]:
    """Every account quota a GPU launch draws on (quotas.csv)."""
    return parse_quota_definitions(*read_data_file("quotas.csv", None, "quota definitions"))


@lru_cache(maxsize=1)
def load_type_quotas() -> tuple[TypeQuotas, ...]:
    """Per catalog instance type, the quotas it draws on (instances.csv quota columns)."""
    text, name = read_data_file("instances.csv", None, "the instance catalog")
    return parse_type_quotas(text, load_quota_definitions(), name)


@lru_cache(maxsize=8)
def load_storage_prices(path: Path | None = None) -> StoragePrices:
    """Standard object-storage list prices at copy destinations (storage.csv)."""
    text, name = read_data_file("storage.csv", path, "storage prices")
    return parse_storage_csv(text, name=name)


@lru_cache(maxsize=4)
def load_startup_figures(path: Path | None = None) -> dict[str, StartupFigures]:
    """Each cloud's node boot, image pull, secret fetch and notice figures (node_startup.csv)."""
    return parse_startup_csv(*read_data_file("node_startup.csv", path, "the node start-up figures"))
