"""Reading a job file (job.yaml): safe YAML without duplicate keys, size and encoding checks.

Every problem is one line "<file>: <where>: <problem> — <fix>"; nothing else is raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from router.config.datafiles import load_catalog
from router.config.skypilot import SkyPilotProblem, explain_lines, is_skypilot_task, translate
from router.core.errors import BadInput
from router.core.job.model import Job
from router.core.job.problems import check_data, one_line

_MAX_FILE_BYTES = 1 << 20


def load_job(path: str | Path) -> Job:
    """Read and validate a job file; raises BadInput naming the first problem."""
    job, problems = _check_file(path)
    if job is None:
        raise BadInput(problems[0])
    return job


def validate_job_file(path: str | Path) -> list[str]:
    """Every problem in a job file, one line each; an empty list means the job is valid."""
    return _check_file(path)[1]


def _check_file(path: str | Path) -> tuple[Job | None, list[str]]:
    source = str(path)
    try:
        data = _read_yaml(Path(path), source)
    except _FileProblem as e:
        return None, [one_line(source, e.where, e.text)]
    try:
        data = _skypilot_as_job(data, Path(path))
    except SkyPilotProblem as e:
        return None, [one_line(source, e.where, e.text)]
    return check_data(data, source)


def explain_job_file(path: str | Path) -> list[str]:
    """How a SkyPilot task file maps onto a job, one line per field (empty for a job file)."""
    try:
        data = _read_yaml(Path(path), str(path))
    except _FileProblem:
        return []  # validate reports it
    if not is_skypilot_task(data):
        return []
    assert isinstance(data, Mapping)
    try:
        return list(
            explain_lines(translate(data, default_name=Path(path).stem, catalog=load_catalog()))
        )
    except SkyPilotProblem:
        return []  # validate reports it


def _skypilot_as_job(data: object, path: Path) -> object:
    """A SkyPilot task file becomes job data (router.config.skypilot); anything else is as is."""
    if not is_skypilot_task(data):
        return data
    assert isinstance(data, Mapping)
    return translate(data, default_name=path.stem, catalog=load_catalog()).job


# --- reading the file


class _FileProblem(Exception):
    def __init__(self, text: str, where: str = "") -> None:
        super().__init__(text)
        self.text = text
        self.where = where


class _JobLoader(yaml.SafeLoader):
    """Safe YAML that refuses duplicate keys (the later one would silently win)."""


def _construct_mapping(loader: _JobLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[object] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:
            continue  # unhashable: the constructor below reports it
        if duplicate:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
    loader.flatten_mapping(node)
    return dict(loader.construct_pairs(node, deep=True))


_JobLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(path: Path, source: str) -> object:
    if not path.exists():
        raise _FileProblem("file not found — check the path and the current directory")
    if path.is_dir():
        hint = next((p.name for p in (path / "job.yaml", path / "job.yml") if p.is_file()), None)
        fix = f"pass the job file, e.g. {path / hint}" if hint else "pass a job .yaml file"
        raise _FileProblem(f"is a directory — {fix}")
    try:
        with path.open("rb") as f:
            raw = f.read(_MAX_FILE_BYTES + 1)
    except OSError as e:
        raise _FileProblem(
            f"cannot read the file ({e.strerror or type(e).__name__}) — check it exists and"
            " its permissions"
        ) from None
    if len(raw) > _MAX_FILE_BYTES:
        raise _FileProblem("file is larger than 1 MiB — is this the job file?")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise _FileProblem(
            f"not UTF-8 text (byte 0x{raw[e.start]:02x}) — save the file as UTF-8",
            where=f"line {line}",
        ) from None
    try:
        return yaml.load(text, Loader=_JobLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = e.problem or e.context or "invalid YAML"
        raise _FileProblem(f"YAML error: {problem} — {_yaml_fix(problem)}", where=where) from None
    except yaml.YAMLError as e:
        raise _FileProblem(f"YAML error: {e} — check the file is YAML") from None
    except (ValueError, RecursionError, OverflowError, TypeError) as e:
        # e.g. an integer with thousands of digits, or nesting deeper than Python's stack
        raise _FileProblem(
            f"cannot read the YAML ({type(e).__name__}) — a job file holds plain short values"
        ) from None


def _yaml_fix(problem: str) -> str:
    if "duplicate key" in problem:
        return "keep only one of them"
    if "another document" in problem or "single document" in problem:
        return "keep one job per file (remove the second '---' document)"
    if "constructor for the tag" in problem:
        return "remove the YAML tag (!!...); job files hold plain values"
    if "'\\t'" in problem:
        return "indent with spaces, not tabs"
    if "recursive" in problem:
        return "remove the alias that refers to itself"
    return "check indentation, colons and quotes around there"
