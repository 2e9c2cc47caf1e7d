"""Capture file formats, read and written without I/O: bytes in, frames out (and frames in, bytes out).

Formats:
- `ndjson` (ours): one object per frame, {"seq", "ts", "direction", "raw"} or "raw_b64" for bytes that
  are not UTF-8. Exact bytes, so export -> import -> export is the identical file.
- `acp-devtools`: the SessionExport v1 document of the acp-devtools inspector (maksugr/acp-devtools,
  packages/core/src/storage/export.ts and acp/types.ts): top-level version 1, exportedAt (ms), tool
  {name, version}, session {id, name, agentCommand, clientName, startedAt, endedAt}, messages[] of
  {seq, timestamp (ms), direction editor-to-agent|agent-to-editor, kind request|response|error|
  notification|unknown, method?, rpcId?, raw, payload, parseError?}. Its `raw` is text; bytes that are not
  UTF-8 also go in an extra `rawBase64` member (acp-devtools ignores members it does not know).
- `conductor-trace`: the ACP Rust SDK conductor's `--trace FILE.jsons` (agentclientprotocol/rust-sdk,
  src/agent-client-protocol-conductor/src/trace.rs, md/trace-viewer.md): one event per line, `type`
  request|response|notification, `ts` (monotonic seconds since the trace began), `from`/`to` component
  names (Client, Proxy(N), Agent), requests and notifications with `protocol` acp|mcp, `method`, `params`,
  optional `session`; requests and responses with `id`; responses with `is_error` and `payload` (the result
  or the error object). It holds parsed messages, not bytes: frames are rebuilt from them and flagged.

The SQLite format is read and written in store/ (it is SQL); the command picks the reader by `detect`.
"""

from __future__ import annotations

import base64
import codecs
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from .jsonrpc import A2C, C2A, dumps, loads
from .words import counted

SQLITE_MAGIC = b"SQLite format 3\x00"
# What an import accepts (docs/security.md): a file of at most MAX_FILE bytes, frames of at most MAX_FRAME,
# nesting at most orjson's 1024 levels, wall-clock times between 1970 and TS_MAX (year 2286), times since the
# connection began within MONO_MAX seconds (about 31 years).
MAX_FILE = 1 << 30
MAX_FRAME = 256 << 20
TS_MAX = 1e10
MONO_MAX = 1e9
DEVTOOLS_DIRECTIONS = {C2A: "editor-to-agent", A2C: "agent-to-editor"}
FROM_DEVTOOLS = {v: k for k, v in DEVTOOLS_DIRECTIONS.items()}
DEVTOOLS_KINDS = frozenset({"request", "response", "error", "notification"})


