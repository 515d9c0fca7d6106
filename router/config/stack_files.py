"""Reading and writing the reviewed stack files (`stacks/Pulumi.<job>.yaml`).

`route deploy` writes a stack file through the Pulumi CLI (`pulumi config set-all`, which
encrypts the secret keys); `route plan --write` writes the same plain keys without the engine, so
a job author can commit the file for review before anything is applied. The layout follows what
the CLI writes (keys sorted, sequences indented under their key, double-quoted strings where
YAML needs quotes, multi-line strings as literal blocks), so a deploy of an unchanged proposal
leaves the committed file as it was, apart from the secrets' ciphertext and the encryption
salt only the engine can add.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from router.config.user_files import CONFIG_LIMIT_BYTES, read_user_text
from router.contract.stack_config import NAMESPACE, SECRET_KEYS
from router.core.errors import BadInput, OperationFailed
from router.core.journal import newest_stack
from router.core.stackconfig import StackConfig, config_diff


def stack_names(stacks_dir: Path) -> list[str]:
    """The stacks with a file in `stacks_dir` (`Pulumi.<stack>.yaml`), sorted."""
    try:
        files = [p.name for p in stacks_dir.glob("Pulumi.*.yaml")]
    except OSError:
        return []
    return sorted(name.removeprefix("Pulumi.").removesuffix(".yaml") for name in files)


def newest_stack_file(stacks_dir: Path, job: str) -> str:
    """The job's stack whose file is newest by placement: `<job>.2` after a move (the move
    removes the old stack's file), else `<job>`."""
    return newest_stack(job, stack_names(stacks_dir)) or job


def read_stack_file(path: Path, namespace: str = NAMESPACE) -> StackConfig:
    """The `spotroute:*` config in a stack file (namespace stripped); {} when the file is absent."""
    config = _document(path).get("config")
    if not isinstance(config, dict):
        return {}
    prefix = f"{namespace}:"
    return {
        k[len(prefix) :]: v
        for k, v in config.items()
        if isinstance(k, str) and k.startswith(prefix)
    }


def _document(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    text = read_user_text(path, limit_bytes=CONFIG_LIMIT_BYTES, what="stack file")
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise BadInput(
            f"{path}: not a readable stack file ({type(exc).__name__}) — fix or remove it"
        ) from None
    return doc if isinstance(doc, dict) else {}


@dataclass(frozen=True)
class StackFileWrite:
    """What `write_stack_file` did: the file, whether it changed, the config diff lines (secret
    values never shown) and the secret keys left for `route deploy` to encrypt."""

    path: Path
    written: bool
    config_diff: tuple[str, ...]
    secrets_left: tuple[str, ...]


def write_stack_file(
    path: Path, config: Mapping[str, Any], namespace: str = NAMESPACE
) -> StackFileWrite:
    """Set every plain `spotroute:*` key of `config` in the stack file, as deploy would.

    Keys of other namespaces, the encryption salt and the secret keys' ciphertext already in the
    file are kept; a secret key with a value (`spotroute:secretEnv`) is not written — only the
    engine can encrypt it — and is named in `secrets_left`. Written atomically.
    """
    doc = _document(path)
    before = read_stack_file(path, namespace)
    secret = set(SECRET_KEYS) if namespace == NAMESPACE else set()
    left = tuple(sorted(k for k in config if k in secret and config[k]))
    old_config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    merged = dict(old_config or {})
    for key, value in config.items():
        if key in left:
            continue
        # What the CLI stores: strings as they are, everything else as a YAML value.
        merged[f"{namespace}:{key}"] = _as_cli_stores(value)
    planned = {k: v for k, v in config.items() if k not in left}
    diff = tuple(config_diff(before, {**before, **planned}))
    after = {k: v for k, v in doc.items() if k != "config"}
    after["config"] = dict(sorted(merged.items()))
    text = _dump(after)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return StackFileWrite(path, False, diff, left)
    _atomic_write(path, text)
    return StackFileWrite(path, True, diff, left)


def restore_reviewed(path: Path, reviewed: str) -> None:
    """Put the reviewed stack file text back at `path` after `pulumi stack init`, adding the
    top-level keys the engine just wrote there (the encryption salt or key); its `config` wins."""
    fresh = _document(path)
    try:
        doc = yaml.safe_load(reviewed) or {}
    except yaml.YAMLError:
        doc = None
    if not isinstance(doc, dict) or not fresh:
        _atomic_write(path, reviewed)  # nothing to add, or not ours to re-lay out
        return
    after = {k: v for k, v in fresh.items() if k != "config"}
    after.update({k: v for k, v in doc.items() if k not in after})
    _atomic_write(path, _dump(after))


def _dump(doc: Mapping[str, Any]) -> str:
    return yaml.dump(dict(doc), Dumper=_PulumiStyle, sort_keys=False, allow_unicode=True,
                     width=10**9)  # fmt: skip


def _as_cli_stores(value: Any) -> Any:
    """A value as the CLI writes it back from JSON: mappings sorted by key, whole floats as
    integers (JSON does not tell 60.0 from 60)."""
    if isinstance(value, Mapping):
        return {str(k): _as_cli_stores(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_as_cli_stores(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _atomic_write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise OperationFailed(
            f"{path}: cannot write the stack file ({exc.strerror or exc}) — check the directory "
            "and its permissions"
        ) from None


class _PulumiStyle(yaml.SafeDumper):
    """YAML laid out as the Pulumi CLI writes stack files."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)  # sequences indented under their key

    def choose_scalar_style(self) -> str:
        style: str = super().choose_scalar_style()
        return '"' if style == "'" else style  # the CLI quotes with double quotes


# Plain scalars a YAML 1.2 reader takes for numbers (the core schema, yaml.org/spec/1.2.2
# §10.3.2; the Pulumi CLI reads stack files with go-yaml v3, whose resolver also takes 0b…, 0o…
# and `_` between digits). PyYAML resolves by YAML 1.1 and leaves some of them plain — e.g. a
# deployment id of "220447e0", which the CLI would read as the number 220447 — so they are
# quoted, as the CLI quotes them.
_YAML12_NUMBER = re.compile(
    r"[-+]?(0b[01_]+|0o[0-7_]+|0x[0-9a-fA-F_]+|[0-9][0-9_]*)"
    r"|[-+]?(\.[0-9][0-9_]*|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?"
)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value and not any(line != line.rstrip() for line in value.split("\n")):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    if _YAML12_NUMBER.fullmatch(value):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_PulumiStyle.add_representer(str, _represent_str)
