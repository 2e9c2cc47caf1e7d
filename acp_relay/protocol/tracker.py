"""Per-connection protocol state: frame order, request/response correlation, sessions, negotiation.

Sans-I/O: bytes and timestamps in, Frame records out. The recorder writes what this produces; tests drive
it directly. Correlation is per direction because editor and agent each number their requests from 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from . import vocab
from .classify import ENTITY_FIELDS, FrameIndex, MessageIndex, classify
from .framing import BIG_FRAME, LineFramer
from .jsonrpc import A2C, C2A, Correlator
from .redact import Policy, redact_frame

__all__ = ["A2C", "C2A", "Frame", "Pending", "QuickRow", "Tracker"]

# Requests that name in their params a session they bring back (the others name it in their result).
_ORIGIN_METHODS = vocab.SESSION_ORIGINS - vocab.SESSION_IN_RESULT


@dataclass(slots=True)
class Frame:
    seq: int
    direction: str
    ts: float
    mono: float
    raw: bytes
    unterminated: bool
    index: FrameIndex
    redacted: int = 0  # values redacted: the stored raw is a redacted copy of what was forwarded
    wire_length: int = 0  # when redacted: the forwarded line's length (the stored copy's differs)


# A notification indexed on the fast path (Tracker.feed_rows): parse is "ok", kind "notification", no id.
# (seq, direction, ts, mono, raw, method, session_id, update_kind, details, message)
QuickRow = tuple[int, str, float, float, bytes, str, "str | None", "str | None", "dict[str, str] | None", Any]

# session/update variants whose tracking goes beyond "session seen" (titles, child sessions, plan ids).
_SLOW_UPDATES = frozenset({vocab.SESSION_INFO_UPDATE, vocab.SUBAGENT_UPDATE, vocab.PLAN_UPDATE})


@dataclass(slots=True)
class Pending:
    seq: int
    mono: float
    method: str
    session_id: str | None
    params: Any


@dataclass(slots=True)
class SessionSeen:
    session_id: str
    first_seen: float
    last_seen: float
    origin: str = "seen"
    cwd: str | None = None
    title: str | None = None
    parent_session_id: str | None = None


@dataclass
class ConnectionInfo:
    protocol_version: int | None = None
    client_info: Any = None
    agent_info: Any = None


class Tracker:
    """Frames both directions of one connection and indexes every frame.

    Given a policy, a frame is redacted before it is indexed or tracked, and indexed from the copy that
    is stored: raw is the truth and every column (the method, ids, sessions, cwd, title, client info) is
    derived from it, so no column keeps what the stored bytes lost. The QuickRows of feed_rows are not
    redacted here: the recorder's row builder does it, and derives their columns from its copy."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy if policy is not None and policy.enabled else None
        self.seq = 0
        self.framers = {C2A: LineFramer(), A2C: LineFramer()}
        self.correlator: Correlator[Pending] = Correlator()
        self.sessions: dict[str, SessionSeen] = {}
        self.dirty_sessions: set[str] = set()
        # (seq, session_id): requests whose session became known only from their response (session/new).
        self.backfill: list[tuple[int, str]] = []
        self.info = ConnectionInfo()
        self.info_dirty = False

    # -- input ------------------------------------------------------------------------------------------
    def feed(self, direction: str, chunk: bytes, ts: float, mono: float) -> list[Frame]:
        """Bytes as read from one direction; returns the frames they completed, in order."""
        return [self._frame(direction, line, ts, mono, False) for line in self.framers[direction].feed(chunk)]

    def feed_rows(self, direction: str, chunk: bytes, ts: float, mono: float) -> list[Frame | QuickRow]:
        """feed() for the recorder's hot path: the same frames, but the common one (a well-formed
        notification of an already-seen session with nothing to correlate) comes back as a QuickRow tuple,
        indexed inline without the classifier's objects. Anything else goes through _frame(), so the index
        fields are those feed() gives (tests/test_tracker.py checks both paths agree)."""
        out: list[Frame | QuickRow] = []
        loads, entity_fields, slow_updates = orjson.loads, ENTITY_FIELDS, _SLOW_UPDATES
        sessions, dirty = self.sessions, self.dirty_sessions
        for raw in self.framers[direction].feed(chunk):
            if len(raw) < BIG_FRAME and raw[-1:] != b"\r":
                try:
                    msg = loads(raw)
                except ValueError:  # orjson.JSONDecodeError: the classifier tells what is wrong with it
                    msg = None
                if type(msg) is dict and "id" not in msg and msg.get("jsonrpc") == "2.0":
                    method = msg.get("method")
                    params = msg.get("params")
                    if type(method) is str and type(params) is dict and method != vocab.CANCEL_REQUEST:
                        sid = params.get("sessionId")
                        session = sessions.get(sid) if type(sid) is str else None
                        if session is not None or sid is None or type(sid) is not str:
                            kind = details = None
                            update = params.get("update") if method == vocab.UPDATE else None
                            if type(update) is dict:
                                kind = update.get("sessionUpdate")
                                if type(kind) is not str:
                                    kind = None
                                keys = entity_fields.intersection(update)
                                if keys:
                                    details = {k: update[k] for k in keys if type(update[k]) is str} or None
                            if kind not in slow_updates:
                                self.seq += 1
                                if session is not None:
                                    session.last_seen = ts
                                    dirty.add(session.session_id)  # sid itself
                                    out.append((self.seq, direction, ts, mono, raw, method, sid, kind, details, msg))
                                else:
                                    out.append((self.seq, direction, ts, mono, raw, method, None, kind, details, msg))
                                continue
            out.append(self._frame(direction, raw, ts, mono, False))
        return out

    def eof(self, direction: str, ts: float, mono: float) -> list[Frame]:
        """The direction ended; a last line without \\n becomes an unterminated frame."""
        line = self.framers[direction].finish()
        return [] if line is None else [self._frame(direction, line, ts, mono, True)]

    def index_line(self, direction: str, line: bytes, ts: float, mono: float, unterminated: bool = False) -> Frame:
        """Index one already-split line (the recorder's hot path frames chunks itself)."""
        return self._frame(direction, line, ts, mono, unterminated)

    def unanswered(self) -> dict[str, list[dict[str, Any]]]:
        """Requests still pending, by the direction they were sent in."""
        out: dict[str, list[dict[str, Any]]] = {C2A: [], A2C: []}
        for (direction, (_, rpc_id)), p in self.correlator.pending.items():
            out[direction].append({"id": rpc_id, "method": p.method, "seq": p.seq, "session_id": p.session_id})
        return {k: v for k, v in out.items() if v}

    # -- internals --------------------------------------------------------------------------------------
    def _frame(self, direction: str, raw: bytes, ts: float, mono: float, unterminated: bool) -> Frame:
        self.seq += 1
        index = classify(raw)
        redacted = wire_length = 0
        if self.policy is not None:
            stored, index, redacted = self._redacted(direction, raw, index, self.policy)
            if redacted:
                raw, wire_length = stored, len(raw)
        for msg in index.messages:
            try:
                self._track(direction, msg, self.seq, ts, mono)
            except Exception:
                pass
        return Frame(self.seq, direction, ts, mono, raw, unterminated, index, redacted, wire_length)

    def _redacted(self, direction: str, raw: bytes, index: FrameIndex, policy: Policy) -> tuple[bytes, FrameIndex, int]:
        """(bytes to store, their index, values redacted). A response is redacted by the method it answers
        (its request is still pending: it is tracked after this)."""
        ms = index.messages
        if not ms:  # not JSON-RPC (invalid UTF-8, a cut line, stray output): the text rules
            stored, n = redact_frame(raw, policy)
        else:
            methods = [m.method if m.method is not None else self._answered(direction, m) for m in ms]
            batch = index.kind == "batch"
            parsed = [m.message for m in ms] if batch else ms[0].message
            if not policy.might_apply(raw, tuple(methods), parsed):
                return raw, index, 0
            stored, n = redact_frame(raw, policy, methods if batch else methods[0], parsed)
        if not n:
            return raw, index, 0
        new = classify(stored)
        if new.kind == index.kind:
            new.parse = index.parse  # a CR or a bad byte is the wire's, whatever the copy's bytes say
        return stored, new, n

    def _answered(self, direction: str, m: MessageIndex) -> str | None:
        """The method a response or an error answers, while its request is pending."""
        if m.kind not in ("response", "error") or type(m.message) is not dict:
            return None
        p = self.correlator.pending.get(Correlator.answer_key(direction, m.message.get("id")))
        return None if p is None else p.method

    def _track(self, direction: str, m: MessageIndex, seq: int, ts: float, mono: float) -> None:
        kind = m.kind
        if kind == "request":
            params = m.message.get("params")
            keep = params if m.method in vocab.SESSION_IN_RESULT else None  # only these need params later
            self.correlator.request(
                direction, m.message.get("id"), Pending(seq, mono, m.method or "", m.session_id, keep)
            )
            if m.method == vocab.INITIALIZE and isinstance(params, dict):
                self.info.client_info = params.get("clientInfo", params.get("info"))
                self.info_dirty = True
            elif m.method in _ORIGIN_METHODS and m.session_id and isinstance(params, dict):
                s = self._see(m.session_id, ts)
                if s.origin == "seen":  # how it began here: a session made by session/new and loaded again stays new
                    s.origin = m.method
                if isinstance(params.get("cwd"), str):
                    s.cwd = params["cwd"]
        elif kind in ("response", "error"):
            p = self.correlator.answer(direction, m.message.get("id"))
            if p is not None:
                m.method = p.method
                m.request_seq = p.seq
                m.latency_ms = round((mono - p.mono) * 1000.0, 3)
                m.session_id = p.session_id
                if kind == "response":
                    self._on_result(m, p, ts)
        elif kind == "notification" and m.method == vocab.CANCEL_REQUEST:
            params = m.message.get("params")
            if isinstance(params, dict):
                p = self.correlator.cancelled(direction, params.get("requestId"))
                if p is not None:
                    m.session_id = p.session_id
        if m.session_id is not None:
            self._see(m.session_id, ts)
            if m.update_kind is not None:
                self._on_update(m, ts)

    def _on_result(self, m: MessageIndex, p: Pending, ts: float) -> None:
        result = m.message.get("result")
        if not isinstance(result, dict):
            return
        if p.method in vocab.SESSION_IN_RESULT:
            sid = result.get("sessionId")
            if isinstance(sid, str):
                m.session_id = sid
                if p.session_id is None:
                    self.backfill.append((p.seq, sid))
                s = self._see(sid, ts)
                s.origin = p.method
                if isinstance(p.params, dict):
                    if isinstance(p.params.get("cwd"), str):
                        s.cwd = p.params["cwd"]
                    if p.method == vocab.SESSION_FORK and isinstance(p.params.get("sessionId"), str):
                        s.parent_session_id = p.params["sessionId"]
        elif p.method == vocab.INITIALIZE:
            version = result.get("protocolVersion")
            if isinstance(version, int) and not isinstance(version, bool) and -(2**63) <= version < 2**63:
                self.info.protocol_version = version
            self.info.agent_info = result.get("agentInfo", result.get("info"))
            self.info_dirty = True
        elif p.method == vocab.PROMPT:
            mid = result.get("messageId", result.get("userMessageId"))
            if isinstance(mid, str):
                m.message_id = mid

    def _on_update(self, m: MessageIndex, ts: float) -> None:
        update = m.message["params"]["update"]
        if m.update_kind == vocab.SESSION_INFO_UPDATE and "title" in update:
            title = update["title"]
            self.sessions[m.session_id].title = title if isinstance(title, str) else None  # type: ignore[index]
        elif m.child_session_id:
            child = self._see(m.child_session_id, ts)
            child.origin = "subagent"
            child.parent_session_id = m.session_id

    def _see(self, session_id: str, ts: float) -> SessionSeen:
        s = self.sessions.get(session_id)
        if s is None:
            s = self.sessions[session_id] = SessionSeen(session_id, ts, ts)
        else:
            s.last_seen = ts
        self.dirty_sessions.add(session_id)
        return s
