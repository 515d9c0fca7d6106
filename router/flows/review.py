"""`route review JOB [--against REF]`: what a stack grants and exposes, and what a change widens.

Credential-free, for pull requests: the job's reviewed stack file (stacks/Pulumi.<job>.yaml, or
the bootstrap stack's) is run through the placement (or bootstrap) program under Pulumi's mocks
(router/engine/mocked_run.py) — no provider plugin, no backend, no cloud account. The same is
done for the stack file *and the components code* at a git ref (default: the merge base with
main), so a pull request that widens a component's IAM policy shows the widened statements.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from router.config.project import Project
from router.config.user_files import CONFIG_LIMIT_BYTES, read_user_text
from router.core.errors import BadInput, OperationFailed
from router.core.exposure import Exposure, ExposureDiff, diff, exposure
from router.core.journal import newest_stack
from router.flows.live_placement import live_stack, local_records

BOOTSTRAP = "bootstrap"
RUNNER = Path(__file__).resolve().parents[1] / "engine" / "mocked_run.py"
RENDER_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class StackReview:
    stack: str
    against: str | None  # the git ref compared with; None when there was none
    after: Exposure
    diff: ExposureDiff | None
    notes: tuple[str, ...] = ()


def code_root(project: Project) -> Path:
    """Where the `components` package is: the project's own copy (like this repository), else
    the installed spotroute's."""
    if (project.root / "components" / "program.py").is_file():
        return project.root.resolve()
    import components

    return Path(components.__file__).resolve().parent.parent


def _config(text: str | None) -> dict[str, str]:
    """A stack file's config as Pulumi stores it: strings as is, other values as JSON.

    A secret (`secure:` ciphertext) is never decrypted here: the review needs no passphrase, and
    the secret env becomes a placeholder per name, which is all the grants depend on.
    """
    from router.contract.stack_config import MASKED, NAMESPACE

    if not text:
        return {}
    doc = yaml.safe_load(text) or {}
    config = doc.get("config") or {} if isinstance(doc, dict) else {}
    out = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            out[str(key)] = json.dumps(MASKED)
    names = config.get(f"{NAMESPACE}:secretEnvNames")
    # A file from `route plan --write` names the secrets but holds no ciphertext yet (deploy adds
    # it): the placeholders stand in for the values either way.
    if isinstance(names, list) and (names or f"{NAMESPACE}:secretEnv" in out):
        out[f"{NAMESPACE}:secretEnv"] = json.dumps({str(n): MASKED for n in names})
    return out


def render(requests: list[dict[str, Any]], root: Path) -> list[dict[str, Any]]:
    """Run mocked_run.py with `root` first on sys.path; one answer per request."""
    payload = [{**r, "code_root": str(root)} for r in requests]
    try:
        proc = subprocess.run(
            [sys.executable, str(RUNNER)],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=RENDER_TIMEOUT_S,
            cwd=root,
        )
    except subprocess.TimeoutExpired:
        raise OperationFailed("review: rendering the stack under mocks timed out") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise OperationFailed(f"review: rendering the stack under mocks failed: {last}")
    answers: list[dict[str, Any]] = json.loads(proc.stdout)
    return answers


