"""The SDK peers' scenario, shared by the tests that put the relay, show or replay between them.

`run_client` runs tests/peers/sdk_client.py against an agent command (the SDK agent directly, or a relay or
`acp-relay replay` in front of it); `assert_scenario` checks what the client saw.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

PEERS = Path(__file__).resolve().parent
SDK_AGENT = PEERS / "sdk_agent.py"
SDK_CLIENT = PEERS / "sdk_client.py"
NOTES = "first line of notes\nsecond line, caf\u00e9 \u2713\n"


def run_client(agent_cmd: list[str], file_path: Path, cwd: Path, timeout: float = 60.0) -> dict[str, Any]:
    """Run sdk_client.py against ``agent_cmd`` and return its parsed JSON result."""
    proc = subprocess.run(
        [sys.executable, str(SDK_CLIENT), "--file", str(file_path), "--", *agent_cmd],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"client failed ({proc.returncode}):\n{proc.stderr}"
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, f"expected exactly one JSON line on stdout, got: {proc.stdout!r}"
    return json.loads(lines[0])


def assert_scenario(result: dict[str, Any], file_content: str) -> None:
    """The assertions any (relayed or direct) run of the scenario must satisfy."""
    assert result["session_id"] == "sess-1"
    assert result["stop_reasons"] == ["end_turn", "cancelled"]
    assert result["agent_text"] == "Hello from the SDK agent. File read complete."
    assert result["permission_requests"] == 1
    assert result["file_reads"] == 1
    assert result["agent_exit_code"] == 0

    kinds = [u["sessionUpdate"] for u in result["updates"]]
    assert kinds[:6] == ["agent_message_chunk"] * 3 + ["tool_call", "tool_call_update", "agent_message_chunk"]
    tool_call = result["updates"][3]
    assert (tool_call["toolCallId"], tool_call["title"], tool_call["kind"], tool_call["status"]) == (
        "call-1",
        "Read notes",
        "read",
        "pending",
    )
    done = result["updates"][4]
    assert done["status"] == "completed"
    assert done["content"] == [{"type": "content", "content": {"type": "text", "text": file_content}}]

    load = result["load_updates"]
    assert load, "session/load replayed nothing"
    assert result["updates"][-len(load) :] == load
    assert [u["sessionUpdate"] for u in load].count("user_message_chunk") == 2
    assert all("messageId" in u for u in load if u["sessionUpdate"].endswith("_message_chunk"))
    assert load[0]["content"]["text"].startswith("hello ")
    replayed_text = "".join(u["content"]["text"] for u in load if u["sessionUpdate"] == "agent_message_chunk")
    assert replayed_text.startswith(result["agent_text"])
