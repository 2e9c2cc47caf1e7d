"""Turn one frame's bytes into index fields: parse status, kind, method, id, session, update variant, entities.

Pure and total: any bytes give a result, never an exception. The parsed message is returned beside the
index so the correlator and the connection tracker need not parse again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from . import vocab
from .framing import BIG_FRAME  # frames this long are indexed from a copy without their long strings
from .jsonrpc import loads, may_hold_wide_int, store_id

# The vocabulary's sets under the names their importers have always used.
RESULT_SESSION_METHODS = vocab.SESSION_IN_RESULT
SESSION_ORIGIN_METHODS = vocab.SESSION_ORIGINS

# session/update entity-id fields, stored in frames.details under the same names.
ENTITY_FIELDS = frozenset(
    ("messageId", "toolCallId", "terminalId", "planId", "compactionId", "senderSessionId", "recipientSessionId")
)
# Where subagent_update may name its child session: 2.4.0's schemas settle on sessionId; recordings made
# against earlier drafts used the others.
_CHILD_SESSION_FIELDS = ("childSessionId", "sessionId", "subagentSessionId")


def _detail(key: str) -> property:
    def get(self: MessageIndex) -> Any:
        return self.details.get(key) if self.details else None

    def set_(self: MessageIndex, value: Any) -> None:
        if value is None:
            if self.details:
                self.details.pop(key, None)
        elif self.details is None:
            self.details = {key: value}
        else:
            self.details[key] = value

    return property(get, set_)


class MessageIndex:
    """Index columns of one JSON-RPC message (a frame holds one, a batch several).

    The sparse fields (entity ids, a response's link to its request, error code) live in one `details`
    dict, stored as JSON: binding a dozen mostly-NULL columns per frame cost the recorder more than
    everything else together.
    """

    __slots__ = ("kind", "method", "rpc_id", "has_id", "session_id", "update_kind", "details", "message")

    def __init__(
        self, kind: str, method: str | None = None, rpc_id: Any = None, has_id: bool = False, message: Any = None
    ) -> None:
        self.kind = kind  # request | notification | response | error | invalid
        self.method = method  # for a response: its request's, once correlated
        self.rpc_id = rpc_id  # as stored: jsonrpc.store_id of the JSON id
        self.has_id = has_id
        self.session_id: str | None = None
        self.update_kind: str | None = None
        self.details: dict[str, Any] | None = None
        self.message = message  # the parsed message

    message_id = _detail("messageId")
    tool_call_id = _detail("toolCallId")
    terminal_id = _detail("terminalId")
    plan_id = _detail("planId")
    compaction_id = _detail("compactionId")
    sender_session_id = _detail("senderSessionId")
    recipient_session_id = _detail("recipientSessionId")
    child_session_id = _detail("childSessionId")
    request_seq = _detail("requestSeq")
    latency_ms = _detail("latencyMs")
    error_code = _detail("errorCode")

    def __repr__(self) -> str:
        return f"MessageIndex({self.kind!r}, {self.method!r}, {self.rpc_id!r}, session={self.session_id!r}, {self.details})"


@dataclass(slots=True)
class FrameIndex:
    """Everything the classifier derives from one frame's bytes."""

    parse: str  # ok | blank | cr | invalid_utf8 | invalid_json | not_jsonrpc
    kind: str  # request | notification | response | error | batch | invalid
    messages: list[MessageIndex] = field(default_factory=list)

    @property
    def single(self) -> MessageIndex | None:
        """The message of a non-batch frame."""
        return self.messages[0] if self.kind != "batch" and self.messages else None


def classify_message(msg: Any) -> MessageIndex:
    """Index one decoded JSON-RPC message."""
    if type(msg) is not dict:
        return MessageIndex("invalid", message=msg)
    method = msg.get("method")
    has_id = "id" in msg
    rpc_id = msg["id"] if has_id else None
    if rpc_id is not None:
        rpc_id = store_id(rpc_id)  # exact: wide ints and booleans as marked JSON text; objects, arrays: None
    if type(method) is str:
        idx = MessageIndex("request" if has_id else "notification", method, rpc_id, has_id, msg)
        params = msg.get("params")
        if type(params) is dict:
            sid = params.get("sessionId")
            idx.session_id = sid if type(sid) is str else None
            if method == vocab.UPDATE:
                _index_update(idx, params.get("update"))
        return idx
    if has_id and "error" in msg:
        err = msg.get("error")
        code = err.get("code") if isinstance(err, dict) else None
        idx = MessageIndex("error", None, rpc_id, True, message=msg)
        if isinstance(code, int) and not isinstance(code, bool) and -(2**63) <= code < 2**63:
            idx.details = {"errorCode": code}
        return idx
    if has_id and "result" in msg:
        return MessageIndex("response", None, rpc_id, True, message=msg)
    return MessageIndex("invalid", None, rpc_id, has_id, message=msg)


def _index_update(idx: MessageIndex, update: Any) -> None:
    if not isinstance(update, dict):
        return
    kind = update.get("sessionUpdate")
    idx.update_kind = kind if type(kind) is str else None
    # Hot path: most updates carry one id; intersect in C rather than probing every field.
    details = {key: update[key] for key in ENTITY_FIELDS.intersection(update) if type(update[key]) is str}
    if kind == vocab.PLAN_UPDATE and "planId" not in details:
        plan = update.get("plan")
        if isinstance(plan, dict) and isinstance(plan.get("planId"), str):
            details["planId"] = plan["planId"]
    if kind == vocab.SUBAGENT_UPDATE:
        for key in _CHILD_SESSION_FIELDS:
            if isinstance(update.get(key), str) and update[key] != idx.session_id:
                details["childSessionId"] = update[key]
                break
    if details:
        idx.details = details


LONG_STRING = 4096


def shrink_long_strings(raw: bytes | bytearray, limit: int = LONG_STRING) -> bytes | None:
    """The frame with every JSON string longer than `limit` bytes emptied, or None if its quotes do not
    pair up. A big frame is big because of a file or an image in one string; parsing it whole would hold
    it twice more (orjson builds the string through a buffer), and the index needs none of it."""
    pieces = []
    pos = 0  # start of the next piece to keep
    budget = 100_000  # strings scanned; a frame of countless small strings is parsed whole instead
    i = raw.find(b'"')
    while i != -1:
        budget -= 1
        if budget < 0:
            return None
        j = i + 1
        while True:  # the closing quote: one not preceded by an odd run of backslashes
            j = raw.find(b'"', j)
            if j == -1:
                return None
            k = j
            while raw[k - 1] == 0x5C:  # backslash
                k -= 1
            if (j - k) % 2 == 0:
                break
            j += 1
        if j - i - 1 > limit:
            pieces.append(bytes(raw[pos : i + 1]))
            pos = j
        i = raw.find(b'"', j + 1)
    pieces.append(bytes(raw[pos:]))
    return b"".join(pieces)


def _valid_utf8(raw: bytes | bytearray) -> bool:
    """Checked in slices: decoding a big frame at once would build a str as big as the frame."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(raw)
    try:
        for i in range(0, len(view), BIG_FRAME):
            decoder.decode(view[i : i + BIG_FRAME])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def classify(raw: bytes) -> FrameIndex:
    """Classify one frame (bytes without the delimiter). Never raises."""
    body = raw
    parse = "ok"
    if raw[-1:] == b"\r":
        parse = "cr"  # flagged, but a CRLF line's JSON is still indexed
        body = raw[:-1]
    if len(body) >= BIG_FRAME:
        small = shrink_long_strings(body)
        if small is not None:
            if not _valid_utf8(body):
                return FrameIndex("invalid_utf8", "invalid")
            body = small
    try:
        msg = orjson.loads(body)
        if _float_id(msg) and may_hold_wide_int(body):  # orjson read an id beyond 64 bits as a float
            msg = loads(body)
    except orjson.JSONDecodeError:
        if not body.strip():
            return FrameIndex("blank", "invalid")
        try:
            msg = loads(body)
        except UnicodeDecodeError:
            return FrameIndex("invalid_utf8", "invalid")
        except (ValueError, RecursionError, TypeError, orjson.JSONEncodeError):
            return FrameIndex("invalid_json", "invalid")
    if isinstance(msg, list):
        if not msg:
            return FrameIndex("not_jsonrpc", "invalid")
        members = [classify_message(m) for m in msg]
        if parse == "ok" and any(m.kind == "invalid" or not _is_jsonrpc(m.message) for m in members):
            parse = "not_jsonrpc"
        return FrameIndex(parse, "batch", members)
    idx = classify_message(msg)
    if parse == "ok" and (idx.kind == "invalid" or not _is_jsonrpc(msg)):
        parse = "not_jsonrpc"
    return FrameIndex(parse, idx.kind, [idx])


def _float_id(msg: Any) -> bool:
    """Is an id a float? (The recorder's hot path re-parses exactly only then: the index needs exact ids,
    and the stored bytes are the frame's own.)"""
    if isinstance(msg, dict):
        return type(msg.get("id")) is float
    return isinstance(msg, list) and any(isinstance(m, dict) and type(m.get("id")) is float for m in msg)


def _is_jsonrpc(msg: Any) -> bool:
    return isinstance(msg, dict) and msg.get("jsonrpc") == "2.0"
