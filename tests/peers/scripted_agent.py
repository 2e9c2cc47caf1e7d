"""A scripted ACP v1 agent that answers the way real agents answer real editors (no SDK: exact bytes).

Run: ``python tests/peers/scripted_agent.py jetbrains|zed`` (NDJSON JSON-RPC on stdin/stdout).

- Every request gets its answer with the request's own id, whatever its type (Zed sends UUID strings).
- ``session/new`` is answered with ``sessionId`` = the request's ``cwd`` mapped through SESSIONS; in
  ``zed`` mode the first ``session/new`` is held until the second arrives, and the second is answered
  first (two creations in flight, answered out of order, as Zed sees with some agents).
- ``session/prompt`` streams ``agent_message_chunk`` "Hi " + the prompt's text, then ends ``end_turn``.
The process exits at EOF on stdin.
"""

from __future__ import annotations

import json
import sys
from typing import Any

SESSIONS = {"/work/a": "zs-a", "/work/b": "zs-b", "/work/jb": "jb-session-1"}


def _write(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **msg}, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _answer(req: dict[str, Any]) -> None:
    method, rid, params = req.get("method"), req.get("id"), req.get("params") or {}
    if method == "initialize":
        _write(
            {
                "id": rid,
                "result": {
                    "protocolVersion": 1,
                    "agentCapabilities": {"loadSession": True},
                    "agentInfo": {"name": "scripted-agent", "version": "1.0"},
                    "authMethods": [],
                },
            }
        )
    elif method == "session/new":
        _write({"id": rid, "result": {"sessionId": SESSIONS.get(str(params.get("cwd")), "other")}})
    elif method == "session/prompt":
        sid = params.get("sessionId")
        said = "".join(b.get("text", "") for b in params.get("prompt") or [] if isinstance(b, dict))
        text = {"type": "text", "text": "Hi " + said}
        _write(
            {
                "method": "session/update",
                "params": {"sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk", "content": text}},
            }
        )
        _write({"id": rid, "result": {"stopReason": "end_turn"}})
    elif "id" in req and method is not None:
        _write({"id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}})


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "jetbrains"
    held: list[dict[str, Any]] = []
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        if not isinstance(req, dict):
            continue
        if mode == "zed" and req.get("method") == "session/new":
            held.append(req)
            if len(held) == 2:
                for r in reversed(held):
                    _answer(r)
                held.clear()
            continue
        _answer(req)


if __name__ == "__main__":
    main()
