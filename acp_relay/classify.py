"""Turn one frame's bytes into index fields: parse status, kind, method, id, session, update variant, entities.

Pure and total: any bytes give a result, never an exception. The parsed message is returned beside the
index so the correlator and the connection tracker need not parse again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import orjson

# Methods whose *result* names the session (the new one, for fork and nes/start).
RESULT_SESSION_METHODS = frozenset({"session/new", "session/fork", "nes/start"})

# session/update entity-id fields -> MessageIndex attribute.
_ENTITY_FIELDS = (
    ("messageId", "message_id"),
    ("toolCallId", "tool_call_id"),
    ("terminalId", "terminal_id"),
    ("planId", "plan_id"),
    ("compactionId", "compaction_id"),
    ("senderSessionId", "sender_session_id"),
    ("recipientSessionId", "recipient_session_id"),
)
# Where subagent_update may name its child session (the draft does not fix the field yet).
_CHILD_SESSION_FIELDS = ("childSessionId", "sessionId", "subagentSessionId")


@dataclass(slots=True)
class MessageIndex:
    """Index columns of one JSON-RPC message (a frame holds one, a batch several)."""

    kind: str  # request | notification | response | error | invalid
    method: str | None = None
    rpc_id: Any = None  # str | int | float | None, as in the JSON
    has_id: bool = False
    session_id: str | None = None
    update_kind: str | None = None
    message_id: str | None = None
    tool_call_id: str | None = None
    terminal_id: str | None = None
    plan_id: str | None = None
    compaction_id: str | None = None
    sender_session_id: str | None = None
    recipient_session_id: str | None = None
    child_session_id: str | None = None
    error_code: int | None = None
    # Filled by the correlator for responses.
    request_seq: int | None = None
    latency_ms: float | None = None
    message: Any = None  # the parsed message


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


def id_key(value: Any) -> tuple[str, Any]:
    """A dict key for a JSON-RPC id that keeps types apart (1, 1.0, True and "1" are all different)."""
    return (type(value).__name__, value)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def loads(raw: bytes) -> Any:
    """Parse JSON like orjson, falling back to json for what orjson refuses but JSON allows (huge ints)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        text = raw.decode("utf-8")  # UnicodeDecodeError propagates: invalid UTF-8 is never JSON
        return json.loads(text)


def classify_message(msg: Any) -> MessageIndex:
    """Index one decoded JSON-RPC message."""
    if not isinstance(msg, dict):
        return MessageIndex("invalid", message=msg)
    method = msg.get("method")
    has_id = "id" in msg
    rpc_id = msg.get("id")
    if rpc_id is not None and not isinstance(rpc_id, (str, int, float)):
        rpc_id = None  # objects and arrays are not ids; the raw bytes still hold them
    elif isinstance(rpc_id, int) and not -(2**63) <= rpc_id < 2**63:
        rpc_id = float(rpc_id)  # SQLite integers are 64-bit; the raw bytes keep the exact digits
    if isinstance(method, str):
        idx = MessageIndex("request" if has_id else "notification", method, rpc_id, has_id, message=msg)
        params = msg.get("params")
        if isinstance(params, dict):
            idx.session_id = _str(params.get("sessionId"))
            if method == "session/update":
                _index_update(idx, params.get("update"))
        return idx
    if has_id and "error" in msg:
        err = msg.get("error")
        code = err.get("code") if isinstance(err, dict) else None
        idx = MessageIndex("error", None, rpc_id, True, message=msg)
        idx.error_code = code if isinstance(code, int) and not isinstance(code, bool) and -(2**63) <= code < 2**63 else None
        return idx
    if has_id and "result" in msg:
        return MessageIndex("response", None, rpc_id, True, message=msg)
    return MessageIndex("invalid", None, rpc_id, has_id, message=msg)


def _index_update(idx: MessageIndex, update: Any) -> None:
    if not isinstance(update, dict):
        return
    idx.update_kind = _str(update.get("sessionUpdate"))
    for key, attr in _ENTITY_FIELDS:
        value = update.get(key)
        if isinstance(value, str):
            setattr(idx, attr, value)
    plan = update.get("plan")
    if idx.plan_id is None and isinstance(plan, dict):
        idx.plan_id = _str(plan.get("planId"))
    if idx.update_kind == "subagent_update":
        for key in _CHILD_SESSION_FIELDS:
            if isinstance(update.get(key), str):
                idx.child_session_id = update[key]
                break


def classify(raw: bytes) -> FrameIndex:
    """Classify one frame (bytes without the delimiter). Never raises."""
    body = raw
    parse = "ok"
    if raw.endswith(b"\r"):
        parse = "cr"  # flagged, but a CRLF line's JSON is still indexed
        body = raw[:-1]
    if not body.strip():
        return FrameIndex("blank", "invalid")
    try:
        msg = loads(body)
    except UnicodeDecodeError:
        return FrameIndex("invalid_utf8", "invalid")
    except (ValueError, RecursionError):
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


def _is_jsonrpc(msg: Any) -> bool:
    return isinstance(msg, dict) and msg.get("jsonrpc") == "2.0"
