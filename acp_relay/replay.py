"""`acp-relay replay`: serve a recorded session to a live client, as a stand-in agent.

The editor starts `acp-relay replay SESSION` in place of an agent. It reads the database only. Three parts:

- **The recording** (`build_recording`, `load_recording`): one session's recorded messages, folded by the
  materializer (history replay) and cut into turns of ready-to-send steps (turn replay). Pure, apart from
  `load_recording`, which reads the frames through `show.py`'s read-only queries.
- **The core** (`ReplayCore`): sans-I/O. Lines from the client go in with the current time; frames to write
  come out, plus the time it next wants to be woken. It decides everything: version negotiation, answers,
  which recorded frame goes next and when, waiting for the client's answers to agent requests, cancel.
- **The shell** (`serve`): a thread reads stdin (blocking, as the relay's pumps do) into a queue; the main
  thread feeds the core and writes its frames to stdout. Logs go to stderr; stdout carries frames only.

Recorded frames are re-sent as recorded, byte for byte, except the values replay must change: the
`sessionId` (the client's), request ids (fresh ones for agent requests; the client's own for responses) and,
on v1, terminal ids the client handed out for `terminal/create`. Those are spliced into the exact bytes
(`find_span` locates a value without re-serializing the frame).
"""

from __future__ import annotations

import bisect
import json
import math
import os
import queue
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

import orjson

from .framing import LineFramer
from .materialize import Event, Materializer, SessionState, Turn, replay_updates

__all__ = [
    "Recording", "RecordedTurn", "ReplayCore", "ReplayError", "build_recording", "load_recording",
    "parse_speed", "run_replay", "serve", "find_span", "splice",
]

C2A, A2C = "c2a", "a2c"
# errors
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
NOT_FOUND = -32002  # ACP "Resource not found": the recording has no such turn / session


class ReplayError(Exception):
    """A problem the user can fix (no such session, bad --speed): one line on stderr, exit status 1."""


# ---- JSON bytes: find a value's span, splice new bytes in ---------------------------------------------------
_SCALAR = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
_WS = re.compile(rb"[ \t\r\n]*")
_STRUCT = re.compile(rb'["\[\]{}]')


def _ws(b: bytes, i: int) -> int:
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
    c = b[i:i + 1]
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


def _children(b: bytes, i: int) -> Iterable[tuple[Any, int, int]]:
    """(key or index, value start, value end) of the object or array at i."""
    is_obj = b[i:i + 1] == b"{"
    close = b"}" if is_obj else b"]"
    i = _ws(b, i + 1)
    if b[i:i + 1] == close:
        return
    n = 0
    while True:
        if is_obj:
            if b[i:i + 1] != b'"':
                raise ValueError("object key expected")
            end = _string_end(b, i)
            key: Any = _key(b[i:end])
            i = _ws(b, end)
            if b[i:i + 1] != b":":
                raise ValueError("':' expected")
            i = _ws(b, i + 1)
        else:
            key, n = n, n + 1
        end = _value_end(b, i)
        yield key, i, end
        i = _ws(b, end)
        c = b[i:i + 1]
        if c == b",":
            i = _ws(b, i + 1)
        elif c == close:
            return
        else:
            raise ValueError("',' or end expected")


def find_span(b: bytes, path: tuple[Any, ...]) -> tuple[int, int] | None:
    """Byte span of the value at `path` (keys and array indexes) in the JSON text b, or None.

    A repeated key resolves to its last occurrence, as JSON parsers read it.
    """
    start = _ws(b, 0)
    end = _value_end(b, start)
    for step in path:
        found = None
        if b[start:start + 1] in (b"{", b"[") and (isinstance(step, str) == (b[start:start + 1] == b"{")):
            for key, s, e in _children(b, start):
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
        if b[i:i + 1] not in (b"{", b"["):
            return
        is_obj = b[i:i + 1] == b"{"
        for key, s, e in _children(b, i):
            if is_obj and key == name:
                out.append((s, e))
            walk(s)

    walk(_ws(b, 0))
    return out


