"""What the stored copy must not keep: credentials that editors, agents and their command lines carry.

Only the recorded copy is redacted; the forwarded bytes are never touched. One pure module and one entry
point per thing stored: `redact_frame` for a frame's bytes (the recorder, `import` and `export` all call
it), `redact_text` for a line of the agent's stderr, `redact_argv` for a command line. Each returns the
copy to store and how many values it replaced with PLACEHOLDER. Sans-I/O: bytes and dicts in and out.

Rules (README "Security" lists them for users):
- by place: mcpServers env and header values, args (as a command line) and URL; terminal/create env values
  and args; every value of an authenticate / auth/login request (but methodId) and of its result; the
  values of any `headers` object or list anywhere;
- by key name: credential-like keys (SECRET_KEY) inside any `_meta`, and anywhere in the params of
  extension methods (`_vendor/...`) and of methods ACP does not define; an object under such a key is
  descended into (gemini-cli's `"api-key": {"provider": "google"}` holds no secret), not replaced;
- by shape, in every string: API-key prefixes (sk-, ghp_, xoxb-, AKIA...), JWTs, private-key PEM blocks,
  Bearer/Basic credentials, URL userinfo and credential-named query parameters. A prompt keeps its text;
  only the key-shaped token inside it is replaced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .framing import BIG_FRAME
from .jsonrpc import dumps, loads, may_hold_wide_int

PLACEHOLDER = "[redacted]"
_PLACEHOLDER_B = PLACEHOLDER.encode()
WITHHELD = b'{"acp-relay":"frame withheld: redaction failed"}'
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
_UNPARSED: Any = object()
WALK_FROM = 8192  # bytes: smaller frames are scanned for the keys below, bigger ones' parsed keys are looked at
WALK_BUDGET = 512  # keys and items: a message with more is scanned after all
SHAPE_SCAN_MAX = WALK_FROM  # frames up to this size are scanned for credential shapes (see shapes_maybe_in)

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


# -- shapes: credentials recognizable by their form, wherever they stand ----------------------------------
_TOKEN = (
    r"(?<![A-Za-z0-9])(?:"
    r"sk-[A-Za-z0-9_-]{16,}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|hf_[A-Za-z0-9]{30,}"
    r"|A[KS]IA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
    r")"
)
_PEM = r"-----BEGIN (?P<label>[A-Z0-9 ]*PRIVATE KEY)-----(?s:.*?)(?:-----END (?P=label)-----|\Z)"
# An Authorization scheme and its credential: kept the scheme, replaced the credential (which must look like
# one: a digit or symbol, or two capitals, so "Basic understanding" stays prose).
_SCHEME = r"(?i:\b(?:bearer|basic)[ \t]+)(?=\S*[0-9._~+/=-]|(?:\S*[A-Z]){2})[A-Za-z0-9._~+/=-]{8,}"
_URL = r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>\\]+"
_SHAPES = re.compile(f"(?P<token>{_TOKEN})|(?P<pem>{_PEM})|(?P<scheme>{_SCHEME})|(?P<url>{_URL})")
_SCHEME_WORD = re.compile(r"(?i)\b(?:bearer|basic)[ \t]+")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@]*)@")
_QUERY = re.compile(r"([?&;])([^=&#;?]+)=([^&#;]*)")
# What a string must hold for _SHAPES to match anywhere in it (a cheap test that rules out most strings).
_STR_ANCHOR = re.compile(
    r"sk-|[sr]k_(?:live|test)_|gh[pousr]_|github_pat_|glpat-|xox[abposr]-|npm_|hf_|A[KS]IA|AIza|eyJ|-----BEGIN"
    r"|(?i:bearer|basic)[ \t]|://[^\s\"'/@]*@|://[^\s\"'?]*\?[^\s\"']*="
)
# key=value and key: value in free text (stderr lines, command lines): the name must look like a credential.
_ASSIGN = re.compile(
    r"(?<![A-Za-z0-9])([A-Za-z0-9_.-]*?(?:token|secret|passw(?:or)?d|passphrase|api[-_]?key|auth(?:orization)?"
    r"|credentials?|cookie|private[-_]?key|access[-_]?key))([\"']?[ \t]*[=:][ \t]*[\"']?)([^\s\"',;&]+)",
    re.IGNORECASE,
)


# The byte anchors of the shapes above: a string with none of them holds no shape that a byte scan can find.
# The rarer shapes (npm_, hf_, ghu_, ghr_, ASIA, sk_live_, Basic) have none: they are found in every string of
# a frame something else sends to the walk, not by themselves.
SHAPE_LITERALS = (
    b"sk-",
    b"eyJ",
    b"ghp_",
    b"gho_",
    b"ghs_",
    b"_pat_",
    b"glpat-",
    b"xox",
    b"AKIA",
    b"AIza",
    b"-----BEGIN",
    b"earer ",
    b"://",
)
# Keys the structural rules look for in any message: a `_meta`, a `headers`, and any \\u escape (which may
# spell either).
WATCHED_LITERALS = (b"_meta", b'"headers"', b"\\u", *SHAPE_LITERALS)
_finders: dict[tuple[bytes, ...], Any] = {}


def any_literal_in(data: bytes | bytearray | memoryview, literals: tuple[bytes, ...]) -> bool:
    """Whether any of the literals occurs in the bytes: one pass over them, whatever their number.

    The recorder asks this of every chunk of a flood. A literal `in` per pattern cost 0.6 ns a byte each
    (10.6 ns for the 16 of WATCHED_LITERALS, 2 us a 200 B frame) and a regex alternation as much; an
    Aho-Corasick automaton in leftmost-first mode gets a SIMD prefilter (ahocorasick_rs, the Rust crate's
    binding) and costs about 0.1 ns a byte, with the GIL released. Built on first use: the relay process
    imports this module, but only the recorder child scans."""
    finder = _finders.get(literals)
    if finder is None:
        import ahocorasick_rs

        finder = _finders[literals] = ahocorasick_rs.BytesAhoCorasick(
            list(literals), matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
        )
    # Leftmost-first reports the leftmost occurrence of any literal: the list is empty only when none occurs.
    return bool(finder.find_matches_as_indexes(data))


def shapes_maybe_in(data: bytes | bytearray | memoryview) -> bool:
    """Whether the bytes may hold a credential shape (one of SHAPE_LITERALS): False rules the common ones
    out."""
    return any_literal_in(data, SHAPE_LITERALS)


def _url(url: str) -> tuple[str, int]:
    n = 0
    m = _USERINFO.match(url)
    if m and m.group(2) and m.group(2) != PLACEHOLDER:
        url = m.group(1) + PLACEHOLDER + "@" + url[m.end() :]
        n += 1
    if "?" in url:
        head, _, tail = url.partition("?")

        def query(q: re.Match[str]) -> str:
            nonlocal n
            if secret_key(q.group(2)) and q.group(3) and q.group(3) != PLACEHOLDER:
                n += 1
                return f"{q.group(1)}{q.group(2)}={PLACEHOLDER}"
            return q.group()

        url = head + "?" + _QUERY.sub(query, "&" + tail)[1:]
    return url, n


def _shape_text(text: str) -> tuple[str, int]:
    """The string with each credential-shaped part replaced, and how many there were."""
    if _STR_ANCHOR.search(text) is None:
        return text, 0
    n = 0

    def one(m: re.Match[str]) -> str:
        nonlocal n
        if m.group("url") is not None:
            new, hits = _url(m.group())
            n += hits
            return new
        if m.group("scheme") is not None:
            n += 1
            word = _SCHEME_WORD.match(m.group())
            return (word.group() if word else "") + PLACEHOLDER
        n += 1
        return PLACEHOLDER

    out = _SHAPES.sub(one, text)
    return out, n


def redact_text(text: str) -> tuple[str, int]:
    """A line of free text (the agent's stderr, a command line): shapes, and `name=value` / `name: value`
    where the name looks like a credential (API_KEY=..., "password": "...", Authorization: ...)."""
    out, n = _shape_text(text)

    def assign(m: re.Match[str]) -> str:
        nonlocal n
        if m.group(3).startswith(PLACEHOLDER) or m.group(3).lower() in ("bearer", "basic"):
            return m.group()
        n += 1
        return m.group(1) + m.group(2) + PLACEHOLDER

    out = _ASSIGN.sub(assign, out)
    return out, n


def redact_argv(argv: Sequence[Any]) -> tuple[list[Any], int]:
    """A command line: `--api-key X` and `--token=X` (any credential-like flag), `NAME=secret`, and every
    argument's shapes and URLs. Items that are not strings are kept."""
    out: list[Any] = []
    n = 0
    secret_next = False
    for arg in argv:
        if not isinstance(arg, str):
            out.append(arg)
            secret_next = False
            continue
        if secret_next and arg and not arg.startswith("-"):
            out.append(PLACEHOLDER)
            n += 1
            secret_next = False
            continue
        secret_next = False
        if arg.startswith("-") and len(arg) > 1:
            name, eq, value = arg.lstrip("-").partition("=")
            if secret_key(name):
                if eq:
                    out.append(arg[: len(arg) - len(value)] + PLACEHOLDER if value else arg)
                    n += bool(value)
                else:
                    out.append(arg)
                    secret_next = True
                continue
        new, hits = redact_text(arg)
        out.append(new)
        n += hits
    return out, n


# -- the policy ---------------------------------------------------------------------------------------------
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
                "credential-like keys in _meta, and anywhere in extension methods' params",
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
            any(m in _SECRET_METHODS or _extension(m) for m in methods)
            or _meta_in(raw, parsed)
            or (len(raw) > SHAPE_SCAN_MAX and any(m in _CONTENT_METHODS for m in methods) and shapes_maybe_in(raw))
        )

    def might_apply_one(self, raw: bytes, method: str, parsed: Any = _UNPARSED) -> bool:
        """might_apply(raw, (method,), parsed) without the tuple and the generator: the recorder asks it of
        every notification of a flood."""
        if not self.enabled:
            return False
        return (
            bool(self.paths or self._compiled)
            or method in _SECRET_METHODS
            or _extension(method)
            or _meta_in(raw, parsed)
        )

    def might_apply_without_keys(self, method: str) -> bool:
        """might_apply_one for a frame whose bytes are known to hold no watched key nor shape (the recorder
        scans a chunk of small frames once, see watched_keys_in, instead of each of its frames)."""
        return self.enabled and (bool(self.paths or self._compiled) or method in _SECRET_METHODS or _extension(method))

    # -- applying it ------------------------------------------------------------------------------------
    def apply(self, msg: Any, answers: Sequence[str | None] | str | None = None) -> tuple[Any, int]:
        """Return (message to store, how many values were redacted). The input is never mutated.
        `answers`: the method a response answers (one per member for a batch), which its own bytes lack."""
        if not self.enabled:
            return msg, 0
        out, changed = self._builtin(msg, answers)
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
            if method in _AUTH_METHODS:
                params, n = _all_values(params, keep=("methodId",))
            elif method in _MCP_METHODS and isinstance(params, dict) and isinstance(params.get("mcpServers"), list):
                servers, n = _redact_servers(params["mcpServers"])
                if n:
                    params = {**params, "mcpServers": servers}
            elif method in _TERMINAL_METHODS and isinstance(params, dict):
                params, n = _redact_command(params)
            if n:
                new = {**msg, "params": params}
            if method not in _ACP_METHODS:  # extension or unknown: credential-like keys anywhere in params
                params, hit = _walk(new["params"], True)
                if hit:
                    new = {**new, "params": params}
                    n += hit
        elif answered in _AUTH_METHODS and "result" in msg:
            result, n = _all_values(msg["result"])
            if n:
                new = {**msg, "result": result}
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


