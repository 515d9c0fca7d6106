"""Reading spotroute.yaml (next to Pulumi.yaml); the model and its rules are router.core.org."""

from __future__ import annotations

from pathlib import Path

from router.config.project import Project
from router.config.safe_yaml import YamlProblem, parse_yaml
from router.config.user_files import CONFIG_LIMIT_BYTES, FileProblem, read_user_text
from router.core.errors import BadInput
from router.core.org import ORG_CONFIG_FILE, OrgConfig, org_config_from_data


def org_config_for(project: Project | None) -> OrgConfig:
    """The project's spotroute.yaml, or the defaults when there is no project or no file."""
    return load_org_config(project.org_config_path if project else None)


def load_org_config(path: Path | None) -> OrgConfig:
    """Read spotroute.yaml; None or a missing file gives the defaults, bad content BadInput."""
    try:
        if path is None or not path.exists():
            return OrgConfig()
    except OSError as exc:
        raise BadInput(f"{ORG_CONFIG_FILE}: cannot use the path ({exc.strerror})") from None
    name = path.name
    try:
        text = read_user_text(path, limit_bytes=CONFIG_LIMIT_BYTES, what=ORG_CONFIG_FILE)
    except FileProblem as exc:  # named as the other spotroute.yaml problems are: by file name
        raise FileProblem(name, exc.text, exc.where) from None
    return parse_org_config(text, name=name)


def parse_org_config(text: str, *, name: str = ORG_CONFIG_FILE) -> OrgConfig:
    """Validate spotroute.yaml text; the first problem becomes a one-line BadInput."""
    try:
        raw = parse_yaml(text, what="spotroute.yaml")
    except YamlProblem as exc:
        where = f" at {exc.where}" if exc.where else ""
        raise BadInput(f"{name}: not valid YAML{where}: {exc.text}") from None
    return org_config_from_data(raw, name=name)
