"""`acp-relay demo`: a tiny scripted ACP agent and client talking through the relay.

Both peers ship with the package so the demo needs nothing but Python. The agent speaks v1 as real agents
do today: initialize, session/new, one prompt turn with streamed chunks, a tool call, a permission request
and a file read, then end_turn. Run the agent alone with `python -m acp_relay.demo.command agent`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from ..protocol import vocab


def _send(out: BinaryIO, msg: dict[str, Any]) -> None:
    out.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
    out.flush()


def _messages(inp: IO[bytes]) -> Iterator[dict[str, Any]]:
    for line in inp:
        if line.strip():
            yield json.loads(line)


def agent(inp: BinaryIO = sys.stdin.buffer, out: BinaryIO = sys.stdout.buffer) -> None:
    """A scripted v1 agent: deterministic, no model. One function, read top to bottom as the conversation
    it plays (its length is the script's)."""
    incoming = _messages(inp)
    sid = "demo-session-1"

    def update(u: dict[str, Any]) -> None:
        _send(out, {"jsonrpc": "2.0", "method": vocab.UPDATE, "params": {"sessionId": sid, "update": u}})

    def call(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        _send(out, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        for msg in incoming:
            if msg.get("id") == rid and "method" not in msg:
                return msg
        raise EOFError

    for msg in incoming:
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method == vocab.INITIALIZE:
            _send(
                out,
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "protocolVersion": 1,
                        "agentCapabilities": {"loadSession": False},
                        "agentInfo": {"name": "demo-agent", "version": "1.0"},
                        "authMethods": [],
                    },
                },
            )
        elif method == vocab.SESSION_NEW:
            _send(out, {"jsonrpc": "2.0", "id": rid, "result": {"sessionId": sid}})
        elif method == vocab.PROMPT:
            path = params.get("prompt", [{}])[0].get("text", "").split()[-1]
            for text in ("Let me ", "read that ", "file."):
                update(
                    {
                        "sessionUpdate": vocab.AGENT_MESSAGE_CHUNK,
                        "messageId": "m1",
                        "content": {"type": "text", "text": text},
                    }
                )
            update(
                {
                    "sessionUpdate": vocab.TOOL_CALL,
                    "toolCallId": "call-1",
                    "title": f"Read {path}",
                    "kind": "read",
                    "status": "pending",
                }
            )
            answer = call(
                0,
                vocab.REQUEST_PERMISSION,
                {
                    "sessionId": sid,
                    "toolCall": {"toolCallId": "call-1"},
                    "options": [
                        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "deny", "name": "Deny", "kind": "reject_once"},
                    ],
                },
            )
            allowed = answer.get("result", {}).get("outcome", {}).get("optionId") == "allow"
            text = call(1, vocab.FS_READ, {"sessionId": sid, "path": path})["result"]["content"] if allowed else ""
            update(
                {
                    "sessionUpdate": vocab.TOOL_CALL_UPDATE,
                    "toolCallId": "call-1",
                    "status": "completed" if allowed else "failed",
                    "content": [{"type": "content", "content": {"type": "text", "text": text}}],
                }
            )
            update(
                {
                    "sessionUpdate": vocab.AGENT_MESSAGE_CHUNK,
                    "messageId": "m2",
                    "content": {"type": "text", "text": f"The file has {len(text.splitlines())} lines."},
                }
            )
            _send(out, {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
        elif rid is not None:
            _send(
                out, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}}
            )


def client(agent_argv: list[str], path: str) -> int:
    """A scripted v1 client: spawns agent_argv and plays one turn, allowing the tool call."""
    proc = subprocess.Popen(agent_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    incoming = _messages(proc.stdout)

    def request(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        _send(proc.stdin, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})  # type: ignore[arg-type]
        for msg in incoming:
            if "method" in msg and "id" in msg:  # the agent asks us something
                if msg["method"] == vocab.REQUEST_PERMISSION:
                    result: dict[str, Any] = {"outcome": {"outcome": "selected", "optionId": "allow"}}
                else:
                    result = {"content": Path(msg["params"]["path"]).read_text()}
                _send(proc.stdin, {"jsonrpc": "2.0", "id": msg["id"], "result": result})  # type: ignore[arg-type]
            elif msg.get("id") == rid:
                return msg
        raise EOFError("the agent closed its output")

    request(
        0,
        vocab.INITIALIZE,
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True}},
            "clientInfo": {"name": "demo-client", "version": "1.0"},
        },
    )
    sid = request(1, vocab.SESSION_NEW, {"cwd": os.getcwd(), "mcpServers": []})["result"]["sessionId"]
    request(2, vocab.PROMPT, {"sessionId": sid, "prompt": [{"type": "text", "text": f"Summarize {path}"}]})
    proc.stdin.close()
    return proc.wait()


def run_demo(db_path: Path) -> int:
    """Relay the demo agent and client through `acp-relay run` into db_path, then show the recording."""
    with tempfile.TemporaryDirectory() as tmp:
        notes = Path(tmp) / "notes.txt"
        notes.write_text("acp-relay demo\nline two\nline three\n")
        relay = [
            sys.executable,
            "-m",
            "acp_relay",
            "run",
            "--db",
            str(db_path),
            "--label",
            "demo",
            "--",
            sys.executable,
            "-m",
            "acp_relay.demo.command",
            "agent",
        ]
        status = client(relay, str(notes))
    if status != 0:
        print(f"acp-relay demo: the relay exited with status {status}", file=sys.stderr)
        return status
    print(f"Recorded into {db_path}\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["agent"]:
        agent()
    else:
        sys.exit("usage: python -m acp_relay.demo.command agent")
