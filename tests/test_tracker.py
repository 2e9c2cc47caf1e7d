"""Correlation per direction, session attribution and negotiation, over scripted byte streams."""

from __future__ import annotations

from typing import Any

import orjson
from fastpath import check_fast_path

from acp_relay.protocol.tracker import A2C, C2A, Tracker


def feed(tracker: Tracker, direction: str, msg: object, t: float):
    return tracker.feed(direction, orjson.dumps(msg) + b"\n", 1000.0 + t, t)[0]


def test_both_sides_number_from_zero_and_are_correlated_per_direction() -> None:
    t = Tracker()
    feed(t, C2A, {"jsonrpc": "2.0", "id": 0, "method": "session/prompt", "params": {"sessionId": "s"}}, 0.0)
    feed(
        t,
        A2C,
        {"jsonrpc": "2.0", "id": 0, "method": "fs/read_text_file", "params": {"sessionId": "s", "path": "/a"}},
        0.1,
    )
    r1 = feed(t, C2A, {"jsonrpc": "2.0", "id": 0, "result": {"content": "x"}}, 0.3)
    r2 = feed(t, A2C, {"jsonrpc": "2.0", "id": 0, "result": {"stopReason": "end_turn"}}, 1.0)
    assert (r1.index.single.method, r1.index.single.request_seq) == ("fs/read_text_file", 2)
    assert (r2.index.single.method, r2.index.single.request_seq) == ("session/prompt", 1)
    assert r1.index.single.latency_ms == 200.0 and r2.index.single.latency_ms == 1000.0
    assert r2.index.single.session_id == "s"
    assert t.unanswered() == {}


def test_typed_ids_do_not_cross() -> None:
    t = Tracker()
    feed(t, C2A, {"jsonrpc": "2.0", "id": 1, "method": "a"}, 0)
    r = feed(t, A2C, {"jsonrpc": "2.0", "id": "1", "result": {}}, 1)
    assert r.index.single.request_seq is None
    assert t.unanswered() == {C2A: [{"id": 1, "method": "a", "seq": 1, "session_id": None}]}


def test_session_new_fork_and_initialize() -> None:
    t = Tracker()
    feed(
        t,
        C2A,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": 2, "info": {"name": "ed", "version": "1"}},
        },
        0,
    )
    feed(t, A2C, {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentInfo": {"name": "ag"}}}, 0)
    assert t.info.protocol_version == 1 and t.info.client_info == {"name": "ed", "version": "1"}
    assert t.info.agent_info == {"name": "ag"}
    feed(t, C2A, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/p", "mcpServers": []}}, 0)
    r = feed(t, A2C, {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}}, 0)
    assert r.index.single.session_id == "s1"
    assert (t.sessions["s1"].origin, t.sessions["s1"].cwd) == ("session/new", "/p")
    feed(t, C2A, {"jsonrpc": "2.0", "id": 2, "method": "session/fork", "params": {"sessionId": "s1", "cwd": "/q"}}, 0)
    feed(t, A2C, {"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s2"}}, 0)
    assert t.sessions["s2"].parent_session_id == "s1" and t.sessions["s2"].cwd == "/q"


def test_titles_children_prompt_message_id_and_batches() -> None:
    t = Tracker()
    upd: dict[str, Any] = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": "session_info_update", "title": "T"}},
    }
    feed(t, A2C, upd, 0)
    assert t.sessions["s"].title == "T"
    upd["params"]["update"] = {"sessionUpdate": "session_info_update", "title": None}
    feed(t, A2C, upd, 0)
    assert t.sessions["s"].title is None
    upd["params"]["update"] = {"sessionUpdate": "subagent_update", "childSessionId": "kid"}
    feed(t, A2C, upd, 0)
    assert t.sessions["kid"].parent_session_id == "s" and t.sessions["kid"].origin == "subagent"
    feed(
        t,
        C2A,
        [
            {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"sessionId": "s"}},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}},
        ],
        0,
    )
    r = feed(t, A2C, [{"jsonrpc": "2.0", "id": 5, "result": {"messageId": "u1"}}], 0.5)
    assert r.index.kind == "batch"
    assert r.index.messages[0].message_id == "u1" and r.index.messages[0].request_seq == 4


def test_cancel_request_is_attributed_to_the_session_of_the_request() -> None:
    t = Tracker()
    feed(t, A2C, {"jsonrpc": "2.0", "id": 9, "method": "session/request_permission", "params": {"sessionId": "s"}}, 0)
    f = feed(t, A2C, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 9}}, 0)
    assert f.index.single.session_id == "s"  # the side that asked cancels its own request
    f = feed(t, C2A, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 9}}, 0)
    assert f.index.single.session_id is None  # the editor has no request 9 pending


def _line(msg: object) -> bytes:
    return msg if isinstance(msg, bytes) else orjson.dumps(msg) + b"\n"


def test_the_recorders_fast_path_indexes_as_feed_does() -> None:
    def upd(sid: object, update: object, **extra: object) -> dict[str, object]:
        return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}, **extra}

    chunk = {"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": {"type": "text", "text": "hi"}}
    msgs: list[object] = [
        upd("s1", chunk),  # session not seen yet: the slow path creates it
        upd("s1", chunk),
        upd("s1", {**chunk, "messageId": 7, "toolCallId": "t1", "planId": None}),
        upd("s1", {"sessionUpdate": 3}),
        upd("s1", "not an object"),
        upd(5, chunk),
        upd(None, chunk),
        upd("s1", {"sessionUpdate": "session_info_update", "title": "T"}),
        upd("s1", {"sessionUpdate": "subagent_update", "childSessionId": "c1"}),
        upd("s1", {"sessionUpdate": "plan_update", "plan": {"planId": "p1"}}),
        upd("s1", chunk, id=None),
        {"method": "session/update", "params": {"sessionId": "s1", "update": chunk}},
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}},
        {"jsonrpc": "2.0", "method": "x", "params": [1]},
        {"jsonrpc": "2.0", "method": "x"},
        {"jsonrpc": "2.0", "method": 1, "params": {}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s1"}},
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{}}}\r\n',
        b'{"jsonrpc":"2.0","method":"n","params":{"sessionId":"s1","sessionId":"s2"}}\n',
        b'{"jsonrpc":"2.0","method":"n","params":{"sessionId":"\\ud800"}}\n',
        b"[{}]\n\n \n\xff\n{\n",
        b'{"jsonrpc":"2.0","method":"n","params":{"sessionId":"s1"}}',  # unterminated at EOF
    ]
    chunks = [(A2C if i % 3 else C2A, _line(m)) for i, m in enumerate(msgs)]
    assert check_fast_path(chunks + [(A2C, b""), (C2A, b"")]) >= 5


def test_a_session_made_by_new_and_loaded_again_keeps_its_origin() -> None:
    """The NOTE column said `session/load` for a session the editor created with session/new and reloaded
    later in the same connection; a session that only came back by session/load still says so."""
    t = Tracker()
    feed(t, C2A, {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/p", "mcpServers": []}}, 0)
    feed(t, A2C, {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s1"}}, 0)
    for n, (method, sid) in enumerate([("session/load", "s1"), ("session/resume", "s1"), ("session/load", "old")]):
        params = {"sessionId": sid, "cwd": "/p", "mcpServers": []}
        feed(t, C2A, {"jsonrpc": "2.0", "id": 2 + n, "method": method, "params": params}, 1)
        feed(t, A2C, {"jsonrpc": "2.0", "id": 2 + n, "result": {}}, 1)
    assert t.sessions["s1"].origin == "session/new"
    assert t.sessions["old"].origin == "session/load"
