"""Restore a one-rank checkpoint without importing torch.distributed.checkpoint (DCP).

A restart's restore used to cost a second of imports before it read a byte: DCP's package pulls
in torch.distributed.tensor and, through it, sympy (0.55-0.65 s here), and DCP's state-dict
helper touches torch._dynamo to recognise compiled modules (0.35-0.5 s). A checkpoint saved by
one rank of plain state (not sharded, no DDP/FSDP/compiler wrapper in the model) needs neither:
its data files are DCP's, but where each entry lies is also in `index.json`, which the save
writes from DCP's own metadata (key, path in the state dict, file, offset, length, dtype, shape).
This module reads that checkpoint with the same checks as the DCP path (every file against the
manifest; read in one checked pass while an older checkpoint is left, else checked first) and
hands each object the state dict DCP would have given it. Anything else — several ranks, a
wrapped model, tensor subclasses, a checkpoint without the index — goes through DCP as before.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from router.checkpoint.manifest import Manifest
from router.checkpoint.results import CheckpointDamaged, CheckpointError, PartlyLoaded
from router.checkpoint.storage import Location
from router.checkpoint.verified_io import (
    RecordView,
    entry_of,
    io_pool,
    open_verified_local,
    overlapping,
    read_exactly,
    read_into_checked,
    read_verified,
)

INDEX_NAME = "index.json"
INDEX_FORMAT = "spotroute-dcp-index/1"
# DCP's state-dict helper drops the prefix of torch.distributed's activation-checkpoint wrapper.
CHECKPOINT_WRAPPER = "_checkpoint_wrapped_module"

# --- the save's side -------------------------------------------------------------------------


def index_of(metadata: Any) -> dict[str, Any] | None:
    """The index of a one-rank DCP checkpoint from DCP's Metadata (what `finish` wrote to
    .metadata); None where a light restore could not read it (a tensor in several chunks,
    a stream transform, an entry without its state-dict path)."""
    paths = metadata.planner_data or {}
    items: dict[str, dict[str, Any]] = {}
    for where, stored in metadata.storage_data.items():
        key = where.fqn
        described = metadata.state_dict_metadata.get(key)
        if (
            key in items
            or described is None
            or key not in paths
            or getattr(stored, "transform_descriptors", None)
        ):
            return None
        item: dict[str, Any] = {
            "path": list(paths[key]),
            "file": stored.relative_path,
            "offset": int(stored.offset),
            "length": int(stored.length),
        }
        chunks = getattr(described, "chunks", None)
        if chunks is None:
            item["kind"] = "bytes"
        else:
            whole = list(described.size)
            if len(chunks) != 1 or any(chunks[0].offsets) or list(chunks[0].sizes) != whole:
                return None
            item.update(
                kind="tensor",
                shape=whole,
                dtype=str(described.properties.dtype).removeprefix("torch."),
            )
        items[key] = item
    if set(items) != set(metadata.state_dict_metadata):
        return None
    return {"format": INDEX_FORMAT, "items": items}


# --- which restores may go without DCP ---------------------------------------------------------


def plain_model(model: Any) -> bool:
    """True when DCP's get_model_state_dict would give `model.state_dict()` as it is: no DDP,
    FSDP or compiled module in it and no FQN rewriting hook. Only classes already imported are
    checked: a wrapper whose module was never imported cannot be in the model."""
    import torch

    wrappers: list[type] = [torch.nn.parallel.DistributedDataParallel]
    fsdp = sys.modules.get("torch.distributed.fsdp")
    frames = sys.modules.get("torch._dynamo.eval_frame")
    for module, name in (
        (fsdp, "FullyShardedDataParallel"),
        (fsdp, "FSDPModule"),
        (frames, "OptimizedModule"),
    ):
        found = getattr(module, name, None)
        if isinstance(found, type):
            wrappers.append(found)
    return all(
        not isinstance(m, tuple(wrappers)) and not hasattr(m, "_fqn_modifiers")
        for m in model.modules()
    )


def eligible(manifest: Manifest, objects: dict[str, Any], distributed: bool) -> bool:
    """Whether this restore can go without DCP (see the module's docstring)."""
    import torch

    if distributed or manifest.world_size != 1 or INDEX_NAME not in manifest_paths(manifest):
        return False
    model = objects.get("model")
    if "optimizer" in objects and (
        model is None or not isinstance(objects["optimizer"], torch.optim.Optimizer)
    ):
        return False
    return model is None or (isinstance(model, torch.nn.Module) and plain_model(model))


def manifest_paths(manifest: Manifest) -> set[str]:
    return {entry.path for entry in manifest.files}


# --- the state dicts, as DCP flattens them ----------------------------------------------------


def flatten(state: dict[str, Any]) -> dict[str, tuple[tuple[str | int, ...], Any]]:
    """{flat key: (path, value)} of every leaf, as DCP's planner flattens a state dict
    (torch.distributed.checkpoint._traverse.traverse_state_dict): mappings are walked (keys as
    str), a list is walked (by index) when it holds a tensor or a mapping or a list so walked,
    anything else is a leaf; the key is the path joined by dots."""
    import torch

    def walked(value: Any) -> bool:
        if isinstance(value, Mapping):
            return True
        if not isinstance(value, list):
            return False
        return any(isinstance(entry, torch.Tensor) or walked(entry) for entry in value)

    leaves: dict[str, tuple[tuple[str | int, ...], Any]] = {}

    def visit(path: tuple[str | int, ...], value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                visit((*path, str(key)), inner)
        elif walked(value):
            for position, inner in enumerate(value):
                visit((*path, position), inner)
        else:
            leaves[".".join(map(str, path))] = (path, value)

    for key, value in state.items():
        visit((str(key),), value)
    return leaves


def set_at(state: Any, path: list[Any] | tuple[Any, ...], value: Any) -> None:
    """Put `value` at `path` in nested dicts and lists, making the containers on the way
    (an int step is a list index, a str step a dict key)."""
    for here, after in itertools.pairwise(path):
        fresh: Any = [] if isinstance(after, int) else {}
        if isinstance(state, list):
            while len(state) <= here:
                state.append(None)
            if state[here] is None:
                state[here] = fresh
            state = state[here]
        else:
            state = state.setdefault(here, fresh)
    last = path[-1]
    if isinstance(state, list):
        while len(state) <= last:
            state.append(None)
    state[last] = value


# --- reading -----------------------------------------------------------------------------------


@dataclass
class Read:
    """One stored entry to read: its index item, and the tensor it fills in place, if any."""

    key: str
    item: dict[str, Any]
    target: Any = None  # a tensor to read it into: the object's own, a new one, or None
    owner: str = ""  # the object whose own tensor `target` is ("partly loaded"); "" for new


def load(location: Location, manifest: Manifest, objects: dict[str, Any], *, fused: bool) -> bool:
    """Load `objects` from the checkpoint through its index; False (nothing read) where the
    index or the objects' state dicts need DCP after all. PartlyLoaded (naming the objects
    changed) on a failure after any of them was written to; CheckpointDamaged before that."""
    import torch

    index = json.loads(read_verified(location, manifest, INDEX_NAME))
    if not isinstance(index, dict) or index.get("format") != INDEX_FORMAT:
        return False
    stored: dict[str, dict[str, Any]] = index["items"]
    templates = {name: obj.state_dict() for name, obj in objects.items() if name != "optimizer"}
    reads: list[Read] = []
    for key, (path, value) in flatten(templates).items():
        item = stored.get(key)
        if item is None:  # what DCP says with allow_partial_load=False, in its words
            raise CheckpointError(f"Missing key in checkpoint state_dict: {key}.")
        if isinstance(value, torch.Tensor):
            if type(value) is not torch.Tensor or CHECKPOINT_WRAPPER in key:
                return False  # DTensor, another subclass, a wrapper's prefix: DCP's business
            if item["kind"] != "tensor":
                raise CheckpointError(f"{key}: stored as an object, the state dict has a tensor")
            reads.append(Read(key, item, value, str(path[0])))
        else:
            reads.append(Read(key, item, None, str(path[0])))
    optimizer_state: dict[str, Any] = {}
    if "optimizer" in objects:
        # Everything the optimizer saved, into new tensors (optimizer.load_state_dict takes
        # them as they are): DCP's path first makes the state by a zero-learning-rate step.
        reads += [
            Read(key, item, _empty_like_stored(item))
            for key, item in stored.items()
            if item["path"][0] == "optimizer"
        ]
    changed: set[str] = set()
    try:
        values = _read_files(location, manifest, reads, fused, changed)
        for read in reads:
            raw = values.get(read.key)
            loaded: Any = read.target
            if raw is None:  # read in place
                if read.item["path"][0] == "optimizer":
                    set_at(optimizer_state, read.item["path"][1:], loaded)
                continue
            if read.item["kind"] == "bytes":
                loaded = torch.load(io.BytesIO(raw), weights_only=False)  # as DCP's planner
            else:
                loaded = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
            if read.item["path"][0] == "optimizer":
                set_at(optimizer_state, read.item["path"][1:], loaded)
            elif read.target is not None:
                if tuple(read.target.shape) != tuple(loaded.shape):
                    raise RuntimeError(
                        f"{read.key}: stored size {tuple(loaded.shape)} differs "
                        f"from the model's {tuple(read.target.shape)}"
                    )
                changed.add(read.owner)
                read.target.copy_(loaded)
            else:
                set_at(templates, read.item["path"], loaded)
        changed.update(objects)
        for name, obj in objects.items():
            obj.load_state_dict(optimizer_state if name == "optimizer" else templates[name])
    except BaseException as error:
        if changed and not isinstance(error, KeyboardInterrupt | SystemExit):
            raise PartlyLoaded(error, objects=changed) from error
        raise
    return True


def _empty_like_stored(item: dict[str, Any]) -> Any:
    """A new CPU tensor of a stored tensor's dtype and shape to read it into; None for objects."""
    import torch

    dtype = getattr(torch, str(item.get("dtype")), None)
    if item["kind"] != "tensor" or not isinstance(dtype, torch.dtype):
        return None
    return torch.empty(item["shape"], dtype=dtype)


def _read_files(
    location: Location, manifest: Manifest, reads: list[Read], fused: bool, changed: set[str]
) -> dict[str, bytes]:
    """Fill the in-place targets of `reads` and return the stored bytes of the others, every
    file checked: in one pass (`fused`, local files), else each before any is read."""
    per_file: dict[str, list[Read]] = {}
    for read in reads:
        per_file.setdefault(read.item["file"], []).append(read)
    if not location.is_local:
        with io_pool(len(per_file), "checkpoint-fetch") as pool:
            fetched = dict(
                zip(
                    per_file,
                    pool.map(
                        lambda relative: read_verified(location, manifest, relative), per_file
                    ),
                    strict=True,
                )
            )
        values: dict[str, bytes] = {}
        for relative, data in fetched.items():
            values.update(_from_memory(data, per_file[relative], changed))
        return values
    directory = location.step_path(manifest.step)
    plans = {
        relative: _plan(os.path.join(directory, relative), rs) for relative, rs in per_file.items()
    }

    def one_pass(relative: str) -> bool:
        return fused and read_file_in_one_pass(
            os.path.join(directory, relative),
            entry_of(manifest, relative),
            manifest.checksum_algorithm,
            plans[relative],
            changed,
        )

    def check(relative: str) -> None:
        with open_verified_local(location, manifest, relative):
            pass

    def read_in_place(relative: str) -> None:
        with open(os.path.join(directory, relative), "rb") as stream:
            for start, destination, owner in plans[relative][0]:
                if owner:
                    changed.add(owner)
                read_exactly(stream, start, destination)

    with io_pool(len(per_file), "checkpoint-read") as pool:
        passed = dict(zip(per_file, pool.map(one_pass, per_file), strict=True))
        rest = [relative for relative, done in passed.items() if not done]
        list(pool.map(check, rest))  # every remaining file checked before any is read
        list(pool.map(read_in_place, rest))
    values = {}
    for relative, (_, later) in plans.items():
        with open(os.path.join(directory, relative), "rb") as stream:
            for one in later:
                stream.seek(one.item["offset"])
                values[one.key] = stream.read(one.item["length"])
    return values


Piece = tuple[int, memoryview, str]  # (file offset, destination, owner)


def _plan(path: str, reads: list[Read]) -> tuple[list[Piece], list[Read]]:
    """(pieces read straight into their targets, sorted by offset; reads needing their record's
    bytes). The record's own header (torch.load on the meta device) says where its data is."""
    pieces: list[Piece] = []
    later: list[Read] = []
    try:
        stream = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return [], list(reads)  # the check names it
    with stream:
        for read in reads:
            start = _data_offset(stream, read) if read.target is not None else None
            destination = in_place_destination(read.target) if start is not None else None
            if start is None or destination is None:
                later.append(read)
            else:
                pieces.append((start, destination, read.owner))
    pieces.sort(key=lambda piece: piece[0])
    if overlapping([(start, destination) for start, destination, _ in pieces]):
        return [], list(reads)
    return pieces, later


def _data_offset(stream: Any, read: Read) -> int | None:
    """Where in the file the stored tensor's bytes start, or None where they cannot be read
    into the target as they are (a damaged header, another dtype or shape, a view)."""
    import torch

    item = read.item
    record: Any = RecordView(stream, item["offset"], item["length"])
    try:
        source = torch.load(record, map_location="meta", weights_only=True)
    except Exception:  # a damaged header: the check names the damage
        return None
    target = read.target
    offset = getattr(source.untyped_storage(), "_checkpoint_offset", None)
    if (
        offset is None
        or not source.is_contiguous()
        or source.dtype != target.dtype
        or tuple(source.shape) != tuple(target.shape)
    ):
        return None
    return int(item["offset"] + offset + source.storage_offset() * source.element_size())


def in_place_destination(target: Any) -> memoryview | None:
    """The bytes of `target` to read a stored tensor of its dtype and shape into, or None (not
    a contiguous CPU tensor, or a dtype without a byte view)."""
    import torch

    if target.device.type != "cpu" or not target.is_contiguous():
        return None
    try:
        return memoryview(target.reshape(-1).view(torch.uint8).numpy()).cast("B")
    except (RuntimeError, TypeError, ValueError):
        return None


def read_file_in_one_pass(
    path: str, entry: Any, algorithm: str, plan: tuple[list[Piece], list[Read]], changed: set[str]
) -> bool:
    """Read a local file once, checked as it is read, its tensors straight into their targets
    (verified_io.read_into_checked); False (nothing read) where no tensor maps in place."""
    pieces, _ = plan
    if not pieces:
        return False
    changed.update(owner for _, _, owner in pieces if owner)
    read_into_checked(path, entry, algorithm, [(start, dest) for start, dest, _ in pieces])
    return True


def _from_memory(data: bytes, reads: list[Read], changed: set[str]) -> dict[str, bytes]:
    """The same from a file fetched whole and checked (object storage)."""
    stream = io.BytesIO(data)
    values: dict[str, bytes] = {}
    view = memoryview(data)
    for read in reads:
        start = _data_offset(stream, read) if read.target is not None else None
        destination = in_place_destination(read.target) if start is not None else None
        if start is None or destination is None:
            item = read.item
            values[read.key] = bytes(view[item["offset"] : item["offset"] + item["length"]])
            continue
        if start + destination.nbytes > len(data):
            raise CheckpointDamaged(f"{read.item['file']}: a tensor record ends early")
        if read.owner:
            changed.add(read.owner)
        destination[:] = view[start : start + destination.nbytes]
    return values
