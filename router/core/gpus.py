"""Canonical GPU names, their memory and the aliases users and clouds write for them.

The table lives in router/data/gpus.csv (with its source and date). The core reads no files:
router.config.datafiles.load_gpus() reads it, parses it here (`parse_gpu_table`) and hands the
table to `use_gpu_table`; the lookups below (also the job model's validators) answer from it.
"""

from __future__ import annotations

import csv
import difflib
import io
from dataclasses import dataclass
from typing import Any


class UnknownGpu(ValueError):
    """A GPU name that is not known or not specific enough; the message says which to use."""


class GpuTableMissing(RuntimeError):
    """A GPU lookup before the edge handed the table in (a programming error, not user input)."""


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


def parse_gpu_table(text: str) -> GpuTable:
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
    return GpuTable(tuple(gpus))


class GpuTable:
    """The GPU models of gpus.csv, looked up by canonical name or any alias."""

    __slots__ = ("_by_key", "_by_name", "gpus", "names")

    def __init__(self, gpus: tuple[Gpu, ...]) -> None:
        self.gpus = gpus
        self.names: tuple[str, ...] = tuple(g.name for g in gpus)
        self._by_name: dict[str, Gpu] = {g.name: g for g in gpus}
        self._by_key: dict[str, str] = {
            key: g.name for g in gpus for key in (_key(g.name), *map(_key, g.aliases))
        }

    def canonical(self, name: str) -> str:
        """The canonical name for `name` ("h100" -> "H100-80GB"); raises UnknownGpu with the fix."""
        key = _key(name)
        by_key = self._by_key
        if key in by_key:
            return by_key[key]
        # "A100" or "a100-sxm4" start several spellings of different GPUs: name them all.
        family = sorted({canon for k, canon in by_key.items() if k.startswith(key + "-")})
        if key and len(family) > 1:
            raise UnknownGpu(f"{name!r} is ambiguous — use {_either(family)}")
        close = family or [
            by_key[k] for k in difflib.get_close_matches(key, list(by_key), n=1, cutoff=0.75)
        ]
        known = ", ".join(self.names)
        if close:
            raise UnknownGpu(
                f"{name!r} is not a known GPU — did you mean {close[0]}? (known: {known})"
            )
        raise UnknownGpu(f"{name!r} is not a known GPU — use one of {known}")

    def gpu(self, name: str) -> Gpu:
        """The GPU a canonical name or alias names; raises UnknownGpu."""
        return self._by_name[self.canonical(name)]


_TABLE: dict[str, GpuTable] = {}  # "table" → the table in use, once the edge has handed it in


def use_gpu_table(table: GpuTable) -> None:
    """Make `table` the one the lookups below answer from (router.config.datafiles.load_gpus)."""
    _TABLE["table"] = table


def gpu_table() -> GpuTable:
    """The GPU table in use; raises GpuTableMissing before the edge has loaded it."""
    try:
        return _TABLE["table"]
    except KeyError:
        raise GpuTableMissing(
            "no GPU table: call router.config.datafiles.load_gpus() before looking up GPU "
            "names (the core reads no files)"
        ) from None


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def canonical_gpus() -> tuple[str, ...]:
    """Every canonical GPU name, in gpus.csv order."""
    return gpu_table().names


def canonical_gpu(name: str) -> str:
    """The canonical name for `name` ("h100" -> "H100-80GB"); raises UnknownGpu with the fix."""
    return gpu_table().canonical(name)


def gpu_memory_gb(name: str) -> int:
    """Memory per GPU in GB for a canonical name or alias; raises UnknownGpu."""
    return gpu_table().gpu(name).memory_gb


def gpu_vendor(name: str) -> str:
    """The GPU's vendor ("nvidia") for a canonical name or alias; raises UnknownGpu."""
    return gpu_table().gpu(name).vendor


def describe_gpu_field(schema: dict[str, Any]) -> None:
    """JSON Schema of a job's `gpu` field: the canonical names, read when the schema is built."""
    names = list(canonical_gpus())
    schema["description"] = "GPU model: " + ", ".join(names) + " (aliases like h100 work)"
    schema["examples"] = names
