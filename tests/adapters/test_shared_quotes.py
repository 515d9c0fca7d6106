"""Price quotes refreshed by one engineer, pushed to the shared backend, pulled by another."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from router.config.project import Project
from router.core.errors import OperationFailed
from router.core.offers import Quote
from router.flows.shared_quotes import pull_quotes, push_quotes
from router.prices.cache import QuoteCache
from tests.backend_servers import SharedBackend

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
QUOTES = [
    Quote("aws", "us-east-1", "us-east-1a", "p4d.24xlarge", "spot", 9.83, "aws-api", NOW),
    Quote("gcp", "us-central1", None, "a2-ultragpu-8g", "spot", 11.2, "gcp-api", NOW),
]


def _project(tmp_path: Path) -> Project:
    (tmp_path / "infra").mkdir(exist_ok=True)
    (tmp_path / "infra" / "Pulumi.yaml").write_text("name: spotroute\nruntime: python\n")
    return Project(tmp_path / "infra")


def test_quotes_pushed_from_one_home_are_pulled_into_another_with_their_age(
    shared_backend: SharedBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULUMI_BACKEND_URL", shared_backend.url)
    project = _project(tmp_path)

    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "alice"))
    with pytest.raises(OperationFailed, match="route prices refresh"):
        push_quotes(project=project, now=NOW)
    with QuoteCache(tmp_path / "alice" / "prices.sqlite3") as cache:
        cache.add(QUOTES)
    pushed = push_quotes(project=project, now=NOW)
    assert pushed.quotes_by_cloud == {"aws": 1, "gcp": 1}

    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path / "bob"))
    pulled = pull_quotes(project=project)
    assert pulled.quotes_by_cloud == {"aws": 1, "gcp": 1}
    with QuoteCache(tmp_path / "bob" / "prices.sqlite3") as cache:
        assert sorted(cache.latest(), key=lambda q: q.cloud) == QUOTES
    assert pull_quotes(project=project).quotes_by_cloud == {"aws": 0, "gcp": 0}, "idempotent"
