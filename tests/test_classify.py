"""Classification: every frame gets a parse status and kind; ids stay typed; entities are indexed."""

from __future__ import annotations

import orjson
import pytest

from acp_relay.protocol.classify import FrameIndex, MessageIndex, classify
from acp_relay.protocol.jsonrpc import STORED_JSON, id_key, stored_id


def one(raw: bytes) -> tuple[FrameIndex, MessageIndex]:
    ix = classify(raw)
    assert ix.single is not None
    return ix, ix.single


@pytest.mark.parametrize(
    "raw, parse, kind",
    [
        (b"", "blank", "invalid"),
        (b"   ", "blank", "invalid"),
        (b"\r", "blank", "invalid"),
        (b"not json", "invalid_json", "invalid"),
        (b"\xff\xfe{}", "invalid_utf8", "invalid"),
        (b"[]", "not_jsonrpc", "invalid"),
        (b"42", "not_jsonrpc", "invalid"),
        (b'{"jsonrpc":"2.0"}', "not_jsonrpc", "invalid"),
        (b'{"id":1,"method":"x"}', "not_jsonrpc", "request"),
        (b'{"jsonrpc":"2.0","id":1,"method":"x"}', "ok", "request"),
        (b'{"jsonrpc":"2.0","id":1,"method":"x"}\r', "cr", "request"),
        (b'{"jsonrpc":"2.0","method":"x"}', "ok", "notification"),
        (b'{"jsonrpc":"2.0","id":1,"result":null}', "ok", "response"),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}', "ok", "error"),
        (b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]', "ok", "batch"),
        (b'[{"jsonrpc":"2.0","id":1,"method":"a"},7]', "not_jsonrpc", "batch"),
    ],
)
def test_parse_status_and_kind(raw: bytes, parse: str, kind: str) -> None:
    ix = classify(raw)
    assert (ix.parse, ix.kind) == (parse, kind)


def test_ids_are_typed() -> None:
    _, a = one(b'{"jsonrpc":"2.0","id":1,"method":"x"}')
    _, b = one(b'{"jsonrpc":"2.0","id":"1","method":"x"}')
    assert a.rpc_id == 1 and b.rpc_id == "1"
    assert id_key(a.rpc_id) != id_key(b.rpc_id)
    assert id_key(1) != id_key(True) != id_key(1.0)


def test_huge_numbers_and_deep_nesting_do_not_raise() -> None:
    _, m = one(b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"x"}')
    # stored exactly, as marked JSON text that SQLite holds (issue 10: never a REAL)
    assert m.kind == "request" and m.rpc_id == STORED_JSON + "123456789012345678901234567890"
    assert stored_id(m.rpc_id) == 123456789012345678901234567890
    _, t = one(b'{"jsonrpc":"2.0","id":true,"method":"x"}')
    _, s = one(b'{"jsonrpc":"2.0","id":"\\u0000true","method":"x"}')
    assert stored_id(t.rpc_id) is True and stored_id(s.rpc_id) == "\x00true" and t.rpc_id != s.rpc_id
    assert classify(b"[" * 100000 + b"]" * 100000).kind == "invalid"


def test_error_code() -> None:
    _, m = one(b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"nope"}}')
    assert m.kind == "error" and m.error_code == -32601


def test_session_update_entities() -> None:
    def update(u: dict) -> MessageIndex:
        raw = orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": u}})
        return one(raw)[1]

    m = update({"sessionUpdate": "agent_message_chunk", "messageId": "m1", "content": {"type": "text", "text": "x"}})
    assert (m.session_id, m.update_kind, m.message_id) == ("s", "agent_message_chunk", "m1")
    assert update({"sessionUpdate": "tool_call_update", "toolCallId": "t"}).tool_call_id == "t"
    assert update({"sessionUpdate": "terminal_output_chunk", "terminalId": "term", "data": ""}).terminal_id == "term"
    assert (
        update({"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p", "entries": []}}).plan_id == "p"
    )
    assert update({"sessionUpdate": "plan_removed", "planId": "p2"}).plan_id == "p2"
    assert (
        update({"sessionUpdate": "compaction_update", "compactionId": "c", "status": "in_progress"}).compaction_id
        == "c"
    )
    m = update(
        {
            "sessionUpdate": "session_message_chunk",
            "messageId": "x",
            "senderSessionId": "a",
            "recipientSessionId": "b",
            "content": {"type": "text", "text": ""},
        }
    )
    assert (m.sender_session_id, m.recipient_session_id) == ("a", "b")
    assert update({"sessionUpdate": "subagent_update", "childSessionId": "kid"}).child_session_id == "kid"
    assert update({"sessionUpdate": "_vendor_thing", "messageId": 5}).message_id is None  # not a string id


def test_big_frames_are_indexed_without_their_long_strings() -> None:
    from acp_relay.protocol.classify import BIG_FRAME, shrink_long_strings

    blob = "A" * BIG_FRAME
    raw = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "fs/write_text_file",
            "params": {"sessionId": "s", "path": "/x", "content": blob, "q": 'say "hi" \\'},
        }
    )
    ix, m = one(raw)
    assert (ix.parse, m.kind, m.method, m.rpc_id, m.session_id) == ("ok", "request", "fs/write_text_file", 7, "s")
    assert m.message["params"]["content"] == "" and m.message["params"]["q"] == 'say "hi" \\'
    assert classify(raw[:100] + b"\xff" + raw[101:]).parse == "invalid_utf8"  # still checked, in slices
    assert shrink_long_strings(b'{"a":"open') is None


def test_a_big_frame_with_a_credential_is_redacted_whole() -> None:
    from acp_relay.protocol.classify import BIG_FRAME
    from acp_relay.protocol.redact import PLACEHOLDER, Policy
    from acp_relay.protocol.tracker import C2A, Tracker

    blob = "B" * BIG_FRAME
    raw = orjson.dumps({"jsonrpc": "2.0", "method": "x", "params": {"_meta": {"token": "t"}, "data": blob}})
    (frame,) = Tracker(Policy()).feed(C2A, raw + b"\n", 0.0, 0.0)  # redacted before it is indexed
    stored = orjson.loads(frame.raw)
    assert frame.redacted and stored["params"]["data"] == blob and stored["params"]["_meta"]["token"] == PLACEHOLDER
