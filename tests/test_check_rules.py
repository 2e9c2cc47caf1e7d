"""Every rule of `acp-relay check`: one recording that breaks it and one that keeps it (pure engine tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from check_helpers import TEXT, V1_AGENT_CAPS, V1_CLIENT_CAPS, Script

from acp_relay.protocol.check.rules import RULES
from acp_relay.protocol.jsonrpc import A2C, C2A

Build = Callable[[bool], Script]  # broken=True: a recording that breaks the rule
CASES: dict[str, Build] = {}


def case(rule: str) -> Callable[[Build], Build]:
    def register(fn: Build) -> Build:
        CASES[rule] = fn
        return fn

    return register


def v2(broken: bool, **kw: Any) -> tuple[Script, str]:
    s = Script(2, **kw)
    return s, s.new_session()


def v1(broken: bool, **kw: Any) -> tuple[Script, str]:
    s = Script(1, **kw)
    return s, s.new_session()


def chunk(s: Script, sid: str, mid: str | None = "m-a", text: str = "x") -> int:
    extra = {} if mid is None else {"messageId": mid}
    return s.update(sid, sessionUpdate="agent_message_chunk", content={"type": "text", "text": text}, **extra)


# -- 1. JSON-RPC 2.0 and framing ----------------------------------------------------------------------------
@case("rpc.not-utf8")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.line(
        A2C,
        b'{"jsonrpc":"2.0","method":"_x","params":{"t":"\xff"}}'
        if broken
        else b'{"jsonrpc":"2.0","method":"_x","params":{"t":"\xc3\xa9"}}',
    )
    return s


@case("rpc.not-json")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.line(A2C, b"INFO starting model" if broken else b'{"jsonrpc":"2.0","method":"_log","params":{}}')
    return s


@case("rpc.blank-line")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    if broken:
        s.line(C2A, b"   ")
    s.prompt(sid)
    return s


@case("rpc.cr-line")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.line(A2C, orjson.dumps({"jsonrpc": "2.0", "method": "_x", "params": {}}) + (b"\r" if broken else b""))
    return s


@case("rpc.unterminated")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    n = s.notify(A2C, "_x", {})
    if broken:
        s.unterminated.add(n)
    return s


@case("rpc.version")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.send(A2C, {"jsonrpc": "1.0" if broken else "2.0", "method": "_x", "params": {}})
    return s


@case("rpc.invalid")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.send(A2C, {"jsonrpc": "2.0", "params": {}} if broken else {"jsonrpc": "2.0", "method": "_x", "params": {}})
    return s


@case("rpc.id-type")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid: Any = {"n": 1} if broken else "req-1"
    s.send(C2A, {"jsonrpc": "2.0", "id": rid, "method": "_x", "params": {}})
    s.send(A2C, {"jsonrpc": "2.0", "id": rid, "result": {}})
    return s


@case("rpc.id-discouraged")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = 1.5 if broken else 1
    s.send(C2A, {"jsonrpc": "2.0", "id": rid, "method": "_x", "params": {}})
    s.send(A2C, {"jsonrpc": "2.0", "id": rid, "result": {}})
    return s


@case("rpc.params-type")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.send(C2A, {"jsonrpc": "2.0", "method": "_x", "params": "text" if broken else ["text"]})
    return s


@case("rpc.result-and-error")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.request(C2A, "_x", {})
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "result": {}}
    if broken:
        msg["error"] = {"code": -32603, "message": "boom"}
    s.send(A2C, msg)
    return s


@case("rpc.error-object")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.request(C2A, "_x", {})
    s.respond(A2C, rid, error={"code": "E1", "message": "boom"} if broken else {"code": -32601, "message": "no"})
    return s


@case("rpc.unknown-id")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.request(C2A, "_x", {})
    s.respond(A2C, 99 if broken else rid)
    if broken:
        s.respond(A2C, rid)
    return s


@case("rpc.answered-twice")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.request(C2A, "_x", {})
    s.respond(A2C, rid)
    if broken:
        s.respond(A2C, rid)
    return s


@case("rpc.id-reused")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.request(C2A, "_x", {}, rpc_id=7)
    if not broken:
        s.respond(A2C, 7)
    s.request(C2A, "_x", {}, rpc_id=7)
    s.respond(A2C, 7)
    if broken:
        s.respond(A2C, 7)
    return s


@case("rpc.notification-answered")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    if broken:
        s.notify(C2A, "_x/ping", {})
        s.send(A2C, {"jsonrpc": "2.0", "id": None, "result": {}})
    else:  # an error about a message whose id could not be read has id null, as JSON-RPC says
        s.send(A2C, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}})
    return s


@case("rpc.batch-v1")
def _(broken: bool) -> Script:
    s = Script(1 if broken else 2)
    s.line(C2A, b'[{"jsonrpc":"2.0","method":"_a","params":{}},{"jsonrpc":"2.0","method":"_b","params":{}}]')
    return s


@case("rpc.batch-empty")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.line(C2A, b"[]" if broken else b'[{"jsonrpc":"2.0","method":"_a","params":{}}]')
    return s


# -- 2. schema ---------------------------------------------------------------------------------------------
@case("schema.params")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.request(C2A, "session/prompt", {"sessionId": sid} if broken else {"sessionId": sid, "prompt": [TEXT]})
    s.respond(A2C, rid, error={"code": -32602, "message": "Invalid params"})
    return s


@case("schema.result")
def _(broken: bool) -> Script:
    s, sid = v1(broken)
    rid = s.prompt_request(sid)
    s.respond(A2C, rid, {"stopReason": "finished" if broken else "end_turn"})
    return s


@case("schema.unknown-method")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.request(C2A, "workspace/buffers" if broken else "_zed.dev/workspace/buffers", {})
    s.respond(A2C, rid, error={"code": -32601, "message": "Method not found"})
    return s


@case("schema.unknown-variant")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.update(sid, sessionUpdate="progress_update" if broken else "_vendor/progress", percent=50)
    return s


@case("schema.extension")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    if broken:  # "broken" here: an extension the checker notes (info)
        s.update(sid, sessionUpdate="_vendor/progress", percent=50)
    return s


# -- 3. protocol -------------------------------------------------------------------------------------------
@case("protocol.initialize-first")
def _(broken: bool) -> Script:
    s = Script(2, init=not broken)
    s.new_session()
    if broken:
        s.initialize()
    return s


@case("protocol.initialize-twice")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    if broken:
        s.initialize()
    return s


@case("protocol.version")
def _(broken: bool) -> Script:
    s = Script(1, answer_version=2 if broken else 1)
    s.new_session()
    return s


@case("protocol.unknown-version")
def _(broken: bool) -> Script:
    s = Script(2, answer_version=7 if broken else 2)
    s.new_session()
    return s


@case("protocol.wrong-side")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.request(A2C if broken else C2A, "session/prompt", {"sessionId": sid, "prompt": [TEXT]})
    s.respond(C2A if broken else A2C, rid, error={"code": -32601, "message": "no"})
    return s


@case("protocol.wrong-kind")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    if broken:
        rid = s.request(C2A, "session/cancel", {"sessionId": sid})
        s.respond(A2C, rid, error={"code": -32601, "message": "no"})
    else:
        s.notify(C2A, "session/cancel", {"sessionId": sid})
    return s


@case("protocol.client-capability")
def _(broken: bool) -> Script:
    s, sid = v1(broken, client_caps={"fs": {"readTextFile": not broken}})
    rid = s.request(A2C, "fs/read_text_file", {"sessionId": sid, "path": "/tmp/a"})
    s.respond(C2A, rid, {"content": "a"})
    return s


@case("protocol.agent-capability")
def _(broken: bool) -> Script:
    s, sid = v1(broken, agent_caps={"loadSession": not broken})
    rid = s.request(C2A, "session/load", {"sessionId": "old", "cwd": "/tmp", "mcpServers": []})
    s.respond(A2C, rid, {})
    return s


@case("protocol.prompt-content")
def _(broken: bool) -> Script:
    s, sid = v2(broken, agent_caps={"session": {"prompt": {} if broken else {"image": {}}}})
    image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    rid = s.prompt_request(sid, [TEXT, image])
    s.respond(A2C, rid, error={"code": -32602, "message": "no images"})
    return s


@case("protocol.unknown-session")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.prompt_request("sess-elsewhere" if broken else sid)
    s.respond(A2C, rid, error={"code": -32002, "message": "Resource not found"})
    return s


@case("protocol.unanswered")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.request(C2A, "_x/slow", {})
    if not broken:
        s.respond(A2C, rid)
    return s


# -- 4. Prompt Lifecycle -----------------------------------------------------------------------------------
@case("lifecycle.accept-message-id")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.prompt_request(sid)
    s.respond(A2C, rid, {} if broken else {"messageId": "u1"})
    s.update(sid, sessionUpdate="user_message_chunk", messageId="u1", content=TEXT)
    s.state(sid, "running")
    s.state(sid, "idle", stopReason="end_turn")
    return s


@case("lifecycle.user-message")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.prompt_request(sid)
    if not broken:  # the report may come before the acceptance
        s.update(sid, sessionUpdate="user_message", messageId="u1", content=[TEXT])
    s.respond(A2C, rid, {"messageId": "u1"})
    s.state(sid, "running")
    s.state(sid, "idle", stopReason="end_turn")
    return s


@case("lifecycle.distinct-message-ids")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    for n in (1, 2):
        uid = "u1" if broken else f"u{n}"
        rid = s.prompt_request(sid)
        s.respond(A2C, rid, {"messageId": uid})
        s.update(sid, sessionUpdate="user_message", messageId=uid, content=[TEXT])
        s.state(sid, "running")
        s.state(sid, "idle", stopReason="end_turn")
    return s


@case("lifecycle.update-message-id")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    chunk(s, sid, None if broken else "m-a")
    s.state(sid, "idle", stopReason="end_turn")
    return s


@case("lifecycle.running")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    rid = s.prompt_request(sid)
    s.respond(A2C, rid, {"messageId": "u1"})
    s.update(sid, sessionUpdate="user_message", messageId="u1", content=[TEXT])
    if not broken:
        s.state(sid, "running")
    chunk(s, sid)
    s.state(sid, "idle", stopReason="end_turn")
    return s


def permission(s: Script, sid: str, outcome: dict[str, Any] | None = None) -> Any:
    return s.request(
        A2C,
        "session/request_permission",
        {
            "sessionId": sid,
            "title": "Edit main.py",
            "subject": {"type": "tool_call", "toolCall": {"toolCallId": "call-1"}},
            "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
        },
    )


SELECTED = {"outcome": {"outcome": "selected", "optionId": "ok"}}
CANCELLED = {"outcome": {"outcome": "cancelled"}}


@case("lifecycle.requires-action")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    s.update(sid, sessionUpdate="tool_call_update", toolCallId="call-1", title="Edit", status="pending")
    rid = permission(s, sid)
    if not broken:
        s.state(sid, "requires_action")
    s.respond(C2A, rid, SELECTED)
    s.state(sid, "running")
    s.update(sid, sessionUpdate="tool_call_update", toolCallId="call-1", status="completed")
    s.state(sid, "idle", stopReason="end_turn")
    return s


@case("lifecycle.resume-running")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    rid = permission(s, sid)
    s.state(sid, "requires_action")
    s.respond(C2A, rid, SELECTED)
    if not broken:
        s.state(sid, "running")
    s.update(sid, sessionUpdate="tool_call_update", toolCallId="call-1", status="in_progress")
    s.state(sid, "idle", stopReason="end_turn")
    return s


@case("lifecycle.idle-stop-reason")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    s.state(sid, "idle", **({} if broken else {"stopReason": "max_tokens"}))
    s.state(sid, "idle")  # an idle outside a turn needs no stop reason
    return s


@case("lifecycle.custom-stop-reason")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    s.state(sid, "idle", stopReason="budget_exhausted" if broken else "_acme/budget_exhausted")
    return s


@case("lifecycle.cancel-idle")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    chunk(s, sid)
    s.notify(C2A, "session/cancel", {"sessionId": sid})
    chunk(s, sid, text="y")  # pending output may still come before the idle
    s.state(sid, "idle", stopReason="end_turn" if broken else "cancelled")
    return s


@case("lifecycle.cancel-response")
def _(broken: bool) -> Script:
    s, sid = v1(broken)
    rid = s.prompt_request(sid)
    chunk(s, sid, None)
    s.notify(C2A, "session/cancel", {"sessionId": sid})
    chunk(s, sid, None, text="y")  # pending updates may still come before the response
    s.respond(A2C, rid, {"stopReason": "end_turn" if broken else "cancelled"})
    s.prompt(sid)  # the next turn is not a cancelled one
    return s


@case("lifecycle.after-cancel")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    s.update(sid, sessionUpdate="tool_call_update", toolCallId="call-1", title="Run tests", status="in_progress")
    s.notify(C2A, "session/cancel", {"sessionId": sid})
    s.state(sid, "idle", stopReason="cancelled")
    if broken:
        s.update(sid, sessionUpdate="tool_call_update", toolCallId="call-1", status="failed")
    else:  # background output for something else is fine while idle
        s.update(sid, sessionUpdate="available_commands_update", availableCommands=[])
    return s


@case("lifecycle.permission-cancelled")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    rid = permission(s, sid)
    s.state(sid, "requires_action")
    s.notify(C2A, "session/cancel", {"sessionId": sid})
    s.respond(C2A, rid, SELECTED if broken else CANCELLED)
    s.state(sid, "idle", stopReason="cancelled")
    return s


def compaction(s: Script, sid: str, status: str, cid: str = "cmp-1", **extra: Any) -> int:
    return s.update(sid, sessionUpdate="compaction_update", compactionId=cid, status=status, **extra)


def summary_chunk(s: Script, sid: str, cid: str = "cmp-1") -> int:
    return s.update(sid, sessionUpdate="compaction_summary_chunk", compactionId=cid, content=TEXT)


@case("lifecycle.compaction-order")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    if broken:
        summary_chunk(s, sid)
    compaction(s, sid, "in_progress")
    summary_chunk(s, sid)
    compaction(s, sid, "completed")
    return s


@case("lifecycle.compaction-end")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    compaction(s, sid, "in_progress")
    compaction(s, sid, "completed")
    if broken:
        compaction(s, sid, "failed", error="disk full")
    return s


@case("lifecycle.compaction-reuse")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    compaction(s, sid, "in_progress")
    compaction(s, sid, "completed")
    compaction(s, sid, "in_progress", cid="cmp-1" if broken else "cmp-2")
    compaction(s, sid, "cancelled", cid="cmp-1" if broken else "cmp-2")
    return s


@case("lifecycle.compaction-fields")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    compaction(s, sid, "in_progress")
    compaction(s, sid, "failed" if broken else "completed", summary=[TEXT])
    return s


@case("lifecycle.notice-replay")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.prompt(sid)
    rid = s.request(C2A, "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}})
    s.update(sid, sessionUpdate="user_message", messageId="msg-1", content=[TEXT])
    notice = {"sessionUpdate": "notice", "severity": "warning", "title": "MCP server unavailable"}
    if broken:
        s.update(sid, **notice)
    s.respond(A2C, rid, {})
    s.update(sid, **notice)  # live, after the replay: fine
    return s


# -- 5. rules added for the conformance kit's requirements (ids in protocol/check/tck.py) ------------------
Versioned = Callable[[bool, int], Script]
VERSIONED: dict[str, Versioned] = {}  # rules that hold in v1 and v2: each version breaks and keeps them


def both(rule: str) -> Callable[[Versioned], Versioned]:
    def register(fn: Versioned) -> Versioned:
        VERSIONED[rule] = fn
        return fn

    return register


def session_for(s: Script, result: dict[str, Any]) -> str:
    """A session/new whose answer carries `result` (sessionId included)."""
    params: dict[str, Any] = {"cwd": "/tmp"}
    if s.version == 1:
        params["mcpServers"] = []
    rid = s.request(C2A, "session/new", params)
    s.respond(A2C, rid, result)
    return str(result["sessionId"])


def select(s: Script, oid: str, current: str, values: tuple[str, ...] = ("fast", "slow")) -> dict[str, Any]:
    return {
        ("id" if s.version == 1 else "configId"): oid,
        "name": oid.title(),
        "type": "select",
        "currentValue": current,
        "options": [{"value": v, "name": v.title()} for v in values],
    }


@case("rpc.batch-lifecycle")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    first = {"jsonrpc": "2.0", "id": 50, "method": "session/new" if broken else "_x/a", "params": {"cwd": "/tmp"}}
    s.send(C2A, [first, {"jsonrpc": "2.0", "id": 51, "method": "_x/b", "params": {}}])
    s.send(
        A2C,
        [{"jsonrpc": "2.0", "id": 50, "result": {"sessionId": "sess-b"}}, {"jsonrpc": "2.0", "id": 51, "result": {}}],
    )
    return s


@both("protocol.version-value")
def _(broken: bool, version: int) -> Script:
    s = Script(version, answer_version=str(version) if broken else version)
    s.new_session()
    return s


@both("rpc.error-message")
def _(broken: bool, v: int) -> Script:
    s = Script(v)
    rid = s.request(C2A, "_x/thing", {})
    s.respond(A2C, rid, error={"code": -32601, "message": "" if broken else "Method not found"})
    rid = s.request(C2A, "_x/other", {})
    s.respond(A2C, rid, error={"code": -32603, "message": "boom\n  at line 3" if broken else "Internal error"})
    return s


@case("schema.open-enum")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    s.update(
        sid,
        sessionUpdate="tool_call_update",
        toolCallId="c1",
        title="Build",
        kind="compile" if broken else "_acme/compile",
    )
    entry = {"content": "Build", "priority": "urgent" if broken else "high", "status": "pending"}
    s.update(sid, sessionUpdate="plan_update", plan={"type": "items", "planId": "p1", "entries": [entry]})
    s.state(sid, "idle", stopReason="end_turn")
    return s


@both("protocol.session-ids")
def _(broken: bool, v: int) -> Script:
    s = Script(v)
    s.new_session("sess-a")
    s.new_session("sess-a" if broken else "sess-b")
    return s


@case("protocol.agent-info")
def _(broken: bool) -> Script:
    s = Script(1, init=False)
    rid = s.request(C2A, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    result: dict[str, Any] = {"protocolVersion": 1, "agentCapabilities": {}}
    if not broken:
        result["agentInfo"] = {"name": "agent", "version": "1.2"}
    s.respond(A2C, rid, result)
    return s


@case("protocol.mode-id")
def _(broken: bool) -> Script:
    s = Script(1)
    modes = {"currentModeId": "yolo" if broken else "ask", "availableModes": [{"id": "ask", "name": "Ask"}]}
    session_for(s, {"sessionId": "sess-m", "modes": modes})
    return s


@both("protocol.config-value")
def _(broken: bool, v: int) -> Script:
    s = Script(v)
    session_for(s, {"sessionId": "sess-c", "configOptions": [select(s, "model", "turbo" if broken else "fast")]})
    return s


@both("protocol.config-complete")
def _(broken: bool, v: int) -> Script:
    s = Script(v)
    sid = session_for(
        s, {"sessionId": "sess-c", "configOptions": [select(s, "model", "fast"), select(s, "effort", "fast")]}
    )
    params: dict[str, Any] = {"sessionId": sid, "configId": "model", "value": "slow"}
    if v == 2:
        params["type"] = "id"
    rid = s.request(C2A, "session/set_config_option", params)
    kept = [select(s, "model", "slow")] + ([] if broken else [select(s, "effort", "fast")])
    s.respond(A2C, rid, {"configOptions": kept})
    s.update(sid, sessionUpdate="config_option_update", configOptions=kept + [select(s, "extra", "fast")])
    return s


def auth_script(v: int, methods: list[dict[str, Any]], client_auth: Any = None) -> Script:
    s = Script(v, init=False)
    if v == 1:
        params: dict[str, Any] = {
            "protocolVersion": 1,
            "clientCapabilities": {"auth": client_auth} if client_auth else {},
        }
        result: dict[str, Any] = {
            "protocolVersion": 1,
            "agentCapabilities": {},
            "agentInfo": {"name": "a", "version": "1"},
        }
    else:
        params = {"protocolVersion": 2, "info": {"name": "e", "version": "1"}, "capabilities": {}}
        if client_auth:
            params["capabilities"] = {"auth": client_auth}
        result = {"protocolVersion": 2, "info": {"name": "a", "version": "1"}, "capabilities": V2_CAPS}
    result["authMethods"] = methods
    rid = s.request(C2A, "initialize", params)
    s.respond(A2C, rid, result)
    return s


V2_CAPS: dict[str, Any] = {"session": {}}


def auth_method(v: int, ident: str, kind: str | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {("id" if v == 1 else "methodId"): ident, "name": ident.title()}
    if kind is not None or v == 2:
        m["type"] = kind or "agent"
    return m


@both("protocol.auth-method-ids")
def _(broken: bool, v: int) -> Script:
    return auth_script(v, [auth_method(v, "login"), auth_method(v, "login" if broken else "api-key")])


@both("protocol.auth-terminal")
def _(broken: bool, v: int) -> Script:
    terminal = {**auth_method(v, "tui", "terminal"), "args": ["--login"]}
    caps: Any = None if broken else ({"terminal": True} if v == 1 else {"terminal": {}})
    return auth_script(v, [auth_method(v, "login"), terminal], caps)


@both("protocol.auth-required")
def _(broken: bool, v: int) -> Script:
    s = auth_script(v, [] if broken else [auth_method(v, "login")])
    params: dict[str, Any] = {"cwd": "/tmp"}
    if v == 1:
        params["mcpServers"] = []
    rid = s.request(C2A, "session/new", params)
    s.respond(A2C, rid, error={"code": -32000, "message": "Authentication required"})
    return s


def listing(s: Script, sessions: list[dict[str, Any]], cwd: str | None = None) -> None:
    rid = s.request(C2A, "session/list", {} if cwd is None else {"cwd": cwd})
    s.respond(A2C, rid, {"sessions": sessions})


@both("protocol.list-cwd")
def _(broken: bool, v: int) -> Script:
    s = Script(v)
    listing(s, [{"sessionId": "s1", "cwd": "work/repo" if broken else "/work/repo"}])
    listing(s, [{"sessionId": "s2", "cwd": "/elsewhere" if broken else "/work/repo"}], cwd="/work/repo")
    return s


DELETE_CAPS = {1: {**V1_AGENT_CAPS, "sessionCapabilities": {"list": {}, "delete": {}}}, 2: {"session": {"delete": {}}}}


@both("protocol.deleted-listed")
def _(broken: bool, v: int) -> Script:
    s = Script(v, agent_caps=DELETE_CAPS[v])
    sid = s.new_session()
    rid = s.request(C2A, "session/delete", {"sessionId": sid})
    s.respond(A2C, rid, {})
    listing(s, [{"sessionId": sid if broken else "other", "cwd": "/tmp"}])
    return s


@both("protocol.delete-again")
def _(broken: bool, v: int) -> Script:
    s = Script(v, agent_caps=DELETE_CAPS[v])
    sid = s.new_session()
    for n in (1, 2):
        rid = s.request(C2A, "session/delete", {"sessionId": sid})
        if n == 2 and broken:
            s.respond(A2C, rid, error={"code": -32002, "message": "Session not found"})
        else:
            s.respond(A2C, rid, {})
    return s


@case("lifecycle.cancel-crossed")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    chunk(s, sid)
    if broken:  # the agent finished 1.5 ms after the editor's cancel: they crossed
        s.notify(C2A, "session/cancel", {"sessionId": sid})
        s.after(1.5).state(sid, "idle", stopReason="end_turn")
    else:  # the idle came first; the cancel finds nothing to cancel
        s.state(sid, "idle", stopReason="end_turn")
        s.after(1.5).notify(C2A, "session/cancel", {"sessionId": sid})
    return s


@case("lifecycle.turn-open")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    chunk(s, sid)
    if not broken:
        s.state(sid, "idle", stopReason="end_turn")
    return s


@both("lifecycle.resume-history")
def _(broken: bool, v: int) -> Script:
    s = Script(v)
    sid = s.new_session()
    s.prompt(sid)
    rid = s.request(C2A, "session/resume", {"sessionId": sid, "cwd": "/tmp"})
    if broken:
        extra = {} if v == 1 else {"messageId": "msg-1"}
        s.update(sid, sessionUpdate="user_message_chunk", content=TEXT, **extra)
    s.update(sid, sessionUpdate="available_commands_update", availableCommands=[])  # not history: fine
    s.respond(A2C, rid, {})
    return s


@both("lifecycle.replay-after-answer")
def _(broken: bool, v: int) -> Script:
    s = Script(v)
    sid = s.new_session()
    s.prompt(sid)
    if v == 1:
        rid = s.request(C2A, "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
    else:
        rid = s.request(C2A, "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}})
    replayed = {"sessionUpdate": "user_message_chunk", "content": TEXT, **({} if v == 1 else {"messageId": "msg-1"})}
    if v == 2:
        s.update(sid, sessionUpdate="user_message", messageId="msg-1", content=[])
    if not broken:
        s.update(sid, **replayed)
    s.respond(A2C, rid, {})
    if broken:
        s.update(sid, **replayed)
    s.prompt(sid)  # a new turn's own user message is live, not replay
    return s


def v2_replay(s: Script, sid: str, *updates: dict[str, Any]) -> None:
    rid = s.request(C2A, "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}})
    for u in updates:
        s.update(sid, **u)
    s.respond(A2C, rid, {})


@case("lifecycle.replay-message-id")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.prompt(sid)  # accepted as msg-1
    v2_replay(
        s, sid, {"sessionUpdate": "user_message", "messageId": "replay-7" if broken else "msg-1", "content": [TEXT]}
    )
    return s


@case("lifecycle.replay-chunk")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.prompt(sid)
    whole = [] if broken else [{"sessionUpdate": "agent_message", "messageId": "msg-2", "content": []}]
    v2_replay(
        s,
        sid,
        {"sessionUpdate": "user_message", "messageId": "msg-1", "content": [TEXT]},
        *whole,
        {"sessionUpdate": "agent_message_chunk", "messageId": "msg-2", "content": TEXT},
    )
    return s


@case("lifecycle.subagent-state")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.update(sid, sessionUpdate="subagent_update", sessionId="child-1", title="Explorer", state={"state": "running"})
    s.state("child-1", "running")
    s.state("child-1", "idle")
    s.update(
        sid, sessionUpdate="subagent_update", sessionId="child-1", state={"state": "running" if broken else "idle"}
    )
    return s


@case("patch.ids")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    s.update(sid, sessionUpdate="tool_call_update", toolCallId="" if broken else "c1", title="Read")
    s.update(sid, sessionUpdate="plan_update", plan={"type": "items", "planId": "" if broken else "p1", "entries": []})
    s.state(sid, "idle", stopReason="end_turn")
    return s


@case("patch.terminal-cwd")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    s.update(sid, sessionUpdate="terminal_update", terminalId="t1", command="make", cwd="/repo")
    s.update(sid, sessionUpdate="terminal_update", terminalId="t1", cwd="/other" if broken else "/repo")
    s.update(sid, sessionUpdate="terminal_update", terminalId="t2", cwd="build" if broken else "C:\\build")
    s.state(sid, "idle", stopReason="end_turn")
    return s


@case("patch.tool-title")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.open_turn(sid)
    s.update(sid, sessionUpdate="tool_call_update", toolCallId="c1", **({} if broken else {"title": "Read a.py"}))
    s.update(sid, sessionUpdate="tool_call_update", toolCallId="c1", status="completed")
    s.state(sid, "idle", stopReason="end_turn")
    return s


@both("lifecycle.after-cancel")
def _(broken: bool, v: int) -> Script:
    s = Script(v)
    sid = s.new_session()
    if v == 1:
        rid = s.prompt_request(sid)
        s.notify(C2A, "session/cancel", {"sessionId": sid})
        s.respond(A2C, rid, {"stopReason": "cancelled"})
        if broken:
            chunk(s, sid, None, text="late")
        s.prompt(sid)
        return s
    s.open_turn(sid)
    chunk(s, sid)
    s.notify(C2A, "session/cancel", {"sessionId": sid})
    s.state(sid, "idle", stopReason="cancelled")
    if broken:
        chunk(s, sid, text="late")
    return s


@both("lifecycle.cancel-response")
def _(broken: bool, v: int) -> Script:
    """session/close during a turn cancels it as session/cancel would (v1: the answer; v2: the idle)."""
    caps = {1: V1_AGENT_CAPS, 2: {"session": {}}}[v]
    s = Script(v, agent_caps=caps)
    sid = s.new_session()
    if v == 1:
        rid = s.prompt_request(sid)
        close = s.request(C2A, "session/close", {"sessionId": sid})
        s.respond(A2C, rid, {"stopReason": "end_turn" if broken else "cancelled"})
        s.respond(A2C, close, {})
        return s
    s.open_turn(sid)
    close = s.request(C2A, "session/close", {"sessionId": sid})
    s.state(sid, "idle", stopReason="end_turn" if broken else "cancelled")
    s.respond(A2C, close, {})
    return s


@case("rpc.batch-reply")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    calls: list[Any] = [{"jsonrpc": "2.0", "id": n, "method": "_x/a", "params": {}} for n in (60, 61)]
    s.send(C2A, calls)
    answers: list[Any] = [{"jsonrpc": "2.0", "id": n, "result": {}} for n in (60, 61)]
    if broken:  # one answer in an array, the other alone
        s.send(A2C, answers[:1])
        s.send(A2C, answers[1])
    else:  # together, in another order (allowed)
        s.send(A2C, answers[::-1])
    return s


@both("protocol.capability-keys")
def _(broken: bool, v: int) -> Script:
    extra = {"acme.dev/voice": True} if broken else {"_meta": {"acme.dev/voice": True}}
    if v == 1:
        return Script(1, agent_caps={**V1_AGENT_CAPS, **extra})
    return Script(2, agent_caps={"session": {}, **extra})


@both("protocol.client-capability")
def _(broken: bool, v: int) -> Script:
    """elicitation/create needs a mode the client advertised (fs and terminal: the v1 case above)."""
    caps: dict[str, Any] = {} if broken else {"elicitation": {"url": {}}}
    if v == 1:
        caps = {**V1_CLIENT_CAPS, **caps}
    s = Script(v, client_caps=caps)
    sid = s.new_session()
    params = {"sessionId": sid, "message": "Sign in", "mode": "url", "url": "https://x.test", "elicitationId": "e1"}
    rid = s.request(A2C, "elicitation/create", params)
    s.respond(C2A, rid, error={"code": -32603, "message": "Declined"})
    return s


def test_boolean_config_option_needs_the_clients_capability() -> None:
    """v1: a boolean config option only for a client that advertised session.configOptions.boolean."""
    option = {"id": "web", "name": "Web", "type": "boolean", "currentValue": True}
    cases: list[tuple[dict[str, Any], bool]] = [({}, True), ({"session": {"configOptions": {"boolean": {}}}}, False)]
    for caps, found in cases:
        s = Script(1, client_caps=caps)
        session_for(s, {"sessionId": "s-b", "configOptions": [option]})
        rules = [f.rule for f in s.check() if f.severity == "error"]
        assert rules == (["protocol.client-capability"] if found else []), rules


def test_terminal_auth_env_names_are_unique() -> None:
    env = [{"name": "TOKEN", "value": "a"}, {"name": "TOKEN", "value": "b"}]
    s = auth_script(2, [{**auth_method(2, "tui", "terminal"), "env": env}], {"terminal": {}})
    assert [(f.rule, f.message.split(" sets ")[-1]) for f in s.check()] == [
        ("protocol.auth-terminal", "env TOKEN more than once")
    ]


@both("schema.unknown-field")
def _(broken: bool, v: int) -> Script:
    s = Script(v)
    sid = s.new_session()
    rid = s.prompt_request(sid)
    extra = {"acme.dev/latency": 3} if broken else {"_meta": {"acme.dev/latency": 3}}
    s.respond(A2C, rid, {"stopReason": "end_turn", **extra} if v == 1 else {"messageId": "u1", **extra})
    if v == 2:
        s.update(sid, sessionUpdate="user_message", messageId="u1", content=[TEXT])
        s.state(sid, "running")
        s.state(sid, "idle", stopReason="end_turn")
    custom = {"sessionId": sid, "configId": "model", "type": "_acme/range", "value": 3, "step": 1}
    rid = s.request(C2A, "session/set_config_option", custom)  # a custom variant's fields are its own
    s.respond(A2C, rid, error={"code": -32602, "message": "Invalid params"})
    return s


@case("rpc.batch-empty-answer")
def _(broken: bool) -> Script:
    s, sid = v2(broken)
    s.line(C2A, b"[]")  # rpc.batch-empty (the editor's error); the agent's answer is judged here
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}
    s.send(A2C, [error] if broken else error)
    return s


# -- the tests ---------------------------------------------------------------------------------------------
def test_every_rule_has_cases() -> None:
    assert set(CASES) | set(VERSIONED) == set(RULES)


VERSION_CASES = sorted((rule, v) for rule in VERSIONED for v in (1, 2))
# what each versioned case breaks in v2 where the v1 rule name differs
_V2_NAME = {"lifecycle.cancel-response": "lifecycle.cancel-idle"}


@pytest.mark.parametrize(("rule", "version"), VERSION_CASES)
def test_both_versions_break_the_rule(rule: str, version: int) -> None:
    found = VERSIONED[rule](True, version).check()
    name = _V2_NAME.get(rule, rule) if version == 2 else rule
    hits = [f for f in found if f.rule == name]
    assert hits, f"v{version}: {name} not reported; got {[(f.rule, f.message) for f in found]}"
    assert all(f.severity == RULES[name].severity and f.message for f in hits)


@pytest.mark.parametrize(("rule", "version"), VERSION_CASES)
def test_both_versions_keep_the_rule(rule: str, version: int) -> None:
    found = VERSIONED[rule](False, version).check()
    name = _V2_NAME.get(rule, rule) if version == 2 else rule
    assert not [f for f in found if f.rule == name], found
    assert not [f for f in found if f.severity == "error"], found


@pytest.mark.parametrize("rule", sorted(CASES))
def test_broken_recording_breaks_the_rule(rule: str) -> None:
    found = CASES[rule](True).check()
    hits = [f for f in found if f.rule == rule]
    assert hits, f"{rule} not reported; got {[(f.rule, f.message) for f in found]}"
    assert all(f.severity == RULES[rule].severity and f.spec and f.message for f in hits)


# A rule about how a peer answers another rule's violation keeps that violation in its keeping recording.
ANSWERS_TO = {"rpc.batch-empty-answer": {"rpc.batch-empty"}}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_kept_recording_keeps_the_rule(rule: str) -> None:
    found = CASES[rule](False).check()
    assert not [f for f in found if f.rule == rule], found
    assert not [f for f in found if f.severity == "error" and f.rule not in ANSWERS_TO.get(rule, ())], found


def test_capabilities_unknown_without_initialize() -> None:
    """A recording without its initialize exchange: capability rules cannot judge (unknown, not absent)."""
    s = Script(1, init=False)
    s.request(C2A, "session/load", {"sessionId": "old", "cwd": "/tmp", "mcpServers": []})
    rules = s.rules(version_hint=1)
    assert "protocol.initialize-first" in rules and "protocol.agent-capability" not in rules


def test_custom_variants_in_closed_v1_unions_are_extensions() -> None:
    """v1's unions are closed, but `_`-prefixed values are extensions: info, never a schema error."""
    s = Script(1)
    sid = s.new_session()
    rid = s.prompt_request(sid, [TEXT, {"type": "_zed.dev/selection", "range": [1, 2]}])
    s.respond(A2C, rid, {"stopReason": "_zed.dev/handed_off"})
    found = s.check()
    assert {(f.rule, f.severity) for f in found} == {("schema.extension", "info")}
    assert len(found) == 2


