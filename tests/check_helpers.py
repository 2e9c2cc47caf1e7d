"""Small builders for `acp-relay check` tests: a scripted conversation as frames, checked by the engine.

s = Script(version=2)            # initialize exchange included
sid = s.new_session()
s.prompt(sid)                    # a well-behaved v2 turn
assert s.rules() == set()
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_relay.protocol.check.engine import Checker
from acp_relay.protocol.check.rules import Finding
from acp_relay.protocol.jsonrpc import A2C, C2A

TEXT = {"type": "text", "text": "hello"}

V1_CLIENT_CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
V1_AGENT_CAPS = {
    "loadSession": True,
    "promptCapabilities": {"image": True, "audio": True, "embeddedContext": True},
    "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
}
V2_AGENT_CAPS: dict[str, Any] = {"session": {"prompt": {"image": {}, "audio": {}, "embeddedContext": {}}}}


class Script:
    """Frames of one connection, built message by message."""

    def __init__(
        self,
        version: int = 2,
        *,
        init: bool = True,
        client_caps: Any = None,
        agent_caps: Any = None,
        answer_version: Any = None,
    ) -> None:
        self.version = version
        self.frames: list[tuple[str, bytes]] = []
        self.next_id = {C2A: 0, A2C: 0}
        self.sessions = 0
        self.messages = 0
        self.unterminated: set[int] = set()  # frame numbers whose line had no final LF
        self.times: list[float] = []  # recorder clock per frame: 250 ms apart unless `after` says otherwise
        self.next_gap: float | None = None
        if init:
            self.initialize(client_caps, agent_caps, answer_version)

    # -- raw ------------------------------------------------------------------------------------------------
    def line(self, direction: str, raw: bytes) -> int:
        gap = 0.25 if self.next_gap is None else self.next_gap
        self.next_gap = None
        self.times.append((self.times[-1] if self.times else 0.0) + gap)
        self.frames.append((direction, raw))
        return len(self.frames)

    def after(self, ms: float) -> Script:
        """The next frame comes `ms` milliseconds after the previous one."""
        self.next_gap = ms / 1000
        return self

    def send(self, direction: str, obj: Any) -> int:
        """Append one message; returns its frame number (1-based)."""
        return self.line(direction, orjson.dumps(obj))

    def request(self, direction: str, method: str, params: Any = None, rpc_id: Any = None) -> Any:
        if rpc_id is None:
            rpc_id = self.next_id[direction]
            self.next_id[direction] += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(direction, msg)
        return rpc_id

    def respond(self, direction: str, rpc_id: Any, result: Any = None, error: Any = None) -> int:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id}
        if error is not None:
            msg["error"] = error
        else:
            msg["result"] = {} if result is None else result
        return self.send(direction, msg)

    def notify(self, direction: str, method: str, params: Any) -> int:
        return self.send(direction, {"jsonrpc": "2.0", "method": method, "params": params})

    def update(self, sid: str, **update: Any) -> int:
        return self.notify(A2C, "session/update", {"sessionId": sid, "update": update})

    def state(self, sid: str, state: str, **extra: Any) -> int:
        return self.update(sid, sessionUpdate="state_update", state=state, **extra)

    # -- conversation pieces --------------------------------------------------------------------------------
    def initialize(self, client_caps: Any = None, agent_caps: Any = None, answer_version: Any = None) -> None:
        v = self.version
        if v == 1:
            params = {
                "protocolVersion": 1,
                "clientCapabilities": V1_CLIENT_CAPS if client_caps is None else client_caps,
            }
            result = {
                "protocolVersion": 1,
                "agentCapabilities": V1_AGENT_CAPS if agent_caps is None else agent_caps,
                "agentInfo": {"name": "agent", "version": "1"},
            }
        else:
            params = {
                "protocolVersion": v,
                "info": {"name": "editor", "version": "1"},
                "capabilities": client_caps or {},
            }
            result = {
                "protocolVersion": v,
                "info": {"name": "agent", "version": "1"},
                "capabilities": V2_AGENT_CAPS if agent_caps is None else agent_caps,
            }
        if answer_version is not None:
            result["protocolVersion"] = answer_version
        rid = self.request(C2A, "initialize", params)
        self.respond(A2C, rid, result)

    def new_session(self, sid: str | None = None) -> str:
        self.sessions += 1
        sid = sid or f"sess-{self.sessions}"
        params: dict[str, Any] = {"cwd": "/tmp"}
        if self.version == 1:
            params["mcpServers"] = []
        rid = self.request(C2A, "session/new", params)
        self.respond(A2C, rid, {"sessionId": sid})
        return sid

    def new_message_id(self) -> str:
        self.messages += 1
        return f"msg-{self.messages}"

    def prompt_request(self, sid: str, prompt: Any = None) -> Any:
        return self.request(C2A, "session/prompt", {"sessionId": sid, "prompt": prompt or [TEXT]})

    def prompt(self, sid: str, text: str = "hi", *, stop: str = "end_turn") -> None:
        """A complete, well-behaved turn of the connection's version."""
        rid = self.prompt_request(sid)
        if self.version == 1:
            self.update(sid, sessionUpdate="agent_message_chunk", content={"type": "text", "text": text})
            self.respond(A2C, rid, {"stopReason": stop})
            return
        uid, aid = self.new_message_id(), self.new_message_id()
        self.respond(A2C, rid, {"messageId": uid})
        self.update(sid, sessionUpdate="user_message", messageId=uid, content=[TEXT])
        self.state(sid, "running")
        self.update(sid, sessionUpdate="agent_message_chunk", messageId=aid, content={"type": "text", "text": text})
        self.state(sid, "idle", stopReason=stop)

    def open_turn(self, sid: str) -> str:
        """A v2 prompt accepted and running (the caller ends it); returns the user messageId."""
        rid = self.prompt_request(sid)
        uid = self.new_message_id()
        self.respond(A2C, rid, {"messageId": uid})
        self.update(sid, sessionUpdate="user_message", messageId=uid, content=[TEXT])
        self.state(sid, "running")
        return uid

    # -- checking -------------------------------------------------------------------------------------------
    def check(self, *, ended: bool = True, version_hint: int | None = None) -> list[Finding]:
        checker = Checker(version_hint)
        out: list[Finding] = []
        for n, (direction, raw) in enumerate(self.frames, 1):
            out += checker.feed(n, direction, raw, unterminated=n in self.unterminated, mono=self.times[n - 1])
        out += checker.end(ended)
        return out

    def rules(self, *, min_severity: str = "info", **kw: Any) -> set[str]:
        order = ["info", "warning", "error"]
        return {f.rule for f in self.check(**kw) if order.index(f.severity) >= order.index(min_severity)}


def record(script: Script, db_path: Any, *, status: str = "ended") -> Any:
    """Write the script into a database as the recorder would (store.scripted.ConnectionWriter); one more
    connection per call. Returns db_path."""
    from acp_relay.store import db
    from acp_relay.store.scripted import ConnectionWriter

    conn = db.connect(db_path)
    conn.execute("BEGIN")
    import os

    pid = os.getpid() if status == "running" else 4242  # a live relay's pid keeps the connection running
    w = ConnectionWriter(conn, started_at=1_767_225_600.0, argv=["agent"], cwd="/tmp", relay_pid=pid)
    t = 0.0
    for n, (direction, raw) in enumerate(script.frames, 1):
        t = script.times[n - 1]
        w.feed(direction, raw if n in script.unterminated else raw + b"\n", t)
    for direction in (C2A, A2C):
        w.eof(direction, t)
    if status == "running":
        w.flush()
    else:
        w.close(ended_mono=t + 0.01, status=status)
    conn.execute("COMMIT")
    conn.close()
    return db_path
