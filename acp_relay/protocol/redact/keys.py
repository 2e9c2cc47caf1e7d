"""Redaction's key policy: the methods whose params carry credentials, the key names that look like one,
and what replaces a value (sans-I/O)."""

from __future__ import annotations

import re

PLACEHOLDER = "[redacted]"
_PLACEHOLDER_B = PLACEHOLDER.encode()
# Methods whose params carry mcpServers (env and headers values are API keys, more often than not).
_MCP_METHODS = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
_AUTH_METHODS = frozenset({"authenticate", "auth/login"})
_TERMINAL_METHODS = frozenset({"terminal/create"})
_SECRET_METHODS = _MCP_METHODS | _AUTH_METHODS | _TERMINAL_METHODS
# Frames whose text is a file's, a terminal's or the user's: scanned for credential shapes whatever their size
# (other frames only up to SHAPE_SCAN_MAX, see shapes_maybe_in).
_CONTENT_METHODS = frozenset({"fs/read_text_file", "fs/write_text_file", "terminal/output", "session/prompt"})
# ACP's own methods (v1 and v2): any other method's params are checked by key name throughout.
_ACP_METHODS = frozenset(
    {
        "initialize",
        "authenticate",
        "auth/login",
        "auth/logout",
        "session/new",
        "session/load",
        "session/resume",
        "session/fork",
        "session/list",
        "session/close",
        "session/prompt",
        "session/cancel",
        "session/update",
        "session/set_mode",
        "session/set_model",
        "session/set_config_option",
        "session/request_permission",
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/release",
        "terminal/wait_for_exit",
        "terminal/kill",
        "$/cancel_request",
    }
)

# Key names that look like credentials, in any case and with any separator (JetBrains sends its model
# gateway's `proxy_key` in initialize `_meta`). `tokens`, `inputTokens`, `maxTokens` are counts, not secrets.
_SECRET_KEY = re.compile(
    r"token(?!s|_?count|_?limit|_?usage|izer)|secret|passw(or)?d|passphrase|authori[sz]ation|credential|cookie"
    r"|api[-_. ]?key|proxy[-_. ]?key|private[-_. ]?key|access[-_. ]?key|session[-_. ]?key|signing[-_. ]?key"
    r"|bearer|jwt|signature|^(x-)?auth$|[-_. ]auth$|^auth[-_. ]|^key$|[-_. ]key$|^pat$|[-_. ]pat$|^sig$",
    re.IGNORECASE,
)
_CAMEL_KEY = re.compile(r"[a-z0-9](Key|Auth|Jwt)$")  # privateKey, accessKey, xAuth (case-sensitive: not monkey)


def secret_key(name: str) -> bool:
    """Whether a key (or header, flag, variable, query parameter) name looks like it holds a credential."""
    return bool(_SECRET_KEY.search(name) or _CAMEL_KEY.search(name))


def _extension(method: str | None) -> bool:
    return isinstance(method, str) and method.startswith("_")