def splice(b: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    """Replace non-overlapping spans."""
    out, last = [], 0
    for s, e, new in sorted(edits):
        out += [b[last:s], new]
        last = e
    out.append(b[last:])
    return b"".join(out)


def dumps(value: Any) -> bytes:
    """Compact JSON; falls back to json for what orjson refuses (integers beyond 64 bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw.decode("utf-8"))


def _idkey(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, repr(value))


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else None


# ---- the recording ------------------------------------------------------------------------------------------
@dataclass
class Msg:
    """One recorded JSON-RPC message (a batch frame gives several, with the same seq)."""

    seq: int
    direction: str
    ts: float
    mono: float
    raw: bytes  # the message's exact bytes (a batch member's span)
    message: dict
    batch: bool = False
    request: "Msg | None" = None  # for a response: the request it answers
    answer: "Msg | None" = None  # for a request: its response
    session: str | None = None

    @property
    def method(self) -> str | None:
        m = self.message.get("method")
        return m if isinstance(m, str) else None

    @property
    def is_request(self) -> bool:
        return self.method is not None and "id" in self.message

    @property
    def is_notification(self) -> bool:
        return self.method is not None and "id" not in self.message

    @property
    def is_response(self) -> bool:
        return self.method is None and ("result" in self.message or "error" in self.message)


@dataclass
class Member:
    """One message of a step, as it will be sent (before the per-connection rewrites)."""

    raw: bytes
    message: dict
    role: str  # notify | request | prompt_response | cancel_request
    recorded_id: Any = None  # requests: the recorded id (for $/cancel_request mapping)
    answer: dict | None = None  # requests: the recorded client's answer
    ends_turn: bool = False
    accepts: bool = False  # v2: the successful prompt response (acceptance)
    answer_mono: float | None = None  # requests: when the recorded client answered


@dataclass
class Step:
    """One recorded frame to send (one message, or a batch), `gap` seconds after the previous one."""

    seq: int
    mono: float
    members: list[Member]
    batch: bool = False
    gap: float = 0.0

    @property
    def requests(self) -> list[Member]:
        return [m for m in self.members if m.role == "request"]


@dataclass
class RecordedTurn:
    index: int  # 1-based
    prompt: list
    steps: list[Step]
    cancel_step: int | None = None  # the recorded client cancelled here: pause until the client does
    ended: bool = False  # the recording holds the turn's end
    stop_reason: str | None = None
    user_message_id: str | None = None


@dataclass
class Recording:
    session_id: str
    protocol_version: int
    state: SessionState
    turns: list[RecordedTurn]
    setup: RecordedTurn  # agent notifications between session creation and the first prompt
    init_result: dict | None = None
    origin_result: dict | None = None  # the recorded session/new (load, resume) result
    cwd: str | None = None
    title: str | None = None
    updated_at: str | None = None
    connection_id: int | None = None
    raw_updates: dict[int, tuple[Any, bytes]] = field(default_factory=dict)  # id(update) -> (update, message bytes)
    skipped: int = 0  # recorded frames that are not JSON
    notes: tuple[str, ...] = ()  # things to tell the user (the session is in other connections too)

    def summary(self) -> str:
        n = len(self.turns)
        return (f"session {self.session_id}" + (f" (connection {self.connection_id})" if self.connection_id else "")
                + f": protocol v{self.protocol_version}, {n} turn{'s' if n != 1 else ''}, "
                f"{len(self.state.entries)} timeline entries")


def _parse_frame(seq: int, direction: str, ts: float, mono: float, raw: bytes) -> list[Msg]:
    body = raw[:-1] if raw.endswith(b"\r") else raw
    try:
        value = loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return []
    if isinstance(value, dict):
        return [Msg(seq, direction, ts, mono, body, value)]
    if isinstance(value, list):
        out = []
        try:
            spans = {k: (s, e) for k, s, e in _children(body, _ws(body, 0))}
        except (ValueError, RecursionError):
            spans = {}
        for i, member in enumerate(value):
            if isinstance(member, dict):
                s, e = spans.get(i, (0, 0))
                out.append(Msg(seq, direction, ts, mono, body[s:e] if e else dumps(member), member, batch=True))
        return out
    return []


RESULT_SESSION = frozenset({"session/new", "session/fork", "nes/start"})
ORIGINS = ("session/new", "session/load", "session/resume", "session/fork")


def _correlate(msgs: list[Msg]) -> None:
    """Link responses to requests per direction, and give every message its session."""
    pending: dict[tuple[str, tuple[str, Any]], Msg] = {}
    for m in msgs:
        if m.is_request:
            pending[(m.direction, _idkey(m.message.get("id")))] = m
        if m.method is not None:
            sid = _get(m.message.get("params"), "sessionId")
            m.session = sid if isinstance(sid, str) else None
            if m.method == "$/cancel_request":
                req = pending.get((m.direction, _idkey(_get(m.message.get("params"), "requestId"))))
                m.session = req.session if req else None
        elif m.is_response:
            other = C2A if m.direction == A2C else A2C
            req = pending.pop((other, _idkey(m.message.get("id"))), None)
            if req is not None:
                m.request, req.answer = req, m
                m.session = req.session
                sid = _get(m.message.get("result"), "sessionId")
                if req.method in RESULT_SESSION and isinstance(sid, str):
                    m.session = sid


def build_recording(rows: Iterable[tuple[int, str, float, float, bytes]], session_id: str, *,
                    children: Iterable[str] = (), protocol_version: int | None = None, cwd: str | None = None,
                    title: str | None = None, connection_id: int | None = None) -> Recording:
    """Fold recorded frames (seq, direction, ts, mono, raw), in order, into what replay serves.

    `rows` may hold other sessions' frames too; only `session_id` (and, for turn replay, the frames of
    its `children`, e.g. subagents) is used.
    """
    msgs: list[Msg] = []
    skipped = 0
    for seq, direction, ts, mono, raw in rows:
        parsed = _parse_frame(seq, direction, ts, mono, bytes(raw))
        skipped += not parsed
        msgs += parsed
    _correlate(msgs)
    family = {session_id, *children}

    init_req = next((m for m in msgs if m.direction == C2A and m.method == "initialize" and m.is_request), None)
    init_result = _get(init_req.answer.message, "result") if init_req and init_req.answer else None
    version = _get(init_result, "protocolVersion")
    if not (isinstance(version, int) and not isinstance(version, bool)):
        version = protocol_version or 1
    v2 = version >= 2

    # Fold the session. A session/load (or resume with replay) of a session already seen in this recording
    # replays what we hold: its updates are left out, or the history would be doubled.
    mat = Materializer(version)
    raw_updates: dict[int, tuple[Any, bytes]] = {}
    windows: list[tuple[int, float]] = []  # (request seq, response seq): history replays by the agent
    dup_until: float | None = None
    for m in msgs:
        if m.session != session_id:
            continue
        if m.direction == C2A and m.is_request and (
                m.method == "session/load" or (m.method == "session/resume"
                                               and _get(m.message.get("params"), "replayFrom") is not None)):
            end = m.answer.seq if m.answer else math.inf
            windows.append((m.seq, end))
            dup_until = end if mat.state.entries else None
        if dup_until is not None and m.direction == A2C and m.method == "session/update":
            if m.seq < dup_until:
                continue
            dup_until = None
        if m.method == "session/update":
            update = _get(m.message.get("params"), "update")
            if update is not None:
                raw_updates[id(update)] = (update, m.raw)
        mat.feed(Event(m.seq, m.ts, m.direction, m.message,
                       request=m.request.message if m.request else None, raw=m.raw))
    state = mat.state

    def in_window(seq: int) -> bool:
        return any(s < seq < e for s, e in windows)

    prompts = {m.seq: m for m in msgs if m.direction == C2A and m.session == session_id
               and m.method == "session/prompt" and m.is_request}
    starts = [t.start_seq for t in state.turns] + [math.inf]
    seqs = [m.seq for m in msgs]
    turns = []
    for i, turn in enumerate(state.turns):
        prompt_msg = prompts.get(turn.start_seq)
        lo, hi = bisect.bisect_right(seqs, turn.start_seq), bisect.bisect_left(seqs, starts[i + 1])
        window = msgs[lo:hi]
        turns.append(_plan_turn(turn, prompt_msg, window, family, in_window, v2, state))

    origin = next((m for m in msgs if m.direction == A2C and m.is_response and m.session == session_id
                   and m.request is not None and m.request.method in ORIGINS), None)
    origin_result = _get(origin.message, "result") if origin else None
    first_prompt = starts[0]
    setup_from = origin.seq if origin else -1
    setup_msgs = [m for m in msgs if setup_from < m.seq < first_prompt and m.direction == A2C
                  and m.is_notification and m.session in family and not in_window(m.seq)]
    setup = RecordedTurn(0, [], _group(setup_msgs, lambda m: "notify"), ended=True)
    _gaps(setup.steps, origin.mono if origin else (setup_msgs[0].mono if setup_msgs else 0.0), None)

    if cwd is None:
        for m in msgs:
            c = _get(m.message.get("params"), "cwd")
            if m.direction == C2A and m.session == session_id and isinstance(c, str):
                cwd = c
                break
        if cwd is None and origin and origin.request:
            c = _get(origin.request.message.get("params"), "cwd")
            cwd = c if isinstance(c, str) else None
    info_title = state.info.get("title")
    updated = state.info.get("updatedAt")
    last_ts = max((m.ts for m in msgs if m.session == session_id), default=None)
    if not isinstance(updated, str) and last_ts is not None:
        updated = datetime.fromtimestamp(last_ts, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    return Recording(
        session_id=session_id, protocol_version=version, state=state, turns=turns, setup=setup,
        init_result=init_result if isinstance(init_result, dict) else None,
        origin_result=origin_result if isinstance(origin_result, dict) else None,
        cwd=cwd, title=info_title if isinstance(info_title, str) else title,
        updated_at=updated if isinstance(updated, str) else None, connection_id=connection_id,
        raw_updates=raw_updates, skipped=skipped,
    )


def _group(msgs: list[Msg], role_of: Callable[[Msg], str | None]) -> list[Step]:
    """Messages to steps: one per recorded frame (a batch stays one frame)."""
    steps: list[Step] = []
    for m in msgs:
        role = role_of(m)
        if role is None:
            continue
        member = Member(m.raw, m.message, role)
        if role == "request":
            member.recorded_id = m.message.get("id")
            member.answer = m.answer.message if m.answer else None
            member.answer_mono = m.answer.mono if m.answer else None
        if steps and steps[-1].seq == m.seq and m.batch:
            steps[-1].members.append(member)
        else:
            steps.append(Step(m.seq, m.mono, [member], batch=m.batch))
    return steps


def _gaps(steps: list[Step], anchor: float, cancel: tuple[int, float] | None) -> None:
    """Each step's delay after the previous one finished (sent, or answered, or the cancel arrived)."""
    for i, step in enumerate(steps):
        if cancel is not None and i == cancel[0]:
            anchor = cancel[1]
        step.gap = max(0.0, step.mono - anchor)
        answers = [m.answer_mono for m in step.requests]
        anchor = max([a for a in answers if a is not None], default=step.mono) if answers else step.mono