def _extension(method: str | None) -> bool:
    return isinstance(method, str) and method.startswith("_")


def _all_values(value: Any, keep: tuple[str, ...] = ()) -> tuple[Any, int]:
    """Every scalar inside replaced (containers kept, so the shape of what was sent stays readable)."""
    if isinstance(value, dict):
        n = 0
        out = {}
        for k, v in value.items():
            if k in keep:
                out[k] = v
                continue
            out[k], hit = _all_values(v)
            n += hit
        return out, n
    if isinstance(value, list):
        items = [_all_values(v) for v in value]
        return [v for v, _ in items], sum(c for _, c in items)
    if value is None or value == PLACEHOLDER or isinstance(value, bool):
        return value, 0
    return PLACEHOLDER, 1


def _entry_values(entries: Any) -> tuple[Any, int]:
    """env / headers: `[{name, value}]` lists and `{name: value}` maps, every value replaced."""
    if isinstance(entries, list):
        out, n = [], 0
        for e in entries:
            if isinstance(e, dict) and "value" in e and e["value"] != PLACEHOLDER:
                out.append({**e, "value": PLACEHOLDER})
                n += 1
            else:
                out.append(e)
        return (out if n else entries), n
    if isinstance(entries, dict):
        n = sum(1 for v in entries.values() if v != PLACEHOLDER)
        return ({k: PLACEHOLDER for k in entries} if n else entries), n
    return entries, 0


