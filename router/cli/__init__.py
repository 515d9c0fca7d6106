"""The `route` command line: `commands.py` (the click group), `render.py` (tables and JSON).

`main` is the console entry point (`route = "router.cli:main"`); it imports the click group
only when called, so importing this package costs nothing.
"""

from __future__ import annotations


def main() -> None:
    """Run the `route` command with sys.argv."""
    import warnings

    # google.api_core warns on every import about Python versions it will drop in 2027; that is
    # not the user's problem today, and one warning on stderr reads like an error.
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\..*")
    from router.cli.commands import main as run

    run()
