"""Every documented line that installs spotroute also installs what spotroute pins from this tree.

spotroute depends on spotroute-checkpoint (packages/spotroute-checkpoint), which is on no package
index, so a bare `pip install spotroute` or `pip install .` cannot resolve: pip must get the
checkpoint distribution from a path or URL in the same command. This reads the install lines of
docs/team.md's Containerfile, docs/review-workflow.yml and the Makefile and checks each."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]


def local_distributions() -> dict[str, str]:
    """Distribution name → its folder under packages/ (the ones no index holds)."""
    found = {}
    for toml in sorted((REPO / "packages").glob("*/pyproject.toml")):
        name = tomllib.loads(toml.read_text(encoding="utf-8"))["project"]["name"]
        found[canonicalize_name(name)] = toml.parent.relative_to(REPO).as_posix()
    return found


def pinned_from_tree() -> set[str]:
    """The local distributions spotroute's own dependencies name."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    local = local_distributions()
    return {
        canonicalize_name(Requirement(d).name)
        for d in project["dependencies"]
        if canonicalize_name(Requirement(d).name) in local
    }


def sources(args: list[str], tree_root: str) -> dict[str, str]:
    """What a pip install command's arguments install: distribution → where from.

    tree_root is where the command sees this repository ('.', or where a Containerfile copied it).
    """
    local = {folder: name for name, folder in local_distributions().items()}
    out = {}
    for arg in args:
        if arg.startswith("-"):
            continue
        if " @ " in arg:
            name, url = arg.split(" @ ", 1)
            out[canonicalize_name(re.sub(r"\[.*\]$", "", name.strip()))] = url.strip()
            continue
        path = re.sub(r"\[.*\]$", "", arg).rstrip("/")
        rel = path[len(tree_root) :].lstrip("/") if path.startswith(tree_root) else None
        if rel == "" or path in (".", "./"):
            out["spotroute"] = arg
        elif rel in local or path.lstrip("./") in local:
            out[local[rel if rel in local else path.lstrip("./")]] = arg
        else:
            out[canonicalize_name(path)] = "the package index"
    return out


def pip_args(line: str) -> list[str]:
    """The arguments after `pip install` (or after scripts/pip-install.sh's pip) in a line."""
    words = shlex.split(line.split("&&")[0])
    if "pip-install.sh" in " ".join(words):
        return words[words.index(next(w for w in words if w.endswith("pip-install.sh"))) + 2 :]
    return words[words.index("install") + 1 :]


def containerfile_line() -> list[str]:
    team = (REPO / "docs" / "team.md").read_text(encoding="utf-8")
    start = team.index("# Containerfile:")
    block = team[start : team.index("```", start)].replace("\\\n", " ")
    [line] = [ln for ln in block.splitlines() if ln.startswith("RUN pip install")]
    return pip_args(line)


def workflow_lines() -> list[list[str]]:
    workflow = yaml.safe_load((REPO / "docs" / "review-workflow.yml").read_text(encoding="utf-8"))
    runs = [
        step["run"]
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if "pip install" in step.get("run", "")
    ]
    assert runs, "the workflow installs spotroute somewhere"
    return [pip_args(r) for r in runs]


def makefile_line() -> list[str]:
    make = (REPO / "Makefile").read_text(encoding="utf-8")
    [line] = [ln for ln in make.splitlines() if "pip-install.sh" in ln and "packages/" in ln]
    return pip_args(line)


CASES = [
    ("docs/team.md Containerfile", lambda: [containerfile_line()], "/opt/spotroute-src"),
    ("docs/review-workflow.yml", workflow_lines, "."),
    ("Makefile setup", lambda: [makefile_line()], "."),
]


def test_spotroute_pins_a_distribution_of_this_tree() -> None:
    assert "spotroute-checkpoint" in pinned_from_tree()


@pytest.mark.parametrize(("where", "lines", "root"), CASES, ids=[c[0] for c in CASES])
def test_install_line_brings_what_spotroute_pins_from_the_tree(
    where: str, lines: object, root: str
) -> None:
    for args in lines():  # type: ignore[operator]
        got = sources(args, root)

        assert got.get("spotroute") not in (None, "the package index"), (where, args)
        for name in pinned_from_tree():
            assert got.get(name) not in (None, "the package index"), (
                f"{where}: `pip install {' '.join(args)}` does not install {name} from the tree"
            )
            if "://" in got[name]:  # a git URL must name the distribution's folder
                assert f"subdirectory={local_distributions()[name]}" in got[name], (where, args)


def test_a_bare_install_is_caught() -> None:
    assert sources(["spotroute"], ".") == {"spotroute": "the package index"}
    in_container = sources(["--no-cache-dir", "/opt/spotroute-src"], "/opt/spotroute-src")
    assert in_container == {"spotroute": "/opt/spotroute-src"}
    url = "git+https://x/y#subdirectory=packages/spotroute-checkpoint"
    assert sources([f"spotroute-checkpoint[s3] @ {url}"], ".") == {"spotroute-checkpoint": url}
