"""`acp-relay replay`'s sans-I/O parts: JSON byte surgery, the recording, and the core's decisions.

Recordings are built in memory from scripted frames (no database, no process); time is a number we pass.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_relay.protocol.jsonrpc import dumps
from acp_relay.protocol.jsonspan import find_all, find_span, splice
from acp_relay.protocol.materialize import Event, Materializer
from acp_relay.replay import ReplayCore, ReplayError, build_recording, parse_speed

SID = "sess-rec"
INIT_V1 = {
    "protocolVersion": 1,
    "agentCapabilities": {"promptCapabilities": {"image": True}, "sessionCapabilities": {"delete": {}}},
    "agentInfo": {"name": "rec-agent", "version": "9.9"},
    "authMethods": [],
}
INIT_V2 = {
    "protocolVersion": 2,
    "capabilities": {"session": {"prompt": {}, "delete": {}}, "nes": {}},
    "info": {"name": "rec-agent", "version": "9.9"},
}


# ---- helpers ------------------------------------------------------------------------------------------------
def req(rid: Any, method: str, params: Any) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def res(rid: Any, result: Any) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def upd(update: dict, sid: str = SID) -> dict:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}}


def chunk(text: str, mid: str = "m1", kind: str = "agent_message_chunk") -> dict:
    return upd({"sessionUpdate": kind, "messageId": mid, "content": {"type": "text", "text": text}})


def text(t: str) -> list:
    return [{"type": "text", "text": t}]


def recording(frames: list[tuple], *, v: int = 1, init: dict | None = None, new_result: dict | None = None):
    """frames: (direction, message or raw bytes[, mono]); initialize and session/new are put in front."""
    head = [
        ("c2a", req(0, "initialize", {"protocolVersion": v})),
        ("a2c", res(0, init or (INIT_V2 if v >= 2 else INIT_V1))),
        ("c2a", req(1, "session/new", {"cwd": "/proj", "mcpServers": []})),
        ("a2c", res(1, {"sessionId": SID, **(new_result or {})})),
    ]
    rows, mono = [], 0.0
    for i, f in enumerate(head + frames):
        direction, msg = f[0], f[1]
        mono = f[2] if len(f) > 2 else mono + 0.01
        raw = msg if isinstance(msg, bytes) else json.dumps(msg, separators=(",", ":")).encode()
        rows.append((i + 1, direction, 1_767_225_600.0 + mono, mono, raw))
    return build_recording(rows, SID, cwd="/proj")


class Client:
    """Drives a ReplayCore: frames in, parsed frames out, a clock we move by hand."""

    def __init__(
        self,
        rec: Any,
        *,
        scale: float = 0.0,
        strict: bool = False,
        v: int = 1,
        caps: dict | None = None,
        init: bool = True,
    ) -> None:
        self.core = ReplayCore(rec, scale=scale, strict=strict)
        self.now = 0.0
        self.raw: list[bytes] = []
        if init:
            key = "capabilities" if v >= 2 else "clientCapabilities"
            self.send(req("init", "initialize", {"protocolVersion": v, key: caps or {}}))

    def send(self, msg: Any) -> list[dict]:
        raw = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        return self._take(self.core.receive(raw, self.now))

    def tick(self, to: float) -> list[dict]:
        self.now = to
        return self._take(self.core.poll(to))

    def _take(self, frames: list[bytes]) -> list[Any]:
        self.raw += frames
        for f in frames:
            assert b"\n" not in f
        return [json.loads(f) for f in frames]

    def new(self) -> str:
        (r, *rest) = self.send(req("n", "session/new", {"cwd": "/here", "mcpServers": []}))
        return r["result"]["sessionId"]


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What replay's core logged (INFO and up: the CLI prints it as `acp-relay: replay: ...`)."""
    return [r.getMessage() for r in caplog.records if r.name.startswith("acp_relay.replay")]


def updates(frames: list[dict]) -> list[dict]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


# ---- JSON byte surgery --------------------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple[tuple, Any]]:
    out = [(prefix, value)]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


@settings(max_examples=150, deadline=None)
@given(json_values, st.sampled_from([(",", ":"), (", ", ": "), (" ,", " : ")]), st.booleans())
def test_find_span_finds_every_value(value: Any, separators: tuple[str, str], ascii_only: bool) -> None:
    raw = json.dumps(value, separators=separators, ensure_ascii=ascii_only).encode()
    for path, expected in _paths(value):
        span = find_span(raw, path)
        assert span is not None
        assert json.loads(raw[span[0] : span[1]]) == expected


def span_of(raw: bytes, path: tuple[str | int, ...]) -> tuple[int, int]:
    """find_span, for a value the test knows is there."""
    span = find_span(raw, path)
    assert span is not None, path
    return span


def test_find_span_misses_and_duplicate_keys() -> None:
    raw = b'{"a": {"b": [1, {"c": "x]}\\""}]}, "a2": 3, "d": 1, "d": 2}'
    assert find_span(raw, ("a", "b", 1, "c")) is not None
    assert raw[slice(*span_of(raw, ("a", "b", 1, "c")))] == b'"x]}\\""'
    assert find_span(raw, ("zz",)) is None
    assert find_span(raw, ("a", "b", 5)) is None
    assert find_span(raw, ("a", 0)) is None  # an index into an object
    assert raw[slice(*span_of(raw, ("d",)))] == b"2"  # the last of repeated keys, as parsers read it


