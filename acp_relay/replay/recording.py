"""`acp-relay replay`, the recording: one session's recorded messages, as replay serves them.

`build_recording` folds them with the materializer (what `session/load` restates: history replay) and cuts
them into turns of ready-to-send steps (turn replay); it is pure. `load_recording` reads the frames through
the read-only queries of store/queries.py and hands them to it. Recorded bytes are kept as recorded: the
rewrite (playback.py) splices in only what must change (session ids, request ids, v1 terminal ids).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..protocol import vocab
from ..protocol.errors import UserError
from ..protocol.jsonrpc import A2C, C2A, Correlator, dumps, get, id_key, loads
from ..protocol.jsonspan import child_spans, skip_ws
from ..protocol.materialize import (
    Event,
    Materializer,
    SessionState,
    Turn,
)
from ..store import queries
from ..store.pages import session_row
from ..store.transport import relay_answers
from ..store.views import subagent_sessions

# The session id of an update replay makes up (a v2 user message the agent never reported): playback.py sends
# it under the client's session id, as it does the recorded one.
RECORDED_SID = "\x00recorded"


class ReplayError(UserError):
    """A problem the user can fix (no such session, bad --speed): one line on stderr, exit status 2."""


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
    cr: bool = False  # the recorded line ended with \r (CRLF): replay sends it back
    request: Msg | None = None  # for a response: the request it answers
    answer: Msg | None = None  # for a request: its response
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
    answer_seq: int | None = None  # requests: where the answer falls among the recorded frames


@dataclass
class Step:
    """One recorded frame to send (one message, or a batch), `gap` seconds after the previous one."""

    seq: int
    mono: float
    members: list[Member]
    batch: bool = False
    gap: float = 0.0
    cr: bool = False  # the recorded line ended with \r: sent back with it

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
        return (
            f"session {self.session_id}"
            + (f" (connection {self.connection_id})" if self.connection_id else "")
            + f": protocol v{self.protocol_version}, {n} turn{'s' if n != 1 else ''}, "
            f"{len(self.state.entries)} timeline entries"
        )


def _parse_frame(seq: int, direction: str, ts: float, mono: float, raw: bytes) -> list[Msg]:
    cr = raw.endswith(b"\r")
    body = raw[:-1] if cr else raw
    try:
        value = loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return []
    if isinstance(value, dict):
        return [Msg(seq, direction, ts, mono, body, value, cr=cr)]
    if isinstance(value, list):
        out = []
        try:
            spans = {k: (s, e) for k, s, e in child_spans(body, skip_ws(body, 0))}
        except (ValueError, RecursionError):
            spans = {}
        for i, member in enumerate(value):
            if isinstance(member, dict):
                s, e = spans.get(i, (0, 0))
                out.append(Msg(seq, direction, ts, mono, body[s:e] if e else dumps(member), member, batch=True, cr=cr))
        return out
    return []


def _correlate(msgs: list[Msg]) -> None:
    """Link responses to requests per direction, and give every message its session."""
    pending: Correlator[Msg] = Correlator()
    for m in msgs:
        if m.is_request:
            pending.request(m.direction, m.message.get("id"), m)
        if m.method is not None:
            sid = get(m.message.get("params"), "sessionId")
            m.session = sid if isinstance(sid, str) else None
            if m.method == vocab.CANCEL_REQUEST:
                req = pending.cancelled(m.direction, get(m.message.get("params"), "requestId"))
                m.session = req.session if req else None
        elif m.is_response:
            req = pending.answer(m.direction, m.message.get("id"))
            if req is not None:
                m.request, req.answer = req, m
                m.session = req.session
                sid = get(m.message.get("result"), "sessionId")
                if req.method in vocab.SESSION_IN_RESULT and isinstance(sid, str):
                    m.session = sid


def build_recording(
    rows: Iterable[tuple[int, str, float, float, bytes]],
    session_id: str,
    *,
    children: Iterable[str] = (),
    protocol_version: int | None = None,
    cwd: str | None = None,
    title: str | None = None,
    connection_id: int | None = None,
) -> Recording:
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
    version, init_result = _negotiated(msgs, protocol_version)
    state, raw_updates, windows = _fold(msgs, session_id, version)

    def in_window(seq: int) -> bool:
        return any(s < seq < e for s, e in windows)

    turns = _plan_turns(msgs, state, session_id, family, in_window, version >= 2)
    first_prompt = state.turns[0].start_seq if state.turns else math.inf
    origin, setup = _setup(msgs, session_id, family, in_window, first_prompt)
    origin_result = get(origin.message, "result") if origin else None
    info_title = state.info.get("title")
    updated = state.info.get("updatedAt")
    last_ts = max((m.ts for m in msgs if m.session == session_id), default=None)
    if not isinstance(updated, str) and last_ts is not None:
        updated = datetime.fromtimestamp(last_ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return Recording(
        session_id=session_id,
        protocol_version=version,
        state=state,
        turns=turns,
        setup=setup,
        init_result=init_result if isinstance(init_result, dict) else None,
        origin_result=origin_result if isinstance(origin_result, dict) else None,
        cwd=cwd if cwd is not None else _cwd(msgs, session_id, origin),
        title=info_title if isinstance(info_title, str) else title,
        updated_at=updated if isinstance(updated, str) else None,
        connection_id=connection_id,
        raw_updates=raw_updates,
        skipped=skipped,
    )


def _negotiated(msgs: list[Msg], fallback: int | None) -> tuple[int, Any]:
    """The protocol version the initialize answer gave (else `fallback`, else 1), and that answer's result."""
    init_req = next((m for m in msgs if m.direction == C2A and m.method == vocab.INITIALIZE and m.is_request), None)
    init_result = get(init_req.answer.message, "result") if init_req and init_req.answer else None
    version = get(init_result, "protocolVersion")
    if not (isinstance(version, int) and not isinstance(version, bool)):
        version = fallback or 1
    return version, init_result