class FormatError(ValueError):
    """The file is not what its format says: the message names the line (1-based) when there is one."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line

    def __str__(self) -> str:
        text = super().__str__()
        return f"line {self.line}: {text}" if self.line is not None else text


@dataclass(slots=True)
class Captured:
    """One frame as a capture file holds it."""

    direction: str  # c2a | a2c
    ts: float  # unix seconds
    raw: bytes  # without the \n delimiter
    mono: float | None = None  # seconds since the connection started, when the source knows better than ts
    unterminated: bool = False
    redacted: bool = False
    rebuilt: bool = False  # re-serialized from parsed JSON: the source did not keep the bytes


@dataclass
class Capture:
    """A whole capture: frames in order, and what the source says about the connection."""

    format: str
    frames: list[Captured] = field(default_factory=list)
    argv: list[str] | None = None
    started_at: float | None = None
    ended_at: float | None = None
    notes: list[str] = field(default_factory=list)  # told to the user (e.g. events that were left out)


# -- detection -------------------------------------------------------------------------------------------
def detect(data: bytes) -> str:
    """sqlite | acp-devtools | ndjson | conductor-trace; FormatError when it is none of them."""
    if data.startswith(SQLITE_MAGIC):
        return "sqlite"
    if not data.strip():
        raise FormatError("the file is empty")
    head = data.lstrip()
    if head[:1] == b"{":
        try:
            whole = orjson.loads(data)
        except orjson.JSONDecodeError:
            whole = None
        if isinstance(whole, dict) and "messages" in whole and "exportedAt" in whole:
            return "acp-devtools"
        first = _first_line(data)
        try:
            obj = orjson.loads(first[1])
        except orjson.JSONDecodeError:
            if whole is None and first[1].strip() == b"{":  # a pretty-printed document that does not parse
                return "acp-devtools"
            raise FormatError("not JSON, not a known capture format", first[0]) from None
        if isinstance(obj, dict):
            if "direction" in obj and ("raw" in obj or "raw_b64" in obj):
                return "ndjson"
            if obj.get("type") in ("request", "response", "notification") and "ts" in obj and "from" in obj:
                return "conductor-trace"
            if "messages" in obj and "version" in obj:
                return "acp-devtools"
    raise FormatError(
        "unknown format (expected an acp-relay SQLite or ndjson export, an acp-devtools SessionExport, "
        "or a conductor trace .jsons)"
    )


def _first_line(data: bytes) -> tuple[int, bytes]:
    for n, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            return n, line
    return 1, b""


def _lines(data: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; a last line without \\n that does not parse is a
    truncated file, any other bad line is a bad line."""
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = loads(line)
        except (ValueError, UnicodeDecodeError, TypeError) as exc:
            if n == len(lines) and not complete:
                raise FormatError("the file is truncated (its last line is cut short)", n) from None
            raise FormatError(f"not valid JSON ({exc})", n) from None
        if not isinstance(obj, dict):
            raise FormatError("expected a JSON object", n)
        yield n, obj


# -- writing a frame at a time ----------------------------------------------------------------------------
# A frame over BIG_VALUE bytes (and a parsed string over BIG_VALUE characters) is written PIECE bytes at a
# time: a 64 MiB frame's text, base64 and JSON escaping, each whole, cost several times the frame.
BIG_VALUE = 1 << 20
PIECE = 3 << 18  # a multiple of 3, so base64 pieces join into the base64 of the whole


class Pieces:
    """A JSON string too big to build whole: `parts()` gives its JSON text between the quotes, piece by
    piece (each piece is valid on its own: cut between characters, escaped like the whole would be)."""

    __slots__ = ("parts",)

    def __init__(self, parts: Callable[[], Iterator[bytes]]) -> None:
        self.parts = parts