def test_splice_and_find_all_keep_every_other_byte() -> None:
    raw = b'{"id" : 7 ,"p":{"terminalId":"t1","x":[{"terminalId":"t1"}]},"s":"terminalId"}'
    spans = find_all(raw, "terminalId")
    assert len(spans) == 2
    out = splice(raw, [(s, e, b'"T9"') for s, e in spans] + [(*span_of(raw, ("id",)), b'"new"')])
    assert out == b'{"id" : "new" ,"p":{"terminalId":"T9","x":[{"terminalId":"T9"}]},"s":"terminalId"}'


def test_parse_speed() -> None:
    assert parse_speed("realtime") == 1.0
    assert parse_speed("fast") == 0.0
    assert parse_speed("2") == 0.5
    assert parse_speed("0.5") == 2.0
    for bad in ("0", "-1", "inf", "nan", "quick"):
        with pytest.raises(ReplayError):
            parse_speed(bad)


# ---- initialize, sessions, errors ---------------------------------------------------------------------------
def test_initialize_v1_answers_recorded_result_with_what_replay_needs() -> None:
    c = Client(recording([]), init=False)
    (r,) = c.send(req(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}}))
    result = r["result"]
    assert result["protocolVersion"] == 1 and result["agentInfo"] == INIT_V1["agentInfo"]
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True and caps["promptCapabilities"] == {"image": True}
    assert caps["sessionCapabilities"] == {"list": {}}  # `delete` is not served, so not advertised


def test_initialize_version_negotiation(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="acp_relay")
    c = Client(recording([]), init=False)
    assert c.send(req(0, "initialize", {"protocolVersion": 2}))[0]["result"]["protocolVersion"] == 1
    caplog.clear()  # what follows is c2's
    c2 = Client(recording([], v=2), init=False)
    (r,) = c2.send(req(0, "initialize", {"protocolVersion": 1}))
    assert r["result"]["protocolVersion"] == 2  # the latest we support: the client decides whether to stay
    assert any("asked for v1" in line for line in said(caplog))
    (r,) = c2.send(req(1, "initialize", {"protocolVersion": 2}))
    caps = r["result"]["capabilities"]
    assert caps == {"session": {"prompt": {}}} and r["result"]["info"] == INIT_V2["info"]


@pytest.mark.parametrize(
    "line, code, rid",
    [
        (b"this is not json", -32700, None),
        (b'{"jsonrpc":"2.0","id":1,"method":', -32700, None),
        (b"\xff\xfe", -32700, None),
        (b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"x":"\\ud800"}}', -32700, None),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"x":"\\udc00","n":12345678901234567890123}}', -32700, None),
        (b"42", -32600, None),
        (b"[]", -32600, None),
        (b'{"jsonrpc":"2.0","id":7}', -32600, 7),
        (b'{"jsonrpc":"2.0","id":8,"method":5}', -32600, 8),
    ],
)
def test_garbage_gets_json_rpc_errors(line: bytes, code: int, rid: Any) -> None:
    c = Client(recording([]))
    (r,) = c.send(line)
    assert r["error"]["code"] == code and r["id"] == rid


def test_a_recorded_lone_surrogate_is_skipped_not_fatal() -> None:
    """An escaped lone surrogate is not Unicode: jsonrpc.loads refuses it as not JSON (a ValueError), so the
    recording skips that frame and replay still serves the rest."""
    bad = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","x":"\\ud800"}}' % SID.encode()
    rec = recording([("a2c", bad)])
    c = Client(rec)
    assert c.new()


def test_unknown_methods_and_notifications() -> None:
    c = Client(recording([]))
    (r,) = c.send(req("x", "_vendor.example/thing", {}))
    assert r["id"] == "x" and r["error"]["code"] == -32601 and "_vendor.example/thing" in r["error"]["message"]
    assert c.send(req(3, "session/fork", {}))[0]["error"]["code"] == -32601
    assert c.send({"jsonrpc": "2.0", "method": "_vendor/ping", "params": {}}) == []  # notifications: ignored
    assert c.send(b"") == [] and c.send(b"   \r") == []
    assert c.send({"jsonrpc": "2.0", "id": 99, "result": {}}) == []  # an answer to nothing we asked


def test_client_ids_are_echoed_byte_for_byte() -> None:
    c = Client(recording([]))
    for rid in (b"1.50", b"123456789012345678901234567890", b'"\\u0041b"', b"null", b"-0"):
        (raw,) = c.core.receive(b'{"jsonrpc":"2.0","id":' + rid + b',"method":"session/list"}', 0.0)
        assert raw.startswith(b'{"jsonrpc":"2.0","id":' + rid + b',"result":')


