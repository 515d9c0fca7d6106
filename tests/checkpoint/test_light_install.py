"""spotroute-checkpoint as a training image installs it: its sdist built from the tree and its
wheel from the sdist, the wheel installed by pip into a fresh virtualenv that holds only the
wheel's own dependencies, then a save and a restore — DCP and the plain-directory mode — on
file://, S3, GCS and Azure (the servers of servers.py) from there.

The compromise: those dependencies are links to this environment's installed files
(light_venv.py), not downloads. A truly clean install would fetch torch with its CUDA libraries
(5.5 GB installed) on every CI run; pip still checks the linked distributions against the
wheel's requirements (--no-index), and nothing else is on that virtualenv's path. The module
takes ~30 s here (2 shared cores), most of it the interpreters importing torch and the drivers.

In that virtualenv `router` is a namespace package holding `checkpoint` alone, and the rest of
`router`, Pulumi, click, rich, boto3, the price SDKs, psycopg and the like are not importable at
all, so the library cannot be pulling any of them in. The `spotroute` wheel ships no copy of
`router/checkpoint/`, pins this distribution's version, and installs beside it into one `router`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import build
import pytest
from light_venv import ROOT, Built, build_light_package, clean_env, make_venv, wheel_metadata
from packaging.requirements import Requirement
from servers import Store

EXTRAS = ("torch", "s3", "gcs", "azure")
# Top-level modules of the router's side that a training image must not have. The fsspec drivers'
# own clients (botocore, google-cloud-storage, azure-storage-blob, azure-identity) are allowed.
FORBIDDEN = ("pulumi", "pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_policy",
             "click", "rich", "pydantic", "yaml", "httpx", "boto3", "psycopg",
             "prometheus_client", "components", "policies", "google.cloud.billing",
             "google.cloud.compute", "azure.mgmt", "router.cli", "router.core", "router.config")
LIBRARY = sorted(p.name for p in (ROOT / "router" / "checkpoint").glob("*.py"))

PROBE = r"""
import importlib.util, json, pathlib, pkgutil, sys, tempfile
stores, forbidden, torch_too = json.loads(sys.argv[1]), sys.argv[2].split(","), sys.argv[3] == "1"
import router, router.checkpoint
from router.checkpoint import Checkpointer
report = {"router_file": router.__file__, "library": router.checkpoint.__file__,
          "router_holds": [m.name for m in pkgutil.iter_modules(router.__path__)]}

def checkpointer(url, options):
    return Checkpointer(url, storage_options=options, interval_s=None, handle_sigterm=False)

for kind, url, options in stores:
    done = report[kind] = {}
    if torch_too:
        import torch
        torch.manual_seed(3)
        model, other = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
        with checkpointer(url + "/dcp", options) as ckpt:
            ckpt.save(7, blocking=True, model=model)
        with checkpointer(url + "/dcp", options) as ckpt:
            done["dcp_step"] = ckpt.restore(model=other).step
        done["dcp_equal"] = all(torch.equal(a, b) for a, b in
                                zip(model.state_dict().values(), other.state_dict().values()))
    work = pathlib.Path(tempfile.mkdtemp())
    (work / "state").mkdir()
    (work / "state" / "weights.txt").write_text(kind)
    with checkpointer(url + "/files", options) as ckpt:
        ckpt.save_files(5, str(work / "state"))
    with checkpointer(url + "/files", options) as ckpt:
        done["files_step"] = ckpt.restore_files(str(work / "back")).step
    done["files_content"] = (work / "back" / "weights.txt").read_text()
report["loaded"] = sorted({m.split(".")[0] for m in sys.modules})

