"""Policy pack entry point: the engine runs `python -u -m pulumi.policy <engine> .` in policies/.

`pulumi.policy` executes this file with runpy, so only the pack directory itself is on sys.path;
the repository root (which holds the `policies` package) is added unless spotroute is installed.
"""

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policies.pack import build_policies  # noqa: E402
from policies.rules import PACK_NAME  # noqa: E402

PolicyPack(
    name=PACK_NAME,
    policies=build_policies(),
    enforcement_level=EnforcementLevel.MANDATORY,
)