def test_session_list_and_unknown_sessions() -> None:
    rec = recording(
        [
            (
                "a2c",
                upd(
                    {
                        "sessionUpdate": "session_info_update",
                        "title": "Fix the bug",
                        "updatedAt": "2026-01-01T10:00:00Z",
                    }
                ),
            )
        ]
    )
    c = Client(rec)
    (r,) = c.send(req(2, "session/list", {"cwd": "/elsewhere"}))
    assert r["result"] == {
        "sessions": [{"sessionId": SID, "cwd": "/proj", "title": "Fix the bug", "updatedAt": "2026-01-01T10:00:00Z"}]
    }
    for method in ("session/load", "session/prompt"):
        (r,) = c.send(req(3, method, {"sessionId": "nope", "cwd": "/", "mcpServers": [], "prompt": []}))
        assert r["error"]["code"] == -32602 and SID in r["error"]["message"]


def test_batches_get_one_array_of_answers() -> None:
    c = Client(recording([]))
    (r,) = c.send(
        b'[{"jsonrpc":"2.0","id":1,"method":"session/list"},{"jsonrpc":"2.0","method":"x"},'
        b'{"jsonrpc":"2.0","id":2,"method":"nope"},5]'
    )
    assert [m.get("id") for m in r] == [1, 2, None]
    assert "result" in r[0] and r[1]["error"]["code"] == -32601 and r[2]["error"]["code"] == -32600


# ---- history replay -----------------------------------------------------------------------------------------
def test_session_new_returns_recorded_modes_and_config() -> None:
    modes = {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]}
    config = [{"id": "model", "name": "Model", "type": "select", "currentValue": "a", "options": []}]
    rec = recording(
        [("a2c", upd({"sessionUpdate": "current_mode_update", "currentModeId": "code"}))],
        new_result={"modes": modes, "configOptions": config},
    )
    c = Client(rec)
    (r, *setup) = c.send(req(4, "session/new", {"cwd": "/x", "mcpServers": []}))
    assert r["result"]["modes"] == modes and r["result"]["configOptions"] == config
    assert updates(setup) == [{"sessionUpdate": "current_mode_update", "currentModeId": "code"}]
    assert setup[0]["params"]["sessionId"] == r["result"]["sessionId"] != SID
    *history, r = c.send(req(5, "session/load", {"sessionId": SID, "cwd": "/x", "mcpServers": []}))
    assert r["result"]["modes"]["currentModeId"] == "code"  # load answers with the state as it ended


