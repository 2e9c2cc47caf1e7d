"""`acp-relay replay`, the core: sans-I/O. Lines from the client go in with the current time; frames to write
come out, plus the time it next wants to be woken.

It decides the order of frames: which request is answered now, which recorded step is due, which waits for
the client. What the answers hold comes from answers.py; what is playing, and how a recorded message is
rewritten for the client, from playback.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..protocol import vocab
from ..protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_FOUND,
    PARSE_ERROR,
    dumps,
    error_bytes,
    get,
    id_key,
    loads,
    result_bytes,
    short_json,
)
from ..protocol.jsonspan import child_spans, id_bytes, skip_ws
from ..protocol.words import counted
from . import answers
from .playback import BatchReply, ClientSession, Playback, rewrite
from .recording import Member, RecordedTurn, Recording, Step

# What replay did and why, for the person at the terminal: INFO, so a library caller hears nothing unless it
# configures logging (the CLI's handler prints it as `acp-relay: replay: ...`).
log = logging.getLogger(__name__)


class ReplayCore:
    """Decides every frame replay sends. `receive` a line, `poll` when `next_deadline` comes."""

    def __init__(self, rec: Recording, *, scale: float = 0.0, strict: bool = False) -> None:
        self.rec = rec
        self.scale = scale
        self.strict = strict
        self.v2 = rec.protocol_version >= 2
        self.client_caps: dict = {}
        self.sessions: dict[str, ClientSession] = {}
        self.handed_out = 0
        self.next_id = 0
        self.waiting: dict[tuple[str, Any], tuple[Playback, Member]] = {}
        self.terminal_ids: dict[str, str] = {}  # recorded terminalId -> the client's (v1 terminal/create)
        self._out: list[bytes] = []
        self._now = 0.0
        self._batch_reply: BatchReply | None = None  # the client batch being handled

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
            log.info(f"not JSON ({counted(len(line), 'byte')}): answered -32700")
            self._out.append(error_bytes(b"null", PARSE_ERROR, "Parse error: the line is not JSON"))
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
            self._out.append(error_bytes(b"null", INVALID_REQUEST, "Invalid Request: empty batch"))
            return
        try:
            spans = [body[s:e] for _, s, e in child_spans(body, skip_ws(body, 0))]
        except (ValueError, RecursionError):
            spans = [dumps(v) for v in value]
        holder = self._batch_reply = BatchReply()
        try:
            for raw, v in zip(spans, value, strict=False):
                reply = self._message(raw, v)
                if reply is not None:
                    holder.parts.append(reply)
        finally:
            self._batch_reply = None
        holder.closed = True
        self._flush_batch(holder)

    def _flush_batch(self, holder: BatchReply) -> None:
        if holder.closed and holder.pending == 0 and holder.parts:
            self._out.append(b"[" + b",".join(holder.parts) + b"]")
            holder.parts = []

    def _answer_prompt(self, pb: Playback, frame: bytes) -> None:
        """The prompt's response: into its batch's array when it came in one, else a frame of its own."""
        holder, pb.batch = pb.batch, None
        if holder is None:
            self._out.append(frame)
            return
        holder.parts.append(frame)
        holder.pending -= 1
        self._flush_batch(holder)

    def _message(self, raw: bytes, msg: Any) -> bytes | None:
        """Handle one message; return its immediate reply, if any (long requests answer later)."""
        if not isinstance(msg, dict):
            return error_bytes(b"null", INVALID_REQUEST, "Invalid Request: not a JSON-RPC object")
        method = msg.get("method")
        id_raw = id_bytes(raw, msg)
        if method is None and ("result" in msg or "error" in msg):
            self._client_answer(msg)
            return None
        if not isinstance(method, str):
            log.info("invalid request: answered -32600")
            return error_bytes(id_raw or b"null", INVALID_REQUEST, "Invalid Request: no method")
        params = msg.get("params")
        if id_raw is None:
            self._notification(method, params)
            return None
        handler = self._handlers().get(method)
        if handler is None:
            log.info(f"{method}: not served, answered -32601")
            return error_bytes(
                id_raw,
                METHOD_NOT_FOUND,
                f"Method not found: {method} (acp-relay replay serves a recording and cannot answer it)",
                {"method": method},
            )
        try:
            return handler(id_raw, params if isinstance(params, dict) else {})
        except Exception as exc:
            log.warning(f"{method}: internal error: {type(exc).__name__}: {exc}")
            return error_bytes(
                id_raw, INTERNAL_ERROR, f"acp-relay replay failed on {method}: {type(exc).__name__}: {exc}"
            )

    def _handlers(self) -> dict[str, Callable[[bytes, dict], bytes | None]]:
        h: dict[str, Callable[[bytes, dict], bytes | None]] = {
            vocab.INITIALIZE: self._initialize,
            vocab.SESSION_NEW: self._new,
            vocab.SESSION_RESUME: self._resume,
            vocab.SESSION_LIST: self._list,
            vocab.PROMPT: self._prompt,
            vocab.SESSION_CLOSE: self._close,
            vocab.SET_CONFIG_OPTION: self._set_config_option,
        }
        ok = lambda id_raw, params: result_bytes(id_raw, {})  # noqa: E731
        if self.v2:
            h |= {vocab.AUTH_LOGIN: ok, vocab.AUTH_LOGOUT: ok}
        else:
            h |= {vocab.SESSION_LOAD: self._load, vocab.AUTHENTICATE: ok, vocab.LOGOUT: ok, vocab.SET_MODE: ok}
        return h

    # -- lifecycle and sessions -----------------------------------------------------------------------------
    def _initialize(self, id_raw: bytes, params: dict) -> bytes:
        asked = params.get("protocolVersion")
        version = self.rec.protocol_version
        caps = params.get("capabilities" if self.v2 else "clientCapabilities")
        self.client_caps = caps if isinstance(caps, dict) else {}
        if isinstance(asked, int) and not isinstance(asked, bool) and asked < version:
            log.info(
                f"initialize: the client asked for v{asked}; the recording is v{version}, answering v{version} "
                "(the client may close the connection)"
            )
        else:
            log.info(f"initialize: client v{asked}, answering v{version} (the recorded version)")
        return result_bytes(id_raw, answers.init_result(self.rec, _version()))

    def _new(self, id_raw: bytes, params: dict) -> bytes:
        self.handed_out += 1
        sid = f"{self.rec.session_id}-replay-{self.handed_out}"
        cs = self.sessions[sid] = ClientSession(sid)
        log.info(f"session/new: {sid} (its prompts replay the recorded turns: {len(self.rec.turns)})")
        reply = result_bytes(id_raw, {"sessionId": sid, **answers.session_result(self.rec, initial=True)})
        if self.rec.setup.steps:  # the recorded setup updates follow the response (poll runs after it is out)
            cs.playback = Playback(cs, self.rec.setup, None, self._now)
        return reply

    def _known(self, params: dict) -> str | None:
        sid = params.get("sessionId")
        if isinstance(sid, str) and (sid == self.rec.session_id or sid in self.sessions):
            return sid
        return None

    def _unknown_session(self, id_raw: bytes, params: dict) -> bytes:
        sid = params.get("sessionId")
        log.info(f"unknown session {sid!r}: answered -32602")
        return error_bytes(
            id_raw,
            INVALID_PARAMS,
            f"Unknown session {sid!r}: this replay serves session "
            f"{self.rec.session_id} (and the sessions it handed out with session/new)",
            {"sessionId": sid, "recorded": self.rec.session_id},
        )

    def _load(self, id_raw: bytes, params: dict) -> bytes:
        sid = self._known(params)
        if sid is None:
            return self._unknown_session(id_raw, params)
        self._at_end(sid)
        self._history(sid)
        return result_bytes(id_raw, answers.session_result(self.rec, initial=False))

    def _at_end(self, sid: str) -> None:
        """A loaded or resumed session holds the whole recorded conversation, so it stands after its last
        turn. Replaying turn N again would re-send messages the client already has under the same
        messageIds (v1 chunks append: the text would show twice), and the seed wants a new submission to
        get a new id. Its next prompt is past the recording; session/new replays the turns from the first."""
        cs = self.sessions.setdefault(sid, ClientSession(sid))
        if cs.playback is None and not cs.queued:
            cs.prompts, cs.loaded = len(self.rec.turns), True

    def _resume(self, id_raw: bytes, params: dict) -> bytes:
        sid = self._known(params)
        if sid is None:
            return self._unknown_session(id_raw, params)
        replay_from = params.get("replayFrom")
        if self.v2 and replay_from is not None:
            if get(replay_from, "type") != "start":
                return error_bytes(
                    id_raw,
                    INVALID_PARAMS,
                    f"replayFrom {dumps(replay_from).decode()} is not supported: "
                    'acp-relay replay replays from {"type":"start"} only',
                )
            self._at_end(sid)
            self._history(sid)
        else:
            self._at_end(sid)
            log.info(f"session/resume {sid}: no replay requested")
        return result_bytes(id_raw, answers.session_result(self.rec, initial=False))

    def _list(self, id_raw: bytes, params: dict) -> bytes:
        return result_bytes(id_raw, answers.list_result(self.rec))

    def _close(self, id_raw: bytes, params: dict) -> bytes:
        sid = self._known(params)
        if sid is None:
            return self._unknown_session(id_raw, params)
        cs = self.sessions.get(sid)
        if cs and cs.playback and cs.playback.prompt_id is not None and not cs.playback.ended:
            self._cancel(cs.playback)
        return result_bytes(id_raw, {})

    def _set_config_option(self, id_raw: bytes, params: dict) -> bytes:
        result = answers.config_option_result(self.rec, params)
        if result is None:
            return error_bytes(id_raw, INVALID_PARAMS, "the recorded session has no config options")
        return result_bytes(id_raw, result)

    def _history(self, client_sid: str) -> None:
        """The recorded conversation as session/update notifications (written before the response)."""
        frames = answers.history_frames(self.rec, client_sid, self.client_caps)
        self._out += frames
        log.info(f"history of {self.rec.session_id} replayed to {client_sid}: {counted(len(frames), 'update')}")

    # -- turn replay ----------------------------------------------------------------------------------------
    def _prompt(self, id_raw: bytes, params: dict) -> bytes | None:
        sid = self._known(params)
        if sid is None:
            return self._unknown_session(id_raw, params)
        cs = self.sessions.setdefault(sid, ClientSession(sid))
        n = cs.prompts + 1 + len(cs.queued)
        if n > len(self.rec.turns) and cs.loaded:
            log.info(
                f"prompt on {sid}: the loaded session already holds all {counted(len(self.rec.turns), 'turn')}, answered -32002"
            )
            return error_bytes(
                id_raw,
                NOT_FOUND,
                f"acp-relay replay: this session was loaded, so it already holds all {len(self.rec.turns)} recorded "
                "turns; the recording has nothing after them (start a session with session/new to replay its turns)",
                {"turns": len(self.rec.turns), "prompt": n, "loaded": True},
            )
        if n > len(self.rec.turns):
            log.info(f"prompt {n} on {sid}: past the recorded turns ({len(self.rec.turns)}), answered -32002")
            return error_bytes(
                id_raw,
                NOT_FOUND,
                f"acp-relay replay: the recording has {len(self.rec.turns)} turn"
                f"{'s' if len(self.rec.turns) != 1 else ''}; there is no turn {n} to replay",
                {"turns": len(self.rec.turns), "prompt": n},
            )
        turn = self.rec.turns[n - 1]
        prompt = params.get("prompt")
        if prompt != turn.prompt:
            detail = f"prompt {n} differs from recorded turn {n} (recorded {short_json(turn.prompt)}, got {short_json(prompt)})"
            if self.strict:
                log.info(f"{detail}: --strict, answered an error")
                return error_bytes(
                    id_raw, INVALID_PARAMS, f"acp-relay replay --strict: {detail}", {"turn": n, "recorded": turn.prompt}
                )
            log.warning(f"warning: {detail}; replaying it anyway")
        batch = self._batch_reply
        if batch is not None:
            batch.pending += 1
        if cs.playback is not None:
            cs.queued.append((id_raw, turn, batch))
            log.info(f"prompt {n} on {sid}: queued behind the turn still playing")
            return None
        cs.prompts = n
        self._start(cs, id_raw, turn, batch)
        return None

    def _start(self, cs: ClientSession, id_raw: bytes, turn: RecordedTurn, batch: BatchReply | None = None) -> None:
        log.info(
            f"prompt {turn.index} on {cs.id}: replaying recorded turn {turn.index} "
            f"({counted(len(turn.steps), 'frame')}, ended {turn.stop_reason or 'without an end'})"
        )
        cs.playback = Playback(cs, turn, id_raw, self._now, batch=batch)

    def _notification(self, method: str, params: Any) -> None:
        if method == vocab.CANCEL:
            sid = self._known(params if isinstance(params, dict) else {})
            cs = self.sessions.get(sid) if sid else None
            pb = cs.playback if cs else None
            if pb is None or pb.prompt_id is None or pb.ended:
                log.info(f"session/cancel for {sid}: no turn is playing")
                return
            self._cancel(pb)
        else:
            log.info(f"notification {method}: ignored")

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
            log.info(f"session/cancel: turn {turn.index} continues as recorded after its cancel")
            pb.pos, pb.paused = turn.cancel_step, False
        else:
            log.info(f"session/cancel: turn {turn.index} stopped, ending it as cancelled")
            pb.pos = len(turn.steps)
            self._finish(pb, "cancelled")

    def _client_answer(self, msg: dict) -> None:
        entry = self.waiting.pop(id_key(msg.get("id")), None)
        if entry is None:
            log.info(f"answer to an unknown request id {msg.get('id')!r}: ignored")
            return
        pb, member = entry
        pb.waiting.pop(id_key(msg.get("id")), None)
        method = member.message.get("method")
        recorded = member.answer or {}
        if "error" in msg and "error" not in recorded:
            log.info(f"{method}: the client answered with an error; continuing as recorded")
        elif method == vocab.REQUEST_PERMISSION:
            got = get(get(msg.get("result"), "outcome"), "optionId") or get(
                get(msg.get("result"), "outcome"), "outcome"
            )
            want = get(get(recorded.get("result"), "outcome"), "optionId") or get(
                get(recorded.get("result"), "outcome"), "outcome"
            )
            if got != want:
                log.info(
                    f"warning: permission answered {got!r}, the recording answered {want!r}; continuing as recorded"
                )
        elif method == vocab.TERMINAL_CREATE:
            theirs, ours = get(msg.get("result"), "terminalId"), get(recorded.get("result"), "terminalId")
            if isinstance(theirs, str) and isinstance(ours, str):
                self.terminal_ids[ours] = theirs
        pb.ready = max(pb.ready, self._now)  # a step the recording held for this answer counts from now

    # -- sending --------------------------------------------------------------------------------------------
    def next_deadline(self) -> float | None:
        """When `poll` has something to send (None: only input can make progress)."""
        times = [t for t in (self._due(pb) for pb in self._playing()) if t is not None]
        return min(times, default=None)

    @staticmethod
    def _held(pb: Playback) -> bool:
        """Is the next step held for the client's answer? Only where the recording waited: the recorded
        answer came before that step. What the agent sent before the answer goes out without waiting (a
        v2 `requires_action` after `session/request_permission`); the turn's end waits for every answer."""
        if pb.pos >= len(pb.turn.steps):
            return bool(pb.waiting)
        seq = pb.turn.steps[pb.pos].seq
        return any(m.answer_seq is not None and m.answer_seq < seq for m in pb.waiting.values())

    def _due(self, pb: Playback) -> float | None:
        if self._held(pb):
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
        while not self._held(pb) and pb.pos < len(turn.steps):
            if pb.pos == turn.cancel_step and not pb.cancelled:
                if not pb.paused:
                    pb.paused = True
                    log.info(f"turn {turn.index}: the recorded client cancelled here; waiting for session/cancel")
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
            id_raw, nxt, batch = pb.session.queued.pop(0)
            pb.session.prompts += 1
            self._start(pb.session, id_raw, nxt, batch)
        return True

    def _send(self, pb: Playback, step: Step) -> None:
        parts = []
        for member in step.members:
            new_id = None
            if member.role == "request":
                new_id = self.next_id
                self.next_id += 1
                key = id_key(new_id)
                self.waiting[key] = (pb, member)
                pb.waiting[key] = member
                pb.id_map[id_key(member.recorded_id)] = new_id
            part = rewrite(pb, member, new_id, self.rec.session_id, self.terminal_ids)
            if member.role == "prompt_response" and pb.batch is not None:
                self._answer_prompt(pb, part)
            else:
                parts.append(part)
            if member.accepts:
                pb.accepted = True
            if member.ends_turn:
                pb.ended = True
                log.info(f"turn {pb.turn.index} ended as recorded ({pb.turn.stop_reason})")
        if not parts:  # the step was the prompt's response, now in the client's batch array
            return
        frame = b"[" + b",".join(parts) + b"]" if step.batch else parts[0]
        self._out.append(frame + b"\r" if step.cr else frame)  # a CRLF line stays one

    def _finish(self, pb: Playback, stop: str | None) -> None:
        """End a turn the recording does not end (cancel, or a recording cut short)."""
        if pb.ended or pb.prompt_id is None:
            return
        pb.ended = True
        sid = dumps(pb.session.id)
        if stop is None and pb.turn.ended and self.v2:  # its idle was the work it joined: played by that turn
            stop = pb.turn.stop_reason
        elif stop is None:
            log.info(f"turn {pb.turn.index}: the recording ends inside this turn")
        if self.v2:
            if not pb.accepted:
                pb.accepted = True
                uid = pb.turn.user_message_id or f"msg-prompt-{pb.turn.index}"
                self._answer_prompt(pb, result_bytes(pb.prompt_id, {"messageId": uid}))
            idle: dict[str, Any] = {"sessionUpdate": vocab.STATE_UPDATE, "state": vocab.IDLE}
            if stop is not None:
                idle["stopReason"] = stop
            self._out.append(answers.update_frame(sid, dumps(idle)))
        elif stop is not None:
            self._answer_prompt(pb, result_bytes(pb.prompt_id, {"stopReason": stop}))
        else:
            self._answer_prompt(
                pb,
                error_bytes(
                    pb.prompt_id,
                    INTERNAL_ERROR,
                    f"acp-relay replay: the recording ends before turn {pb.turn.index} ended",
                ),
            )


def _version() -> str:
    from .. import __version__

    return __version__
