"""Which backend, secrets provider and record store a team's settings choose (no servers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.core.errors import BadInput
from router.engine.automation import choose_backend, passphrase_env
from router.engine.records import FileRecords, PostgresRecords, S3Records, records_for


@pytest.fixture(autouse=True)
def _no_ambient(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"):
        monkeypatch.delenv(var, raising=False)


def test_a_shared_backend_without_kms_needs_the_team_passphrase(tmp_path: Path) -> None:
    backend = choose_backend(tmp_path, "s3://team-state?region=us-east-1")
    with pytest.raises(BadInput, match="PULUMI_CONFIG_PASSPHRASE_FILE"):
        passphrase_env(tmp_path, backend)


def test_a_kms_secrets_provider_needs_no_passphrase(tmp_path: Path) -> None:
    backend = choose_backend(
        tmp_path, "postgres://db:5432/state", "awskms://alias/spotroute-state?region=us-east-1"
    )
    assert backend.secrets_provider == "awskms://alias/spotroute-state?region=us-east-1"
    assert passphrase_env(tmp_path, backend) == {}


def test_passphrase_spelled_out_means_the_default_and_unknown_providers_are_refused(
    tmp_path: Path,
) -> None:
    assert choose_backend(tmp_path, None, "passphrase").secrets_provider is None
    with pytest.raises(BadInput, match="secrets_provider: 'vault'"):
        choose_backend(tmp_path, None, "vault")


def test_records_live_in_the_backend_the_stacks_use(tmp_path: Path) -> None:
    assert isinstance(records_for("s3://b?region=us-east-1", tmp_path, is_default=False), S3Records)
    assert isinstance(records_for("postgres://h/db", tmp_path, is_default=False), PostgresRecords)
    shared = records_for(f"file://{tmp_path}/nfs", tmp_path / "home", is_default=False)
    assert shared == FileRecords(tmp_path / "nfs" / ".spotroute")
    with pytest.raises(BadInput, match="gs://"):
        records_for("gs://bucket", tmp_path, is_default=False)