def is_utf8(raw: bytes) -> bool:
    """Whether `raw` decodes as strict UTF-8, checked a piece at a time (no str of the whole)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for i in range(0, len(raw), PIECE):
            decoder.decode(raw[i : i + PIECE], final=i + PIECE >= len(raw))
    except UnicodeDecodeError:
        return False
    return True


def text_pieces(raw: bytes, errors: str = "strict") -> Pieces:
    """The JSON string of `raw` decoded as UTF-8 (with `errors`), a piece at a time: an incremental decoder
    decodes a cut sequence exactly as the whole would."""

    def parts() -> Iterator[bytes]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors)
        for i in range(0, len(raw), PIECE):
            text = decoder.decode(raw[i : i + PIECE], final=i + PIECE >= len(raw))
            if text:
                yield dumps(text)[1:-1]

    return Pieces(parts)


def base64_pieces(raw: bytes) -> Pieces:
    return Pieces(lambda: (base64.b64encode(raw[i : i + PIECE]) for i in range(0, len(raw), PIECE)))


def _str_pieces(text: str) -> Pieces:
    return Pieces(lambda: (dumps(text[i : i + PIECE])[1:-1] for i in range(0, len(text), PIECE)))


_MARK = "\x00acp-relay-piece:{}:{}"
_NESTED = 128  # levels a big string is looked for in (deeper ones are written whole)


def json_chunks(value: Any, depth: int | None = None) -> Iterator[bytes]:
    """`dumps(value)` (compact; or indented by 2, `depth` levels in, when depth is given) as chunks whose
    concatenation is the same bytes; Pieces and strings over BIG_VALUE characters in it are written a piece
    at a time. The rest is dumped with each big value swapped for a marker, which is then cut out."""
    for salt in range(1 << 16):  # a marker the value itself does not hold (found twice): take another
        marks: list[tuple[str, Pieces]] = []
        skeleton = _swap(value, marks, salt, 0)
        text = dumps(skeleton, indent=depth is not None)
        quoted = [dumps(mark) for mark, _ in marks]
        if all(text.count(q) == 1 for q in quoted):
            break
    if depth:
        text = text.replace(b"\n", b"\n" + b"  " * depth)
    del skeleton
    at = sorted((text.index(q), q, big) for q, (_, big) in zip(quoted, marks, strict=True))
    pos = 0
    for i, q, big in at:
        yield text[pos : i + 1]  # up to the opening quote
        yield from big.parts()
        pos = i + len(q) - 1  # from the closing quote
    yield text[pos:]


def _swap(value: Any, marks: list[tuple[str, Pieces]], salt: int, level: int) -> Any:
    """`value` with each Pieces and big string replaced by a marker string (recorded in `marks`)."""
    if isinstance(value, Pieces) or (isinstance(value, str) and len(value) > BIG_VALUE):
        mark = _MARK.format(salt, len(marks))
        marks.append((mark, value if isinstance(value, Pieces) else _str_pieces(value)))
        return mark
    if level >= _NESTED:
        return value
    if isinstance(value, dict):
        return {k: _swap(v, marks, salt, level + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, marks, salt, level + 1) for v in value]
    return value


# -- ndjson ----------------------------------------------------------------------------------------------
def ndjson_chunks(seq: int, f: Captured) -> Iterator[bytes]:
    """One frame of our ndjson export (one line), in chunks."""
    rec: dict[str, Any] = {"seq": seq, "ts": f.ts, "direction": f.direction}
    if len(f.raw) > BIG_VALUE:
        if is_utf8(f.raw):
            rec["raw"] = text_pieces(f.raw)
        else:
            rec["raw_b64"] = base64_pieces(f.raw)
    else:
        try:
            rec["raw"] = f.raw.decode("utf-8")
        except UnicodeDecodeError:
            rec["raw_b64"] = base64.b64encode(f.raw).decode()
    yield from json_chunks(rec)
    yield b"\n"


def ndjson_line(seq: int, f: Captured) -> bytes:
    """One frame of our ndjson export."""
    return b"".join(ndjson_chunks(seq, f))


def read_ndjson(data: bytes) -> Capture:
    cap = Capture("ndjson")
    last_seq = 0
    for n, obj in _lines(data):
        direction = obj.get("direction")
        if direction not in (C2A, A2C):
            raise FormatError(f"direction must be {C2A!r} or {A2C!r}, not {direction!r}", n)
        ts = obj.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            raise FormatError("ts must be a number (unix seconds)", n)
        seq = obj.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq <= last_seq:
            raise FormatError("seq must be an integer, increasing from 1", n)
        last_seq = seq
        if isinstance(obj.get("raw"), str):
            raw = obj["raw"].encode("utf-8", "surrogatepass")
        elif isinstance(obj.get("raw_b64"), str):
            try:
                raw = base64.b64decode(obj["raw_b64"], validate=True)
            except ValueError:
                raise FormatError("raw_b64 is not valid base64", n) from None
        else:
            raise FormatError("a frame needs raw (a string) or raw_b64", n)
        cap.frames.append(Captured(direction, float(ts), raw))
    if not cap.frames:
        raise FormatError("no frames in the file")
    return cap


# -- acp-devtools SessionExport v1 -----------------------------------------------------------------------
@dataclass
class ExportInfo:
    """What the SessionExport's `session` member says, from our connection row."""

    id: int
    name: str | None
    agent_command: str | None
    client_name: str | None
    started_at: float
    ended_at: float | None


