"""Reading a job file (job.yaml): safe YAML without duplicate keys, size and encoding checks.

Every problem is one line "<file>: <where>: <problem> — <fix>"; nothing else is raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from router.config.datafiles import load_catalog, load_gpus
from router.config.project import Project
from router.config.safe_yaml import YamlProblem, parse_yaml
from router.config.skypilot import SkyPilotProblem, explain_lines, is_skypilot_task, translate
from router.config.stack_files import read_stack_file
from router.config.user_files import CONFIG_LIMIT_BYTES, FileProblem, read_user_text
from router.core.aws_job_reach import unlisted_buckets
from router.core.catalog import refused_types
from router.core.errors import BadInput
from router.core.job.model import Job
from router.core.job.problems import check_data, clear_credential_warnings, one_line
from router.core.job.schema import job_schema


def load_job(path: str | Path) -> Job:
    """Read and validate a job file; raises BadInput naming the first problem."""
    job, problems = _check_file(path)
    if job is None:
        raise BadInput(problems[0])
    return job


def job_file_schema() -> dict[str, Any]:
    """The JSON Schema of job.yaml (`route schema`), naming the GPUs of router/data/gpus.csv."""
    load_gpus()
    return job_schema()


def validate_job_file(path: str | Path) -> list[str]:
    """Every problem in a job file, one line each; an empty list means the job is valid."""
    return _check_file(path)[1]


def job_warnings(job: Job, path: str | Path, project: Project | None = None) -> list[str]:
    """What is valid but unwise in a job file (a credential in clear; a bucket the AWS job
    boundary of the project's bootstrap denies), one line each."""
    return clear_credential_warnings(job, str(path)) + aws_boundary_warnings(job, path, project)


def job_file_warnings(path: str | Path, project: Project | None = None) -> list[str]:
    """`job_warnings` of a job file; empty when the file is not a valid job (validate says why)."""
    job, _ = _check_file(path)
    return job_warnings(job, path, project) if job is not None else []


# The bootstrap stack (router/flows/bootstrap.py): its name and config namespace.
BOOTSTRAP_STACK, BOOTSTRAP_NAMESPACE = "bootstrap", "spotroute-bootstrap"


def aws_boundary_warnings(job: Job, path: str | Path, project: Project | None) -> list[str]:
    """One line per s3:// bucket of the job outside the project bootstrap's `awsJobBuckets`.

    None without a project or a bootstrap stack file whose clouds include aws: then there is no
    boundary here to compare with (a broken file is `route bootstrap`'s to report).
    """
    if project is None:
        return []
    stack_file = project.stack_config_path(BOOTSTRAP_STACK)
    try:
        config = read_stack_file(stack_file, BOOTSTRAP_NAMESPACE)
    except BadInput:
        return []
    clouds, entries = config.get("clouds"), config.get("awsJobBuckets") or []
    if not isinstance(clouds, list) or "aws" not in clouds or not isinstance(entries, list):
        return []
    where = stack_file.relative_to(project.root)
    return [
        one_line(
            str(path),
            u.field,
            f"s3 bucket '{u.bucket}' is not in {BOOTSTRAP_NAMESPACE}:awsJobBuckets ({where}), so "
            "the AWS job boundary denies the job's nodes every read and write on it — add it "
            "there ('<bucket>@<account id>' for another account's bucket) and run "
            "`route bootstrap`",
        )
        for u in unlisted_buckets(job, [str(e) for e in entries])
    ]


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
    load_gpus()  # the job model's validators look GPU names up
    return check_data(data, source)


def explain_job_file(path: str | Path) -> list[str]:
    """`route validate --explain`: how a SkyPilot task maps onto a job, one line per field, then
    the instance types of the job's GPUs that no offer is made for because the cloud's machine
    image cannot drive them (router/data/images.csv), each with why."""
    try:
        data = _read_yaml(Path(path), str(path))
    except _FileProblem:
        return []  # validate reports it
    lines: list[str] = []
    if is_skypilot_task(data):
        assert isinstance(data, Mapping)
        try:
            translation = translate(data, default_name=Path(path).stem, catalog=load_catalog())
        except SkyPilotProblem:
            return []  # validate reports it
        lines = list(explain_lines(translation))
    job, _problems = _check_file(path)
    return lines + (image_lines(job, path) if job is not None else [])


def image_lines(job: Job, path: str | Path) -> list[str]:
    """The job's GPU types no offer is made for (the cloud's image cannot drive them), with why."""
    catalog = load_catalog()
    clouds = [c for c in job.resources.clouds if c != "local"]
    refused = [
        why
        for a in job.resources.accelerators
        for _it, why in refused_types(catalog, a.gpu, a.count, clouds)
    ]
    if not refused:
        return []
    return [
        "Instance types with the job's GPUs that get no offer (the cloud's machine image cannot "
        f"drive them; `route plan {path} --explain` lists their offers):",
        *(f"  {why}" for why in dict.fromkeys(refused)),
    ]


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


def _read_yaml(path: Path, source: str) -> object:
    try:
        exists, is_dir = path.exists(), path.is_dir()
    except OSError as e:  # e.g. a path component longer than the file system allows
        raise _FileProblem(
            f"cannot use this path ({e.strerror or type(e).__name__}) — check the path"
        ) from None
    if not exists:
        raise _FileProblem("file not found — check the path and the current directory")
    if is_dir:
        hint = next((p.name for p in (path / "job.yaml", path / "job.yml") if p.is_file()), None)
        fix = f"pass the job file, e.g. {path / hint}" if hint else "pass a job .yaml file"
        raise _FileProblem(f"is a directory — {fix}")
    try:
        text = read_user_text(path, limit_bytes=CONFIG_LIMIT_BYTES, what="job file")
    except FileProblem as e:
        raise _FileProblem(e.text, where=e.where) from None
    try:
        return parse_yaml(text, what="job file")
    except YamlProblem as e:
        raise _FileProblem(e.text, where=e.where) from None