def _fold(
    msgs: list[Msg], session_id: str, version: int
) -> tuple[SessionState, dict[int, tuple[Any, bytes]], list[tuple[int, float]]]:
    """The session's state, its updates' recorded bytes (by id() of the parsed update), and the windows
    (request seq, answer seq) in which the agent replayed history for a session/load or resume.

    A load (or resume with replay) of a session already seen in this recording replays what we hold: its
    updates are left out, or the history would be doubled."""
    mat = Materializer(version)
    raw_updates: dict[int, tuple[Any, bytes]] = {}
    windows: list[tuple[int, float]] = []
    dup_until: float | None = None
    for m in msgs:
        if m.session != session_id:
            continue
        if (
            m.direction == C2A
            and m.is_request
            and (
                m.method == vocab.SESSION_LOAD
                or (m.method == vocab.SESSION_RESUME and get(m.message.get("params"), "replayFrom") is not None)
            )
        ):
            end = m.answer.seq if m.answer else math.inf
            windows.append((m.seq, end))
            dup_until = end if mat.state.entries else None
        if dup_until is not None and m.direction == A2C and m.method == vocab.UPDATE:
            if m.seq < dup_until:
                continue
            dup_until = None
        if m.method == vocab.UPDATE:
            update = get(m.message.get("params"), "update")
            if update is not None:
                raw_updates[id(update)] = (update, m.raw)
        mat.feed(
            Event(m.seq, m.ts, m.direction, m.message, request=m.request.message if m.request else None, raw=m.raw)
        )
    return mat.state, raw_updates, windows


def _plan_turns(
    msgs: list[Msg],
    state: SessionState,
    session_id: str,
    family: set[str],
    in_window: Callable[[int], bool],
    v2: bool,
) -> list[RecordedTurn]:
    """Each turn's messages (see _turn_windows) planned into steps."""
    prompts = {
        m.seq: m
        for m in msgs
        if m.direction == C2A and m.session == session_id and m.method == vocab.PROMPT and m.is_request
    }
    windows_of = _turn_windows(msgs, state.turns, prompts)
    mono_of = {m.seq: m.mono for m in msgs}
    turns = []
    for i, turn in enumerate(state.turns):
        prompt_msg = prompts.get(turn.start_seq)
        window = windows_of[i]
        first = window[0].seq if window else math.inf
        # a prompt sent while the agent was running waits for that work's end: its gaps count from there
        ends = [
            mono_of.get(t.end_seq, 0.0) for t in state.turns[:i] if t.end_seq and turn.start_seq < t.end_seq < first
        ]
        anchor = max([prompt_msg.mono if prompt_msg else 0.0, *ends]) if prompt_msg or ends else None
        turns.append(_plan_turn(turn, prompt_msg, window, family, in_window, v2, state, anchor))
    return turns


