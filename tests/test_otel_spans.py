"""protocol/spans.py over the fixture recordings and scripted sessions: names, parents, attributes, times."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fixtures.recordings import CHILD, S1, S2, build
from scripted_db import build_db, req, res, text, upd, v2_head

from acp_relay.otel.command import ExportOptions, view_spans
from acp_relay.protocol.redact import Policy
from acp_relay.protocol.session_state import Event
from acp_relay.protocol.spans import SEMCONV_VERSION, SpanRecord, session_spans, to_ns, traceparent
from acp_relay.store.queries import open_db, resolve_view


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("otel") / "fixtures.db")


def spans_of(db: Path, sid: str, **options: Any) -> tuple[list[SpanRecord], dict[str, Any]]:
    conn = open_db(db)
    try:
        return view_spans(conn, resolve_view(conn, sid), ExportOptions(**options))
    finally:
        conn.close()


def frame_ts(db: Path, sql: str, *args: Any) -> list[float]:
    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute(f"SELECT ts FROM frames WHERE {sql} ORDER BY id", args)]
    finally:
        conn.close()


def by_name(spans: list[SpanRecord], name: str) -> list[SpanRecord]:
    return [s for s in spans if s.name == name]


def tree(spans: list[SpanRecord]) -> list[tuple[int, str]]:
    """(depth, name) in start order, children after their parent."""
    ids = {s.span_id: s for s in spans}

    def depth(s: SpanRecord) -> int:
        return 0 if s.parent_id not in ids else 1 + depth(ids[s.parent_id])

    return [(depth(s), s.name) for s in sorted(spans, key=lambda s: (s.start_ns, depth(s)))]


def test_v1_session_tree_names_parents_and_times(fixture_db: Path) -> None:
    spans, resource = spans_of(fixture_db, S1)
    assert tree(spans) == [
        (0, f"session {S1}"),
        (1, "invoke_agent fixture-agent"),
        (2, "execute_tool read"),
        (3, "session/request_permission"),
        (3, "fs/read_text_file"),
        (1, "session/set_mode"),
        (1, "invoke_agent fixture-agent"),
        (2, "terminal/create"),
        (2, "session/request_permission"),
    ]
    assert resource == {
        "service.name": "fixture-agent",
        "service.version": "1.2.3",
        "acp.agent.name": "fixture-agent",
        "acp.agent.version": "1.2.3",
        "acp.client.name": "zed",
        "acp.client.version": "0.200.0",
    }
    assert {s.trace_id for s in spans} == {spans[-1].trace_id} and spans[-1].role == "session"  # root last
    assert all(s.attributes["gen_ai.conversation.id"] == S1 for s in spans)
    # times are the frames' own: the prompts, their responses, the tool's first report and its completion
    prompts = frame_ts(fixture_db, "method = 'session/prompt' AND kind = 'request' AND session_id = ?", S1)
    answers = frame_ts(fixture_db, "method = 'session/prompt' AND kind = 'response' AND session_id = ?", S1)
    turns = by_name(spans, "invoke_agent fixture-agent")
    assert [(t.start_ns, t.end_ns) for t in turns] == [
        (to_ns(a), to_ns(b)) for a, b in zip(prompts, answers, strict=True)
    ]
    tool = by_name(spans, "execute_tool read")[0]
    updates = frame_ts(fixture_db, "tool_call_id = 'call_1' AND update_kind IS NOT NULL")
    assert (tool.start_ns, tool.end_ns) == (to_ns(updates[0]), to_ns(updates[-1]))
    root = spans[-1]
    new = frame_ts(fixture_db, "method = 'session/new' AND kind = 'request'")
    assert root.start_ns == to_ns(new[0]) and root.end_ns == max(s.end_ns for s in spans)


def test_v1_turn_tool_and_request_attributes(fixture_db: Path) -> None:
    spans, _ = spans_of(fixture_db, S1)
    first, second = by_name(spans, "invoke_agent fixture-agent")
    assert first.kind == "client" and first.status == "unset"
    assert {k: first.attributes[k] for k in ("gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.agent.version")} == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "fixture-agent",
        "gen_ai.agent.version": "1.2.3",
    }
    assert first.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert first.attributes["acp.usage.context.used"] == 12000 and first.attributes["acp.usage.context.size"] == 200000
    assert [e.name for e in first.events] == ["acp.first_agent_message", "acp.notice", "acp.usage_update"]
    # the cancelled turn: its stop reason, the cancel as an event at the cancel frame's time
    assert second.attributes["gen_ai.response.finish_reasons"] == ["cancelled"]
    cancel = frame_ts(fixture_db, "method = 'session/cancel'")[0]
    assert [e.time_ns for e in second.events if e.name == "acp.cancel_requested"] == [to_ns(cancel)]
    tool = by_name(spans, "execute_tool read")[0]
    assert tool.parent_id == first.span_id and tool.kind == "internal"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1" and tool.attributes["acp.tool_call.kind"] == "read"
    assert [e.attributes["acp.tool_call.status"] for e in tool.events] == ["pending", "completed"]
    permission, unanswered = by_name(spans, "session/request_permission")
    assert permission.parent_id == tool.span_id and permission.kind == "server"  # the wait, under its tool
    assert permission.attributes["acp.permission.outcome"] == "selected"
    assert permission.attributes["acp.permission.option_id"] == "allow-once"
    assert unanswered.parent_id == second.span_id and unanswered.status == "error"
    assert unanswered.attributes["error.type"] == "unanswered"
    read = by_name(spans, "fs/read_text_file")[0]
    assert read.parent_id == tool.span_id and read.attributes["rpc.method"] == "fs/read_text_file"
    failed = by_name(spans, "session/set_mode")[0]
    assert failed.status == "error" and failed.attributes["error.type"] == "-32601"
    assert failed.attributes["rpc.jsonrpc.error_message"] == "Method not found"


def test_v2_session_idle_ends_the_turn_and_compaction_subagent_are_events(fixture_db: Path) -> None:
    spans, resource = spans_of(fixture_db, S2)
    assert tree(spans) == [
        (0, f"session {S2}"),
        (1, "invoke_agent draft-agent"),
        (2, "execute_tool execute"),
        (2, "session/list"),
    ]
    assert resource["service.name"] == "draft-agent" and resource["acp.client.version"] == "1.0.0"
    turn = by_name(spans, "invoke_agent draft-agent")[0]
    prompt = frame_ts(fixture_db, "method = 'session/prompt' AND kind = 'request' AND session_id = ?", S2)[0]
    idle = frame_ts(
        fixture_db, "update_kind = 'state_update' AND CAST(raw AS TEXT) LIKE '%idle%' AND session_id = ?", S2
    )[0]
    assert (turn.start_ns, turn.end_ns) == (to_ns(prompt), to_ns(idle))  # v2: to the idle, not the acceptance
    names = [e.name for e in turn.events]
    assert names[0] == "acp.prompt_accepted" and names.count("acp.compaction") == 2
    assert [e.attributes for e in turn.events if e.name == "acp.subagent"] == [{"acp.subagent.session_id": CHILD}]
    assert [e.attributes["acp.compaction.status"] for e in turn.events if e.name == "acp.compaction"] == [
        "in_progress",
        "completed",
    ]
    root = spans[-1]
    assert root.attributes["acp.protocol.version"] == 2 and root.attributes["acp.session.origin"] == "session/new"
    batch_error = by_name(spans, "session/list")[0]  # an error answer inside a batch
    assert batch_error.status == "error" and batch_error.attributes["error.type"] == "-32601"


def test_no_message_text_unless_content_then_as_the_conventions_shape_it(fixture_db: Path) -> None:
    plain = repr(spans_of(fixture_db, S1))
    for secret in ("Fix the failing test", "I'll read", "Read parser.py", "parser.py", "pytest", "Parser fix"):
        assert secret not in plain
    spans, _ = spans_of(fixture_db, S1, content=True)
    turn = by_name(spans, "invoke_agent fixture-agent")[0]
    assert turn.attributes["gen_ai.input.messages"] == (
        '[{"role":"user","parts":[{"type":"text","content":"Fix the failing test in parser.py"}]}]'
    )
    output = turn.attributes["gen_ai.output.messages"]
    assert '"type":"reasoning","content":"The parser splits on commas."' in output
    assert "I'll read the file first." in output and '"finish_reason":"end_turn"' in output  # chunks joined
    tool = by_name(spans, "execute_tool read")[0]
    assert tool.attributes["acp.tool_call.title"] == "Read parser.py"
    assert "split(',')" in tool.attributes["gen_ai.tool.call.result"]
    assert spans[-1].attributes["acp.session.title"] == "Parser fix"


def test_ids_are_derived_from_the_recording(fixture_db: Path, tmp_path: Path) -> None:
    """Exporting twice sends the same ids (backends deduplicate); a copy of the database keeps them."""
    a, _ = spans_of(fixture_db, S1)
    b, _ = spans_of(fixture_db, S1)
    assert [(s.trace_id, s.span_id, s.parent_id) for s in a] == [(s.trace_id, s.span_id, s.parent_id) for s in b]
    assert len({s.span_id for s in a}) == len(a)
    other, _ = spans_of(fixture_db, S2)
    assert other[-1].trace_id != a[-1].trace_id


def events(script: list[tuple[float, str, Any]]) -> list[Event]:
    return [Event(i, 1000.0 + t, d, m) for i, (t, d, m) in enumerate(script)]


TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_a_traceparent_joins_that_trace_and_its_children_follow() -> None:
    script = v2_head("s") + [
        (
            1.0,
            "c2a",
            req(2, "session/prompt", {"sessionId": "s", "prompt": [text("hi")], "_meta": {"traceparent": TP}}),
        ),
        (1.1, "a2c", res(2, {})),
        (1.2, "a2c", upd("s", sessionUpdate="tool_call_update", toolCallId="t1", kind="edit", status="in_progress")),
        (1.3, "a2c", upd("s", sessionUpdate="tool_call_update", toolCallId="t1", status="failed")),
        (1.4, "a2c", upd("s", sessionUpdate="state_update", state="idle", stopReason="end_turn")),
    ]
    spans, _ = session_spans(events(script), "s", 2)
    turn, tool, root = (by_name(spans, n)[0] for n in ("invoke_agent a", "execute_tool edit", "session s"))
    assert (turn.trace_id, turn.parent_id, turn.remote_parent) == (
        0x4BF92F3577B34DA6A3CE929D0E0E4736,
        0xF067AA0BA902B7,
        True,
    )
    assert turn.links == [(root.trace_id, root.span_id)]  # still linked to the session it belongs to
    assert tool.trace_id == turn.trace_id and tool.parent_id == turn.span_id
    assert tool.status == "error" and tool.attributes["error.type"] == "tool_call_failed"
    assert root.trace_id != turn.trace_id and root.parent_id is None


@pytest.mark.parametrize(
    "value",
    [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "garbage",
        12,
        None,
    ],
)
def test_a_malformed_traceparent_is_ignored(value: Any) -> None:
    assert traceparent({"params": {"_meta": {"traceparent": value}}}) is None
    assert traceparent({"params": {"_meta": {"traceparent": TP}}}) is not None


def test_token_usage_becomes_gen_ai_usage_and_a_prompt_error_marks_the_turn() -> None:
    usage = {"inputTokens": 120, "outputTokens": 30, "totalTokens": 150, "cachedReadTokens": 100, "thoughtTokens": 9}
    script: list[tuple[float, str, Any]] = [
        (0.0, "c2a", req(0, "initialize", {"protocolVersion": 1, "clientInfo": {"name": "ed"}})),
        (0.1, "a2c", res(0, {"protocolVersion": 1, "agentInfo": {"name": "ag", "version": "9"}})),
        (0.2, "c2a", req(1, "session/new", {"cwd": "/w", "mcpServers": []})),
        (0.3, "a2c", res(1, {"sessionId": "s"})),
        (1.0, "c2a", req(2, "session/prompt", {"sessionId": "s", "prompt": [text("a")]})),
        (2.0, "a2c", res(2, {"stopReason": "end_turn", "usage": usage})),
        (3.0, "c2a", req(3, "session/prompt", {"sessionId": "s", "prompt": [text("b")]})),
        (3.5, "a2c", {"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "model overloaded"}}),
    ]
    spans, resource = session_spans(events(script), "s", 1)
    ok, failed = by_name(spans, "invoke_agent ag")
    assert ok.attributes["gen_ai.usage.input_tokens"] == 120 and ok.attributes["gen_ai.usage.output_tokens"] == 30
    assert ok.attributes["gen_ai.usage.cache_read.input_tokens"] == 100
    assert ok.attributes["gen_ai.usage.reasoning.output_tokens"] == 9 and ok.attributes["acp.usage.total_tokens"] == 150
    assert "gen_ai.usage.cache_creation.input_tokens" not in ok.attributes
    assert failed.status == "error" and failed.attributes["error.type"] == "-32603"
    assert failed.status_message == "model overloaded" and failed.end_ns == to_ns(1003.5)
    assert resource["acp.client.name"] == "ed" and "acp.client.version" not in resource


def test_fork_is_a_trace_of_its_own_with_its_origin(tmp_path: Path) -> None:
    db = build_db(
        tmp_path / "fork.db",
        v2_head("sA")
        + [
            (1.0, "c2a", req(2, "session/prompt", {"sessionId": "sA", "prompt": [text("one")]})),
            (1.1, "a2c", res(2, {})),
            (1.2, "a2c", upd("sA", sessionUpdate="state_update", state="idle", stopReason="end_turn")),
            (2.0, "c2a", req(3, "session/fork", {"sessionId": "sA", "cwd": "/w", "mcpServers": []})),
            (2.1, "a2c", res(3, {"sessionId": "sF"})),
            (2.2, "c2a", req(4, "session/prompt", {"sessionId": "sF", "prompt": [text("two")]})),
            (2.3, "a2c", res(4, {})),
            (2.4, "a2c", upd("sF", sessionUpdate="state_update", state="idle", stopReason="max_tokens")),
        ],
    )
    source, _ = spans_of(db, "sA")
    fork, _ = spans_of(db, "sF")
    assert [s.name for s in fork] == ["invoke_agent a", "session sF"]
    assert fork[-1].attributes["acp.session.origin"] == "session/fork"
    assert fork[-1].attributes["acp.session.parent_id"] == "sA"
    assert fork[0].attributes["gen_ai.response.finish_reasons"] == ["max_tokens"]
    assert fork[-1].trace_id != source[-1].trace_id
    assert len(by_name(source, "invoke_agent a")) == 1  # the fork's turn is not the source's


def test_check_findings_become_events_of_the_span_at_their_frame(fixture_db: Path) -> None:
    spans, _ = spans_of(fixture_db, S1, check=True)
    findings = [
        (s.name, e.attributes["acp.check.rule"]) for s in spans for e in s.events if e.name == "acp.check.finding"
    ]
    assert findings, "the v1 fixture breaks rules (an unanswered permission request, a CRLF line)"
    assert all(name and rule for name, rule in findings)
    assert not any(e.name == "acp.check.finding" for s in spans_of(fixture_db, S1)[0] for e in s.events)


PLANTED = ["sk-PLANTED-env", "ghp_PLANTEDheader", "PLANTED-meta-token", "PLANTED-auth-secret", "swordfish-PLANTED"]


def test_no_redacted_value_reaches_an_attribute_or_event(tmp_path: Path) -> None:
    """The security tests' planted secrets (mcpServers env and headers, _meta credentials, authenticate
    params) and a --redact regex: none of them in any span, with --content on."""
    servers = [
        {"name": "gh", "command": "x", "args": [], "env": [{"name": "T", "value": PLANTED[0]}]},
        {"type": "http", "name": "h", "url": "https://h", "headers": [{"name": "Authorization", "value": PLANTED[1]}]},
    ]
    meta = {"_meta": {"gateway": {"api_key": PLANTED[2]}}}
    script: list[tuple[float, str, Any]] = [
        (0.0, "c2a", req(0, "initialize", {"protocolVersion": 1, "clientInfo": {"name": "ed"}, **meta})),
        (0.1, "a2c", res(0, {"protocolVersion": 1, "agentInfo": {"name": "ag"}})),
        (0.15, "c2a", req(9, "authenticate", {"methodId": "key", "apiKey": PLANTED[3]})),
        (0.16, "a2c", {"jsonrpc": "2.0", "id": 9, "error": {"code": -32000, "message": "no"}}),
        (0.2, "c2a", req(1, "session/new", {"cwd": "/w", "mcpServers": servers})),
        (0.3, "a2c", res(1, {"sessionId": "s"})),
        (1.0, "c2a", req(2, "session/prompt", {"sessionId": "s", "prompt": [text(f"say {PLANTED[4]}")], **meta})),
        (1.1, "a2c", upd("s", sessionUpdate="tool_call", toolCallId="t", title=PLANTED[4], rawInput=meta)),
        (1.2, "a2c", req(5, "terminal/create", {"sessionId": "s", "command": "env", **meta})),
        (1.3, "c2a", res(5, {"terminalId": "x", **meta})),
        (1.4, "a2c", upd("s", sessionUpdate="agent_message_chunk", content=text(f"ok {PLANTED[4]}"))),
        (2.0, "a2c", res(2, {"stopReason": "end_turn"})),
    ]
    policy = Policy.from_options(["re:swordfish-\\w+"], False)
    for content in (False, True):
        spans, resource = session_spans(events(script), "s", 1, content=content, policy=policy)
        text_of = repr((spans, resource))
        assert [p for p in PLANTED if p in text_of] == [], content
    spans, _ = session_spans(events(script), "s", 1, content=True, policy=policy)
    assert "[redacted]" in repr(spans)  # the text is there, its secret replaced
    assert SEMCONV_VERSION == "1.41.0"


def test_otlp_json_written_from_the_records_is_what_the_sdk_encoder_makes(fixture_db: Path) -> None:
    """--file writes OTLP JSON straight from the records (three times faster); the SDK's protobuf
    encoder and protobuf's JSON mapping must make the same object of the same spans."""
    import orjson

    from acp_relay.otel import sdk

    script = v2_head("s") + [
        (
            1.0,
            "c2a",
            req(2, "session/prompt", {"sessionId": "s", "prompt": [text("hi")], "_meta": {"traceparent": TP}}),
        ),
        (1.1, "a2c", res(2, {})),
        (
            1.2,
            "a2c",
            upd("s", sessionUpdate="usage_update", used=10, size=100, cost={"amount": 0.5, "currency": "EUR"}),
        ),
        (1.3, "a2c", upd("s", sessionUpdate="state_update", state="idle", stopReason="end_turn")),
        (2.0, "c2a", req(3, "session/prompt", {"sessionId": "s", "prompt": [text("never answered")]})),
        (2.1, "a2c", upd("s", sessionUpdate="usage_update", used=0, size=100)),
    ]
    cases = [spans_of(fixture_db, S1, content=True, check=True), spans_of(fixture_db, S2, content=True)]
    cases.append(session_spans(events(script), "s", 2, content=True))
    for spans, resource in cases:
        ours = orjson.loads(sdk.traces_json(spans, resource))
        reference = orjson.loads(sdk.traces_json_sdk(sdk.readable_spans(spans, resource)))
        assert ours == reference
    assert any(s.links and s.remote_parent for s in cases[-1][0])
    assert any(s.attributes.get("acp.turn.ended") is False for s in cases[-1][0])  # a bool, and a 0 below
    assert any(s.attributes.get("acp.usage.context.used") == 0 for s in cases[-1][0])


