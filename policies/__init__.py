"""spotroute's CrossGuard policy pack: rules.py holds the rules, __main__.py serves them.

Pulumi CLI 3.274 runs a policy pack *directory* only through the `pulumi-language-python` plugin,
which spotroute does not ship. It also accepts an *executable* as a pack and runs it as the
analyzer binary (engine address as its only argument), reading PulumiPolicy.yaml from the
executable's directory for the version. `write_launcher` writes such an executable; pass its path
in `policy_packs`. It runs this package with the given interpreter, so no virtualenv is involved.
"""

from __future__ import annotations

import shlex
from pathlib import Path

PACK_DIR = Path(__file__).resolve().parent
LAUNCHER_NAME = "spotroute-policy-pack"


def launcher_script(python: str, pack_dir: Path = PACK_DIR) -> str:
    """Shell script serving the pack: `python -u -m pulumi.policy <engine-address> <pack_dir>`."""
    return (
        "#!/bin/sh\n"
        "# Written by spotroute (policies.write_launcher). The Pulumi engine runs this file as\n"
        "# the policy pack's analyzer and passes the engine address as the only argument.\n"
        f'exec {shlex.quote(python)} -u -m pulumi.policy "$1" {shlex.quote(str(pack_dir))}\n'
    )


def write_launcher(directory: Path, python: str) -> Path:
    """Write the launcher and PulumiPolicy.yaml into `directory`; returns the policy_packs path."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "PulumiPolicy.yaml").write_text((PACK_DIR / "PulumiPolicy.yaml").read_text())
    path = directory / LAUNCHER_NAME
    # Write-then-rename: a concurrent preview may be executing the previous launcher.
    staged = directory / f".{LAUNCHER_NAME}.tmp"
    staged.write_text(launcher_script(python))
    staged.chmod(0o755)
    staged.replace(path)
    return path