def _setup(
    msgs: list[Msg], session_id: str, family: set[str], in_window: Callable[[int], bool], first_prompt: float
) -> tuple[Msg | None, RecordedTurn]:
    """The answer that began the session (new, load, resume, fork), and the notifications the agent sent
    between its request and the first prompt (available commands, modes...), as turn 0."""
    origin = next(
        (
            m
            for m in msgs
            if m.direction == A2C
            and m.is_response
            and m.session == session_id
            and m.request is not None
            and m.request.method in vocab.SESSION_ORIGINS
        ),
        None,
    )
    # From the origin's request, not its answer: agents (goose) send available_commands_update and
    # usage_update before they answer session/new; replay sends them right after its answer.
    setup_from = (origin.request.seq if origin.request else origin.seq) if origin else -1
    setup_msgs = [
        m
        for m in msgs
        if setup_from < m.seq < first_prompt
        and m.direction == A2C
        and m.is_notification
        and m.session in family
        and not in_window(m.seq)
    ]
    setup = RecordedTurn(0, [], _group(setup_msgs, lambda m: "notify"), ended=True)
    _gaps(setup.steps, origin.mono if origin else (setup_msgs[0].mono if setup_msgs else 0.0), None)
    return origin, setup


def _cwd(msgs: list[Msg], session_id: str, origin: Msg | None) -> str | None:
    """The session's working directory: the first the editor sent for it, else its origin request's."""
    for m in msgs:
        c = get(m.message.get("params"), "cwd")
        if m.direction == C2A and m.session == session_id and isinstance(c, str):
            return c
    if origin and origin.request:
        c = get(origin.request.message.get("params"), "cwd")
        return c if isinstance(c, str) else None
    return None


def _turn_windows(msgs: list[Msg], turns: list[Turn], prompts: dict[int, Msg]) -> list[list[Msg]]:
    """Each turn's recorded messages after its prompt. A message belongs to the oldest turn still running
    when it was recorded (a v2 prompt sent while the agent runs leaves that work, its output and its idle,
    to the turn that started it), except a prompt's own answer and its user message, which belong to that
    prompt's turn. Messages after every turn ended stay with the latest turn, as background output."""
    out: list[list[Msg]] = [[] for _ in turns]
    by_request = {id(prompts[t.start_seq]): i for i, t in enumerate(turns) if t.start_seq in prompts}
    by_user_message = {t.user_message_id: i for i, t in enumerate(turns) if t.user_message_id}
    running: list[int] = []  # indexes of started turns not ended, oldest first
    started = 0
    for m in msgs:
        while started < len(turns) and turns[started].start_seq < m.seq:
            running.append(started)
            started += 1
        if not started:
            continue
        running = [i for i in running if m.seq <= _end(turns[i])]
        owner = running[0] if running else started - 1
        if m.request is not None and id(m.request) in by_request:
            owner = by_request[id(m.request)]
        elif m.method == vocab.UPDATE:
            update = get(m.message.get("params"), "update")
            if get(update, "sessionUpdate") in (vocab.USER_MESSAGE, vocab.USER_MESSAGE_CHUNK):
                owner = by_user_message.get(get(update, "messageId"), owner)
        if turns[owner].start_seq < m.seq:
            out[owner].append(m)
    return out


def _end(turn: Turn) -> float:
    return math.inf if turn.end_seq is None else turn.end_seq


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
            member.answer_seq = m.answer.seq if m.answer else None
        if steps and steps[-1].seq == m.seq and m.batch:
            steps[-1].members.append(member)
        else:
            steps.append(Step(m.seq, m.mono, [member], batch=m.batch, cr=m.cr))
    return steps


def _gaps(steps: list[Step], anchor: float, cancel: tuple[int, float] | None) -> None:
    """Each step's delay after the previous one was sent or, when the recording waited for the client's
    answer to an earlier request (the answer came between them), after that answer."""
    answers: list[tuple[int, float]] = []  # (seq, mono) of recorded answers to requests already sent
    for i, step in enumerate(steps):
        if cancel is not None and i == cancel[0]:
            anchor = cancel[1]
        waited = [mono for seq, mono in answers if seq < step.seq]
        step.gap = max(0.0, step.mono - max([anchor, *waited]))
        answers = [(seq, mono) for seq, mono in answers if seq >= step.seq]
        answers += [(m.answer_seq, m.answer_mono) for m in step.requests if m.answer_seq is not None]  # type: ignore[misc]
        anchor = step.mono