def test_check_findings_in_spans_are_checks_own_verdict(tmp_path: Path) -> None:
    """otel --check reads check's verdict (protocol/check/verdict.py), so frames the relay stored out of wire
    order (judged in the order they crossed it) raise no initialize-first false alarm there either, and the
    findings at the session's frames are those `check` prints (issue 30 item 18's class)."""
    from check_helpers import record
    from test_check_false_alarms import stored_out_of_order

    from acp_relay.check.command import compute as check_compute

    db = record(stored_out_of_order(), tmp_path / "r.db")
    conn = open_db(db)
    try:
        checked = {(f.frame, f.rule) for f in check_compute(conn, "sess-1").findings if f.frame is not None}
    finally:
        conn.close()
    spans, _ = spans_of(db, "sess-1", check=True)  # its session/new was stored before the initialize answer
    said = {e.attributes["acp.check.rule"] for s in spans for e in s.events if e.name == "acp.check.finding"}
    assert "protocol.initialize-first" not in said
    assert said == {rule for _frame, rule in checked}


# (ACP Usage, gen_ai.usage.input_tokens): ACP's token types are disjoint (its totalTokens is "the sum of all
# token types"), so the conventions' input count adds the cache reads and writes to inputTokens, unless the
# agent's own totalTokens shows its inputTokens already holds them (OpenAI's way). Issue 30 item 19.
_INPUT_CASES: dict[str, tuple[dict[str, Any], int | None]] = {
    "zed-claude-disjoint": ({"inputTokens": 2614, "cachedReadTokens": 16000, "cachedWriteTokens": 282,
                             "outputTokens": 500, "totalTokens": 19396}, 18896),
    "no-total": ({"inputTokens": 10, "cachedReadTokens": 5, "outputTokens": 1}, 15),
    "writes-only": ({"inputTokens": 7, "cachedWriteTokens": 40, "outputTokens": 3, "totalTokens": 50}, 47),
    "no-cache": ({"inputTokens": 10, "outputTokens": 2, "totalTokens": 12, "cachedReadTokens": None}, 10),
    "disjoint-with-thought": ({"inputTokens": 20, "cachedReadTokens": 100, "cachedWriteTokens": 5, "outputTokens": 30,
                               "thoughtTokens": 9, "totalTokens": 164}, 125),
    "inclusive-thought-apart": ({"inputTokens": 120, "cachedReadTokens": 100, "outputTokens": 30, "thoughtTokens": 9,
                                 "totalTokens": 159}, 120),
    "total-says-neither": ({"inputTokens": 20, "cachedReadTokens": 100, "outputTokens": 30, "totalTokens": 999}, 120),
    "junk": ({"inputTokens": 4, "cachedReadTokens": True, "cachedWriteTokens": "9", "outputTokens": 1}, 4),
    "no-input": ({"cachedReadTokens": 100, "outputTokens": 1, "totalTokens": 101}, None),
}  # fmt: skip