def _redact_command(spec: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """A process to start (an MCP server, a terminal): env values, args as a command line, the URL."""
    out = dict(spec)
    n = 0
    for key in ("env", "headers"):
        if key in spec:
            out[key], hit = _entry_values(spec[key])
            n += hit
    if isinstance(spec.get("args"), list):
        out["args"], hit = redact_argv(spec["args"])
        n += hit
    for key in ("command", "url"):
        if isinstance(spec.get(key), str):
            out[key], hit = redact_text(spec[key])
            n += hit
    return (out if n else spec), n


def _redact_servers(servers: list[Any]) -> tuple[list[Any], int]:
    items = [_redact_command(s) if isinstance(s, dict) else (s, 0) for s in servers]
    return [s for s, _ in items], sum(c for _, c in items)


def _walk(value: Any, inside_meta: bool) -> tuple[Any, int]:
    """The whole message: credential-like keys inside any _meta (an object under one is walked, not
    replaced), the values of any `headers`, and credential shapes in every string."""
    if isinstance(value, str):
        return _shape_text(value)
    if isinstance(value, dict):
        n = 0
        out = {}
        for k, v in value.items():
            if k == "headers":
                nv, hit = _entry_values(v)
                if hit:
                    out[k] = nv
                    n += hit
                    continue
            if inside_meta and isinstance(k, str) and secret_key(k):
                out[k], hit = _secret_value(v)
                n += hit
                continue
            out[k], hit = _walk(v, inside_meta or k == "_meta")
            n += hit
        return (out if n else value), n
    if isinstance(value, list):
        items = [_walk(v, inside_meta) for v in value]
        n = sum(c for _, c in items)
        return ([v for v, _ in items] if n else value), n
    return value, 0


# Keys that describe a credential rather than hold it, in an object under a credential-named key.
_DESCRIPTIVE = frozenset(
    {"provider", "type", "kind", "name", "source", "method", "scheme", "description", "label", "id", "format"}
)


def _secret_value(v: Any) -> tuple[Any, int]:
    """The value of a credential-named key: a scalar is replaced; an object is walked (it may describe
    the credential rather than hold it: gemini-cli's `"api-key": {"provider": "google"}`), its descriptive
    keys (_DESCRIPTIVE) kept and its other scalars replaced; a list item by item."""
    if isinstance(v, dict):
        n = 0
        out = {}
        for k, x in v.items():
            if k in _DESCRIPTIVE and not isinstance(x, (dict, list)):
                out[k], hit = _shape_text(x) if isinstance(x, str) else (x, 0)
            elif isinstance(k, str) and k != "headers" and not secret_key(k):
                out[k], hit = _secret_value(x)
            else:
                out[k], hit = _walk({k: x}, True)
                out[k] = out[k][k]
            n += hit
        return (out if n else v), n
    if isinstance(v, list):
        items = [_secret_value(x) for x in v]
        n = sum(c for _, c in items)
        return ([x for x, _ in items] if n else v), n
    if v is None or v == PLACEHOLDER or v == "" or isinstance(v, bool):
        return v, 0
    return PLACEHOLDER, 1


def _redact_path(value: Any, path: list[str]) -> tuple[Any, int]:
    if not path:
        return PLACEHOLDER, 1
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        keys = list(value) if head == "*" else ([head] if head in value else [])
        if not keys:
            return value, 0
        out, changed = dict(value), 0
        for k in keys:
            out[k], hit = _redact_path(value[k], rest)
            changed += hit
        return (out if changed else value), changed
    if isinstance(value, list):
        if head == "*":
            idxs = range(len(value))
        elif head.isdigit() and int(head) < len(value):
            idxs = range(int(head), int(head) + 1)
        else:
            return value, 0
        out_list, changed = list(value), 0
        for i in idxs:
            out_list[i], hit = _redact_path(value[i], rest)
            changed += hit
        return (out_list if changed else value), changed
    return value, 0


# -- the cheap byte tests -------------------------------------------------------------------------------------
def watched_keys_in(data: bytes | bytearray | memoryview) -> bool:
    """Whether the bytes may hold a `_meta` or a `headers` key or a credential shape: False rules all of
    them out (the byte scan).

    A key may be spelled with JSON escapes (`"\\u005fmeta"` is `_meta`), so any `\\u` escape counts as
    a maybe: such frames go to the exact check on their parsed keys."""
    return any_literal_in(data, WATCHED_LITERALS)


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


# -- the one function that applies a policy to a frame ---------------------------------------------------------
def redact_frame(
    raw: bytes, policy: Policy, answers: Sequence[str | None] | str | None = None, parsed: Any = _UNPARSED
) -> tuple[bytes, int]:
    """(bytes to store, values redacted) for one frame's bytes (without its \\n). 0: the bytes as they came.

    `parsed` is the frame's message when the caller has it (an exact parse is made when it may not be:
    big frames are indexed from a copy, and orjson reads integers beyond 64 bits as floats). A frame that is
    not JSON (invalid UTF-8, a cut line) is redacted as text, its other bytes kept; a frame with a
    duplicated key is stored as the copy every reader sees (the last), its earlier copies counted as
    redacted values (they could hold a secret the rules never see)."""
    if not policy.enabled:
        return raw, 0
    body = raw[:-1] if raw[-1:] == b"\r" else raw
    try:
        if parsed is _UNPARSED or len(raw) >= BIG_FRAME or may_hold_wide_int(raw):
            try:
                parsed = loads(body)
            except ValueError:
                return _redact_bytes(raw, policy, answers)
        new, n = policy.apply(parsed, answers)
        dropped = _duplicates(body, parsed) if n or dumps(parsed) != body else 0
        if dropped:
            pairs = json.loads(body.decode("utf-8"), object_pairs_hook=_last_wins)
            new, n = policy.apply(pairs, answers)
            n += dropped
        return (dumps(new), n) if n else (raw, 0)
    except Exception:  # RecursionError and the like: withhold, never store what could not be checked
        return WITHHELD, 1


def _last_wins(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return dict(pairs)


def _duplicates(body: bytes, parsed: Any) -> int:
    """How many key copies a JSON text holds beyond its last (0 for almost every frame: only called when
    the compact re-serialization differs from the bytes)."""
    count = 0

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal count
        d = dict(pairs)
        count += len(pairs) - len(d)
        return d

    try:
        json.loads(body.decode("utf-8"), object_pairs_hook=hook)
    except (ValueError, RecursionError):
        return 0
    return count


# The keys the structural rules act on, spelled as bytes (or any \u escape, which may spell one).
_KEY_LITERALS = (
    b"_meta",
    b'"headers"',
    b"mcpServers",
    b'"auth',
    b"terminal/create",
    b'"_',
    b"\\u",
    b'"env"',
    b'"args"',
)


def _keys_in_text(raw: bytes) -> bool:
    """Whether bytes that do not parse may hold a key the structural rules act on (memchr first: text with
    no quote holds no JSON key at all)."""
    return b'"' in raw and any_literal_in(raw, _KEY_LITERALS)


def _redact_bytes(raw: bytes, policy: Policy, answers: Sequence[str | None] | str | None) -> tuple[bytes, int]:
    """A frame orjson refuses. Invalid UTF-8 in an otherwise JSON frame: parsed with the bad bytes kept as
    they are (surrogate escapes), redacted like any frame, written back byte for byte around the changes.
    Anything else (a cut line): the free-text rules, so a stray byte never keeps a secret in the store."""
    if len(raw) > SHAPE_SCAN_MAX and not policy._compiled and not _keys_in_text(raw):
        return raw, 0  # big, and no key the rules look for: scanning it for shapes costs what big frames skip
    text = raw.decode("utf-8", "surrogateescape")
    try:
        msg = json.loads(text[:-1] if text.endswith("\r") else text)
    except (ValueError, RecursionError):
        return redact_line(raw, policy) if len(raw) <= SHAPE_SCAN_MAX or policy._compiled else (raw, 0)
    new, n = policy.apply(msg, answers)
    if not n:
        return raw, 0
    return json.dumps(new, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogateescape"), n


def _redact_text_bytes(raw: bytes, policy: Policy) -> tuple[bytes, int]:
    text = raw.decode("utf-8", "surrogateescape")
    out, n = redact_text(text)
    for rx in policy._compiled:
        out, k = rx.subn(PLACEHOLDER, out)
        n += k
    return (out.encode("utf-8", "surrogateescape"), n) if n else (raw, 0)


_ASSIGN_HINT = re.compile(
    rb"(?i)token|secret|passw|passphrase|api[-_]?key|auth|credential|cookie|private[-_]?key|access[-_]?key"
)


def redact_line(raw: bytes, policy: Policy) -> tuple[bytes, int]:
    """One line of the agent's stderr (or any recorded text that is not a frame): the free-text rules and
    the user's regexes."""
    if not policy.enabled:
        return raw, 0
    if not policy._compiled and not shapes_maybe_in(raw) and _ASSIGN_HINT.search(raw) is None:
        return raw, 0
    return _redact_text_bytes(raw, policy)