def devtools_message(seq: int, f: Captured, kind: str, message: Any) -> dict[str, Any]:
    """One SessionExport message, for json_chunks (a big frame's text and base64 are Pieces). `kind` and
    `message` are our classification and parsed JSON."""
    text: str | Pieces
    extra: str | Pieces | None = None
    if len(f.raw) > BIG_VALUE:  # written a piece at a time by json_chunks
        valid = is_utf8(f.raw)
        text = text_pieces(f.raw, "strict" if valid else "replace")
        extra = None if valid else base64_pieces(f.raw)
    else:
        try:
            text = f.raw.decode("utf-8")
        except UnicodeDecodeError:
            text = f.raw.decode("utf-8", "replace")
            extra = base64.b64encode(f.raw).decode()
    dkind = kind if kind in DEVTOOLS_KINDS and isinstance(message, dict) else "unknown"
    out: dict[str, Any] = {
        "seq": seq,
        "timestamp": round(f.ts * 1000),
        "direction": DEVTOOLS_DIRECTIONS[f.direction],
        "kind": dkind,
    }
    if dkind in ("request", "notification") and isinstance(message.get("method"), str):
        out["method"] = message["method"]
    if dkind in ("request", "response", "error"):
        rpc_id = message.get("id")
        out["rpcId"] = rpc_id if isinstance(rpc_id, (str, int, float)) and not isinstance(rpc_id, bool) else None
    out["raw"] = text
    out["payload"] = message if dkind != "unknown" else None
    if dkind == "unknown":
        out["parseError"] = "invalid JSON" if message is None else "not a JSON-RPC 2.0 message"
    if extra is not None:
        out["rawBase64"] = extra
    return out


def write_devtools(
    info: ExportInfo, messages: Iterable[dict[str, Any]], exported_at_ms: int, version: str
) -> Iterator[bytes]:
    """The SessionExport document (indented by 2), in chunks: a message at a time (its big values a piece
    at a time), never the whole document in memory."""
    doc = {
        "version": 1,
        "exportedAt": exported_at_ms,
        "tool": {"name": "acp-relay", "version": version},
        "session": {
            "id": info.id,
            "name": info.name,
            "agentCommand": info.agent_command,
            "clientName": info.client_name,
            "startedAt": round(info.started_at * 1000),
            "endedAt": None if info.ended_at is None else round(info.ended_at * 1000),
        },
        "messages": [],
    }
    empty = b"[]\n}\n"
    whole = dumps_pretty(doc)
    head = whole[: -len(empty)]  # the document ends with its messages array
    first = True
    for message in messages:
        yield head + b"[\n    " if first else b",\n    "
        first = False
        yield from json_chunks(message, 2)
        del message  # not held while the next one is built
    yield whole if first else b"\n  ]\n}\n"


def dumps_pretty(doc: Any) -> bytes:
    try:
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"
    except (TypeError, orjson.JSONEncodeError):
        return dumps(doc) + b"\n"


def read_devtools(data: bytes) -> Capture:
    try:
        doc = loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        pos = getattr(exc, "pos", None)
        truncated = isinstance(pos, int) and pos >= len(data.rstrip())  # it stopped where the bytes ran out
        raise FormatError(
            "the file is truncated" if truncated else f"not valid JSON ({exc})", _line_at(data, exc)
        ) from None
    if not isinstance(doc, dict):
        raise FormatError("expected a JSON object at the top level", 1)
    if doc.get("version") != 1:
        raise FormatError(f"unsupported SessionExport version {doc.get('version')!r} (expected 1)")
    messages = doc.get("messages")
    if not isinstance(messages, list):
        raise FormatError("messages must be an array")
    found = doc.get("session")
    session: dict[str, Any] = found if isinstance(found, dict) else {}
    cap = Capture("acp-devtools")
    command = session.get("agentCommand")
    cap.argv = command.split() if isinstance(command, str) and command else None
    if _number(session.get("startedAt")):
        cap.started_at = session["startedAt"] / 1000
    if _number(session.get("endedAt")):
        cap.ended_at = session["endedAt"] / 1000
    for i, m in enumerate(messages):
        cap.frames.append(_devtools_frame(i, m, data))
    if not cap.frames:
        raise FormatError("no messages in the export")
    return cap


