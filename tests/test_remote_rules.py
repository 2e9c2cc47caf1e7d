"""The pure rules of remote ACP: SSE framing, header and URL handling, session routing, the listener guard."""

from __future__ import annotations

import hmac
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, Side

from acp_relay.protocol.check.rules import ERROR, INFO, WARNING, Finding
from acp_relay.protocol.check.transport import (
    TRANSPORT_RULES,
    Event,
    check_transport,
    relay_made,
    soften_split_order,
)
from acp_relay.protocol.remote import (
    EndpointError,
    Guard,
    Outgoing,
    SessionRouting,
    one_line,
    parse_header,
    parse_listen,
    recorded_headers,
    shown_endpoint,
    transport_of,
)
from acp_relay.protocol.sse import SseEvent, SseParser
from acp_relay.transport.ws import WsAgentLink

STREAM = (
    b'\xef\xbb\xbf: keepalive\r\ndata: {"a":1}\r\n\r\nid: 7\nevent: message\ndata: {"b":\ndata: 2}\n\n'
    b"retry: 3000\rdata:  x\r\r: c\n\ndata: tail-without-blank"
)


def parse_all(chunks: list[bytes]) -> tuple[list[SseEvent], bytes, int]:
    p = SseParser()
    out: list[SseEvent] = []
    for c in chunks:
        out += p.feed(c)
    done, left = p.finish()
    return out + done, left, p.comments


def test_sse_events_keep_their_payload_bytes() -> None:
    events, left, comments = parse_all([STREAM])
    assert [e.data for e in events] == [b'{"a":1}', b'{"b":\n2}', b" x"]
    assert events[1].id == "7" and events[1].event == "message" and events[2].retry == 3000
    assert events[2].id == "7"  # the last event id carries over, as SSE says
    assert comments == 2 and left == b"data: tail-without-blank"


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_sse_chunking_never_changes_the_events(cuts: list[int]) -> None:
    """Every split of the stream (a CR at a chunk's end included) gives the same events."""
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert parse_all(chunks) == parse_all([STREAM])


def test_one_line_keeps_a_message_on_one_line() -> None:
    assert one_line(b'{"a": 1}') == b'{"a": 1}'
    assert one_line(b'{\r\n  "a":\n1\r}') == b'{   "a": 1 }'


def test_urls_and_headers() -> None:
    assert transport_of("wss://h/acp") == "ws" and transport_of("HTTP://h:1/acp") == "http"
    for bad in ("ftp://h/acp", "ws:///acp", "http://h:99999/acp", "h/acp"):
        with pytest.raises(EndpointError):
            transport_of(bad)
    assert shown_endpoint("wss://me:pw@h:9/acp?token=abc&x=1") == "wss://h:9/acp?token=[redacted]&x=1"
    assert parse_header("Authorization:  Bearer t ") == ("Authorization", "Bearer t")
    for bad in ("NoColon", ": v", "Bad Name: v", "X: a\r\nInjected: b"):
        with pytest.raises(EndpointError):
            parse_header(bad)
    got = recorded_headers(
        [(b"Set-Cookie", b"a=b"), ("X-Api-Key", "k"), ("Accept", "x"), ("X-Mine", "v")], frozenset({"x-mine"})
    )
    assert got == [["Set-Cookie", "[redacted]"], ["X-Api-Key", "[redacted]"], ["Accept", "x"], ["X-Mine", "[redacted]"]]
    assert parse_listen("[::1]:0") == ("::1", 0) and parse_listen(":80") == ("127.0.0.1", 80)
    with pytest.raises(EndpointError):
        parse_listen("host")


