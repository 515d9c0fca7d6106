"""Canonical GPU names, their memory and the aliases users and clouds write for them.

The table lives in router/data/gpus.csv (with its source and date); this module only reads it.
"""

from __future__ import annotations

import csv
import difflib
import io
from dataclasses import dataclass
from pathlib import Path

# Package data read by path: importlib.resources costs start-up time on every `route` call.
DATA_DIR = Path(__file__).resolve().parent.parent / "data"


class UnknownGpu(ValueError):
    """A GPU name that is not known or not specific enough; the message says which to use."""


@dataclass(frozen=True, slots=True)
class Gpu:
    """One canonical GPU model: `memory_gb` is memory per GPU in GB."""

    name: str
    memory_gb: int
    vendor: str
    aliases: tuple[str, ...]


def _key(name: str) -> str:
    """Lookup key: case-insensitive, and '_' or spaces count as '-' ("a100_80gb" = "A100-80GB")."""
    return "-".join(name.strip().lower().replace("_", " ").replace("-", " ").split())


def parse_gpu_table(text: str) -> tuple[Gpu, ...]:
    """Parse gpus.csv text (lines starting with '#' are source notes) into GPUs, in file order."""
    rows_text = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    rows = csv.DictReader(io.StringIO("\n".join(rows_text)))
    gpus: list[Gpu] = []
    seen: dict[str, str] = {}
    for row in rows:
        gpu = Gpu(
            name=row["name"].strip(),
            memory_gb=int(row["memory_gb"]),
            vendor=row["vendor"].strip(),
            aliases=tuple((row.get("aliases") or "").split()),
        )
        for key in (_key(gpu.name), *map(_key, gpu.aliases)):
            # One spelling naming two GPUs would make lookups depend on file order.
            if seen.setdefault(key, gpu.name) != gpu.name:
                raise ValueError(f"gpus.csv: '{key}' names both {seen[key]} and {gpu.name}")
        gpus.append(gpu)
    return tuple(gpus)


def _load() -> tuple[Gpu, ...]:
    text = DATA_DIR.joinpath("gpus.csv").read_text(encoding="utf-8")
    return parse_gpu_table(text)


GPUS: tuple[Gpu, ...] = _load()
CANONICAL_GPUS: tuple[str, ...] = tuple(g.name for g in GPUS)
_BY_NAME: dict[str, Gpu] = {g.name: g for g in GPUS}
_BY_KEY: dict[str, str] = {
    key: g.name for g in GPUS for key in (_key(g.name), *map(_key, g.aliases))
}


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def canonical_gpu(name: str) -> str:
    """The canonical name for `name` ("h100" -> "H100-80GB"); raises UnknownGpu with the fix."""
    key = _key(name)
    if key in _BY_KEY:
        return _BY_KEY[key]
    # "A100" or "a100-sxm4" start several spellings of different GPUs: name them all.
    family = sorted({canon for k, canon in _BY_KEY.items() if k.startswith(key + "-")})
    if key and len(family) > 1:
        raise UnknownGpu(f"{name!r} is ambiguous — use {_either(family)}")
    close = family or [
        _BY_KEY[k] for k in difflib.get_close_matches(key, list(_BY_KEY), n=1, cutoff=0.75)
    ]
    known = ", ".join(CANONICAL_GPUS)
    if close:
        raise UnknownGpu(f"{name!r} is not a known GPU — did you mean {close[0]}? (known: {known})")
    raise UnknownGpu(f"{name!r} is not a known GPU — use one of {known}")


def gpu_memory_gb(name: str) -> int:
    """Memory per GPU in GB for a canonical name or alias; raises UnknownGpu."""
    return _BY_NAME[canonical_gpu(name)].memory_gb


def gpu_vendor(name: str) -> str:
    """The GPU's vendor ("nvidia") for a canonical name or alias; raises UnknownGpu."""
    return _BY_NAME[canonical_gpu(name)].vendor
