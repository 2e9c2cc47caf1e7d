"""A real SDK client and a real SDK agent talking through `acp-relay run`; then the database is checked."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
from helpers import relay_cmd, rows, stream_of
from peers.scenario import NOTES, SDK_AGENT, assert_scenario, run_client


def test_sdk_conversation_through_the_relay(db: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text(NOTES)
    result = run_client(relay_cmd(db, sys.executable, str(SDK_AGENT)), notes, tmp_path)
    assert_scenario(result, NOTES)  # the peers noticed nothing

    sid = result["session_id"]
    ((cid, version, agent_info, client_info, closed_by, code),) = rows(
        db, "SELECT id, protocol_version, agent_info, client_info, closed_by, exit_code FROM connections"
    )
    assert version == 1 and code == 0 and closed_by == "editor_eof"
    assert orjson.loads(agent_info)["name"] == "sdk-test-agent" and orjson.loads(client_info)

    # Every frame after initialize belongs to the session.
    frames = rows(
        db,
        "SELECT seq, direction, kind, method, rpc_id, session_id, request_seq, latency_ms, parse "
        "FROM frames ORDER BY seq",
    )
    assert all(f[8] == "ok" for f in frames)
    assert [f[3] for f in frames[:2]] == ["initialize", "initialize"]
    assert all(f[5] == sid for f in frames[2:]), [f for f in frames[2:] if f[5] != sid]

    # Responses link to their requests, per direction (both sides number from 0).
    by_seq = {f[0]: f for f in frames}
    responses = [f for f in frames if f[2] in ("response", "error")]
    assert responses and all(f[6] is not None for f in responses)
    for f in responses:
        req = by_seq[f[6]]
        assert req[2] == "request" and req[1] != f[1] and req[4] == f[4] and req[3] == f[3]
        assert f[7] >= 0
    methods = {f[3] for f in responses}
    assert {
        "initialize",
        "session/new",
        "session/prompt",
        "session/load",
        "session/request_permission",
        "fs/read_text_file",
    } <= methods
    agent_requests = [f for f in frames if f[1] == "a2c" and f[2] == "request"]
    assert [f[3] for f in agent_requests] == ["session/request_permission", "fs/read_text_file"]

    # Message and tool-call ids are indexed.
    assert rows(db, "SELECT DISTINCT tool_call_id FROM frames WHERE tool_call_id IS NOT NULL") == [("call-1",)]
    mids = {r[0] for r in rows(db, "SELECT message_id FROM frames WHERE message_id IS NOT NULL")}
    assert {"msg-2", "msg-3"} <= mids
    # The cancelled turn: session/cancel recorded and the prompt answered with cancelled.
    assert rows(db, "SELECT count(*) FROM frames WHERE method = 'session/cancel' AND direction = 'c2a'") == [(1,)]
    stops = [
        orjson.loads(r[0])["result"]["stopReason"]
        for r in rows(db, "SELECT raw FROM frames WHERE method = 'session/prompt' AND kind = 'response' ORDER BY seq")
    ]
    assert stops == ["end_turn", "cancelled"]
    # origin is how the session began (session/new), though the SDK client loaded it again later
    assert rows(db, "SELECT session_id, origin, cwd FROM sessions") == [(sid, "session/new", str(tmp_path))]
    assert stream_of(db, "a2c", cid).count(b"\n") == len([f for f in frames if f[1] == "a2c"])
