"""Fixture databases the tests share, written through the recorder's own row builder (store.scripted).

- `recordings(path)`: the show/stats fixtures (tests/fixtures/recordings.py), every shape of traffic.
- `shared_ids(path)`: what real editors make: three connections whose session is `s1` (every editor that
  numbers sessions), and one whose agent made up a UUID; each a whole turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fixtures.recordings import build

from acp_relay.store import db
from acp_relay.store.scripted import ConnectionWriter

BASE = 1_767_225_600.0
UUID = "6f1c2a9e-3b7d-4e58-9a0c-1d2e3f405162"
SHARED = "s1"


def recordings(path: Path) -> Path:
    return build(path)


def _line(**kw: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **kw}, separators=(",", ":")).encode()


def one_turn(sid: str, words: str) -> list[tuple[str, bytes]]:
    """initialize, session/new answered with `sid`, one prompt streamed back and ended."""
    return [
        ("c2a", _line(id=0, method="initialize", params={"protocolVersion": 1, "clientCapabilities": {}})),
        ("a2c", _line(id=0, result={"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []})),
        ("c2a", _line(id=1, method="session/new", params={"cwd": "/work", "mcpServers": []})),
        ("a2c", _line(id=1, result={"sessionId": sid})),
        (
            "c2a",
            _line(id=2, method="session/prompt", params={"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}),
        ),
        (
            "a2c",
            _line(
                method="session/update",
                params={
                    "sessionId": sid,
                    "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": words}},
                },
            ),
        ),
        ("a2c", _line(id=2, result={"stopReason": "end_turn"})),
    ]


def shared_ids(path: Path) -> Path:
    """Connections 1-3 hold session `s1`, connection 4 holds UUID (see the module docstring)."""
    conn = db.connect(path)
    for i, (sid, words) in enumerate(
        [(SHARED, "one words"), (SHARED, "two words"), (SHARED, "three words"), (UUID, "uuid words")]
    ):
        conn.execute("BEGIN")
        w = ConnectionWriter(conn, started_at=BASE + 60 * i, argv=["agent"], label=f"conn {i + 1}")
        t = 0.0
        for direction, raw in one_turn(sid, words):
            t += 0.01
            w.line(direction, raw, t)
        w.close(ended_mono=t + 0.01)
        conn.execute("COMMIT")
    conn.close()
    return path
