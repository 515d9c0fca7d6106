"""The `route` command line: `commands.py` (the click group), `render.py` (tables and JSON).

`main` is the console entry point (`route = "router.cli:main"`); it imports the click group
only when called, so importing this package costs nothing.
"""

from __future__ import annotations


def main() -> None:
    """Run the `route` command with sys.argv."""
    from router.cli.commands import main as run

    run()
