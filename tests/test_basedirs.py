"""The XDG base directories: one reading for the database's state directory, the validator cache and Zed's
config (a relative $XDG_* is ignored, as the spec says, and HOME gives the default)."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_relay.protocol.basedirs import cache_dir
from acp_relay.protocol.editors import EDITORS
from acp_relay.store.db import default_db_path


def where(env: dict[str, str]) -> tuple[str, str | None, str | None]:
    return str(default_db_path(env)), cache_dir(env), EDITORS["zed"].config_path(env)


def test_an_absolute_xdg_value_is_used() -> None:
    env = {"HOME": "/h", "XDG_STATE_HOME": "/s", "XDG_CACHE_HOME": "/c", "XDG_CONFIG_HOME": "/g"}
    assert where(env) == ("/s/acp-relay/relay.db", "/c/acp-relay", "/g/zed/settings.json")


@pytest.mark.parametrize("value", ["", "relative/dir", "."])
def test_an_empty_or_relative_xdg_value_falls_back_to_home(value: str) -> None:
    env = {"HOME": "/h", "XDG_STATE_HOME": value, "XDG_CACHE_HOME": value, "XDG_CONFIG_HOME": value}
    assert where(env) == (
        "/h/.local/state/acp-relay/relay.db",
        "/h/.cache/acp-relay",
        "/h/.config/zed/settings.json",
    )


def test_without_home_the_users_home_directory() -> None:
    home = str(Path("~").expanduser())
    assert where({}) == (
        f"{home}/.local/state/acp-relay/relay.db",
        f"{home}/.cache/acp-relay",
        f"{home}/.config/zed/settings.json",
    )
    assert EDITORS["jetbrains"].config_path({}) == f"{home}/.jetbrains/acp.json"
