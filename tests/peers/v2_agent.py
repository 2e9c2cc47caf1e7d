"""A small scripted ACP v2-draft agent for `acp-relay rerun` tests (standard library only).

Prompt ``count N``: accepts the prompt (response with its messageId), reports ``running``, then streams
N chunks 0.2 s apart, watching stdin between them: a ``session/cancel`` ends the turn at once with an idle
``state_update`` (stopReason ``cancelled``); otherwise it ends with ``end_turn``. Exits at stdin EOF.
"""

from __future__ import annotations

import json
import os
import select
import sys

GAP = 0.2
_buf = b""


def send(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def update(sid: str, body: dict) -> None:
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": body}})


def read_line(timeout: float | None) -> bytes | None:
    """The next line, b"" at EOF, None when nothing came within `timeout`."""
    global _buf
    while b"\n" not in _buf:
        ready, _, _ = select.select([0], [], [], timeout)
        if not ready:
            return None
        chunk = os.read(0, 65536)
        if not chunk:
            return b""
        _buf += chunk
    line, _, _buf = _buf.partition(b"\n")
    return line


def turn(sid: str, rid: object, text: str, n: int) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": {"messageId": f"user-{n}"}})
    update(
        sid, {"sessionUpdate": "user_message", "messageId": f"user-{n}", "content": [{"type": "text", "text": text}]}
    )
    update(sid, {"sessionUpdate": "state_update", "state": "running"})
    count = int(text.split()[1]) if text.startswith("count ") else 1
    for i in range(count):
        chunk = {"type": "text", "text": f"chunk {i + 1}. "}
        update(sid, {"sessionUpdate": "agent_message_chunk", "messageId": f"agent-{n}", "content": chunk})
        line = read_line(GAP)
        if line == b"":
            sys.exit(0)
        if line and json.loads(line).get("method") == "session/cancel":
            update(sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"})
            return
    update(sid, {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"})


def main() -> None:
    prompts = 0
    while True:
        line = read_line(None)
        if not line:
            return
        msg = json.loads(line)
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method == "initialize":
            info = {"name": "v2-test-agent", "version": "1.0"}
            send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 2, "capabilities": {}, "info": info}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "v2-sess"}})
        elif method == "session/prompt":
            prompts += 1
            text = "".join(b.get("text", "") for b in params.get("prompt", []))
            turn(str(params.get("sessionId")), rid, text, prompts)
        elif rid is not None and method is not None:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main()
