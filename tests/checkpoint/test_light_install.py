"""The library on a training node: a fresh virtualenv that has only torch, numpy, fsspec (from the
shared environment, through a .pth file) and a copy of router/__init__.py + router/checkpoint/.

The rest of `router`, `components` and `policies` is absent, and importing pulumi*, click, rich or
a cloud SDK raises, so a save, a restore and the plain-directory mode prove the package pulls in
none of them. (The virtualenv reuses the installed torch instead of downloading it again.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("pulumi", "pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_policy", "click",
             "rich", "boto3", "components", "policies", "pydantic", "yaml", "httpx")

PROBE = r"""
import importlib.abc, sys
FORBIDDEN = set(sys.argv[1].split(","))

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in FORBIDDEN or name.startswith("google.cloud.billing") or name.startswith(
                "azure.mgmt") or (top == "router" and name not in ("router", "router.checkpoint")
                                  and not name.startswith("router.checkpoint.")):
            raise ImportError(f"light install: {name} must not be imported")
        return None

sys.meta_path.insert(0, Refuse())
import tempfile, pathlib
import router.checkpoint as rc
assert pathlib.Path(rc.__file__).is_relative_to(sys.argv[2]), rc.__file__
import torch
from router.checkpoint import Checkpointer
work = tempfile.mkdtemp()
model = torch.nn.Linear(3, 2)
with Checkpointer("file://" + work + "/ck", interval_s=None, handle_sigterm=False) as ckpt:
    ckpt.save(1, blocking=True, model=model)
other = torch.nn.Linear(3, 2)
with Checkpointer("file://" + work + "/ck", interval_s=None, handle_sigterm=False) as ckpt:
    assert ckpt.restore(model=other).step == 1
assert torch.equal(other.weight, model.weight)
pathlib.Path(work, "plain").mkdir()
pathlib.Path(work, "plain", "state.txt").write_text("42")
with Checkpointer("file://" + work + "/files", interval_s=None, handle_sigterm=False) as ckpt:
    ckpt.save_files(5, work + "/plain")
    assert ckpt.restore_files(work + "/back").step == 5
loaded = sorted({m.split(".")[0] for m in sys.modules})
print("LOADED", " ".join(loaded))
"""


def test_the_library_imports_no_pulumi_cli_or_router_module_in_a_fresh_virtualenv(
    tmp_path: Path,
) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True).strip())
    package = tmp_path / "pkg"
    (package / "router").mkdir(parents=True)
    shutil.copy(ROOT / "router" / "__init__.py", package / "router" / "__init__.py")
    shutil.copytree(ROOT / "router" / "checkpoint", package / "router" / "checkpoint",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shared = sysconfig.get_paths()["purelib"]  # where torch, numpy and fsspec are installed
    (site / "spotroute_checkpoint.pth").write_text(f"{package}\n{shared}\n")
    result = subprocess.run(
        [str(python), "-c", PROBE, ",".join(FORBIDDEN), str(package)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = result.stdout.split("LOADED", 1)[1].split()
    assert "torch" in loaded and "router" in loaded
    assert not [name for name in loaded if name.startswith("pulumi")]
    assert not set(loaded) & set(FORBIDDEN)
    assert sys.prefix != str(env_dir)
