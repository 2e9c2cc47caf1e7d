"""JSON-RPC 2.0 basics every layer shares: parsing and dumping frames, id keys, directions.

One copy of each: the recorder, the read side, replay and every command parse and key messages the same
way, so an id that correlates in one view correlates in all of them.
"""

from __future__ import annotations

import json
from typing import Any, Generic, TypeVar

import orjson

C2A = "c2a"  # editor -> agent (the agent's stdin)
A2C = "a2c"  # agent -> editor (the agent's stdout)
OPPOSITE = {C2A: A2C, A2C: C2A}
ERR = "err"  # not JSON-RPC: the agent's stderr, the third stream the relay records
NET = "net"  # not frames: transport events of a remote connection (HTTP requests, SSE, WebSocket close)

# Standard JSON-RPC error codes, and ACP's "resource not found".
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32603,
)
NOT_FOUND = -32002

T = TypeVar("T")


# orjson reads an integer beyond 64 bits as a float, silently (2**64 comes back as 1.8446744073709552e+19).
# Any run of 19 digits may be one (2**63 has 19), so such a text is parsed by json, which keeps ints exact;
# digits inside strings only cost the slower parse. The scan maps digits to "0" and everything else to "."
# and looks for nineteen "0"s: a few times faster than a regular expression (~1 us for a 400-byte frame).
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x2E for b in range(256))
_RUN = b"0" * 19


def may_hold_wide_int(raw: bytes | bytearray | memoryview | str) -> bool:
    """Could orjson lose an integer of this JSON text? (A cheap scan; false positives are fine.)"""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    return _RUN in data.translate(_DIGITS)


def loads(raw: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON like orjson, falling back to json for what orjson refuses or would change but JSON allows
    (integers beyond 64 bits, kept exact; numbers too big for a double). Strings come back valid Unicode:
    an escaped lone surrogate is refused with a ValueError, like any other text that is not JSON, so that
    every caller's `except ValueError` covers it."""
    wide = may_hold_wide_int(raw)
    if not wide:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")  # invalid UTF-8 is never JSON
    value = json.loads(text)
    try:
        orjson.dumps(value)  # escaped lone surrogates: not Unicode, so not indexable (TypeError)
    except TypeError:
        if not wide:
            raise ValueError("not Unicode: a string holds an escaped lone surrogate") from None
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # wide ints are fine; surrogates: UnicodeEncodeError
    return value


def dumps(value: Any, *, indent: bool = False) -> bytes:
    """Compact JSON (or indented by 2); falls back to json for what orjson refuses (integers beyond 64 bits,
    deep nesting), and to repr() for what JSON cannot hold."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else None)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        if indent:
            return json.dumps(value, ensure_ascii=False, indent=2, default=repr).encode("utf-8")
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr).encode("utf-8")


def dumps_text(value: Any, *, indent: bool = False) -> str:
    """`dumps` as a str, for views; never raises (repr() for what even json refuses, e.g. a cycle)."""
    try:
        return dumps(value, indent=indent).decode("utf-8", "replace")
    except (ValueError, RecursionError):
        return repr(value)


def loads_or_none(raw: bytes | bytearray | memoryview | str | None) -> Any:
    """`loads`, or None for nothing (None, empty) and for what is not JSON: for recorded bytes and stored
    JSON columns, which may hold anything and must not stop a view."""
    if not raw:
        return None
    try:
        return loads(raw)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


def short_json(value: Any, limit: int = 60) -> str:
    """A value for a one-line message: its JSON (never raising), cut to `limit` characters."""
    text = dumps_text(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def id_key(value: Any) -> tuple[str, Any]:
    """A dict key for a JSON-RPC id that keeps types apart (1, 1.0, True and "1" are all different).

    Objects and arrays are not valid ids, but a peer may still send them: they key by their JSON text."""
    if isinstance(value, (list, dict)):
        return ("json", json.dumps(value, sort_keys=True, default=str))
    return (type(value).__name__, value)


class Correlator(Generic[T]):
    """The one rule that pairs JSON-RPC answers with their requests, per direction of one connection.

    A request waits under (the direction it was sent in, its id); an answer travels the other way and takes
    it; a `$/cancel_request` is sent by the requester, so it names a request of its own direction. Each view
    (the recorder's tracker, replay's loader, the materializer, the checker, the diff) keeps what it needs
    as the value.
    """

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending: dict[tuple[str, tuple[str, Any]], T] = {}

    @staticmethod
    def key(direction: str, rpc_id: Any) -> tuple[str, tuple[str, Any]]:
        """What a request sent in `direction` with this id waits under (a view may keep its own sets of them)."""
        return (direction, id_key(rpc_id))

    @staticmethod
    def answer_key(direction: str, rpc_id: Any) -> tuple[str, tuple[str, Any]]:
        """The key of the request an answer received in `direction` with this id answers."""
        return (OPPOSITE.get(direction, ""), id_key(rpc_id))

    # The three below spell `key` and `answer_key` out: the recorder's tracker calls them for every message.
    def request(self, direction: str, rpc_id: Any, value: T) -> None:
        self.pending[(direction, id_key(rpc_id))] = value

    def answer(self, direction: str, rpc_id: Any) -> T | None:
        """The request an answer received in `direction` answers, now no longer pending."""
        return self.pending.pop((OPPOSITE.get(direction, ""), id_key(rpc_id)), None)

    def cancelled(self, direction: str, request_id: Any) -> T | None:
        """The request a `$/cancel_request` sent in `direction` names (it stays pending)."""
        return self.pending.get((direction, id_key(request_id)))


# A JSON-RPC id as the index stores it (column rpc_id, no type affinity): strings, 64-bit integers and
# doubles as themselves, so 1 and "1" stay apart by their SQLite type. What SQLite cannot hold as its own
# type (integers beyond 64 bits, `true`/`false`, which are not legal ids but are sent) is stored as TEXT:
# STORED_JSON followed by the id's JSON text. A string id that itself starts with STORED_JSON is stored the
# same way (its JSON text), so every stored value reads back to exactly one id.
STORED_JSON = "\x00"


def store_id(value: Any) -> Any:
    """The rpc_id column's value for an id (None for null, objects and arrays)."""
    if isinstance(value, str):
        return value if not value.startswith(STORED_JSON) else STORED_JSON + json.dumps(value)
    if isinstance(value, bool) or (isinstance(value, int) and not -(2**63) <= value < 2**63):
        return STORED_JSON + json.dumps(value)
    if isinstance(value, (int, float)):
        return value
    return None


def stored_id(value: Any) -> Any:
    """The id that `store_id` stored."""
    if isinstance(value, str) and value.startswith(STORED_JSON):
        try:
            return json.loads(value[1:])
        except ValueError:
            return value
    return value


def get(obj: Any, key: str) -> Any:
    """obj[key] when obj is a dict, else None: recorded messages may have any shape."""
    return obj.get(key) if isinstance(obj, dict) else None


def result_bytes(id_raw: bytes, result: Any) -> bytes:
    """A response frame (no newline) answering the request whose id was written as `id_raw`."""
    return b'{"jsonrpc":"2.0","id":' + id_raw + b',"result":' + dumps(result) + b"}"


def error_bytes(id_raw: bytes, code: int, message: str, data: Any = None) -> bytes:
    """An error response frame (no newline) for the request whose id was written as `id_raw`."""
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return b'{"jsonrpc":"2.0","id":' + id_raw + b',"error":' + dumps(err) + b"}"
