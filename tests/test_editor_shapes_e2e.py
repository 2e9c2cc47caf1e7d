"""Frames shaped like real editors' through `run`, `show`, `show --transcript`, `stats` and `replay` (issue 10).

- JetBrains: a top-level `"type"` member first, `jsonrpc` last, and a model-gateway token in
  `initialize` `params._meta.proxyConfig.proxies[].proxy.headers.proxy_key`. The token must reach the agent
  byte for byte and never any file of the database directory (main file, -wal, -shm).
- Zed: UUID string ids, two `session/new` in flight answered out of order.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import relay_cmd, rows

AGENT = Path(__file__).resolve().parent / "peers" / "scripted_agent.py"
TOKEN = "jb-gw-7f3c9e1d-planted-proxy-key"
JB_TYPE = "com.agentclientprotocol.rpc.JsonRpcRequest"


def jb(rid: int, method: str, params: dict) -> bytes:
    """A JetBrains frame: `type` first, `jsonrpc` last."""
    return (
        json.dumps({"type": JB_TYPE, "id": rid, "method": method, "params": params, "jsonrpc": "2.0"}).encode() + b"\n"
    )


def zed(rid: str, method: str, params: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n"


JB_INPUT = (
    jb(
        0,
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False},
            "clientInfo": {"name": "WebStorm", "version": "2025.3"},
            "_meta": {
                "proxyConfig": {
                    "proxies": [
                        {"name": "ai-gateway", "proxy": {"url": "https://gw.example", "headers": {"proxy_key": TOKEN}}}
                    ]
                }
            },
        },
    )
    + jb(1, "session/new", {"cwd": "/work/jb", "mcpServers": []})
    + jb(2, "session/prompt", {"sessionId": "jb-session-1", "prompt": [{"type": "text", "text": "webstorm"}]})
)

U = [
    "0b9e6c1e-6a47-4a8e-9a53-0c0d2f6d5b01",
    "1c2f7d2f-7b58-4b9f-8b64-1d1e3f7e6c02",
    "2d3a8e3a-8c69-4caa-9c75-2e2f4a8f7d03",
    "3e4b9f4b-9d7a-4dbb-8d86-3f3a5b9a8e04",
    "4f5caa5c-ae8b-4ecc-9e97-4a4b6cab9f05",
]
ZED_INPUT = (
    zed(U[0], "initialize", {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "zed"}})
    + zed(U[1], "session/new", {"cwd": "/work/a", "mcpServers": []})
    + zed(U[2], "session/new", {"cwd": "/work/b", "mcpServers": []})
    + zed(U[3], "session/prompt", {"sessionId": "zs-a", "prompt": [{"type": "text", "text": "from a"}]})
    + zed(U[4], "session/prompt", {"sessionId": "zs-b", "prompt": [{"type": "text", "text": "from b"}]})
)


def cli(db: Path, *args: str, data: bytes = b"") -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "acp_relay", *args, "--db", str(db)], input=data, capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def record(db: Path, mode: str, data: bytes) -> bytes:
    proc = subprocess.run(relay_cmd(db, sys.executable, str(AGENT), mode), input=data, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


def replay(db: Path, session: str, cwd: str, prompt: str) -> list[dict]:
    data = (
        zed("i", "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        + zed("n", "session/new", {"cwd": cwd, "mcpServers": []})
        + zed("p", "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": prompt}]})
    )
    out = cli(db, "replay", session, "--speed", "fast", data=data)
    return [json.loads(line) for line in out.splitlines()]


def test_jetbrains_session_forwards_exactly_and_never_stores_the_gateway_token(tmp_path: Path) -> None:
    db = tmp_path / "state" / "relay.db"
    seen = tmp_path / "agent-stdin.bin"
    agent = ["sh", "-c", 'tee "$2" | "$0" "$1" jetbrains', sys.executable, str(AGENT), str(seen)]
    proc = subprocess.run(relay_cmd(db, *agent), input=JB_INPUT, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert seen.read_bytes() == JB_INPUT  # the agent got the token: only the stored copy is redacted
    assert b'"stopReason":"end_turn"' in proc.stdout

    files = sorted(p for p in db.parent.iterdir() if p.is_file())
    assert db in files
    for path in files:  # the database, its -wal and -shm: raw bytes, not what SQLite chooses to show
        assert TOKEN.encode() not in path.read_bytes(), path.name
    ((raw, redacted),) = rows(db, "SELECT raw, redacted FROM frames WHERE method = 'initialize' AND kind = 'request'")
    stored = json.loads(raw)
    assert redacted == 1 and list(stored) == ["type", "id", "method", "params", "jsonrpc"]
    assert stored["params"]["_meta"]["proxyConfig"]["proxies"][0]["proxy"]["headers"] == {"proxy_key": "[redacted]"}

    listing = cli(db, "show")
    assert "jb-session-1" in listing and "WebStorm" in listing and "scripted-agent" in listing
    frames = cli(db, "show", "jb-session-1")
    assert "session/prompt #2" in frames and "agent_message_chunk" in frames and '"Hi webstorm"' in frames
    transcript = cli(db, "show", "jb-session-1", "--transcript")
    assert "User: webstorm" in transcript and "Agent: Hi webstorm" in transcript
    assert "=== Turn 1 · " in transcript and "end_turn ===" in transcript
    stats = cli(db, "stats", "jb-session-1")
    assert "turns 1" in stats and "end_turn" in stats
    assert TOKEN not in cli(db, "show", "--connection", "last", "--json")

    got = replay(db, "jb-session-1", "/work/jb", "webstorm")
    chunks = [m["params"]["update"] for m in got if m.get("method") == "session/update"]
    assert chunks == [{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hi webstorm"}}]
    assert got[-1] == {"jsonrpc": "2.0", "id": "p", "result": {"stopReason": "end_turn"}}


def test_zed_session_uuid_ids_and_out_of_order_session_new(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    out = record(db, "zed", ZED_INPUT)
    answers = [json.loads(line) for line in out.splitlines()]
    assert [a["id"] for a in answers[1:3]] == [U[2], U[1]]  # the second session/new was answered first

    sessions = rows(db, "SELECT session_id, origin, cwd FROM sessions ORDER BY session_id")
    assert sessions == [("zs-a", "session/new", "/work/a"), ("zs-b", "session/new", "/work/b")]
    latency = rows(db, "SELECT rpc_id, session_id, method FROM frames WHERE kind = 'response' ORDER BY seq")
    assert latency[:3] == [(U[0], None, "initialize"), (U[2], "zs-b", "session/new"), (U[1], "zs-a", "session/new")]

    frames = cli(db, "show", "zs-a", "--wide")  # whole UUIDs (the list shortens ids to fit)
    assert f'result of session/new #"{U[1]}"' in frames and f'session/prompt #"{U[3]}"' in frames
    assert U[2] not in frames  # zs-b's creation is not zs-a's
    transcript = cli(db, "show", "zs-b", "--transcript")
    assert "User: from b" in transcript and "Agent: Hi from b" in transcript and "from a" not in transcript
    stats = cli(db, "stats", "zs-a", "--json")
    turns = json.loads(stats)["turns"]
    assert len(turns) == 1 and turns[0]["stop_reason"] == "end_turn" and turns[0]["session"] == "zs-a"
    assert json.loads(stats)["methods"]["session/new"] == {"request": 1, "response": 1}

    for sid, cwd, said in (("zs-a", "/work/a", "from a"), ("zs-b", "/work/b", "from b")):
        got = replay(db, sid, cwd, said)
        texts = [m["params"]["update"]["content"]["text"] for m in got if m.get("method") == "session/update"]
        assert texts == ["Hi " + said]
        assert got[-1] == {"jsonrpc": "2.0", "id": "p", "result": {"stopReason": "end_turn"}}


def test_a_secret_inside_client_info_is_not_kept_on_the_connection_row(tmp_path: Path) -> None:
    """The connection row's clientInfo is taken from the parsed initialize: it must be redacted like the frame."""
    db = tmp_path / "state" / "relay.db"
    secret = "ci-meta-authorization-planted"
    init = jb(
        0,
        "initialize",
        {"protocolVersion": 1, "clientInfo": {"name": "WebStorm", "version": "1", "_meta": {"authorization": secret}}},
    )
    proc = subprocess.run(
        relay_cmd(db, sys.executable, str(AGENT), "jetbrains"), input=init, capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr.decode()
    ((info,),) = rows(db, "SELECT client_info FROM connections")
    assert json.loads(info) == {"name": "WebStorm", "version": "1", "_meta": {"authorization": "[redacted]"}}
    for path in (p for p in db.parent.iterdir() if p.is_file()):
        assert secret.encode() not in path.read_bytes(), path.name
