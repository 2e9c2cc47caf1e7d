"""What the stored copy must not keep: credentials that editors pass to agents.

Only the recorded copy is redacted; the forwarded bytes are never touched. A redacted frame is stored as
valid JSON with PLACEHOLDER in place of each secret value, and flagged. Sans-I/O: dicts in, dicts out.
"""

from __future__ import annotations

import re
from typing import Any

PLACEHOLDER = "[redacted]"
# Methods whose params carry mcpServers (env and headers values are API keys, more often than not).
_MCP_METHODS = frozenset({"session/new", "session/load", "session/resume", "session/fork"})
_AUTH_METHODS = frozenset({"authenticate", "auth/login"})
_SECRET_METHODS = _MCP_METHODS | _AUTH_METHODS
_UNPARSED: Any = object()
WALK_FROM = 8192  # bytes: smaller frames are scanned for the keys below, bigger ones' parsed keys are looked at
WALK_BUDGET = 512  # keys and items: a message with more is scanned after all
# _meta keys and header names that look like credentials, in any case and with any separator (JetBrains
# sends its model gateway's `proxy_key` in initialize `_meta`).
_SECRET_KEY = re.compile(
    r"token(?!s)|secret|passw(or)?d|authori[sz]ation|api[-_. ]?key|proxy[-_. ]?key|credential|cookie|session[-_. ]?key",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """Whether a key or header name looks like it carries a credential (Authorization, Cookie, X-Api-Key...)."""
    return _SECRET_KEY.search(name) is not None


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
                "mcpServers[].env[].value",
                "mcpServers[].headers[].value",
                "values of any `headers` object or list, anywhere",
                "authenticate/auth/login params except methodId",
                "_meta credential-like keys",
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

    # -- applying it ------------------------------------------------------------------------------------
    def might_apply(self, raw: bytes, methods: tuple[str | None, ...] = (), parsed: Any = _UNPARSED) -> bool:
        """A cheap test that rules out almost every frame before any walk: the methods that carry secrets,
        else a `_meta` key (given no methods, it scans for everything). `parsed`, the frame's message(s)
        when the caller has them, spares a big frame the byte scan (see _meta_in)."""
        if not self.enabled:
            return False
        if self.paths or self._compiled:
            return True
        if not methods:
            return b"mcpServers" in raw or b'"auth' in raw or watched_keys_in(raw)
        return any(m in _SECRET_METHODS for m in methods) or _meta_in(raw, parsed)

    def might_apply_one(self, raw: bytes, method: str, parsed: Any = _UNPARSED) -> bool:
        """might_apply(raw, (method,), parsed) without the tuple and the generator: the recorder asks it of
        every notification of a flood."""
        if not self.enabled:
            return False
        return bool(self.paths or self._compiled) or method in _SECRET_METHODS or _meta_in(raw, parsed)

    def might_apply_without_keys(self, method: str) -> bool:
        """might_apply_one for a frame whose bytes are known to hold neither watched key (the recorder
        scans a chunk of small frames once, see watched_keys_in, instead of each of its frames)."""
        return self.enabled and (bool(self.paths or self._compiled) or method in _SECRET_METHODS)

    def apply(self, msg: Any) -> tuple[Any, bool]:
        """Return (message to store, whether anything was redacted). The input is never mutated."""
        if not self.enabled:
            return msg, False
        out, changed = self._builtin(msg)
        for path in self._split:
            out, hit = _redact_path(out, path)
            changed |= hit
        if self._compiled:
            out, hit = self._regex(out)
            changed |= hit
        return out, changed

    def _builtin(self, msg: Any) -> tuple[Any, bool]:
        if isinstance(msg, list):
            items = [self._builtin(m) for m in msg]
            return [m for m, _ in items], any(c for _, c in items)
        if not isinstance(msg, dict):
            return msg, False
        changed = False
        method = msg.get("method")
        params = msg.get("params")
        if isinstance(params, dict):
            if method in _AUTH_METHODS:
                params = {k: (v if k == "methodId" else PLACEHOLDER) for k, v in params.items()}
                changed = True
            elif method in _MCP_METHODS and isinstance(params.get("mcpServers"), list):
                servers, hit = _redact_servers(params["mcpServers"])
                if hit:
                    params = {**params, "mcpServers": servers}
                    changed = True
        new = {**msg, "params": params} if changed else msg
        new, hit = _redact_meta(new)
        return new, changed or hit

    def _regex(self, value: Any) -> tuple[Any, bool]:
        if isinstance(value, str):
            out = value
            for rx in self._compiled:
                out = rx.sub(PLACEHOLDER, out)
            return out, out != value
        if isinstance(value, list):
            items = [self._regex(v) for v in value]
            return [v for v, _ in items], any(c for _, c in items)
        if isinstance(value, dict):
            pairs = {k: self._regex(v) for k, v in value.items()}
            return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
        return value, False


def _redact_servers(servers: list[Any]) -> tuple[list[Any], bool]:
    changed = False
    out = []
    for server in servers:
        if isinstance(server, dict):
            patched = dict(server)
            for key in ("env", "headers"):
                entries = server.get(key)
                if isinstance(entries, list) and entries:
                    patched[key] = [
                        {**e, "value": PLACEHOLDER} if isinstance(e, dict) and "value" in e else e for e in entries
                    ]
                    changed = changed or patched[key] != entries
                elif isinstance(entries, dict) and entries:  # tolerate a map form
                    patched[key] = {k: PLACEHOLDER for k in entries}
                    changed = True
            server = patched
        out.append(server)
    return out, changed


def _redact_headers(headers: Any) -> tuple[Any, bool]:
    """Every header value is treated as a secret: `{name: value}` maps and `[{name, value}]` lists."""
    if isinstance(headers, dict) and headers:
        return {k: PLACEHOLDER for k in headers}, any(v != PLACEHOLDER for v in headers.values())
    if isinstance(headers, list):
        out = [{**e, "value": PLACEHOLDER} if isinstance(e, dict) and "value" in e else e for e in headers]
        return out, out != headers
    return headers, False


def _redact_meta(value: Any, inside_meta: bool = False) -> tuple[Any, bool]:
    """Walk the message: inside any _meta object, credential-like keys get the placeholder; anywhere, so do
    the values of a `headers` object (proxy and MCP configurations put API keys there)."""
    if isinstance(value, dict):
        changed = False
        out = {}
        for k, v in value.items():
            if inside_meta and isinstance(k, str) and _SECRET_KEY.search(k):
                out[k] = PLACEHOLDER
                changed = True
                continue
            if k == "headers":
                nv, hit = _redact_headers(v)
                if hit:
                    out[k] = nv
                    changed = True
                    continue
            nv, hit = _redact_meta(v, inside_meta or k == "_meta")
            out[k] = nv
            changed |= hit
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        items = [_redact_meta(v, inside_meta) for v in value]
        if any(c for _, c in items):
            return [v for v, _ in items], True
    return value, False


def _redact_path(value: Any, path: list[str]) -> tuple[Any, bool]:
    if not path:
        return PLACEHOLDER, True
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        keys = list(value) if head == "*" else ([head] if head in value else [])
        if not keys:
            return value, False
        out, changed = dict(value), False
        for k in keys:
            out[k], hit = _redact_path(value[k], rest)
            changed |= hit
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        if head == "*":
            idxs = range(len(value))
        elif head.isdigit() and int(head) < len(value):
            idxs = range(int(head), int(head) + 1)
        else:
            return value, False
        out_list, changed = list(value), False
        for i in idxs:
            out_list[i], hit = _redact_path(value[i], rest)
            changed |= hit
        return (out_list, True) if changed else (value, False)
    return value, False


def watched_keys_in(data: bytes) -> bool:
    """Whether the bytes may hold a `_meta` or a `headers` key: False rules both out (the byte scan).

    A key may be spelled with JSON escapes (`"\\u005fmeta"` is `_meta`), so any `\\u` escape counts as
    a maybe: such frames go to the exact check on their parsed keys."""
    return b"_meta" in data or b'"headers"' in data or b"\\u" in data


def _meta_in(raw: bytes, parsed: Any) -> bool:
    """Whether the message may hold a `_meta` or a `headers` object (the builtin rule's only ways in for most
    methods)."""
    if parsed is _UNPARSED or len(raw) < WALK_FROM:
        return watched_keys_in(raw)
    found = _has_watched_key(parsed)
    return watched_keys_in(raw) if found is None else found


def _has_watched_key(value: Any) -> bool | None:
    """Whether any object in the parsed message has a `_meta` or `headers` key; None past WALK_BUDGET keys
    and items.

    The byte scan costs 1-2 ns a byte (CPython's substring search is at its slowest on base64), 0.1 ms for
    a 64 KiB frame and 7 ms for 4 MiB; a big frame's parsed message is mostly one long string, and looking
    for the keys among its few containers costs microseconds. Exact: without those keys, apply() changes
    nothing for these methods."""
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
