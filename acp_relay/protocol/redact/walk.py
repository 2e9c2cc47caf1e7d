"""Redaction's walker: the structural rules applied to a parsed message (by place: mcpServers, terminal
commands, auth values, headers; by key name inside `_meta`), and the user's dotted paths (sans-I/O)."""

from __future__ import annotations

from typing import Any

from .keys import _NOT_CREDENTIALS, PLACEHOLDER, secret_key
from .shapes import _shape_text, redact_argv, redact_text


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
            if inside_meta and k in _NOT_CREDENTIALS and isinstance(v, dict):
                out[k], hit = _redact_command(v)  # a command to run: env values, args as a command line
                out[k], more = _walk(out[k], True)
                n += hit + more
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
