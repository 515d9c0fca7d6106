"""Without a Pulumi CLI, the error says how to get one wherever `route` was installed: the
installer page first (an installed package has no scripts/), the checkout's build script after."""

from __future__ import annotations

from pathlib import Path

import pytest

from router.core.errors import OperationFailed
from router.engine.automation import find_pulumi


def test_a_missing_pulumi_cli_points_at_the_installer_then_at_the_checkouts_script(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SPOTROUTE_TOOLS_DIR", str(tmp_path / "no-build"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    with pytest.raises(OperationFailed) as missing:
        find_pulumi()

    message = missing.value.message
    assert message.startswith("the pulumi CLI was not found — install it and put it on PATH "
                              "(https://www.pulumi.com/docs/install/)")
    assert "in a spotroute checkout, `bash scripts/ensure-pulumi.sh`" in message
    assert "make setup" not in message  # a whole dev environment is not what a user needs
