"""Capture files as other tools write them, built from the fixture scripts, for the import tests.

- `devtools_export`: an acp-devtools SessionExport v1 document the way its proxy captures (a line's
  trailing CR trimmed, blank lines dropped, `unknown` with a parseError for what is not JSON-RPC 2.0,
  timestamps in whole milliseconds, seq from 1 across both directions).
- `conductor_trace`: an ACP Rust SDK conductor `--trace` file for a chain client -> Proxy(0) -> agent:
  requests from the client to the proxy and their responses, the proxy's requests to the agent and their
  responses, the agent's notifications to the proxy, and one MCP-over-ACP event.
"""

from __future__ import annotations

import json
from typing import Any

from fixtures.recordings import BASE, V1, stream

DIRECTIONS = {"c2a": "editor-to-agent", "a2c": "agent-to-editor"}


def _lines(script: list[Any]) -> list[tuple[float, str, bytes]]:
    """(time, direction, line) as each line completed, both directions merged in time order."""
    out = []
    for direction in ("c2a", "a2c"):
        buf = b""
        for t, s, data in script:
            if s != direction or data is None:
                continue
            buf += data
            *done, buf = buf.split(b"\n")
            out += [(t, direction, line) for line in done]
    return sorted(out, key=lambda x: x[0])


def devtools_export(script: list[Any] = V1) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for t, direction, line in _lines(script):
        text = line.decode("utf-8", "replace").removesuffix("\r")
        if not text:
            continue
        msg: dict[str, Any] = {
            "seq": len(messages) + 1,
            "timestamp": int((BASE + t) * 1000),
            "direction": DIRECTIONS[direction],
        }
        error: str | None
        try:
            payload = json.loads(text)
        except ValueError as exc:
            payload, error = None, f"invalid JSON: {exc}"
        else:
            error = None if isinstance(payload, dict) and payload.get("jsonrpc") == "2.0" else "not JSON-RPC 2.0"
            payload = payload if error is None else None
        if payload is None:
            msg.update(kind="unknown", raw=text, payload=None, parseError=error)
        else:
            kind = (
                "request"
                if "method" in payload and "id" in payload
                else "notification"
                if "method" in payload
                else "error"
                if "error" in payload
                else "response"
            )
            msg.update(kind=kind, raw=text, payload=payload)
            if "method" in payload:
                msg["method"] = payload["method"]
            if "id" in payload:
                msg["rpcId"] = payload["id"]
        messages.append(msg)
    return {
        "version": 1,
        "exportedAt": int(BASE * 1000) + 60_000,
        "tool": {"name": "acp-devtools", "version": "0.3.0"},
        "session": {
            "id": 7,
            "name": None,
            "agentCommand": "fixture-agent --acp",
            "clientName": "Zed",
            "startedAt": int(BASE * 1000),
            "endedAt": int(BASE * 1000) + 6100,
        },
        "messages": messages,
    }


def conductor_trace(session_id: str = "trace-sess") -> bytes:
    """A trace through one proxy: what the agent hop holds is a whole conversation."""
    events: list[dict[str, Any]] = []
    t = [0.0]

    def ev(**kw: Any) -> None:
        t[0] += 0.01
        events.append({"type": kw.pop("type"), "ts": round(t[0], 3), **kw})

    init = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}, "clientInfo": {"name": "yopo"}}
    ev(type="request", protocol="acp", **{"from": "Client", "to": "Proxy(0)"}, id=0, method="initialize", params=init)
    ev(
        type="request",
        protocol="acp",
        **{"from": "Proxy(0)", "to": "Agent"},
        id="p-0",
        method="initialize",
        params=init,
    )
    result = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}, "agentInfo": {"name": "testy"}}
    ev(type="response", **{"from": "Agent", "to": "Proxy(0)"}, id="p-0", is_error=False, payload=result)
    ev(type="response", **{"from": "Proxy(0)", "to": "Client"}, id=0, is_error=False, payload=result)
    ev(type="request", protocol="acp", **{"from": "Proxy(0)", "to": "Agent"}, id="p-1", method="session/new",
       params={"cwd": "/w", "mcpServers": []})  # fmt: skip
    ev(
        type="response",
        **{"from": "Agent", "to": "Proxy(0)"},
        id="p-1",
        is_error=False,
        payload={"sessionId": session_id},
    )
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "Greet the conductor"}]}
    ev(
        type="request",
        protocol="acp",
        **{"from": "Proxy(0)", "to": "Agent"},
        id="p-2",
        method="session/prompt",
        params=prompt,
    )
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hello from testy"}}
    ev(type="notification", protocol="acp", **{"from": "Agent", "to": "Proxy(0)"}, method="session/update",
       params={"sessionId": session_id, "update": update})  # fmt: skip
    ev(type="request", protocol="mcp", **{"from": "Agent", "to": "Proxy(0)"}, id="m-1", method="tools/list", params={})
    ev(
        type="response",
        **{"from": "Agent", "to": "Proxy(0)"},
        id="p-2",
        is_error=False,
        payload={"stopReason": "end_turn"},
    )
    ev(type="request", protocol="acp", **{"from": "Proxy(0)", "to": "Agent"}, id="p-3", method="session/set_mode",
       params={"sessionId": session_id, "modeId": "x"})  # fmt: skip
    ev(type="response", **{"from": "Agent", "to": "Proxy(0)"}, id="p-3", is_error=True,
       payload={"code": -32601, "message": "Method not found"})  # fmt: skip
    return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in events)


def v1_bytes(direction: str) -> bytes:
    return stream(V1, direction)
