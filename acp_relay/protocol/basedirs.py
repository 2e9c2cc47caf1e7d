"""The XDG base directories, read from an environment mapping: acp-relay's state and cache, and the config
directory editors (Zed) look in. One reading of the spec for all three: a relative value is ignored."""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping

from .errors import UserError


def home_dir(env: Mapping[str, str]) -> str | None:
    """$HOME when it is an absolute path, else the user's home from the password database; None when
    neither gives one (a path relative to wherever a command starts would scatter files)."""
    home = env.get("HOME", "")
    if os.path.isabs(home):
        return home
    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return None
    return home if os.path.isabs(home) else None


def base_dir(env: Mapping[str, str], var: str | None, under_home: str) -> str | None:
    """$var when it is an absolute path, else under_home in the home directory; None without either."""
    value = env.get(var, "") if var else ""
    if os.path.isabs(value):
        return value
    home = home_dir(env)
    return os.path.join(home, under_home) if home else None


def needed_base_dir(env: Mapping[str, str], var: str | None, under_home: str, what: str) -> str:
    """base_dir, for a path a command cannot do without: none is a usage error saying what to set."""
    base = base_dir(env, var, under_home)
    if base is None:
        also = f" (or {var})" if var else ""
        raise UserError(f"no home directory for {what}", hint=f"set HOME{also} to an absolute path")
    return base


def cache_dir(env: Mapping[str, str]) -> str | None:
    """$XDG_CACHE_HOME/acp-relay, else ~/.cache/acp-relay; None without a home (no cache then)."""
    base = base_dir(env, "XDG_CACHE_HOME", ".cache")
    return os.path.join(base, "acp-relay") if base else None
