"""Places a launch failed recently (SPOTROUTE_HOME/blocked.json): skipped until their block ends."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from router.config.user_files import CONFIG_LIMIT_BYTES, FileProblem, read_user_text
from router.core.failover import Block, prune

BLOCKS_FILE = "blocked.json"


def read_blocks(home: Path) -> list[Block]:
    """Every remembered block (active or recent); an unreadable file counts as none."""
    try:
        text = read_user_text(home / BLOCKS_FILE, limit_bytes=CONFIG_LIMIT_BYTES)
        return [Block.from_json(item) for item in json.loads(text)]
    except (FileProblem, ValueError, KeyError, TypeError):
        return []


@contextmanager
def updating_blocks(home: Path, now: datetime) -> Iterator[list[Block]]:
    """Read-modify-write the block list under a lock; blocks too old to matter are dropped."""
    from filelock import FileLock

    with FileLock(str(home / f"{BLOCKS_FILE}.lock")):
        blocks = prune(read_blocks(home), now)
        yield blocks
        path = home / BLOCKS_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([b.to_json() for b in prune(blocks, now)], indent=2))
        os.replace(tmp, path)
