"""Find a JSON value's byte span inside a raw frame, and splice new bytes in, without re-serializing.

Replay must change a few values (the sessionId, request ids) in recorded frames and keep every other byte
as recorded, so it edits spans of the exact bytes instead of dumping a parsed copy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from .jsonrpc import dumps

_SCALAR = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
_WS = re.compile(rb"[ \t\r\n]*")
_STRUCT = re.compile(rb'["\[\]{}]')


def skip_ws(b: bytes, i: int) -> int:
    """The index of the first byte at or after i that is not JSON whitespace."""
    return _WS.match(b, i).end()  # type: ignore[union-attr]


def _string_end(b: bytes, i: int) -> int:
    """End of the string starting at i: the next quote not escaped (bytes.find: fast on MB of base64)."""
    j = i + 1
    while True:
        k = b.find(b'"', j)
        if k < 0:
            raise ValueError("unterminated string")
        n = k - 1
        while n > i and b[n] == 0x5C:  # backslash
            n -= 1
        if (k - 1 - n) % 2 == 0:
            return k + 1
        j = k + 1


def _value_end(b: bytes, i: int) -> int:
    """End of the JSON value starting at i (the bytes are known to be valid JSON)."""
    c = b[i : i + 1]
    if c == b'"':
        return _string_end(b, i)
    if c in (b"{", b"["):
        depth, j = 0, i
        while True:
            m = _STRUCT.search(b, j)
            if m is None:
                raise ValueError("unbalanced brackets")
            t = m.group()
            if t == b'"':
                j = _string_end(b, m.start())
                continue
            depth += 1 if t in (b"{", b"[") else -1
            j = m.end()
            if depth == 0:
                return j
    m = _SCALAR.match(b, i)
    if m is None:
        raise ValueError(f"no JSON value at {i}")
    return m.end()


def _key(token: bytes) -> str:
    return token[1:-1].decode("utf-8") if b"\\" not in token else json.loads(token)


def child_spans(b: bytes, i: int) -> Iterable[tuple[Any, int, int]]:
    """(key or index, value start, value end) of the object or array at i."""
    is_obj = b[i : i + 1] == b"{"
    close = b"}" if is_obj else b"]"
    i = skip_ws(b, i + 1)
    if b[i : i + 1] == close:
        return
    n = 0
    while True:
        if is_obj:
            if b[i : i + 1] != b'"':
                raise ValueError("object key expected")
            end = _string_end(b, i)
            key: Any = _key(b[i:end])
            i = skip_ws(b, end)
            if b[i : i + 1] != b":":
                raise ValueError("':' expected")
            i = skip_ws(b, i + 1)
        else:
            key, n = n, n + 1
        end = _value_end(b, i)
        yield key, i, end
        i = skip_ws(b, end)
        c = b[i : i + 1]
        if c == b",":
            i = skip_ws(b, i + 1)
        elif c == close:
            return
        else:
            raise ValueError("',' or end expected")


def find_span(b: bytes, path: tuple[Any, ...]) -> tuple[int, int] | None:
    """Byte span of the value at `path` (keys and array indexes) in the JSON text b, or None.

    A repeated key resolves to its last occurrence, as JSON parsers read it.
    """
    start = skip_ws(b, 0)
    end = _value_end(b, start)
    for step in path:
        found = None
        if b[start : start + 1] in (b"{", b"[") and (isinstance(step, str) == (b[start : start + 1] == b"{")):
            for key, s, e in child_spans(b, start):
                if key == step:
                    found = (s, e)
        if found is None:
            return None
        start, end = found
    return start, end


def find_all(b: bytes, name: str) -> list[tuple[int, int]]:
    """Spans of every member value named `name`, at any depth."""
    out: list[tuple[int, int]] = []

    def walk(i: int) -> None:
        if b[i : i + 1] not in (b"{", b"["):
            return
        is_obj = b[i : i + 1] == b"{"
        for key, s, e in child_spans(b, i):
            if is_obj and key == name:
                out.append((s, e))
            walk(s)

    walk(skip_ws(b, 0))
    return out


def splice(b: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    """Replace non-overlapping spans."""
    out, last = [], 0
    for s, e, new in sorted(edits):
        out += [b[last:s], new]
        last = e
    out.append(b[last:])
    return b"".join(out)


def id_bytes(raw: bytes, msg: dict[str, Any]) -> bytes | None:
    """A request's id exactly as its sender wrote it (an answer echoes it byte for byte); None without one."""
    if "id" not in msg:
        return None
    try:
        span = find_span(raw, ("id",))
    except (ValueError, RecursionError):
        span = None
    return raw[span[0] : span[1]] if span else dumps(msg["id"])
