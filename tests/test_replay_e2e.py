"""`acp-relay replay` as a process: against the real SDK client, a v2-draft fixture, and recorded again.

One SDK conversation is recorded through the relay once per module (`recorded`); the tests replay it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import relay_cmd
from peers.replay_client import RawClient, read_fixture, record_script
from peers.scenario import NOTES, SDK_AGENT, assert_scenario, run_client

from acp_relay.protocol.jsonspan import find_span
from acp_relay.protocol.materialize import Event, Materializer

FIXTURES = Path(__file__).resolve().parent / "fixtures"
V2_FIXTURE = FIXTURES / "replay_v2_draft.acp"


def replay_cmd(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "acp_relay", "replay", "--db", str(db), *args]


def conversation(updates: list[dict], version: int = 1) -> list[tuple]:
    """What a client shows from these updates: messages by text, tool calls by their final fields."""
    m = Materializer(version)
    for i, u in enumerate(updates):
        m.feed(
            Event(
                i, 0.0, "a2c", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": u}}
            )
        )
    out: list[tuple] = []
    for e in m.state.entries:
        if e.kind.endswith("message"):
            out.append((e.kind, "".join(b.get("text", "") for b in e.content)))
        else:
            out.append((e.kind, e.id, sorted(e.fields.items(), key=lambda kv: kv[0]).__repr__()))
    return out


def update_of(msg: Any) -> dict:
    update = (
        msg.get("params", {}).get("update") if isinstance(msg, dict) and msg.get("method") == "session/update" else None
    )
    return update if isinstance(update, dict) else {}


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The SDK scenario (hello + permission + fs read, slow + cancel, load) recorded through the relay."""
    tmp = tmp_path_factory.mktemp("recorded")
    notes = tmp / "notes.txt"
    notes.write_text(NOTES)
    db = tmp / "state" / "relay.db"
    result = run_client(relay_cmd(db, sys.executable, str(SDK_AGENT)), notes, tmp)
    assert_scenario(result, NOTES)
    return {"tmp": tmp, "notes": notes, "db": db, "result": result}


def test_sdk_client_gets_the_same_turns_and_the_same_loaded_conversation(recorded: dict[str, Any]) -> None:
    db, first = recorded["db"], recorded["result"]
    before = file_digest(db)
    again = run_client(replay_cmd(db, "last", "--speed", "fast"), recorded["notes"], recorded["tmp"])
    assert file_digest(db) == before  # replay reads the database only

    # Turn replay: same stop reasons, the permission asked and the file read again, the same updates in order.
    assert again["stop_reasons"] == first["stop_reasons"] == ["end_turn", "cancelled"]
    assert again["permission_requests"] == 1 and again["file_reads"] == 1
    assert again["agent_text"] == first["agent_text"]
    live_first = first["updates"][: -len(first["load_updates"])]
    live_again = again["updates"][: -len(again["load_updates"])]
    assert live_again == live_first

    # History replay: what the client folds from replay's session/load is what it folded from the agent's own.
    assert again["session_id"] != first["session_id"]  # a session handed out by replay's session/new
    assert conversation(again["load_updates"]) == conversation(first["load_updates"])
    assert all(u.get("messageId") for u in again["load_updates"] if u["sessionUpdate"].endswith("_chunk"))


def test_recorded_session_id_loads_and_errors_keep_the_process_up(recorded: dict[str, Any]) -> None:
    db, first = recorded["db"], recorded["result"]
    sid = first["session_id"]
    c = RawClient(replay_cmd(db, sid[:4], "--speed", "fast"))  # a unique prefix
    r, _ = c.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}, 0)
    caps = r["result"]["agentCapabilities"]
    assert caps["loadSession"] is True and caps["sessionCapabilities"]["list"] == {}
    r, _ = c.request("session/list", {}, 1)
    assert [s["sessionId"] for s in r["result"]["sessions"]] == [sid]
    r, history = c.request("session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []}, 2)
    assert r["result"] == {} or "modes" in r["result"]
    assert conversation([json.loads(f)["params"]["update"] for f in history]) == conversation(first["load_updates"])
    c.send(b"{not json")
    assert json.loads(c.recv())["error"]["code"] == -32700
    r, _ = c.request("_vendor/unknown", {}, "u")
    assert r["error"]["code"] == -32601 and "_vendor/unknown" in r["error"]["message"]
    # the loaded session holds every recorded turn: its next prompt is past the recording (issue 10 item 4)
    r, _ = c.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}, 10)
    assert r["error"]["code"] == -32002 and r["error"]["data"]["loaded"] is True
    r, _ = c.request("session/new", {"cwd": "/", "mcpServers": []}, 15)
    sid = r["result"]["sessionId"]
    allow = {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
    r, frames = c.request(
        "session/prompt",
        {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]},
        11,
        on_request=lambda m: allow if m["method"] == "session/request_permission" else {"content": "x"},
    )
    assert r["result"]["stopReason"] == "end_turn"
    assert [json.loads(f).get("method") for f in frames].count("session/request_permission") == 1
    # the recorded client cancelled turn 2: replay plays up to that point and waits for our cancel
    c.send({"jsonrpc": "2.0", "id": 12, "method": "session/prompt", "params": {"sessionId": sid, "prompt": []}})
    c.collect(lambda m: update_of(m).get("content") == {"type": "text", "text": "Working slowly..."})
    c.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    r, _ = c.until_response(12)
    assert r["result"]["stopReason"] == "cancelled"
    r, _ = c.request("session/prompt", {"sessionId": sid, "prompt": []}, 13)
    assert r["error"]["code"] == -32002
    r, _ = c.request("session/list", {}, 14)
    assert "result" in r
    assert c.close() == 0
    log = c.log()
    assert "differs from recorded turn 1" in log and "stdin closed" in log