def _plan_turn(
    turn: Turn,
    prompt_msg: Msg | None,
    window: list[Msg],
    family: set[str],
    in_window: Callable[[int], bool],
    v2: bool,
    state: SessionState,
    anchor: float | None = None,
) -> RecordedTurn:
    end = turn.end_seq if turn.end_seq is not None else math.inf
    agent_requests = {
        id_key(m.message.get("id"))
        for m in window
        if m.direction == A2C and m.is_request and m.session in family and m.seq <= end
    }

    def role(m: Msg) -> str | None:
        if m.direction != A2C or in_window(m.seq):
            return None
        if m.is_response:
            return "prompt_response" if prompt_msg is not None and m.request is prompt_msg else None
        if m.session not in family:
            return None
        if m.method == vocab.CANCEL_REQUEST:
            rid = id_key(get(m.message.get("params"), "requestId"))
            return "cancel_request" if rid in agent_requests else None
        if m.is_request:
            return "request" if m.seq <= end else None
        return "notify" if m.is_notification else None

    steps = _group(window, role)
    uid = turn.user_message_id or next(
        (u.split(":", 1)[1] for u in turn.entry_ids if u.startswith("user_message:")), None
    )
    for step in steps:
        for member in step.members:
            if step.seq == turn.end_seq and (member.role == "prompt_response" or member.role == "notify"):
                member.ends_turn = member.role == "prompt_response" or _is_idle(member.message)
            if member.role == "prompt_response" and "result" in member.message:
                member.ends_turn = member.ends_turn or not v2
                member.accepts = v2
    if v2:
        uid = _v2_acceptance(steps, turn, uid)
    cancel = next(
        (m for m in window if m.direction == C2A and m.method == vocab.CANCEL and m.session in family and m.seq <= end),
        None,
    )
    cancel_step, cancel_at = None, None
    if cancel is not None:
        cancel_step = next((i for i, s in enumerate(steps) if s.seq > cancel.seq), len(steps))
        cancel_at = (cancel_step, cancel.mono)
    _gaps(steps, anchor if anchor is not None else (steps[0].mono if steps else 0.0), cancel_at)
    return RecordedTurn(turn.index, list(turn.prompt), steps, cancel_step, turn.ended, turn.stop_reason, uid)


def _is_idle(message: dict) -> bool:
    update = get(message.get("params"), "update")
    return get(update, "sessionUpdate") == vocab.STATE_UPDATE and get(update, "state") == vocab.IDLE


def _v2_acceptance(steps: list[Step], turn: Turn, uid: str | None) -> str | None:
    """The acceptance response carries the user message's id (ACP Prompt Lifecycle (v2 draft), section
    "2. Prompt Accepted"): add it when the recording lacks it."""
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
            if synthetic:  # the agent never reported the user message: report it, as ACP Prompt Lifecycle (v2 draft) section "1. User Message" requires
                sid = RECORDED_SID
                update = {
                    "jsonrpc": "2.0",
                    "method": vocab.UPDATE,
                    "params": {
                        "sessionId": sid,
                        "update": {"sessionUpdate": vocab.USER_MESSAGE, "messageId": uid, "content": list(turn.prompt)},
                    },
                }
                steps.insert(
                    steps.index(step) + 1, Step(step.seq, step.mono, [Member(dumps(update), update, "notify")])
                )
            return uid
    return uid


# ---- reading the database -----------------------------------------------------------------------------------
def load_recording(db_path: str | os.PathLike[str], session: str) -> Recording:
    """SESSION (in the address grammar: an id, a prefix, `last`, ID@N) from the database, read-only."""
    with queries.reading(db_path, ReplayError) as conn:
        view = queries.resolve_view(conn, session)
        cid, sid = view.connection_id, view.session_id
        assert sid is not None
        children = subagent_sessions(conn, sid, cid)
        frames: dict[int, tuple[int, str, float, float, bytes]] = {}
        made = relay_answers(conn, cid)
        relays: list[tuple[int, str | None]] = []
        for s in [sid, *children]:
            v = queries.View(cid, s, 0.0, view.protocol_version)
            for f in queries.iter_frames(conn, v):
                frames[f.seq] = (f.seq, f.direction, f.ts, f.mono, bytes(f.raw))
                if f.id in made:
                    relays.append((f.id, f.method))
        row = session_row(conn, view)
        rec = build_recording(
            (frames[k] for k in sorted(frames)),
            sid,
            children=children,
            protocol_version=view.protocol_version,
            cwd=row.get("cwd"),
            title=row.get("title"),
            connection_id=cid,
        )
        # run --connect answered these itself (the remote never took the request): replayed as recorded, which
        # is what the editor received, and said to be the relay's, not the agent's.
        rec.notes = tuple(view.notes) + tuple(
            f"frame {fid} (the answer to {method or 'a request'}) was made by acp-relay, not the agent: the remote"
            " never took the request; it is replayed as the editor received it"
            for fid, method in relays
        )
        return rec