def test_load_replays_history_then_responds_with_the_client_session_id() -> None:
    rec = recording(
        [
            ("c2a", req(2, "session/prompt", {"sessionId": SID, "prompt": text("hi")})),
            ("a2c", chunk("Hel")),
            ("a2c", chunk("lo")),
            ("a2c", upd({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Run", "status": "pending"})),
            (
                "a2c",
                req(
                    0, "session/request_permission", {"sessionId": SID, "toolCall": {"toolCallId": "t1"}, "options": []}
                ),
            ),
            ("c2a", res(0, {"outcome": {"outcome": "cancelled"}})),
            ("a2c", upd({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "failed"})),
            ("a2c", res(2, {"stopReason": "end_turn"})),
        ]
    )
    c = Client(rec)
    sid = c.new()
    *history, r = c.send(req(9, "session/load", {"sessionId": sid, "cwd": "/x", "mcpServers": []}))
    assert r == {"jsonrpc": "2.0", "id": 9, "result": {}}
    assert all(f["method"] == "session/update" and f["params"]["sessionId"] == sid for f in history)
    got = updates(history)
    assert [u["sessionUpdate"] for u in got] == [
        "user_message_chunk",
        "agent_message_chunk",
        "agent_message_chunk",
        "tool_call",
    ]
    assert all(u.get("messageId") for u in got if u["sessionUpdate"].endswith("_chunk"))
    assert got[3]["status"] == "failed"  # one materialized tool call; the permission request is not re-issued


def test_load_in_the_same_recording_does_not_double_the_history() -> None:
    """A recorded session/load of a session already seen replays what we hold: it is left out."""
    rec = recording(
        [
            ("c2a", req(2, "session/prompt", {"sessionId": SID, "prompt": text("hi")})),
            ("a2c", chunk("Hello")),
            ("a2c", res(2, {"stopReason": "end_turn"})),
            ("c2a", req(3, "session/load", {"sessionId": SID, "cwd": "/", "mcpServers": []})),
            ("a2c", chunk("hi", "u1", "user_message_chunk")),
            ("a2c", chunk("Hello")),
            ("a2c", res(3, {})),
            ("a2c", chunk(" again", "m2")),
        ]
    )
    messages = [(e.kind, e.content) for e in rec.state.entries]
    assert messages == [("agent_message", text("Hello")), ("agent_message", text(" again"))]
    assert [len(t.steps) for t in rec.turns] == [3]  # chunk, response, and the later chunk (not the load's)


def test_v1_client_gets_draft_variants_only_when_it_advertised_them() -> None:
    rec = recording(
        [
            (
                "a2c",
                upd(
                    {
                        "sessionUpdate": "compaction_update",
                        "compactionId": "c1",
                        "status": "completed",
                        "summary": text("sum"),
                    }
                ),
            ),
            (
                "a2c",
                upd(
                    {
                        "sessionUpdate": "plan_update",
                        "plan": {
                            "type": "items",
                            "planId": "p",
                            "entries": [{"content": "a", "priority": "high", "status": "pending"}],
                        },
                    }
                ),
            ),
            (
                "a2c",
                upd({"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "q", "content": "# x"}}),
            ),
            ("a2c", upd({"sessionUpdate": "notice", "severity": "info", "title": "live only"})),
        ]
    )
    plain = Client(rec)
    *history, _ = plain.send(req(1, "session/load", {"sessionId": SID, "cwd": "/", "mcpServers": []}))
    assert updates(history) == [
        {"sessionUpdate": "plan", "entries": [{"content": "a", "priority": "high", "status": "pending"}]}
    ]
    rich = Client(rec, caps={"plan": {}, "session": {"compaction": {}}})
    *history, _ = rich.send(req(1, "session/load", {"sessionId": SID, "cwd": "/", "mcpServers": []}))
    assert [u["sessionUpdate"] for u in updates(history)] == ["compaction_update", "plan_update", "plan_update"]


def test_v2_resume_replays_only_from_start() -> None:
    rec = recording([("a2c", upd({"sessionUpdate": "agent_message", "messageId": "a", "content": text("x")}))], v=2)
    c = Client(rec, v=2)
    (r,) = c.send(req(1, "session/resume", {"sessionId": SID, "cwd": "/"}))
    assert r["result"] == {}
    *history, r = c.send(req(2, "session/resume", {"sessionId": SID, "cwd": "/", "replayFrom": {"type": "start"}}))
    assert updates(history) == [{"sessionUpdate": "agent_message", "messageId": "a", "content": text("x")}]
    (r,) = c.send(req(3, "session/resume", {"sessionId": SID, "cwd": "/", "replayFrom": {"type": "_since", "x": 1}}))
    assert r["error"]["code"] == -32602
    assert c.send(req(4, "session/load", {"sessionId": SID, "cwd": "/"}))[0]["error"]["code"] == -32601  # not in v2


# ---- turn replay --------------------------------------------------------------------------------------------
def permission_turn(v: int = 1) -> Any:
    perm = {
        "sessionId": SID,
        "toolCall": {"toolCallId": "t1"},
        "options": [
            {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
            {"optionId": "no", "name": "No", "kind": "reject_once"},
        ],
    }
    return recording(
        [
            ("c2a", req(2, "session/prompt", {"sessionId": SID, "prompt": text("do it")}), 1.0),
            ("a2c", chunk("Sure."), 1.5),
            ("a2c", upd({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Edit", "kind": "edit"}), 1.5),
            ("a2c", req(5, "session/request_permission", perm), 2.0),
            ("c2a", res(5, {"outcome": {"outcome": "selected", "optionId": "yes"}}), 10.0),
            ("a2c", upd({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}), 10.25),
            ("a2c", res(2, {"stopReason": "end_turn", "_meta": {"x": 1}}), 10.5),
            ("c2a", req(3, "session/prompt", {"sessionId": SID, "prompt": text("again")}), 20.0),
            ("a2c", chunk("Again.", "m2"), 21.0),
            ("a2c", res(3, {"stopReason": "max_tokens"}), 22.0),
        ]
    )


def test_turn_replay_sends_recorded_frames_with_fresh_request_ids_and_waits_for_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="acp_relay")
    c = Client(permission_turn())
    sid = c.new()
    out = c.send(req("p1", "session/prompt", {"sessionId": sid, "prompt": text("do it")}))
    assert [f.get("method") for f in out] == ["session/update", "session/update", "session/request_permission"]
    assert all(f["params"]["sessionId"] == sid for f in out)
    ask = out[-1]
    assert ask["id"] == 0  # ours, fresh
    assert c.tick(100.0) == []  # nothing until the client answers
    out = c.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": "no"}}})
    assert [f.get("method") for f in out] == ["session/update", None]
    assert out[-1] == {"jsonrpc": "2.0", "id": "p1", "result": {"stopReason": "end_turn", "_meta": {"x": 1}}}
    assert any(
        "permission answered 'no'" in line for line in said(caplog)
    )  # the client chose otherwise: said, replayed
    out = c.send(req(77, "session/prompt", {"sessionId": sid, "prompt": text("again")}))
    assert out[-1] == {"jsonrpc": "2.0", "id": 77, "result": {"stopReason": "max_tokens"}}
    # past the last turn: a clear error, and the process keeps serving
    (r,) = c.send(req(78, "session/prompt", {"sessionId": sid, "prompt": text("more")}))
    assert r["error"]["code"] == -32002 and "2 turns" in r["error"]["message"]
    assert "result" in c.send(req(79, "session/list", {}))[0]


def test_recorded_frames_are_resent_byte_for_byte_apart_from_the_ids() -> None:
    odd = b'{"jsonrpc":"2.0","method":"session/update","params":{ "update":{"sessionUpdate":"_x","v":1.0e3,"s":"sess-rec"}, "sessionId" :"sess-rec"}}'
    rec = recording(
        [
            ("c2a", req(2, "session/prompt", {"sessionId": SID, "prompt": []})),
            ("a2c", odd),
            ("a2c", res(2, {"stopReason": "end_turn"})),
        ]
    )
    c = Client(rec)
    sid = c.new()
    c.send(req(3, "session/prompt", {"sessionId": sid, "prompt": []}))
    assert c.raw[-2] == odd.replace(b' "sessionId" :"sess-rec"', b' "sessionId" :"' + sid.encode() + b'"')


def test_realtime_and_speed_factor_keep_the_recorded_gaps() -> None:
    for scale in (1.0, 0.5):
        c = Client(permission_turn(), scale=scale)
        sid = c.new()
        c.now = 100.0
        assert c.send(req(1, "session/prompt", {"sessionId": sid, "prompt": text("do it")})) == []
        assert c.core.next_deadline() == pytest.approx(100.0 + 0.5 * scale)
        assert len(c.tick(100.0 + 0.5 * scale)) == 2  # the chunk and the tool call, 0.5 s after the prompt
        assert c.core.next_deadline() == pytest.approx(100.0 + 1.0 * scale)
        (ask,) = c.tick(100.0 + 1.0 * scale)
        assert c.core.next_deadline() is None  # waiting for the client
        c.now = 200.0
        assert c.send({"jsonrpc": "2.0", "id": ask["id"], "result": {}}) == []
        # the gap after the recorded answer (10.0 -> 10.25), not the time the user took to answer
        assert c.core.next_deadline() == pytest.approx(200.0 + 0.25 * scale)


def test_divergent_prompt_is_replayed_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="acp_relay")
    c = Client(permission_turn())
    sid = c.new()
    out = c.send(req(1, "session/prompt", {"sessionId": sid, "prompt": text("something else")}))
    assert out and out[0]["method"] == "session/update"
    assert any("differs from recorded turn 1" in line for line in said(caplog))


def test_strict_answers_a_divergent_prompt_with_an_error_and_keeps_the_turn() -> None:
    c = Client(permission_turn(), strict=True)
    sid = c.new()
    (r,) = c.send(req(1, "session/prompt", {"sessionId": sid, "prompt": text("something else")}))
    assert r["error"]["code"] == -32602 and r["error"]["data"]["recorded"] == text("do it")
    out = c.send(req(2, "session/prompt", {"sessionId": sid, "prompt": text("do it")}))
    assert out[0]["params"]["update"]["content"]["text"] == "Sure."  # turn 1, still


def test_cancel_during_a_v1_turn_stops_and_answers_cancelled() -> None:
    c = Client(permission_turn(), scale=1.0)
    sid = c.new()
    c.send(req("p", "session/prompt", {"sessionId": sid, "prompt": text("do it")}))
    (ask,) = c.tick(1.0)[2:]
    out = c.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    assert out == [{"jsonrpc": "2.0", "id": "p", "result": {"stopReason": "cancelled"}}]
    assert c.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "cancelled"}}}) == []
    assert c.tick(1000.0) == []  # nothing more of turn 1
    assert c.send(req("q", "session/prompt", {"sessionId": sid, "prompt": text("again")})) == []
    assert updates(c.tick(1001.0))[0]["content"]["text"] == "Again."  # turn 2 plays, 1 s in as recorded


def v2_turns(accept: dict | None = None) -> Any:
    return recording(
        [
            ("c2a", req(2, "session/prompt", {"sessionId": SID, "prompt": text("go")}), 1.0),
            ("a2c", res(2, accept if accept is not None else {"messageId": "u1"}), 1.1),
            ("a2c", upd({"sessionUpdate": "user_message", "messageId": "u1", "content": text("go")}), 1.2),
            ("a2c", upd({"sessionUpdate": "state_update", "state": "running"}), 1.3),
            ("a2c", chunk("Working"), 2.0),
            ("c2a", {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": SID}}, 5.0),
            ("a2c", chunk(" (stopped)"), 5.1),
            ("a2c", upd({"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}), 5.2),
            ("c2a", req(3, "session/prompt", {"sessionId": SID, "prompt": text("next")}), 9.0),
            ("a2c", res(3, {"messageId": "u2"}), 9.1),
            ("a2c", chunk("Long work", "m2"), 9.2),
            ("a2c", upd({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}), 30.0),
        ],
        v=2,
    )


def test_recorded_cancel_pauses_until_the_client_cancels_then_ends_as_recorded() -> None:
    c = Client(v2_turns(), v=2)
    sid = c.new()
    out = c.send(req("p", "session/prompt", {"sessionId": sid, "prompt": text("go")}))
    assert out[0] == {"jsonrpc": "2.0", "id": "p", "result": {"messageId": "u1"}}
    assert [u.get("state") or u["sessionUpdate"] for u in updates(out)] == [
        "user_message",
        "running",
        "agent_message_chunk",
    ]
    assert c.tick(1000.0) == [] and c.core.next_deadline() is None
    out = c.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    assert [u.get("stopReason") for u in updates(out)] == [None, "cancelled"]


def test_cancel_during_a_v2_turn_sends_idle_cancelled() -> None:
    c = Client(v2_turns(), v=2, scale=1.0)
    sid = c.new()
    c.send(req("p", "session/prompt", {"sessionId": sid, "prompt": text("go")}))
    c.tick(50.0)
    c.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    assert c.send(req("q", "session/prompt", {"sessionId": sid, "prompt": text("next")})) == []  # queued
    assert [u.get("stopReason") for u in updates(c.tick(60.0))] == [None, "cancelled"]  # the recorded tail
    assert c.tick(60.1) == [{"jsonrpc": "2.0", "id": "q", "result": {"messageId": "u2"}}]
    out = c.tick(60.2)
    assert updates(out)[0]["content"]["text"] == "Long work"
    out = c.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    assert updates(out) == [{"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}]
    assert c.tick(1000.0) == []


def test_v2_acceptance_gets_the_user_message_id_when_the_recording_lacks_it() -> None:
    c = Client(v2_turns(accept={}), v=2)
    sid = c.new()
    out = c.send(req("p", "session/prompt", {"sessionId": sid, "prompt": text("go")}))
    assert out[0] == {"jsonrpc": "2.0", "id": "p", "result": {"messageId": "u1"}}


def test_a_turn_the_recording_cuts_short_ends_with_an_error() -> None:
    rec = recording([("c2a", req(2, "session/prompt", {"sessionId": SID, "prompt": []})), ("a2c", chunk("x"))])
    c = Client(rec)
    sid = c.new()
    out = c.send(req(3, "session/prompt", {"sessionId": sid, "prompt": []}))
    assert out[-1]["id"] == 3 and out[-1]["error"]["code"] == -32603


def test_replayed_conversation_materializes_like_the_recording() -> None:
    """What a client folds from session/load equals what the recording folds to (messages and tools)."""
    rec = permission_turn()
    c = Client(rec)
    *history, _ = c.send(req(1, "session/load", {"sessionId": SID, "cwd": "/", "mcpServers": []}))
    m = Materializer(1)
    for i, f in enumerate(history):
        m.feed(Event(i, 0.0, "a2c", f))
    got = [(e.kind, e.id, e.fields) for e in m.state.entries]
    want = [(e.kind, e.id, e.fields) for e in rec.state.entries if e.replayable]
    assert [g for g in got if g[0] != "user_message"] == want
    assert [g[2]["content"] for g in got if g[0] == "user_message"] == [t.prompt for t in rec.turns]


def test_dumps_survives_huge_integers() -> None:
    assert dumps({"n": 2**70}) == b'{"n":1180591620717411303424}'


# ---- issue 10 -----------------------------------------------------------------------------------------------
def state(value: str, **extra: Any) -> dict:
    return upd({"sessionUpdate": "state_update", "state": value, **extra})


def test_agent_output_recorded_before_the_editors_answer_is_sent_before_it() -> None:
    """Item 1: requires_action follows session/request_permission before the answer; replay sends it at once
    and waits only where the recording waited (the agent's next frame after the answer)."""
    perm = {"sessionId": SID, "toolCall": {"toolCallId": "t1"}, "options": [{"optionId": "ok", "kind": "allow_once"}]}
    rec = recording(
        [
            ("c2a", req(2, "session/prompt", {"sessionId": SID, "prompt": text("do it")}), 1.0),
            ("a2c", res(2, {"messageId": "u1"}), 1.1),
            ("a2c", state("running"), 1.2),
            ("a2c", req(0, "session/request_permission", perm), 2.0),
            ("a2c", state("requires_action"), 2.1),
            ("c2a", res(0, {"outcome": {"outcome": "selected", "optionId": "ok"}}), 9.0),
            ("a2c", state("running"), 9.5),
            ("a2c", state("idle", stopReason="end_turn"), 10.0),
        ],
        v=2,
    )
    c = Client(rec, v=2, scale=1.0)
    sid = c.new()
    c.send(req("p", "session/prompt", {"sessionId": sid, "prompt": text("do it")}))
    out = c.tick(1.0)  # the prompt was sent at 0: the recorded request came 1.0 s after it
    assert [f.get("method") for f in out][-1] == "session/request_permission"
    out = c.tick(1.1)
    assert updates(out) == [{"sessionUpdate": "state_update", "state": "requires_action"}]
    assert c.core.next_deadline() is None and c.tick(100.0) == []  # now it waits for the answer
    ask = next(f for f in c.raw if b"request_permission" in f)
    c.now = 200.0
    assert (
        c.send({"jsonrpc": "2.0", "id": json.loads(ask)["id"], "result": {"outcome": {"outcome": "cancelled"}}}) == []
    )
    assert c.core.next_deadline() == pytest.approx(200.5)  # the recorded 0.5 s after the answer
    assert [u["state"] for u in updates(c.tick(201.0))] == ["running", "idle"]


def test_a_prompt_sent_while_running_replays_its_own_turn() -> None:
    """Item 2 (v2): prompt "two" arrives while "one" runs; turn 1 keeps its " done" and its end_turn idle,
    turn 2 starts with its own acceptance."""
    sid = SID
    rec = recording(
        [
            ("c2a", req(2, "session/prompt", {"sessionId": sid, "prompt": text("one")}), 1.0),
            ("a2c", res(2, {"messageId": "u1"}), 1.1),
            ("a2c", upd({"sessionUpdate": "user_message", "messageId": "u1", "content": text("one")}), 1.1),
            ("a2c", state("running"), 1.2),
            ("a2c", chunk("working", "a1"), 1.3),
            ("c2a", req(3, "session/prompt", {"sessionId": sid, "prompt": text("two")}), 1.5),
            ("a2c", chunk(" done", "a1"), 1.7),
            ("a2c", state("idle", stopReason="end_turn"), 1.8),
            ("a2c", res(3, {"messageId": "u2"}), 1.9),
            ("a2c", upd({"sessionUpdate": "user_message", "messageId": "u2", "content": text("two")}), 1.9),
            ("a2c", state("running"), 2.0),
            ("a2c", chunk("second", "a2"), 3.0),
            ("a2c", state("idle", stopReason="end_turn"), 3.5),
        ],
        v=2,
    )
    assert [(t.ended, t.stop_reason) for t in rec.state.turns] == [(True, "end_turn"), (True, "end_turn")]
    c = Client(rec, v=2)
    client_sid = c.new()
    one = c.send(req("p1", "session/prompt", {"sessionId": client_sid, "prompt": text("one")}))
    assert one[0] == {"jsonrpc": "2.0", "id": "p1", "result": {"messageId": "u1"}}
    got = [(u["sessionUpdate"], u.get("state"), u.get("stopReason"), u.get("content")) for u in updates(one)]
    assert got == [
        ("user_message", None, None, text("one")),
        ("state_update", "running", None, None),
        ("agent_message_chunk", None, None, {"type": "text", "text": "working"}),
        ("agent_message_chunk", None, None, {"type": "text", "text": " done"}),
        ("state_update", "idle", "end_turn", None),
    ]
    two = c.send(req("p2", "session/prompt", {"sessionId": client_sid, "prompt": text("two")}))
    assert two[0] == {"jsonrpc": "2.0", "id": "p2", "result": {"messageId": "u2"}}
    assert [u.get("content", {}).get("text") for u in updates(two) if u["sessionUpdate"].endswith("chunk")] == [
        "second"
    ]
    assert updates(two)[-1] == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}


def one_turn(v: int) -> Any:
    """A recording of one turn (prompt "hi", answer "Hello" as m1, end_turn) in protocol version v."""
    frames: list[tuple] = [("c2a", req(2, "session/prompt", {"sessionId": SID, "prompt": text("hi")}))]
    if v >= 2:
        frames += [("a2c", res(2, {"messageId": "u1"})), ("a2c", state("running"))]
    frames += [("a2c", chunk("Hello", "m1"))]
    frames += (
        [("a2c", state("idle", stopReason="end_turn"))] if v >= 2 else [("a2c", res(2, {"stopReason": "end_turn"}))]
    )
    return recording(frames, v=v)


@pytest.mark.parametrize("v", [1, 2])
def test_after_loading_the_recorded_session_its_turns_are_history_not_prompts(v: int) -> None:
    """Item 4: the client holds every recorded turn once it loaded the session; replaying turn 1 again would
    report the same messageIds a second time (a client following the append rule shows the text twice), and
    a new submission must get a new id. So the loaded session stands at its recorded end."""
    c = Client(one_turn(v), v=v)
    if v >= 2:
        params = {"sessionId": SID, "cwd": "/x", "replayFrom": {"type": "start"}}
        *history, r = c.send(req(9, "session/resume", params))
    else:
        *history, r = c.send(req(9, "session/load", {"sessionId": SID, "cwd": "/x", "mcpServers": []}))
    assert "result" in r and any(u.get("messageId") == "m1" for u in updates(history))
    (r,) = c.send(req(10, "session/prompt", {"sessionId": SID, "prompt": text("hi")}))
    assert r["error"]["code"] == -32002 and "already holds" in r["error"]["message"]
    assert r["error"]["data"] == {"turns": 1, "prompt": 2, "loaded": True}
    assert not any(b'"m1"' in f for f in c.raw[-1:])
    # a fresh session still replays the turns from the first
    sid = c.new()
    out = c.send(req(11, "session/prompt", {"sessionId": sid, "prompt": text("hi")}))
    assert [u["content"]["text"] for u in updates(out) if u["sessionUpdate"] == "agent_message_chunk"] == ["Hello"]


def test_crlf_terminated_frames_keep_their_cr_in_turn_replay() -> None:
    """Item 5: byte for byte means the \\r of a CRLF line too (single frames and batches)."""
    line = json.dumps(chunk("Hi")).encode() + b"\r"
    batch = b"[" + json.dumps(chunk(" there")).encode() + b"]\r"
    rec = recording(
        [
            ("c2a", req(2, "session/prompt", {"sessionId": SID, "prompt": []})),
            ("a2c", line),
            ("a2c", batch),
            ("a2c", json.dumps(res(2, {"stopReason": "end_turn"})).encode() + b"\r"),
        ]
    )
    c = Client(rec)
    sid = c.new()
    c.send(req(3, "session/prompt", {"sessionId": sid, "prompt": []}))
    assert c.raw[-3] == line.replace(SID.encode(), sid.encode())
    assert c.raw[-2] == batch.replace(SID.encode(), sid.encode())
    assert c.raw[-1] == b'{"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}\r'


def compactions(v: int) -> list[tuple]:
    def cu(cid: str, status: str, **kw: Any) -> tuple:
        return ("a2c", upd({"sessionUpdate": "compaction_update", "compactionId": cid, "status": status, **kw}))

    def cc(cid: str, t: str) -> tuple:
        return ("a2c", upd({"sessionUpdate": "compaction_summary_chunk", "compactionId": cid, "content": text(t)[0]}))

    return [
        cu("done", "in_progress"),
        cc("done", "kept"),
        cu("done", "completed"),
        cu("failed", "in_progress"),
        cc("failed", "partial"),
        cu("failed", "failed", error="context too large"),
        cu("open", "in_progress"),
        cc("open", "half"),
    ]


def test_v1_compaction_goes_only_to_clients_that_advertised_session_compaction() -> None:
    """Item 6 (right as it was): v1-unstable requires clientCapabilities.session.compaction; v2 needs none."""
    rec = recording(compactions(1))
    load = req(1, "session/load", {"sessionId": SID, "cwd": "/", "mcpServers": []})
    *history, _ = Client(rec).send(load)
    assert updates(history) == []
    *history, _ = Client(rec, caps={"session": {}}).send(load)
    assert updates(history) == []
    *history, _ = Client(rec, caps={"session": {"compaction": {}}}).send(load)
    assert [u["compactionId"] for u in updates(history)] == ["done", "failed", "open"]
    c2 = Client(recording(compactions(2), v=2), v=2)
    *history, _ = c2.send(req(1, "session/resume", {"sessionId": SID, "cwd": "/", "replayFrom": {"type": "start"}}))
    assert [u["compactionId"] for u in updates(history)] == ["done", "failed", "open"]


@pytest.mark.parametrize("v", [1, 2])
def test_history_replay_sends_a_summary_only_with_a_completed_compaction(v: int) -> None:
    """Item 7: the seed: a non-empty summary is only valid with `completed`. A failed compaction keeps its
    error, an unfinished one stays in_progress; neither carries the partial summary."""
    c = Client(recording(compactions(v), v=v), v=v, caps={"session": {"compaction": {}}})
    if v >= 2:
        load = req(1, "session/resume", {"sessionId": SID, "cwd": "/", "replayFrom": {"type": "start"}})
    else:
        load = req(1, "session/load", {"sessionId": SID, "cwd": "/", "mcpServers": []})
    *history, _ = c.send(load)
    assert updates(history) == [
        {"sessionUpdate": "compaction_update", "compactionId": "done", "status": "completed", "summary": text("kept")},
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "failed",
            "status": "failed",
            "error": "context too large",
        },
        {"sessionUpdate": "compaction_update", "compactionId": "open", "status": "in_progress"},
    ]


@pytest.mark.parametrize("v", [1, 2])
def test_a_client_batch_with_a_prompt_is_answered_in_one_array(v: int) -> None:
    """Item 11: the prompt's response (v1: its end; v2: its acceptance) goes into the batch's array with the
    other answers, not in a frame of its own."""
    c = Client(one_turn(v), v=v)
    sid = c.new()
    batch = [req("p", "session/prompt", {"sessionId": sid, "prompt": text("hi")}), req("l", "session/list", {})]
    out = c.send(json.dumps(batch).encode())
    arrays = [f for f in out if isinstance(f, list)]
    assert len(arrays) == 1 and sorted(r["id"] for r in arrays[0]) == ["l", "p"]
    assert not [f for f in out if isinstance(f, dict) and f.get("id") == "p"]
    (answer,) = [r for r in arrays[0] if r["id"] == "p"]
    assert answer["result"] == ({"messageId": "u1"} if v >= 2 else {"stopReason": "end_turn"})
    assert [u["content"]["text"] for u in updates([f for f in out if isinstance(f, dict)]) if "content" in u] == [
        "Hello"
    ]


def test_notifications_sent_before_the_session_new_answer_are_replayed() -> None:
    """goose sends available_commands_update and usage_update before it answers session/new; turn replay
    dropped them, so the editor never saw the agent's commands."""
    commands = {
        "sessionUpdate": "available_commands_update",
        "availableCommands": [{"name": "plan", "description": "p"}],
    }
    usage = {"sessionUpdate": "usage_update", "used": 10, "size": 1000}
    frames = [
        ("c2a", req(0, "initialize", {"protocolVersion": 1})),
        ("a2c", res(0, INIT_V1)),
        ("c2a", req(1, "session/new", {"cwd": "/proj", "mcpServers": []})),
        ("a2c", upd(commands)),
        ("a2c", upd(usage)),
        ("a2c", res(1, {"sessionId": SID})),
        ("c2a", req(2, "session/prompt", {"sessionId": SID, "prompt": text("hi")})),
        ("a2c", chunk("Hello", "m1")),
        ("a2c", res(2, {"stopReason": "end_turn"})),
    ]
    rows = [
        (i + 1, d, 1_767_225_600.0 + i * 0.01, i * 0.01, json.dumps(m, separators=(",", ":")).encode())
        for i, (d, m) in enumerate(frames)
    ]
    c = Client(build_recording(rows, SID, cwd="/proj"))
    (r, *setup) = c.send(req(4, "session/new", {"cwd": "/x", "mcpServers": []}))
    assert "result" in r
    assert updates(setup) == [commands, usage]
    assert all(m["params"]["sessionId"] == r["result"]["sessionId"] for m in setup)
