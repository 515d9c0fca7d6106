"""Build spotroute-checkpoint from the tree and install its wheel into a fresh virtualenv whose
dependencies are links into this environment's installed distributions.

Why links: with torch the wheel's dependencies are ~83 distributions (torch and its CUDA
libraries are gigabytes), and CI must not download them a second time. So the virtualenv (no
system site-packages, no pip of its own) gets a directory of symbolic links to the files that the
RECORD of each distribution the wheel requires, transitively and with the chosen extras, lists,
put on its path by a .pth file; then pip installs the wheel with --no-index, which checks that
those distributions satisfy the wheel's requirements. Nothing outside them is importable there.
What this does not exercise is pip's resolution against an index (the versions are this
environment's, which `make setup` resolved from the same requirements).
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import venv
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path("packages") / "spotroute-checkpoint"


@dataclass(frozen=True)
class Built:
    """The sdist and the wheel (built from the sdist, as `python -m build` does)."""

    sdist: Path
    wheel: Path


def build_light_package(outdir: Path) -> Built:
    """Build spotroute-checkpoint's sdist from the tree and its wheel from the sdist, into outdir
    (hatchling writes nothing into the tree; no isolation: the backend is the dev extra's)."""
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(outdir),
                    str(ROOT / PACKAGE)], check=True, capture_output=True, timeout=300)
    (sdist,) = outdir.glob("*.tar.gz")
    (wheel,) = outdir.glob("*.whl")
    return Built(sdist, wheel)


def wheel_metadata(wheel: Path) -> tuple[str, list[str]]:
    """The wheel's version and its Requires-Dist lines, from its METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        headers = HeaderParser().parsestr(archive.read(name).decode())
    return headers["Version"], headers.get_all("Requires-Dist") or []


def dependency_closure(
    roots: list[str], provided: dict[str, list[str]],
) -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions that the requirements `roots` need, transitively, by canonical
    name; `provided` are the wheels about to be installed (name → their Requires-Dist lines).
    KeyError naming one that this environment lacks."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo: list[tuple[str, str]] = []
    done: set[tuple[str, str]] = set()

    def need(lines: list[str], extra: str) -> None:
        for line in lines:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                name = canonicalize_name(requirement.name)
                todo.extend((name, e) for e in ("", *requirement.extras))

    need(roots, "")
    while todo:
        name, extra = todo.pop()
        if (name, extra) in done:
            continue
        done.add((name, extra))
        if name in provided:
            need(provided[name], extra)
            continue
        if name not in found:
            try:
                found[name] = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError as error:
                raise KeyError(f"{name} is required but not installed here") from error
        need(found[name].requires or [], extra)
    return found


def _record(dist: importlib.metadata.Distribution) -> list[PurePosixPath]:
    """The files a distribution installed into site-packages (its RECORD less the scripts)."""
    return [PurePosixPath(f) for f in dist.files or [] if f.parts[0] != ".."]


def link_farm(dists: dict[str, importlib.metadata.Distribution], farm: Path) -> int:
    """Mirror the files of `dists` into `farm` as symbolic links; returns how many links.

    A directory that no other installed distribution has files in is linked whole (torch/, a
    dist-info); one shared with another (google/cloud/, which google-cloud-billing also fills) is
    made a real directory and its own parts linked: nothing outside `dists` shows through.
    """
    inside = {canonicalize_name(dist.metadata["Name"]) for dist in dists.values()}
    outside: set[PurePosixPath] = set()  # every directory some other distribution has files in
    for dist in importlib.metadata.distributions():
        if canonicalize_name(dist.metadata["Name"]) not in inside:
            for path in _record(dist):
                outside.update(path.parents)
    linked: set[PurePosixPath] = set()
    for dist in dists.values():
        base = Path(str(dist.locate_file("")))
        for path in _record(dist):
            whole = next((p for p in reversed(path.parents) if p.parts and p not in outside), path)
            if whole in linked or not (base / whole).exists():
                continue  # linked already, or RECORD names a .pyc never written
            (farm / whole).parent.mkdir(parents=True, exist_ok=True)
            (farm / whole).symlink_to(base / whole)
            linked.add(whole)
    return len(linked)


def make_venv(where: Path, wheels: dict[Path, tuple[str, ...]]) -> Path:
    """A fresh virtualenv with `wheels` (each with its extras) installed by pip, --no-index, over
    the links to what they require; returns its python."""
    names = {wheel: canonicalize_name(wheel.name.split("-")[0]) for wheel in wheels}
    provided = {names[wheel]: wheel_metadata(wheel)[1] for wheel in wheels}
    roots = [f"{names[wheel]}[{','.join(extras)}]" for wheel, extras in wheels.items()]
    specs = [f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
             for wheel, extras in wheels.items()]
    farm = where / "deps"
    link_farm(dependency_closure(roots, provided), farm)
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(where / "venv")
    python = where / "venv" / "bin" / "python"
    site = Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True).strip())
    (site / "dependencies.pth").write_text(f"{farm}\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--quiet", "--no-index", "--no-cache-dir", "--disable-pip-version-check",
                           *specs], capture_output=True, text=True, timeout=300,
                          env=clean_env(where))
    assert done.returncode == 0, done.stderr[-3000:]
    return python


def clean_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A training node's environment: no PYTHONPATH, no proxy, a HOME of its own."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "OMP_NUM_THREADS": "1",
           # gcsfs >= 2025 would ask fake-gcs-server's missing gRPC API first (servers.py)
           "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    return env | (extra or {})