def _git(project: Project, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(project.root), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BadInput(f"git {' '.join(args)}: {proc.stderr.strip() or 'failed'}")
    return proc.stdout


def default_ref(project: Project) -> str:
    """The merge base of HEAD with main (or master, or origin/main)."""
    for base in ("main", "origin/main", "master", "origin/master"):
        proc = subprocess.run(
            ["git", "-C", str(project.root), "merge-base", "HEAD", base],
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    raise BadInput("--against: no main branch to compare with — pass --against GIT-REF")


def _request(stack: str, config: dict[str, str]) -> dict[str, Any]:
    return {
        "program": "bootstrap" if stack == BOOTSTRAP else "placement",
        "stack": stack,
        "config": config,
    }


def _exposure(answer: dict[str, Any], where: str) -> Exposure:
    if "error" in answer:
        raise OperationFailed(f"review: {where}: the program refused the stack: {answer['error']}")
    return exposure(answer["resources"])


def review_stack(job: str, *, project: Project, against: str | None = "") -> StackReview:
    """The job's (or `bootstrap`'s) exposure now and its diff with `against` ("" = merge base
    with main, None = no comparison). The job's stack file is its live stack's (`Pulumi.<job>.2
    .yaml` after a move), compared with the job's newest stack file at the ref."""
    stack = job if job == BOOTSTRAP else live_stack(project, job, local_records(project))
    path = project.stack_config_path(stack)
    if not path.is_file():
        raise BadInput(
            f"JOB: no {path.relative_to(project.root)} — review reads the job's reviewed stack "
            f"file; write it with `route plan JOB_FILE --write` (JOB_FILE: the job's .yaml)"
        )
    root = code_root(project)
    text = read_user_text(path, limit_bytes=CONFIG_LIMIT_BYTES, what="stack file")
    [now_answer] = render([_request(stack, _config(text))], root)
    after = _exposure(now_answer, "working tree")
    if against is None:
        return StackReview(stack, None, after, None)
    ref = against or default_ref(project)
    shown = ref if against else f"merge base with main ({ref[:12]})"
    rel = path.resolve().relative_to(Path(_git(project, "rev-parse", "--show-toplevel").strip()))
    if stack != BOOTSTRAP:
        rel = _job_file_at(project, ref, job, rel)
    show = subprocess.run(
        ["git", "-C", str(project.root), "show", f"{ref}:{rel.as_posix()}"],
        capture_output=True,
        text=True,
    )
    notes: list[str] = []
    if show.returncode != 0:
        _git(project, "rev-parse", "--verify", f"{ref}^{{commit}}")  # a bad ref is bad input
        notes.append(f"{rel} does not exist at {shown}: everything is new")
        return StackReview(stack, shown, after, diff(Exposure(()), after), tuple(notes))
    before_config = _config(show.stdout)
    with tempfile.TemporaryDirectory(prefix="spotroute-review-") as tmp:
        ref_root = _code_at(project, ref, root, Path(tmp), notes)
        [then_answer] = render([_request(stack, before_config)], ref_root)
    before = _exposure(then_answer, shown)
    return StackReview(stack, shown, after, diff(before, after), tuple(notes))


def _job_file_at(project: Project, ref: str, job: str, rel: Path) -> Path:
    """The job's stack file at `ref` (repository-relative): its newest placement's there, which a
    move since may have renamed (`Pulumi.<job>.yaml` then, `Pulumi.<job>.2.yaml` now)."""
    listed = subprocess.run(
        ["git", "-C", str(project.root), "ls-tree", "--full-tree", "--name-only", ref, "--",
         f"{rel.parent.as_posix()}/"],
        capture_output=True, text=True,
    )  # fmt: skip
    names = [
        Path(line).name.removeprefix("Pulumi.").removesuffix(".yaml")
        for line in listed.stdout.splitlines()
        if line.endswith(".yaml")
    ]
    newest = newest_stack(job, names)
    return rel.with_name(f"Pulumi.{newest}.yaml") if newest else rel


def _code_at(project: Project, ref: str, root: Path, tmp: Path, notes: list[str]) -> Path:
    """The components code as it was at `ref` when it lives in the project's repository."""
    top = Path(_git(project, "rev-parse", "--show-toplevel").strip()).resolve()
    if not root.is_relative_to(top):
        notes.append(
            "components come from the installed spotroute package: only the stack "
            "config is compared"
        )
        return root
    archive = tmp / "ref.tar"
    prefix = root.relative_to(top).as_posix()
    paths = (
        [f"{prefix}/components", f"{prefix}/router"] if prefix != "." else ["components", "router"]
    )
    with archive.open("wb") as out:
        proc = subprocess.run(
            ["git", "-C", str(top), "archive", ref, *paths], stdout=out, stderr=subprocess.PIPE
        )
    if proc.returncode != 0:
        raise BadInput(f"--against {ref}: {proc.stderr.decode().strip()}")
    with tarfile.open(archive) as tar:
        tar.extractall(tmp / "tree", filter="data")
    return tmp / "tree" / prefix if prefix != "." else tmp / "tree"
