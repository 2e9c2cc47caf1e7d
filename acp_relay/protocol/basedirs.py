"""The XDG base directories, read from an environment mapping: acp-relay's state and cache, and the config
directory editors (Zed) look in. One reading of the spec for all three: a relative value is ignored."""

from __future__ import annotations

import os
from collections.abc import Mapping


def home_dir(env: Mapping[str, str]) -> str:
    """$HOME, else (unset or empty) the user's home directory."""
    return env.get("HOME") or os.path.expanduser("~")


def base_dir(env: Mapping[str, str], var: str, under_home: str) -> str:
    """$var when it is an absolute path, else under_home in the home directory."""
    value = env.get(var, "")
    if os.path.isabs(value):
        return value
    return os.path.join(home_dir(env), under_home)


def cache_dir(env: Mapping[str, str]) -> str | None:
    """$XDG_CACHE_HOME/acp-relay, else ~/.cache/acp-relay; None when that is not an absolute path (no home
    to put a cache in: no cache, rather than one under whatever directory a command starts in)."""
    base = base_dir(env, "XDG_CACHE_HOME", ".cache")
    return os.path.join(base, "acp-relay") if os.path.isabs(base) else None