def _devtools_frame(i: int, m: Any, data: bytes) -> Captured:
    where = f"messages[{i}]"
    if not isinstance(m, dict):
        raise FormatError(f"{where} must be an object")
    named = m.get("direction")
    direction = FROM_DEVTOOLS.get(named) if isinstance(named, str) else None
    if direction is None:
        raise FormatError(f"{where}.direction must be 'editor-to-agent' or 'agent-to-editor'")
    if not _number(m.get("timestamp")):
        raise FormatError(f"{where}.timestamp must be a number (ms)")
    rebuilt = False
    if isinstance(m.get("rawBase64"), str):
        try:
            raw = base64.b64decode(m["rawBase64"], validate=True)
        except ValueError:
            raise FormatError(f"{where}.rawBase64 is not valid base64") from None
    elif isinstance(m.get("raw"), str):
        raw = m["raw"].encode("utf-8", "surrogatepass")
    elif m.get("payload") is not None:
        raw, rebuilt = dumps(m["payload"]), True
    else:
        raise FormatError(f"{where}.raw must be a string")
    return Captured(direction, m["timestamp"] / 1000, raw, rebuilt=rebuilt)


def _line_at(data: bytes, exc: BaseException) -> int | None:
    pos = getattr(exc, "pos", None)
    if isinstance(pos, int):
        return data.count(b"\n", 0, pos) + 1
    return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# -- ACP Rust SDK conductor trace (.jsons) ---------------------------------------------------------------
_PROXY = re.compile(r"^Proxy\((\d+)\)$")


def _position(name: str) -> float:
    """Where a component sits in the chain: the client first, proxies in order, the agent last."""
    if name.lower() == "client":
        return -1.0
    m = _PROXY.match(name) or re.match(r"^proxy:(\d+)$", name)
    if m:
        return float(m.group(1))
    return float("inf")  # Agent (or anything else: the far end)


def read_conductor_trace(data: bytes, started_at: float) -> Capture:
    """The trace's ACP messages on the hop nearest the agent, as the agent saw them.

    A trace with proxies logs each message on every hop it crosses; the conductor records messages that
    reach the client only as responses, so the hop facing the agent is the one that holds the whole
    conversation (with no proxies it is simply client <-> agent). MCP-over-ACP events are left out (they
    are not ACP frames), and so are the other hops: both are counted in the notes. `started_at` is the wall
    clock of ts 0, which the trace does not record.
    """
    events = list(_lines(data))
    if not events:
        raise FormatError("no events in the trace")
    for n, e in events:
        _check_event(n, e)
    names = {str(e["from"]) for _, e in events} | {str(e["to"]) for _, e in events}
    far = max(names, key=lambda x: (_position(x), x))
    near = max((x for x in names if x != far), key=lambda x: (_position(x), x), default=None)
    cap = Capture("conductor-trace")
    skipped_mcp = skipped_hops = 0
    for _, e in events:
        ends = {str(e["from"]), str(e["to"])}
        if ends != {far, near}:
            skipped_hops += 1
            continue
        if e.get("protocol") == "mcp":
            skipped_mcp += 1
            continue
        direction = C2A if str(e["to"]) == far else A2C
        raw = dumps(_rebuild(e))
        cap.frames.append(Captured(direction, started_at + float(e["ts"]), raw, mono=float(e["ts"]), rebuilt=True))
    if skipped_hops:
        cap.notes.append(
            f"{counted(skipped_hops, 'event')} on other hops than {near} <-> {far} {'was' if skipped_hops == 1 else 'were'} left out"
        )
    if skipped_mcp:
        cap.notes.append(f"{skipped_mcp} MCP-over-ACP events were left out")
    if not cap.frames:
        raise FormatError("no ACP messages in the trace")
    return cap


