"""Where spotroute keeps its state: SPOTROUTE_HOME or ~/.spotroute, private to the user."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from router.config.home import cache_path, spotroute_home
from router.core.errors import BadInput


def test_home_is_spotroute_home_env_and_is_created_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wanted = tmp_path / "state" / "spotroute"
    monkeypatch.setenv("SPOTROUTE_HOME", str(wanted))

    home = spotroute_home()

    assert home == wanted
    assert home.is_dir()
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_home_defaults_to_dot_spotroute_in_the_users_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPOTROUTE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))

    assert spotroute_home() == tmp_path / ".spotroute"
    assert (tmp_path / ".spotroute").is_dir()


def test_price_cache_lives_in_spotroute_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPOTROUTE_HOME", str(tmp_path))

    assert cache_path() == tmp_path / "prices.sqlite3"


def test_home_that_is_a_file_is_reported_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    occupied = tmp_path / "spotroute"
    occupied.write_text("not a directory")
    monkeypatch.setenv("SPOTROUTE_HOME", str(occupied))

    with pytest.raises(BadInput) as raised:
        spotroute_home()

    assert str(occupied) in raised.value.message
    assert "SPOTROUTE_HOME" in raised.value.message
    assert occupied.read_text() == "not a directory"
