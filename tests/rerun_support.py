"""Helpers for the rerun and diff tests: record the conversations they rerun, through the real relay."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers import relay_cmd
from peers.replay_client import RawClient

PEERS = Path(__file__).resolve().parent / "peers"
SDK_AGENT = [sys.executable, str(PEERS / "sdk_agent.py")]
V2_AGENT = [sys.executable, str(PEERS / "v2_agent.py")]


def acp_relay(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_relay", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def _is_update(variant: str) -> Any:
    return lambda m: m.get("method") == "session/update" and m["params"]["update"].get("sessionUpdate") == variant


def record_v1(db: Path, cwd: Path, notes: Path) -> str:
    """initialize, session/new, "hello NOTES" (permission allowed, file read), "slow" cancelled after its first
    chunk: the SDK agent through `acp-relay run`. Returns the session id."""
    client = RawClient(relay_cmd(db, *SDK_AGENT, label="original"))
    init = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}}}
    client.request("initialize", {**init, "clientInfo": {"name": "test-editor", "version": "1"}}, 0)
    new, _ = client.request("session/new", {"cwd": str(cwd), "mcpServers": []}, 1)
    sid = new["result"]["sessionId"]

    def answer(msg: dict) -> Any:
        if msg["method"] == "session/request_permission":
            return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
        if msg["method"] == "fs/read_text_file":
            return {"content": Path(msg["params"]["path"]).read_text()}
        return {}

    prompt = [{"type": "text", "text": f"hello {notes}"}]
    resp, _ = client.request("session/prompt", {"sessionId": sid, "prompt": prompt}, 2, on_request=answer)
    assert resp["result"]["stopReason"] == "end_turn", resp
    client.send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "slow"}]},
        }
    )
    client.collect(_is_update("agent_message_chunk"))
    client.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    resp, _ = client.until_response(3)
    assert resp["result"]["stopReason"] == "cancelled", resp
    assert client.close() == 0, client.log()
    return sid


def record_v2(db: Path, cwd: Path) -> str:
    """The v2 agent: "count 2" to its end, then "count 50" cancelled after its second update."""
    client = RawClient(relay_cmd(db, *V2_AGENT, label="original v2"))
    client.request("initialize", {"protocolVersion": 2, "capabilities": {}, "info": {"name": "ed", "version": "1"}}, 0)
    new, _ = client.request("session/new", {"cwd": str(cwd), "mcpServers": []}, 1)
    sid = new["result"]["sessionId"]

    def idle(m: dict) -> bool:
        return _is_update("state_update")(m) and m["params"]["update"]["state"] == "idle"

    for rid, text, cancel in ((2, "count 2", False), (3, "count 50", True)):
        client.send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
            }
        )
        if cancel:
            seen = 0

            def second(m: dict) -> bool:
                nonlocal seen
                seen += m.get("method") == "session/update"
                return seen == 3  # user_message, running, chunk 1: cancel after the third update

            client.collect(second)
            client.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
        frames = client.collect(idle)
        assert json.loads(frames[-1])["params"]["update"]["stopReason"] == ("cancelled" if cancel else "end_turn")
    assert client.close() == 0, client.log()
    return sid
