"""Reading spotroute.yaml (next to Pulumi.yaml); the model and its rules are router.core.org."""

from __future__ import annotations

from pathlib import Path

import yaml

from router.config.project import Project
from router.core.errors import BadInput
from router.core.org import ORG_CONFIG_FILE, OrgConfig, org_config_from_data


def org_config_for(project: Project | None) -> OrgConfig:
    """The project's spotroute.yaml, or the defaults when there is no project or no file."""
    return load_org_config(project.org_config_path if project else None)


def load_org_config(path: Path | None) -> OrgConfig:
    """Read spotroute.yaml; None or a missing file gives the defaults, bad content BadInput."""
    if path is None or not path.exists():
        return OrgConfig()
    name = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{name}: cannot read the file ({exc})") from exc
    return parse_org_config(text, name=name)


def parse_org_config(text: str, *, name: str = ORG_CONFIG_FILE) -> OrgConfig:
    """Validate spotroute.yaml text; the first problem becomes a one-line BadInput."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise BadInput(f"{name}: not valid YAML{where}: {problem}") from None
    return org_config_from_data(raw, name=name)