def _plan_turn(turn: Turn, prompt_msg: Msg | None, window: list[Msg], family: set[str],
               in_window: Callable[[int], bool], v2: bool, state: SessionState) -> RecordedTurn:
    end = turn.end_seq if turn.end_seq is not None else math.inf
    agent_requests = {_idkey(m.message.get("id")) for m in window
                      if m.direction == A2C and m.is_request and m.session in family and m.seq <= end}

    def role(m: Msg) -> str | None:
        if m.direction != A2C or in_window(m.seq):
            return None
        if m.is_response:
            return "prompt_response" if prompt_msg is not None and m.request is prompt_msg else None
        if m.session not in family:
            return None
        if m.method == "$/cancel_request":
            rid = _idkey(_get(m.message.get("params"), "requestId"))
            return "cancel_request" if rid in agent_requests else None
        if m.is_request:
            return "request" if m.seq <= end else None
        return "notify" if m.is_notification else None

    steps = _group(window, role)
    uid = turn.user_message_id or next(
        (u.split(":", 1)[1] for u in turn.entry_ids if u.startswith("user_message:")), None)
    for step in steps:
        for member in step.members:
            if step.seq == turn.end_seq and (member.role == "prompt_response" or member.role == "notify"):
                member.ends_turn = member.role == "prompt_response" or _is_idle(member.message)
            if member.role == "prompt_response" and "result" in member.message:
                member.ends_turn = member.ends_turn or not v2
                member.accepts = v2
    if v2:
        uid = _v2_acceptance(steps, turn, uid)
    cancel = next((m for m in window if m.direction == C2A and m.method == "session/cancel"
                   and m.session in family and m.seq <= end), None)
    cancel_step = None
    if cancel is not None:
        cancel_step = next((i for i, s in enumerate(steps) if s.seq > cancel.seq), len(steps))
    _gaps(steps, prompt_msg.mono if prompt_msg else (steps[0].mono if steps else 0.0),
          (cancel_step, cancel.mono) if cancel is not None else None)
    return RecordedTurn(turn.index, list(turn.prompt), steps, cancel_step, turn.ended, turn.stop_reason, uid)


def _is_idle(message: dict) -> bool:
    update = _get(message.get("params"), "update")
    return _get(update, "sessionUpdate") == "state_update" and _get(update, "state") == "idle"


