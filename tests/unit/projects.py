"""A bare spotroute project for flow tests: `infra/Pulumi.yaml` and a private SPOTROUTE_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.config.project import Project


def infra_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    """tmp_path/infra as the project, tmp_path/home as SPOTROUTE_HOME (its file:// backend)."""
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "home"))
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    return Project(tmp_path / "infra")