def test_session_header_names_sessions_the_connection_knows_or_attaches() -> None:
    r = SessionRouting()
    prompt = Outgoing(b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s1"}}')
    assert r.header_for(prompt) is None  # not seen yet: the SDK server would answer 404
    assert r.saw_incoming(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}') == "s1"
    assert r.saw_incoming(b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}') is None  # its stream is open
    assert r.header_for(prompt) == "s1"
    load = Outgoing(b'{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"s1"}}')
    assert r.header_for(load) == "s1"  # the TypeScript SDK's server refuses it (400) without the header
    other = Outgoing(b'{"jsonrpc":"2.0","id":4,"method":"session/resume","params":{"sessionId":"s9"}}')
    assert r.header_for(other) == "s9"  # attaching a session not seen yet: the RFD's resume flow sends it
    unseen = Outgoing(b'{"jsonrpc":"2.0","id":5,"method":"_x/ext","params":{"sessionId":"s9"}}')
    assert r.header_for(unseen) is None  # any other method: only sessions the connection knows
    r.saw_incoming(b'{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s1"}}')
    answer = Outgoing(b'{"jsonrpc":"2.0","id":0,"result":{}}')
    assert answer.is_response and r.header_for(answer) == "s1"  # the RFD: permission answers carry it
    assert r.header_for(answer) is None  # answered once


def check(guard: Guard, **headers: str) -> int | None:
    refusal = guard.check({k.lower(): v for k, v in headers.items()}, hmac.compare_digest)
    return refusal[0] if refusal else None


def test_the_guard_refuses_rebinding_foreign_origins_and_bad_tokens() -> None:
    g = Guard("127.0.0.1", 8765)
    assert check(g, Host="127.0.0.1:8765") is None and check(g, Host="localhost:8765") is None
    assert check(g, Host="localhost") is None and check(g, Host="[::1]:8765") is None
    assert check(g, Host="evil.example:8765") == 421 and check(g) == 421 and check(g, Host="localhost:9") == 421
    assert check(g, Host="localhost:8765", Origin="http://localhost:8765") is None
    for origin in ("http://evil.example", "http://localhost:3000", "null", "file://x", "http://[::1", "http://[x]"):
        assert check(g, Host="localhost:8765", Origin=origin) == 403, origin  # pure: a refusal, never a raise
    t = Guard("10.1.2.3", 80, token="s3cret")
    assert check(t, Host="10.1.2.3:80") == 401
    assert check(t, Host="10.1.2.3:80", Authorization="Bearer wrong") == 401
    assert check(t, Host="10.1.2.3:80", Authorization="Basic s3cret") == 401
    assert check(t, Host="10.1.2.3:80", Authorization="Bearer s3cret") is None
    assert check(t, Host="localhost:80", Authorization="Bearer s3cret") == 421
    w = Guard("0.0.0.0", 80, token="t", allow_hosts=("agents.example",))
    assert check(w, Host="agents.example", Authorization="Bearer t") is None
    assert check(w, Host="other.example", Authorization="Bearer t") == 421


def ev(
    i: int, event: str, side: str = "agent", method: str | None = "POST", status: int | None = 202, **d: object
) -> Event:
    connection = d.pop("connection", "c1")
    session = d.pop("session", None)
    return Event(i, event, side, method, status, connection, session, dict(d))  # type: ignore[arg-type]


JSON_CT = [["Content-Type", "application/json"]]
GOOD_INIT = ev(
    1, "http", status=200, rpc="initialize", sent=JSON_CT, headers=[["acp-connection-id", "c1"]], http="HTTP/2"
)


def rules_of(*events: Event) -> list[str]:
    return [f.rule for f in check_transport(list(events))]


def test_transport_rules_each_fire_on_their_case_only() -> None:
    ok_prompt = ev(2, "http", rpc="session/prompt", session="s1", sent=JSON_CT, http="HTTP/2")
    assert rules_of(GOOD_INIT, ok_prompt) == []
    cases = {
        "transport.initialize-status": [ev(1, "http", status=202, rpc="initialize", sent=JSON_CT, http="HTTP/2")],
        "transport.post-status": [GOOD_INIT, ev(2, "http", status=200, rpc="session/new", sent=JSON_CT, http="HTTP/2")],
        "transport.content-type": [
            GOOD_INIT,
            ev(2, "http", rpc="session/new", sent=[["Content-Type", "text/plain"]], http="HTTP/2"),
        ],
        "transport.session-header": [GOOD_INIT, ev(2, "http", rpc="session/prompt", sent=JSON_CT, http="HTTP/2")],
        "transport.answer-session-header": [
            GOOD_INIT,
            ev(2, "http", rpc=None, answer=True, sent=JSON_CT, http="HTTP/2"),
        ],
        "transport.unknown-connection": [
            GOOD_INIT,
            ev(2, "http", rpc="session/new", connection="zz", sent=JSON_CT, http="HTTP/2"),
        ],
        "transport.accept": [
            GOOD_INIT,
            ev(2, "sse_open", method="GET", status=200, sent=[["Accept", "application/json"]]),
        ],
        "transport.session-stream": [
            GOOD_INIT,
            ev(2, "sse_open", method="GET", status=200, session="s1", sent=[["Accept", "text/event-stream"]]),
        ],
        "transport.http2": [
            ev(
                1,
                "http",
                status=200,
                rpc="initialize",
                sent=JSON_CT,
                headers=[["acp-connection-id", "c1"]],
                http="HTTP/1.1",
            )
        ],
        "transport.ws-close": [ev(1, "ws_open", method="GET", status=101), ev(2, "ws_close", method=None, status=1006)],
        "transport.relay-answer": [
            GOOD_INIT,
            ev(2, "relay_answer", side="client", method=None, status=400, rpc="session/prompt", id=2, reason="x"),
        ],
    }
    # every rule has its case (split-order is soften_split_order's, tested below)
    assert set(cases) == set(TRANSPORT_RULES) - {"transport.split-order"}
    for rule, events in cases.items():
        assert rules_of(*events) == [rule], rule


def test_order_findings_are_warnings_only_when_two_sse_streams_carried_the_session() -> None:
    """Both SDK servers answer session/load on the connection's stream and replay on the session's: the
    recording cannot tell their order, so the order rules must not blame a clean agent with an error."""
    order = Finding(30, "s1", "lifecycle.replay-after-answer", ERROR, "a user_message_chunk after the answer", "x")
    other = Finding(31, "s1", "protocol.unanswered", ERROR, "never answered", "y")
    one_stream = [GOOD_INIT, ev(2, "sse_open", method="GET", status=200, sent=[["Accept", "text/event-stream"]])]
    assert soften_split_order([order, other], one_stream) == [order, other]
    split = [*one_stream, ev(3, "sse_open", method="GET", status=200, session="s1")]
    softened, kept, said = soften_split_order([order, other], split)
    assert (softened.rule, softened.severity, kept) == ("lifecycle.replay-after-answer", WARNING, other)
    assert "order is not defined" in softened.message
    assert (said.rule, said.severity, said.frame) == ("transport.split-order", WARNING, None)
    assert "transport event 3" in said.message and "1 message-order finding" in said.message
    assert soften_split_order([other], split) == [other]  # nothing changed: nothing to say
    client_side = [ev(3, "sse_open", side="client", method="GET", status=200, session="s1")]
    assert soften_split_order([order], client_side) == [order]  # our server sends all on one stream


def test_findings_about_a_frame_the_relay_made_are_not_the_agents() -> None:
    """run --connect answers a request the remote refused: what check finds in that answer is info, said to
    be the relay's; findings about other frames are untouched."""
    at_relay = Finding(6, "s1", "rpc.error-message", ERROR, "an error message of two lines", "x")
    elsewhere = Finding(7, "s1", "protocol.unanswered", ERROR, "never answered", "y")
    made, kept = relay_made([at_relay, elsewhere], [6])
    assert (made.severity, kept) == (INFO, elsewhere) and made.message.endswith("made by acp-relay, not the agent)")
    assert relay_made([at_relay], []) == [at_relay]


def test_a_server_that_refuses_correctly_is_not_blamed() -> None:
    """The client broke the rule; the server answered as the RFD says: one finding (the client's), and
    none for an unknown connection answered 404 or a clean WebSocket close."""
    no_ct = ev(2, "http", status=415, rpc="session/new", sent=[], http="HTTP/2")
    assert [f.message.endswith("(415 expected)") for f in check_transport([GOOD_INIT, no_ct])] == [False]
    assert (
        rules_of(GOOD_INIT, ev(3, "http", status=404, rpc="session/new", connection="zz", sent=JSON_CT, http="HTTP/2"))
        == []
    )
    assert rules_of(ev(1, "ws_open", method="GET", status=101), ev(2, "ws_close", method=None, status=1000)) == []
    missing = ev(2, "http", status=400, rpc="session/cancel", sent=JSON_CT, http="HTTP/2")
    assert [f.message.endswith("(400 expected)") for f in check_transport([GOOD_INIT, missing])] == [False]


CONTINUATION, TEXT, BINARY, CLOSE, PING = 0x0, 0x1, 0x2, 0x8, 0x9


def frame(opcode: int, payload: bytes, fin: bool = True, key: bytes | None = None) -> bytes:
    """One frame, written here by hand (RFC 6455 section 5.2) so that it can break the rules too."""
    n = len(payload)
    size = bytes([n]) if n < 126 else b"\x7e" + n.to_bytes(2, "big") if n < 65536 else b"\x7f" + n.to_bytes(8, "big")
    if key is not None:
        size = bytes([size[0] | 0x80]) + size[1:]
        payload = key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return bytes([(0x80 if fin else 0) | opcode]) + size + payload


def close_payload(code: int, reason: str = "") -> bytes:
    return code.to_bytes(2, "big") + reason.encode()


WS_STREAM = (
    frame(TEXT, b'{"a":1}')
    + frame(TEXT, b'{"b":', fin=False)
    + frame(PING, b"p")  # a control frame between fragments
    + frame(CONTINUATION, "é\u2713}".encode())
    + frame(BINARY, b"\x00\x01")
    + frame(TEXT, b"x" * 70_000)  # a 64-bit length
    + frame(TEXT, b"y" * 300)  # a 16-bit length
    + frame(CLOSE, close_payload(1000, "bye"))
)


class _Tap:
    """The Tap surface, keeping the transport events (no frame reaches it from the link)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def stamp(self) -> tuple[float, float]:
        return 0.0, 0.0

    def put(self, stream: str, chunk: bytes, ts: float | None = None, mono: float | None = None) -> None:
        raise AssertionError("the link records no frame itself")

    def eof(self, stream: str) -> None:
        raise AssertionError("the link records no frame itself")

    def event(self, fields: dict[str, Any]) -> None:
        self.events.append(fields)


def sent_frames(data: bytes) -> list[tuple[Opcode, bytes]]:
    """The client's frames as a server reads them (websockets' server side checks their masks)."""
    server = Protocol(Side.SERVER)
    server.receive_data(data)
    assert server.parser_exc is None
    return [(f.opcode, bytes(f.data)) for f in server.events_received() if isinstance(f, Frame)]


@given(st.lists(st.integers(min_value=0, max_value=len(WS_STREAM)), max_size=10))
def test_ws_frames_any_chunking_same_messages(cuts: list[int]) -> None:
    """The link's receive path, bytes in (however the socket cut them): the same messages, the binary one
    dropped and said to be, the ping answered, the close taken and answered with its code."""
    points = sorted(set(cuts))
    tap = _Tap()
    link = WsAgentLink("ws://127.0.0.1:1/acp", [], tap)
    out = b""
    for a, b in zip([0, *points], [*points, len(WS_STREAM)], strict=True):
        if a < b:
            out += b"".join(link._absorb(WS_STREAM[a:b]))
    assert link._handed_out() == [b'{"a":1}', '{"b":é\u2713}'.encode(), b"x" * 70_000, b"y" * 300]
    assert tap.events == [{"event": "dropped", "side": "agent", "reason": "binary frame", "bytes": 2}]
    assert (link.close_code, link.close_reason, link.close_sent, link.broken) == (1000, "bye", True, None)
    assert sent_frames(out) == [(Opcode.PONG, b"p"), (Opcode.CLOSE, close_payload(1000, "bye"))]


def test_ws_frames_refuse_what_rfc_6455_forbids() -> None:
    """Each breach fails the connection: our close with its code, nothing of it handed out, the reason kept."""
    cases = [
        (bytes([0xC1, 0x00]), 1002),  # RSV1 without an extension
        (frame(TEXT, b"hi", key=b"\x01\x02\x03\x04"), 1002),  # a client must not get masked frames
        (frame(CONTINUATION, b"x"), 1002),  # nothing to continue
        (frame(TEXT, b"a", fin=False) + frame(TEXT, b"b"), 1002),  # a new message inside a fragmented one
        (frame(PING, b"x" * 126), 1002),  # a long control frame
        (bytes([0x09, 0x00]), 1002),  # a fragmented control frame
        (bytes([0x83, 0x00]), 1002),  # an unknown data opcode
        (frame(TEXT, b"\xff"), 1007),  # text that is not UTF-8
        (frame(TEXT, b"z" * 2000), 1009),  # over the limit
    ]
    for data, code in cases:
        link = WsAgentLink("ws://127.0.0.1:1/acp", [], _Tap())
        link.ws = Protocol(Side.CLIENT, max_size=1000)
        out = b"".join(link._absorb(data))
        assert link._handed_out() == [], data[:4]
        assert sent_frames(out) == [(Opcode.CLOSE, code.to_bytes(2, "big") + sent_frames(out)[0][1][2:])], data[:4]
        assert link.close_sent and str(link.broken).startswith("the server broke the WebSocket protocol"), data[:4]