def _v2_acceptance(steps: list[Step], turn: Turn, uid: str | None) -> str | None:
    """The seed's acceptance response carries the user message's id: add it when the recording lacks it."""
    for step in steps:
        for member in step.members:
            if not member.accepts:
                continue
            result = member.message.get("result")
            if isinstance(result, dict) and isinstance(result.get("messageId"), str):
                return result["messageId"]
            synthetic = uid is None
            uid = uid or f"msg-prompt-{turn.index}"
            fixed = {**member.message, "result": {**(result if isinstance(result, dict) else {}), "messageId": uid}}
            member.message, member.raw = fixed, dumps(fixed)
            if synthetic:  # the agent never reported the user message: report it as the seed requires
                sid = "\x00recorded"
                update = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
                    "sessionUpdate": "user_message", "messageId": uid, "content": list(turn.prompt)}}}
                steps.insert(steps.index(step) + 1, Step(step.seq, step.mono, [Member(dumps(update), update, "notify")]))
            return uid
    return uid


# ---- reading the database -----------------------------------------------------------------------------------
def load_recording(db_path: str | os.PathLike[str], session: str) -> Recording:
    """SESSION (an id, a unique prefix, or `last`) from the database, read-only."""
    from . import show

    try:
        conn = show.open_db(db_path)
    except show.ShowError as exc:
        raise ReplayError(str(exc)) from None
    try:
        try:
            view = show.resolve_view(conn, session)
        except show.ShowError as exc:
            raise ReplayError(str(exc)) from None
        cid, sid = view.connection_id, view.session_id
        assert sid is not None
        if session == "last":  # a subagent is started after its parent: `last` means the conversation
            for _ in range(16):
                row = conn.execute("SELECT parent_session_id FROM sessions WHERE connection_id = ? AND "
                                   "session_id = ? AND origin = 'subagent'", (cid, sid)).fetchone()
                if not row or not row[0]:
                    break
                sid = row[0]
        children, todo = [], [sid]
        while todo:  # subagents and their own children: their frames are part of the parent's turns
            parent = todo.pop()
            for (child,) in conn.execute("SELECT session_id FROM sessions WHERE connection_id = ? AND "
                                         "parent_session_id = ? AND session_id != ?", (cid, parent, sid)):
                if child not in children:
                    children.append(child)
                    todo.append(child)
        frames: dict[int, tuple[int, str, float, float, bytes]] = {}
        for s in [sid, *children]:
            v = show.View(cid, s, 0.0, view.protocol_version)
            for f in show.iter_frames(conn, v):
                frames[f.seq] = (f.seq, f.direction, f.ts, f.mono, bytes(f.raw))
        row = conn.execute("SELECT cwd, title FROM sessions WHERE connection_id = ? AND session_id = ?",
                           (cid, sid)).fetchone() or (None, None)
        rec = build_recording((frames[k] for k in sorted(frames)), sid, children=children,
                              protocol_version=view.protocol_version, cwd=row[0], title=row[1], connection_id=cid)
        rec.notes = tuple(view.notes)
        return rec
    finally:
        conn.close()


# ---- the core (sans-I/O) ------------------------------------------------------------------------------------
def parse_speed(text: str) -> float:
    """--speed to a time scale: seconds waited per recorded second (0 = no waiting)."""
    if text == "realtime":
        return 1.0
    if text == "fast":
        return 0.0
    try:
        factor = float(text)
    except ValueError:
        raise ReplayError(f"--speed takes realtime, fast or a number (2 = twice as fast), not {text!r}") from None
    if not factor > 0 or math.isinf(factor) or math.isnan(factor):
        raise ReplayError(f"--speed must be a positive number, not {text!r}")
    return 1.0 / factor


@dataclass
class ClientSession:
    id: str
    prompts: int = 0  # prompts played (the next one plays turn prompts + 1)
    playback: "Playback | None" = None
    queued: list[tuple[bytes, RecordedTurn]] = field(default_factory=list)


@dataclass
class Playback:
    session: ClientSession
    turn: RecordedTurn
    prompt_id: bytes | None  # the client's id, as its bytes; None for the setup steps after session/new
    ready: float  # the time the previous step finished
    pos: int = 0
    waiting: set = field(default_factory=set)  # our request ids still unanswered
    cancelled: bool = False
    accepted: bool = False
    ended: bool = False
    paused: bool = False
    id_map: dict = field(default_factory=dict)  # recorded agent request id key -> our fresh id


