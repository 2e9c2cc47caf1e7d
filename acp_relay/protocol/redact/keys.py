"""Redaction's key policy: the methods whose frames need a closer look, the key names that look like a
credential, and what replaces a value (sans-I/O). policy._PARAMS names the methods whose params carry one."""

from __future__ import annotations

import re

from .. import vocab

PLACEHOLDER = "[redacted]"
_PLACEHOLDER_B = PLACEHOLDER.encode()
# The login methods: every value of their params (but methodId) and of their answers is a credential.
_AUTH_METHODS = frozenset({vocab.AUTHENTICATE, vocab.AUTH_LOGIN})
# Frames whose text is a file's, a terminal's or the user's: scanned for credential shapes whatever their size
# (other frames only up to SHAPE_SCAN_MAX, see shapes_maybe_in).
_CONTENT_METHODS = frozenset({vocab.FS_READ, vocab.FS_WRITE, vocab.TERMINAL_OUTPUT, vocab.PROMPT})
# ACP's own methods whose params have a known shape: any other method's params (an extension's, or an ACP
# method this list does not name, such as mcp/message's payload) are checked by key name throughout. Not
# vocab.METHODS as a whole: adding a method here takes that check away from its params.
_ACP_METHODS = frozenset(
    {
        vocab.INITIALIZE,
        vocab.AUTHENTICATE,
        vocab.AUTH_LOGIN,
        vocab.AUTH_LOGOUT,
        vocab.SESSION_NEW,
        vocab.SESSION_LOAD,
        vocab.SESSION_RESUME,
        vocab.SESSION_FORK,
        vocab.SESSION_LIST,
        vocab.SESSION_CLOSE,
        vocab.PROMPT,
        vocab.CANCEL,
        vocab.UPDATE,
        vocab.SET_MODE,
        vocab.SET_MODEL,
        vocab.SET_CONFIG_OPTION,
        vocab.REQUEST_PERMISSION,
        vocab.FS_READ,
        vocab.FS_WRITE,
        vocab.TERMINAL_CREATE,
        vocab.TERMINAL_OUTPUT,
        vocab.TERMINAL_RELEASE,
        vocab.TERMINAL_WAIT,
        vocab.TERMINAL_KILL,
        vocab.CANCEL_REQUEST,
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


def _keyed(method: str | None) -> bool:
    """Whether a method's params (and its answers) are checked by key name throughout: every method but
    ACP's own (_ACP_METHODS), an extension's (`_vendor/...`), one ACP does not define, or an answer whose
    request is not known (None)."""
    return method not in _ACP_METHODS


# Keys in `_meta` whose names look like a credential's but that hold what is not one: walked as what
# they are (terminal-auth: a command to run, redacted as a command line) instead of replaced.
_NOT_CREDENTIALS = frozenset({vocab.META_TERMINAL_AUTH})