@pytest.mark.parametrize("case", _INPUT_CASES)
def test_input_tokens_count_the_cached_input_as_the_conventions_do(case: str) -> None:
    usage, expected = _INPUT_CASES[case]
    script: list[tuple[float, str, Any]] = [
        (0.0, "c2a", req(0, "initialize", {"protocolVersion": 1, "clientInfo": {"name": "ed"}})),
        (0.1, "a2c", res(0, {"protocolVersion": 1, "agentInfo": {"name": "ag", "version": "9"}})),
        (0.2, "c2a", req(1, "session/new", {"cwd": "/w", "mcpServers": []})),
        (0.3, "a2c", res(1, {"sessionId": "s"})),
        (1.0, "c2a", req(2, "session/prompt", {"sessionId": "s", "prompt": [text("a")]})),
        (2.0, "a2c", res(2, {"stopReason": "end_turn", "usage": usage})),
    ]
    [turn] = by_name(session_spans(events(script), "s", 1)[0], "invoke_agent ag")
    attrs = turn.attributes
    assert attrs.get("gen_ai.usage.input_tokens") == expected
    assert attrs.get("acp.usage.input_tokens") == (usage.get("inputTokens") if expected is not None else None)
    read, write = usage.get("cachedReadTokens"), usage.get("cachedWriteTokens")
    assert attrs.get("gen_ai.usage.cache_read.input_tokens") == (read if type(read) is int else None)
    assert attrs.get("gen_ai.usage.cache_creation.input_tokens") == (write if type(write) is int else None)
