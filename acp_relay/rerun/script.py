"""`acp-relay rerun`, the script: the editor's side of a recorded session, as rerun plays it (pure).

Built from the session's messages in recorded order (`build_script`): what the editor sent (initialize,
the request that created the session, each prompt, each cancel and where in its turn it came) and how it
answered the agent's requests (permissions per turn, file reads per path, terminals per command).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..protocol import vocab
from ..protocol.errors import UserError
from ..protocol.jsonrpc import A2C, C2A, OPPOSITE, get, id_key

ORIGINS = vocab.SESSION_ORIGINS
AUTH = (vocab.AUTHENTICATE, vocab.AUTH_LOGIN)  # replayed between initialize and session/new
SETTERS = vocab.SETTERS  # replayed before the next prompt


class RerunError(UserError):
    """A problem the user can fix (no such session, nothing to play): one line on stderr, exit status 2."""


@dataclass
class RecordedPermission:
    title: Any
    kind: Any
    options: list
    answer: dict  # {"result": ...} or {"error": ...}: what the editor answered


@dataclass
class ScriptTurn:
    index: int  # 1-based
    params: dict  # the recorded session/prompt params
    permissions: list[RecordedPermission] = field(default_factory=list)
    cancel_after: int | None = None  # the editor cancelled after this many agent updates of the turn...
    cancel_delay: float | None = None  # ...this many seconds after the prompt
    stop_reason: str | None = None
    before: list[tuple[str, dict]] = field(default_factory=list)  # setters the editor sent before this prompt


@dataclass
class EditorScript:
    session_id: str
    protocol_version: int
    init_params: dict
    origin_method: str
    origin_params: dict
    turns: list[ScriptTurn]
    cwd: str | None = None
    fs_reads: dict[str, list[dict]] = field(default_factory=dict)  # path -> answers, in order
    terminals: dict[tuple[str, tuple[str, ...]], list[dict]] = field(default_factory=dict)  # (command, args)
    terminal_calls: dict[tuple[str, str], list[dict]] = field(default_factory=dict)  # (method, terminalId)
    auth: list[tuple[str, dict]] = field(default_factory=list)  # authenticate / auth/login, as recorded

    @property
    def v2(self) -> bool:
        return self.protocol_version >= 2


def tool_title_kind(params: Any) -> tuple[Any, Any]:
    """A permission request's tool call title and kind (v1 toolCall; v2 title and subject.toolCall)."""
    tc = get(params, "toolCall") or get(get(params, "subject"), "toolCall")
    return get(tc, "title") or get(params, "title"), get(tc, "kind")


class ToolCalls:
    """The title and kind the session's updates gave each tool call: a permission request may name only
    the tool call's id (ACP lets it carry just the fields that changed)."""

    def __init__(self) -> None:
        self.known: dict[str, tuple[Any, Any]] = {}

    def note(self, params: Any) -> None:
        """Keep what a session/update says of a tool call (the latest title and kind win)."""
        update = get(params, "update")
        tid = get(update, "toolCallId")
        if get(update, "sessionUpdate") in (vocab.TOOL_CALL, vocab.TOOL_CALL_UPDATE) and isinstance(tid, str):
            title, kind = self.known.get(tid, (None, None))
            self.known[tid] = (get(update, "title") or title, get(update, "kind") or kind)

    def title_kind(self, params: Any) -> tuple[Any, Any]:
        """A permission request's title and kind, each from the request, else from the tool call's updates."""
        title, kind = tool_title_kind(params)
        tid = get(get(params, "toolCall") or get(get(params, "subject"), "toolCall"), "toolCallId")
        known_title, known_kind = self.known.get(tid, (None, None)) if isinstance(tid, str) else (None, None)
        return title or known_title, kind or known_kind


def command_key(params: Any) -> tuple[str, tuple[str, ...]]:
    args = get(params, "args")
    return str(get(params, "command")), tuple(str(a) for a in args) if isinstance(args, list) else ()


def _answer(msg: dict) -> dict:
    return {"error": msg["error"]} if "error" in msg else {"result": msg.get("result")}


def _record_answer(
    script: EditorScript, turn: ScriptTurn | None, request: dict, answer: dict, tool: tuple[Any, Any]
) -> None:
    """Keep the editor's answer to an agent request where rerun will look for it (`tool`: the title and
    kind of a permission request's tool call, as known when it was asked)."""
    method, params = request.get("method"), request.get("params")
    if method == vocab.REQUEST_PERMISSION and turn is not None:
        title, kind = tool
        options = get(params, "options")
        turn.permissions.append(RecordedPermission(title, kind, options if isinstance(options, list) else [], answer))
    elif method == vocab.FS_READ:
        script.fs_reads.setdefault(str(get(params, "path")), []).append(answer)
    elif method == vocab.TERMINAL_CREATE:
        script.terminals.setdefault(command_key(params), []).append(answer)
    elif isinstance(method, str) and method.startswith("terminal/"):
        script.terminal_calls.setdefault((method, str(get(params, "terminalId"))), []).append(answer)