class ReplayCore:
    """Decides every frame replay sends. `receive` a line, `poll` when `next_deadline` comes."""

    def __init__(self, rec: Recording, *, scale: float = 0.0, strict: bool = False,
                 log: Callable[[str], None] | None = None) -> None:
        self.rec = rec
        self.scale = scale
        self.strict = strict
        self.log = log or (lambda text: None)
        self.v2 = rec.protocol_version >= 2
        self.client_caps: dict = {}
        self.sessions: dict[str, ClientSession] = {}
        self.handed_out = 0
        self.next_id = 0
        self.waiting: dict[tuple[str, Any], tuple[Playback, Member]] = {}
        self.terminal_ids: dict[str, str] = {}  # recorded terminalId -> the client's (v1 terminal/create)
        self._out: list[bytes] = []
        self._now = 0.0

    # -- input --------------------------------------------------------------------------------------------
    def receive(self, line: bytes, now: float) -> list[bytes]:
        """One line from the client; returns the frames to write now (poll's included)."""
        self._now = now
        body = line[:-1] if line.endswith(b"\r") else line
        if not body.strip():
            return self.poll(now)
        try:
            value = loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            self.log(f"not JSON ({len(line)} bytes): answered -32700")
            self._out.append(_error(b"null", PARSE_ERROR, "Parse error: the line is not JSON"))
            return self.poll(now)
        if isinstance(value, list):
            self._batch(body, value)
        else:
            reply = self._message(body, value)
            if reply is not None:
                self._out.append(reply)
        return self.poll(now)

    def _batch(self, body: bytes, value: list) -> None:
        if not value:
            self._out.append(_error(b"null", INVALID_REQUEST, "Invalid Request: empty batch"))
            return
        try:
            spans = [body[s:e] for _, s, e in _children(body, _ws(body, 0))]
        except (ValueError, RecursionError):
            spans = [dumps(v) for v in value]
        replies = [r for r in (self._message(raw, v) for raw, v in zip(spans, value)) if r is not None]
        if replies:
            self._out.append(b"[" + b",".join(replies) + b"]")

    def _message(self, raw: bytes, msg: Any) -> bytes | None:
        """Handle one message; return its immediate reply, if any (long requests answer later)."""
        if not isinstance(msg, dict):
            return _error(b"null", INVALID_REQUEST, "Invalid Request: not a JSON-RPC object")
        method = msg.get("method")
        id_raw = _id_bytes(raw, msg)
        if method is None and ("result" in msg or "error" in msg):
            self._client_answer(msg)
            return None
        if not isinstance(method, str):
            self.log("invalid request: answered -32600")
            return _error(id_raw or b"null", INVALID_REQUEST, "Invalid Request: no method")
        params = msg.get("params")
        if id_raw is None:
            self._notification(method, params)
            return None
        handler = self._handlers().get(method)
        if handler is None:
            self.log(f"{method}: not served, answered -32601")
            return _error(id_raw, METHOD_NOT_FOUND,
                          f"Method not found: {method} (acp-relay replay serves a recording and cannot answer it)",
                          {"method": method})
        try:
            return handler(id_raw, params if isinstance(params, dict) else {})
        except Exception as exc:  # noqa: BLE001 - nothing crashes: say what failed and go on
            self.log(f"{method}: internal error: {type(exc).__name__}: {exc}")
            return _error(id_raw, INTERNAL_ERROR, f"acp-relay replay failed on {method}: {type(exc).__name__}: {exc}")

    def _handlers(self) -> dict[str, Callable[[bytes, dict], bytes | None]]:
        h: dict[str, Callable[[bytes, dict], bytes | None]] = {
            "initialize": self._initialize,
            "session/new": self._new,
            "session/resume": self._resume,
            "session/list": self._list,
            "session/prompt": self._prompt,
            "session/close": self._close,
            "session/set_config_option": self._set_config_option,
        }
        ok = lambda id_raw, params: _result(id_raw, {})  # noqa: E731
        if self.v2:
            h |= {"auth/login": ok, "auth/logout": ok}
        else:
            h |= {"session/load": self._load, "authenticate": ok, "logout": ok, "session/set_mode": ok}
        return h

    # -- lifecycle and sessions -----------------------------------------------------------------------------
    def _initialize(self, id_raw: bytes, params: dict) -> bytes:
        asked = params.get("protocolVersion")
        version = self.rec.protocol_version
        caps = params.get("capabilities" if self.v2 else "clientCapabilities")
        self.client_caps = caps if isinstance(caps, dict) else {}
        if isinstance(asked, int) and not isinstance(asked, bool) and asked < version:
            self.log(f"initialize: the client asked for v{asked}; the recording is v{version}, answering v{version} "
                     "(the client may close the connection)")
        else:
            self.log(f"initialize: client v{asked}, answering v{version} (the recorded version)")
        return _result(id_raw, self._init_result())

    def _init_result(self) -> dict:
        rec = self.rec
        result = dict(rec.init_result or {})
        result["protocolVersion"] = rec.protocol_version
        if self.v2:
            caps = dict(result.get("capabilities") or {})
            session = {k: v for k, v in dict(caps.get("session") or {}).items() if k not in ("delete", "fork")}
            caps = {k: v for k, v in caps.items() if k not in ("providers", "nes")}
            caps["session"] = session
            result["capabilities"] = caps
            result.setdefault("info", {"name": "acp-relay-replay", "version": _version()})
            result.setdefault("authMethods", [])
        else:
            caps = dict(result.get("agentCapabilities") or {})
            caps["loadSession"] = True
            served = ("list", "resume", "close", "additionalDirectories", "_meta")
            sc = {k: v for k, v in dict(caps.get("sessionCapabilities") or {}).items() if k in served}
            sc["list"] = sc.get("list") if isinstance(sc.get("list"), dict) else {}
            caps["sessionCapabilities"] = sc
            caps = {k: v for k, v in caps.items() if k not in ("providers", "nes")}
            result["agentCapabilities"] = caps
            result.setdefault("agentInfo", {"name": "acp-relay-replay", "version": _version()})
            result.setdefault("authMethods", [])
        return result

    def _session_result(self, *, initial: bool) -> dict:
        """modes / configOptions: as recorded at creation (session/new), or as they ended (load, resume)."""
        out: dict[str, Any] = {}
        origin = self.rec.origin_result or {}
        state = self.rec.state
        if initial:
            for key in ("modes", "configOptions"):
                if key in origin and not (self.v2 and key == "modes"):
                    out[key] = origin[key]
            return out
        if not self.v2:
            modes = origin.get("modes") if isinstance(origin.get("modes"), dict) else None
            available = state.available_modes or _get(modes, "availableModes")
            current = state.mode or _get(modes, "currentModeId")
            if available is not None and current is not None:
                out["modes"] = {"currentModeId": current, "availableModes": available}
        config = state.config_options if state.config_options is not None else origin.get("configOptions")
        if config is not None:
            out["configOptions"] = config
        return out

    def _new(self, id_raw: bytes, params: dict) -> bytes:
        self.handed_out += 1
        sid = f"{self.rec.session_id}-replay-{self.handed_out}"
        cs = self.sessions[sid] = ClientSession(sid)
        self.log(f"session/new: {sid} (its prompts replay the recorded turns: {len(self.rec.turns)})")
        reply = _result(id_raw, {"sessionId": sid, **self._session_result(initial=True)})
        if self.rec.setup.steps:
            self._out.append(reply)  # the recorded setup updates follow the response
            cs.playback = Playback(cs, self.rec.setup, None, self._now)
            return None  # type: ignore[return-value]
        return reply

    def _known(self, params: dict) -> str | None:
        sid = params.get("sessionId")
        if isinstance(sid, str) and (sid == self.rec.session_id or sid in self.sessions):
            return sid
        return None

    def _unknown_session(self, id_raw: bytes, params: dict) -> bytes:
        sid = params.get("sessionId")
        self.log(f"unknown session {sid!r}: answered -32602")
        return _error(id_raw, INVALID_PARAMS, f"Unknown session {sid!r}: this replay serves session "
                      f"{self.rec.session_id} (and the sessions it handed out with session/new)",
                      {"sessionId": sid, "recorded": self.rec.session_id})

    def _load(self, id_raw: bytes, params: dict) -> bytes:
        sid = self._known(params)
        if sid is None:
            return self._unknown_session(id_raw, params)
        self.sessions.setdefault(sid, ClientSession(sid))
        self._history(sid)
        return _result(id_raw, self._session_result(initial=False))

    def _resume(self, id_raw: bytes, params: dict) -> bytes:
        sid = self._known(params)
        if sid is None:
            return self._unknown_session(id_raw, params)
        replay_from = params.get("replayFrom")
        if self.v2 and replay_from is not None:
            if _get(replay_from, "type") != "start":
                return _error(id_raw, INVALID_PARAMS, f"replayFrom {dumps(replay_from).decode()} is not supported: "
                              "acp-relay replay replays from {\"type\":\"start\"} only")
            self.sessions.setdefault(sid, ClientSession(sid))
            self._history(sid)
        else:
            self.sessions.setdefault(sid, ClientSession(sid))
            self.log(f"session/resume {sid}: no replay requested")
        return _result(id_raw, self._session_result(initial=False))

    def _list(self, id_raw: bytes, params: dict) -> bytes:
        info: dict[str, Any] = {"sessionId": self.rec.session_id, "cwd": self.rec.cwd or "/"}
        if self.rec.title is not None:
            info["title"] = self.rec.title
        if self.rec.updated_at is not None:
            info["updatedAt"] = self.rec.updated_at
        return _result(id_raw, {"sessions": [info]})

    def _close(self, id_raw: bytes, params: dict) -> bytes:
        sid = self._known(params)
        if sid is None:
            return self._unknown_session(id_raw, params)
        cs = self.sessions.get(sid)
        if cs and cs.playback and cs.playback.prompt_id is not None and not cs.playback.ended:
            self._cancel(cs.playback)
        return _result(id_raw, {})

    def _set_config_option(self, id_raw: bytes, params: dict) -> bytes:
        config = self._session_result(initial=False).get("configOptions")
        if not isinstance(config, list):
            return _error(id_raw, INVALID_PARAMS, "the recorded session has no config options")
        option, value = params.get("configId"), params.get("value")
        value = _get(value, "value") if isinstance(value, dict) else value
        out = []
        for opt in config:
            if isinstance(opt, dict) and option in (opt.get("id"), opt.get("configId")):
                opt = {**opt, "currentValue": value}
            out.append(opt)
        return _result(id_raw, {"configOptions": out})

    # -- history replay -------------------------------------------------------------------------------------
    def _history(self, client_sid: str) -> None:
        """The recorded conversation as session/update notifications (written before the response)."""
        sid_bytes = dumps(client_sid)
        n = 0
        for update in self._gate(replay_updates(self.rec.state, self.rec.protocol_version)):
            known = self.rec.raw_updates.get(id(update))
            body = None
            if known is not None and known[0] is update:  # unknown variants: their recorded bytes
                try:
                    span = find_span(known[1], ("params", "update"))
                    body = known[1][span[0]:span[1]] if span else None
                except (ValueError, RecursionError):
                    body = None
            self._out.append(b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + sid_bytes
                             + b',"update":' + (body or dumps(update)) + b"}}")
            n += 1
        self.log(f"history of {self.rec.session_id} replayed to {client_sid}: {n} updates")

    def _gate(self, updates: list[dict]) -> Iterable[dict]:
        """v1 clients get draft variants only when they advertised them (DIGEST 9.16)."""
        if self.v2:
            yield from updates
            return
        compaction = isinstance(_get(self.client_caps.get("session"), "compaction"), dict)
        plans = isinstance(self.client_caps.get("plan"), dict)
        for u in updates:
            variant = _get(u, "sessionUpdate")
            if variant in ("compaction_update", "compaction_summary_chunk") and not compaction:
                continue
            if variant in ("plan_update", "plan_removed") and not plans:
                plan = _get(u, "plan")
                if _get(plan, "type") == "items" and isinstance(plan.get("entries"), list):
                    yield {"sessionUpdate": "plan", "entries": plan["entries"]}
                continue
            yield u

    # -- turn replay ----------------------------------------------------------------------------------------
    def _prompt(self, id_raw: bytes, params: dict) -> bytes | None:
        sid = self._known(params)
        if sid is None:
            return self._unknown_session(id_raw, params)
        cs = self.sessions.setdefault(sid, ClientSession(sid))
        n = cs.prompts + 1 + len(cs.queued)
        if n > len(self.rec.turns):
            self.log(f"prompt {n} on {sid}: past the recorded turns ({len(self.rec.turns)}), answered -32002")
            return _error(id_raw, NOT_FOUND, f"acp-relay replay: the recording has {len(self.rec.turns)} turn"
                          f"{'s' if len(self.rec.turns) != 1 else ''}; there is no turn {n} to replay",
                          {"turns": len(self.rec.turns), "prompt": n})
        turn = self.rec.turns[n - 1]
        prompt = params.get("prompt")
        if prompt != turn.prompt:
            detail = f"prompt {n} differs from recorded turn {n} (recorded {_short(turn.prompt)}, got {_short(prompt)})"
            if self.strict:
                self.log(f"{detail}: --strict, answered an error")
                return _error(id_raw, INVALID_PARAMS, f"acp-relay replay --strict: {detail}",
                              {"turn": n, "recorded": turn.prompt})
            self.log(f"warning: {detail}; replaying it anyway")
        if cs.playback is not None:
            cs.queued.append((id_raw, turn))
            self.log(f"prompt {n} on {sid}: queued behind the turn still playing")
            return None
        cs.prompts = n
        self._start(cs, id_raw, turn)
        return None

    def _start(self, cs: ClientSession, id_raw: bytes, turn: RecordedTurn) -> None:
        self.log(f"prompt {turn.index} on {cs.id}: replaying recorded turn {turn.index} "
                 f"({len(turn.steps)} frames, ended {turn.stop_reason or 'without an end'})")
        cs.playback = Playback(cs, turn, id_raw, self._now)

    def _notification(self, method: str, params: Any) -> None:
        if method == "session/cancel":
            sid = self._known(params if isinstance(params, dict) else {})
            cs = self.sessions.get(sid) if sid else None
            pb = cs.playback if cs else None
            if pb is None or pb.prompt_id is None or pb.ended:
                self.log(f"session/cancel for {sid}: no turn is playing")
                return
            self._cancel(pb)
        else:
            self.log(f"notification {method}: ignored")

    def _cancel(self, pb: Playback) -> None:
        if pb.cancelled:
            return
        pb.cancelled = True
        for key in [k for k, (p, _) in self.waiting.items() if p is pb]:
            del self.waiting[key]
        pb.waiting.clear()
        turn = pb.turn
        pb.ready = self._now
        if turn.cancel_step is not None and pb.pos <= turn.cancel_step:
            self.log(f"session/cancel: turn {turn.index} continues as recorded after its cancel")
            pb.pos, pb.paused = turn.cancel_step, False
        else:
            self.log(f"session/cancel: turn {turn.index} stopped, ending it as cancelled")
            pb.pos = len(turn.steps)
            self._finish(pb, "cancelled")

    def _client_answer(self, msg: dict) -> None:
        entry = self.waiting.pop(_idkey(msg.get("id")), None)
        if entry is None:
            self.log(f"answer to an unknown request id {msg.get('id')!r}: ignored")
            return
        pb, member = entry
        pb.waiting.discard(_idkey(msg.get("id")))
        method = member.message.get("method")
        recorded = member.answer or {}
        if "error" in msg and "error" not in recorded:
            self.log(f"{method}: the client answered with an error; continuing as recorded")
        elif method == "session/request_permission":
            got = _get(_get(msg.get("result"), "outcome"), "optionId") or _get(_get(msg.get("result"), "outcome"), "outcome")
            want = (_get(_get(recorded.get("result"), "outcome"), "optionId")
                    or _get(_get(recorded.get("result"), "outcome"), "outcome"))
            if got != want:
                self.log(f"warning: permission answered {got!r}, the recording answered {want!r}; continuing as recorded")
        elif method == "terminal/create":
            theirs, ours = _get(msg.get("result"), "terminalId"), _get(recorded.get("result"), "terminalId")
            if isinstance(theirs, str) and isinstance(ours, str):
                self.terminal_ids[ours] = theirs
        if not pb.waiting:
            pb.ready = self._now

    # -- sending --------------------------------------------------------------------------------------------
    def next_deadline(self) -> float | None:
        """When `poll` has something to send (None: only input can make progress)."""
        times = [t for t in (self._due(pb) for pb in self._playing()) if t is not None]
        return min(times, default=None)

    def _due(self, pb: Playback) -> float | None:
        if pb.waiting:
            return None
        if pb.pos >= len(pb.turn.steps):
            return pb.ready
        if pb.pos == pb.turn.cancel_step and not pb.cancelled:
            return None
        return pb.ready + pb.turn.steps[pb.pos].gap * self.scale

    def _playing(self) -> list[Playback]:
        return [cs.playback for cs in self.sessions.values() if cs.playback is not None]

    def poll(self, now: float) -> list[bytes]:
        """Send every step that is due; returns the frames to write."""
        self._now = now
        progress = True
        while progress:
            progress = False
            for pb in self._playing():
                progress |= self._advance(pb, now)
        out, self._out = self._out, []
        return out

    def _advance(self, pb: Playback, now: float) -> bool:
        turn, moved = pb.turn, False
        while not pb.waiting and pb.pos < len(turn.steps):
            if pb.pos == turn.cancel_step and not pb.cancelled:
                if not pb.paused:
                    pb.paused = True
                    self.log(f"turn {turn.index}: the recorded client cancelled here; waiting for session/cancel")
                return moved
            step = turn.steps[pb.pos]
            due = pb.ready + step.gap * self.scale
            if due > now:
                return moved
            self._send(pb, step)
            pb.pos += 1
            pb.ready = due
            moved = True
        if pb.waiting:
            return moved
        if pb.prompt_id is not None and not pb.ended:
            self._finish(pb, None)
        pb.session.playback = None
        if pb.session.queued:
            id_raw, nxt = pb.session.queued.pop(0)
            pb.session.prompts += 1
            self._start(pb.session, id_raw, nxt)
        return True

    def _send(self, pb: Playback, step: Step) -> None:
        parts = []
        for member in step.members:
            new_id = None
            if member.role == "request":
                new_id = self.next_id
                self.next_id += 1
                key = _idkey(new_id)
                self.waiting[key] = (pb, member)
                pb.waiting.add(key)
                pb.id_map[_idkey(member.recorded_id)] = new_id
            parts.append(self._rewrite(pb, member, new_id))
            if member.accepts:
                pb.accepted = True
            if member.ends_turn:
                pb.ended = True
                self.log(f"turn {pb.turn.index} ended as recorded ({pb.turn.stop_reason})")
        self._out.append(b"[" + b",".join(parts) + b"]" if step.batch else parts[0])

    def _rewrite(self, pb: Playback, member: Member, new_id: int | None) -> bytes:
        """The recorded bytes with the client's session id, fresh or client ids, the client's terminal ids."""
        raw, msg = member.raw, member.message
        client_sid = pb.session.id
        values: dict[tuple[Any, ...], bytes] = {}
        params = msg.get("params")
        if _get(params, "sessionId") in (self.rec.session_id, "\x00recorded"):
            values[("params", "sessionId")] = dumps(client_sid)
        if new_id is not None:
            values[("id",)] = dumps(new_id)
        if member.role == "prompt_response" and pb.prompt_id is not None:
            values[("id",)] = pb.prompt_id
        if member.role == "cancel_request":
            mapped = pb.id_map.get(_idkey(_get(params, "requestId")))
            if mapped is not None:
                values[("params", "requestId")] = dumps(mapped)
        try:
            edits = []
            for path, new in values.items():
                span = find_span(raw, path)
                if span is not None:
                    edits.append((span[0], span[1], new))
            if self.terminal_ids and b"terminalId" in raw:
                for s, e in find_all(raw, "terminalId"):
                    old = loads(raw[s:e])
                    if isinstance(old, str) and old in self.terminal_ids:
                        edits.append((s, e, dumps(self.terminal_ids[old])))
            return splice(raw, edits)
        except (ValueError, RecursionError) as exc:  # cannot happen for parsed JSON; re-serialize if it does
            self.log(f"could not splice a recorded frame ({exc}); sending it re-serialized")
            copy = json.loads(dumps(msg))
            for path, new in values.items():
                target = copy
                for key in path[:-1]:
                    target = target[key]
                target[path[-1]] = loads(new)
            return dumps(copy)

    def _finish(self, pb: Playback, stop: str | None) -> None:
        """End a turn the recording does not end (cancel, or a recording cut short)."""
        if pb.ended or pb.prompt_id is None:
            return
        pb.ended = True
        sid = dumps(pb.session.id)
        if stop is None:
            self.log(f"turn {pb.turn.index}: the recording ends inside this turn")
        if self.v2:
            if not pb.accepted:
                pb.accepted = True
                uid = pb.turn.user_message_id or f"msg-prompt-{pb.turn.index}"
                self._out.append(_result(pb.prompt_id, {"messageId": uid}))
            idle: dict[str, Any] = {"sessionUpdate": "state_update", "state": "idle"}
            if stop is not None:
                idle["stopReason"] = stop
            self._out.append(b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + sid
                             + b',"update":' + dumps(idle) + b"}}")
        elif stop is not None:
            self._out.append(_result(pb.prompt_id, {"stopReason": stop}))
        else:
            self._out.append(_error(pb.prompt_id, INTERNAL_ERROR,
                                    f"acp-relay replay: the recording ends before turn {pb.turn.index} ended"))


