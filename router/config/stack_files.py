"""Reading the reviewed stack files (`stacks/Pulumi.<job>.yaml`)."""

from __future__ import annotations

from pathlib import Path

import yaml

from router.config.user_files import CONFIG_LIMIT_BYTES, read_user_text
from router.contract.stack_config import NAMESPACE
from router.core.errors import BadInput
from router.core.stackconfig import StackConfig


def read_stack_file(path: Path, namespace: str = NAMESPACE) -> StackConfig:
    """The `spotroute:*` config in a stack file (namespace stripped); {} when the file is absent."""
    if not path.exists():
        return {}
    text = read_user_text(path, limit_bytes=CONFIG_LIMIT_BYTES, what="stack file")
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise BadInput(
            f"{path}: not a readable stack file ({type(exc).__name__}) — fix or remove it"
        ) from None
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        return {}
    prefix = f"{namespace}:"
    return {
        k[len(prefix) :]: v
        for k, v in config.items()
        if isinstance(k, str) and k.startswith(prefix)
    }
