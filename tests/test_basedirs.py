"""The XDG base directories: one reading for the database's state directory, the validator cache and the
editors' configs (a relative $XDG_* or HOME is ignored, as the spec says; without HOME the password
database's home; without any home, no cache and a usage error where a path is needed)."""

from __future__ import annotations

import pwd
from typing import Any

import pytest

from acp_relay.protocol.basedirs import cache_dir
from acp_relay.protocol.editors import EDITORS
from acp_relay.protocol.errors import USAGE, UserError
from acp_relay.store.db import default_db_path


def where(env: dict[str, str]) -> tuple[str, str | None, str | None, str | None]:
    return (
        str(default_db_path(env)),
        cache_dir(env),
        EDITORS["zed"].config_path(env),
        EDITORS["jetbrains"].config_path(env),
    )


@pytest.fixture
def passwd_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """The password database says this user's home is /pw."""
    entry: Any = type("Entry", (), {"pw_dir": "/pw"})()
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: entry)


def test_an_absolute_xdg_value_is_used() -> None:
    env = {"HOME": "/h", "XDG_STATE_HOME": "/s", "XDG_CACHE_HOME": "/c", "XDG_CONFIG_HOME": "/g"}
    assert where(env) == ("/s/acp-relay/relay.db", "/c/acp-relay", "/g/zed/settings.json", "/h/.jetbrains/acp.json")


@pytest.mark.parametrize("value", ["", "relative/dir", "."])
def test_an_empty_or_relative_xdg_value_falls_back_to_home(value: str) -> None:
    env = {"HOME": "/h", "XDG_STATE_HOME": value, "XDG_CACHE_HOME": value, "XDG_CONFIG_HOME": value}
    assert where(env) == (
        "/h/.local/state/acp-relay/relay.db",
        "/h/.cache/acp-relay",
        "/h/.config/zed/settings.json",
        "/h/.jetbrains/acp.json",
    )


@pytest.mark.parametrize("home", [None, "", "relative/home"])
def test_without_an_absolute_home_the_password_databases(passwd_home: None, home: str | None) -> None:
    env = {} if home is None else {"HOME": home}
    assert where(env) == (
        "/pw/.local/state/acp-relay/relay.db",
        "/pw/.cache/acp-relay",
        "/pw/.config/zed/settings.json",
        "/pw/.jetbrains/acp.json",
    )


def test_without_any_home_no_cache_and_a_usage_error_for_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_entry(uid: int) -> Any:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    assert cache_dir({}) is None
    for find in (default_db_path, EDITORS["zed"].config_path, EDITORS["jetbrains"].config_path):
        with pytest.raises(UserError, match="no home directory") as refused:
            find({"HOME": "relative"})
        assert refused.value.status == USAGE and refused.value.hint and "absolute path" in refused.value.hint
    assert str(default_db_path({"ACP_RELAY_DB": "/x/relay.db"})) == "/x/relay.db"  # no home needed then
