"""Build a small database from scripted frames, through the real Tracker and the recorder's own rows.

build_db(path, [(mono, "c2a" | "a2c", message dict or raw bytes), ...], ...)  # one connection per script
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp_relay.store import db
from acp_relay.store.scripted import ConnectionWriter

BASE = 1_767_225_600.0


def line(msg: Any) -> bytes:
    return msg if isinstance(msg, bytes) else json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode()


def build_db(path: Path, *scripts: list[tuple[float, str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = db.connect(path)
    for n, script in enumerate(scripts):
        conn.execute("BEGIN")
        w = ConnectionWriter(conn, started_at=BASE + 3600 * n, argv=["scripted"], cwd="/w")
        end = 0.0
        for mono, direction, msg in script:
            end = max(end, mono)
            w.feed(direction, line(msg) + b"\n", mono)
        w.close(ended_mono=end + 0.01)
        conn.execute("COMMIT")
    conn.close()
    return path


def req(rid: Any, method: str, params: Any) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def res(rid: Any, result: Any) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def upd(sid: str, **update: Any) -> dict:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}}


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def v2_head(sid: str) -> list[tuple[float, str, Any]]:
    return [
        (0.0, "c2a", req(0, "initialize", {"protocolVersion": 2, "capabilities": {}})),
        (0.01, "a2c", res(0, {"protocolVersion": 2, "capabilities": {}, "info": {"name": "a", "version": "1"}})),
        (0.02, "c2a", req(1, "session/new", {"cwd": "/w", "mcpServers": []})),
        (0.03, "a2c", res(1, {"sessionId": sid})),
    ]


def overlapping_prompts(sid: str = "s2") -> list[tuple[float, str, Any]]:
    """Item 2 of issue 10: prompt "two" arrives while "one" is running (v2); each turn ends at its own idle."""
    return v2_head(sid) + [
        (1.0, "c2a", req(2, "session/prompt", {"sessionId": sid, "prompt": [text("one")]})),
        (1.1, "a2c", res(2, {"messageId": "u1"})),
        (1.1, "a2c", upd(sid, sessionUpdate="user_message", messageId="u1", content=[text("one")])),
        (1.2, "a2c", upd(sid, sessionUpdate="state_update", state="running")),
        (1.3, "a2c", upd(sid, sessionUpdate="agent_message_chunk", messageId="a1", content=text("working"))),
        (1.5, "c2a", req(3, "session/prompt", {"sessionId": sid, "prompt": [text("two")]})),
        (1.7, "a2c", upd(sid, sessionUpdate="agent_message_chunk", messageId="a1", content=text(" done"))),
        (1.8, "a2c", upd(sid, sessionUpdate="state_update", state="idle", stopReason="end_turn")),
        (1.9, "a2c", res(3, {"messageId": "u2"})),
        (1.9, "a2c", upd(sid, sessionUpdate="user_message", messageId="u2", content=[text("two")])),
        (2.0, "a2c", upd(sid, sessionUpdate="state_update", state="running")),
        (3.0, "a2c", upd(sid, sessionUpdate="agent_message_chunk", messageId="a2", content=text("second"))),
        (3.5, "a2c", upd(sid, sessionUpdate="state_update", state="idle", stopReason="end_turn")),
    ]