def importable(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # its parent package is not there either
        return False

report["importable"] = [name for name in forbidden if importable(name)]
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return build_light_package(tmp_path_factory.mktemp("light-build"))


def probe(python: Path, stores: list[Store], *, torch: bool, home: Path) -> dict[str, Any]:
    """Save and restore on each store from `python` (one interpreter: torch is imported once)."""
    env = clean_env(home, {k: v for store in stores for k, v in store.env.items()})
    done = subprocess.run(
        [str(python), "-c", PROBE,
         json.dumps([(store.kind, store.url, store.storage_options) for store in stores]),
         ",".join(FORBIDDEN), "1" if torch else "0"],
        capture_output=True, text=True, timeout=300, cwd=home, env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_wheel_holds_router_checkpoint_alone_and_builds_from_the_sdist(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        names = wheel.namelist()
    record = [n for n in names if not n.startswith("spotroute_checkpoint-0.1.0.dist-info/")]
    assert sorted(record) == [f"router/checkpoint/{name}" for name in LIBRARY]
    with tarfile.open(built.sdist) as sdist:
        members = [m for m in sdist.getmembers() if "/router/checkpoint/" in m.name]
    assert sorted(m.name.rsplit("/", 1)[1] for m in members) == LIBRARY
    assert all(m.isfile() for m in members)  # the link's targets, not a link to the tree
    version, requires = wheel_metadata(built.wheel)
    plain = sorted(Requirement(r).name for r in requires if Requirement(r).marker is None)
    assert (version, plain) == ("0.1.0", ["fsspec", "numpy", "xxhash"])


def test_the_editable_install_puts_the_checkout_on_the_path(tmp_path: Path) -> None:
    # make setup's `pip install -e ./packages/spotroute-checkpoint`: a namespace portion of
    # `router` on the path would shadow router/__init__.py (spotroute's editable finder comes
    # after the path), as setuptools' editable install of this package did.
    wheel = Path(build.ProjectBuilder(ROOT / "packages" / "spotroute-checkpoint").build(
        "editable", tmp_path))
    with zipfile.ZipFile(wheel) as archive:
        (pth,) = [n for n in archive.namelist() if n.endswith(".pth")]
        assert archive.read(pth).decode().split() == [str(ROOT)]
        assert not [n for n in archive.namelist() if n.startswith("router/")]


def test_save_and_restore_from_the_installed_wheel_on_every_storage(
    built: Built, every_store: list[Store], tmp_path: Path,
) -> None:
    python = make_venv(tmp_path / "image", {built.wheel: EXTRAS})
    report = probe(python, every_store, torch=True, home=tmp_path)

    for kind in ("file", "s3", "gcs", "azure"):
        assert report[kind] == {"dcp_step": 7, "dcp_equal": True, "files_step": 5,
                                "files_content": kind}, kind
    assert report["library"].startswith(str(tmp_path / "image" / "venv" / "lib"))
    assert report["router_file"] is None and report["router_holds"] == ["checkpoint"]
    assert report["importable"] == []
    assert {"torch", "s3fs", "gcsfs", "adlfs"} <= set(report["loaded"])


def test_the_plain_directory_mode_needs_no_torch(
    built: Built, local_store: Store, tmp_path: Path,
) -> None:
    python = make_venv(tmp_path / "image", {built.wheel: ()})
    report = probe(python, [local_store], torch=False, home=tmp_path)

    assert report["file"] == {"files_step": 5, "files_content": "file"}
    assert report["importable"] == [] and "torch" not in report["loaded"]
    loaded = subprocess.run([str(python), "-c", "import torch"], capture_output=True,
                            env=clean_env(tmp_path))
    assert loaded.returncode != 0  # not installed: the [torch] extra brings it


def test_spotroute_depends_on_the_light_package_and_ships_no_copy_of_it(
    built: Built, tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"  # a copy: the build writes build/ and egg-info beside the sources
    for part in ("router", "components", "policies"):
        shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
                    "--no-build-isolation", "--wheel-dir", str(tmp_path / "dist"), str(tree)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("spotroute-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "router/__init__.py" in names and "router/cli/__init__.py" in names
    assert not [n for n in names if n.startswith("router/checkpoint")]
    light = tomllib.loads((ROOT / "packages/spotroute-checkpoint/pyproject.toml").read_text())
    _, requires = wheel_metadata(wheel)
    pins = {str(Requirement(r).specifier) for r in requires
            if Requirement(r).name == "spotroute-checkpoint"}
    assert pins == {f"=={light['project']['version']}"}
    assert "torch" not in {Requirement(r).name for r in requires}  # the route CLI stays light

    # Both wheels in one environment: one `router` package, the library from the light wheel.
    python = make_venv(tmp_path / "router-host", {wheel: (), built.wheel: ()})
    site = python.parents[1] / "lib"
    done = subprocess.run(
        [str(python), "-c", "import router, router.checkpoint.manifest, router.config.checkpoints"
         " as c; print(router.__file__); print(router.checkpoint.__file__); print(c.FORMAT)"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=clean_env(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    router_file, library_file, format_name = done.stdout.split()
    assert router_file == str(next(site.glob("python3*/site-packages/router/__init__.py")))
    assert library_file == str(Path(router_file).parent / "checkpoint" / "__init__.py")
    assert format_name == "spotroute-checkpoint/1"
    version = subprocess.run([str(python.parent / "route"), "--version"], capture_output=True,
                             text=True, timeout=120, cwd=tmp_path, env=clean_env(tmp_path))
    assert (version.returncode, "0.1.0" in version.stdout) == (0, True), version.stderr[-2000:]
