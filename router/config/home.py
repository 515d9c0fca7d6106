"""Where spotroute keeps its own state: $SPOTROUTE_HOME, default ~/.spotroute."""

from __future__ import annotations

import os
from pathlib import Path

from router.core.errors import BadInput

HOME_ENV = "SPOTROUTE_HOME"
CACHE_FILE_NAME = "prices.sqlite3"


def spotroute_home() -> Path:
    """The state directory ($SPOTROUTE_HOME or ~/.spotroute), created with mode 0700 if missing."""
    configured = os.environ.get(HOME_ENV, "").strip()
    home = Path(configured).expanduser() if configured else Path.home() / ".spotroute"
    home = home.absolute()
    try:
        if home.is_dir():
            if not os.access(home, os.R_OK | os.W_OK | os.X_OK):
                raise BadInput(
                    f"{HOME_ENV} {home} is not readable and writable by you — fix its "
                    f"permissions or point {HOME_ENV} at another directory"
                )
            return home
    except OSError as err:
        raise BadInput(
            f"{HOME_ENV} {home}: {err.strerror} — set {HOME_ENV} to a directory"
        ) from None
    try:
        # mkdir's mode is filtered by the umask; chmod afterwards so the price cache,
        # state backend and journal are private to the user whatever the umask is.
        home.mkdir(mode=0o700, parents=True)
        home.chmod(0o700)
    except FileExistsError:
        if not home.is_dir():
            raise BadInput(
                f"{HOME_ENV} {home} exists but is not a directory; "
                f"point {HOME_ENV} at a directory or move the file away"
            ) from None
    except OSError as err:
        raise BadInput(
            f"cannot create spotroute home {home}: {err.strerror or err}; "
            f"set {HOME_ENV} to a writable directory"
        ) from err
    return home


def cache_path() -> Path:
    """Path of the SQLite price cache inside spotroute's home."""
    return spotroute_home() / CACHE_FILE_NAME
