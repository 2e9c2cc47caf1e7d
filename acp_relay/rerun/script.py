"""`acp-relay rerun`, the script: the editor's side of a recorded session, as rerun plays it (pure).

Built from the session's messages in recorded order (`build_script`): what the editor sent (initialize,
the request that created the session, each prompt, each cancel and where in its turn it came) and how it
answered the agent's requests (permissions per turn, file reads per path, terminals per command).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.errors import UserError
from ..protocol.jsonrpc import A2C, C2A, OPPOSITE, get, id_key

ORIGINS = ("session/new", "session/load", "session/resume", "session/fork")
AUTH = ("authenticate", "auth/login")  # replayed between initialize and session/new
SETTERS = ("session/set_mode", "session/set_model", "session/set_config_option")  # replayed before the next prompt


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


def command_key(params: Any) -> tuple[str, tuple[str, ...]]:
    args = get(params, "args")
    return str(get(params, "command")), tuple(str(a) for a in args) if isinstance(args, list) else ()


def _answer(msg: dict) -> dict:
    return {"error": msg["error"]} if "error" in msg else {"result": msg.get("result")}


def _record_answer(script: EditorScript, turn: ScriptTurn | None, request: dict, answer: dict) -> None:
    """Keep the editor's answer to an agent request where rerun will look for it."""
    method, params = request.get("method"), request.get("params")
    if method == "session/request_permission" and turn is not None:
        title, kind = tool_title_kind(params)
        options = get(params, "options")
        turn.permissions.append(RecordedPermission(title, kind, options if isinstance(options, list) else [], answer))
    elif method == "fs/read_text_file":
        script.fs_reads.setdefault(str(get(params, "path")), []).append(answer)
    elif method == "terminal/create":
        script.terminals.setdefault(command_key(params), []).append(answer)
    elif isinstance(method, str) and method.startswith("terminal/"):
        script.terminal_calls.setdefault((method, str(get(params, "terminalId"))), []).append(answer)


def _idle_stop(params: Any) -> tuple[bool, Any]:
    update = get(params, "update")
    idle = get(update, "sessionUpdate") == "state_update" and get(update, "state") == "idle"
    return idle, get(update, "stopReason")


def build_script(
    messages: Iterable[tuple[str, float, Any]], session_id: str, protocol_version: int | None = None
) -> EditorScript:
    """(direction, ts, message) of one session in recorded order to the script rerun plays."""
    script = EditorScript(session_id, protocol_version or 0, {}, "", {}, [])
    origin: tuple[str, dict] | None = None
    turns = script.turns
    pending: dict[tuple[str, Any], tuple[dict, ScriptTurn | None]] = {}
    updates, prompt_ts = 0, 0.0
    setters: list[tuple[str, dict]] = []
    for direction, ts, msg in messages:
        if not isinstance(msg, dict):
            continue
        method, params = msg.get("method"), msg.get("params")
        turn = turns[-1] if turns else None
        body = params if isinstance(params, dict) else {}
        if direction == C2A and isinstance(method, str):
            if method == "initialize" and "id" in msg and not script.init_params:
                script.init_params = body
            elif method in ORIGINS and origin is None and "id" in msg:
                origin = (method, body)
            elif method in AUTH and origin is None and "id" in msg:
                script.auth.append((method, body))
            elif method in SETTERS and origin is not None and "id" in msg:
                setters.append((method, body))
            elif method == "session/prompt" and "id" in msg:
                turns.append(ScriptTurn(len(turns) + 1, body, before=setters))
                updates, prompt_ts, setters = 0, ts, []
            elif method == "session/cancel" and turn is not None and turn.cancel_after is None:
                turn.cancel_after, turn.cancel_delay = updates, max(0.0, ts - prompt_ts)
        if isinstance(method, str) and "id" in msg:
            pending[(direction, id_key(msg.get("id")))] = (msg, turns[-1] if turns else None)
        elif direction == A2C and method == "session/update" and get(params, "sessionId") == session_id:
            updates += 1
            idle, stop = _idle_stop(params)
            if idle and turn is not None and turn.stop_reason is None:
                turn.stop_reason = stop
        elif method is None and ("result" in msg or "error" in msg):
            request, req_turn = pending.pop((OPPOSITE[direction], id_key(msg.get("id"))), (None, None))
            if request is None:
                continue
            result = msg.get("result")
            if request.get("method") == "initialize" and not script.protocol_version:
                v = get(result, "protocolVersion")
                script.protocol_version = v if isinstance(v, int) and not isinstance(v, bool) else 0
            elif request.get("method") == "session/prompt" and req_turn is not None and req_turn.stop_reason is None:
                req_turn.stop_reason = get(result, "stopReason")
            if direction == C2A:
                _record_answer(script, req_turn, request, _answer(msg))
    if origin is None:
        raise RerunError(f"session {session_id}: the recording holds no session/new (or load) to start from")
    cwd = get(origin[1], "cwd")
    script.origin_method, script.origin_params = origin
    script.protocol_version = script.protocol_version or 1
    script.cwd = cwd if isinstance(cwd, str) else None
    return script
