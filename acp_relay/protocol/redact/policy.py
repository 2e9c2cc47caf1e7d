"""Redaction's policy: the rules of one relay (built in, paths, regexes), the cheap tests that rule out
almost every frame before any walk, and their application to a parsed message (sans-I/O)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .. import vocab
from .keys import _AUTH_METHODS, _CONTENT_METHODS, PLACEHOLDER, _keyed
from .shapes import WATCHED_LITERALS, any_literal_in, shapes_maybe_in
from .walk import _all_values, _redact_command, _redact_path, _redact_servers, _walk

_UNPARSED: Any = object()
WITHHELD_MESSAGE = {"acp-relay": "frame withheld: redaction failed"}  # what stands for a message not checked
WALK_FROM = 8192  # bytes: smaller frames are scanned for the keys below, bigger ones' parsed keys are looked at
WALK_BUDGET = 512  # keys and items: a message with more is scanned after all
SHAPE_SCAN_MAX = WALK_FROM  # frames up to this size are scanned for credential shapes (see shapes_maybe_in)


def _login_params(params: Any) -> tuple[Any, int]:
    return _all_values(params, keep=("methodId",))


def _session_params(params: Any) -> tuple[Any, int]:
    if isinstance(params, dict) and isinstance(params.get("mcpServers"), list):
        servers, n = _redact_servers(params["mcpServers"])
        if n:
            return {**params, "mcpServers": servers}, n
    return params, 0


def _terminal_params(params: Any) -> tuple[Any, int]:
    return _redact_command(params) if isinstance(params, dict) else (params, 0)


# The methods whose params carry credentials -> how: the login ones (every value), the session-opening ones
# (their mcpServers' env and headers values are API keys, more often than not), terminal/create (env, args).
_PARAMS = {
    **dict.fromkeys(_AUTH_METHODS, _login_params),
    **dict.fromkeys(vocab.SESSION_ORIGINS, _session_params),
    vocab.TERMINAL_CREATE: _terminal_params,
}
_SECRET_METHODS = frozenset(_PARAMS)


class Policy:
    """The redaction rules of one relay; recorded on its connection row. (A plain class: dataclasses
    costs `acp-relay run` 15 ms of start-up.)"""

    def __init__(self, enabled: bool = True, paths: list[str] | None = None, regexes: list[str] | None = None) -> None:
        self.enabled = enabled
        self.paths = list(paths or [])  # dotted key paths from the message root; * matches any key/item
        self.regexes = list(regexes or [])  # matched inside string values
        self._compiled = [re.compile(r) for r in self.regexes]
        self._split = [p.split(".") for p in self.paths]

    def describe(self) -> dict[str, Any]:
        if not self.enabled:
            return {"enabled": False}
        return {
            "enabled": True,
            "builtin": [
                "mcpServers[].env[].value, headers[].value, args (as a command line), url (userinfo, query)",
                "terminal/create env[].value and args",
                "values of any `headers` object or list, anywhere",
                "authenticate/auth/login params except methodId, and their results",
                "credential-like keys in _meta, anywhere in the params and results of extension methods and "
                "of methods ACP does not define, and in any error",
                "credential-shaped strings anywhere (API-key prefixes, JWTs, private keys, Bearer/Basic, URLs)",
                "the agent's command line and stderr",
            ],
            "paths": self.paths,
            "regexes": self.regexes,
        }

    @classmethod
    def from_options(cls, redact: tuple[str, ...] | list[str], no_redact: bool) -> Policy:
        """`--redact re:REGEX` adds a regex, any other `--redact PATH` a dotted path."""
        paths = [r for r in redact if not r.startswith("re:")]
        regexes = [r[3:] for r in redact if r.startswith("re:")]
        return cls(enabled=not no_redact, paths=paths, regexes=regexes)

    # -- the cheap tests --------------------------------------------------------------------------------
    def might_apply(self, raw: bytes, methods: tuple[str | None, ...] = (), parsed: Any = _UNPARSED) -> bool:
        """A cheap test that rules out almost every frame before any walk: the methods that carry secrets,
        else a `_meta` or `headers` key or a credential shape (given no methods, it scans for everything).
        `parsed`, the frame's message(s) when the caller has them, spares a big frame the byte scan."""
        if not self.enabled:
            return False
        if self.paths or self._compiled:
            return True
        if not methods:
            return b"mcpServers" in raw or b'"auth' in raw or b'"terminal/' in raw or watched_keys_in(raw)
        return (
            any(m in _SECRET_METHODS or _keyed(m) for m in methods)
            or _error_in(raw, parsed)  # an error's data has no schema, whatever the method: checked by key name
            or _meta_in(raw, parsed)
            or (len(raw) > SHAPE_SCAN_MAX and any(m in _CONTENT_METHODS for m in methods) and shapes_maybe_in(raw))
        )

    def might_apply_one(self, raw: bytes, method: str, parsed: Any = _UNPARSED) -> bool:
        """might_apply(raw, (method,), parsed) without the tuple and the generator: the recorder asks it of
        every notification of a flood."""
        if not self.enabled:
            return False
        return (
            bool(self.paths or self._compiled) or method in _SECRET_METHODS or _keyed(method) or _meta_in(raw, parsed)
        )

    def might_apply_without_keys(self, method: str) -> bool:
        """might_apply_one for a frame whose bytes are known to hold no watched key nor shape (the recorder
        scans a chunk of small frames once, see watched_keys_in, instead of each of its frames)."""
        return self.enabled and (bool(self.paths or self._compiled) or method in _SECRET_METHODS or _keyed(method))

    # -- applying it ------------------------------------------------------------------------------------
    def apply(self, msg: Any, answers: Sequence[str | None] | str | None = None) -> tuple[Any, int]:
        """Return (message to store, how many values were redacted). The input is never mutated.
        `answers`: the method a response answers (one per member for a batch), which its own bytes lack.
        A message too deep to walk (past the recursion limit) is withheld whole: never kept unchecked."""
        if not self.enabled:
            return msg, 0
        try:
            out, changed = self._builtin(msg, answers)
        except RecursionError:
            return dict(WITHHELD_MESSAGE), 1
        for path in self._split:
            out, hit = _redact_path(out, path)
            changed += hit
        if self._compiled:
            out, hit = self._regex(out)
            changed += hit
        return out, changed

    def _builtin(self, msg: Any, answers: Sequence[str | None] | str | None) -> tuple[Any, int]:
        if isinstance(msg, list):
            methods = answers if isinstance(answers, (list, tuple)) else [None] * len(msg)
            items = [self._builtin(m, methods[i] if i < len(methods) else None) for i, m in enumerate(msg)]
            n = sum(c for _, c in items)
            return ([m for m, _ in items] if n else msg), n
        if not isinstance(msg, dict):
            return _walk(msg, False)
        answered = answers if isinstance(answers, str) else None
        method = msg.get("method")
        n = 0
        new = msg
        params = msg.get("params")
        if isinstance(method, str) and params is not None:
            redact = _PARAMS.get(method)
            if redact is not None:
                params, n = redact(params)
            if n:
                new = {**msg, "params": params}
            if _keyed(method):  # extension or unknown: credential-like keys anywhere in params
                new, n = _keys_under(new, "params", n)
        elif answered in _AUTH_METHODS and "result" in msg:
            result, n = _all_values(msg["result"])
            if n:
                new = {**msg, "result": result}
        elif "result" in msg and _keyed(answered):  # the answer of an unknown method: by key name too
            new, n = _keys_under(new, "result", n)
        if "error" in msg and "method" not in msg:  # any method's error: its data has no schema
            new, n = _keys_under(new, "error", n)
        out, hit = _walk(new, False)
        return out, n + hit

    def _regex(self, value: Any) -> tuple[Any, int]:
        if isinstance(value, str):
            out, n = value, 0
            for rx in self._compiled:
                out, k = rx.subn(PLACEHOLDER, out)
                n += k
            return out, n
        if isinstance(value, list):
            items = [self._regex(v) for v in value]
            n = sum(c for _, c in items)
            return ([v for v, _ in items] if n else value), n
        if isinstance(value, dict):
            pairs = {k: self._regex(v) for k, v in value.items()}
            n = sum(c for _, c in pairs.values())
            return ({k: v for k, (v, _) in pairs.items()} if n else value), n
        return value, 0