def test_non_blocking_stdin_and_stdout_are_waited_on_not_taken_for_closed(recorded: dict[str, Any]) -> None:
    """An editor may hand replay descriptors with O_NONBLOCK set: EAGAIN means wait, not end of file."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.set_blocking(in_r, False)
    os.set_blocking(out_w, False)
    fcntl.fcntl(out_w, fcntl.F_SETPIPE_SZ, 4096)  # 100 answers overflow it: replay's writes meet EAGAIN
    proc = subprocess.Popen(
        replay_cmd(recorded["db"], "last", "--speed", "fast"), stdin=in_r, stdout=out_w, stderr=subprocess.PIPE
    )
    os.close(in_r)
    os.close(out_w)
    requests = [{"jsonrpc": "2.0", "id": i, "method": "session/list", "params": {}} for i in range(100)]
    with os.fdopen(in_w, "wb", buffering=0) as stdin, os.fdopen(out_r, "rb") as stdout:
        stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
        assert [json.loads(stdout.readline())["id"] for _ in requests] == list(range(100))
        # by now replay's reader has found the pipe empty at least once: it must still be there
        stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": "last", "method": "session/list", "params": {}}).encode() + b"\n"
        )
        assert "result" in json.loads(stdout.readline()) and proc.poll() is None
    assert proc.wait(timeout=60) == 0
    assert proc.stderr is not None
    log = proc.stderr.read().decode()
    assert "stdin closed" in log and "cannot write" not in log


def test_v2_draft_fixture(tmp_path: Path) -> None:
    db = tmp_path / "v2.db"
    record_script(db, V2_FIXTURE)
    frames = read_fixture(V2_FIXTURE)
    custom = next(raw for d, raw in frames if b"_vendor.example/progress" in raw)
    span = find_span(custom, ("params", "update"))
    assert span is not None
    custom_update = custom[span[0] : span[1]]
    assert custom_update.startswith(b'{"sessionUpdate" : "_vendor')  # the odd spacing, kept below

    c = RawClient(replay_cmd(db, "last", "--speed", "fast"))
    r, _ = c.request("initialize", {"protocolVersion": 2, "capabilities": {}, "info": {"name": "t", "version": "1"}}, 0)
    assert r["result"]["protocolVersion"] == 2 and "session" in r["result"]["capabilities"]
    r, _ = c.request("session/list", {}, 1)
    assert r["result"]["sessions"][0]["sessionId"] == "sess_v2"  # `last` is the conversation, not its subagent
    assert r["result"]["sessions"][0]["cwd"] == "/home/u/proj"
    r, _ = c.request("session/new", {"cwd": "/tmp"}, 2)
    sid = r["result"]["sessionId"]
    assert r["result"]["configOptions"][0]["configId"] == "model"
    (setup,) = c.collect(lambda m: True)
    assert json.loads(setup)["params"]["update"]["sessionUpdate"] == "available_commands_update"

    # History: notices dropped, the compaction collapsed, the custom variant's bytes kept, ids rewritten.
    r, history = c.request("session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}}, 3)
    assert r["result"]["configOptions"]
    updates = [json.loads(f)["params"]["update"] for f in history]
    kinds = [u["sessionUpdate"] for u in updates]
    assert "notice" not in kinds and "compaction_summary_chunk" not in kinds and "state_update" not in kinds
    (compaction,) = [u for u in updates if u["sessionUpdate"] == "compaction_update"]
    assert compaction == {
        "sessionUpdate": "compaction_update",
        "compactionId": "cmp_1",
        "status": "completed",
        "summary": [
            {"type": "text", "text": "## Retained context\n\n"},
            {"type": "text", "text": "The user wants a summary."},
        ],
    }
    assert kinds.index("compaction_update") == kinds.index("agent_message") + 1  # at its original position
    (raw_custom,) = [f for f in history if b"_vendor.example/progress" in f]
    assert raw_custom == (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
        + json.dumps(sid).encode()
        + b',"update":'
        + custom_update
        + b"}}"
    )
    assert {
        "sessionUpdate": "subagent_update",
        "sessionId": "sess_child",
        "title": "Explorer",
        "state": {"state": "running"},
    } in updates
    assert all(json.loads(f)["params"]["sessionId"] == sid for f in history)
    messages = [u for u in updates if u["sessionUpdate"] in ("user_message", "agent_message")]
    assert [(u["messageId"], u["content"][0]["text"]) for u in messages][:3] == [
        ("msg_user_1", "Summarize the repo"),
        ("msg_agent_1", "Looking"),
        ("msg_agent_2", "It is a small project."),
    ]
    (terminal,) = [u for u in updates if u["sessionUpdate"] == "terminal_update"]
    assert terminal["output"] == {"data": "aGVsbG8K"} and terminal["exitStatus"] == {"exitCode": 0}

    # The resumed session holds every turn (issue 10 item 4): the turns replay on a fresh session.
    r, _ = c.request("session/prompt", {"sessionId": sid, "prompt": []}, "p0")
    assert r["error"]["code"] == -32002 and r["error"]["data"]["loaded"] is True
    r, _ = c.request("session/new", {"cwd": "/tmp"}, 4)
    sid = r["result"]["sessionId"]
    c.collect(lambda m: True)  # its setup update

    # Turn 1: the recorded frames, byte for byte apart from the session id and the client's prompt id.
    turn1 = frames[frames.index(next(f for f in frames if b'"id":2,"method":"session/prompt"' in f[1])) + 1 :]
    turn1 = turn1[: turn1.index(next(f for f in turn1 if b'"id":3,"method":"session/prompt"' in f[1]))]
    expected = [
        raw.replace(b'"sessionId":"sess_v2"', b'"sessionId":' + json.dumps(sid).encode()).replace(
            b'{"jsonrpc":"2.0","id":2,', b'{"jsonrpc":"2.0","id":"p1",'
        )
        for d, raw in turn1
        if d == "a2c"
    ]
    c.send(
        {
            "jsonrpc": "2.0",
            "id": "p1",
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "Summarize the repo"}]},
        }
    )
    got = c.collect(
        lambda m: update_of(m).get("stopReason") == "end_turn",
        on_request=lambda m: {"outcome": {"outcome": "selected", "optionId": "allow"}},
    )
    assert got == expected

    # Turn 2 was cancelled by the recorded client: replay waits for our cancel, then ends as recorded.
    c.send(
        {
            "jsonrpc": "2.0",
            "id": "p2",
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "Now run the tests"}]},
        }
    )
    got = c.collect(lambda m: update_of(m).get("content") == {"type": "text", "text": "Running"})
    assert json.loads(got[0]) == {"jsonrpc": "2.0", "id": "p2", "result": {"messageId": "msg_user_2"}}
    c.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    got = c.collect(lambda m: update_of(m).get("state") == "idle")
    assert json.loads(got[-1])["params"]["update"]["stopReason"] == "cancelled"

    r, _ = c.request("session/prompt", {"sessionId": sid, "prompt": []}, "p3")
    assert r["error"]["code"] == -32002 and "2 turns" in r["error"]["message"]
    assert c.close() == 0


def test_round_trip_recording_a_replay_gives_the_same_agent_traffic(recorded: dict[str, Any]) -> None:
    db1 = recorded["db"]
    db2 = recorded["tmp"] / "state2" / "relay.db"
    again = run_client(relay_cmd(db2, *replay_cmd(db1, "last", "--speed", "fast")), recorded["notes"], recorded["tmp"])
    assert again["stop_reasons"] == ["end_turn", "cancelled"]
    live1, load1 = agent_traffic(db1)
    live2, load2 = agent_traffic(db2)
    assert live2 == live1 and len(live1) > 10
    assert conversation(load2) == conversation(load1)


def agent_traffic(db: Path) -> tuple[list[Any], list[dict]]:
    """The agent->editor messages apart from ids and timing, and the updates of the session/load replay.

    The initialize answer is left out (replay adds loadSession and session/list to it on purpose), and the
    load replay is compared as a conversation: the SDK agent replays its raw updates, replay the materialized
    history.
    """
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT direction, raw FROM frames WHERE connection_id = (SELECT max(id) FROM connections) ORDER BY seq"
    ).fetchall()
    conn.close()
    live, load, load_id, init_id = [], [], None, None
    for direction, raw in rows:
        msg = json.loads(raw)
        if direction == "c2a":
            if msg.get("method") == "session/load":
                load_id = msg["id"]
            if msg.get("method") == "initialize":
                init_id = msg["id"]
            continue
        if "method" not in msg and msg.get("id") == init_id:
            continue
        if load_id is not None:
            if "method" not in msg and msg.get("id") == load_id:
                load_id = None
            else:
                load.append(msg["params"]["update"])
            continue
        if "id" in msg:
            msg["id"] = "ID"
        params = msg.get("params") or msg.get("result")
        if isinstance(params, dict) and "sessionId" in params:
            params["sessionId"] = "SESSION"
        live.append(msg)
    return live, load
