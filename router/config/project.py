"""Find the spotroute project a command works on, the way git finds `.git`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from router.core.errors import BadInput

PROJECT_FILE = "Pulumi.yaml"
ORG_CONFIG_FILE = "spotroute.yaml"


@dataclass(frozen=True)
class Project:
    """A Pulumi project: Pulumi.yaml, stacks/ (one config file per job), spotroute.yaml."""

    root: Path

    @property
    def stacks_dir(self) -> Path:
        return self.root / "stacks"

    @property
    def org_config_path(self) -> Path:
        return self.root / ORG_CONFIG_FILE

    def stack_config_path(self, stack: str) -> Path:
        return self.stacks_dir / f"Pulumi.{stack}.yaml"


def find_project(start: Path | None = None, override: Path | None = None) -> Project | None:
    """The nearest directory at or above `start` holding Pulumi.yaml; `override` must hold one."""
    if override is not None:
        root = override.expanduser().resolve()
        if not (root / PROJECT_FILE).is_file():
            raise BadInput(
                f"--project-dir: {root} has no {PROJECT_FILE} — point it at a spotroute project "
                f"or create one with `route init {root}`"
            )
        return Project(root)
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if (directory / PROJECT_FILE).is_file():
            return Project(directory)
    return None


def require_project(start: Path | None = None, override: Path | None = None) -> Project:
    """Like find_project, but a missing project is a one-line error that says how to make one."""
    project = find_project(start, override)
    if project is None:
        raise BadInput(
            f"no {PROJECT_FILE} in {(start or Path.cwd()).resolve()} or any parent — run this "
            "inside a spotroute project, pass --project-dir, or create one with `route init DIR`"
        )
    return project