def _id_bytes(raw: bytes, msg: dict) -> bytes | None:
    """The client's id exactly as it wrote it (responses echo it byte for byte)."""
    if "id" not in msg:
        return None
    try:
        span = find_span(raw, ("id",))
    except (ValueError, RecursionError):
        span = None
    return raw[span[0]:span[1]] if span else dumps(msg["id"])


def _result(id_raw: bytes, result: Any) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + id_raw + b',"result":' + dumps(result) + b"}"


def _error(id_raw: bytes, code: int, message: str, data: Any = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return b'{"jsonrpc":"2.0","id":' + id_raw + b',"error":' + dumps(err) + b"}"


def _short(value: Any, limit: int = 60) -> str:
    text = dumps(value).decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _version() -> str:
    from . import __version__

    return __version__


# ---- the shell ----------------------------------------------------------------------------------------------
_EOF = object()


def _reader(fd: int, q: "queue.Queue[Any]") -> None:
    framer = LineFramer()
    try:
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except InterruptedError:
                continue
            except OSError:
                break
            if not chunk:
                break
            for line in framer.feed(chunk):
                q.put(line)
        last = framer.finish()
        if last is not None:
            q.put(last)
    finally:
        q.put(_EOF)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def serve(core: ReplayCore, *, stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    """Feed stdin lines to the core until EOF, writing its frames to stdout."""
    q: "queue.Queue[Any]" = queue.Queue()
    threading.Thread(target=_reader, args=(stdin_fd, q), name="acp-relay-replay-stdin", daemon=True).start()
    while True:
        deadline = core.next_deadline()
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            item = q.get(timeout=timeout)
        except queue.Empty:
            item = None
        if item is _EOF:
            core.log("stdin closed: exiting")
            return 0
        now = time.monotonic()
        frames = core.receive(item, now) if item is not None else core.poll(now)
        if frames:
            try:
                _write_all(stdout_fd, b"".join(f + b"\n" for f in frames))
            except OSError as exc:
                core.log(f"cannot write to the client ({exc}): exiting")
                return 0


def _warn(text: str) -> None:
    try:
        os.write(2, ("acp-relay replay: " + text.rstrip("\n") + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def run_replay(db_path: str | os.PathLike[str], session: str, *, speed: str = "realtime", strict: bool = False,
               log: Callable[[str], None] = _warn) -> int:
    """`acp-relay replay`: serve SESSION on stdin/stdout until stdin closes; returns the exit status."""
    try:
        scale = parse_speed(speed)
        rec = load_recording(Path(db_path), session)
    except ReplayError as exc:
        log(f"error: {exc}")
        return 1
    for note in rec.notes:
        log(note)
    log(f"serving {rec.summary()}; speed {speed}{', strict' if strict else ''}")
    try:
        return serve(ReplayCore(rec, scale=scale, strict=strict, log=log))
    except KeyboardInterrupt:
        return 130
