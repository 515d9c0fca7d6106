"""`pulumi up` entry point (Pulumi.yaml `main: components/`): run the placement program."""

import sys
from pathlib import Path

# Pulumi runs this directory as a script, so its parent (the repository root, which holds the
# `components` package) is not on sys.path unless spotroute is installed.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from components.program import placement_program  # noqa: E402

placement_program()