def test_a_live_connection_is_not_judged_on_what_may_still_come() -> None:
    s = Script(2)
    sid = s.new_session()
    rid = s.prompt_request(sid)
    s.respond(A2C, rid, {"messageId": "u1"})  # the user_message report may still come
    s.state(sid, "running")
    s.notify(C2A, "session/cancel", {"sessionId": sid})  # the cancelled idle may still come
    assert s.rules(ended=False) == set()
    assert s.rules(ended=True) == {"lifecycle.user-message", "lifecycle.cancel-idle"}


@pytest.mark.parametrize(
    ("variant", "caps", "path"),
    [
        ("plan_update", {"plan": {}}, "plan"),
        ("plan_removed", {"plan": {}}, "plan"),
        ("compaction_update", {"session": {"compaction": {}}}, "session.compaction"),
        ("compaction_summary_chunk", {"session": {"compaction": {}}}, "session.compaction"),
    ],
)
def test_v1_unstable_variants_need_the_clients_capability(variant: str, caps: dict[str, Any], path: str) -> None:
    """v1: the agent sends a plan or compaction variant only to a client that advertised it (v2: no gate)."""
    for version, client_caps, found in ((1, {}, True), (1, caps, False), (2, {}, False)):
        s = Script(version, client_caps=client_caps)
        sid = s.new_session()
        s.update(sid, sessionUpdate=variant, planId="p1", compactionId="c1")
        messages = [f.message for f in s.check() if f.rule == "protocol.client-capability"]
        assert messages == ([f"{variant} but the client did not advertise {path}"] if found else []), version
