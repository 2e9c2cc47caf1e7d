"""`acp-relay demo`: a tiny scripted ACP agent and client talking through the relay.

Both peers ship with the package so the demo needs nothing but Python. The agent speaks v1 as real agents
do today: initialize, session/new, one prompt turn with streamed chunks, a tool call, a permission request
and a file read, then end_turn. Run the agent alone with `python -m acp_relay.demo.command agent`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from ..fdio import spawn
from ..protocol import vocab
from ..protocol.words import counted

log = logging.getLogger(__name__)


def _send(out: BinaryIO, msg: dict[str, Any]) -> None:
    out.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
    out.flush()


def _messages(inp: IO[bytes]) -> Iterator[dict[str, Any]]:
    for line in inp:
        if line.strip():
            yield json.loads(line)


SID = "demo-session-1"


class _Agent:
    """A scripted v1 agent: deterministic, no model. Each method answers one request, read top to bottom
    as the conversation it plays."""

    def __init__(self, inp: BinaryIO, out: BinaryIO) -> None:
        self.incoming, self.out = _messages(inp), out

    def update(self, u: dict[str, Any]) -> None:
        _send(self.out, {"jsonrpc": "2.0", "method": vocab.UPDATE, "params": {"sessionId": SID, "update": u}})

    def call(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        _send(self.out, {"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        for msg in self.incoming:
            if msg.get("id") == rid and "method" not in msg:
                return msg
        raise EOFError

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": False},
            "agentInfo": {"name": "demo-agent", "version": "1.0"},
            "authMethods": [],
        }

    def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"sessionId": SID}

    def prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        path = params.get("prompt", [{}])[0].get("text", "").split()[-1]
        for text in ("Let me ", "read that ", "file."):
            self.update(
                {
                    "sessionUpdate": vocab.AGENT_MESSAGE_CHUNK,
                    "messageId": "m1",
                    "content": {"type": "text", "text": text},
                }
            )
        self.update(
            {
                "sessionUpdate": vocab.TOOL_CALL,
                "toolCallId": "call-1",
                "title": f"Read {path}",
                "kind": "read",
                "status": "pending",
            }
        )
        options = [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "deny", "name": "Deny", "kind": "reject_once"},
        ]
        answer = self.call(
            0,
            vocab.REQUEST_PERMISSION,
            {"sessionId": SID, "toolCall": {"toolCallId": "call-1"}, "options": options},
        )
        allowed = answer.get("result", {}).get("outcome", {}).get("optionId") == "allow"
        text = self.call(1, vocab.FS_READ, {"sessionId": SID, "path": path})["result"]["content"] if allowed else ""
        self.update(
            {
                "sessionUpdate": vocab.TOOL_CALL_UPDATE,
                "toolCallId": "call-1",
                "status": "completed" if allowed else "failed",
                "content": [{"type": "content", "content": {"type": "text", "text": text}}],
            }
        )
        self.update(
            {
                "sessionUpdate": vocab.AGENT_MESSAGE_CHUNK,
                "messageId": "m2",
                "content": {"type": "text", "text": f"The file has {counted(len(text.splitlines()), 'line')}."},
            }
        )
        return {"stopReason": "end_turn"}


def agent(inp: BinaryIO = sys.stdin.buffer, out: BinaryIO = sys.stdout.buffer) -> None:
    """The scripted agent on stdio: each request answered by its method of _Agent."""
    demo = _Agent(inp, out)
    handlers = {vocab.INITIALIZE: demo.initialize, vocab.SESSION_NEW: demo.new_session, vocab.PROMPT: demo.prompt}
    for msg in demo.incoming:
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        handler = handlers.get(method) if isinstance(method, str) else None
        if handler is not None:
            _send(out, {"jsonrpc": "2.0", "id": rid, "result": handler(params)})
        elif rid is not None:
            _send(
                out, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}}
            )


def client(agent_argv: list[str], path: str) -> int:
    """A scripted v1 client: spawns agent_argv and plays one turn, allowing the tool call."""
    proc = spawn(agent_argv, "inherited", stderr=None)  # our group: a Ctrl-C reaches the relay too
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
        log.warning(f"the relay exited with status {status}")
        return status
    print(f"Recorded into {db_path}\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["agent"]:
        agent()
    else:
        sys.exit("usage: python -m acp_relay.demo.command agent")