def _idle_stop(params: Any) -> tuple[bool, Any]:
    update = get(params, "update")
    idle = get(update, "sessionUpdate") == vocab.STATE_UPDATE and get(update, "state") == vocab.IDLE
    return idle, get(update, "stopReason")


class _Builder:
    """The script, one recorded message at a time: the editor's requests, the agent's updates of the
    session (counted, for where a cancel came; a v2 idle ends a turn) and the answers to both sides."""

    def __init__(self, session_id: str, protocol_version: int | None) -> None:
        self.script = EditorScript(session_id, protocol_version or 0, {}, "", {}, [])
        self.origin: tuple[str, dict] | None = None
        self.pending: dict[tuple[str, Any], tuple[dict, ScriptTurn | None, tuple[Any, Any]]] = {}
        self.tools = ToolCalls()
        self.updates, self.prompt_ts = 0, 0.0
        self.setters: list[tuple[str, dict]] = []

    def turn(self) -> ScriptTurn | None:
        return self.script.turns[-1] if self.script.turns else None

    def feed(self, direction: str, ts: float, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params")
        if direction == C2A and isinstance(method, str):
            self._editor(method, "id" in msg, params if isinstance(params, dict) else {}, ts)
        if isinstance(method, str) and "id" in msg:
            tool = self.tools.title_kind(params) if method == vocab.REQUEST_PERMISSION else (None, None)
            self.pending[(direction, id_key(msg.get("id")))] = (msg, self.turn(), tool)
        elif direction == A2C and method == vocab.UPDATE and get(params, "sessionId") == self.script.session_id:
            self.updates += 1
            self.tools.note(params)
            idle, stop = _idle_stop(params)
            turn = self.turn()
            if idle and turn is not None and turn.stop_reason is None:
                turn.stop_reason = stop
        elif method is None and ("result" in msg or "error" in msg):
            self._answer(direction, msg)

    def _editor(self, method: str, request: bool, body: dict, ts: float) -> None:
        script, turn = self.script, self.turn()
        if method == vocab.CANCEL:
            if turn is not None and turn.cancel_after is None:
                turn.cancel_after, turn.cancel_delay = self.updates, max(0.0, ts - self.prompt_ts)
        elif not request:
            return
        elif method == vocab.INITIALIZE:
            script.init_params = script.init_params or body
        elif method in ORIGINS:
            self.origin = self.origin or (method, body)
        elif method in AUTH and self.origin is None:
            script.auth.append((method, body))
        elif method in SETTERS and self.origin is not None:
            self.setters.append((method, body))
        elif method == vocab.PROMPT:
            script.turns.append(ScriptTurn(len(script.turns) + 1, body, before=self.setters))
            self.updates, self.prompt_ts, self.setters = 0, ts, []

    def _answer(self, direction: str, msg: dict) -> None:
        request, req_turn, tool = self.pending.pop((OPPOSITE[direction], id_key(msg.get("id"))), (None, None, None))
        if request is None:
            return
        script, result = self.script, msg.get("result")
        if request.get("method") == vocab.INITIALIZE and not script.protocol_version:
            v = get(result, "protocolVersion")
            script.protocol_version = v if isinstance(v, int) and not isinstance(v, bool) else 0
        elif request.get("method") == vocab.PROMPT and req_turn is not None and req_turn.stop_reason is None:
            req_turn.stop_reason = get(result, "stopReason")
        if direction == C2A:
            _record_answer(script, req_turn, request, _answer(msg), tool or (None, None))


def build_script(
    messages: Iterable[tuple[str, float, Any]], session_id: str, protocol_version: int | None = None
) -> EditorScript:
    """(direction, ts, message) of one session in recorded order to the script rerun plays."""
    builder = _Builder(session_id, protocol_version)
    for direction, ts, msg in messages:
        if isinstance(msg, dict):
            builder.feed(direction, ts, msg)
    script, origin = builder.script, builder.origin
    if origin is None:
        raise RerunError(f"session {session_id}: the recording holds no session/new (or load) to start from")
    cwd = get(origin[1], "cwd")
    script.origin_method, script.origin_params = origin
    script.protocol_version = script.protocol_version or 1
    script.cwd = cwd if isinstance(cwd, str) else None
    return script