def _keys_under(msg: dict[str, Any], member: str, n: int) -> tuple[dict[str, Any], int]:
    """The message with credential-like keys anywhere under one member replaced; n plus how many."""
    value, hit = _walk(msg[member], True)
    return ({**msg, member: value}, n + hit) if hit else (msg, n)


# -- the cheap byte tests -------------------------------------------------------------------------------------
def watched_keys_in(data: bytes | bytearray | memoryview) -> bool:
    """Whether the bytes may hold a `_meta` or a `headers` key or a credential shape: False rules all of
    them out (the byte scan).

    A key may be spelled with JSON escapes (`"\\u005fmeta"` is `_meta`), so any `\\u` escape counts as
    a maybe: such frames go to the exact check on their parsed keys."""
    return any_literal_in(data, WATCHED_LITERALS)


def _error_in(raw: bytes, parsed: Any) -> bool:
    """Whether the message (or a batch member) is an error answer: its parsed keys when the caller has
    them (a big frame's bytes need no scan), else its bytes."""
    if type(parsed) is dict:
        return "error" in parsed
    if type(parsed) is list:
        return any(type(m) is dict and "error" in m for m in parsed)
    return b'"error"' in raw


def _meta_in(raw: bytes, parsed: Any) -> bool:
    """Whether the message may hold a `_meta` or a `headers` object or (up to SHAPE_SCAN_MAX) a shape."""
    if parsed is _UNPARSED or len(raw) < WALK_FROM:
        return watched_keys_in(raw)
    found = _has_watched_key(parsed)
    if found is None:
        return watched_keys_in(raw)
    return found or (len(raw) <= SHAPE_SCAN_MAX and shapes_maybe_in(raw))


def _has_watched_key(value: Any) -> bool | None:
    """Whether any object in the parsed message has a `_meta` or `headers` key; None past WALK_BUDGET keys
    and items.

    The byte scan costs 1-2 ns a byte (CPython's substring search is at its slowest on base64), 0.1 ms for
    a 64 KiB frame and 7 ms for 4 MiB; a big frame's parsed message is mostly one long string, and looking
    for the keys among its few containers costs microseconds. Exact for keys: without them, apply() changes
    nothing but shapes for these methods."""
    budget = WALK_BUDGET
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is dict:
            if "_meta" in v or "headers" in v:
                return True
            budget -= len(v)
            items = v.values()
        elif type(v) is list:
            budget -= len(v)
            items = v  # type: ignore[assignment]
        else:
            continue
        if budget < 0:
            return None
        stack.extend(x for x in items if type(x) is dict or type(x) is list)
    return False
