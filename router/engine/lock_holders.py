"""Who holds a record-store lock: the name a holder writes beside the lock it takes, and the
patient read of it by a router the lock refused (router.engine.records' three stores)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path


def current_user() -> str:
    """The login name of this process's user: from the environment (LOGNAME, USER, …) or, where
    none is set (a service, a container, `sudo -i`), the account database; its uid at worst."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no such variable and no passwd entry for this uid
        return f"uid {os.getuid()}"


def holder_name() -> str:
    """`alice@build-7 (pid 4242) since 2026-12-01 11:07:02 UTC`: who takes a lock, and when."""
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return f"{current_user()}@{socket.gethostname()} (pid {os.getpid()}) since {since}"


def named_holder(read: Callable[[], object]) -> str:
    """Who holds a lock just refused: a holder names itself just after it takes the lock, so
    ask for up to 2 s (two routers racing would otherwise read "another process"); "" if it
    never does."""
    for _ in range(20):
        if isinstance(holder := read(), str) and holder:
            return holder
        time.sleep(0.1)
    return ""


def text_or_empty(path: Path) -> str:
    """The file's text, stripped; "" when it is missing or unreadable."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
