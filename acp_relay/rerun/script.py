"""`acp-relay rerun`, the script: the editor's side of a recorded session, as rerun plays it (pure).

Built from the session's messages in recorded order (`build_script`): what the editor sent (initialize,
the request that created the session, each prompt, each cancel and where in its turn it came) and how it
answered the agent's requests (permissions per turn, file reads per path, terminals per command).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.jsonrpc import A2C, C2A, get, id_key

ORIGINS = ("session/new", "session/load", "session/resume", "session/fork")


class RerunError(Exception):
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


def build_script(
    messages: Iterable[tuple[str, float, Any]], session_id: str, protocol_version: int | None = None
) -> EditorScript:
    """(direction, ts, message) of one session in recorded order to the script rerun plays."""
    init: dict = {}
    origin: tuple[str, dict] | None = None
    turns: list[ScriptTurn] = []
    version = protocol_version
    pending: dict[tuple[str, Any], tuple[dict, ScriptTurn | None]] = {}
    fs_reads: dict[str, list[dict]] = {}
    terminals: dict[tuple[str, tuple[str, ...]], list[dict]] = {}
    terminal_calls: dict[tuple[str, str], list[dict]] = {}
    updates = 0
    prompt_ts = 0.0
    for direction, ts, msg in messages:
        if not isinstance(msg, dict):
            continue
        method, params = msg.get("method"), msg.get("params")
        turn = turns[-1] if turns else None
        if direction == C2A and isinstance(method, str):
            if method == "initialize" and "id" in msg and not init:
                init = params if isinstance(params, dict) else {}
            elif method in ORIGINS and origin is None and "id" in msg:
                origin = (method, params if isinstance(params, dict) else {})
            elif method == "session/prompt" and "id" in msg:
                turns.append(ScriptTurn(len(turns) + 1, params if isinstance(params, dict) else {}))
                updates, prompt_ts = 0, ts
            elif method == "session/cancel" and turn is not None and turn.cancel_after is None:
                turn.cancel_after, turn.cancel_delay = updates, max(0.0, ts - prompt_ts)
        if isinstance(method, str) and "id" in msg:
            pending[(direction, id_key(msg.get("id")))] = (msg, turns[-1] if turns else None)
        elif direction == A2C and method == "session/update" and get(params, "sessionId") == session_id:
            updates += 1
            update = get(params, "update")
            if (
                get(update, "sessionUpdate") == "state_update"
                and get(update, "state") == "idle"
                and turn is not None
                and turn.stop_reason is None
            ):
                turn.stop_reason = get(update, "stopReason")
        elif method is None and ("result" in msg or "error" in msg):
            req_dir = A2C if direction == C2A else C2A
            request, req_turn = pending.pop((req_dir, id_key(msg.get("id"))), (None, None))
            if request is None:
                continue
            rmethod, rparams = request.get("method"), request.get("params")
            if rmethod == "initialize" and version is None:
                v = get(msg.get("result"), "protocolVersion")
                version = v if isinstance(v, int) and not isinstance(v, bool) else None
            elif rmethod == "session/prompt" and req_turn is not None and req_turn.stop_reason is None:
                req_turn.stop_reason = get(msg.get("result"), "stopReason")
            if direction != C2A:
                continue
            answer = _answer(msg)
            if rmethod == "session/request_permission" and req_turn is not None:
                title, kind = tool_title_kind(rparams)
                options = get(rparams, "options")
                req_turn.permissions.append(
                    RecordedPermission(title, kind, options if isinstance(options, list) else [], answer)
                )
            elif rmethod == "fs/read_text_file":
                fs_reads.setdefault(str(get(rparams, "path")), []).append(answer)
            elif rmethod == "terminal/create":
                terminals.setdefault(command_key(rparams), []).append(answer)
            elif isinstance(rmethod, str) and rmethod.startswith("terminal/"):
                terminal_calls.setdefault((rmethod, str(get(rparams, "terminalId"))), []).append(answer)
    if origin is None:
        raise RerunError(f"session {session_id}: the recording holds no session/new (or load) to start from")
    cwd = get(origin[1], "cwd")
    return EditorScript(
        session_id=session_id,
        protocol_version=version or 1,
        init_params=init,
        origin_method=origin[0],
        origin_params=origin[1],
        turns=turns,
        cwd=cwd if isinstance(cwd, str) else None,
        fs_reads=fs_reads,
        terminals=terminals,
        terminal_calls=terminal_calls,
    )