def _check_event(n: int, e: dict[str, Any]) -> None:
    kind = e.get("type")
    if kind not in ("request", "response", "notification"):
        raise FormatError(f"type must be request, response or notification, not {kind!r}", n)
    if not _number(e.get("ts")):
        raise FormatError("ts must be a number (seconds since the trace began)", n)
    if not isinstance(e.get("from"), str) or not isinstance(e.get("to"), str):
        raise FormatError("from and to must be component names", n)
    if kind != "response" and not isinstance(e.get("method"), str):
        raise FormatError(f"a {kind} needs a method", n)
    if kind != "notification" and "id" not in e:
        raise FormatError(f"a {kind} needs an id", n)
    if kind == "response" and "payload" not in e:
        raise FormatError("a response needs a payload", n)


def _rebuild(e: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC message a trace event stands for (params null means none were sent)."""
    kind = e["type"]
    msg: dict[str, Any] = {"jsonrpc": "2.0"}
    if kind != "notification":
        msg["id"] = e["id"]
    if kind == "response":
        msg["error" if e.get("is_error") else "result"] = e["payload"]
        return msg
    msg["method"] = e["method"]
    if e.get("params") is not None:
        msg["params"] = e["params"]
    return msg


# -- the declared shape every imported capture must have, whatever its format -----------------------------
def _time_ok(value: Any, low: float, high: float) -> bool:
    return _number(value) and value == value and low <= value <= high


def validate(cap: Capture) -> None:
    """Check every field an import writes against its declared shape (see MAX_FILE and the rest); a
    FormatError names the first that is not, before anything is written."""
    for name in ("started_at", "ended_at"):
        value = getattr(cap, name)
        if value is not None and not _time_ok(value, 0, TS_MAX):
            raise FormatError(f"{name} must be unix seconds between 1970 and 2286, not {short(value)}")
    if cap.argv is not None and not (isinstance(cap.argv, list) and all(isinstance(a, str) for a in cap.argv)):
        raise FormatError("the command line must be a list of strings")
    for i, f in enumerate(cap.frames, 1):
        where = f"frame {i}"
        if f.direction not in (C2A, A2C):
            raise FormatError(f"{where}: direction must be {C2A!r} or {A2C!r}, not {short(f.direction)}")
        if not _time_ok(f.ts, 0, TS_MAX):
            raise FormatError(f"{where}: its time must be unix seconds between 1970 and 2286, not {short(f.ts)}")
        if f.mono is not None and not _time_ok(f.mono, -MONO_MAX, MONO_MAX):
            raise FormatError(f"{where}: its time since the start is out of range ({short(f.mono)})")
        if not isinstance(f.raw, bytes):
            raise FormatError(f"{where}: its bytes must be a blob or a string, not {type(f.raw).__name__}")
        if len(f.raw) > MAX_FRAME:
            raise FormatError(
                f"{where}: {counted(len(f.raw), 'byte')} is over the import limit of {MAX_FRAME} per frame"
            )
        if f.raw[:1] in (b"{", b"[") and _too_deep(f.raw):
            raise FormatError(f"{where}: JSON nested deeper than 1024 levels")


def _too_deep(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return "depth limit" in str(exc).lower() or "recursion" in str(exc).lower()
    return False


def short(value: Any) -> str:
    """A value for an error message: its repr, cut short (it came from the file)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
