"""`pulumi up` entry point (Pulumi.yaml `main: components/`): the placement program, or the
bootstrap program for the `bootstrap` stack."""

import sys
from pathlib import Path

# Pulumi runs this directory as a script, so its parent (the repository root, which holds the
# `components` package) is not on sys.path unless spotroute is installed.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import pulumi  # noqa: E402

if pulumi.get_stack() == "bootstrap":
    from components.bootstrap import bootstrap_inline_program

    bootstrap_inline_program()
else:
    from components.program import placement_program

    placement_program()
